//! One-line forms of what the daemon, gate and sandbox tests repeat: that a
//! text holds (or lacks) a phrase, that a `gatehost check` run was an error
//! for a stated reason, and a run of the binary from plain arguments. Each
//! assertion names what it looked for and where, and is `#[track_caller]`
//! so that a failure points at the test's line; none is a softer check
//! than the `assert!` it replaces. Nothing here starts a daemon.

use super::{CliRun, Scratch, run_gatehost};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Runs the gatehost binary with `args` (as [`run_gatehost`], with no
/// environment added).
pub fn gatehost(args: &[&str]) -> CliRun {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    run_gatehost(&args, &[])
}

/// The JSON string `v`, or "" when it is none.
pub fn str_of(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

/// The strings at `key` of the objects in the JSON array `list` (none if
/// it is not one).
pub fn strs_of<'a>(list: &'a Value, key: &str) -> Vec<&'a str> {
    let items = list.as_array().map(Vec::as_slice).unwrap_or_default();
    items.iter().filter_map(|p| p[key].as_str()).collect()
}

/// The directory `rel` under the scratch area's `etc/`, made.
pub fn etc_dir(s: &Scratch, rel: &str) -> PathBuf {
    let dir = s.etc.join(rel);
    std::fs::create_dir_all(&dir).expect("mkdir");
    dir
}

/// `path` as an argument.
pub fn arg(path: &Path) -> String {
    path.display().to_string()
}

/// Fails unless `text` contains `needle`.
#[track_caller]
pub fn assert_has(text: &str, needle: &str) {
    assert!(text.contains(needle), "{needle:?} is not in:\n{text}");
}

/// Fails if `text` contains `needle`.
#[track_caller]
pub fn assert_lacks(text: &str, needle: &str) {
    assert!(!text.contains(needle), "{needle:?} is in:\n{text}");
}

/// Fails unless the run exited 2 (an error, not a verdict) with a reason
/// containing `needle`.
#[track_caller]
pub fn assert_refused(run: &CliRun, needle: &str) {
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert_has(&run.reason(), needle);
}

/// Fails unless the run exited `code` with exactly `reason`.
#[track_caller]
pub fn assert_reason(run: &CliRun, code: i32, reason: &str) {
    assert_eq!(run.code, code, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.reason(), reason);
}

/// Fails unless `text` starts with `prefix`.
#[track_caller]
pub fn assert_starts(text: &str, prefix: &str) {
    assert!(
        text.starts_with(prefix),
        "{prefix:?} does not begin:\n{text}"
    );
}

/// Fails unless the run took at least `min_ms` and less than `max_ms`
/// milliseconds.
#[track_caller]
pub fn assert_took(run: &CliRun, min_ms: u64, max_ms: u64) {
    let (min, max) = (Duration::from_millis(min_ms), Duration::from_millis(max_ms));
    assert!(run.elapsed >= min, "took {:?}, under {min:?}", run.elapsed);
    assert!(
        run.elapsed < max,
        "took {:?}, not under {max:?}",
        run.elapsed
    );
}

/// Fails when a process carrying `marker` or a cgroup of the gatehost
/// process `pid` is left: nothing a run started outlives it.
#[track_caller]
pub fn assert_nothing_left(marker: &str, pid: u32) {
    super::assert_no_survivors(marker);
    super::assert_no_cgroups_left(pid);
}

/// Fails unless less than `limit` passed since `started`.
#[track_caller]
pub fn assert_within(started: Instant, limit: Duration) {
    let took = started.elapsed();
    assert!(took < limit, "took {took:?}, not under {limit:?}");
}

/// Calls `f` until it gives a value (every 50 ms, at most `limit`); that
/// value. Fails naming `what` past the limit.
#[track_caller]
pub fn wait_for_within<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        match f() {
            Some(v) => return v,
            None => assert!(Instant::now() < deadline, "timed out waiting for {what}"),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
