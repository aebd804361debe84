//! gatehost's git side, in process (gix), never the `git` program:
//!
//! - [`change`]: the change set, typed (which files changed and how);
//! - [`commit`]: commits of exactly the gated paths, running nothing the
//!   workspace names (no hooks, filters or configured programs);
//! - [`worktree`]: host-owned checkouts of a snapshot's tree, where a
//!   commit policy's gates run.
//!
//! It opens workspaces through the anchor (`gatehost-sandbox`) and must
//! never know what a gate, a policy or the store is: the engine decides
//! when to fingerprint, prepare and publish, this crate how.

#![warn(missing_docs)]

// The anchor (the commit's opening of the workspace) and the supervisor
// (the tests' tracked commands), at the paths the moved modules name.
use gatehost_sandbox::anchor;
#[cfg(test)]
use gatehost_sandbox::supervise;

pub mod change;
pub mod commit;
pub mod worktree;

pub use change::{ChangeKind, FileChange};
pub use commit::{CommitError, Prepared, TreeSnapshot};
pub use worktree::{WorktreeError, Worktrees};
