//! gatehost's process side: everything that opens the workspace for a gate
//! or starts a process for one, and all of gatehost's `unsafe` that does so.
//!
//! - [`anchor`]: the workspace anchor, the only way to turn a workspace path
//!   into something usable (opened once, checked on what was opened);
//! - [`sandbox`]: confinement of every process a native gate starts
//!   (Landlock, no capabilities, `no_new_privs`, applied in the spawned
//!   child between `clone3` and `execve`), and the gates' scratch places;
//! - [`supervise`]: running a process tree with bounded time and output and
//!   nothing left behind.
//!
//! It owns the spawn, the confinement and the reaping; it must never know
//! what a gate, a policy, a session or the store is (it depends on no other
//! gatehost crate but the test hooks), and never decide a verdict: it
//! reports how a process ended, the caller judges.

#![warn(missing_docs)]

pub mod anchor;
pub mod sandbox;
pub mod supervise;

pub use anchor::{AnchorError, WorkspaceAnchor};
pub use sandbox::{Sandbox, SandboxConfig, SandboxError};
pub use supervise::{Limits, ProcessRun, ProcessSpec, Supervisor, Termination};
