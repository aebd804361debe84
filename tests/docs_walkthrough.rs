//! The newcomer's walk, as the docs write it: the `sh walkthrough` blocks
//! of README.md ("Your first gated agent") and docs/agents.md ("Daemon
//! mode, step by step") run, in that order, as one bash script with
//! `set -euo pipefail`, in a fresh home directory: `gatehost` on PATH in
//! `~/.cargo/bin` (the test's binary; the README's `cargo install` line is
//! run by `tests/install.rs`, in its `--debug` form), the real Claude Code
//! (pinned, from npm) against the fake Anthropic API on loopback. The
//! model never edits files, so the test plays the agent's fix: when the
//! stop hook's nudge reaches the model, the test fixes `calc.py`, then
//! lets the model answer. A doc command that fails, or no longer does what
//! the text says, fails this test.

use crate::common;
use crate::common::agents::{FakeApi, agent_cli};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(240);
const MODEL_ROUTE: &str = "/v1/messages";

/// The `sh walkthrough` blocks of `doc` (relative to the repository), in
/// order, with their lines as written.
fn walkthrough_blocks(doc: &str) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(doc);
    let text = std::fs::read_to_string(&path).expect("read the doc");
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        match &mut current {
            None if line.trim_end() == "```sh walkthrough" => current = Some(String::new()),
            Some(_) if line.trim_end() == "```" => blocks.extend(current.take()),
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
            None => {}
        }
    }
    assert!(
        current.is_none(),
        "{doc}: a walkthrough block is not closed"
    );
    assert!(!blocks.is_empty(), "{doc} has no `sh walkthrough` block");
    blocks
}

#[test]
fn the_readme_and_agents_md_walkthroughs_run_as_written() {
    let readme = walkthrough_blocks("README.md");
    let agents = walkthrough_blocks("docs/agents.md");
    assert!(
        readme[0].starts_with("cargo install --locked --path host"),
        "the README's walk starts with the install: {}",
        readme[0]
    );
    // The install is tests/install.rs's; here gatehost is put where it
    // puts it.
    let mut script = String::from("set -euo pipefail\n");
    for block in readme.iter().chain(&agents) {
        for line in block.lines() {
            if !line.starts_with("cargo install ") {
                script.push_str(line);
                script.push('\n');
            }
        }
    }

    let m = common::marker("walkthrough");
    std::fs::create_dir_all(common::TEST_ETC_ROOT).expect("mkdir");
    let root = tempfile::Builder::new()
        .prefix(&format!("gatehost-test-{m}-"))
        .tempdir_in(common::TEST_ETC_ROOT)
        .expect("tempdir");
    let home = root.path().join("home");
    let bin = home.join(".cargo/bin");
    std::fs::create_dir_all(&bin).expect("mkdir");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_gatehost"), bin.join("gatehost"))
        .expect("symlink gatehost");
    let claude = agent_cli("claude");
    let claude_dir: PathBuf = claude.parent().expect("bin dir").to_path_buf();
    let tmp = root.path().join("tmp");
    std::fs::create_dir_all(&tmp).expect("mkdir");
    let script_file = root.path().join("walkthrough.sh");
    std::fs::write(&script_file, &script).expect("write the script");

    let release = root.path().join("release");
    let api = FakeApi::start_script(
        root.path(),
        &json!([
            {"text": "I am done."},
            {"text": "Fixed: add() adds now.", "hold_until": release},
            {"text": "Done."},
        ]),
    );
    let path = format!("{}:{}:/usr/bin:/bin", bin.display(), claude_dir.display());
    let mut cmd = std::process::Command::new("bash");
    cmd.arg(&script_file)
        .current_dir(&home)
        .env_clear()
        .env("PATH", &path)
        .env("HOME", &home)
        .env("TMPDIR", &tmp)
        .env("LANG", "C.UTF-8")
        .env("GIT_AUTHOR_NAME", "A Newcomer")
        .env("GIT_AUTHOR_EMAIL", "newcomer@example.invalid")
        .env("GIT_COMMITTER_NAME", "A Newcomer")
        .env("GIT_COMMITTER_EMAIL", "newcomer@example.invalid")
        .env("ANTHROPIC_BASE_URL", api.url())
        .env("ANTHROPIC_API_KEY", "sk-ant-fake")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("CLAUDE_CODE_MAX_RETRIES", "0")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(root.path().join("out")).expect("out"))
        .stderr(std::fs::File::create(root.path().join("err")).expect("err"));
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd.spawn().expect("run the walkthrough");
    let group = child.id() as i32;
    let read = |name: &str| std::fs::read_to_string(root.path().join(name)).unwrap_or_default();

    // The standalone stop: the red test's failure reaches the model.
    let calls = api.wait_for_calls(MODEL_ROUTE, 2, T);
    let nudge = calls[1]["body"].to_string();
    assert!(
        nudge.contains("unit tests") && nudge.contains("AssertionError"),
        "the nudge names the gate and its output: {nudge}\n{}",
        read("err")
    );
    // The agent's fix, then the model answers.
    let calc = home.join("src/calc/calc.py");
    std::fs::write(&calc, "def add(a, b):\n    return a + b\n").expect("fix");
    std::fs::write(&release, "").expect("release");

    let deadline = Instant::now() + T;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // The daemon the walk left in the background, and anything else of it.
    // SAFETY: kill(2) on the walk's own process group.
    unsafe { libc::kill(-group, libc::SIGTERM) };
    let out = read("out");
    let err = read("err");
    let serve_log = std::fs::read_to_string(home.join("gatehost-serve.log")).unwrap_or_default();
    let status = status.unwrap_or_else(|| {
        let _ = child.kill();
        panic!(
            "the walkthrough did not finish\nstdout:\n{out}\nstderr:\n{err}\nserve:\n{serve_log}"
        )
    });
    assert!(
        status.success(),
        "{status}\nstdout:\n{out}\nstderr:\n{err}\nserve:\n{serve_log}"
    );
    // `check` before the agent: the gate said no.
    assert!(out.contains("the gate said no (exit 1)"), "{out}");
    // Three model calls: the first stop (red), the fix (green), the
    // daemon-mode run (green at once: the fix is in the workspace).
    assert_eq!(api.model_calls(MODEL_ROUTE).len(), 3, "{out}\n{err}");
    // The daemon's commit, acked by the operator, is HEAD.
    assert!(out.contains("Fix add()"), "{out}\n{err}");
    let log = common::daemon::git_out(&home.join("src/calc"), &["log", "--format=%s", "-2"]);
    assert_eq!(
        log.lines().collect::<Vec<_>>(),
        ["Fix add()", "calc, with a bug"],
        "{log}"
    );
    let committed = common::daemon::git_out(&home.join("src/calc"), &["show", "HEAD:calc.py"]);
    assert!(committed.contains("return a + b"), "{committed}");
    // The fake API's process is the test's (its files carry the marker).
    drop(api);
    common::assert_no_survivors(&m);
}
