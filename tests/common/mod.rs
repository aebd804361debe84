//! Helpers shared by the integration tests: a scratch workspace with the
//! operator's files beside it (never inside), running the real `gatehost`
//! binary, and proving that no process a test started is left alive.
#![allow(dead_code)]

pub mod acp_agents;
pub mod agents;
pub mod browser;
pub mod chaos;
pub mod daemon;
pub mod daemon_git;
pub mod daemon_setup;
pub mod headless;
pub mod hooks;
pub mod plugins;
pub mod shorthand;
pub mod tcp_proxy;
pub mod webhooks;

// Each test binary uses some of these (`in_process` few).
#[allow(unused_imports)]
pub use shorthand::{
    arg, assert_has, assert_lacks, assert_nothing_left, assert_reason, assert_refused,
    assert_starts, assert_took, assert_within, etc_dir, gatehost, str_of, strs_of,
};

use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The longest a single gatehost run may take in a test.
const WATCHDOG: Duration = Duration::from_secs(90);

pub fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
        .join(rel)
}

pub fn fixture_str(rel: &str) -> String {
    fixture(rel).display().to_string()
}

/// A marker unique to this test run, to find the processes a test started.
pub fn marker(name: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "{name}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Pids whose command line contains `gatehost-test-MARKER`.
pub fn survivors(marker: &str) -> Vec<i32> {
    pids_whose("cmdline", &format!("gatehost-test-{marker}"))
}

/// Pids whose `/proc/PID/FILE` (cmdline, environ) contains `needle`.
fn pids_whose(file: &str, needle: &str) -> Vec<i32> {
    let mut found = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for e in entries.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            if let Ok(text) = std::fs::read(format!("/proc/{pid}/{file}"))
                && String::from_utf8_lossy(&text).contains(needle)
            {
                found.push(pid);
            }
        }
    }
    found
}

/// Fails when a process carrying the marker is alive. Allows the kernel a
/// moment to finish tearing down what was already killed.
pub fn assert_no_survivors(marker: &str) {
    assert_none_left(marker, || survivors(marker));
}

/// The environment variable [`assert_no_env_survivors`] finds processes
/// by: set on a process it is inherited by all its descendants (a
/// browser's helpers included), whatever their command lines.
pub const MARKER_ENV: &str = "GATEHOST_TEST_MARKER";

/// Pids whose environment holds `MARKER_ENV=gatehost-test-MARKER`.
pub fn env_survivors(marker: &str) -> Vec<i32> {
    pids_whose("environ", &format!("{MARKER_ENV}=gatehost-test-{marker}"))
}

/// As [`assert_no_survivors`], for processes whose environment holds
/// `MARKER_ENV=gatehost-test-MARKER`.
pub fn assert_no_env_survivors(marker: &str) {
    assert_none_left(marker, || env_survivors(marker));
}

fn assert_none_left(marker: &str, find: impl Fn() -> Vec<i32>) {
    let deadline = Instant::now() + Duration::from_millis(500);
    loop {
        let left = find();
        if left.is_empty() {
            return;
        }
        if Instant::now() > deadline {
            for pid in &left {
                // Clean up so one failure does not leak into other tests.
                // SAFETY: kill(2) with a pid this test's marker found.
                unsafe { libc::kill(*pid, libc::SIGKILL) };
            }
            panic!("processes left alive for marker {marker}: {left:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Fails when a cgroup made by the gatehost process `pid` still exists.
pub fn assert_no_cgroups_left(pid: u32) {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return;
    };
    let Some(mount) = info.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        (right.split_whitespace().next()? == "cgroup2")
            .then(|| left.split_whitespace().nth(4).map(PathBuf::from))?
    }) else {
        return;
    };
    let prefix = format!("gatehost-{pid}-");
    let mut left = Vec::new();
    // And the v1 memory and pids hierarchies, where gates get cgroups
    // when v2 lacks those controllers.
    let v1 = info.lines().filter_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let mut r = right.split_whitespace();
        let v1_bounds =
            r.next()? == "cgroup" && r.nth(1)?.split(',').any(|o| o == "memory" || o == "pids");
        v1_bounds.then(|| left.split_whitespace().nth(4).map(PathBuf::from))?
    });
    let dirs: Vec<PathBuf> = walk_dirs(&mount, 3)
        .into_iter()
        .chain(v1.flat_map(|m| walk_dirs(&m, 4)))
        .collect();
    for entry in dirs {
        if entry
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(&prefix))
        {
            left.push(entry);
        }
    }
    assert!(left.is_empty(), "cgroups left behind: {left:?}");
}

fn walk_dirs(dir: &Path, depth: usize) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if depth == 0 {
        return out;
    }
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                out.push(e.path());
                out.extend(walk_dirs(&e.path(), depth - 1));
            }
        }
    }
    out
}

/// A scratch area: `ws/` is the workspace, `etc/` holds the operator's
/// configuration, gate files and the daemon's data directory, outside the
/// workspace root (a root that holds the data directory is refused at
/// start); `out/` is where test judges and gates granted it write what
/// they saw.
pub struct Scratch {
    _dir: tempfile::TempDir,
    _etc: tempfile::TempDir,
    pub ws: PathBuf,
    pub etc: PathBuf,
    pub out: PathBuf,
}

/// Where tests make their workspaces: the agent token's root in every
/// test configuration (`DAEMON_ROOTS`).
pub const TEST_WORKSPACE_ROOT: &str = "/tmp/gatehost-tests-ws";
/// Where tests keep configurations and data directories, apart from it.
pub const TEST_ETC_ROOT: &str = "/tmp/gatehost-tests-etc";

/// A fresh directory under the test workspace root.
pub fn workspace_tempdir() -> tempfile::TempDir {
    std::fs::create_dir_all(TEST_WORKSPACE_ROOT).expect("mkdir the workspace root");
    tempfile::tempdir_in(TEST_WORKSPACE_ROOT).expect("tempdir")
}

impl Scratch {
    pub fn new() -> Self {
        let dir = workspace_tempdir();
        std::fs::create_dir_all(TEST_ETC_ROOT).expect("mkdir the etc root");
        let etc_dir = tempfile::tempdir_in(TEST_ETC_ROOT).expect("tempdir");
        let ws = dir.path().join("ws");
        let etc = etc_dir.path().join("etc");
        let out = dir.path().join("out");
        for d in [&ws, &etc, &out] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        Scratch {
            _dir: dir,
            _etc: etc_dir,
            ws,
            etc,
            out,
        }
    }

    pub fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.etc.join(rel);
        std::fs::write(&p, text).expect("write");
        p
    }

    pub fn write_ws(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.ws.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(&p, text).expect("write");
        p
    }

    /// Runs `gatehost check --json` with this config and gate text.
    pub fn check(&self, config: &str, gate: &str, extra: &[&str]) -> CliRun {
        let cfg = self.write("config.toml", config);
        let gate = self.write("gate.json", gate);
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        run_gatehost(&check_args(&cfg, &self.ws, &extra, &gate), &[])
    }
}

/// `check --json --config CONFIG --workspace WS EXTRA... GATE`.
pub fn check_args(config: &Path, workspace: &Path, extra: &[String], gate: &Path) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "check".into(),
        "--json".into(),
        "--config".into(),
        config.display().to_string(),
        "--workspace".into(),
        workspace.display().to_string(),
    ];
    args.extend(extra.iter().cloned());
    args.push(gate.display().to_string());
    args
}

/// Runs `check` on the shipped example (files under examples/), with
/// `extra` options whose file arguments are example-relative.
pub fn check_example(gate_file: &str, option: &str, option_file: &str) -> CliRun {
    let ex = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let extra = vec![
        option.to_string(),
        ex.join(option_file).display().to_string(),
    ];
    run_gatehost(
        &check_args(
            &ex.join("gatehost.toml"),
            &ex.join("workspace"),
            &extra,
            &ex.join(gate_file),
        ),
        &[],
    )
}

/// One run of the gatehost binary.
#[derive(Debug)]
pub struct CliRun {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
    /// Peak resident memory of the gatehost process itself, in KiB.
    pub max_rss_kib: i64,
    pub pid: u32,
}

impl CliRun {
    /// Asserts that gatehost's own peak resident memory stayed under `mib`.
    #[track_caller]
    pub fn assert_host_stayed_under_mib(&self, mib: i64) {
        // A gatehost process maps its binary and runtime: several MiB.
        assert!(
            self.max_rss_kib > 1024,
            "no memory sample of gatehost was taken ({} KiB)",
            self.max_rss_kib
        );
        assert!(
            self.max_rss_kib < mib * 1024,
            "gatehost grew to {} KiB (limit {mib} MiB)",
            self.max_rss_kib
        );
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(self.stdout.trim()).unwrap_or_else(|e| {
            panic!(
                "stdout is not one JSON object ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }

    pub fn outcome(&self) -> String {
        self.json()["outcome"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    pub fn reason(&self) -> String {
        self.json()["reason"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// The verdict of the first gate that ran.
    pub fn gate0(&self) -> Value {
        self.json()["gates"][0].clone()
    }
}

/// Runs the binary with a clean environment plus `env`, measuring its peak
/// memory as its own `VmHWM`, read every 2 ms while it runs. (Not wait4's
/// `ru_maxrss`: a child spawned with vfork semantics is charged at exec
/// with the high-water mark of the test process, which runs every test's
/// in-process work and so says nothing about gatehost.)
/// Waits, at most `limit`, until `f` holds; fails naming `what`.
pub fn eventually_within(limit: std::time::Duration, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + limit;
    while !f() {
        assert!(std::time::Instant::now() < deadline, "never: {what}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

pub fn run_gatehost(args: &[String], env: &[(&str, &str)]) -> CliRun {
    let start = Instant::now();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gatehost"));
    cmd.args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", std::env::var_os("HOME").unwrap_or_default())
        // Piped and held open until gatehost exits: a gate that wrongly
        // inherited it would wait on it instead of seeing end-of-file.
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    // Reaped below with wait4(2).
    #[allow(clippy::zombie_processes)]
    let mut child = cmd.spawn().expect("spawn gatehost");
    let pid = child.id();
    let held_stdin = child.stdin.take();
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel::<(u8, String)>();
    let tx2 = tx.clone();
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        let _ = tx.send((1, s));
    });
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        let _ = tx2.send((2, s));
    });
    // Watchdog: a hung gatehost fails the test instead of hanging the suite.
    // It also samples the child's peak memory.
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let done2 = done.clone();
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicI64::new(0));
    let peak2 = peak.clone();
    std::thread::spawn(move || {
        let deadline = Instant::now() + WATCHDOG;
        while Instant::now() < deadline {
            if done2.load(Ordering::SeqCst) {
                return;
            }
            if let Some(kib) = vm_hwm_kib(pid) {
                peak2.fetch_max(kib, Ordering::SeqCst);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        if !done2.load(Ordering::SeqCst) {
            // SAFETY: kill(2) on our own unreaped child.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
    });
    let mut status = 0;
    // SAFETY: `rusage` is plain data: all zeroes is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: plain wait4 on our own child with valid out-pointers.
    let rc = unsafe { libc::wait4(pid as i32, &mut status, 0, &mut usage) };
    done.store(true, Ordering::SeqCst);
    drop(held_stdin);
    assert_eq!(rc, pid as i32, "wait4 failed");
    let elapsed = start.elapsed();
    let (mut stdout, mut stderr) = (String::new(), String::new());
    for _ in 0..2 {
        match rx.recv_timeout(Duration::from_secs(5)) {
            Ok((1, s)) => stdout = s,
            Ok((_, s)) => stderr = s,
            Err(_) => panic!("gatehost exited but something still holds its output open"),
        }
    }
    assert!(
        libc::WIFEXITED(status),
        "gatehost did not exit normally (status {status}); stderr:\n{stderr}"
    );
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    };
    CliRun {
        code,
        stdout,
        stderr,
        elapsed,
        max_rss_kib: peak.load(Ordering::SeqCst),
        pid,
    }
}

/// `VmHWM` of a live process: the peak of its own memory since its exec.
pub fn vm_hwm_kib(pid: u32) -> Option<i64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// A config allowing `bash` with any arguments (to run fixture scripts)
/// and the given programs (without arguments from the agent), with the
/// fixture scripts readable in the sandbox.
pub fn allow_config(extra: &[&str]) -> String {
    let mut allow: Vec<String> = vec!["{ program = \"bash\", free_args = true }".into()];
    allow.extend(extra.iter().map(|p| format!("\"{p}\"")));
    format!(
        "{}[shell]\nallow = [{}]\n{}",
        sandbox_config(&[]),
        allow.join(", "),
        DAEMON_ROOTS
    )
}

/// The `[daemon]` section every test config has: the agent token may
/// register workspaces under the tests' workspace root (where
/// `Scratch` and `workspace_tempdir` make theirs), which holds none of the
/// host's own places. Tests add `[daemon]` keys by replacing this line.
pub const DAEMON_ROOTS: &str = "[daemon]\nworkspace_roots = [\"/tmp/gatehost-tests-ws\"]\n";

/// A `[sandbox]` section granting the fixture scripts (read) and `write`.
pub fn sandbox_config(write: &[&Path]) -> String {
    let q = |p: &Path| format!("{:?}", p.display().to_string());
    let write: Vec<String> = write.iter().map(|p| q(p)).collect();
    format!(
        "[sandbox]\nread = [{}]\nwrite = [{}]\n",
        q(&fixture("")),
        write.join(", ")
    )
}

/// JSON for a shell gate running a fixture script with bash.
pub fn script_gate(script: &str, args: &[&str], timeout_ms: u64) -> String {
    let mut argv = vec![serde_json::Value::String(fixture_str(script))];
    argv.extend(
        args.iter()
            .map(|a| serde_json::Value::String(a.to_string())),
    );
    serde_json::json!({"command": "bash", "args": argv, "timeoutMs": timeout_ms}).to_string()
}

/// Runs `gatehost hook claude ARGS` once with `input` on stdin and `env`
/// added; asserts it exits 0 and returns its stdout (the CLI's answer).
pub fn claude_hook_once(args: &[&str], env: &[(&str, &str)], input: &Value) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_gatehost"))
        .args(["hook", "claude"])
        .args(args)
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("gatehost hook");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.to_string().as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    String::from_utf8(out.stdout).expect("utf-8")
}

/// A standalone `gatehost hook claude --gates GATES --config CONFIG` on
/// a Stop in `s.ws` (its state in `s.out/state`, PATH and HOME its only
/// environment, stdin and stdout piped; the caller sets stderr and any
/// more environment), spawned with the Stop's JSON written to its stdin.
pub fn spawn_claude_stop(
    s: &Scratch,
    gates: &Path,
    config: &Path,
    shape: impl FnOnce(&mut Command) -> &mut Command,
) -> std::process::Child {
    use std::io::Write;
    let stop = serde_json::json!({
        "session_id": "stop",
        "cwd": s.ws,
        "hook_event_name": "Stop",
        "stop_hook_active": false,
        "last_assistant_message": "done",
    });
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gatehost"));
    cmd.args(["hook", "claude", "--gates"])
        .arg(gates)
        .arg("--config")
        .arg(config)
        .arg("--state-dir")
        .arg(s.out.join("state"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", std::env::var_os("HOME").unwrap_or_default())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    let mut child = shape(&mut cmd).spawn().expect("spawn gatehost hook");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stop.to_string().as_bytes())
        .expect("write the hook's input");
    child
}
