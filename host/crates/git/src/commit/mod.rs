//! In-process git commits of exactly the approved paths of a workspace.
//!
//! This module owns the last step of gatehost's pipeline: after a gate passed and a
//! human approved a change, it turns the current content of the configured commit
//! paths of a workspace into a commit on the branch `HEAD` names. It works in three
//! steps so that a daemon can crash between them and recover:
//!
//! 1. [`fingerprint`] hashes what is there now (shown to the human, stored);
//! 2. [`prepare`] re-reads the same paths, refuses with [`CommitError::Stale`] unless
//!    the bytes it read hash to the approved fingerprint, writes blobs, trees and the
//!    commit object from exactly those bytes, and moves no reference;
//! 3. [`publish`] moves the branch from the parent to the new commit with a
//!    compare-and-swap, then brings `.git/index` in line with the commit for the
//!    committed paths; [`ref_state`] tells where the branch is after a restart.
//!
//! What it must never do: run any program. The supervised agent controls the whole
//! workspace, `.git/` included, so everything git would execute on `git add` /
//! `git commit` is an attack surface: hooks (`core.hooksPath` too), `core.fsmonitor`,
//! clean/smudge/process filter drivers named in `.gitattributes`, `gpg.program` with
//! `commit.gpgSign`, `core.pager`, and whatever `include.path` pulls in. So the module
//! never spawns `git` or any other process: objects and references are written with
//! the `gix` crate, opened isolated (no environment, no system or global config, no
//! config includes), and workspace files are read through `cap-std`, so that no
//! symlink and no `..` leads a read outside the workspace. Symlinks are committed as
//! symlinks (their target text), never followed; a path whose parent directory is a
//! symlink is refused, as `git add` does.
//!
//! Consequences and limitations that users should know about:
//!
//! * Content is committed raw. No `.gitattributes` filter runs: files tracked with a
//!   clean filter such as git LFS are committed as the bytes in the workspace (for LFS
//!   the whole large file, not a pointer), `text`/`eol` conversion is not applied,
//!   and `ident` is not collapsed. Commits are never signed.
//! * Ignore rules: `.gitignore` files inside the workspace (not symlinked ones) and
//!   `.git/info/exclude` are honoured inside a committed directory; `core.excludesFile`
//!   is not read (it names a file outside the workspace). A path given explicitly is
//!   committed even when ignored (like `git add -f` of that one path); a file already
//!   tracked in `HEAD` is kept up to date even when ignored, as `git add dir` does.
//! * Nested repositories are not committed; gitlinks (submodules) already in `HEAD`
//!   under a committed directory are kept as they are.
//! * The index (`.git/index`): after the branch moved (and again on an idempotent
//!   [`publish`]), while `HEAD` still names that branch at that commit, the index
//!   entries at or below each committed path (and any file entry standing where the
//!   commit has a directory) are replaced by the commit's entries (blob id and mode,
//!   zeroed stat data, so git re-hashes the file once); deleted paths leave the index.
//!   Every other entry, staged changes of the user included, is kept; an entry that
//!   was racily clean in the index read (its file's mtime in or after the index's
//!   second) gets its stat size zeroed, as git does, so that git still checks its
//!   content against the newer index. The cached-tree
//!   (`TREE`) extension is dropped, and so are the optional `UNTR`, `FSMN` and `REUC`
//!   extensions, which git rebuilds as needed (the `gix` writer does not carry them).
//!   With no index at all, one holding the commit's whole tree is written. The new
//!   index is written to `index.lock` and renamed over `index`. The update is skipped
//!   (the index is left byte-for-byte as it was, a warning is logged, and `publish`
//!   still returns Ok) when `.git/index` is a symlink or not a regular file (a FIFO,
//!   socket or device there, or at `HEAD`, `config`, `packed-refs`, a reflog or the
//!   branch's ref, refuses the whole commit instead, naming it), cannot be
//!   decoded or fails its checksum, is a split index (`link`) or a sparse index, holds
//!   unmerged entries for a committed path, when `index.lock` is held, or when `HEAD`
//!   moved away meanwhile. Records stored without [`Prepared::paths`] use the paths
//!   that differ between the parent's tree and the commit's.
//! * Accepted: a workspace whose root holds a real `.git` directory (no `commondir`
//!   there), or a linked worktree whose `.git` file names the repository's own
//!   `worktrees/NAME` (checked by [`GitDirs`] before anything is read or written
//!   through it; its index is its own, its branch ref and objects the
//!   repository's). `HEAD` must name a branch
//!   under `refs/heads/`. File contents are held in memory while a commit is prepared.
//! * Author and committer are the host's ([`Committer`], from `[daemon] committer_name`
//!   and `committer_email`), never the repository's `user.name`/`user.email`, which the
//!   agent writes.
//! * Writes into `.git`: the daemon runs [`prepare`], [`publish`] and
//!   [`clear_stale_locks`] on a thread that Landlock lets write only beneath the
//!   repository's git directory (the workspace's `.git`, or a linked worktree's
//!   checked common directory; opened without following a symlink, see
//!   [`git_dir_handle`] and `Sandbox::confine_git_writes`): a symlink the agent planted
//!   under `.git` where a write would go through it (a reflog appended to, an object
//!   directory written in) makes the write fail with the path named instead of landing
//!   outside; a symlinked ref is replaced by the rename of its lock file (the commit is
//!   made, the link's target untouched). This module itself does not confine; its
//!   callers do.
//! * Between the check of a directory entry's type and its opening, an agent still
//!   running could swap it; the inode is re-checked after opening, and whatever is read
//!   is covered by the fingerprint, so a swap yields `Stale` or an error, not a commit
//!   of unapproved bytes. (A FIFO swapped in at that instant could block the read.)

use std::path::{Path, PathBuf};

use gix::bstr::ByteSlice;
use gix::objs::tree::EntryKind;
use gix::refs::Target;
use gix::refs::transaction::{Change, LogChange, PreviousValue, RefEdit, RefLog};
use gix::{ObjectId, Repository};
use serde::{Deserialize, Serialize};
use tracing::{debug, info, warn};

mod changes;
// (Only the inotify watch needs it.)
#[cfg(target_os = "linux")]
mod dispose;
mod excludes;
#[cfg(test)]
mod git_parity;
mod incremental;
mod index;
mod layout;
pub mod patch;
mod path_map;
mod read;
pub mod remembered;
mod repo;
mod snapshot;
mod standing;
mod stat_cache;
#[cfg(test)]
mod test_git;
mod tracked;
mod tree;
mod walk;
#[cfg(target_os = "linux")]
mod watch;
/// No inotify: no watch is ever made, and the paths are read again.
#[cfg(not(target_os = "linux"))]
#[path = "watch_none.rs"]
mod watch;
pub use changes::{
    Detail, fingerprint_and_changes, paths_changes, paths_diff, workspace_changes,
    workspace_changes_loading, workspace_changes_remembered, workspace_diff,
};
#[cfg(target_os = "linux")]
pub(crate) use dispose::dispose;
use excludes::Excludes;
pub use incremental::snapshot_standing;
use index::sync_index;
pub use layout::GitDirs;
use read::{Snapshot, is_dot_git, read_regular_if_present, read_snapshot};
pub use repo::{Committer, git_dir_handle, open_repository};
use repo::{
    Head, In, Record, Workspace, branch_target, check_message, git, normalise_paths, ref_moved,
    refuse_special, resolve_head, tracked_entries,
};
pub use snapshot::{
    TreeSnapshot, changed_since, prepare_snapshot, snapshot, snapshot_watched, snapshot_with,
};
pub use standing::{
    DEFAULT_WATCH_DIRS_PER_WORKSPACE, DEFAULT_WATCH_DIRS_TOTAL, Fallback, Standing, WatchBudget,
};
pub(crate) use stat_cache::Stamp;
pub use stat_cache::StatCache;
use tracked::Tracked;
use tree::{write_tree, write_tree_with};
pub use watch::Watch;

/// Name and e-mail used when the repository's own config sets none.
const DEFAULT_NAME: &str = "gatehost";
const DEFAULT_EMAIL: &str = "gatehost@localhost";
/// Domain separator of the fingerprint format; bump when the encoding changes.
const FINGERPRINT_DOMAIN: &[u8] = b"gatehost-commit-fingerprint-v1\0";

/// Why a commit path given at attach time was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommitPathError {
    /// The path is empty.
    #[error("commit path is empty")]
    Empty,
    /// The path (as given) is absolute: commit paths are the workspace's.
    #[error("commit path {0:?} is absolute")]
    Absolute(String),
    /// The path (as given) climbs with `..`.
    #[error("commit path {0:?} has a `..` component")]
    ParentComponent(String),
    /// The path (as given) could be read as an option.
    #[error("commit path {0:?} starts with `-`")]
    LeadingDash(String),
    /// The path (as given) would be git pathspec magic.
    #[error("commit path {0:?} starts with `:` (pathspec magic)")]
    PathspecMagic(String),
    /// The path (as given) holds a NUL byte.
    #[error("commit path {0:?} contains a NUL byte")]
    Nul(String),
    /// The path (as given) holds a glob character: paths are literal.
    #[error("commit path {0:?} contains a glob character (`*`, `?` or `[`)")]
    Glob(String),
    /// The path (as given) names something in a `.git` directory.
    #[error("commit path {0:?} has a `.git` component")]
    GitComponent(String),
    /// The path (as given) holds a backslash, a separator elsewhere.
    #[error("commit path {0:?} contains a backslash")]
    Backslash(String),
}

/// Errors of fingerprinting, preparing and publishing a commit.
#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    /// A commit path is refused.
    #[error(transparent)]
    InvalidPath(#[from] CommitPathError),
    /// The workspace is not the root of a git repository.
    #[error("{workspace} is not a git repository root: {reason}")]
    NotARepository {
        /// The workspace.
        workspace: PathBuf,
        /// Why not (what was found instead).
        reason: String,
    },
    /// The workspace's `.git` is a gitfile that fails the linked-worktree
    /// checks.
    #[error("{workspace}/.git is a linked worktree's gitfile gatehost refuses: {reason}")]
    ForeignGitDir {
        /// The workspace.
        workspace: PathBuf,
        /// Which check failed.
        reason: String,
    },
    /// The repository's layout (its git directory, config or object
    /// stores) is one gatehost will not write through: why.
    #[error("repository layout refused: {0}")]
    UnsafeRepository(String),
    /// HEAD names a commit, not a branch.
    #[error("HEAD is detached; a commit needs HEAD to name a branch")]
    DetachedHead,
    /// HEAD names this reference, outside `refs/heads/`.
    #[error("HEAD names {0:?}, which is not a branch under refs/heads/")]
    UnsupportedHead(String),
    /// A path's parent is a symlink in the workspace.
    #[error("path {path:?} leads through the symlink {symlink:?}; it is never followed")]
    PathBeyondSymlink {
        /// The path, workspace-relative.
        path: String,
        /// The symlink on its way, workspace-relative.
        symlink: String,
    },
    /// A path is a FIFO, a socket or a device.
    #[error("{path:?} is neither a regular file, a directory nor a symlink")]
    UnsupportedFileType {
        /// The path, workspace-relative.
        path: String,
    },
    /// A file changed (or was swapped) between its look and its read.
    #[error("{path:?} changed while it was being read")]
    ChangedWhileReading {
        /// The path, workspace-relative.
        path: String,
    },
    /// The walk reached its depth bound.
    #[error(
        "the workspace nests directories deeper than {max} levels (below {path:?}); gatehost does not walk deeper"
    )]
    TooDeep {
        /// The directory it stopped below, workspace-relative.
        path: String,
        /// The bound (levels).
        max: usize,
    },
    /// A file is past the size bound of what is read.
    #[error(
        "{path:?} holds {bytes} bytes; files past {max} bytes are not read into a change set or a commit (keep it out of the commit paths, or ignore it)"
    )]
    FileTooLarge {
        /// The file, workspace-relative.
        path: String,
        /// Its size (bytes).
        bytes: u64,
        /// The bound (bytes).
        max: u64,
    },
    /// Reading the workspace failed.
    #[error("reading {path:?} in the workspace failed: {source}")]
    Io {
        /// The path, workspace-relative.
        path: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The commit paths no longer hold what the ack approved.
    #[error(
        "the content differs from the approved fingerprint (expected {expected}, found {actual})"
    )]
    Stale {
        /// The fingerprint approved (hex).
        expected: String,
        /// The fingerprint now (hex).
        actual: String,
    },
    /// A reference moved since the commit was prepared.
    #[error("{reference} was expected at {expected:?} but is at {actual:?}")]
    RefMoved {
        /// The reference (`refs/heads/main`).
        reference: String,
        /// Where it should be (hex; `None`: absent).
        expected: Option<String>,
        /// Where it is (hex; `None`: absent).
        actual: Option<String>,
    },
    /// A stored [`Prepared`] (or the objects it names) does not hold
    /// together: why.
    #[error("invalid prepared commit record: {0}")]
    InvalidPrepared(String),
    /// The commit message is refused: why.
    #[error("invalid commit message: {0}")]
    InvalidMessage(&'static str),
    /// The change's diff is past this bound (bytes).
    #[error("the workspace's changes make a diff larger than {0} bytes")]
    DiffTooLarge(usize),
    /// A changed path (shown lossily) is not UTF-8.
    #[error(
        "the changed path {0:?} is not UTF-8: plugins take paths as strings, so it cannot be given to them (rename it)"
    )]
    PathNotUtf8(String),
    #[error("git operation `{op}` failed: {source}")]
    /// A git operation failed.
    Git {
        /// What was being done (`write tree`, …).
        op: &'static str,
        /// gix's error.
        #[source]
        source: gix::Error,
    },
}

/// The outcome of [`prepare`]: objects are written, no reference was moved.
/// Stored between steps (serde), so a restarted daemon can [`publish`] or ask [`ref_state`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prepared {
    /// The new commit (hex), `None` when there was nothing to commit.
    pub commit: Option<String>,
    /// The commit the branch pointed at (hex), `None` for an unborn branch.
    pub parent: Option<String>,
    /// The branch `HEAD` named, e.g. `refs/heads/main`.
    pub reference: String,
    /// The resulting tree equalled the parent's tree; no commit object was written.
    pub nothing_to_commit: bool,
    /// The committed paths, normalised: [`publish`] brings the index in line with the
    /// commit for these. Empty in records stored before this field existed; then the
    /// paths whose content differs between the parent and the commit are used.
    #[serde(default)]
    pub paths: Vec<String>,
}

/// Where the branch is relative to a [`Prepared`] commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RefState {
    /// The branch points at the prepared commit: it was published.
    AtCommit,
    /// The branch is still at the parent (or still absent for an unborn branch).
    AtParent,
    /// The prepared commit is an ancestor of where the branch points now.
    Descends,
    /// The branch points somewhere unrelated.
    Moved,
}

/// Checks a commit path given at attach time and returns it normalised
/// (`./a//b/` becomes `a/b`).
pub fn validate_commit_path(p: &str) -> Result<String, CommitPathError> {
    let owned = || p.to_owned();
    if p.is_empty() {
        return Err(CommitPathError::Empty);
    }
    if p.contains('\0') {
        return Err(CommitPathError::Nul(owned()));
    }
    if p.starts_with('/') {
        return Err(CommitPathError::Absolute(owned()));
    }
    if p.contains('\\') {
        return Err(CommitPathError::Backslash(owned()));
    }
    if p.contains(['*', '?', '[']) {
        return Err(CommitPathError::Glob(owned()));
    }
    let mut parts = Vec::new();
    for component in p.split('/') {
        match component {
            "" | "." => {}
            ".." => return Err(CommitPathError::ParentComponent(owned())),
            c if c.eq_ignore_ascii_case(".git") => {
                return Err(CommitPathError::GitComponent(owned()));
            }
            c => parts.push(c),
        }
    }
    let normalised = parts.join("/");
    if normalised.is_empty() {
        return Err(CommitPathError::Empty);
    }
    if p.starts_with('-') || normalised.starts_with('-') {
        return Err(CommitPathError::LeadingDash(owned()));
    }
    if p.starts_with(':') || normalised.starts_with(':') {
        return Err(CommitPathError::PathspecMagic(owned()));
    }
    Ok(normalised)
}

/// sha256 (hex) of the current content of `paths` in the workspace: per path, every
/// file below it (directories recursively, skipping `.git`, nested repositories and
/// ignored files as `git add dir` would), symlinks as their target text, absent paths
/// as deleted; each with its path, mode (executable bit included) and content.
pub fn fingerprint(workspace: &Path, paths: &[String]) -> Result<String, CommitError> {
    let ws = Workspace::open(workspace)?;
    let paths = normalise_paths(paths)?;
    let head = resolve_head(&ws.repo)?;
    let tracked = tracked_entries(&ws.repo, head.tree, &paths)?;
    let snapshot = read_snapshot(&ws, &paths, &tracked)?;
    Ok(snapshot.digest())
}

/// Writes blobs, trees and the commit object for `paths` on top of `HEAD` (a root
/// commit when the branch is unborn) without moving any reference. See the module doc.
pub fn prepare(
    workspace: &Path,
    paths: &[String],
    message: &str,
    expected_fingerprint: &str,
) -> Result<Prepared, CommitError> {
    prepare_by(
        workspace,
        paths,
        message,
        expected_fingerprint,
        &Committer::default(),
    )
}

/// [`prepare`], authored and committed by `who`.
pub fn prepare_by(
    workspace: &Path,
    paths: &[String],
    message: &str,
    expected_fingerprint: &str,
    who: &Committer,
) -> Result<Prepared, CommitError> {
    check_message(message)?;
    let ws = Workspace::open(workspace)?;
    let paths = normalise_paths(paths)?;
    let head = resolve_head(&ws.repo)?;
    let repo = &ws.repo;
    let tracked = tracked_entries(repo, head.tree, &paths)?;
    let snapshot = read_snapshot(&ws, &paths, &tracked)?;
    let actual = snapshot.digest();
    if !actual.eq_ignore_ascii_case(expected_fingerprint.trim()) {
        warn!(workspace = %workspace.display(), expected = expected_fingerprint, actual = %actual,
            "commit refused: content differs from the approved fingerprint");
        return Err(CommitError::Stale {
            expected: expected_fingerprint.to_owned(),
            actual,
        });
    }

    let tree = write_tree(repo, &head, &tracked, &snapshot)?;
    write_commit(repo, workspace, &head, tree, paths, message, who)
}

/// Writes the commit of `tree` on `head` (nothing when `tree` is `head`'s
/// own tree), moving no reference.
fn write_commit(
    repo: &Repository,
    workspace: &Path,
    head: &Head,
    tree: ObjectId,
    paths: Vec<String>,
    message: &str,
    who: &Committer,
) -> Result<Prepared, CommitError> {
    let head_tree = head
        .tree
        .unwrap_or_else(|| ObjectId::empty_tree(repo.object_hash()));
    let reference = head.reference.as_bstr().to_string();
    let parent = head.commit.map(|c| c.to_hex().to_string());
    if tree == head_tree {
        info!(workspace = %workspace.display(), %reference, "nothing to commit");
        return Ok(Prepared {
            commit: None,
            parent,
            reference,
            nothing_to_commit: true,
            paths,
        });
    }

    let signature = who.signature();
    let mut message = message.to_owned();
    if !message.ends_with('\n') {
        message.push('\n');
    }
    let commit = gix::objs::Commit {
        tree,
        parents: head.commit.into_iter().collect(),
        author: signature.clone(),
        committer: signature,
        encoding: None,
        message: message.into(),
        extra_headers: Vec::new(),
    };
    let id = repo
        .write_object(&commit)
        .map_err(git("write commit"))?
        .detach();
    info!(workspace = %workspace.display(), %reference, commit = %id, parent = ?parent, "commit prepared");
    Ok(Prepared {
        commit: Some(id.to_hex().to_string()),
        parent,
        reference,
        nothing_to_commit: false,
        paths,
    })
}

/// Moves `prepared.reference` from `prepared.parent` to `prepared.commit` with a
/// compare-and-swap. Idempotent: Ok when the branch already points at the commit;
/// [`CommitError::RefMoved`] when it points anywhere else but the parent.
pub fn publish(workspace: &Path, prepared: &Prepared) -> Result<(), CommitError> {
    publish_by(workspace, prepared, &Committer::default())
}

/// [`publish`], with `who` in the reflog entry.
pub fn publish_by(
    workspace: &Path,
    prepared: &Prepared,
    who: &Committer,
) -> Result<(), CommitError> {
    let ws = Workspace::open(workspace)?;
    let repo = &ws.repo;
    let record = Record::parse(repo, prepared)?;
    let Some(commit) = record.commit else {
        debug!(reference = %prepared.reference, "nothing to publish");
        return Ok(());
    };
    // The branch's ref and reflog, which the update writes.
    let branch = record.reference.as_bstr().to_str_lossy();
    for sub in [branch.to_string(), format!("logs/{branch}")] {
        refuse_special(&ws.common, &sub, &ws.label(In::Common, &sub))?;
    }
    let current = branch_target(repo, &record.reference)?;
    if current == Some(commit) {
        debug!(reference = %prepared.reference, %commit, "already published");
        sync_index(&ws, &record, commit);
        return Ok(());
    }
    if current != record.parent {
        return Err(ref_moved(prepared, current));
    }
    let expected = match record.parent {
        Some(parent) => PreviousValue::MustExistAndMatch(Target::Object(parent)),
        None => PreviousValue::MustNotExist,
    };
    let summary = repo
        .find_commit(commit)
        .map_err(git("find commit"))?
        .message_raw_sloppy()
        .lines()
        .next()
        .map(|l| l.to_str_lossy().into_owned())
        .unwrap_or_default();
    let edit = RefEdit {
        change: Change::Update {
            log: LogChange {
                mode: RefLog::AndReference,
                force_create_reflog: false,
                message: format!("commit (gatehost): {summary}").into(),
            },
            expected,
            new: Target::Object(commit),
        },
        name: record.reference.clone(),
        deref: false,
    };
    let signature = who.signature();
    let mut time = gix::date::parse::TimeBuf::default();
    let result = repo.edit_references_as(Some(edit), Some(signature.to_ref(&mut time)));
    if let Err(err) = result {
        // Lost a race, or someone else moved the branch meanwhile.
        let current = branch_target(repo, &record.reference)?;
        if current == Some(commit) {
            sync_index(&ws, &record, commit);
            return Ok(());
        }
        if current != record.parent {
            return Err(ref_moved(prepared, current));
        }
        return Err(CommitError::Git {
            op: "update reference",
            source: err,
        });
    }
    info!(workspace = %workspace.display(), reference = %prepared.reference, %commit, "commit published");
    sync_index(&ws, &record, commit);
    Ok(())
}

/// After a crash, a published commit whose branch has moved on (another
/// commit on top, [`RefState::Descends`]) may never have had its paths
/// brought into `.git/index` (the daemon died between the branch's move
/// and the index's update): they are brought in line with the branch's
/// commit now, as [`publish`] would have (the same rules; never failing).
pub fn sync_index_to_branch(workspace: &Path, prepared: &Prepared) -> Result<(), CommitError> {
    let ws = Workspace::open(workspace)?;
    let record = Record::parse(&ws.repo, prepared)?;
    if let Some(current) = branch_target(&ws.repo, &record.reference)? {
        sync_index(&ws, &record, current);
    }
    Ok(())
}

/// Removes the lock files a previous life of the daemon left while it
/// published `prepared`: on its branch, on `packed-refs` and on the index,
/// only regular files modified within `made` (the span in which that life,
/// by the store's record made before it took any lock, was publishing this
/// commit), and for a ref lock only one empty or holding this commit's id.
/// Any other lock belongs to someone else (a person's `git commit` waiting
/// in its editor holds `index.lock` for minutes) and is left alone: the
/// publish then waits for it and retries. Returns the locks removed.
pub fn clear_stale_locks(
    workspace: &Path,
    prepared: &Prepared,
    made: &[std::ops::RangeInclusive<std::time::SystemTime>],
) -> Result<Vec<String>, CommitError> {
    let ws = Workspace::open(workspace)?;
    let record = Record::parse(&ws.repo, prepared)?;
    let mut removed = Vec::new();
    let reference = record.reference.as_bstr().to_str_lossy().into_owned();
    let ours = record.commit.map(|c| c.to_string()).unwrap_or_default();
    let candidates = [
        (In::Common, format!("{reference}.lock"), true),
        (In::Common, "packed-refs.lock".to_string(), false),
        (In::Git, "index.lock".to_string(), false),
    ];
    for (place, sub, is_ref) in candidates {
        let dir = ws.dir(place);
        let rel = ws.label(place, &sub);
        let Ok(meta) = dir.symlink_metadata(&sub) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        let in_span = meta
            .modified()
            .map(|m| {
                let m = m.into_std();
                made.iter().any(|span| span.contains(&m))
            })
            .unwrap_or(false);
        // A ref lock holds the new value once written: ours names our
        // commit (small: read at most a line).
        let our_value = !is_ref
            || (meta.len() <= 200
                && read_regular_if_present(dir, &sub)
                    .ok()
                    .flatten()
                    .is_some_and(|text| {
                        let text = String::from_utf8_lossy(&text);
                        text.trim().is_empty() || text.trim() == ours
                    }));
        if in_span && our_value {
            dir.remove_file(&sub).map_err(|source| CommitError::Io {
                path: rel.clone(),
                source,
            })?;
            warn!(workspace = %workspace.display(), lock = %rel, "removed a lock file this daemon's previous life left while publishing");
            removed.push(rel);
        } else {
            info!(workspace = %workspace.display(), lock = %rel, "a lock file that is not ours is left alone");
        }
    }
    Ok(removed)
}

/// Where the branch is relative to a prepared commit, for crash recovery.
pub fn ref_state(workspace: &Path, prepared: &Prepared) -> Result<RefState, CommitError> {
    let ws = Workspace::open(workspace)?;
    let repo = &ws.repo;
    let record = Record::parse(repo, prepared)?;
    let current = branch_target(repo, &record.reference)?;
    if current.is_some() && current == record.commit {
        return Ok(RefState::AtCommit);
    }
    if current == record.parent {
        return Ok(RefState::AtParent);
    }
    if let (Some(current), Some(commit)) = (current, record.commit) {
        let walk = repo
            .rev_walk(Some(current))
            .use_commit_graph(false)
            .all()
            .map_err(git("walk history"))?;
        for info in walk {
            let info = info.map_err(git("walk history"))?;
            if info.id == commit {
                return Ok(RefState::Descends);
            }
        }
    }
    Ok(RefState::Moved)
}

#[cfg(test)]
mod tests;
