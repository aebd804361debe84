//! Cgroup event files (`memory.events`, `pids.events`, v1 and v2 alike):
//! one `key value` line per counter. A leaf of `supervise`: it imports
//! nothing of it, so the cgroup, v1 and limits modules all read counters
//! through it without importing one another.

/// The value of `key` in a cgroup's flat keyed file ("oom_kill 3").
pub(super) fn counter(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.trim().split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok())?
    })
}
