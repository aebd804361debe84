//! The test hooks: the points where a whole-program test reaches into the
//! daemon to make a rare moment happen on demand (the daemon dies at a
//! chosen step, store writes fail, a task waits at a barrier, a workspace
//! is swapped mid-open). Each is read from an environment variable
//! `GATEHOST_TEST_<NAME>` that the test sets on the daemon it starts.
//!
//! It owns every such variable: no other module reads one; a call site
//! calls this module's function, named after the moment. It must never be
//! in the product: without the cargo feature `test-hooks` every hook is a
//! constant or a no-op, and no variable name is compiled in. The feature is
//! turned on by gatehost's `test-hooks` feature, which gatehost's
//! dev-dependency on itself turns on (`host/Cargo.toml`), so by every test
//! build and by no `cargo build` or `cargo install`;
//! `scripts/test.sh` checks that a binary built without it holds no
//! `GATEHOST_TEST_` string (docs/contributing.md, "Test hooks").

#![warn(missing_docs)]

use std::path::Path;
use std::time::Duration;

/// The value of the test hook variable `GATEHOST_TEST_<$name>`; always
/// `None` without the feature (and then the name is not in the binary).
macro_rules! var {
    ($name:literal) => {{
        #[cfg(feature = "test-hooks")]
        let value = std::env::var_os(concat!("GATEHOST_TEST_", $name));
        #[cfg(not(feature = "test-hooks"))]
        let value: Option<std::ffi::OsString> = None;
        value
    }};
}

/// The message of a store write failed by [`StoreFaults`] (a test looks
/// for it in the daemon's log).
#[cfg(feature = "test-hooks")]
const STORE_FAULT: &str = "injected by GATEHOST_TEST_STORE_FAULTS";

/// The most a barrier holds its task: a test that never opens it gets a
/// daemon that goes on (and says so), not one stuck for good.
const BARRIER_HOLDS_AT_MOST: Duration = Duration::from_secs(60);

/// How often a barrier looks for its file.
const BARRIER_LOOKS_EVERY: Duration = Duration::from_millis(5);

/// `ABORT_AFTER_REGISTER=ID`: the daemon dies (abort) right after session
/// ID's registration is stored and before it is answered, as a SIGKILL
/// there would (`tests/daemon_restart_leftovers.rs`).
pub fn abort_after_register(id: &str) {
    if var!("ABORT_AFTER_REGISTER").is_some_and(|v| v == id) {
        tracing::error!(
            session = id,
            "test hook: the daemon dies before answering a registration"
        );
        std::process::abort();
    }
}

/// `ABORT_BEFORE_STEP_POLICY=FLAG`: the daemon dies between a routine's
/// policy step's stored start and its policy's attach, once: only while the
/// file FLAG exists, and it is removed first
/// (`tests/daemon_routine_faults.rs`).
pub fn abort_before_step_policy(session: &str) {
    if let Some(flag) = var!("ABORT_BEFORE_STEP_POLICY")
        && std::fs::remove_file(&flag).is_ok()
    {
        tracing::error!(
            session,
            "test hook: aborting the daemon before a step's policy is attached"
        );
        std::process::abort();
    }
}

/// `ABORT_GATE_LABEL=LABEL`: the gate of a policy labelled LABEL kills the
/// daemon as it starts (as an abort in a library could), for the
/// poison-policy test (`tests/daemon_durability.rs`).
pub fn abort_in_gate(policy: &str, label: Option<&str>) {
    if let (Some(wanted), Some(label)) = (var!("ABORT_GATE_LABEL"), label)
        && wanted == label
    {
        tracing::error!(policy, "test hook: aborting the daemon in this gate");
        std::process::abort();
    }
}

/// `BEFORE_WORKSPACE_OPEN=PROGRAM`: PROGRAM runs with the workspace's
/// canonical path as its argument, and is waited for, between the path's
/// resolution and its open, where an agent racing the daemon swaps a
/// component (`tests/daemon_swap_race.rs`).
pub fn before_workspace_open(root: &Path) {
    let Some(program) = var!("BEFORE_WORKSPACE_OPEN") else {
        return;
    };
    match std::process::Command::new(&program).arg(root).status() {
        Ok(status) => {
            tracing::warn!(workspace = %root.display(), %status, "test hook ran before the workspace's open");
        }
        Err(e) => {
            tracing::error!(workspace = %root.display(), error = %e, "test hook could not run");
        }
    }
}

/// `NO_CONFIG_POLL`: false when set, and then only SIGHUP reloads the
/// configuration, so that a test knows its trigger
/// (`tests/daemon_live_config.rs`, `tests/daemon_watchdog.rs`,
/// `tests/daemon_passkey.rs`).
pub fn config_poll() -> bool {
    var!("NO_CONFIG_POLL").is_none()
}

/// `LOGIN_LINK_TTL_MS=N`: the page's one-time login links last N
/// milliseconds instead of two minutes, so that a test opens an expired
/// one without waiting (`tests/daemon/ui/login_link.rs`); `None` unset or
/// not a number.
pub fn login_link_ttl() -> Option<Duration> {
    var!("LOGIN_LINK_TTL_MS")
        .and_then(|v| v.to_str().and_then(|v| v.parse::<u64>().ok()))
        .map(Duration::from_millis)
}

/// `NO_SWEEP`: false when set, and then the daemon never sweeps, so that
/// a test sees what re-drives a policy without it (a reload that enables
/// supervision: `tests/daemon_live_config.rs`, `tests/daemon_watchdog.rs`).
pub fn sweep() -> bool {
    let on = var!("NO_SWEEP").is_none();
    if !on {
        tracing::warn!("test hook: no sweep");
    }
    on
}

/// `IGNORE_OWN_LEASE`: true when set, and then a host on PostgreSQL skips
/// its own check that its lease still runs before a write, and its
/// heartbeat ignores a renewal that finds its claim replaced, so that its
/// writes after a `SIGSTOP` past the lease reach the database, which must
/// refuse them by their fencing number (`tests/store/fleet.rs`).
pub fn ignore_own_lease() -> bool {
    var!("IGNORE_OWN_LEASE").is_some()
}

/// `NUDGE_BARRIER=PATH`: a nudge task waits, before it reads its policy,
/// until the file PATH exists (at most [`BARRIER_HOLDS_AT_MOST`]). The test
/// holds the task between the nudge's publication and its run, acts (an
/// agent's turn-end), then writes PATH: that interleaving, every time
/// (`tests/daemon_durability.rs`, a turn-end right after the nudge).
pub async fn nudge_barrier(policy: &str) {
    let Some(path) = var!("NUDGE_BARRIER") else {
        return;
    };
    barrier(Path::new(&path), policy, "nudge").await;
}

/// `COMMIT_BARRIER=PATH`: a commit task waits, once its prepared commit is
/// stored and before it publishes it, until the file PATH exists (at most
/// [`BARRIER_HOLDS_AT_MOST`]): a commit in flight, held there while the
/// test stops its host and another takes it over (`tests/store/takeover.rs`).
pub async fn commit_barrier(policy: &str) {
    let Some(path) = var!("COMMIT_BARRIER") else {
        return;
    };
    barrier(Path::new(&path), policy, "commit").await;
}

async fn barrier(path: &Path, policy: &str, task: &str) {
    if path.exists() {
        return;
    }
    tracing::warn!(policy, barrier = %path.display(), "test hook: the {task} task waits at its barrier");
    let deadline = tokio::time::Instant::now() + BARRIER_HOLDS_AT_MOST;
    while !path.exists() {
        if tokio::time::Instant::now() >= deadline {
            tracing::error!(policy, barrier = %path.display(), "test hook: the barrier never opened; the {task} task goes on");
            return;
        }
        tokio::time::sleep(BARRIER_LOOKS_EVERY).await;
    }
    tracing::warn!(
        policy,
        "test hook: the barrier opened; the {task} task goes on"
    );
}

/// `STORE_FAULTS=PERCENT`: that share (at most 90) of the store's write
/// transactions fails as a full disk would, before anything is written, so
/// that crash tests exercise every caller's handling of a store error
/// (`tests/daemon_durability.rs`). No faults unless set.
#[derive(Debug, Clone, Copy, Default)]
pub struct StoreFaults {
    percent: u32,
}

impl StoreFaults {
    /// The faults the environment asks for (none without the feature).
    pub fn from_env() -> StoreFaults {
        let percent = var!("STORE_FAULTS")
            .and_then(|v| v.to_str().and_then(|v| v.parse::<u32>().ok()))
            .map_or(0, |p| p.min(90));
        if percent > 0 {
            tracing::warn!(percent, "test hook: store writes fail at random");
        }
        StoreFaults { percent }
    }

    /// The draw before a write: `Some(why)` when this one fails.
    pub fn draw(self) -> Option<&'static str> {
        #[cfg(feature = "test-hooks")]
        if self.percent > 0 && fastrand::u32(0..100) < self.percent {
            return Some(STORE_FAULT);
        }
        let _ = self.percent;
        None
    }
}
