//! What a green gate recorded for a commit (a policy row's `plan`
//! column) and the commit written from it (`prepared`). It owns their
//! shapes and versions; it must never read a workspace or write git.

use crate::commit::TreeSnapshot;
use serde::{Deserialize, Serialize};

pub use crate::commit::Prepared;

/// The version of the commit plan this build writes.
pub const PLAN_VERSION: u32 = 1;

fn plan_v0() -> u32 {
    0
}

/// What a green gate recorded for the commit (the API shows it as the
/// policy's `plan`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommitPlan {
    /// [`PLAN_VERSION`]; plans stored before versions were written are 0
    /// (the same fields).
    #[serde(default = "plan_v0")]
    pub version: u32,
    /// The paths to commit, relative to the workspace (exactly these, nothing
    /// else).
    pub paths: Vec<String>,
    /// The commit message.
    pub message: String,
    /// The judged content's fingerprint.
    pub fingerprint: String,
    /// The commit waits for a person's ack (`policy ack`) before it is made.
    pub require_human_ack: bool,
    /// What the paths change against HEAD, for the person who acks.
    #[serde(default)]
    pub diff_summary: Option<DiffSummary>,
    /// The snapshot the gates ran on (commit policies gated on one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<TreeSnapshot>,
    /// The commit paths changed in the workspace since the snapshot
    /// (a list, or `{error}`); recomputed while the ack is awaited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_after_snapshot: Option<ChangedAfter>,
}

/// A plan's `diffSummary`: the per-file counts, or why they could not be
/// read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum DiffSummary {
    /// The counts, file by file and in all.
    Counts {
        /// Each changed file's counts.
        files: Vec<FileCount>,
        /// Lines added, over every file.
        added: u64,
        /// Lines removed, over every file.
        removed: u64,
    },
    /// The change could not be read.
    Failed {
        /// Why.
        error: String,
    },
}

/// One file of a [`DiffSummary`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileCount {
    /// The file's path, relative to the workspace.
    pub path: String,
    /// `added`, `modified`, `deleted`, …
    pub kind: String,
    /// Lines added.
    pub added: u64,
    /// Lines removed.
    pub removed: u64,
    /// A binary file: no line counts.
    #[serde(default)]
    pub binary: bool,
}

/// A plan's `changedAfterSnapshot`: the paths, or why they could not be
/// read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ChangedAfter {
    /// The commit paths that changed since the snapshot (empty: none).
    Paths(Vec<String>),
    /// The workspace could not be read.
    Failed {
        /// Why.
        error: String,
    },
}

impl ChangedAfter {
    /// The paths read, or why they could not be.
    pub fn of(read: Result<Vec<String>, String>) -> ChangedAfter {
        match read {
            Ok(paths) => ChangedAfter::Paths(paths),
            Err(error) => ChangedAfter::Failed { error },
        }
    }
}
