//! Confinement of every process a native gate starts (shell gates, judge
//! adapters, and all they spawn).
//!
//! The supervisor's spawned child confines itself between `clone3` and
//! `execve`, with a ruleset the host built first (or, where `clone3` into a
//! cgroup is not available, the host spawns from a short-lived thread that
//! confined itself): see [`confine`]. Landlock, capabilities,
//! `no_new_privs` and uids are per thread on Linux and inherited by the
//! child, so the program is confined from its first instruction, with no
//! helper program. What a confined gate may do:
//! - read and execute the system (`/usr`, `/bin`, `/lib*`, `/etc`, `/opt`,
//!   `/proc`, `/sys`), the paths `[sandbox] read` lists and its own
//!   program; write its workspace (a judge: its own empty working
//!   directory instead), a private temporary directory (`TMPDIR`) and the
//!   paths `[sandbox] write` lists; use `/dev/null`, `/dev/zero`,
//!   `/dev/full`, `/dev/random`, `/dev/urandom`;
//! - no TCP connect or bind unless granted (Landlock ABI 4);
//! - no signal to, nor abstract-socket connection to, a process outside
//!   its own sandbox (ABI 6); no ptrace of one (any ABI);
//! - no capability when the host runs as root (or the uid `[sandbox] user`
//!   names), and `no_new_privs`.
//!
//! Host-private paths (the data directory, the tokens, the configuration,
//! the compiled-plugin cache, the scratch root) are never granted: a
//! granted directory that holds one is granted child by child around it,
//! and a workspace or write grant that overlaps one is refused.
//!
//! That confinement is Linux's; the rest of this module is portable and
//! reaches the operating system only through [`platform`] (which
//! confinement there is here, or why none) and the [`Plan`] a gate gets.
//! On a platform without a sandbox implementation (macOS today), the
//! sandbox is unavailable as below the needed kernel: native gates are
//! `error`s naming the reason unless `[sandbox] required = false`.
//!
//! This module decides and describes; it must never run a gate's program
//! itself, and never let a gate run unconfined unless the configuration
//! says `required = false` or `enabled = false` (and then the start line
//! says so). The kernel probe happens once, at start.

#[cfg(target_os = "linux")]
pub mod confine;
/// No confinement to apply: the plan's types, with none constructible.
#[cfg(not(target_os = "linux"))]
#[path = "unconfined.rs"]
pub mod confine;
pub mod platform;
pub mod reach;
mod scratch;

pub use confine::{BaseGrants, Plan};
pub use platform::Platform;
pub use reach::{Lookup, Unreached};
pub use scratch::Scratch;

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};

/// Landlock ABI this host writes its rules for (the landlock crate knows
/// more; 6 has everything the guarantees need: files, TCP, scopes).
const WANTED_ABI: u32 = 6;

/// Read-only system locations, granted when they exist.
const SYSTEM_READ: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/proc", "/sys",
];
/// Device files every gate may open.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// The `[sandbox]` section of the configuration.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// Confine gates at all. `false` is unsafe: documented as such.
    pub enabled: bool,
    /// When confinement cannot be applied here: `true` (default) makes
    /// every native gate an `error`; `false` runs it unconfined (unsafe).
    pub required: bool,
    /// Extra read (and execute) grants for every gate and judge.
    pub read: Vec<PathBuf>,
    /// Extra write grants for shell gates (a build cache …).
    pub write: Vec<PathBuf>,
    /// Run gates as this user (name or uid) instead of dropping root's
    /// capabilities only.
    pub user: Option<String>,
    /// Where per-gate private directories are made (owner-only).
    pub scratch_dir: Option<PathBuf>,
    /// Host-private paths beyond those the configuration names (the
    /// daemon's data directory): never granted to a gate.
    pub protect: Vec<PathBuf>,
    /// How gates and agents are cloned (`[sandbox] spawn`).
    pub spawn: crate::supervise::SpawnMode,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            enabled: true,
            required: true,
            read: Vec::new(),
            write: Vec::new(),
            user: None,
            scratch_dir: None,
            protect: Vec::new(),
            spawn: Default::default(),
        }
    }
}

/// What one gate process may reach beyond the defaults.
#[derive(Debug, Clone, Default)]
pub struct Grants {
    /// Paths it may read (and execute) beneath; the host's protected paths
    /// are cut out of them.
    pub read: Vec<PathBuf>,
    /// Paths it may write beneath; each is checked against the protected
    /// paths, and one that reaches them refuses the gate.
    pub write: Vec<PathBuf>,
    /// Whether it may use the network (else Landlock denies TCP where the
    /// kernel's ABI can).
    pub network: bool,
}

/// Why a gate cannot be confined.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxError {
    /// Confinement is required but this host cannot apply it (the kernel's
    /// answer, or an unusable configuration): why.
    #[error(
        "the sandbox cannot be applied on this host: {0}; gates will not run unconfined \
         (set [sandbox] required = false to run them without confinement, which lets the \
         agent's code reach everything gatehost can)"
    )]
    Unavailable(String),
    /// This gate's grants or workspace cannot be allowed (a write grant or
    /// workspace reaching gatehost's own places, a workspace the gate user
    /// cannot write): why, for the operator.
    #[error("sandbox: {0}")]
    Refused(String),
    /// The gate's private directory under the scratch root could not be
    /// made: which path, and the error.
    #[error("sandbox: cannot prepare the gate's private directory: {0}")]
    Scratch(String),
}

/// How gates are confined on this host, found once at start.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Confined with this Landlock ABI.
    Confined { abi: u32 },
    /// Cannot confine; gates are errors (`required`) or run unconfined.
    Unavailable { reason: String, required: bool },
    /// `enabled = false`.
    Disabled,
}

/// The host-wide sandbox: the kernel's answer and the base grants.
#[derive(Debug)]
pub struct Sandbox {
    state: State,
    drop_caps: bool,
    user: Option<(u32, u32)>,
    /// System and configured read grants, split around protected paths.
    /// System, configured and device grants, opened at start (`None`
    /// unless confined).
    base: Option<BaseGrants>,
    /// The canonical paths `base` grants read (and execute) on: what a
    /// gate's program may need to reach ([`reach`]).
    read_paths: Vec<PathBuf>,
    /// Canonical host-private paths no grant may reach.
    protected: Vec<PathBuf>,
    /// The same, by identity: what a workspace is checked against (from
    /// its open handle, not its path).
    protected_places: crate::anchor::Places,
    scratch_root: Option<PathBuf>,
    /// Why a daemon must not start with this configuration (the gate user
    /// cannot reach the scratch root: every gate would be refused).
    refusal: Option<String>,
}

/// One gate process, prepared: its confinement (`None` when the sandbox
/// is off or not required), the environment the sandbox adds (`TMPDIR`),
/// and its private directory, removed when this is dropped (after the
/// run).
#[derive(Debug)]
pub struct Prepared<'a> {
    /// The confinement the spawn applies ([`crate::supervise::ProcessSpec::confine`]).
    pub plan: Option<Plan<'a>>,
    /// Variables to add to the gate's environment (`TMPDIR` and
    /// `PYTHONPYCACHEPREFIX` in its scratch).
    pub env: Vec<(OsString, OsString)>,
    /// The gate's private directory (`None` for an unconfined shell gate).
    pub scratch: Option<Scratch>,
}

/// Where a gate starts: the workspace (a shell gate: writable, with a
/// working directory beneath it) or a fresh empty directory (a judge).
#[derive(Debug)]
pub enum Place<'a> {
    /// The workspace the anchor opened: granted by its open handle and
    /// checked against the protected paths by that handle's identity and
    /// the directories above it.
    Workspace(&'a crate::anchor::WorkspaceAnchor),
    /// A judge: its private directory's empty `cwd/`, writable, and no
    /// workspace at all.
    Judge,
}

impl Sandbox {
    /// Probes the kernel and resolves the configuration. `protected` are
    /// the host's private paths (data directory, configuration, tokens,
    /// cache …); those that do not exist are ignored.
    pub fn new(config: &SandboxConfig, protected: &[PathBuf]) -> Self {
        Self::on(Platform::here(), config, protected)
    }

    /// [`Sandbox::new`] with the confinement of `platform` (a test holds
    /// the path of a platform without a sandbox where it runs).
    pub fn on(platform: Platform, config: &SandboxConfig, protected: &[PathBuf]) -> Self {
        let mut protected: Vec<PathBuf> = protected
            .iter()
            .filter_map(|p| std::fs::canonicalize(p).ok())
            .collect();
        let scratch_root = scratch_root_of(config);
        let mut refusal = None;
        if let Some(root) = &scratch_root {
            let prepared = if config.user.is_some() {
                make_shared_root(root)
            } else {
                make_private_dir(root).map_err(|e| e.to_string())
            };
            if let Err(e) = prepared {
                tracing::warn!(dir = %root.display(), error = %e, "cannot prepare the scratch directory");
                if let Some(user) = &config.user {
                    refusal = Some(format!(
                        "[sandbox] user '{user}': cannot prepare the scratch directory {}: {e}; \
                         set [sandbox] scratch_dir to a directory it can reach, outside the data directory",
                        root.display()
                    ));
                }
            }
            if let Ok(c) = std::fs::canonicalize(root) {
                protected.push(c);
            }
        }
        let mut sandbox = Sandbox {
            state: State::Disabled,
            drop_caps: false,
            user: None,
            base: None,
            read_paths: Vec::new(),
            protected_places: crate::anchor::Places::of(&protected),
            protected,
            scratch_root,
            refusal: None,
        };
        if let Some(reason) = refusal {
            sandbox.refusal = Some(reason.clone());
            sandbox.state = State::Unavailable {
                reason,
                required: config.required,
            };
            return sandbox;
        }
        if !config.enabled {
            return sandbox;
        }
        let unavailable = |reason: String| State::Unavailable {
            reason,
            required: config.required,
        };
        sandbox.state = match sandbox.resolve(platform, config) {
            Ok(abi) => State::Confined { abi },
            Err(reason) => unavailable(reason),
        };
        sandbox
    }

    fn resolve(&mut self, platform: Platform, config: &SandboxConfig) -> Result<u32, String> {
        let abi = platform.probe()?;
        if let Some(user) = &config.user {
            let (uid, gid) = lookup_user(user)?;
            self.user = Some((uid, gid));
            // The gate user must reach its private directories (the root
            // was made 0711 by `new`): a daemon refuses to start otherwise.
            if let Some(root) = &self.scratch_root
                && let Some(blocked) = untraversable(root, uid, gid)
            {
                let reason = format!(
                    "[sandbox] user '{user}' cannot reach the scratch directory {} ({} is closed to it); \
                     set [sandbox] scratch_dir to a directory it can reach, outside the data directory",
                    root.display(),
                    blocked.display()
                );
                self.refusal = Some(reason.clone());
                return Err(reason);
            }
        }
        if abi < WANTED_ABI && self.user.is_none() {
            return Err(format!(
                "the kernel's Landlock ABI is {abi}; 6 is needed to keep gates from signalling \
                 other processes of gatehost's user (or set [sandbox] user to an unprivileged user)"
            ));
        }
        self.drop_caps = rustix::process::geteuid().is_root() || platform.has_capabilities();
        let mut read: Vec<PathBuf> = SYSTEM_READ.iter().map(PathBuf::from).collect();
        read.extend(config.read.iter().cloned());
        // Name resolution for judges: resolv.conf often points into /run.
        if let Ok(target) = std::fs::canonicalize("/etc/resolv.conf") {
            read.push(target);
        }
        let read = grants_around(&read, &self.protected);
        for w in &config.write {
            self.check_writable(w)?;
        }
        let devices: Vec<PathBuf> = DEVICES
            .iter()
            .map(PathBuf::from)
            .filter(|p| p.exists())
            .collect();
        let abi = abi.min(WANTED_ABI);
        self.base = Some(BaseGrants::open(abi, &read, &config.write, &devices)?);
        // A write grant allows reading and executing too.
        self.read_paths = read;
        self.read_paths.extend(
            config
                .write
                .iter()
                .filter_map(|w| std::fs::canonicalize(w).ok()),
        );
        Ok(abi)
    }

    /// A write grant must not reach a protected path.
    fn check_writable(&self, path: &Path) -> Result<(), String> {
        let canonical = std::fs::canonicalize(path)
            .map_err(|e| format!("write grant {}: {e}", path.display()))?;
        if let Some(p) = self
            .protected
            .iter()
            .find(|p| p.starts_with(&canonical) || canonical.starts_with(p))
        {
            return Err(format!(
                "write grant {} reaches gatehost's own {}",
                path.display(),
                p.display()
            ));
        }
        Ok(())
    }

    /// The uid and gid gates run as (`[sandbox] user`), if not root's.
    pub fn gate_user(&self) -> Option<(u32, u32)> {
        self.user
    }

    /// Why a daemon must refuse to start with this sandbox: its gate user
    /// cannot reach (or gatehost cannot make) the scratch root, so every
    /// gate would be refused while the daemon said it serves.
    pub fn refusal(&self) -> Option<&str> {
        self.refusal.as_deref()
    }

    /// Logs [`Sandbox::describe`]'s line once, where a person looks: at
    /// info level when gates are confined (shown with `--log info`, and by
    /// `serve` at start), as a warning when they are not (unavailable or
    /// disabled: every native gate is an error, or runs unconfined).
    pub fn log_state(&self) {
        let line = self.describe();
        match self.state {
            State::Confined { .. } => tracing::info!("{line}"),
            State::Unavailable { .. } | State::Disabled => tracing::warn!("{line}"),
        }
    }

    /// One line saying which confinement is in force, printed at start.
    pub fn describe(&self) -> String {
        match &self.state {
            State::Confined { abi } => {
                let who = match (self.user, self.drop_caps) {
                    (Some((u, g)), _) => format!("as uid {u} gid {g}, no capabilities"),
                    (None, true) => "no capabilities".to_string(),
                    (None, false) => "unprivileged".to_string(),
                };
                let scopes = if *abi >= 6 {
                    ", no signals or abstract sockets outside the gate"
                } else {
                    ""
                };
                format!(
                    "sandbox: native gates confined by Landlock ABI {abi} (files: system read-only, \
                     workspace and private tmp writable; no TCP unless granted{scopes}), \
                     {who}, no_new_privs"
                )
            }
            State::Unavailable {
                reason,
                required: true,
            } => format!("sandbox: NOT AVAILABLE ({reason}); native gates will be errors"),
            State::Unavailable {
                reason,
                required: false,
            } => format!(
                "sandbox: NOT AVAILABLE ({reason}); native gates run UNCONFINED ([sandbox] required = false)"
            ),
            State::Disabled => {
                "sandbox: DISABLED ([sandbox] enabled = false): native gates run UNCONFINED"
                    .to_string()
            }
        }
    }

    /// Runs `f` (gatehost's own writes into a workspace's `.git`) on a
    /// thread that may write only beneath `git_dir`; unconfined where the
    /// sandbox is off or not required, an error where it is required but
    /// unavailable.
    pub fn confine_git_writes<T: Send>(
        &self,
        git_dir: BorrowedFd<'_>,
        f: impl FnOnce() -> T + Send,
    ) -> Result<T, SandboxError> {
        match &self.state {
            State::Confined { abi } => {
                confine::writing_only_beneath(*abi, git_dir, f).map_err(SandboxError::Refused)
            }
            State::Unavailable {
                reason,
                required: true,
            } => Err(SandboxError::Unavailable(reason.clone())),
            State::Unavailable { .. } | State::Disabled => Ok(f()),
        }
    }

    /// True when gates run confined.
    pub fn confines(&self) -> bool {
        matches!(self.state, State::Confined { .. })
    }

    /// Prepares one gate process: `program` (granted read and execute)
    /// started in `place`, with what its configuration `grants`.
    pub fn prepare<'a>(
        &'a self,
        program: &Path,
        place: Place<'a>,
        grants: &Grants,
    ) -> Result<Prepared<'a>, SandboxError> {
        let abi = match &self.state {
            State::Confined { abi } => *abi,
            State::Unavailable {
                reason,
                required: true,
            } => return Err(SandboxError::Unavailable(reason.clone())),
            State::Unavailable { .. } | State::Disabled => {
                // Unconfined (the operator's explicit, unsafe choice); a
                // judge still starts away from the workspace.
                let scratch = match place {
                    Place::Judge => Some(self.scratch(true)?),
                    Place::Workspace { .. } => None,
                };
                return Ok(Prepared {
                    plan: None,
                    env: Vec::new(),
                    scratch,
                });
            }
        };
        let scratch = self.scratch(matches!(place, Place::Judge))?;
        let mut write = vec![scratch.tmp()];
        let workspace = match place {
            Place::Workspace(anchor) => {
                let canonical = anchor.root();
                if let Some(p) = anchor.overlapping(&self.protected_places) {
                    return Err(SandboxError::Refused(format!(
                        "the workspace {} overlaps gatehost's own {}; a gate may not write there",
                        canonical.display(),
                        p.display()
                    )));
                }
                if let Some((uid, gid)) = self.user
                    && let Some(blocked) =
                        untraversable(&canonical.join("."), uid, gid).or_else(|| {
                            (!writable_by(canonical, uid, gid)).then(|| canonical.to_path_buf())
                        })
                {
                    return Err(SandboxError::Refused(format!(
                        "the workspace {} is not writable by the gate user (uid {uid}): {} is closed to it",
                        canonical.display(),
                        blocked.display()
                    )));
                }
                Some(anchor.dir().as_fd())
            }
            Place::Judge => {
                write.push(scratch.cwd());
                None
            }
        };
        for w in &grants.write {
            self.check_writable(w).map_err(SandboxError::Refused)?;
            write.push(w.clone());
        }
        let Some(base) = &self.base else {
            return Err(SandboxError::Unavailable("no base grants".into()));
        };
        let mut read = grants_around(&grants.read, &self.protected);
        // The program itself (an allowlisted tool outside the system dirs).
        if let Ok(p) = std::fs::canonicalize(program)
            && !self.protected.iter().any(|x| p.starts_with(x))
        {
            read.push(p);
        }
        Ok(Prepared {
            plan: Some(Plan {
                abi,
                base,
                read,
                write,
                workspace,
                network: grants.network,
                drop_caps: self.drop_caps,
                user: self.user,
            }),
            env: vec![
                (OsString::from("TMPDIR"), scratch.tmp().into_os_string()),
                // Python's bytecode goes to the gate's scratch, not to
                // `__pycache__/` in the workspace: what a gate's run wrote
                // there would count as the agent's change at the next turn,
                // and bytecode the agent planted there is never loaded.
                (
                    OsString::from("PYTHONPYCACHEPREFIX"),
                    scratch.tmp().join("pycache").into_os_string(),
                ),
            ],
            scratch: Some(scratch),
        })
    }
}

/// A user name or numeric uid, as (uid, gid).
fn lookup_user(user: &str) -> Result<(u32, u32), String> {
    let name = std::ffi::CString::new(user).map_err(|_| format!("[sandbox] user {user:?}"))?;
    // SAFETY: `passwd` is plain data (integers and pointers): all zeroes is
    // a valid value, and getpw*_r fills it before it is read.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: getpwnam_r/getpwuid_r write into `pwd` and `buf` (whose
    // length is given) and set `found` to `&pwd` or null.
    let rc = match user.parse::<u32>() {
        // SAFETY: as above.
        Ok(uid) => unsafe {
            libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut found)
        },
        // SAFETY: as above; `name` is a NUL-terminated C string.
        Err(_) => unsafe {
            libc::getpwnam_r(
                name.as_ptr(),
                &mut pwd,
                buf.as_mut_ptr(),
                buf.len(),
                &mut found,
            )
        },
    };
    if rc != 0 || found.is_null() {
        return Err(format!("[sandbox] user '{user}' does not exist"));
    }
    if pwd.pw_uid == 0 {
        return Err(format!(
            "[sandbox] user '{user}' is root; name an unprivileged user"
        ));
    }
    Ok((pwd.pw_uid, pwd.pw_gid))
}

/// Whether a name may be set by a gate's `env` (never the variables the
/// sandbox or the loader depend on).
pub fn settable_env_name(name: &OsStr) -> bool {
    let n = name.to_string_lossy();
    !(n == "PATH"
        || n == "HOME"
        || n == "TMPDIR"
        || n == "PYTHONPYCACHEPREFIX"
        || n.starts_with("LD_")
        || n.starts_with("GATEHOST_"))
}

mod places;
pub use places::scratch_root_of;
use places::{grants_around, make_private_dir, make_shared_root, untraversable, writable_by};
// (Its tests confine with Landlock.)
#[cfg(all(test, target_os = "linux"))]
mod tests;
