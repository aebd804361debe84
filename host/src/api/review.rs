//! `GET /v1/policies/{id}/diff`: the exact patch a commit policy commits,
//! a page at a time. The operator token reads any; the agent token only
//! with the key of one of the policy's sessions (see `engine::reads`).
//!
//! Bounded: a page holds at most `limit` files (default and most
//! [`MAX_FILES`]) and [`MAX_PAGE_BYTES`] of text; the next page starts at
//! `nextFrom`. A single file over the byte bound is sent as its headers
//! with `cut: true` and a `note`, its counts whole.
//!
//! The patch is read from the policy's workspace, which is its owning
//! host's: a host asked for another host's policy (a fleet on PostgreSQL)
//! checks the caller, then has the owner make the page (`forwarded`) and
//! answers it as the owner made it, or the owner's refusal.
//!
//! This module only maps the engine's answer to the wire; it must never
//! change state.

use super::query::{DiffQuery, Query};
use super::{ApiError, ApiResult, AppState, Credential, forwarded, ok};
use crate::api::convert::ToWire;
use crate::change::{Hunk, LineKind};
use crate::commit::patch::{PageBounds, PatchFile};
use crate::wire;
use axum::extract::{Path, State};

/// The most files on one page.
pub const MAX_FILES: usize = 1000;
/// The most patch text on one page.
pub const MAX_PAGE_BYTES: usize = 1024 * 1024;

pub(super) async fn diff(
    State(st): State<AppState>,
    Credential(caller): Credential,
    Path(id): Path<String>,
    Query(q): Query<DiffQuery>,
) -> ApiResult {
    st.engine.policy_for(&id, &caller)?;
    if let Some(owner) = forwarded::owner_elsewhere(&st, &id)? {
        let action = forwarded::HostAction::Diff {
            from: q.from,
            limit: q.limit,
            since: q.since,
        };
        return forwarded::send(&st, &owner, &id, &action).await;
    }
    ok(page(&st, &id, q).await?)
}

/// The page `q` of policy `id`'s patch, read from its workspace (this
/// host's).
pub(super) async fn page(
    st: &AppState,
    id: &str,
    q: DiffQuery,
) -> Result<wire::PolicyDiff, ApiError> {
    let (from, max_files) = (q.from, q.files(MAX_FILES));
    let got = st
        .engine
        .policy_patch(
            id,
            PageBounds {
                from,
                max_files,
                max_bytes: MAX_PAGE_BYTES,
            },
            q.since.clone(),
        )
        .await?;
    let page = got.page;
    let cut: Vec<String> = page
        .files
        .iter()
        .filter(|f| f.cut)
        .map(|f| f.entry.path.to_string())
        .collect();
    let note = match (cut.is_empty(), page.next) {
        (false, _) => Some(format!(
            "{} is over {MAX_PAGE_BYTES} bytes of diff: its headers and counts only",
            cut.join(", ")
        )),
        (true, Some(n)) => Some(format!(
            "files {from} to {} of {}: the next page starts at from={n}",
            n.saturating_sub(1),
            page.total
        )),
        (true, None) => None,
    };
    Ok(wire::PolicyDiff {
        policy_id: got.policy.id.clone(),
        status: got.policy.status.to_wire(),
        tree: got.tree,
        base: got.base,
        commit: got.commit,
        head_moved: got.head_moved,
        files: page.files.into_iter().map(diff_file).collect(),
        patch: page.patch,
        since: q.since,
        from,
        next_from: page.next,
        total_files: page.total,
        note,
    })
}

/// One file of a page, as the wire carries it: its hunks as data.
fn diff_file(f: PatchFile) -> wire::DiffFile {
    let (old_mode, new_mode) = (f.old_mode(), f.new_mode());
    let path = f.entry.path.to_string();
    wire::DiffFile {
        generated: crate::change::generated::generated(&path).map(str::to_string),
        old_blob: f.entry.old.map(|(_, id)| id.to_string()),
        new_blob: f.entry.new.map(|(_, id)| id.to_string()),
        path,
        from: f.entry.from.map(|p| p.to_string()),
        kind: f.entry.kind.as_str().to_string(),
        added: f.added,
        removed: f.removed,
        binary: f.binary,
        cut: f.cut,
        old_mode: old_mode.map(str::to_string),
        new_mode: new_mode.map(str::to_string),
        emptied: f.emptied,
        hunks: f.hunks.into_iter().map(diff_hunk).collect(),
    }
}

fn diff_hunk(h: Hunk) -> wire::DiffHunk {
    wire::DiffHunk {
        old_start: h.old_start,
        old_lines: h.old_lines,
        new_start: h.new_start,
        new_lines: h.new_lines,
        lines: h
            .lines
            .into_iter()
            .map(|l| wire::DiffLine {
                kind: match l.kind {
                    LineKind::Context => wire::DiffLineKind::Context,
                    LineKind::Added => wire::DiffLineKind::Added,
                    LineKind::Removed => wire::DiffLineKind::Removed,
                },
                text: l.text,
                old: l.old,
                new: l.new,
                no_newline: l.no_newline,
            })
            .collect(),
    }
}
