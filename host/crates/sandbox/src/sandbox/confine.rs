//! Applying a gate's confinement: Landlock, `no_new_privs`, capability
//! sets and (with the raw syscalls used here) uids, which are per thread on
//! Linux and inherited by a child process from the thread that spawned it.
//!
//! Two ways, one set of steps ([`Prepared`]):
//! - **In the child** (the child program, `supervise::program`, which
//!   starts gates and the daemon's agents): everything that can allocate,
//!   open a path or fail for a reason worth a sentence is done in the host
//!   first ([`Plan::prepare`]: the Landlock ruleset is built and its rules
//!   added); the cloned child then applies it to itself
//!   ([`Prepared::apply`], a step of that program, under the rules its
//!   module doc states) before it execs the program. No thread is made
//!   for a spawn.
//! - **On a fresh thread** ([`Plan::spawn_confined`]), for the other ways
//!   to spawn (std's posix_spawn, where `clone3` into a cgroup is not
//!   available): the host confines a short-lived thread of its own, spawns
//!   the program from it, and lets the thread end. The rest of the host is
//!   untouched.
//!
//! This module must never apply a confinement to a thread that outlives
//! the spawn (never a pooled thread) nor to the host's own process, and
//! never let the program run when any step failed.

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};
use rustix::io::Errno;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
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
        // The rules are built first, on the calling thread: opening their
        // paths needs the host's rights (a switched uid may not reach them).
        let prepared = self.prepare()?;
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    // SAFETY: this thread is fresh and ends after the spawn.
                    unsafe { prepared.apply() }.map_err(|e| prepared.describe(e))?;
                    Ok(spawn())
                })
                .join()
                .unwrap_or_else(|_| Err("the confining thread panicked".into()))
        })
    }

    /// Builds everything the confinement needs (the Landlock ruleset and
    /// its rules, from the calling thread's rights) for a spawn to apply.
    /// Errs, naming the path or the feature, if this plan cannot be
    /// enforced in full.
    pub fn prepare(&self) -> Result<Prepared, String> {
        let ruleset: Option<OwnedFd> = self.ruleset()?.into();
        // With `HardRequirement`, an ABI the kernel lacks is an error
        // above; no descriptor means Landlock would not be enforced.
        let ruleset =
            ruleset.ok_or_else(|| format!("landlock ABI {} is not enforced here", self.abi))?;
        Ok(Prepared {
            abi: self.abi,
            ruleset,
            write_access: AccessFs::from_all(abi_of(self.abi)).bits(),
            user: self.user,
            drop_caps: self.drop_caps,
        })
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

/// A plan ready to apply: the Landlock ruleset with its rules, and the
/// uid and capability changes. Applying it makes only system calls.
#[derive(Debug)]
pub struct Prepared {
    abi: u32,
    /// Close-on-exec (the kernel makes every ruleset descriptor so): the
    /// gate's program never holds it.
    ruleset: OwnedFd,
    /// The Landlock rights of a write grant, for a rule the child adds
    /// itself ([`Prepared::grant_write_beneath`]).
    write_access: u64,
    user: Option<(u32, u32)>,
    drop_caps: bool,
}

/// `struct landlock_path_beneath_attr` (packed, as the kernel declares it).
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// `LANDLOCK_RULE_PATH_BENEATH`.
const RULE_PATH_BENEATH: libc::c_int = 1;

/// The step of applying a [`Prepared`] confinement that failed, and why
/// (what a spawned child reports back before it exits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepError {
    /// The step that failed.
    pub step: Step,
    /// The error the step's system call returned.
    pub errno: Errno,
}

/// The steps of applying a confinement, in their order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Step {
    /// Clearing the supplementary groups (`setgroups` to none).
    Groups = 1,
    /// `setresgid` to the gate user's group.
    Gid = 2,
    /// Dropping every capability from the bounding set.
    BoundingSet = 3,
    /// `setresuid` to the gate user.
    Uid = 4,
    /// Clearing the remaining capability sets (`capset`).
    Capabilities = 5,
    /// `prctl(PR_SET_NO_NEW_PRIVS)`.
    NoNewPrivs = 6,
    /// `landlock_restrict_self` with the prepared ruleset.
    Landlock = 7,
}

impl Step {
    /// The step a child reported by its number.
    pub fn from_code(code: u32) -> Option<Step> {
        Some(match code {
            1 => Step::Groups,
            2 => Step::Gid,
            3 => Step::BoundingSet,
            4 => Step::Uid,
            5 => Step::Capabilities,
            6 => Step::NoNewPrivs,
            7 => Step::Landlock,
            _ => return None,
        })
    }
}

impl Prepared {
    /// Adds a write grant beneath the directory open as `dir` to the
    /// ruleset, before it is applied: for a directory that exists only in
    /// the child (the tmpfs over its scratch directory, mounted in its own
    /// mount namespace: Landlock ignores a rule on the directory it hides).
    /// One raw system call (a step of the child program: see
    /// `supervise::program` for the rules). Returns the errno.
    ///
    /// # Safety
    /// Only in the child that applies this confinement next; `dir` is an
    /// open descriptor.
    pub unsafe fn grant_write_beneath(&self, dir: RawFd) -> Result<(), i32> {
        let attr = PathBeneathAttr {
            allowed_access: self.write_access,
            parent_fd: dir,
        };
        // SAFETY: landlock_add_rule on the open ruleset, with a pointer to
        // a live attribute struct of the kernel's layout, no flags.
        let added = unsafe {
            libc::syscall(
                libc::SYS_landlock_add_rule,
                self.ruleset.as_raw_fd(),
                RULE_PATH_BENEATH,
                &attr as *const PathBeneathAttr,
                0u32,
            )
        };
        if added != 0 {
            // SAFETY: reading this thread's errno.
            return Err(unsafe { *libc::__errno_location() });
        }
        Ok(())
    }

    /// Confines the caller, irrevocably: the child of a `clone3` (or
    /// `fork`) of the host between the clone and its `execve`, or a fresh
    /// thread of the host that spawns the program and ends. Raw system
    /// calls only (rustix's linux_raw backend and `libc::syscall`), so
    /// that it keeps the child program's rules (`supervise::program`'s
    /// module doc).
    ///
    /// # Safety
    /// The caller must run nothing of the host's after it: it is such a
    /// child, or a thread that ends after the spawn (never a pooled one).
    pub unsafe fn apply(&self) -> Result<(), StepError> {
        let at = |step| move |errno| StepError { step, errno };
        if let Some((uid, gid)) = self.user {
            use rustix::process::{Gid, Uid};
            rustix::thread::set_thread_groups(&[]).map_err(at(Step::Groups))?;
            let gid = Gid::from_raw(gid);
            rustix::thread::set_thread_res_gid(gid, gid, gid).map_err(at(Step::Gid))?;
            if self.drop_caps {
                // Needs CAP_SETPCAP, which the uid switch takes away.
                drop_bounding_set()?;
            }
            let uid = Uid::from_raw(uid);
            rustix::thread::set_thread_res_uid(uid, uid, uid).map_err(at(Step::Uid))?;
        }
        if self.drop_caps {
            drop_capabilities()?;
        }
        rustix::thread::set_no_new_privs(true).map_err(at(Step::NoNewPrivs))?;
        // SAFETY: the raw landlock_restrict_self system call on an open
        // ruleset descriptor, no flags.
        let restricted = unsafe {
            libc::syscall(
                libc::SYS_landlock_restrict_self,
                self.ruleset.as_raw_fd(),
                0u32,
            )
        };
        if restricted != 0 {
            return Err(StepError {
                step: Step::Landlock,
                // SAFETY: reading this thread's errno.
                errno: Errno::from_raw_os_error(unsafe { *libc::__errno_location() }),
            });
        }
        Ok(())
    }

    /// A confinement whose Landlock step fails (its "ruleset" is any
    /// other descriptor): to test that a child which cannot confine itself
    /// never runs its program.
    #[cfg(test)]
    pub(crate) fn failing_at_landlock(not_a_ruleset: OwnedFd) -> Prepared {
        Prepared {
            abi: 6,
            ruleset: not_a_ruleset,
            write_access: 0,
            user: None,
            drop_caps: false,
        }
    }

    /// What a person reads when `e` stopped this confinement.
    pub fn describe(&self, e: StepError) -> String {
        let StepError { step, errno } = e;
        let (uid, gid) = self.user.unwrap_or((0, 0));
        match step {
            Step::Groups => format!("cannot clear the supplementary groups: {errno}"),
            Step::Gid => format!("cannot switch to gid {gid}: {errno}"),
            Step::BoundingSet => format!("cannot empty the capability bounding set: {errno}"),
            Step::Uid => format!("cannot switch to uid {uid}: {errno}"),
            Step::Capabilities => format!("cannot drop capabilities: {errno}"),
            Step::NoNewPrivs => format!("no_new_privs: {errno}"),
            Step::Landlock => format!("landlock (ABI {}): {errno}", self.abi),
        }
    }
}

/// Empties the capability bounding set of the calling thread, so nothing
/// it executes can regain a capability.
fn drop_bounding_set() -> Result<(), StepError> {
    for cap in 0..64u32 {
        let one = rustix::thread::CapabilitySet::from_bits_retain(1 << cap);
        match rustix::thread::remove_capability_from_bounding_set(one) {
            Ok(()) => {}
            // Past the kernel's last capability.
            Err(Errno::INVAL) => return Ok(()),
            Err(errno) => {
                return Err(StepError {
                    step: Step::BoundingSet,
                    errno,
                });
            }
        }
    }
    Ok(())
}

fn drop_capabilities() -> Result<(), StepError> {
    use rustix::thread::{CapabilitySet, CapabilitySets};
    let at = |errno| StepError {
        step: Step::Capabilities,
        errno,
    };
    let now = rustix::thread::capabilities(None).map_err(at)?;
    if !now.permitted.is_empty() {
        drop_bounding_set()?;
    }
    rustix::thread::clear_ambient_capability_set().map_err(at)?;
    rustix::thread::set_capabilities(
        None,
        CapabilitySets {
            effective: CapabilitySet::empty(),
            permitted: CapabilitySet::empty(),
            inheritable: CapabilitySet::empty(),
        },
    )
    .map_err(at)
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
    fn every_step_survives_the_childs_report_by_its_number() {
        for step in [
            Step::Groups,
            Step::Gid,
            Step::BoundingSet,
            Step::Uid,
            Step::Capabilities,
            Step::NoNewPrivs,
            Step::Landlock,
        ] {
            assert_eq!(Step::from_code(step as u32), Some(step));
        }
        // 0 is "setting up or exec", never a confinement step.
        assert_eq!(Step::from_code(0), None);
        assert_eq!(Step::from_code(8), None);
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
