//! Applying a gate's confinement: on a fresh thread of the host, which then
//! spawns the gate's program and exits.
//!
//! Landlock domains, `no_new_privs`, capability sets and (with the raw
//! syscalls used here) uids are per thread on Linux, and a child process
//! inherits them from the thread that spawned it. So the host confines a
//! short-lived thread of its own, spawns the program from it (std's
//! posix_spawn: one `clone(CLONE_VM|CLONE_VFORK)` and one `execve`, no copy
//! of the host's memory, no second program image), and lets the thread end.
//! The rest of the host is untouched.
//!
//! This module must never apply a confinement to a thread that outlives
//! the spawn (never a pooled thread), and never spawn when any step
//! failed: the program then does not run at all.

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};
use std::os::fd::BorrowedFd;
use std::path::PathBuf;

/// What one gate process may do (see the module doc of `sandbox`).
#[derive(Debug)]
pub struct Plan<'a> {
    /// Landlock ABI the rules are written for; enforced as a hard
    /// requirement.
    pub abi: u32,
    /// Read and execute beneath these paths.
    pub read: Vec<PathBuf>,
    /// Read, write, create and remove beneath these paths.
    pub write: Vec<PathBuf>,
    /// The workspace, writable, as the directory the anchor opened (no
    /// path is resolved again).
    pub workspace: Option<BorrowedFd<'a>>,
    /// Device files opened for reading and writing.
    pub devices: Vec<PathBuf>,
    /// TCP connect and bind allowed.
    pub network: bool,
    /// Drop every capability.
    pub drop_caps: bool,
    /// Switch to this uid and gid (supplementary groups cleared).
    pub user: Option<(u32, u32)>,
}

impl Plan<'_> {
    /// Confines a fresh thread with this plan and runs `spawn` on it.
    /// Returns why the confinement failed (then `spawn` never ran), or
    /// what `spawn` returned.
    pub fn spawn_confined<T: Send>(&self, spawn: impl FnOnce() -> T + Send) -> Result<T, String> {
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    self.apply()?;
                    Ok(spawn())
                })
                .join()
                .unwrap_or_else(|_| Err("the confining thread panicked".into()))
        })
    }

    /// Confines the calling thread, irrevocably.
    fn apply(&self) -> Result<(), String> {
        // The rules are built first: opening their paths needs the
        // thread's current rights (a switched uid may not reach them).
        let ruleset = self.ruleset()?;
        if let Some((uid, gid)) = self.user {
            use rustix::process::{Gid, Uid};
            rustix::thread::set_thread_groups(&[])
                .map_err(|e| format!("cannot clear the supplementary groups: {e}"))?;
            let gid = Gid::from_raw(gid);
            rustix::thread::set_thread_res_gid(gid, gid, gid)
                .map_err(|e| format!("cannot switch to gid {}: {e}", gid.as_raw()))?;
            if self.drop_caps {
                // Needs CAP_SETPCAP, which the uid switch takes away.
                drop_bounding_set()?;
            }
            let uid = Uid::from_raw(uid);
            rustix::thread::set_thread_res_uid(uid, uid, uid)
                .map_err(|e| format!("cannot switch to uid {}: {e}", uid.as_raw()))?;
        }
        if self.drop_caps {
            drop_capabilities()?;
        }
        rustix::thread::set_no_new_privs(true).map_err(|e| format!("no_new_privs: {e}"))?;
        let status = ruleset
            .restrict_self()
            .map_err(|e| format!("landlock (ABI {}): {e}", self.abi))?;
        if status.ruleset != RulesetStatus::FullyEnforced || !status.no_new_privs {
            return Err(format!(
                "landlock ABI {} is only partly enforced here ({:?})",
                self.abi, status.ruleset
            ));
        }
        Ok(())
    }

    fn ruleset(&self) -> Result<landlock::RulesetCreated, String> {
        let abi = ABI::from(i32::try_from(self.abi).unwrap_or(i32::MAX));
        let ll = |e: landlock::RulesetError| format!("landlock (ABI {}): {e}", self.abi);
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(abi))
            .map_err(ll)?;
        if self.abi >= 4 && !self.network {
            ruleset = ruleset
                .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
                .map_err(ll)?;
        }
        if self.abi >= 6 {
            ruleset = ruleset
                .scope(Scope::AbstractUnixSocket | Scope::Signal)
                .map_err(ll)?;
        }
        let mut created = ruleset.create().map_err(ll)?;
        let read = AccessFs::from_read(abi);
        let all = AccessFs::from_all(abi);
        let device = AccessFs::from_file(abi) & !AccessFs::Execute;
        if let Some(ws) = self.workspace {
            created = created
                .add_rule(PathBeneath::new(ws, all))
                .map_err(|e| format!("the workspace: {e}"))?;
        }
        let grants = self
            .read
            .iter()
            .map(|p| (p, read))
            .chain(self.write.iter().map(|p| (p, all)))
            .chain(self.devices.iter().map(|p| (p, device)));
        for (path, access) in grants {
            let fd = PathFd::new(path).map_err(|e| format!("{}: {e}", path.display()))?;
            // The type of what was opened (not of what the path names now).
            let stat = rustix::fs::fstat(&fd).map_err(|e| format!("{}: {e}", path.display()))?;
            let is_dir = rustix::fs::FileType::from_raw_mode(stat.st_mode)
                == rustix::fs::FileType::Directory;
            let access = if is_dir {
                access
            } else {
                access & AccessFs::from_file(abi)
            };
            created = created
                .add_rule(PathBeneath::new(fd, access))
                .map_err(|e| format!("{}: {e}", path.display()))?;
        }
        Ok(created)
    }
}

/// Empties the capability bounding set of the calling thread, so nothing
/// it executes can regain a capability.
fn drop_bounding_set() -> Result<(), String> {
    for cap in 0..64 {
        // SAFETY: prctl(PR_CAPBSET_DROP) takes integer arguments only and
        // acts on the calling thread.
        let r = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) };
        if r != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EINVAL) {
                return Ok(()); // past the kernel's last capability
            }
            return Err(format!(
                "cannot drop capability {cap} from the bounding set: {err}"
            ));
        }
    }
    Ok(())
}

fn drop_capabilities() -> Result<(), String> {
    use rustix::thread::{CapabilitySet, CapabilitySets};
    let now = rustix::thread::capabilities(None).map_err(|e| format!("capget: {e}"))?;
    if !now.permitted.is_empty() {
        drop_bounding_set()?;
    }
    rustix::thread::clear_ambient_capability_set()
        .map_err(|e| format!("cannot clear the ambient capabilities: {e}"))?;
    rustix::thread::set_capabilities(
        None,
        CapabilitySets {
            effective: CapabilitySet::empty(),
            permitted: CapabilitySet::empty(),
            inheritable: CapabilitySet::empty(),
        },
    )
    .map_err(|e| format!("cannot drop capabilities: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_confining_thread_is_confined() {
        let t = tempfile::tempdir().expect("tempdir");
        let plan = Plan {
            abi: 6,
            read: vec![PathBuf::from("/usr")],
            write: vec![t.path().to_path_buf()],
            workspace: None,
            devices: Vec::new(),
            network: false,
            drop_caps: false,
            user: None,
        };
        let inside = plan
            .spawn_confined(|| {
                (
                    std::fs::read_to_string("/etc/hostname").is_err(),
                    std::fs::write(t.path().join("ok"), "x").is_ok(),
                )
            })
            .expect("confined");
        assert_eq!(inside, (true, true), "denied outside, allowed inside");
        // This thread, and so the host, keeps its reach.
        assert!(std::fs::metadata("/etc").is_ok());
        assert!(std::fs::read_dir("/proc/self").is_ok());
    }

    #[test]
    fn a_plan_naming_a_missing_path_never_runs_the_spawn() {
        let plan = Plan {
            abi: 6,
            read: vec![PathBuf::from("/nonexistent/gatehost")],
            write: Vec::new(),
            workspace: None,
            devices: Vec::new(),
            network: false,
            drop_caps: false,
            user: None,
        };
        let ran = std::sync::atomic::AtomicBool::new(false);
        let err = plan
            .spawn_confined(|| ran.store(true, std::sync::atomic::Ordering::SeqCst))
            .expect_err("refused");
        assert!(err.contains("/nonexistent/gatehost"), "{err}");
        assert!(!ran.load(std::sync::atomic::Ordering::SeqCst));
    }
}
