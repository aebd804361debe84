//! Sessions in linked git worktrees (`git worktree add ../wt -b agent`):
//! a commit policy commits to the worktree's own branch and index with
//! nothing run from the repository; plugins and judges get the worktree's
//! change, in the daemon and in a standalone hook; a `.git` file the agent
//! points elsewhere is refused with the path named, and nothing is written
//! there.

use crate::common;
use crate::common::shorthand::assert_has;
use crate::daemon::commits::{booby_trap, ran};
use crate::gates::wasm::{gate, plugin_dir, standalone_stop};
use common::daemon::{Daemon, git_out, git_repo};
use common::{Scratch, allow_config};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

/// git, with everything a booby-trapped repository could make it run
/// turned off on the command line (the test's own inspection must not
/// set off the traps it checks).
fn git_safe(dir: &Path, args: &[&str]) -> String {
    let traps = ["-c", "core.fsmonitor=false", "-c", "filter.evil.clean=cat"];
    let mut all = vec!["-c", "core.hooksPath=/dev/null"];
    all.extend(traps);
    all.extend([
        "-c",
        "filter.evil.smudge=cat",
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
    ]);
    all.extend_from_slice(args);
    common::daemon::git_ok(dir, &all)
}

/// The repository at `s.ws` (branch `main`) and its linked worktree
/// beside it on branch `agent` (inside the test workspace root).
fn worktree(s: &Scratch) -> PathBuf {
    git_repo(&s.ws);
    let wt = s.ws.parent().expect("parent").join("wt");
    git_safe(
        &s.ws,
        &[
            "worktree",
            "add",
            "-q",
            wt.to_str().expect("utf-8"),
            "-b",
            "agent",
        ],
    );
    wt
}

fn daemon(s: &Scratch, extra: &str) -> Daemon {
    let cfg = s.write(
        "config.toml",
        &format!("{}{extra}", allow_config(&["true", "false"])),
    );
    Daemon::start(&s.etc.join("data"), &cfg)
}

fn rev(dir: &Path, name: &str) -> String {
    git_safe(dir, &["rev-parse", name]).trim().to_string()
}

#[test]
fn a_worktree_sessions_commit_lands_on_its_branch_and_runs_nothing_from_the_repo() {
    let s = Scratch::new();
    let wt = worktree(&s);
    let markers = s.etc.join("markers");
    booby_trap(&s.ws, &markers);
    // core.hooksPath too, to a directory of trapped hooks.
    let hooks = markers.join("hooks");
    std::fs::create_dir_all(&hooks).expect("mkdir");
    for hook in ["pre-commit", "post-commit", "reference-transaction"] {
        std::fs::copy(s.ws.join(".git/hooks").join(hook), hooks.join(hook)).expect("copy");
    }
    let mut config = std::fs::read_to_string(s.ws.join(".git/config")).expect("config");
    config.push_str(&format!("[core]\n\thooksPath = {}\n", hooks.display()));
    std::fs::write(s.ws.join(".git/config"), config).expect("config");
    std::fs::write(wt.join(".gitattributes"), "* filter=evil\n").expect("attributes");
    let main_before = rev(&s.ws, "main");
    let agent_before = rev(&s.ws, "agent");

    let d = daemon(&s, "");
    d.register("s1", &wt);
    std::fs::create_dir_all(wt.join("src")).expect("mkdir");
    // The gate runs in a snapshot worktree of the session's worktree: the
    // new file is there.
    std::fs::write(wt.join("src/lib.rs"), "pub fn in_the_worktree() {}\n").expect("write");
    std::fs::write(wt.join("notes.txt"), "not committed\n").expect("write");
    let pid = d.attach(json!({
        "sessionId": "s1",
        "gate": {"command": "bash", "args": ["-c", "test -f src/lib.rs"]},
        "then": "commit",
        "commit": {"paths": ["src", ".gitattributes"], "message": "from the worktree", "requireHumanAck": true}
    }));
    d.report("s1", "turn-end");
    let p = d.wait_status(&pid, "awaiting-ack", T);
    assert_eq!(p["plan"]["paths"], json!(["src", ".gitattributes"]), "{p}");
    d.cli_ok(&["policy", "ack", &pid, "--approve"], &d.operator);
    let p = d.wait_status(&pid, "done", T);
    let sha = p["commitSha"].as_str().expect("sha").to_string();

    assert_eq!(
        ran(&markers),
        Vec::<String>::new(),
        "nothing the repository names ran"
    );
    assert_eq!(rev(&s.ws, "agent"), sha, "the worktree's branch moved");
    assert_ne!(sha, agent_before);
    assert_eq!(rev(&s.ws, "main"), main_before, "the main branch did not");
    assert_eq!(rev(&wt, "HEAD"), sha);
    assert_eq!(
        git_safe(&s.ws, &["show", &format!("{sha}:src/lib.rs")]),
        "pub fn in_the_worktree() {}\n"
    );
    // The worktree's own index follows the commit; only the file left out
    // is still a change.
    assert_eq!(git_safe(&wt, &["status", "--porcelain"]), "?? notes.txt\n");
    std::fs::remove_file(wt.join("notes.txt")).expect("remove");
    assert_eq!(git_safe(&wt, &["status", "--porcelain"]), "");
    // The main worktree's index was not touched: it is as clean as before
    // (its untracked .gitattributes from the trap aside).
    assert_eq!(
        git_safe(&s.ws, &["status", "--porcelain"]),
        "?? .gitattributes\n"
    );
    assert_eq!(ran(&markers), Vec::<String>::new());
}

#[test]
fn a_plugin_gate_in_a_linked_worktree_gets_the_worktrees_change() {
    let s = Scratch::new();
    let wt = worktree(&s);
    let d = daemon(
        &s,
        &format!(
            "[wasm]\nplugin_dirs = [\"{}\"]\ncache_dir = \"{}\"\n",
            plugin_dir().display(),
            s.etc.join("cache").display()
        ),
    );
    d.register("s1", &wt);
    // A change in the main worktree is not the session's.
    std::fs::write(s.ws.join("main-only.rs"), "fn f() { dbg!(0); }\n").expect("write");
    std::fs::write(wt.join("README"), "hello\nfn f() { dbg!(1); }\n").expect("write");
    let gate: Value = serde_json::from_str(&gate(
        "forbid-patterns",
        json!({"scope": "changed", "rules": [{"id": "no-dbg", "pattern": "dbg!\\(", "message": "remove dbg!"}]}),
        json!({}),
    ))
    .expect("gate");
    let pid = d.attach(json!({"sessionId": "s1", "gate": gate, "onFail": {"maxRetries": 0}}));
    d.report("s1", "turn-end");
    let p = d.wait_status(&pid, "blocked", T);
    let findings = p["verdict"]["gates"][0]["findings"]
        .as_array()
        .expect("findings")
        .clone();
    assert_eq!(findings.len(), 1, "{p}");
    assert_eq!(findings[0]["path"], "README", "{p}");
}

/// A judge adapter that saves its prompt to `saved` and passes.
fn recording_judge(saved: &Path) -> String {
    format!(
        "[judge.adapters.record]\ncommand = [\"bash\", \"-c\", \"cat > \\\"$0\\\"; echo 'VERDICT: PASS'\", \"{}\"]\nwrite = [\"{}\"]\n",
        saved.display(),
        saved.parent().expect("parent").display()
    )
}

#[test]
fn a_standalone_hook_in_a_linked_worktree_runs_a_judge_and_a_plugin_on_its_change() {
    let s = Scratch::new();
    let wt = worktree(&s);
    std::fs::write(wt.join("README"), "hello\nchanged in the worktree\n").expect("write");
    let saved = s.out.join("judge/prompt.txt");
    std::fs::create_dir_all(saved.parent().expect("parent")).expect("mkdir");
    let config = s.write(
        "config.toml",
        &format!(
            "{}[wasm]\nplugin_dirs = [\"{}\"]\ncache_dir = \"{}\"\n{}",
            allow_config(&[]),
            plugin_dir().display(),
            s.etc.join("cache").display(),
            recording_judge(&saved)
        ),
    );
    let gates = s.write(
        "gates.json",
        &format!(
            "[{}, {}]",
            json!({"judge": {"adapter": "record", "prompt": "Is the change clean?"}}),
            gate(
                "forbid-patterns",
                json!({"scope": "changed", "rules": [{"id": "x", "pattern": "XYZZY"}]}),
                json!({})
            ),
        ),
    );
    let stderr = standalone_stop(&s, &config, &gates, "s-wt", &wt);
    assert!(
        stderr.contains("no forbidden pattern in 1 file(s)"),
        "the plugin saw the worktree's one changed file: {stderr}"
    );
    let prompt = std::fs::read_to_string(&saved).expect("the judge ran");
    assert!(
        prompt.contains("+changed in the worktree"),
        "the judge saw the worktree's change: {prompt}"
    );
}

/// Attaching a commit policy for `wt`; the refusal's message.
fn refused_attach(d: &Daemon) -> String {
    let body = json!({
        "sessionId": "s1",
        "gate": {"command": "true"},
        "then": "commit",
        "commit": {"paths": ["README"], "message": "m"}
    });
    let (code, v) = d.post("/v1/policies", &d.agent, Some(body));
    assert_eq!(code, 400, "{v}");
    assert_eq!(v["error"]["field"], "commit", "{v}");
    v["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Every path under `dir` (symlinks not followed), with its size.
fn listing(dir: &Path) -> Vec<(PathBuf, u64)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let meta = e.path().symlink_metadata().expect("lstat");
            if meta.is_dir() {
                stack.push(e.path());
            }
            out.push((e.path(), if meta.is_dir() { 0 } else { meta.len() }));
        }
    }
    out.sort();
    out
}

#[test]
fn a_gitfile_pointing_elsewhere_is_refused_naming_the_path_and_nothing_is_written() {
    let s = Scratch::new();
    let wt = worktree(&s);
    let other = Scratch::new();
    let other_wt = worktree(&other);
    let d = daemon(&s, "");
    d.register("s1", &wt);
    let data = d.data.clone();
    let outside = s.out.join("outside");
    std::fs::create_dir_all(&outside).expect("mkdir");
    let other_before = listing(&other.ws.join(".git"));
    let outside_before = listing(&outside);
    let dot_git = wt.join(".git");
    let own = std::fs::read_to_string(&dot_git).expect("read .git");
    let entry = s.ws.join(".git/worktrees/wt");

    let cases: Vec<(String, String)> = vec![
        (
            format!("gitdir: {}\n", other.ws.join(".git/worktrees/wt").display()),
            format!(
                "{}/gitdir names",
                other.ws.join(".git/worktrees/wt").display()
            ),
        ),
        (
            format!("gitdir: {}\n", outside.display()),
            format!(
                "its gitdir {} is not REPOSITORY/worktrees/NAME",
                outside.display()
            ),
        ),
        (
            format!("gitdir: {}\n", data.display()),
            format!(
                "its gitdir {} is not REPOSITORY/worktrees/NAME",
                data.display()
            ),
        ),
        (
            format!("gitdir: {}/worktrees/x\n", data.display()),
            format!("{}/worktrees/x", data.display()),
        ),
    ];
    for (gitfile, says) in cases {
        std::fs::write(&dot_git, &gitfile).expect("write .git");
        let why = refused_attach(&d);
        assert!(why.contains(&says), "{gitfile}: {why}");
    }
    std::fs::write(&dot_git, &own).expect("restore .git");

    // A commondir that escapes to another repository.
    std::fs::write(
        entry.join("commondir"),
        format!("{}\n", other.ws.join(".git").display()),
    )
    .expect("write commondir");
    let why = refused_attach(&d);
    assert_has(&why, &format!("{}/commondir leads to", entry.display()));
    std::fs::write(entry.join("commondir"), "../..\n").expect("restore commondir");

    // A symlinked gitdir.
    let worktrees = s.ws.join(".git/worktrees");
    std::fs::rename(&entry, worktrees.join("real")).expect("rename");
    std::os::unix::fs::symlink(worktrees.join("real"), &entry).expect("symlink");
    let why = refused_attach(&d);
    assert_has(
        &why,
        &format!("its gitdir {} leads through a symlink", entry.display()),
    );
    std::fs::remove_file(&entry).expect("unlink");
    std::fs::rename(worktrees.join("real"), &entry).expect("rename back");

    // Nothing was written in the other repository, outside, or as a
    // repository in the data directory.
    assert_eq!(listing(&other.ws.join(".git")), other_before);
    assert_eq!(listing(&outside), outside_before);
    assert!(!data.join("worktrees").exists() && !data.join("objects").exists());
    assert_eq!(git_safe(&other_wt, &["status", "--porcelain"]), "");
    // Restored, the worktree is accepted again.
    std::fs::write(wt.join("README"), "hello\nagain\n").expect("write");
    let pid = d.attach(json!({
        "sessionId": "s1",
        "gate": {"command": "true"},
        "then": "commit",
        "commit": {"paths": ["README"], "message": "m"}
    }));
    d.report("s1", "turn-end");
    d.wait_status(&pid, "awaiting-ack", T);
    d.cli_ok(&["policy", "ack", &pid, "--approve"], &d.operator);
    d.wait_status(&pid, "done", T);
    assert_eq!(git_out(&s.ws, &["show", "agent:README"]), "hello\nagain\n");
}
