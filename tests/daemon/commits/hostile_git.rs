//! The agent's tricks against a commit: symlinks planted in `.git`, content
//! flipped under the gate, a person's live git holding its locks, and what
//! an agent policy's gate left in its worktree.

use crate::common;
use crate::common::shorthand::assert_has;

use super::{T, commit_policy, setup_with};
use common::allow_config;
use common::daemon::{Daemon, git_out, git_scratch};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Every file under `dir` (symlinks not followed) with its bytes.
fn tree_of(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read canary").flatten() {
            let p = e.path();
            let rel = p.strip_prefix(dir).expect("inside").display().to_string();
            let t = e.file_type().expect("type");
            if t.is_dir() {
                stack.push(p);
                out.insert(format!("{rel}/"), Vec::new());
            } else if t.is_symlink() {
                out.insert(
                    rel,
                    std::fs::read_link(&p)
                        .expect("link")
                        .into_os_string()
                        .into_encoded_bytes(),
                );
            } else {
                out.insert(rel, std::fs::read(&p).expect("read"));
            }
        }
    }
    out
}

/// Moves `.git/<rel>` (if it exists) into the canary and leaves a symlink
/// to it in its place.
fn plant_link(ws: &Path, canary: &Path, rel: &str) {
    let at = ws.join(".git").join(rel);
    let to = canary.join(rel.replace('/', "_"));
    if at.exists() {
        std::fs::rename(&at, &to).expect("move into the canary");
    } else if rel == "packed-refs" {
        std::fs::write(&to, "# pack-refs with: peeled fully-peeled sorted \n").expect("canary");
    } else {
        std::fs::write(&to, "canary\n").expect("canary file");
    }
    if let Some(parent) = at.parent() {
        std::fs::create_dir_all(parent).expect("mkdir");
    }
    std::os::unix::fs::symlink(&to, &at).expect("plant symlink");
}

#[test]
fn symlinks_planted_in_git_never_carry_a_commit_write_outside_the_workspace() {
    let plants: &[&str] = &[
        "logs/HEAD",
        "logs/refs/heads/main",
        "refs/heads",
        "refs/heads/main",
        "objects",
        "objects/xx",
        "index",
        "packed-refs",
        "gitfile",
        "dotgit-symlink",
        "fifo:logs/refs/heads/main",
        "fifo:HEAD",
        "fifo:index",
    ];
    for plant in plants {
        let (s, d) = setup_with("", "");
        // The reflogs exist, as after any commit made with git.
        git_out(&s.ws, &["reflog", "expire", "--all"]);
        let canary = s.etc.join("canary");
        std::fs::create_dir_all(&canary).expect("canary");
        s.write_ws("a.txt", "gated\n");
        let pid = d.attach(commit_policy(&["a.txt"], true));
        d.report("s1", "turn-end");
        d.wait_status(&pid, "awaiting-ack", T);
        // The agent booby-traps .git between the gate and the ack.
        match *plant {
            "objects/xx" => {
                for b in 0..=255u8 {
                    plant_link(&s.ws, &canary, &format!("objects/{b:02x}"));
                }
            }
            "gitfile" | "dotgit-symlink" => {
                let real = canary.join("realgit");
                std::fs::rename(s.ws.join(".git"), &real).expect("move .git");
                if *plant == "gitfile" {
                    std::fs::write(s.ws.join(".git"), format!("gitdir: {}\n", real.display()))
                        .expect("gitfile");
                } else {
                    std::os::unix::fs::symlink(&real, s.ws.join(".git")).expect("ln");
                }
            }
            fifo if fifo.starts_with("fifo:") => {
                // A FIFO would block whoever opens it, for good.
                let at = s.ws.join(".git").join(&fifo["fifo:".len()..]);
                let _ = std::fs::remove_file(&at);
                let c = std::ffi::CString::new(at.display().to_string()).expect("path");
                // SAFETY: mkfifo(3) with a valid NUL-terminated path.
                assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo");
            }
            rel => plant_link(&s.ws, &canary, rel),
        }
        let before = tree_of(&canary);
        let (code, body) = d.post(
            &format!("/v1/policies/{pid}/ack"),
            &d.operator,
            Some(json!({"approve": true})),
        );
        if !(200..300).contains(&code) {
            // Refused at the ack already: the layout checks saw the trap
            // (and named it).
            assert!(
                body["error"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .contains(".git"),
                "{plant}: {body}"
            );
            assert_eq!(tree_of(&canary), before, "{plant}");
            eprintln!("{plant}: ack refused ({})", body["error"]["message"]);
            continue;
        }
        let deadline = std::time::Instant::now() + T;
        let p = loop {
            let p = d.policy(&pid);
            if p["status"] == "done" || p["status"] == "blocked" {
                break p;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{plant}: stuck at {p}"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        assert_eq!(
            tree_of(&canary),
            before,
            "{plant}: a commit write went outside the workspace ({})",
            p["reason"]
        );
        if let Some(rel) = plant.strip_prefix("fifo:") {
            assert_eq!(p["status"], "blocked", "{plant}: {p}");
            assert!(
                p["reason"]
                    .as_str()
                    .unwrap_or_default()
                    .contains(&format!(".git/{rel} is a FIFO")),
                "{plant}: {p}"
            );
        }
        if matches!(*plant, "gitfile" | "dotgit-symlink") {
            assert_eq!(p["status"], "blocked", "{plant}: {p}");
            // A gitfile is taken only as a linked worktree's, and this one
            // names no repository's `worktrees/NAME` (see linked_worktrees.rs).
            let why = if *plant == "gitfile" {
                format!(
                    "its gitdir {} is not REPOSITORY/worktrees/NAME",
                    canary.join("realgit").display()
                )
            } else {
                ".git is neither a directory nor a regular file".to_string()
            };
            assert!(
                p["reason"].as_str().unwrap_or_default().contains(&why),
                "{plant}: {p}"
            );
        }
        if p["status"] == "blocked" {
            // The commit's own failure is an event, with the reason.
            let failed = d.all_events(&format!("&policy={pid}&types=commit-failed"));
            assert_eq!(failed.len(), 1, "{plant}: {p}");
            assert_eq!(failed[0]["payload"]["reason"], p["reason"], "{plant}");
        }
        eprintln!("{plant}: {} ({})", p["status"], p["reason"]);
    }
}

/// A flipping process swaps `a.txt` between clean and forbidden content
/// (the same bytes coming back) about a thousand times a second while 50
/// commit policies gate on it and are acked: whatever the timing, every
/// commit holds the content its gate judged (its tree is the snapshot's
/// tree the gate ran on), never the forbidden one. (Gated on the live
/// workspace, fingerprinted before and after, the forbidden content was
/// committed.)
#[test]
fn content_flipping_under_the_gate_is_never_committed_unjudged() {
    let (s, d) = setup_with("", "");
    s.write_ws("a.txt", "clean 0\n");
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flipped = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let flipper = {
        let (stop, flipped, path) = (stop.clone(), flipped.clone(), s.ws.join("a.txt"));
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                n += 1;
                flipped.store(n, std::sync::atomic::Ordering::Relaxed);
                // A -> B -> A -> C: clean contents come back byte for
                // byte, so a check before and after a gate cannot tell.
                let text = match n % 4 {
                    0 => "clean a\n",
                    2 => "clean b\n",
                    _ => "dbg!(x)\n",
                };
                let _ = std::fs::write(&path, text);
                std::thread::sleep(Duration::from_micros(500));
            }
            n
        })
    };
    let spec = json!({
        "sessionId": "s1",
        "gate": {"command": "bash", "args": ["-c", "sleep 0.02; grep -q '^clean' a.txt"]},
        "onFail": {"maxRetries": 0},
        "then": "commit",
        "commit": {"paths": ["a.txt"], "message": "gated", "requireHumanAck": true}
    });
    // Run until the race went both ways often enough and the content
    // flipped over a thousand times meanwhile (a loaded machine shifts the
    // odds and a quick host ends the rounds sooner, so neither a fixed
    // count of rounds nor of flips per round is assumed).
    let (mut passed, mut committed, mut refused) = (0, 0, 0);
    for _ in 0..400 {
        if passed >= 5 && refused >= 5 && flipped.load(std::sync::atomic::Ordering::Relaxed) > 1000
        {
            break;
        }
        let pid = d.attach(spec.clone());
        d.report("s1", "turn-end");
        let deadline = std::time::Instant::now() + T;
        let p = loop {
            let p = d.policy(&pid);
            if let Some("awaiting-ack" | "blocked") = p["status"].as_str() {
                break p;
            }
            assert!(std::time::Instant::now() < deadline, "{p}");
            std::thread::sleep(Duration::from_millis(10));
        };
        if p["status"] == "blocked" {
            refused += 1;
            continue;
        }
        passed += 1;
        let tree = common::daemon::snapshot_tree(&p);
        d.cli(&["policy", "ack", &pid, "--approve"], &d.operator);
        let p = d.wait_status(&pid, "done", T);
        let Some(sha) = p["commitSha"].as_str() else {
            continue; // the judged content was HEAD's already
        };
        committed += 1;
        assert_eq!(
            git_out(&s.ws, &["rev-parse", &format!("{sha}^{{tree}}")]).trim(),
            tree,
            "the commit is not the snapshot its gate ran on"
        );
        let content = git_out(&s.ws, &["show", &format!("{sha}:a.txt")]);
        assert!(
            content.starts_with("clean"),
            "committed unjudged content: {content:?}"
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let flips = flipper.join().expect("flipper");
    assert!(flips > 1000, "only {flips} flips");
    // Both outcomes happened: the test exercised the race both ways.
    assert!(
        passed >= 5 && refused >= 5 && committed >= 1,
        "{passed} passed ({committed} committed), {refused} refused"
    );
}

/// A real git holding a lock, started in its own process group so that
/// the test can end it (and its children) whatever happens.
struct LiveGit(std::process::Child);

impl LiveGit {
    fn spawn(ws: &Path, args: &[&str], env: &[(&str, &str)]) -> LiveGit {
        use std::os::unix::process::CommandExt;
        let child = std::process::Command::new("git")
            .args(args)
            .current_dir(ws)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "person")
            .env("GIT_AUTHOR_EMAIL", "p@p")
            .env("GIT_COMMITTER_NAME", "person")
            .env("GIT_COMMITTER_EMAIL", "p@p")
            .envs(env.iter().copied())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .process_group(0)
            .spawn()
            .expect("spawn git");
        LiveGit(child)
    }

    fn alive(&mut self) -> bool {
        matches!(self.0.try_wait(), Ok(None))
    }
}

impl Drop for LiveGit {
    fn drop(&mut self) {
        let pgid = self.0.id() as i32;
        // SAFETY: kill(2) on the process group of our own child.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
        let _ = self.0.wait();
        // Nothing of the group is left.
        let deadline = std::time::Instant::now() + T;
        // SAFETY: probing the group with signal 0.
        while unsafe { libc::kill(-pgid, 0) } == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "git group {pgid} left"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Issue 12 #11: a person's git holds the branch's lock (`git update-ref
/// --stdin`, a transaction prepared and waiting) and the index's (`git
/// commit` waiting in its editor), both made before the daemon started. A
/// commit policy's publish waits and retries, then is blocked with a
/// `policy:commit-failed` event; both locks stay where they are and both
/// gits live on. A second policy, waiting on those locks in `committing`,
/// can be cancelled, and commits nothing once they are released. (Before,
/// every lock older than the daemon was removed and the commit went
/// through under the person's git; and `committing` refused a cancel.)
#[test]
fn a_live_gits_locks_are_waited_for_never_removed_and_a_waiting_commit_can_be_cancelled() {
    let s = git_scratch();
    let head = git_out(&s.ws, &["rev-parse", "HEAD"]).trim().to_string();
    let editor = s.write("editor.sh", "#!/bin/sh\nsleep 600\n");
    std::fs::set_permissions(&editor, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    s.write_ws("README", "the person's change\n");
    let editor_env = editor.display().to_string();
    let mut committing_person = LiveGit::spawn(
        &s.ws,
        &["commit", "-a"],
        &[("GIT_EDITOR", editor_env.as_str())],
    );
    let mut transaction = LiveGit::spawn(&s.ws, &["update-ref", "--stdin"], &[]);
    {
        let stdin = transaction.0.stdin.as_mut().expect("stdin");
        write!(stdin, "start\nupdate refs/heads/main {head}\nprepare\n").expect("write");
        stdin.flush().expect("flush");
        let mut out = BufReader::new(transaction.0.stdout.as_mut().expect("stdout"));
        let mut line = String::new();
        for want in ["start: ok", "prepare: ok"] {
            line.clear();
            out.read_line(&mut line).expect("read");
            assert_eq!(line.trim(), want);
        }
    }
    let (ref_lock, index_lock) = (
        s.ws.join(".git/refs/heads/main.lock"),
        s.ws.join(".git/index.lock"),
    );
    let deadline = std::time::Instant::now() + T;
    while !index_lock.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "git commit took no lock"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(ref_lock.exists());
    std::thread::sleep(Duration::from_millis(50));
    let cfg = s.write("config.toml", &allow_config(&["true"]));
    let d = Daemon::start(&s.etc.join("data"), &cfg);
    d.register("s1", &s.ws);
    s.write_ws("gated.txt", "gated\n");
    let as_operator = |spec: Value| {
        let (code, body) = d.post("/v1/policies", &d.operator, Some(spec));
        assert_eq!(code, 201, "{body}");
        body["policyId"].as_str().expect("policyId").to_string()
    };
    let first = as_operator(commit_policy(&["gated.txt"], false));
    d.report("s1", "turn-end");
    let p = d.wait_status(&first, "blocked", Duration::from_secs(60));
    let failed = d.all_events(&format!("&policy={first}&types=commit-failed"));
    assert_eq!(failed.len(), 1, "{p}");
    assert!(
        ref_lock.exists() && index_lock.exists(),
        "a live git's lock was removed"
    );
    assert!(committing_person.alive() && transaction.alive());
    assert_eq!(git_out(&s.ws, &["rev-parse", "HEAD"]).trim(), head);
    assert_has(&d.log(), "retrying");
    // A second one waits on the same locks, in `committing`: cancelled.
    let second = as_operator(json!({
        "sessionId": "s1", "gate": {"command": "true"}, "watchFrom": "now", "then": "commit",
        "commit": {"paths": ["gated.txt"], "message": "second", "requireHumanAck": false}
    }));
    d.report("s1", "turn-end");
    d.wait_status(&second, "committing", T);
    d.cli_ok(&["policy", "cancel", &second], &d.operator);
    let p = d.policy(&second);
    assert_eq!(p["status"], "cancelled", "{p}");
    let ev = d.all_events(&format!("&policy={second}&types=cancelled"));
    assert_eq!(ev[0]["payload"]["from"], "committing");
    // The person's gits end; the cancelled policy commits nothing.
    drop(transaction);
    drop(committing_person);
    let _ = std::fs::remove_file(&index_lock);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(git_out(&s.ws, &["rev-parse", "HEAD"]).trim(), head);
    assert_eq!(d.policy(&second)["status"], "cancelled");
    assert!(
        d.all_events(&format!("&policy={second}&types=committed"))
            .is_empty()
    );
}

/// Issue 24, item 3: what a gate of a policy the agent attached wrote in
/// its snapshot worktree (here in an ignored `cache/`, as a planted `.pyc`
/// in `__pycache__/` would be) never reaches the gate of a policy the
/// operator attached (before: the worktree kept every ignored file, and
/// both policies used the same one).
#[test]
fn what_an_agent_policys_gate_left_in_its_worktree_never_reaches_the_operators() {
    let (s, d) = setup_with("", "");
    s.write_ws(".gitignore", "cache/\n");
    git_out(&s.ws, &["add", ".gitignore"]);
    common::daemon::git_as_tester(&s.ws, &["commit", "-qm", "ignore cache"]);
    s.write_ws("src/lib.rs", "pub fn f() {}\n");
    let policy = |script: &str| {
        json!({"sessionId": "s1",
               "gate": {"command": "bash", "args": ["-c", script]},
               "then": "commit", "onFail": {"maxRetries": 0},
               "commit": {"paths": ["src"], "message": "m"}})
    };
    let planter = d.attach(policy("mkdir -p cache && echo planted > cache/planted"));
    d.report("s1", "turn-end");
    d.wait_status(&planter, "awaiting-ack", T);
    let (code, body) = d.post(&format!("/v1/policies/{planter}/cancel"), &d.operator, None);
    assert_eq!(code, 200, "{body}");

    let (code, body) = d.post(
        "/v1/policies",
        &d.operator,
        Some(policy("test ! -e cache/planted")),
    );
    assert_eq!(code, 201, "{body}");
    let checker = body["policyId"].as_str().expect("id").to_string();
    s.write_ws("src/lib.rs", "pub fn f() -> u8 { 1 }\n");
    d.report("s1", "turn-end");
    let p = d.wait_status(&checker, "awaiting-ack", T);
    assert_eq!(p["status"], "awaiting-ack", "{p}");
}
