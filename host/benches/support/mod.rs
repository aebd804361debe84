//! What the benches share: their arguments, running a baseline and a
//! subject in alternation, quantiles, and generated workspaces. It never
//! measures anything itself and never prints.

// Each bench uses a part of it.
#![allow(dead_code)]

pub(crate) mod serve;

use std::ffi::OsString;
use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `--NAME N` from the command line, else `default`.
pub(crate) fn arg(name: &str, default: usize) -> usize {
    std::env::args()
        .skip_while(|a| a != name)
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

/// Whether `--only a,b,…` names `name` (everything runs without it).
pub(crate) fn selected(name: &str) -> bool {
    std::env::args()
        .skip_while(|a| a != "--only")
        .nth(1)
        .is_none_or(|list| list.split(',').any(|s| s == name))
}

/// The `q` quantile of `samples` (nearest rank).
pub(crate) fn quantile<T: Copy + Ord>(samples: &[T], q: f64) -> T {
    let mut s = samples.to_vec();
    s.sort();
    s[((s.len() as f64 - 1.0) * q).round() as usize]
}

/// `a` then `b`, `rounds` times after a warm-up of a tenth of them plus 3,
/// each preceded by `before` (not part of a sample); returns their samples.
pub(crate) fn alternate_with<T>(
    rounds: usize,
    mut before: impl FnMut(),
    mut a: impl FnMut() -> T,
    mut b: impl FnMut() -> T,
) -> (Vec<T>, Vec<T>) {
    for _ in 0..rounds / 10 + 3 {
        a();
        b();
    }
    let (mut xa, mut xb) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
    for _ in 0..rounds {
        before();
        xa.push(a());
        before();
        xb.push(b());
    }
    (xa, xb)
}

/// `f` as a sample: how long one call took.
pub(crate) fn timed(mut f: impl FnMut()) -> impl FnMut() -> Duration {
    move || {
        let t = Instant::now();
        f();
        t.elapsed()
    }
}

/// A workspace of `n` small Rust-like files under `root/src`, the one in
/// the middle holding a `dbg!(` when `planted`.
pub(crate) fn generate_workspace(root: &Path, n: usize, planted: bool) {
    for i in 0..n {
        let dir: PathBuf = root.join(format!("src/mod{}", i % 20));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let mut text = String::new();
        for line in 0..40 {
            text.push_str(&format!(
                "pub fn function_{i}_{line}(x: u32) -> u32 {{ x.wrapping_mul({line}) + {i} }}\n"
            ));
        }
        if planted && i == n / 2 {
            text.push_str("fn debug() { dbg!(1); }\n");
        }
        std::fs::write(dir.join(format!("file{i}.rs")), text).expect("write");
    }
}

/// CPU time (ns) every thread of `pid` has run, from each thread's
/// schedstat (nanoseconds, where /proc/PID/stat counts 10 ms ticks).
pub(crate) fn cpu_ns(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

pub(crate) fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next().and_then(|n| n.parse().ok()))
        .unwrap_or(0)
}

/// Serves `data` with `config`, idle for `seconds`: (CPU ms per second,
/// VmRSS KiB at the end).
pub(crate) fn idle_daemon(data: &Path, config: &Path, seconds: u64) -> (f64, u64) {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_gatehost"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data)
        .arg("--config")
        .arg(config)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn serve");
    let out = child.stdout.take().expect("stdout");
    let mut lines = std::io::BufReader::new(out).lines();
    loop {
        let line = lines.next().expect("serve output").expect("line");
        if line.starts_with("gatehost serve: listening on ") {
            break;
        }
    }
    std::thread::spawn(move || for _ in lines {});
    // Past the start (recovery, the first retention pass).
    std::thread::sleep(Duration::from_secs(2));
    let t0 = (Instant::now(), cpu_ns(child.id()));
    std::thread::sleep(Duration::from_secs(seconds));
    let ns = cpu_ns(child.id()).saturating_sub(t0.1);
    let wall = t0.0.elapsed().as_secs_f64();
    let rss = rss_kib(child.id());
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
    (ns as f64 / 1e6 / wall, rss)
}

/// The store file of the data directory `data` (created and migrated by
/// `Store::open`), opened straight for a seed of bulk rows in SQL: the
/// benches' fixtures only (the daemon reaches the store through its
/// interface; a seed of millions of rows through its typed operations
/// would take minutes).
pub(crate) fn seed_connection(data: &Path) -> rusqlite::Connection {
    drop(gatehost::store::Store::open(data).expect("store"));
    let c = rusqlite::Connection::open(data.join("gatehost.db")).expect("open the store file");
    c.busy_timeout(Duration::from_secs(5))
        .expect("busy timeout");
    c
}

/// Writes an exited session `session` and `n` settled policies on it
/// straight into the store of `data` (`pol_<i, 32 digits>`, seq `i + 1`):
/// every `blocked_every`th (0: none) `blocked` with its reason, the rest
/// `done`.
pub(crate) fn settled_policies(data: &Path, session: &str, n: usize, blocked_every: usize) {
    use serde_json::json;
    let now = gatehost::store::now_ms();
    let mut c = seed_connection(data);
    c.execute(
        "INSERT INTO sessions(id, cwd, workspace, state, created_at, updated_at) VALUES(?1, '/tmp', '/tmp', 'exited', ?2, ?2)",
        rusqlite::params![session, now],
    )
    .expect("session");
    let members = json!([session]).to_string();
    for chunk in (0..n).collect::<Vec<_>>().chunks(10_000) {
        let tx = c.transaction().expect("begin");
        {
            let mut st = tx.prepare_cached(
                "INSERT INTO policies(id, seq, spec, status, sessions, pending, watch_after, gate_runs, verdict, reason, created_at, updated_at)
                 VALUES(?1, ?2, ?3, ?4, ?5, '[]', 0, 1, ?6, ?7, ?8, ?8)",
            ).expect("prepare");
            for &i in chunk {
                let blocked = blocked_every > 0 && i % blocked_every == 0;
                let (status, outcome, reason) = if blocked {
                    ("blocked", "fail", "out of retries: exited with code 1")
                } else {
                    ("done", "pass", "exited with code 0")
                };
                st.execute(rusqlite::params![
                    format!("pol_{i:032}"),
                    i as i64 + 1,
                    json!({"sessionId": session, "sessionIds": [session], "gate": {"command": "true"}, "label": format!("p{i}"), "then": "emit", "onFail": {}, "attachedBy": "agent"}).to_string(),
                    status,
                    members,
                    json!({"outcome": outcome, "reason": reason, "gates": [{"gate": "shell: true", "outcome": outcome}]}).to_string(),
                    reason,
                    now,
                ])
                .expect("policy");
            }
        }
        tx.commit().expect("policies");
    }
}

/// Stores `n` live sessions `s0`…, every one heard from now.
pub(crate) fn live_sessions(store: &gatehost::store::Store, n: usize) {
    use gatehost::store::{SessionRow, SessionState, now_ms};
    let now = now_ms();
    store
        .write(|tx| {
            for i in 0..n {
                tx.put_session(&SessionRow {
                    host: None,
                    id: format!("s{i}"),
                    label: None,
                    cwd: "/tmp".into(),
                    workspace: "/tmp".into(),
                    state: SessionState::Running,
                    turns: 0,
                    last_turn_cursor: None,
                    last_message: None,
                    heartbeat_at: Some(now),
                    notify_url: None,
                    command: None,
                    pid: None,
                    created_at: now,
                    updated_at: now,
                    owner: gatehost::config::Trust::Agent,
                    key_digest: None,
                    stale_at: None,
                    damage: None,
                    workspace_pin: None,
                })?;
            }
            Ok(())
        })
        .expect("fill");
}

/// One whole process: spawned, fed `stdin`, its output read, reaped.
pub(crate) struct Run {
    pub elapsed: Duration,
    pub code: i32,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// `ru_maxrss` from wait4, KiB.
    pub max_rss_kib: i64,
    /// User and system CPU time from wait4 (all its threads, and its
    /// children that it reaped).
    pub cpu: Duration,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {} after {:?}\nstdout: {}\nstderr: {}",
            self.code,
            self.elapsed,
            String::from_utf8_lossy(&self.stdout),
            String::from_utf8_lossy(&self.stderr)
        )
    }
}

/// Runs `git ARGS` in `dir` (stdout discarded) and asserts it succeeded.
pub(crate) fn git(program: &Path, dir: &Path, args: &[&str]) {
    let ok = Command::new(program)
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .status()
        .expect("git")
        .success();
    assert!(ok, "git {args:?}");
}

/// A Claude Code `Stop` hook's stdin for session `session` in `cwd`.
pub(crate) fn claude_stop(session: &str, cwd: &Path) -> Vec<u8> {
    serde_json::json!({
        "session_id": session,
        "cwd": cwd,
        "hook_event_name": "Stop",
        "stop_hook_active": false,
        "last_assistant_message": "done",
    })
    .to_string()
    .into_bytes()
}

/// `gatehost hook claude --gates G --config C --state-dir S`'s arguments.
pub(crate) fn hook_claude_args(gates: &Path, config: &Path, state: &Path) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec!["hook".into(), "claude".into()];
    for (flag, value) in [
        ("--gates", gates),
        ("--config", config),
        ("--state-dir", state),
    ] {
        args.push(flag.into());
        args.push(value.into());
    }
    args
}

/// Spawns `program` with a clean environment (PATH and HOME only), writes
/// `stdin` and closes it, reads stdout and stderr to their end and reaps
/// the process with wait4, timing all of it.
pub(crate) fn spawn(program: &Path, args: &[OsString], stdin: &[u8]) -> Run {
    let start = Instant::now();
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", std::env::var_os("HOME").unwrap_or_default())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Reaped below with wait4(2).
    #[allow(clippy::zombie_processes)]
    let mut child = cmd.spawn().expect("spawn");
    let pid = child.id() as i32;
    if let Some(mut input) = child.stdin.take() {
        // A program that does not read its stdin (`true`) may be gone
        // already: a broken pipe is what a CLI's hook runner sees then too.
        let _ = input.write_all(stdin);
    }
    let mut err = child.stderr.take().expect("stderr");
    let stderr = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        s
    });
    let mut stdout = Vec::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_end(&mut stdout)
        .expect("read stdout");
    let stderr = stderr.join().expect("stderr reader");
    let mut status = 0;
    // SAFETY: `rusage` is plain data: all zeroes is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 on our own unreaped child with valid out-pointers.
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let elapsed = start.elapsed();
    assert_eq!(rc, pid, "wait4");
    assert!(libc::WIFEXITED(status), "killed: status {status}");
    Run {
        elapsed,
        code: libc::WEXITSTATUS(status),
        stdout,
        stderr,
        max_rss_kib: usage.ru_maxrss,
        cpu: tv(usage.ru_utime) + tv(usage.ru_stime),
    }
}

fn tv(t: libc::timeval) -> Duration {
    Duration::from_micros(t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64)
}

/// This process's own peak RSS (VmHWM), KiB.
pub(crate) fn rss_hwm_kib() -> Option<i64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// File `i`'s text (`version` 0 as committed).
pub(crate) fn file_text(i: usize, version: u64) -> String {
    let mut text = format!("//! File {i}, version {version}.\n");
    for line in 0..8 {
        text.push_str(&format!(
            "pub fn f{i}_{line}(x: u32) -> u32 {{ x.wrapping_add({line}) }}\n"
        ));
    }
    text
}

/// File `i`'s path.
pub(crate) fn path_of(i: usize) -> String {
    format!("src/d{:03}/f{i:05}.rs", i / 100)
}

/// A repository of `n` files at `ws` (`src/dNNN/fNNNNN.rs`, 100 to a
/// directory, about 450 bytes each): every blob and one commit through
/// `git fast-import` (one pack), then `git reset --hard` writes the tree
/// and the index, as a checkout does.
pub(crate) fn make_repository(program: &Path, ws: &Path, n: usize) {
    std::fs::create_dir_all(ws).expect("mkdir");
    let run = |args: &[&str]| git(program, ws, args);
    run(&["init", "-q", "-b", "main"]);
    let mut child = Command::new(program)
        .args(["fast-import", "--quiet"])
        .current_dir(ws)
        .stdin(Stdio::piped())
        .spawn()
        .expect("git fast-import");
    {
        let mut w = std::io::BufWriter::new(child.stdin.take().expect("stdin"));
        for i in 0..n {
            let text = file_text(i, 0);
            write!(w, "blob\nmark :{}\ndata {}\n{text}\n", i + 1, text.len()).expect("stream");
        }
        writeln!(
            w,
            "commit refs/heads/main\ncommitter bench <bench@example.com> 1700000000 +0000\ndata 5\nstart"
        )
        .expect("stream");
        for i in 0..n {
            writeln!(w, "M 100644 :{} {}", i + 1, path_of(i)).expect("stream");
        }
        writeln!(w).expect("stream");
    }
    assert!(child.wait().expect("fast-import").success(), "fast-import");
    run(&["reset", "--hard", "-q"]);
}

/// A load generator (`--load N`): N busy processes (`sh -c 'while :; do :;
/// done'`), running until [`Load::stop`] or the value is dropped, which
/// kills and reaps them (none is left).
pub(crate) struct Load(Vec<std::process::Child>);

impl Load {
    /// Starts `n` busy processes (none for 0).
    pub(crate) fn start(n: usize) -> Load {
        Load(
            (0..n)
                .map(|_| {
                    Command::new("sh")
                        .args(["-c", "while :; do :; done"])
                        .spawn()
                        .expect("a busy process")
                })
                .collect(),
        )
    }

    /// How many busy processes run.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// Kills and reaps them.
    pub(crate) fn stop(&mut self) {
        for mut child in self.0.drain(..) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The system's one-minute load average, as `/proc/loadavg` says (0 where
/// it cannot be read).
pub(crate) fn loadavg() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|l| l.parse().ok()))
        .unwrap_or(0.0)
}

/// `--NAME a,b,c` from the command line as numbers, else `default`.
pub(crate) fn list_arg(name: &str, default: &[usize]) -> Vec<usize> {
    std::env::args()
        .skip_while(|a| a != name)
        .nth(1)
        .map(|l| l.split(',').filter_map(|s| s.parse().ok()).collect())
        .unwrap_or_else(|| default.to_vec())
}
