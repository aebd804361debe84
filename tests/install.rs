//! The plugins carried in the binary, as a `cargo install` user has them:
//! gatehost installed into a temporary root (`cargo install --locked
//! --debug --path host --features test-hooks --root TMP --target-dir
//! <this build's target>`, which reuses the dev build: with the test hooks,
//! as the test build has them, else cargo would compile gatehost again and
//! relink the `target/debug/gatehost` the whole-program tests run next;
//! scripts/test.sh checks the build without them), then run from a directory with no checkout
//! beside it, with a configuration that names no plugin directory, over a
//! workspace that is a fresh git repository. Named gates (`forbid-patterns`,
//! `diff-budget`) must pass and fail as their configurations say, and
//! `plugin list` must show the four carried plugins, and `docs` the documents.
//!
//! A test binary of its own: cargo runs test binaries one after another,
//! so the install (which takes the target directory's lock and relinks
//! `target/debug/gatehost`) never runs beside the other whole-program
//! tests.

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The target directory this test was built in (`<target>/debug/gatehost`).
fn target_dir() -> PathBuf {
    let bin = Path::new(env!("CARGO_BIN_EXE_gatehost"));
    bin.parent()
        .and_then(Path::parent)
        .expect("the binary lies in <target>/<profile>/")
        .to_path_buf()
}

/// Installs gatehost into `root` (bin/gatehost).
fn install(root: &Path) -> PathBuf {
    let cargo = option_env!("CARGO").unwrap_or("cargo");
    let out = Command::new(cargo)
        .args(["install", "--locked", "--debug", "--quiet"])
        .args(["--features", "test-hooks", "--path"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")))
        .arg("--root")
        .arg(root)
        .arg("--target-dir")
        .arg(target_dir())
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_INSTALL_ROOT")
        .stdin(Stdio::null())
        .output()
        .expect("run cargo install");
    assert!(
        out.status.success(),
        "cargo install failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let bin = root.join("bin/gatehost");
    assert!(bin.is_file(), "no {}", bin.display());
    bin
}

/// A run of the installed binary from `cwd`, with nothing of the test's
/// environment but PATH, and HOME set to `home` (no user configuration).
fn run(bin: &Path, cwd: &Path, home: &Path, args: &[&str]) -> Output {
    Command::new(bin)
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .stdin(Stdio::null())
        .output()
        .expect("run the installed gatehost")
}

fn git(ws: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .current_dir(ws)
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `check --json` of one gate, and its outcome and reason.
fn check(bin: &Path, dirs: &Dirs, gate: Value) -> (i32, String, String) {
    let gate_file = dirs.etc.join("gate.json");
    std::fs::write(&gate_file, gate.to_string()).expect("write the gate file");
    let out = run(
        bin,
        &dirs.cwd,
        &dirs.home,
        &[
            "check",
            "--json",
            "--config",
            &dirs.config.display().to_string(),
            "--workspace",
            &dirs.ws.display().to_string(),
            "--diff",
            &dirs.etc.join("change.diff").display().to_string(),
            &gate_file.display().to_string(),
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "not one JSON object ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (
        out.status.code().unwrap_or(-1),
        report["outcome"].as_str().unwrap_or_default().to_string(),
        report["reason"].as_str().unwrap_or_default().to_string(),
    )
}

struct Dirs {
    _tmp: tempfile::TempDir,
    cwd: PathBuf,
    home: PathBuf,
    etc: PathBuf,
    ws: PathBuf,
    config: PathBuf,
}

fn dirs() -> Dirs {
    let tmp = tempfile::tempdir().expect("tempdir");
    let [cwd, home, etc, ws] = ["cwd", "home", "etc", "ws"].map(|d| tmp.path().join(d));
    for d in [&cwd, &home, &etc, &ws] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    // No [wasm] plugin_dirs: the named plugins can only be the carried ones.
    let config = etc.join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[wasm]\ncache_dir = {:?}\npooling = false\n",
            tmp.path().join("cache").display().to_string()
        ),
    )
    .expect("write the configuration");
    Dirs {
        _tmp: tmp,
        cwd,
        home,
        etc,
        ws,
        config,
    }
}

#[test]
fn an_installed_gatehost_runs_its_carried_plugins_with_no_checkout() {
    let dirs = dirs();
    let root = tempfile::tempdir().expect("tempdir");
    let bin = install(root.path());

    // A workspace: one committed file, then a change to it and a new file.
    std::fs::write(dirs.ws.join("lib.rs"), "fn a() {}\n").expect("write");
    git(&dirs.ws, &["init", "-q"]);
    git(&dirs.ws, &["add", "."]);
    git(&dirs.ws, &["commit", "-q", "-m", "start"]);
    std::fs::write(dirs.ws.join("lib.rs"), "fn a() { dbg!(1); }\n").expect("write");
    std::fs::write(dirs.ws.join("new.rs"), "fn b() {}\n").expect("write");
    git(&dirs.ws, &["add", "."]);
    let diff = Command::new("git")
        .args(["diff", "--cached"])
        .current_dir(&dirs.ws)
        .output()
        .expect("git diff");
    std::fs::write(dirs.etc.join("change.diff"), &diff.stdout).expect("write the diff");

    let forbid = |pattern: &str| {
        json!({"wasm": {"plugin": "forbid-patterns", "config": {
            "scope": "all", "rules": [{"id": "r", "pattern": pattern}]}}})
    };
    let (code, outcome, reason) = check(&bin, &dirs, forbid("todo!\\("));
    assert_eq!((code, outcome.as_str()), (0, "pass"), "{reason}");
    let (code, outcome, reason) = check(&bin, &dirs, forbid("dbg!\\("));
    assert_eq!((code, outcome.as_str()), (1, "fail"), "{reason}");

    let budget = |max_files: u32| json!({"wasm": {"plugin": "diff-budget", "config": {"maxFiles": max_files, "maxLines": 100}}});
    let (code, outcome, reason) = check(&bin, &dirs, budget(2));
    assert_eq!((code, outcome.as_str()), (0, "pass"), "{reason}");
    let (code, outcome, reason) = check(&bin, &dirs, budget(1));
    assert_eq!((code, outcome.as_str()), (1, "fail"), "{reason}");

    // A carried plugin pinned to another digest is an error, never a pass.
    let mut pinned = budget(2);
    pinned["wasm"]["sha256"] = json!("0".repeat(64));
    let (code, outcome, reason) = check(&bin, &dirs, pinned);
    assert_eq!((code, outcome.as_str()), (2, "error"), "{reason}");
    assert!(reason.contains("sha256"), "{reason}");

    // An unknown name says what is carried and where to look.
    let (code, outcome, reason) = check(
        &bin,
        &dirs,
        json!({"wasm": {"plugin": "no-such-plugin", "config": {}}}),
    );
    assert_eq!((code, outcome.as_str()), (2, "error"), "{reason}");
    assert!(reason.contains("gatehost plugin list"), "{reason}");

    let config = dirs.config.display().to_string();
    let out = run(
        &bin,
        &dirs.cwd,
        &dirs.home,
        &["plugin", "list", "--json", "--config", &config],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listing: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let carried: Vec<&str> = listing["plugins"]
        .as_array()
        .expect("plugins")
        .iter()
        .filter(|p| p["from"] == "carried" && p["used"] == true)
        .map(|p| {
            assert_eq!(p["world"], "gate-plugin", "{p}");
            assert!(p["problem"].is_null(), "{p}");
            p["name"].as_str().unwrap_or_default()
        })
        .collect();
    assert_eq!(
        carried,
        ["forbid-patterns", "diff-budget", "style-review", "noop"],
        "{listing}"
    );
    let out = run(
        &bin,
        &dirs.cwd,
        &dirs.home,
        &["plugin", "list", "--long", "--config", &config],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("\"maxFiles\""),
        "diff-budget's config keys:\n{text}"
    );
    assert!(
        text.contains("addedLinesOnly"),
        "forbid-patterns' config keys:\n{text}"
    );
    // The documents its hints name are installed with it.
    let out = run(&bin, &dirs.cwd, &dirs.home, &["docs", "security"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        text.starts_with("# ") && text.contains("Landlock"),
        "gatehost docs security:\n{text}"
    );
    let out = run(&bin, &dirs.cwd, &dirs.home, &["docs"]);
    let text = String::from_utf8_lossy(&out.stdout);
    for topic in [
        "readme", "agents", "daemon", "security", "plugins", "mcp", "routines",
    ] {
        assert!(text.contains(topic), "gatehost docs lists {topic}:\n{text}");
    }
}
