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
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};

/// The grants every gate has (the system, the configured paths, the
/// devices), opened once at start: a gate's rules are then added from
/// these handles, with no path looked up again.
#[derive(Debug)]
pub struct BaseGrants {
    grants: Vec<(PathFd, BitFlags<AccessFs>)>,
}

impl BaseGrants {
    /// Opens `read` (read and execute), `write` (everything) and
    /// `devices` (read and write) for rules of `abi`.
    pub fn open(
        abi: u32,
        read: &[PathBuf],
        write: &[PathBuf],
        devices: &[PathBuf],
    ) -> Result<BaseGrants, String> {
        let a = abi_of(abi);
        let device = AccessFs::from_file(a) & !AccessFs::Execute;
        let grants = read
            .iter()
            .map(|p| (p, AccessFs::from_read(a)))
            .chain(write.iter().map(|p| (p, AccessFs::from_all(a))))
            .chain(devices.iter().map(|p| (p, device)))
            .map(|(p, access)| open_grant(p, access, a))
            .collect::<Result<_, _>>()?;
        Ok(BaseGrants { grants })
    }
}

fn abi_of(abi: u32) -> ABI {
    ABI::from(i32::try_from(abi).unwrap_or(i32::MAX))
}

/// Opens `path` for a rule granting `access` (narrowed to what a file
/// takes when it is not a directory).
fn open_grant(
    path: &Path,
    access: BitFlags<AccessFs>,
    abi: ABI,
) -> Result<(PathFd, BitFlags<AccessFs>), String> {
    let fd = PathFd::new(path).map_err(|e| format!("{}: {e}", path.display()))?;
    // The type of what was opened (not of what the path names now).
    let stat = rustix::fs::fstat(&fd).map_err(|e| format!("{}: {e}", path.display()))?;
    let is_dir =
        rustix::fs::FileType::from_raw_mode(stat.st_mode) == rustix::fs::FileType::Directory;
    let access = if is_dir {
        access
    } else {
        access & AccessFs::from_file(abi)
    };
    Ok((fd, access))
}

/// What one gate process may do (see the module doc of `sandbox`).
#[derive(Debug)]
pub struct Plan<'a> {
    /// Landlock ABI the rules are written for; enforced as a hard
    /// requirement.
    pub abi: u32,
    /// What every gate has.
    pub base: &'a BaseGrants,
    /// Read and execute beneath these paths (this gate's own).
    pub read: Vec<PathBuf>,
    /// Read, write, create and remove beneath these paths (this gate's own).
    pub write: Vec<PathBuf>,
    /// The workspace, writable, as the directory the anchor opened (no
    /// path is resolved again).
    pub workspace: Option<BorrowedFd<'a>>,
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
        let abi = abi_of(self.abi);
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
        let all = AccessFs::from_all(abi);
        if let Some(ws) = self.workspace {
            created = created
                .add_rule(PathBeneath::new(ws, all))
                .map_err(|e| format!("the workspace: {e}"))?;
        }
        for (fd, access) in &self.base.grants {
            created = created
                .add_rule(PathBeneath::new(fd.as_fd(), *access))
                .map_err(|e| format!("a base grant: {e}"))?;
        }
        let own = self
            .read
            .iter()
            .map(|p| (p, AccessFs::from_read(abi)))
            .chain(self.write.iter().map(|p| (p, all)));
        for (path, access) in own {
            let (fd, access) = open_grant(path, access, abi)?;
            created = created
                .add_rule(PathBeneath::new(fd, access))
                .map_err(|e| format!("{}: {e}", path.display()))?;
        }
        Ok(created)
    }
}

/// Runs `f` on a fresh thread that may read anything but create, write,
/// rename or remove only beneath `dir` (the kernel resolves every path it
/// opens, so a symlink planted beneath `dir` cannot carry a write out of
/// it). Used for gatehost's own writes into a workspace's `.git`.
pub fn writing_only_beneath<T: Send>(
    abi: u32,
    dir: BorrowedFd<'_>,
    f: impl FnOnce() -> T + Send,
) -> Result<T, String> {
    let a = abi_of(abi);
    let ll = |e: landlock::RulesetError| format!("landlock (ABI {abi}): {e}");
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let root = PathFd::new("/").map_err(|e| format!("/: {e}"))?;
                let status = Ruleset::default()
                    .set_compatibility(CompatLevel::HardRequirement)
                    .handle_access(AccessFs::from_all(a))
                    .map_err(ll)?
                    .create()
                    .map_err(ll)?
                    .add_rule(PathBeneath::new(root, AccessFs::from_read(a)))
                    .map_err(ll)?
                    .add_rule(PathBeneath::new(dir, AccessFs::from_all(a)))
                    .map_err(ll)?
                    .restrict_self()
                    .map_err(ll)?;
                if status.ruleset != RulesetStatus::FullyEnforced {
                    return Err(format!("landlock ABI {abi} is only partly enforced here"));
                }
                Ok(f())
            })
            .join()
            .unwrap_or_else(|_| Err("the confined thread panicked".into()))
    })
}

/// Empties the capability bounding set of the calling thread, so nothing
/// it executes can regain a capability.
fn drop_bounding_set() -> Result<(), String> {
    for cap in 0..64u32 {
        let one = rustix::thread::CapabilitySet::from_bits_retain(1 << cap);
        match rustix::thread::remove_capability_from_bounding_set(one) {
            Ok(()) => {}
            // Past the kernel's last capability.
            Err(rustix::io::Errno::INVAL) => return Ok(()),
            Err(e) => {
                return Err(format!(
                    "cannot drop capability {cap} from the bounding set: {e}"
                ));
            }
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
        let base = BaseGrants::open(6, &[PathBuf::from("/usr")], &[], &[]).expect("base");
        let plan = Plan {
            abi: 6,
            base: &base,
            read: Vec::new(),
            write: vec![t.path().to_path_buf()],
            workspace: None,
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
    fn a_write_confined_thread_writes_beneath_its_directory_only() {
        let t = tempfile::tempdir().expect("tempdir");
        let inside = t.path().join("git");
        let outside = t.path().join("outside");
        std::fs::create_dir_all(&inside).expect("mkdir");
        std::fs::create_dir_all(&outside).expect("mkdir");
        // A planted symlink beneath the directory, pointing out of it.
        std::os::unix::fs::symlink(&outside, inside.join("logs")).expect("ln");
        let dir = std::fs::File::open(&inside).expect("open");
        let (wrote_inside, wrote_through_link, read_elsewhere) =
            writing_only_beneath(6, dir.as_fd(), || {
                (
                    std::fs::write(inside.join("HEAD"), "x").is_ok(),
                    std::fs::write(inside.join("logs/HEAD"), "x").is_ok(),
                    std::fs::read_dir("/etc").is_ok(),
                )
            })
            .expect("confined");
        assert!(wrote_inside && read_elsewhere);
        assert!(!wrote_through_link, "a symlink carried a write out");
        assert!(!outside.join("HEAD").exists());
        // The caller is not confined.
        std::fs::write(outside.join("after"), "x").expect("the host still writes");
    }

    #[test]
    fn a_plan_naming_a_missing_path_never_runs_the_spawn() {
        let base = BaseGrants::open(6, &[], &[], &[]).expect("base");
        let plan = Plan {
            abi: 6,
            base: &base,
            read: vec![PathBuf::from("/nonexistent/gatehost")],
            write: Vec::new(),
            workspace: None,
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
