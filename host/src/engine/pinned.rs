//! What a gate's verdict is pinned to in the workspace: the commit paths'
//! fingerprint before and after a run, what changed since a snapshot, and
//! the change summary `policy:commit-ready` shows.
//!
//! It only reads the workspace (on the blocking pool). It must never
//! write there, nor decide a verdict.

use crate::model::plan::{DiffSummary, FileCount};
use std::path::Path;

/// After a workspace-mode gate, one read of the commit paths: the
/// fingerprint that closes the gate's bracket and, on a pass, what they
/// change against HEAD for `policy:commit-ready` (`{files: [{path, kind,
/// added, removed, binary}], added, removed}`, or `{error}` when it cannot
/// be computed: the summary informs the human; the fingerprint is what
/// guards the commit).
pub(super) async fn after_gate(
    workspace: &str,
    paths: Option<&[String]>,
    passed: bool,
) -> (Option<Result<String, String>>, Option<DiffSummary>) {
    let Some(paths) = paths else {
        return (None, None);
    };
    if !passed {
        return (fingerprint_of(workspace, Some(paths)).await, None);
    }
    let (ws, wanted) = (workspace.to_string(), paths.to_vec());
    let read = tokio::task::spawn_blocking(move || {
        crate::commit::fingerprint_and_changes(
            Path::new(&ws),
            &wanted,
            crate::commit::Detail::Counts,
        )
    })
    .await;
    match read {
        Ok(Ok((fingerprint, changes))) => (Some(Ok(fingerprint)), Some(summary_of(&changes))),
        Ok(Err(e)) => (
            Some(Err(e.to_string())),
            Some(DiffSummary::Failed {
                error: e.to_string(),
            }),
        ),
        Err(e) => {
            let m = format!("the fingerprint task failed: {e}");
            (Some(Err(m.clone())), Some(DiffSummary::Failed { error: m }))
        }
    }
}

/// Lines added and removed, per file and in all, from the changes' own
/// counts.
pub(super) fn summary_of(changes: &[crate::change::FileChange]) -> DiffSummary {
    DiffSummary::Counts {
        files: changes
            .iter()
            .map(|f| FileCount {
                path: f.path_lossy().to_string(),
                kind: f.kind.as_str().to_string(),
                added: f.added,
                removed: f.removed,
                binary: f.binary,
            })
            .collect(),
        added: changes.iter().map(|f| f.added).sum::<u64>(),
        removed: changes.iter().map(|f| f.removed).sum::<u64>(),
    }
}

pub(super) async fn changed_since(
    workspace: &str,
    snap: &crate::commit::TreeSnapshot,
    cache: std::sync::Arc<std::sync::Mutex<crate::commit::StatCache>>,
) -> Result<Vec<String>, String> {
    let (ws, snap) = (workspace.to_string(), snap.clone());
    tokio::task::spawn_blocking(move || {
        let cache = cache.lock().unwrap_or_else(|p| p.into_inner());
        crate::commit::changed_since(Path::new(&ws), &snap, Some(&cache)).map_err(|e| e.to_string())
    })
    .await
    .unwrap_or_else(|e| Err(format!("the task failed: {e}")))
}

pub(super) async fn fingerprint_of(
    workspace: &str,
    paths: Option<&[String]>,
) -> Option<Result<String, String>> {
    let paths = paths?.to_vec();
    let ws = workspace.to_string();
    Some(
        tokio::task::spawn_blocking(move || {
            crate::commit::fingerprint(Path::new(&ws), &paths).map_err(|e| e.to_string())
        })
        .await
        .unwrap_or_else(|e| Err(format!("fingerprint task failed: {e}"))),
    )
}
