//! What changed in the workspace since HEAD, as a unified diff in `git diff`
//! form, for gates run by the daemon (plugins get its files as
//! `changed-files` and each file's part through `file-diff`).
//!
//! It reads the workspace through the same confined snapshot as a commit
//! (cap-std, symlinks never followed, `.gitignore` honoured, `.git`
//! skipped) and HEAD's blobs in process: like the commit, it runs nothing
//! the repository names (no diff driver, no textconv, no filter). Content
//! is compared raw.

use super::{
    CommitError, EntryKind, Excludes, Tracked, Workspace, git, is_dot_git, normalise_paths,
    read_snapshot, resolve_head, tracked_entries,
};
use crate::change::{Capped, ChangeCaps, ChangeKind, FileChange, Side, quoted};
use gix::bstr::{BString, ByteSlice};
use std::collections::BTreeSet;
use std::fmt::Write;
use std::path::Path;
use std::sync::Arc;

/// The most diff text produced: beyond it the diff is refused rather than
/// cut (a cut diff would hide changed files from the gates).
pub(super) const MAX_DIFF_BYTES: usize = 16 * 1024 * 1024;

pub(super) fn mode(kind: EntryKind) -> &'static str {
    match kind {
        EntryKind::BlobExecutable => "100755",
        EntryKind::Link => "120000",
        EntryKind::Commit => "160000",
        EntryKind::Tree => "040000",
        EntryKind::Blob => "100644",
    }
}

/// Every change between HEAD's tree and the workspace (tracked files
/// modified or deleted, untracked files not ignored), as one unified diff.
/// Empty when nothing changed. An unborn HEAD diffs against nothing.
pub fn workspace_diff(workspace: &Path) -> Result<String, CommitError> {
    Ok(workspace_changes(workspace, ChangeCaps::default())?
        .into_iter()
        .map(|f| f.hunks)
        .collect())
}

/// The same changes, one entry per file (what plugins get as
/// `changed-files` and `file-diff`). Every top-level name is taken
/// literally, whatever it holds (`-x`, `:x`, `*`, `?`, `[`, `\`, spaces,
/// newlines): no pathspec is ever built from a name.
///
/// Bounded by `caps`: a file over `caps.file_bytes` (either side) is never
/// read into memory (a tracked one is hashed as it streams), and past
/// `caps.total_bytes` of diff text the other files come with their headers
/// only; each such file is listed, marked [`Capped`], never hidden.
pub fn workspace_changes(
    workspace: &Path,
    caps: ChangeCaps,
) -> Result<Vec<FileChange>, CommitError> {
    changes_since_head(workspace, caps, Source::None).map(|(changes, _, _)| changes)
}

/// [`workspace_changes`], files whose stat data `cache` knows (and whose
/// content was then HEAD's blob) not read again; `cache` is refilled from
/// this read (the files now HEAD's). Also whether the cache changed (to
/// be saved again). A process that runs once (a standalone hook) keeps
/// the cache between its runs through [`super::remembered`].
pub fn workspace_changes_remembered(
    workspace: &Path,
    caps: ChangeCaps,
    cache: &mut super::StatCache,
) -> Result<(Vec<FileChange>, bool), CommitError> {
    changes_since_head(workspace, caps, Source::Given(cache)).map(|(c, changed, _)| (c, changed))
}

/// [`workspace_changes_remembered`] with the cache `load`ed on a thread of
/// its own while HEAD's entries are read (each about 40 ms at 100,000
/// files; one process's stop pays both): the change set, whether the
/// cache changed, and the cache.
pub fn workspace_changes_loading(
    workspace: &Path,
    caps: ChangeCaps,
    load: impl FnOnce() -> super::StatCache + Send,
) -> Result<(Vec<FileChange>, bool, super::StatCache), CommitError> {
    let (changes, changed, cache) =
        changes_since_head(workspace, caps, Source::Load(Box::new(load)))?;
    Ok((changes, changed, cache.unwrap_or_default()))
}

/// Where a change set's stat cache comes from.
enum Source<'a> {
    None,
    Given(&'a mut super::StatCache),
    Load(Box<dyn FnOnce() -> super::StatCache + Send + 'a>),
}

fn changes_since_head(
    workspace: &Path,
    caps: ChangeCaps,
    source: Source<'_>,
) -> Result<(Vec<FileChange>, bool, Option<super::StatCache>), CommitError> {
    let t0 = std::time::Instant::now();
    let ws = Workspace::open(workspace)?;
    let repo = &ws.repo;
    let head = resolve_head(repo)?;
    let mut names = BTreeSet::new();
    // Top-level names are given to the snapshot as paths, which would take
    // them even if ignored (as `git add -f`): filter the ignored ones here.
    let mut excludes = Excludes::new(&ws.common)?;
    excludes.push_dir(&ws.root, b"".as_bstr())?;
    let entries = ws.root.entries().map_err(|source| CommitError::Io {
        path: ".".into(),
        source,
    })?;
    for entry in entries {
        let entry = entry.map_err(|source| CommitError::Io {
            path: ".".into(),
            source,
        })?;
        let name = entry.file_name();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        // Names that are not UTF-8 cannot be named through the plugin
        // interface (its paths are strings); they are logged, not hidden.
        match name.to_str() {
            Some(n) => {
                if !is_dot_git(n.as_bytes()) && !excludes.is_ignored(n.as_bytes().as_bstr(), is_dir)
                {
                    names.insert(n.to_string());
                }
            }
            None => {
                if !excludes.is_ignored(
                    std::os::unix::ffi::OsStrExt::as_bytes(name.as_os_str()).as_bstr(),
                    is_dir,
                ) {
                    return Err(CommitError::PathNotUtf8(
                        name.to_string_lossy().into_owned(),
                    ));
                }
            }
        }
    }
    if let Some(tree) = head.tree {
        let tree = repo.find_tree(tree).map_err(git("read HEAD tree"))?;
        for entry in tree.iter() {
            let entry = entry.map_err(git("read HEAD tree"))?;
            names.insert(entry.filename().to_str_lossy().into_owned());
        }
    }
    let paths: Vec<String> = names.into_iter().collect();
    let t1 = std::time::Instant::now();
    let mut loaded = None;
    let (tracked, cache) = match source {
        Source::None => (Arc::new(tracked_entries(repo, head.tree, &paths)?), None),
        Source::Given(c) => (c.tracked(repo, head.tree, &paths)?, Some(c)),
        Source::Load(load) => {
            let (tracked, cache) = std::thread::scope(|s| {
                let loader = s.spawn(|| {
                    let t = std::time::Instant::now();
                    let cache = load();
                    (cache, t.elapsed())
                });
                let tracked = tracked_entries(repo, head.tree, &paths);
                let head_us = t1.elapsed().as_micros();
                let (cache, load_time) = loader.join().unwrap_or_else(|_| {
                    tracing::warn!("loading the stat cache failed: every file is read");
                    (super::StatCache::default(), std::time::Duration::ZERO)
                });
                // Side by side: the longer of the two is what the stop waits.
                tracing::debug!(
                    head_us,
                    load_us = load_time.as_micros(),
                    "HEAD's entries and the stat cache"
                );
                (tracked, cache)
            });
            (Arc::new(tracked?), Some(loaded.insert(cache)))
        }
    };
    let t2 = std::time::Instant::now();
    let snapshot = super::read::read_snapshot_with(
        &ws,
        &paths,
        &tracked,
        super::read::Reads {
            cache: cache.as_deref(),
            content_cap: Some(caps.file_bytes),
            // A change set lists what changed: HEAD's files are only
            // counted (their paths kept for the deletions and the cache).
            skip_unchanged: cache.is_some(),
            watch: None,
        },
    )?;
    let t3 = std::time::Instant::now();
    let out = diff_content(repo, &tracked, &snapshot, Detail::Hunks, Some(caps))?;
    // Remembered: the files whose content is HEAD's (their blob is in the
    // repository, where a later read takes it from).
    let hash = repo.object_hash();
    let refilled = cache.is_some_and(|c| {
        c.refill_keeping(
            &snapshot.unchanged,
            &tracked,
            snapshot.files().filter_map(|item| {
                let (kind, head_id) = tracked.get(&item.path)?;
                let id = item.oid(hash).ok()?;
                (id == *head_id && *kind == item.kind.entry_kind()).then_some((item, id))
            }),
        )
    });
    tracing::debug!(
        open_us = (t1 - t0).as_micros(),
        tracked_us = (t2 - t1).as_micros(),
        read_us = (t3 - t2).as_micros(),
        diff_us = t3.elapsed().as_micros(),
        listed = snapshot.files().count(),
        unchanged = snapshot.unchanged.len(),
        "workspace changes"
    );
    Ok((out, refilled, loaded))
}

/// The same diff, limited to `paths` (commit paths: files or directories),
/// reading only them.
pub fn paths_diff(workspace: &Path, paths: &[String]) -> Result<String, CommitError> {
    Ok(crate::change::render(&paths_changes(
        workspace,
        paths,
        Detail::Hunks,
    )?))
}

/// How much of each file's change to compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detail {
    /// Kind, sides and line counts; `hunks` holds the file's header only.
    Counts,
    /// The same and the file's hunks, rendered.
    Hunks,
    /// The same and the hunks as data too (`FileChange::lines`).
    Lines,
}

/// The changes under `paths` (commit paths), one entry per file, reading
/// only them.
pub fn paths_changes(
    workspace: &Path,
    paths: &[String],
    detail: Detail,
) -> Result<Vec<FileChange>, CommitError> {
    let paths = normalise_paths(paths)?;
    let ws = Workspace::open(workspace)?;
    let head = resolve_head(&ws.repo)?;
    changes_of(&ws, head.tree, &paths, detail)
}

/// One read of the commit `paths`: their content's fingerprint (as
/// [`super::fingerprint`]) and their changes against `HEAD`.
pub fn fingerprint_and_changes(
    workspace: &Path,
    paths: &[String],
    detail: Detail,
) -> Result<(String, Vec<FileChange>), CommitError> {
    let paths = normalise_paths(paths)?;
    let ws = Workspace::open(workspace)?;
    let head = resolve_head(&ws.repo)?;
    let tracked = tracked_entries(&ws.repo, head.tree, &paths)?;
    let snapshot = read_snapshot(&ws, &paths, &tracked)?;
    let changes = diff_content(&ws.repo, &tracked, &snapshot, detail, None)?;
    Ok((snapshot.digest(), changes))
}

/// Each changed file under `paths`: its path, how it changed and its part
/// of the diff. The files travel as data, so a name holding a newline or a
/// tab is never re-parsed from text.
fn changes_of(
    ws: &Workspace,
    head_tree: Option<gix::ObjectId>,
    paths: &[String],
    detail: Detail,
) -> Result<Vec<FileChange>, CommitError> {
    let repo = &ws.repo;
    if paths.is_empty() {
        return Ok(Vec::new());
    }
    let tracked = tracked_entries(repo, head_tree, paths)?;
    let snapshot = read_snapshot(ws, paths, &tracked)?;
    diff_content(repo, &tracked, &snapshot, detail, None)
}

/// Each changed file between `tracked` (HEAD's entries under the paths)
/// and `snapshot` (what was read for them, against the same `tracked`),
/// typed: blob ids and modes
/// from the objects, line counts from the diff's operations (never from
/// its text), and the file's hunks rendered once. With `caps` (a change
/// set for gates) a file over the per-file cap, either side, is listed
/// capped and never read, and past the total cap files come with their
/// headers only; without, a diff past [`MAX_DIFF_BYTES`] is refused.
pub(super) fn diff_content(
    repo: &gix::Repository,
    tracked: &Tracked,
    snapshot: &super::Snapshot,
    detail: Detail,
    caps: Option<ChangeCaps>,
) -> Result<Vec<FileChange>, CommitError> {
    let mut out = Vec::new();
    let total = std::cell::Cell::new(0u64);
    // What is left of the total cap for the next file's text.
    let budget = || {
        caps.map(|c| Budget {
            left: c.total_bytes.saturating_sub(total.get()),
            cap: c.total_bytes,
        })
    };
    let push = |out: &mut Vec<FileChange>, change: Option<FileChange>| {
        let Some(mut change) = change else {
            return Ok(());
        };
        match caps {
            Some(caps) => {
                if change.capped.is_none()
                    && total.get() + change.hunks.len() as u64 > caps.total_bytes
                {
                    change.hunks = headers_of(&change.hunks);
                    change.lines.clear();
                    change.capped = Some(Capped::Total {
                        cap: caps.total_bytes,
                    });
                }
                total.set(total.get() + change.hunks.len() as u64);
            }
            None => {
                total.set(total.get() + change.hunks.len() as u64);
                if total.get() > MAX_DIFF_BYTES as u64 {
                    return Err(CommitError::DiffTooLarge(MAX_DIFF_BYTES));
                }
            }
        }
        out.push(change);
        Ok(())
    };
    // A HEAD blob over the per-file cap is never read either.
    let too_big = |id: gix::ObjectId| -> Result<Option<Capped>, CommitError> {
        let Some(caps) = caps else {
            return Ok(None);
        };
        let bytes = repo.find_header(id).map_err(git("read HEAD blob"))?.size();
        Ok((bytes > caps.file_bytes).then_some(Capped::File {
            bytes,
            cap: caps.file_bytes,
        }))
    };
    let blob = |id| -> Result<Vec<u8>, CommitError> {
        Ok(repo
            .find_blob(id)
            .map_err(git("read HEAD blob"))?
            .data
            .clone())
    };
    for item in snapshot.files() {
        let new_kind = item.kind.entry_kind();
        // Looked up as it was read, in this same map.
        let head = item.head;
        if let Some(o) = item.oversized {
            // Never read: unchanged when its streamed blob is HEAD's.
            if let (Some((kind, id)), Some(new_id)) = (head, o.id)
                && (kind == EntryKind::Commit || (id == new_id && kind == new_kind))
            {
                continue;
            }
            let capped = Capped::File {
                bytes: o.bytes,
                cap: o.cap,
            };
            let path = BString::from(item.path.as_slice());
            push(
                &mut out,
                Some(capped_change(path, head, Some((new_kind, o.id)), capped)),
            )?;
            continue;
        }
        let new_id = item.oid(repo.object_hash())?;
        // Unchanged (same blob, same mode): nothing to read or show.
        if let Some((kind, id)) = head
            && (kind == EntryKind::Commit || (id == new_id && kind == new_kind))
        {
            continue;
        }
        // As bytes: never hidden, never renamed (an interface whose paths
        // are strings refuses the change, naming it).
        let path = BString::from(item.path.as_slice());
        if let Some((kind, id)) = head
            && let Some(capped) = too_big(id)?
        {
            let change = capped_change(
                path,
                Some((kind, id)),
                Some((new_kind, Some(new_id))),
                capped,
            );
            push(&mut out, Some(change))?;
            continue;
        }
        // Content vouched for by the stat cache is read from its blob.
        let data = match item.known {
            Some(id) => blob(id)?,
            None => item.data.clone(),
        };
        let new = Some(Version {
            bytes: &data,
            kind: new_kind,
            id: new_id,
        });
        let change = match head {
            Some((kind, id)) => {
                let old = blob(id)?;
                let old = Version {
                    bytes: &old,
                    kind,
                    id,
                };
                file_change(path, Some(old), new, detail, budget())
            }
            None => file_change(path, None, new, detail, budget()),
        };
        push(&mut out, change)?;
    }
    for (path, (kind, id)) in snapshot.deleted(tracked) {
        if let Some(capped) = too_big(*id)? {
            push(
                &mut out,
                Some(capped_change(
                    path.to_owned(),
                    Some((*kind, *id)),
                    None,
                    capped,
                )),
            )?;
            continue;
        }
        let old = blob(*id)?;
        let path = path.to_owned();
        let old = Version {
            bytes: &old,
            kind: *kind,
            id: *id,
        };
        push(
            &mut out,
            file_change(path, Some(old), None, detail, budget()),
        )?;
    }
    Ok(out)
}

/// A file's change whose content is left out (`capped`): its headers
/// only, its counts 0.
fn capped_change(
    path: BString,
    old: Option<(EntryKind, gix::ObjectId)>,
    new: Option<(EntryKind, Option<gix::ObjectId>)>,
    capped: Capped,
) -> FileChange {
    let kind = match (&old, &new) {
        (None, _) => ChangeKind::Added,
        (Some(_), None) => ChangeKind::Deleted,
        (Some(_), Some(_)) => ChangeKind::Modified,
    };
    let (a, b) = (quoted("a/", &path), quoted("b/", &path));
    let mut out = String::new();
    let _ = writeln!(out, "diff --git {a} {b}");
    match (&old, &new) {
        (None, Some((k, _))) => {
            let _ = writeln!(out, "new file mode {}", mode(*k));
        }
        (Some((k, _)), None) => {
            let _ = writeln!(out, "deleted file mode {}", mode(*k));
        }
        (Some((o, _)), Some((n, _))) if o != n => {
            let _ = writeln!(out, "old mode {}\nnew mode {}", mode(*o), mode(*n));
        }
        _ => {}
    }
    let side_of = |k: EntryKind, id: Option<gix::ObjectId>| Side {
        id: id.map(|i| i.to_hex().to_string()),
        mode: u32::from_str_radix(mode(k), 8).ok(),
    };
    FileChange {
        path,
        kind,
        old: old.map(|(k, id)| side_of(k, Some(id))),
        new: new.map(|(k, id)| side_of(k, id)),
        added: 0,
        removed: 0,
        binary: false,
        hunks: out,
        lines: Vec::new(),
        capped: Some(capped),
    }
}

/// The header lines of one file's part of a diff (up to its first hunk,
/// `---` line or binary note).
fn headers_of(hunks: &str) -> String {
    let mut out = String::new();
    for line in hunks.split_inclusive('\n') {
        if line.starts_with("--- ") || line.starts_with("@@") || line.starts_with("Binary files ") {
            break;
        }
        out.push_str(line);
    }
    out
}

fn as_text(bytes: &[u8]) -> Option<&str> {
    if bytes.contains(&0) {
        return None;
    }
    std::str::from_utf8(bytes).ok()
}

/// One side of a file: its content, kind and blob.
#[derive(Clone, Copy)]
pub(super) struct Version<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) kind: EntryKind,
    pub(super) id: gix::ObjectId,
}

fn side(v: &Version<'_>) -> Side {
    Side {
        id: Some(v.id.to_hex().to_string()),
        mode: u32::from_str_radix(mode(v.kind), 8).ok(),
    }
}

/// What is left of a change set's total cap, for one file's text.
#[derive(Debug, Clone, Copy)]
pub(super) struct Budget {
    pub(super) left: u64,
    pub(super) cap: u64,
}

/// The longest the line diff of one file may take: past it the diff is
/// approximated (still a correct diff, maybe not the smallest), so a file
/// of a million changed lines costs seconds, not minutes.
const DIFF_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// One file's change, its hunks rendered `git diff` style (paths quoted as
/// git quotes them); `None` when nothing differs. With a `budget`, the
/// hunks are rendered one at a time and, past what is left, dropped: the
/// file keeps its headers and is marked [`Capped::Total`] (its text is
/// never held whole).
pub(super) fn file_change(
    path: BString,
    old: Option<Version<'_>>,
    new: Option<Version<'_>>,
    detail: Detail,
    budget: Option<Budget>,
) -> Option<FileChange> {
    let kind = match (&old, &new) {
        (None, Some(_)) => ChangeKind::Added,
        (Some(_), None) => ChangeKind::Deleted,
        (Some(_), Some(_)) => ChangeKind::Modified,
        (None, None) => return None,
    };
    let (a, b) = (quoted("a/", &path), quoted("b/", &path));
    let mut out = String::new();
    let _ = writeln!(out, "diff --git {a} {b}");
    match (&old, &new) {
        (None, Some(n)) => {
            let _ = writeln!(out, "new file mode {}", mode(n.kind));
        }
        (Some(o), None) => {
            let _ = writeln!(out, "deleted file mode {}", mode(o.kind));
        }
        (Some(o), Some(n)) if o.kind != n.kind => {
            let _ = writeln!(out, "old mode {}\nnew mode {}", mode(o.kind), mode(n.kind));
        }
        _ => {}
    }
    let old_bytes = old.map(|v| v.bytes).unwrap_or(b"");
    let new_bytes = new.map(|v| v.bytes).unwrap_or(b"");
    let from = if old.is_some() {
        a
    } else {
        "/dev/null".to_string()
    };
    let to = if new.is_some() {
        b
    } else {
        "/dev/null".to_string()
    };
    let (mut added, mut removed, mut binary) = (0u64, 0u64, false);
    let mut capped = None;
    let mut lines = Vec::new();
    match (as_text(old_bytes), as_text(new_bytes)) {
        (Some(o), Some(n)) => {
            if o == n && old.map(|v| v.kind) == new.map(|v| v.kind) {
                return None;
            }
            if o != n {
                let diff = similar::TextDiff::configure()
                    .timeout(DIFF_TIMEOUT)
                    .diff_lines(o, n);
                for op in diff.ops() {
                    for change in diff.iter_changes(op) {
                        match change.tag() {
                            similar::ChangeTag::Insert => added += 1,
                            similar::ChangeTag::Delete => removed += 1,
                            similar::ChangeTag::Equal => {}
                        }
                    }
                }
                if detail != Detail::Counts {
                    let headers = out.len();
                    let mut unified = diff.unified_diff();
                    unified.context_radius(3);
                    for (i, hunk) in unified.iter_hunks().enumerate() {
                        if i == 0 {
                            let _ = writeln!(out, "--- {from}\n+++ {to}");
                        }
                        let _ = write!(out, "{hunk}");
                        if detail == Detail::Lines {
                            lines.push(crate::change::hunks::of_unified(&hunk));
                        }
                        if let Some(b) = budget
                            && out.len() as u64 > b.left
                        {
                            out.truncate(headers);
                            lines.clear();
                            capped = Some(Capped::Total { cap: b.cap });
                            break;
                        }
                    }
                    if !out.ends_with('\n') {
                        out.push('\n');
                    }
                }
            }
        }
        _ => {
            binary = true;
            let _ = writeln!(out, "Binary files {from} and {to} differ");
        }
    }
    Some(FileChange {
        path,
        kind,
        old: old.as_ref().map(side),
        new: new.as_ref().map(side),
        added,
        removed,
        binary,
        hunks: out,
        lines,
        capped,
    })
}

#[cfg(test)]
mod tests;
