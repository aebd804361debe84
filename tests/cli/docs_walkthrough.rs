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
use crate::common::agents::{FakeApi, agent_cli, private_command};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(240);
const MODEL_ROUTE: &str = "/v1/messages";

/// The `sh walkthrough` blocks of `doc` (relative to the repository), in
/// order, with their lines as written.
fn walkthrough_blocks(doc: &str) -> Vec<String> {
    blocks_of(doc, "```sh walkthrough")
}

/// The code blocks of `doc` that open with the line `opening`, in order.
fn blocks_of(doc: &str, opening: &str) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(doc);
    let text = std::fs::read_to_string(&path).expect("read the doc");
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        match &mut current {
            None if line.trim_end() == opening => current = Some(String::new()),
            Some(_) if line.trim_end() == "```" => blocks.extend(current.take()),
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
            None => {}
        }
    }
    assert!(current.is_none(), "{doc}: a {opening} block is not closed");
    assert!(!blocks.is_empty(), "{doc} has no {opening} block");
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

    let (m, root) = marked_dir("walkthrough");
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
    let mut cmd = newcomer_bash(&script_file, &home, &path, [&home, &tmp]);
    cmd.env("ANTHROPIC_BASE_URL", api.url())
        .env("ANTHROPIC_API_KEY", "sk-ant-fake")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("CLAUDE_CODE_MAX_RETRIES", "0")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1");
    let walk = Walk::start(cmd, root.path(), "run the walkthrough");
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

    // Then the daemon the walk left in the background, and anything else
    // of it, is ended.
    let status = walk.end(T);
    let out = read("out");
    let err = read("err");
    let serve_log = std::fs::read_to_string(home.join("gatehost-serve.log")).unwrap_or_default();
    let status = status.unwrap_or_else(|| {
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

/// Issue 48, item 12: `policy attach --help` describes the policy JSON
/// with an example, and the example is a policy a real daemon attaches
/// with the agent token (before: the help said only "agentproto
/// policy_attach JSON"). The example is read from the help itself, so the
/// help cannot drift from what the daemon accepts.
#[test]
fn policy_attach_help_shows_the_json_and_its_example_attaches() {
    let help = common::run_gatehost(&["policy".into(), "attach".into(), "--help".into()], &[]);
    assert_eq!(help.code, 0, "{help:?}");
    for field in [
        "sessionId",
        "gate",
        "then",
        "commit",
        "onFail",
        "next",
        "review",
    ] {
        assert!(help.stdout.contains(field), "{field}: {}", help.stdout);
    }
    let example: String = help
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("Example"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n");
    let spec: serde_json::Value = serde_json::from_str(&example)
        .unwrap_or_else(|e| panic!("the help's example is not JSON ({e}):\n{example}"));

    let s = common::Scratch::new();
    common::daemon::git_repo(&s.ws);
    s.write_ws("calc.py", "def add(a, b):\n    return a - b\n");
    let cfg = s.write(
        "config.toml",
        &common::allow_config(&[]).replace(
            "[shell]\nallow = [",
            "[shell]\nallow = [{ program = \"python3\", subcommands = [\"-m\"] }, ",
        ),
    );
    // python3 as the system has it (this machine's PATH may start with a
    // pyenv shim, which this configuration does not grant).
    let d = common::daemon::Daemon::start_with_env(
        &s.etc.join("data"),
        &cfg,
        &[("PATH", "/usr/bin:/bin")],
    );
    let session = spec["sessionId"]
        .as_str()
        .expect("the example names a session");
    d.register(session, &s.ws);
    let file = s.write("policy.json", &example);
    let run = d.cli(
        &["policy", "attach", file.to_str().expect("utf-8")],
        &d.agent,
    );
    assert_eq!(run.code, 0, "{run:?}\n{}", d.log());
    let id = run.stdout.trim();
    assert!(id.starts_with("pol_"), "{run:?}");
    let policy = d.policy(id);
    assert_eq!(policy["status"], "watching", "{policy}");
    assert_eq!(policy["spec"]["then"], spec["then"], "{policy}");
    assert_eq!(policy["spec"]["gate"], spec["gate"], "{policy}");
}

/// Issue 48, item 12: every shell block of README.md runs as pasted. Its
/// blocks are the walkthrough (the test above), the daemon's step by step
/// (`sh daemon`) and the hooks' (`sh hooks`), run here, each as one bash
/// script with `set -euo pipefail` in a fresh home, and the first, whose
/// commands other tests run (the demo: `daemon_commits`; the suite is the
/// suite). Before, the daemon's block named `/path/to/repo`, `pol_…` and a
/// `policy.json` it never wrote, followed the bus for ever and put its
/// data directory in gatehost's own Cargo project; the hooks' block named
/// a gate file nothing made. A new block, or another command in the first,
/// fails here.
#[test]
fn every_readme_command_block_runs_as_pasted() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README");
    let openings: Vec<&str> = readme
        .lines()
        .filter(|l| l.starts_with("```sh") || l.starts_with("```bash") || l.starts_with("```shell"))
        .collect();
    assert_eq!(
        openings,
        ["```sh", "```sh walkthrough", "```sh daemon", "```sh hooks"],
        "README.md's shell blocks changed: run the new one in a test"
    );
    let commands: Vec<String> = blocks_of("README.md", "```sh")[0]
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|l| l.split(" #").next().unwrap_or(l).trim().to_string())
        .collect();
    assert_eq!(
        commands,
        ["bash examples/daemon-demo.sh", "bash scripts/test.sh"],
        "the demo runs in daemon::commits::approval::the_shipped_daemon_demo_runs_to_a_commit"
    );

    // The daemon's block, from the repository's root.
    let daemon = blocks_of("README.md", "```sh daemon");
    assert_eq!(daemon.len(), 1);
    for absent in ["/path/to/repo", "events tail\n", "./gh-data"] {
        assert!(!daemon[0].contains(absent), "{absent}");
    }
    // Where it made its repository, and its daemon's log, said however it
    // ends.
    let script = format!(
        "trap 'echo \"README: repo=${{repo:-}}\"; echo \"serve log: ${{data:-}}.log\" >&2' EXIT\n{}",
        daemon[0]
    );
    let run = run_block("readme-daemon", &script, &root);
    let (out, err) = (&run.out, &run.err);
    // The scratch repository it made under /tmp/gatehost-demo.
    if let Some(repo) = out
        .lines()
        .find_map(|l| l.strip_prefix("README: repo="))
        .filter(|r| r.starts_with("/tmp/gatehost-demo/repo."))
    {
        let _ = std::fs::remove_dir_all(repo);
    }
    assert!(run.ok, "{}\nstdout:\n{out}\nstderr:\n{err}", run.status);
    // What its comments say: the policy's events, committed, the log
    // naming the commit, the hook installed, a login link.
    for want in [
        "policy:commit-ready",
        "done: committed",
        "Note the review",
        "/login?",
    ] {
        assert!(out.contains(want), "{want}:\n{out}\n{err}");
    }
    let settings =
        std::fs::read_to_string(run.home.join(".claude/settings.json")).unwrap_or_default();
    assert!(settings.contains("hook claude --data-dir"), "{settings}");

    // The hooks' block, after the walkthrough's lines that make the gate
    // file and the configuration it names, from the home directory (where
    // doctor reads ~/.claude/settings.json as both the user's and the
    // project's: counted once).
    let walk = &walkthrough_blocks("README.md")[0];
    let made: Vec<&str> = walk
        .lines()
        .filter(|l| {
            l.starts_with("mkdir -p ~/.config/gatehost")
                || l.contains("> ~/.config/gatehost/config.toml")
                || l.contains("> ~/gates/python.json")
        })
        .collect();
    assert_eq!(made.len(), 3, "{walk}");
    let hooks = blocks_of("README.md", "```sh hooks");
    assert_eq!(hooks.len(), 1);
    let script = format!("{}\ncd ~\n{}", made.join("\n"), hooks[0]);
    let run = run_block("readme-hooks", &script, &root);
    assert!(
        run.ok,
        "{}\nstdout:\n{}\nstderr:\n{}",
        run.status, run.out, run.err
    );
    for want in ["installed:", "all well", "removed:"] {
        assert!(run.out.contains(want), "{want}:\n{}\n{}", run.out, run.err);
    }
    assert!(
        std::fs::read_to_string(run.home.join(".codex/hooks.json"))
            .is_ok_and(|h| h.contains("hook codex --gates")),
        "{}",
        run.out
    );
}

/// What [`run_block`] saw.
struct BlockRun {
    ok: bool,
    status: String,
    out: String,
    err: String,
    /// The fresh home it ran in (kept until the test ends).
    home: PathBuf,
    _dir: tempfile::TempDir,
}

/// Runs `block` as one bash script with `set -euo pipefail`, from `cwd`,
/// in a fresh home: `gatehost` (this test's) first on PATH, then the
/// directory of the user's cargo, whose toolchains (`~/.cargo`,
/// `~/.rustup`) the home links to; then kills what it left in the
/// background (its process group) and checks nothing of it survives.
fn run_block(name: &str, block: &str, cwd: &Path) -> BlockRun {
    let (m, dir) = marked_dir(name);
    let home = dir.path().join("home");
    let bin = dir.path().join("bin");
    let tmp = dir.path().join("tmp");
    for d in [&home, &bin, &tmp] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_gatehost"), bin.join("gatehost"))
        .expect("symlink gatehost");
    let real_home = std::env::var_os("HOME").map(PathBuf::from).expect("HOME");
    for tool in [".cargo", ".rustup"] {
        std::os::unix::fs::symlink(real_home.join(tool), home.join(tool)).expect("symlink");
    }
    let cargo_dir = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .find(|d| d.join("cargo").is_file())
        .expect("cargo on PATH");
    let script_file = dir.path().join("block.sh");
    std::fs::write(&script_file, format!("set -euo pipefail\n{block}")).expect("write");
    let path = format!("{}:{}:/usr/bin:/bin", bin.display(), cargo_dir.display());
    let mut cmd = newcomer_bash(&script_file, cwd, &path, [&home, &tmp]);
    cmd.envs(
        ["CARGO_HOME", "RUSTUP_HOME"]
            .iter()
            .filter_map(|k| std::env::var_os(k).map(|v| (k, v))),
    )
    .env("GIT_CONFIG_GLOBAL", "/dev/null");
    // What the block left in the background (a daemon) is ended after it.
    let status = Walk::start(cmd, dir.path(), "run the block").end(Duration::from_secs(600));
    let stopped = Instant::now() + Duration::from_secs(20);
    while !common::survivors(&m).is_empty() && Instant::now() < stopped {
        std::thread::sleep(Duration::from_millis(50));
    }
    common::assert_no_survivors(&m);
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    let mut err = read(&dir.path().join("err"));
    // A daemon's log, where the block put one (`2> "$data.log"`).
    if let Some(log) = err.lines().find_map(|l| l.strip_prefix("serve log: ")) {
        err.push_str(&read(Path::new(log)));
    }
    BlockRun {
        ok: status.is_some_and(|s| s.success()),
        status: status.map_or("did not finish in 10 minutes".into(), |s| s.to_string()),
        out: read(&dir.path().join("out")),
        err,
        home,
        _dir: dir,
    }
}

/// `bash SCRIPT` in `cwd` as a newcomer runs it: nothing of the test's
/// environment but `path` as `PATH`, `HOME` and `TMPDIR` of its own, a
/// UTF-8 locale and a git identity.
fn newcomer_bash(script: &Path, cwd: &Path, path: &str, dirs: [&Path; 2]) -> std::process::Command {
    let mut cmd = private_command("bash", cwd, path, dirs);
    cmd.arg(script)
        .env("LANG", "C.UTF-8")
        .env("GIT_AUTHOR_NAME", "A Newcomer")
        .env("GIT_AUTHOR_EMAIL", "newcomer@example.invalid")
        .env("GIT_COMMITTER_NAME", "A Newcomer")
        .env("GIT_COMMITTER_EMAIL", "newcomer@example.invalid");
    cmd
}

/// A script run in a process group of its own, its stdout and stderr in
/// the files `out` and `err` of a directory.
struct Walk {
    child: std::process::Child,
}

impl Walk {
    /// Starts `cmd` (no stdin, its output in `dir`); `what` names it.
    fn start(mut cmd: std::process::Command, dir: &Path, what: &str) -> Walk {
        cmd.stdin(std::process::Stdio::null())
            .stdout(std::fs::File::create(dir.join("out")).expect("out"))
            .stderr(std::fs::File::create(dir.join("err")).expect("err"));
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        Walk {
            child: cmd.spawn().expect(what),
        }
    }

    /// Waits for the script at most `within` (killing it past that), then
    /// sends what it left in the background SIGTERM (its process group).
    /// Its exit status, when it ended in time.
    fn end(mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + within;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                break Some(status);
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        // SAFETY: kill(2) on the script's own process group.
        unsafe { libc::kill(-(self.child.id() as i32), libc::SIGTERM) };
        status
    }
}

/// A marker named `name`, and a temporary directory beside the tests'
/// workspaces whose name carries it (so every process whose command line
/// names a file in it is found by it).
fn marked_dir(name: &str) -> (String, tempfile::TempDir) {
    let m = common::marker(name);
    std::fs::create_dir_all(common::TEST_ETC_ROOT).expect("mkdir");
    let dir = tempfile::Builder::new()
        .prefix(&format!("gatehost-test-{m}-"))
        .tempdir_in(common::TEST_ETC_ROOT)
        .expect("tempdir");
    (m, dir)
}
