//! What the crash tests share (the single host's in
//! `tests/daemon/durability.rs`, the fleet's in `tests/store/fleet_chaos.rs`):
//! a small seeded generator whose seed is printed (and can be given back
//! through `GATEHOST_CHAOS_SEED` to replay a failure), and a call retried
//! while a daemon restarts. Starts no process and kills none.

use std::time::Duration;

/// A small deterministic generator (a linear congruential one: enough to
/// draw delays and choices; its seed replays them).
pub struct Lcg(pub u64);

impl Lcg {
    /// The next draw.
    pub fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    /// A draw in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The seed of the crash test `what`: `GATEHOST_CHAOS_SEED` when set (a
/// replay), else the clock's nanoseconds; printed either way.
pub fn seed(what: &str) -> u64 {
    let given = std::env::var("GATEHOST_CHAOS_SEED")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok());
    let seed = given.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|t| t.as_nanos() as u64)
            .unwrap_or(7)
    });
    eprintln!("{what} seed {seed} (GATEHOST_CHAOS_SEED={seed} replays it)");
    seed
}

/// Calls `f` until it answers `Some` (a daemon down or refusing for now
/// answers `None`), every 25 ms, at most 200 times; its answer.
pub fn with_retry<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    for _ in 0..200 {
        if let Some(v) = f() {
            return v;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("{what}: the daemon never answered");
}
