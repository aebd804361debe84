//! `gatehost-sandbox`: the helper every native gate and judge adapter is
//! started through. It confines itself, then executes the gate's program,
//! which inherits the confinement together with everything it spawns:
//!
//! 1. the user switch (`--user`), supplementary groups cleared;
//! 2. no capabilities (`--no-caps`): the bounding set emptied, then the
//!    permitted, effective, inheritable and ambient sets;
//! 3. `no_new_privs` (setuid and file capabilities are ignored from here on);
//! 4. Landlock, as a hard requirement of the ABI the host asked for: file
//!    access only beneath the granted paths; TCP connect and bind denied
//!    unless `--net` (ABI 4); signals to, and abstract-socket connections
//!    to, processes outside the sandbox denied (ABI 6);
//! 5. the working directory (`--chdir`), resolved beneath the starting one;
//! 6. `execve` of the program.
//!
//! If any step fails the program is never executed: the helper prints one
//! line starting with `gatehost-sandbox: cannot confine the gate:` and
//! exits 125, which the host reports as a gate that could not run. The
//! helper is spawned by the host with posix_spawn (no fork of the host's
//! memory); it links nothing of the gatehost library, so it starts quickly.
//! It must never run the program with less confinement than it was asked
//! for.

#[path = "../sandbox/wire.rs"]
#[allow(dead_code)]
mod wire;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};
use std::os::unix::process::CommandExt;
use std::path::Path;
use wire::{ERROR_PREFIX, Invocation, Policy, SETUP_FAILED};

fn main() {
    let invocation = match Invocation::parse(std::env::args_os().skip(1)) {
        Ok(i) => i,
        Err(e) => fail(&format!("bad command line: {e}")),
    };
    if let Err(e) = confine(&invocation.policy) {
        fail(&e);
    }
    let err = std::process::Command::new(&invocation.program)
        .args(&invocation.args)
        .exec();
    fail(&format!(
        "cannot execute {}: {err}",
        Path::new(&invocation.program).display()
    ));
}

fn fail(message: &str) -> ! {
    eprintln!("{ERROR_PREFIX}{message}");
    std::process::exit(SETUP_FAILED);
}

fn confine(policy: &Policy) -> Result<(), String> {
    if let Some((uid, gid)) = policy.user {
        use rustix::process::{Gid, Uid};
        rustix::thread::set_thread_groups(&[])
            .map_err(|e| format!("cannot clear the supplementary groups: {e}"))?;
        let gid = Gid::from_raw(gid);
        rustix::thread::set_thread_res_gid(gid, gid, gid)
            .map_err(|e| format!("cannot switch to gid {}: {e}", gid.as_raw()))?;
        if policy.drop_caps {
            // Needs CAP_SETPCAP, which the uid switch below takes away.
            drop_bounding_set()?;
        }
        let uid = Uid::from_raw(uid);
        rustix::thread::set_thread_res_uid(uid, uid, uid)
            .map_err(|e| format!("cannot switch to uid {}: {e}", uid.as_raw()))?;
    }
    if policy.drop_caps {
        drop_capabilities()?;
    }
    rustix::thread::set_no_new_privs(true).map_err(|e| format!("no_new_privs: {e}"))?;
    landlock(policy)?;
    if let Some(dir) = &policy.chdir {
        use rustix::fs::{CWD, Mode, OFlags, ResolveFlags};
        let fd = rustix::fs::openat2(
            CWD,
            dir,
            OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::RDONLY,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
        )
        .map_err(|e| format!("working directory {}: {e}", dir.display()))?;
        rustix::process::fchdir(&fd)
            .map_err(|e| format!("working directory {}: {e}", dir.display()))?;
    }
    Ok(())
}

/// Empties the capability bounding set, so nothing executed later can
/// regain a capability (a setuid-root binary, a file capability).
fn drop_bounding_set() -> Result<(), String> {
    for cap in 0..64 {
        // SAFETY: prctl(PR_CAPBSET_DROP) takes integer arguments only.
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

fn landlock(policy: &Policy) -> Result<(), String> {
    let abi = ABI::from(i32::try_from(policy.abi).unwrap_or(i32::MAX));
    let ll = |e: landlock::RulesetError| format!("landlock (ABI {}): {e}", policy.abi);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(abi))
        .map_err(ll)?;
    if policy.abi >= 4 && !policy.network {
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(ll)?;
    }
    if policy.abi >= 6 {
        ruleset = ruleset
            .scope(Scope::AbstractUnixSocket | Scope::Signal)
            .map_err(ll)?;
    }
    let mut created = ruleset.create().map_err(ll)?;
    let read = AccessFs::from_read(abi);
    let all = AccessFs::from_all(abi);
    let device = AccessFs::from_file(abi) & !AccessFs::Execute;
    let grants = policy
        .read
        .iter()
        .map(|p| (p, read))
        .chain(policy.write.iter().map(|p| (p, all)))
        .chain(policy.devices.iter().map(|p| (p, device)));
    for (path, access) in grants {
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
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let status = created.restrict_self().map_err(ll)?;
    if status.ruleset != RulesetStatus::FullyEnforced || !status.no_new_privs {
        return Err(format!(
            "landlock ABI {} is only partly enforced here ({:?})",
            policy.abi, status.ruleset
        ));
    }
    Ok(())
}
