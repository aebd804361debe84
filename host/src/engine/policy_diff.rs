//! What a person reviews before an ack: the exact patch a commit policy
//! commits, read from git objects (see `commit::patch`).
//!
//! Owns: choosing what to diff for a policy (its snapshot's tree against
//! where its branch is now, limited to its commit paths, while the commit
//! is not made; the commit against its parent once it is). Must never
//! change state, read the workspace's files, or run anything.

use super::Policies;
use super::{EngineError, EngineResult, stored};
use crate::commit::patch::{self, PageBounds, PatchFile, PatchPage, PatchSpec};
use crate::store::PolicyRow;
use gix::ObjectId;
use std::path::Path;

/// A page of a policy's patch and what it was computed from.
#[derive(Debug, Clone)]
pub struct PolicyPatch {
    pub policy: PolicyRow,
    /// The tree the commit has (the snapshot's, or the commit's).
    pub tree: String,
    /// The commit the patch is against (HEAD now, or the commit's parent).
    pub base: Option<String>,
    /// The commit made, once it is.
    pub commit: Option<String>,
    /// The branch moved since the snapshot (the snapshot is committed on
    /// it if the move touched none of its paths, else refused).
    pub head_moved: bool,
    pub page: PatchPage,
}

fn oid(hex: &str, what: &str, p: &PolicyRow) -> EngineResult<ObjectId> {
    ObjectId::from_hex(hex.as_bytes()).map_err(|e| EngineError::Corrupt {
        policy: p.id.clone(),
        column: "plan".into(),
        message: format!("{what} {hex:?}: {e}"),
    })
}

/// What a policy's patch is computed from.
struct Source {
    workspace: String,
    spec: PatchSpec,
    base: Option<String>,
    head_moved: bool,
    tree: String,
}

impl Policies {
    /// What `p`'s patch diffs: its commit against its parent once made,
    /// else its snapshot's tree against where its branch is now (its
    /// commit paths only). A policy with no snapshot yet (still watching
    /// or gating, or not a commit policy) is a conflict.
    async fn patch_source(&self, p: &PolicyRow) -> EngineResult<Source> {
        let id = &p.id;
        let no_diff = |why: &str| EngineError::Conflict {
            code: "no-diff",
            message: format!(
                "policy {id} is {}: {why} (a commit policy's diff exists from awaiting-ack on)",
                p.status.as_str()
            ),
        };
        let plan = stored::plan(p)?;
        let snapshot = plan.as_ref().and_then(|pl| pl.snapshot.clone());
        if p.commit_sha.is_none() && snapshot.is_none() {
            return Err(no_diff(if plan.is_some() {
                "it was not gated on a snapshot"
            } else {
                "it has no snapshot to diff"
            }));
        }
        let workspace = self.workspace_of(p)?;
        let fail = |e: crate::commit::CommitError| diff_failed(id, e);
        let (spec, base, head_moved, tree) = match (&p.commit_sha, &snapshot) {
            (Some(sha), _) => {
                let (ws, sha) = (workspace.clone(), sha.clone());
                let (base, tree) =
                    tokio::task::spawn_blocking(move || patch::commit_trees(Path::new(&ws), &sha))
                        .await
                        .map_err(|e| EngineError::task_failed("the diff task", e))?
                        .map_err(fail)?;
                let parent = stored::prepared(p)?.and_then(|pr| pr.parent.clone());
                (
                    PatchSpec {
                        base,
                        tree,
                        paths: None,
                    },
                    parent,
                    false,
                    tree.to_string(),
                )
            }
            (None, Some(snap)) => {
                let ws = workspace.clone();
                let (head, head_tree) =
                    tokio::task::spawn_blocking(move || patch::head_tree(Path::new(&ws)))
                        .await
                        .map_err(|e| EngineError::task_failed("the diff task", e))?
                        .map_err(fail)?;
                let head = head.map(|h| h.to_string());
                let moved = head != snap.parent;
                (
                    PatchSpec {
                        base: head_tree,
                        tree: oid(&snap.tree, "snapshot tree", p)?,
                        paths: Some(snap.paths.clone()),
                    },
                    head,
                    moved,
                    snap.tree.clone(),
                )
            }
            (None, None) => return Err(no_diff("it has no snapshot to diff")),
        };
        Ok(Source {
            workspace,
            spec,
            base,
            head_moved,
            tree,
        })
    }

    /// One page of the patch `id` commits (or committed); with `since` (a
    /// tree id: an earlier snapshot's), the patch from that tree to the
    /// policy's instead (what changed since it was reviewed; a tree the
    /// repository does not hold is a conflict naming it). A policy with no
    /// snapshot yet is a conflict; an unknown one is not found.
    pub(crate) async fn policy_patch(
        &self,
        id: &str,
        bounds: PageBounds,
        since: Option<String>,
    ) -> EngineResult<PolicyPatch> {
        let p = self.engine().policy(id)?;
        stored::damaged(&p)?;
        let mut src = self.patch_source(&p).await?;
        if let Some(tree) = &since {
            src.spec.base =
                Some(
                    oid(tree, "since tree", &p).map_err(|_| EngineError::Invalid {
                        field: "since".into(),
                        message: format!("{tree:?} is not a tree id"),
                    })?,
                );
            src.base = None;
            src.head_moved = false;
        }
        let (ws, spec) = (src.workspace, src.spec);
        let page = tokio::task::spawn_blocking(move || patch::page(Path::new(&ws), &spec, bounds))
            .await
            .map_err(|e| EngineError::task_failed("the diff task", e))?
            .map_err(|e| diff_failed(id, e))?;
        Ok(PolicyPatch {
            commit: p.commit_sha.clone(),
            policy: p,
            tree: src.tree,
            base: src.base,
            head_moved: src.head_moved,
            page,
        })
    }

    /// The files of `p`'s patch at `paths`, whole (the comments' check:
    /// whether each line is one of the diff's).
    pub(super) async fn patch_files(
        &self,
        p: &PolicyRow,
        paths: Vec<String>,
    ) -> EngineResult<Vec<PatchFile>> {
        let src = self.patch_source(p).await?;
        let (ws, spec) = (src.workspace, src.spec);
        let id = p.id.clone();
        tokio::task::spawn_blocking(move || {
            let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
            patch::files_at(Path::new(&ws), &spec, &paths)
        })
        .await
        .map_err(|e| EngineError::task_failed("the diff task", e))?
        .map_err(|e| diff_failed(&id, e))
    }
}

fn diff_failed(id: &str, e: crate::commit::CommitError) -> EngineError {
    EngineError::Conflict {
        code: "diff-failed",
        message: format!("the diff of policy {id} cannot be read: {e}"),
    }
}
