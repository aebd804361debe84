//! Issue 30's bounded memory: a standalone `gatehost hook claude` whose
//! plugin needs the change set, over a workspace holding a sparse 3 GiB
//! untracked file and a 1 GiB file of one line, runs its gate (it finds
//! the forbidden pattern in a small file beside them), keeps its peak RSS
//! (the hook process's own, from wait4) under 256 MiB, and its answer says
//! which files were capped and by which cap.

use crate::common::Scratch;
use crate::common::daemon::{git_commit_all, git_repo};
use std::io::{Read, Write};
use std::process::Stdio;

const GIB: u64 = 1024 * 1024 * 1024;

/// Runs the hook on a Stop in `s.ws`; its stdout and its peak RSS (KiB).
// The child is reaped by wait4 (for its own rusage), not by std's wait.
#[allow(clippy::zombie_processes)]
fn hook_rss(s: &Scratch, config: &std::path::Path, gates: &std::path::Path) -> (String, i64) {
    let mut child = crate::common::spawn_claude_stop(s, gates, config, |c| c.stderr(Stdio::null()));
    let mut stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 of the child this test spawned and has not waited for
    // (std's Child is never waited: its pid is reaped here, once).
    let got = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(got, pid, "wait4: {}", std::io::Error::last_os_error());
    let text = reader.join().expect("stdout");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the hook failed ({status}): {text}"
    );
    (text, usage.ru_maxrss)
}

/// A workspace with one commit, and a hook configuration whose one gate is
/// `forbid-patterns` over the change set, forbidding `dbg!(`: the scratch
/// directory, the configuration and the gates.
fn committed_with_forbid_dbg() -> (Scratch, std::path::PathBuf, std::path::PathBuf) {
    let s = Scratch::new();
    git_repo(&s.ws);
    s.write_ws("src/lib.rs", "fn a() {}\n");
    git_commit_all(&s.ws, "lib");
    let config = super::wasm_config(&s);
    let gates = s.write(
        "gates.json",
        &serde_json::json!({"wasm": {"plugin": "forbid-patterns", "config": {"scope": "changed", "rules": [
            {"id": "no-dbg", "pattern": "dbg!\\(", "message": "remove dbg!"}]}}})
        .to_string(),
    );
    (s, config, gates)
}

#[test]
fn a_hook_over_a_3_gib_file_and_a_1_gib_line_runs_its_gate_in_bounded_memory_and_says_what_it_capped()
 {
    let (s, config, gates) = committed_with_forbid_dbg();
    // Once on a small change: the plugin is compiled into the shared cache
    // (cranelift's memory is not the change set's), and the gate finds.
    s.write_ws("src/lib.rs", "fn a() { dbg!(1); }\n");
    let (first, _) = hook_rss(&s, &config, &gates);
    assert!(first.contains("remove dbg!"), "{first}");

    let sparse = std::fs::File::create(s.ws.join("huge.bin")).expect("create");
    sparse.set_len(3 * GIB).expect("set_len");
    {
        let line = std::fs::File::create(s.ws.join("line.txt")).expect("create");
        let mut w = std::io::BufWriter::new(line);
        let chunk = vec![b'a'; 1 << 20];
        for _ in 0..1024 {
            w.write_all(&chunk).expect("write");
        }
        w.flush().expect("flush");
    }
    let (answer, rss_kib) = hook_rss(&s, &config, &gates);
    let _ = std::fs::remove_file(s.ws.join("line.txt"));
    let _ = std::fs::remove_file(s.ws.join("huge.bin"));
    // The gate ran: it found the pattern in the small file.
    let v: serde_json::Value = serde_json::from_str(answer.trim()).expect("the hook's JSON");
    assert_eq!(v["decision"], "block", "{answer}");
    let reason = v["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("remove dbg!"), "{reason}");
    // It said what it did not read, and why.
    for (path, bytes) in [("huge.bin", 3 * GIB), ("line.txt", GIB)] {
        assert!(
            reason.contains(&format!(
                "{path}: not judged: its content was not read: {bytes} bytes, over the change set's per-file cap"
            )),
            "{path}: {reason}"
        );
    }
    assert!(
        rss_kib < 256 * 1024,
        "the hook's peak RSS was {} MiB",
        rss_kib / 1024
    );
}

/// A chain of 1,000 nested directories (the agent makes one in a second):
/// the walk used to recurse into it until the hook's stack overflowed and
/// the process aborted, which the agent's CLI takes for no objection. Now
/// the hook answers, blocking, and says how deep it goes.
#[test]
fn a_chain_of_nested_directories_deeper_than_the_walk_goes_is_a_block_not_a_crash() {
    use rustix::fs::{Mode, OFlags};
    let (s, config, gates) = committed_with_forbid_dbg();
    let mut dir = rustix::fs::open(&s.ws, OFlags::DIRECTORY | OFlags::RDONLY, Mode::empty())
        .expect("open the workspace");
    const DEPTH: usize = 1000;
    for _ in 0..DEPTH {
        rustix::fs::mkdirat(&dir, "d", Mode::from_raw_mode(0o755)).expect("mkdir");
        dir = rustix::fs::openat(&dir, "d", OFlags::DIRECTORY | OFlags::RDONLY, Mode::empty())
            .expect("open");
    }
    let leaf = rustix::fs::openat(
        &dir,
        "deep.txt",
        OFlags::CREATE | OFlags::WRONLY,
        Mode::from_raw_mode(0o644),
    )
    .expect("create");
    rustix::io::write(&leaf, b"dbg!(1)\n").expect("write");
    let (answer, _) = hook_rss(&s, &config, &gates);
    let v: serde_json::Value = serde_json::from_str(answer.trim()).expect("the hook's JSON");
    assert_eq!(v["decision"], "block", "{answer}");
    let reason = v["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("nests directories deeper than 512 levels"),
        "{reason}"
    );
    // Removed from the bottom up (a recursive removal holds a descriptor
    // per level).
    let mut chain: Vec<String> = (1..=DEPTH).map(|k| vec!["d"; k].join("/")).collect();
    std::fs::remove_file(s.ws.join(chain[DEPTH - 1].clone() + "/deep.txt")).expect("rm");
    while let Some(d) = chain.pop() {
        std::fs::remove_dir(s.ws.join(d)).expect("rmdir");
    }
}
