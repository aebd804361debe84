//! The `confine` module of a platform without a sandbox implementation
//! (every platform but Linux: see [`super::platform`]).
//!
//! A gate's [`Plan`] is the same everywhere (what it may read and write,
//! its workspace, whether it may use the network): it is what a future
//! implementation (a Seatbelt profile on macOS, docs/security.md) would be
//! generated from. What applies a plan is not: here the base grants can
//! never be made ([`BaseGrants`] has no value), so the sandbox is never
//! in its confined state, no plan exists, and every function that would
//! confine is statically unreachable. This module must never pretend to
//! confine: where the portable code asks for a confinement, it errs.

use std::os::fd::BorrowedFd;
use std::path::PathBuf;

/// The grants every gate has: none can be opened here (this type has no
/// value), so no [`Plan`] can be made.
#[derive(Debug)]
pub enum BaseGrants {}

impl BaseGrants {
    /// Always an error: this platform has nothing to grant with.
    pub fn open(
        _abi: u32,
        _read: &[PathBuf],
        _write: &[PathBuf],
        _devices: &[PathBuf],
    ) -> Result<BaseGrants, String> {
        Err(no_confinement())
    }
}

/// What one gate process may do (the fields of Linux's plan); never made
/// here, since it holds a [`BaseGrants`].
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
    /// Unreachable: a plan cannot exist here.
    pub fn spawn_confined<T: Send>(&self, _spawn: impl FnOnce() -> T + Send) -> Result<T, String> {
        match *self.base {}
    }

    /// Unreachable: a plan cannot exist here.
    pub fn prepare(&self) -> Result<Prepared, String> {
        match *self.base {}
    }
}

/// A plan ready to apply: none can exist here.
#[derive(Debug)]
pub enum Prepared {}

/// Always an error: gatehost's own writes into `.git` cannot be confined
/// here (the sandbox is never in its confined state, so nothing asks).
pub fn writing_only_beneath<T: Send>(
    _abi: u32,
    _dir: BorrowedFd<'_>,
    _f: impl FnOnce() -> T + Send,
) -> Result<T, String> {
    Err(no_confinement())
}

fn no_confinement() -> String {
    "no sandbox implementation on this platform".to_string()
}
