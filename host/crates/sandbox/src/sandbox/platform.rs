//! The platform interface of the sandbox: which confinement this operating
//! system gives native gates, found once at start.
//!
//! Two implementations, chosen when gatehost is built:
//! - **Linux** (today's): Landlock (files, TCP, scopes), capability sets,
//!   `no_new_privs` and uids, applied by [`super::confine`]; the gate's
//!   tree is held by the supervisor's cgroups, `clone3` and the subreaper
//!   (`crate::supervise`).
//! - **None** (every other platform, macOS included, until it has an
//!   implementation; docs/security.md, "1c. macOS", says what one would be):
//!   nothing can confine a gate, so the sandbox is *unavailable* with the
//!   reason [`Platform::probe`] gives, exactly as on a Linux kernel below
//!   the needed Landlock ABI: every native gate is an `error` naming it,
//!   unless `[sandbox] required = false` runs gates unconfined (and the
//!   start line says so). WASM gates, the store, git, hooks, MCP and the
//!   page need no sandbox and work everywhere.
//!
//! The portable rest of the sandbox (`super`: the configuration, the
//! protected paths, the scratch directories, the decision to refuse)
//! reaches the platform's confinement only through this module and
//! `super::confine` (Linux's, or `unconfined.rs` elsewhere, whose types
//! have no value), never by a Linux system call of its own. This module
//! must never report a confinement the platform cannot enforce: a
//! platform without one answers with a reason, never a level.

/// Which confinement a native gate gets here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    /// Landlock, capabilities, `no_new_privs` ([`super::confine`]).
    #[cfg(target_os = "linux")]
    Linux,
    /// No sandbox implementation: native gates refuse to run unless
    /// `[sandbox] required = false`. (On Linux, chosen only by a test, to
    /// hold that path where it runs.)
    None,
}

/// The lowest Landlock ABI a gate can be confined with: below it, TCP
/// cannot be denied.
#[cfg(target_os = "linux")]
pub const MIN_ABI: u32 = 4;

impl Platform {
    /// The platform gatehost was built for.
    pub fn here() -> Platform {
        #[cfg(target_os = "linux")]
        return Platform::Linux;
        #[cfg(not(target_os = "linux"))]
        return Platform::None;
    }

    /// The confinement level the running system offers (on Linux, the
    /// kernel's Landlock ABI, at least `MIN_ABI`), or why gates cannot be
    /// confined here: the reason every refused gate and the start line
    /// give.
    pub fn probe(self) -> Result<u32, String> {
        match self {
            #[cfg(target_os = "linux")]
            Platform::Linux => {
                let abi = landlock_abi()?;
                if abi < MIN_ABI {
                    return Err(format!(
                        "the kernel's Landlock ABI is {abi}; at least {MIN_ABI} is needed to deny TCP connections"
                    ));
                }
                Ok(abi)
            }
            Platform::None => Err(format!(
                "gatehost has no sandbox for native gates on {} (it confines them with Linux's \
                 Landlock only; docs/security.md, \"1c. macOS\", has the plan)",
                os_name()
            )),
        }
    }

    /// Whether this process holds capabilities a gate must be stripped of
    /// (root, or a file capability).
    pub fn has_capabilities(self) -> bool {
        match self {
            #[cfg(target_os = "linux")]
            Platform::Linux => {
                rustix::thread::capabilities(None).is_ok_and(|c| !c.permitted.is_empty())
            }
            Platform::None => false,
        }
    }
}

/// The operating system, as a person names it.
fn os_name() -> &'static str {
    match std::env::consts::OS {
        "macos" => "macOS",
        other => other,
    }
}

/// The running kernel's Landlock ABI version.
#[cfg(target_os = "linux")]
fn landlock_abi() -> Result<u32, String> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: landlock_create_ruleset with a null attribute and the
    // VERSION flag only returns the ABI version; no memory is touched.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if v < 0 {
        let err = std::io::Error::last_os_error();
        return Err(match err.raw_os_error() {
            Some(libc::EOPNOTSUPP) => {
                "Landlock is built into this kernel but not enabled (add landlock to the lsm= boot parameter)".into()
            }
            Some(libc::ENOSYS) => "this kernel has no Landlock (Linux 5.13 or later with CONFIG_SECURITY_LANDLOCK is needed)".into(),
            _ => format!("Landlock is not usable: {err}"),
        });
    }
    u32::try_from(v).map_err(|_| format!("Landlock answered an odd ABI version {v}"))
}
