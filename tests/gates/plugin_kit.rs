//! The plugin author's tools through the real binary: `gatehost plugin
//! new` from an installed copy of gatehost (outside the source tree), its
//! crate built offline and run as a gate; and `gatehost plugin run` on the
//! shipped plugins and the hostile one, with the verdict and the time,
//! fuel and memory the evaluation used against its bounds.
//! Plugins are built by `scripts/build-plugins.sh` (the test script runs it).

use crate::common;
use common::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;

const MIB: u64 = 1024 * 1024;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn plugin_file(name: &str) -> PathBuf {
    let file = repo()
        .join("plugins/target/wasm32-wasip2/release")
        .join(format!("{}.wasm", name.replace('-', "_")));
    assert!(
        file.is_file(),
        "{} is not built: run `bash scripts/build-plugins.sh` (scripts/test.sh does)",
        file.display()
    );
    file
}

fn sha256_of(path: &Path) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(
        std::fs::read(path).expect("read plugin"),
    ))
}

/// A host configuration whose compiled components go to the cache the
/// other WASM tests share (the hostile plugin compiles once).
fn host_config(s: &Scratch) -> PathBuf {
    let cache = repo().join("plugins/target/gatehost-test-cache");
    s.write(
        "host.toml",
        &format!("[wasm]\ncache_dir = \"{}\"\n", cache.display()),
    )
}

/// `gatehost plugin run --config HOST --workspace WS ARGS... PLUGIN`.
fn plugin_run(s: &Scratch, plugin: &Path, args: &[&str]) -> CliRun {
    let mut argv: Vec<String> = vec![
        "plugin".into(),
        "run".into(),
        "--config".into(),
        host_config(s).display().to_string(),
        "--workspace".into(),
        s.ws.display().to_string(),
    ];
    argv.extend(args.iter().map(|a| a.to_string()));
    argv.push(plugin.display().to_string());
    run_gatehost(&argv, &[])
}

/// Asserts what every measured report holds: fuel used above zero and
/// within its bound, memory in use above zero and within its bound, the
/// time within its bound; returns the usage object.
#[track_caller]
fn assert_measured(run: &CliRun, fuel_bound: u64, memory_bound: u64) -> Value {
    let usage = run.json()["usage"].clone();
    let fuel = usage["fuel"]["used"].as_u64().expect("fuel used");
    assert_eq!(usage["fuel"]["bound"], fuel_bound, "{usage}");
    assert!(fuel > 0 && fuel <= fuel_bound, "{usage}");
    let memory = usage["memory"]["usedBytes"].as_u64().expect("memory used");
    assert_eq!(usage["memory"]["boundBytes"], memory_bound, "{usage}");
    assert!(memory > 0 && memory <= memory_bound, "{usage}");
    let time = usage["time"]["usedMs"].as_f64().expect("time used");
    let bound = usage["time"]["boundMs"].as_f64().expect("time bound");
    assert!(time > 0.0 && time < bound, "{usage}");
    usage
}

#[test]
fn plugin_run_reports_the_verdict_and_what_the_evaluation_used() {
    let s = Scratch::new();
    let noop = plugin_file("noop");
    let run = plugin_run(&s, &noop, &["--json"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let out = run.json();
    // One object: the verdict's fields as `check` prints them, the plugin
    // file and what the evaluation used.
    let keys: Vec<&str> = out
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    let mut expected = vec![
        "durations",
        "gate",
        "outcome",
        "plugin",
        "reason",
        "stderr",
        "stdout",
        "timedOut",
        "usage",
    ];
    expected.sort();
    let mut keys = keys;
    keys.sort();
    assert_eq!(keys, expected, "{out}");
    assert_eq!(out["outcome"], "pass");
    assert_eq!(out["reason"], "noop: nothing to check");
    assert_eq!(out["gate"], "wasm: noop.wasm");
    assert_eq!(
        out["plugin"],
        json!({"file": std::fs::canonicalize(&noop).unwrap().display().to_string(), "sha256": sha256_of(&noop)})
    );
    // The host's defaults, as no bound was given.
    let usage = assert_measured(&run, 5_000_000_000, 128 * MIB);
    assert_eq!(usage["time"]["boundMs"], 5000.0);
    assert_eq!(usage["time"]["judgeMs"], 0.0);
    assert_eq!(usage["judgeCalls"], json!({"used": 0, "bound": 4}));

    // For people: the verdict line, then each use against its bound.
    let run = plugin_run(&s, &noop, &["--fuel", "20000000", "--memory-mib", "64"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let text = &run.stdout;
    assert_starts(text, "PASS  wasm: noop.wasm — noop: nothing to check");
    assert_has(text, &format!("(sha256 {})", sha256_of(&noop)));
    assert_has(text, "\ntime    ");
    assert!(text.contains(" of 5 s ("), "{text}");
    let fuel_line = text
        .lines()
        .find(|l| l.starts_with("fuel    "))
        .expect("a fuel line");
    assert!(
        fuel_line.contains(" of 20,000,000 (") && fuel_line.ends_with(" %)"),
        "{fuel_line}"
    );
    let memory_line = text
        .lines()
        .find(|l| l.starts_with("memory  "))
        .expect("a memory line");
    assert!(memory_line.contains(" MiB of 64 MiB ("), "{memory_line}");
}

#[test]
fn plugin_run_gives_forbid_patterns_the_diff_or_the_workspaces_change() {
    let s = Scratch::new();
    let plugin = plugin_file("forbid-patterns");
    let config = r#"{"scope": "changed", "rules": [{"id": "no-dbg", "pattern": "dbg!\\(", "message": "remove dbg!"}]}"#;
    s.write_ws("src/lib.rs", "fn a() {}\nfn b() { dbg!(1); }\n");
    let flagged = s.write(
        "flagged.diff",
        "diff --git a/src/lib.rs b/src/lib.rs\n--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1 +1,2 @@\n fn a() {}\n+fn b() { dbg!(1); }\n",
    );
    let run = plugin_run(
        &s,
        &plugin,
        &[
            "--json",
            "--plugin-config",
            config,
            "--diff",
            flagged.to_str().unwrap(),
        ],
    );
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.outcome(), "fail");
    assert_eq!(
        run.json()["findings"],
        json!([{"path": "src/lib.rs", "line": 2, "severity": "error", "message": "[no-dbg] remove dbg!"}])
    );
    assert_measured(&run, 5_000_000_000, 128 * MIB);
    // The same, for people: the finding is listed under the verdict.
    let run = plugin_run(
        &s,
        &plugin,
        &[
            "--plugin-config",
            config,
            "--diff",
            flagged.to_str().unwrap(),
        ],
    );
    assert_eq!(run.code, 1);
    assert!(run.stdout.starts_with("FAIL  wasm: forbid_patterns.wasm"));
    assert_has(
        &run.stdout,
        "      error   src/lib.rs:2: [no-dbg] remove dbg!\n",
    );
    // The plugin's config from a file; a change that adds nothing forbidden.
    let config_file = s.write("rules.json", config);
    s.write_ws("src/ok.rs", "fn c() {}\n");
    let clean = s.write(
        "clean.diff",
        "diff --git a/src/ok.rs b/src/ok.rs\nnew file mode 100644\n--- /dev/null\n+++ b/src/ok.rs\n@@ -0,0 +1 @@\n+fn c() {}\n",
    );
    let at_file = format!("@{}", config_file.display());
    let run = plugin_run(
        &s,
        &plugin,
        &[
            "--json",
            "--plugin-config",
            &at_file,
            "--diff",
            clean.to_str().unwrap(),
        ],
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.reason(), "no forbidden pattern in 1 file(s)");

    // Without --diff, a git workspace's change against HEAD is the change,
    // untracked files included.
    common::daemon::git_repo(&s.ws);
    s.write_ws("README", "hello\ndbg!(3)\n");
    s.write_ws("src/new.rs", "fn x() { dbg!(2); }\n");
    let run = plugin_run(&s, &plugin, &["--json", "--plugin-config", &at_file]);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let findings = run.json()["findings"].clone();
    let places: Vec<(String, u64)> = findings
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().to_string(),
                f["line"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        places,
        vec![
            ("README".to_string(), 2),
            ("src/lib.rs".to_string(), 2),
            ("src/new.rs".to_string(), 1),
        ],
        "{findings}"
    );
}

#[test]
fn plugin_run_reports_a_hostile_plugins_bounds_by_name() {
    let s = Scratch::new();
    let hostile = plugin_file("hostile");
    // `plugin run` of the hostile plugin in `mode` with `bound` (a flag and
    // its value), its report as JSON or as text.
    let bounded = |mode: &str, bound: [&str; 2], json: bool| {
        let config = format!(r#"{{"mode": "{mode}"}}"#);
        let mut args = vec!["--plugin-config", &config, bound[0], bound[1]];
        args.extend(json.then_some("--json"));
        plugin_run(&s, &hostile, &args)
    };
    // A tight fuel bound: an error naming fuel, with all of it used.
    let run = bounded("loop", ["--fuel", "10000000"], true);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.outcome(), "error");
    assert_eq!(
        run.reason(),
        "plugin 'hostile' ran out of fuel (its budget is 10000000 instructions)"
    );
    let usage = assert_measured(&run, 10_000_000, 128 * MIB);
    assert_eq!(usage["fuel"]["used"], 10_000_000);
    let text = bounded("loop", ["--fuel", "10000000"], false);
    assert_eq!(text.code, 2);
    assert!(
        text.stdout
            .contains("fuel    10,000,000 of 10,000,000 (100.00 %)\n"),
        "{}",
        text.stdout
    );
    // A tight memory bound: an error naming memory, with the memory in
    // use reported below the bound (the growth past it was refused).
    let run = bounded("memory", ["--memory-mib", "16"], true);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(
        run.reason(),
        "plugin 'hostile' exceeded its memory limit of 16 MiB"
    );
    let usage = assert_measured(&run, 5_000_000_000, 16 * MIB);
    assert!(
        usage["memory"]["usedBytes"].as_u64().unwrap() > 8 * MIB,
        "{usage}"
    );
    // A plugin that decides it cannot decide: still measured.
    let run = plugin_run(
        &s,
        &hostile,
        &["--json", "--plugin-config", r#"{"mode": "error"}"#],
    );
    assert_reason(
        &run,
        2,
        "plugin 'hostile' reported an error: the plugin could not decide",
    );
    assert_measured(&run, 5_000_000_000, 128 * MIB);
}

#[test]
fn plugin_run_refuses_bad_input_before_anything_runs() {
    let s = Scratch::new();
    let noop = plugin_file("noop");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--plugin-config", "[1]"],
            "--plugin-config must be a JSON object",
        ),
        (vec!["--plugin-config", "{"], "--plugin-config is not JSON"),
        (vec!["--timeout-ms", "0"], "timeoutMs"),
        (
            vec!["--fuel", "999999999999999"],
            "fuel 999999999999999 exceeds the host's maximum",
        ),
        (
            vec!["--diff", "/nonexistent/x.diff"],
            "cannot read --diff /nonexistent/x.diff",
        ),
    ];
    for (args, said) in cases {
        let mut argv = vec!["--json"];
        argv.extend(args.iter());
        let run = plugin_run(&s, &noop, &argv);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stdout);
        assert_eq!(run.outcome(), "error", "{args:?}");
        assert!(run.reason().contains(said), "{args:?}: {}", run.reason());
    }
    let run = plugin_run(&s, Path::new("/nonexistent/p.wasm"), &[]);
    assert_eq!(run.code, 2);
    assert_has(&run.stderr, "cannot read plugin /nonexistent/p.wasm");
    // Not a component: an error, not measured.
    let junk = s.write("junk.wasm", "not wasm");
    let run = plugin_run(&s, &junk, &["--json"]);
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert_eq!(run.json()["usage"], Value::Null);
}

/// Runs an installed gatehost (not the test build's path) in `cwd`, with
/// nothing of the test's environment but PATH and HOME.
fn run_installed<S: AsRef<std::ffi::OsStr>>(
    bin: &Path,
    cwd: &Path,
    args: &[S],
) -> std::process::Output {
    Command::new(bin)
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", std::env::var_os("HOME").unwrap_or_default())
        .output()
        .expect("run the installed gatehost")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Every file under `dir`, by relative path.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read dir").flatten() {
            if e.file_type().expect("type").is_dir() {
                stack.push(e.path());
            } else {
                out.push(e.path().strip_prefix(dir).expect("under dir").to_path_buf());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn an_installed_gatehost_makes_a_plugin_crate_that_builds_offline_and_gates() {
    let marker = common::marker("kit");
    let tmp = tempfile::Builder::new()
        .prefix(&format!("gatehost-test-{marker}-"))
        .tempdir()
        .expect("tempdir");
    // The "installed" binary: a copy outside the source tree.
    let bin = tmp.path().join("bin/gatehost");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_gatehost"), &bin).expect("install gatehost");
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();

    let made = run_installed(&bin, &work, &["plugin", "new", "my-gate"]);
    assert!(made.status.success(), "{}", text(&made.stderr));
    let said = text(&made.stdout);
    let crate_dir = work.join("my-gate");
    for line in [
        "created ./my-gate (gatehost-plugin 0.1.0, for gatehost:gate@0.1.2",
        "build it:   cd ./my-gate && cargo build --release --target wasm32-wasip2",
        "rustup target add wasm32-wasip2",
        "gatehost plugin run target/wasm32-wasip2/release/my_gate.wasm",
    ] {
        assert_has(&said, line);
    }
    assert_eq!(
        files_under(&crate_dir),
        [
            ".gitignore",
            "Cargo.toml",
            "README.md",
            "src/lib.rs",
            "vendor/gatehost-plugin/Cargo.toml",
            "vendor/gatehost-plugin/src/lib.rs",
            "vendor/gatehost-plugin/wit/v0.1/gate.wit",
        ]
        .map(PathBuf::from)
    );
    // The kit is the repository's, its WIT the repository's, and nothing
    // written names the machine gatehost was built on.
    assert_eq!(
        std::fs::read(crate_dir.join("vendor/gatehost-plugin/wit/v0.1/gate.wit")).unwrap(),
        std::fs::read(repo().join("wit/v0.1/gate.wit")).unwrap()
    );
    assert_eq!(
        std::fs::read(crate_dir.join("vendor/gatehost-plugin/src/lib.rs")).unwrap(),
        std::fs::read(repo().join("plugins/kit/src/lib.rs")).unwrap()
    );
    let source_tree = std::fs::canonicalize(repo()).unwrap();
    for rel in files_under(&crate_dir) {
        let content = text(&std::fs::read(crate_dir.join(&rel)).unwrap());
        assert!(
            !content.contains(&source_tree.display().to_string()),
            "{} names the source tree",
            rel.display()
        );
    }
    let readme = std::fs::read_to_string(crate_dir.join("README.md")).unwrap();
    assert!(readme.contains("cargo build --release --target wasm32-wasip2"));
    assert!(readme.contains("target/wasm32-wasip2/release/my_gate.wasm"));

    // Build it offline, as its README says, in a target dir of its own.
    let sysroot = Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .expect("rustc");
    let sysroot = PathBuf::from(text(&sysroot.stdout).trim());
    assert!(
        sysroot.join("lib/rustlib/wasm32-wasip2").is_dir(),
        "the wasm32-wasip2 target is not installed in {}: `rustup target add wasm32-wasip2`",
        sysroot.display()
    );
    let target = tmp.path().join("target");
    let build = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "build",
            "--release",
            "--target",
            "wasm32-wasip2",
            "--offline",
        ])
        .current_dir(&crate_dir)
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .expect("run cargo");
    assert!(
        build.status.success(),
        "the new crate does not build offline:\n{}",
        text(&build.stderr)
    );
    let wasm = target.join("wasm32-wasip2/release/my_gate.wasm");
    assert!(wasm.is_file());

    // Its example rule, through the installed gatehost: a clean change
    // passes, one with an XXX marker fails at the marker's line.
    let ws = tmp.path().join("ws");
    let etc = tmp.path().join("etc");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&etc).unwrap();
    let config = etc.join("host.toml");
    std::fs::write(
        &config,
        format!("[wasm]\ncache_dir = \"{}\"\n", etc.join("cache").display()),
    )
    .unwrap();
    let inspect = run_installed(
        &bin,
        &work,
        &[
            "plugin",
            "inspect",
            "--json",
            "--config",
            config.to_str().unwrap(),
            wasm.to_str().unwrap(),
        ],
    );
    assert_eq!(inspect.status.code(), Some(0), "{}", text(&inspect.stdout));
    let inspected: Value = serde_json::from_slice(&inspect.stdout).expect("JSON");
    assert_eq!(inspected["interface"], "gatehost:gate@0.1.2");
    assert_eq!(inspected["problem"], Value::Null);

    std::fs::write(ws.join("notes.txt"), "fine\nXXX not fine\n").unwrap();
    std::fs::write(ws.join("clean.txt"), "fine\n").unwrap();
    let flagged = etc.join("flagged.diff");
    std::fs::write(&flagged, "diff --git a/notes.txt b/notes.txt\n--- a/notes.txt\n+++ b/notes.txt\n@@ -1 +1,2 @@\n fine\n+XXX not fine\n").unwrap();
    let clean = etc.join("clean.diff");
    std::fs::write(&clean, "diff --git a/clean.txt b/clean.txt\nnew file mode 100644\n--- /dev/null\n+++ b/clean.txt\n@@ -0,0 +1 @@\n+fine\n").unwrap();
    let gate = etc.join("gate.json");
    std::fs::write(
        &gate,
        json!({"wasm": {"plugin": wasm.display().to_string(), "sha256": sha256_of(&wasm)}})
            .to_string(),
    )
    .unwrap();
    // `COMMAND --json --config CONFIG --workspace WS --diff DIFF LAST`.
    let (config, ws) = (arg(&config), arg(&ws));
    let args = |command: &[&str], diff: &Path, last: &str| -> Vec<String> {
        let on = [
            "--json",
            "--config",
            &config,
            "--workspace",
            &ws,
            "--diff",
            &arg(diff),
            last,
        ];
        command
            .iter()
            .chain(on.iter())
            .map(|a| a.to_string())
            .collect()
    };
    let check = |diff: &Path| {
        let out = run_installed(&bin, &work, &args(&["check"], diff, &arg(&gate)));
        let report: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}\n{}", text(&out.stdout), text(&out.stderr)));
        (out.status.code(), report)
    };
    let (code, report) = check(&clean);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["reason"], "1 changed file(s) checked");
    let (code, report) = check(&flagged);
    assert_eq!(code, Some(1), "{report}");
    assert_eq!(
        report["gates"][0]["findings"],
        json!([{"path": "notes.txt", "line": 2, "severity": "error", "message": "XXX marker"}])
    );
    // And through `plugin run`, which says what it used.
    let built = "../../target/wasm32-wasip2/release/my_gate.wasm";
    let run = args(&["plugin", "run"], &flagged, built);
    let out = run_installed(&bin, &crate_dir, &run);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(report["findings"][0]["line"], 2);
    assert!(report["usage"]["fuel"]["used"].as_u64().unwrap() > 0);
    assert_no_survivors(&marker);
}

#[test]
fn plugin_new_checks_the_name_and_never_overwrites() {
    let s = Scratch::new();
    let new = |args: &[&str]| {
        let mut argv: Vec<String> = vec![
            "plugin".into(),
            "new".into(),
            "--dir".into(),
            s.etc.display().to_string(),
        ];
        argv.extend(args.iter().map(|a| a.to_string()));
        run_gatehost(&argv, &[])
    };
    for bad in [
        "", "1gate", "-gate", "_gate", "a/b", "..", "a b", "gäte", "a.b",
    ] {
        let run = new(&["--", bad]);
        assert_eq!(run.code, 2, "{bad:?} was accepted");
        assert!(
            run.stderr.contains("is not a valid plugin name"),
            "{bad:?}: {}",
            run.stderr
        );
    }
    assert!(
        files_under(&s.etc).is_empty(),
        "a refused name wrote something"
    );
    // An existing folder (or file) of that name is refused and left as it was.
    std::fs::create_dir_all(s.etc.join("taken")).unwrap();
    std::fs::write(s.etc.join("taken/lib.rs"), "mine").unwrap();
    std::fs::write(s.etc.join("file"), "mine").unwrap();
    for name in ["taken", "file"] {
        let run = new(&[name]);
        assert_eq!(run.code, 2, "{name}");
        assert_has(&run.stderr, "already exists");
    }
    assert_eq!(
        files_under(&s.etc),
        [PathBuf::from("file"), PathBuf::from("taken/lib.rs")]
    );
    assert_eq!(
        std::fs::read_to_string(s.etc.join("taken/lib.rs")).unwrap(),
        "mine"
    );
    // --kit: another copy of the kit, named by its absolute path; a
    // folder that is not the kit is refused before anything is written.
    let run = new(&["--kit", s.ws.to_str().unwrap(), "not-a-kit"]);
    assert_eq!(run.code, 2);
    assert_has(&run.stderr, "is not the gatehost-plugin kit crate");
    assert!(!s.etc.join("not-a-kit").exists());
    let kit = std::fs::canonicalize(repo().join("plugins/kit")).unwrap();
    let run = new(&["--kit", kit.to_str().unwrap(), "with-kit"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let manifest: toml::Table = std::fs::read_to_string(s.etc.join("with-kit/Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        manifest["dependencies"]["gatehost-plugin"]["path"].as_str(),
        kit.to_str()
    );
    assert!(!s.etc.join("with-kit/vendor").exists());
}

#[test]
fn the_help_states_the_kits_version_and_how_to_build() {
    let help = run_gatehost(&["plugin".into(), "new".into(), "--help".into()], &[]);
    assert_eq!(help.code, 0);
    assert_has(
        &help.stdout,
        "gatehost-plugin 0.1.0 (for gatehost:gate@0.1.2)",
    );
    assert!(
        help.stdout
            .contains("cargo build --release --target wasm32-wasip2")
    );
    let help = run_gatehost(&["plugin".into(), "run".into(), "--help".into()], &[]);
    assert_eq!(help.code, 0);
    for option in [
        "--plugin-config <JSON>",
        "--config <FILE>",
        "--diff <FILE>",
        "--fuel <UNITS>",
        "--memory-mib <MIB>",
        "--timeout-ms <MS>",
        "--json",
    ] {
        assert!(help.stdout.contains(option), "{option}: {}", help.stdout);
    }
}
