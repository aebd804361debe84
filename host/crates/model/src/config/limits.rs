//! The `[limits]` section: as written ([`LimitsSection`]) and put into a
//! [`HostConfig`] (the output cap, the kill grace, the gates' process-tree
//! limits, the change set's caps and the watches' budget), each bad value named by its key. It
//! only holds settings; it never reads a file.

use super::{HostConfig, MIN_GATE_FILE_BYTES, MIN_GATE_MEMORY};
use serde::Deserialize;
use std::time::Duration;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LimitsSection {
    pub(super) output_cap_bytes: Option<usize>,
    pub(super) kill_grace_ms: Option<u64>,
    pub(super) gate_memory_bytes: Option<u64>,
    pub(super) gate_pids: Option<u64>,
    pub(super) gate_file_bytes: Option<u64>,
    pub(super) gate_scratch_bytes: Option<u64>,
    pub(super) change_file_cap_bytes: Option<u64>,
    pub(super) change_cap_bytes: Option<u64>,
    pub(super) watch_dirs_per_workspace: Option<usize>,
    pub(super) watch_dirs_total: Option<usize>,
}

/// How many directories the daemon's watches of the commit paths may
/// hold between turns (`[limits] watch_dirs_per_workspace`,
/// `watch_dirs_total`): past either, that workspace's snapshots walk
/// every file (as with no watch), logged with the reason. 0 per
/// workspace turns the watch off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchLimits {
    /// The most directories one workspace's watch holds.
    pub per_workspace: usize,
    /// The most directories all the host's watches hold together.
    pub total: usize,
}

impl Default for WatchLimits {
    fn default() -> WatchLimits {
        WatchLimits {
            per_workspace: crate::commit::DEFAULT_WATCH_DIRS_PER_WORKSPACE,
            total: crate::commit::DEFAULT_WATCH_DIRS_TOTAL,
        }
    }
}

impl LimitsSection {
    /// Puts these settings into `config`; an error is (key, why).
    pub(super) fn apply(&self, config: &mut HostConfig) -> Result<(), (String, String)> {
        if let Some(cap) = self.output_cap_bytes {
            if cap == 0 {
                return Err((
                    "limits.output_cap_bytes".into(),
                    "must be at least 1".into(),
                ));
            }
            config.output_cap = cap;
        }
        for (key, value, slot) in [
            (
                "limits.change_file_cap_bytes",
                self.change_file_cap_bytes,
                &mut config.change_caps.file_bytes,
            ),
            (
                "limits.change_cap_bytes",
                self.change_cap_bytes,
                &mut config.change_caps.total_bytes,
            ),
        ] {
            if let Some(v) = value {
                if v == 0 {
                    return Err((key.into(), "must be at least 1".into()));
                }
                *slot = v;
            }
        }
        if let Some(n) = self.watch_dirs_per_workspace {
            config.watch_limits.per_workspace = n;
        }
        if let Some(n) = self.watch_dirs_total {
            config.watch_limits.total = n;
        }
        if let Some(ms) = self.kill_grace_ms {
            config.kill_grace = Duration::from_millis(ms);
        }
        let gl = &mut config.gate_limits;
        for (key, value, min, slot) in [
            (
                "limits.gate_memory_bytes",
                self.gate_memory_bytes,
                MIN_GATE_MEMORY,
                &mut gl.memory,
            ),
            ("limits.gate_pids", self.gate_pids, 1, &mut gl.pids),
            (
                "limits.gate_file_bytes",
                self.gate_file_bytes,
                MIN_GATE_FILE_BYTES,
                &mut gl.file_bytes,
            ),
            (
                "limits.gate_scratch_bytes",
                self.gate_scratch_bytes,
                MIN_GATE_FILE_BYTES,
                &mut gl.scratch_bytes,
            ),
        ] {
            match value {
                None => {}
                Some(0) => *slot = None,
                Some(n) if n < min => {
                    return Err((
                        key.into(),
                        format!("{n} is too small: at least {min}, or 0 for no limit"),
                    ));
                }
                Some(n) => *slot = Some(n),
            }
        }
        Ok(())
    }
}
