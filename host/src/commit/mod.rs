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
//! * Only non-bare repositories whose root holds a real `.git` directory are accepted
//!   (no gitfile, no linked worktree, no `commondir`), and `HEAD` must name a branch
//!   under `refs/heads/`. File contents are held in memory while a commit is prepared.
//! * Author and committer are the host's ([`Committer`], from `[daemon] committer_name`
//!   and `committer_email`), never the repository's `user.name`/`user.email`, which the
//!   agent writes.
//! * Writes into `.git`: the daemon runs [`prepare`], [`publish`] and
//!   [`clear_stale_locks`] on a thread that Landlock lets write only beneath the
//!   workspace's `.git` directory (opened without following a symlink, see
//!   [`git_dir_handle`] and `Sandbox::confine_git_writes`): a symlink the agent planted
//!   under `.git` (a reflog, a ref, an object directory) makes the write fail with the
//!   path named instead of landing outside. This module itself does not confine; its
//!   callers do.
//! * Between the check of a directory entry's type and its opening, an agent still
//!   running could swap it; the inode is re-checked after opening, and whatever is read
//!   is covered by the fingerprint, so a swap yields `Stale` or an error, not a commit
//!   of unapproved bytes. (A FIFO swapped in at that instant could block the read.)

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::{Dir, Metadata, MetadataExt};
use gix::bstr::{BStr, BString, ByteSlice};
use gix::objs::tree::EntryKind;
use gix::refs::transaction::{Change, LogChange, PreviousValue, RefEdit, RefLog};
use gix::refs::{FullName, Target};
use gix::{ObjectId, Repository};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tracing::{debug, info, warn};

mod changes;
mod snapshot;
pub use changes::{paths_diff, workspace_changes, workspace_diff};
pub use snapshot::{TreeSnapshot, changed_since, prepare_snapshot, snapshot, snapshot_with};

/// Name and e-mail used when the repository's own config sets none.
const DEFAULT_NAME: &str = "gatehost";
const DEFAULT_EMAIL: &str = "gatehost@localhost";
/// Domain separator of the fingerprint format; bump when the encoding changes.
const FINGERPRINT_DOMAIN: &[u8] = b"gatehost-commit-fingerprint-v1\0";

/// Why a commit path given at attach time was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommitPathError {
    #[error("commit path is empty")]
    Empty,
    #[error("commit path {0:?} is absolute")]
    Absolute(String),
    #[error("commit path {0:?} has a `..` component")]
    ParentComponent(String),
    #[error("commit path {0:?} starts with `-`")]
    LeadingDash(String),
    #[error("commit path {0:?} starts with `:` (pathspec magic)")]
    PathspecMagic(String),
    #[error("commit path {0:?} contains a NUL byte")]
    Nul(String),
    #[error("commit path {0:?} contains a glob character (`*`, `?` or `[`)")]
    Glob(String),
    #[error("commit path {0:?} has a `.git` component")]
    GitComponent(String),
    #[error("commit path {0:?} contains a backslash")]
    Backslash(String),
}

/// Errors of fingerprinting, preparing and publishing a commit.
#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    #[error(transparent)]
    InvalidPath(#[from] CommitPathError),
    #[error("{workspace} is not a git repository root: {reason}")]
    NotARepository { workspace: PathBuf, reason: String },
    #[error("repository layout refused: {0}")]
    UnsafeRepository(String),
    #[error("HEAD is detached; a commit needs HEAD to name a branch")]
    DetachedHead,
    #[error("HEAD names {0:?}, which is not a branch under refs/heads/")]
    UnsupportedHead(String),
    #[error("path {path:?} leads through the symlink {symlink:?}; it is never followed")]
    PathBeyondSymlink { path: String, symlink: String },
    #[error("{path:?} is neither a regular file, a directory nor a symlink")]
    UnsupportedFileType { path: String },
    #[error("{path:?} changed while it was being read")]
    ChangedWhileReading { path: String },
    #[error("reading {path:?} in the workspace failed: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the content differs from the approved fingerprint (expected {expected}, found {actual})"
    )]
    Stale { expected: String, actual: String },
    #[error("{reference} was expected at {expected:?} but is at {actual:?}")]
    RefMoved {
        reference: String,
        expected: Option<String>,
        actual: Option<String>,
    },
    #[error("invalid prepared commit record: {0}")]
    InvalidPrepared(String),
    #[error("invalid commit message: {0}")]
    InvalidMessage(&'static str),
    #[error("the workspace's changes make a diff larger than {0} bytes")]
    DiffTooLarge(usize),
    #[error(
        "the changed path {0:?} is not UTF-8: plugins take paths as strings, so it cannot be given to them (rename it)"
    )]
    PathNotUtf8(String),
    #[error("git operation `{op}` failed: {source}")]
    Git {
        op: &'static str,
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
    let snapshot = read_snapshot(&ws.root, &paths, &tracked)?;
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
    let snapshot = read_snapshot(&ws.root, &paths, &tracked)?;
    let actual = snapshot.digest();
    if !actual.eq_ignore_ascii_case(expected_fingerprint.trim()) {
        warn!(workspace = %workspace.display(), expected = expected_fingerprint, actual = %actual,
            "commit refused: content differs from the approved fingerprint");
        return Err(CommitError::Stale {
            expected: expected_fingerprint.to_owned(),
            actual,
        });
    }

    let tree = write_tree(repo, &head, &paths, &tracked, &snapshot)?;
    write_commit(repo, workspace, &head, tree, paths, message, who)
}

/// Writes the blobs of `content` and the tree `HEAD`'s tree becomes with
/// `paths` taken from it (gitlinks kept as in `HEAD`); returns the tree.
fn write_tree(
    repo: &Repository,
    head: &Head,
    paths: &[String],
    tracked: &BTreeMap<BString, (EntryKind, ObjectId)>,
    content: &Snapshot,
) -> Result<ObjectId, CommitError> {
    write_tree_with(repo, head, paths, tracked, content, &mut |_, _| {})
}

/// [`write_tree`], telling `each` the blob id of every file; a file whose
/// id is already known is not written again.
fn write_tree_with(
    repo: &Repository,
    head: &Head,
    paths: &[String],
    tracked: &BTreeMap<BString, (EntryKind, ObjectId)>,
    content: &Snapshot,
    each: &mut dyn FnMut(&Item, ObjectId),
) -> Result<ObjectId, CommitError> {
    let mut editor = match head.tree {
        Some(tree) => repo.edit_tree(tree).map_err(git("edit tree"))?,
        None => repo.empty_tree().edit().map_err(git("edit tree"))?,
    };
    for path in paths {
        editor.remove(path).map_err(git("remove tree entry"))?;
    }
    // Gitlinks are not read from the workspace; keep HEAD's.
    for (path, (kind, id)) in tracked {
        if *kind == EntryKind::Commit {
            editor
                .upsert(path.clone(), EntryKind::Commit, *id)
                .map_err(git("keep gitlink"))?;
        }
    }
    for item in content.files() {
        let id = match item.known {
            // Vouched for by the stat cache: the blob was written when the
            // file was read (one in HEAD's tree is there for good; any
            // other is checked, in case a `git gc` pruned it since).
            Some(id) if tracked.get(&item.path).map(|t| t.1) == Some(id) || repo.has_object(id) => {
                id
            }
            Some(_) => {
                return Err(CommitError::InvalidPrepared(format!(
                    "the blob of {:?} vanished from the repository; read it again",
                    item.path
                )));
            }
            None => repo
                .write_blob(&item.data)
                .map_err(git("write blob"))?
                .detach(),
        };
        each(item, id);
        editor
            .upsert(item.path.clone(), item.kind.entry_kind(), id)
            .map_err(git("add tree entry"))?;
    }
    Ok(editor.write().map_err(git("write tree"))?.detach())
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
    refuse_special(&ws.root, &format!(".git/{branch}"))?;
    refuse_special(&ws.root, &format!(".git/logs/{branch}"))?;
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
        (format!(".git/{reference}.lock"), true),
        (".git/packed-refs.lock".to_string(), false),
        (".git/index.lock".to_string(), false),
    ];
    for (rel, is_ref) in candidates {
        let Ok(meta) = ws.root.symlink_metadata(&rel) else {
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
                && read_regular_if_present(&ws.root, &rel)
                    .ok()
                    .flatten()
                    .is_some_and(|text| {
                        let text = String::from_utf8_lossy(&text);
                        text.trim().is_empty() || text.trim() == ours
                    }));
        if in_span && our_value {
            ws.root
                .remove_file(&rel)
                .map_err(|source| CommitError::Io {
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

// ---------------------------------------------------------------------------
// Repository access

/// Refuses a FIFO, socket or device at `sub` (absent, regular files,
/// directories and symlinks pass: symlinks are dealt with where they
/// matter, and writes through them are confined by the caller).
fn refuse_special(root: &Dir, sub: &str) -> Result<(), CommitError> {
    use cap_std::fs::FileTypeExt;
    if let Ok(m) = root.symlink_metadata(sub) {
        let t = m.file_type();
        let what = if t.is_fifo() {
            Some("a FIFO")
        } else if t.is_socket() {
            Some("a socket")
        } else if t.is_char_device() || t.is_block_device() {
            Some("a device")
        } else {
            None
        };
        if let Some(what) = what {
            return Err(CommitError::UnsafeRepository(format!(
                "{sub} is {what}; gatehost never reads or writes one"
            )));
        }
    }
    Ok(())
}

struct Workspace {
    root: Dir,
    root_path: PathBuf,
    repo: Repository,
}

impl Workspace {
    fn open(workspace: &Path) -> Result<Self, CommitError> {
        let not_repo = |reason: &str| CommitError::NotARepository {
            workspace: workspace.to_path_buf(),
            reason: reason.to_owned(),
        };
        let root = Dir::open_ambient_dir(workspace, ambient_authority())
            .map_err(|e| not_repo(&format!("cannot open the workspace: {e}")))?;
        match root.symlink_metadata(".git") {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(not_repo(".git is not a directory")),
            Err(e) => return Err(not_repo(&format!(".git: {e}"))),
        }
        // gix writes below .git with plain std::fs: refuse layouts that redirect it.
        for sub in [".git/commondir", ".git/gitdir"] {
            if root.symlink_metadata(sub).is_ok() {
                return Err(CommitError::UnsafeRepository(format!("{sub} exists")));
            }
        }
        for sub in [".git/objects", ".git/refs", ".git/refs/heads", ".git/logs"] {
            if let Ok(m) = root.symlink_metadata(sub)
                && m.is_symlink()
            {
                return Err(CommitError::UnsafeRepository(format!("{sub} is a symlink")));
            }
        }
        // Files gix reads or writes here: a FIFO would block the commit for
        // good, a device would be read or written as one.
        for sub in [
            ".git/HEAD",
            ".git/config",
            ".git/packed-refs",
            ".git/index",
            ".git/logs/HEAD",
        ] {
            refuse_special(&root, sub)?;
        }
        let options = gix::open::Options::isolated().strict_config(false);
        let repo = gix::open_opts(workspace.join(".git"), options)
            .map_err(|e| not_repo(&format!("cannot open it: {e}")))?;
        Ok(Workspace {
            root,
            root_path: workspace.to_path_buf(),
            repo,
        })
    }
}

fn git(op: &'static str) -> impl Fn(gix::Error) -> CommitError {
    move |source| CommitError::Git { op, source }
}

struct Head {
    reference: FullName,
    commit: Option<ObjectId>,
    tree: Option<ObjectId>,
}

fn resolve_head(repo: &Repository) -> Result<Head, CommitError> {
    let head = repo.head().map_err(git("read HEAD"))?;
    let (reference, commit) = match head.kind {
        gix::head::Kind::Detached { .. } => return Err(CommitError::DetachedHead),
        gix::head::Kind::Unborn(name) => (name, None),
        gix::head::Kind::Symbolic(r) => match r.target {
            Target::Object(id) => (r.name, Some(id)),
            Target::Symbolic(other) => {
                return Err(CommitError::UnsupportedHead(other.as_bstr().to_string()));
            }
        },
    };
    if !reference.as_bstr().starts_with(b"refs/heads/") {
        return Err(CommitError::UnsupportedHead(
            reference.as_bstr().to_string(),
        ));
    }
    let tree = match commit {
        Some(id) => Some(
            repo.find_commit(id)
                .map_err(git("read HEAD commit"))?
                .tree_id()
                .map_err(git("read HEAD tree"))?
                .detach(),
        ),
        None => None,
    };
    Ok(Head {
        reference,
        commit,
        tree,
    })
}

/// Where the branch points now, `None` when it does not exist.
fn branch_target(repo: &Repository, name: &FullName) -> Result<Option<ObjectId>, CommitError> {
    let reference = repo
        .try_find_reference(name.as_ref())
        .map_err(git("read reference"))?;
    match reference {
        None => Ok(None),
        Some(r) => {
            match r.target() {
                gix::refs::TargetRef::Object(id) => Ok(Some(id.to_owned())),
                gix::refs::TargetRef::Symbolic(other) => Err(CommitError::UnsupportedHead(
                    format!("{} is a symbolic reference to {}", name.as_bstr(), other),
                )),
            }
        }
    }
}

fn ref_moved(prepared: &Prepared, actual: Option<ObjectId>) -> CommitError {
    CommitError::RefMoved {
        reference: prepared.reference.clone(),
        expected: prepared.parent.clone(),
        actual: actual.map(|a| a.to_hex().to_string()),
    }
}

/// A [`Prepared`] parsed and checked against the repository.
struct Record {
    reference: FullName,
    commit: Option<ObjectId>,
    parent: Option<ObjectId>,
    /// Normalised committed paths; empty for records stored before they were recorded.
    paths: Vec<String>,
}

impl Record {
    fn parse(repo: &Repository, prepared: &Prepared) -> Result<Self, CommitError> {
        let invalid = |m: String| CommitError::InvalidPrepared(m);
        let oid = |hex: &str| {
            ObjectId::from_hex(hex.as_bytes())
                .map_err(|e| invalid(format!("object id {hex:?}: {e}")))
        };
        let reference = FullName::try_from(prepared.reference.as_str())
            .map_err(|e| invalid(format!("reference {:?}: {e}", prepared.reference)))?;
        if !reference.as_bstr().starts_with(b"refs/heads/") {
            return Err(invalid(format!("{:?} is not a branch", prepared.reference)));
        }
        let parent = prepared.parent.as_deref().map(oid).transpose()?;
        let commit = prepared.commit.as_deref().map(oid).transpose()?;
        if prepared.nothing_to_commit != commit.is_none() {
            return Err(invalid("nothing_to_commit disagrees with commit".into()));
        }
        if let Some(id) = commit {
            let found = repo
                .find_commit(id)
                .map_err(|e| invalid(format!("commit {id} not found: {e}")))?;
            let parents: Vec<ObjectId> = found.parent_ids().map(|p| p.detach()).collect();
            if parents != parent.into_iter().collect::<Vec<_>>() {
                return Err(invalid(format!(
                    "commit {id} does not have the recorded parent"
                )));
            }
        }
        let mut paths = BTreeSet::new();
        for p in &prepared.paths {
            let p = validate_commit_path(p)
                .map_err(|e| invalid(format!("committed path {p:?}: {e}")))?;
            paths.insert(p);
        }
        Ok(Record {
            reference,
            commit,
            parent,
            paths: paths.into_iter().collect(),
        })
    }
}

/// The workspace's `.git` directory, opened without following a symlink:
/// the one directory gatehost's own writes may reach (see
/// `Sandbox::confine_git_writes`).
pub fn git_dir_handle(workspace: &Path) -> Result<std::os::fd::OwnedFd, CommitError> {
    use rustix::fs::{CWD, Mode, OFlags};
    rustix::fs::openat(
        CWD,
        workspace.join(".git"),
        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| {
        CommitError::UnsafeRepository(format!(
            "{}/.git is not a directory gatehost can write beneath (a symlink or a gitfile?): {e}",
            workspace.display()
        ))
    })
}

/// Who authors and commits: the host's configuration decides (`[daemon]
/// committer_name`, `committer_email`), never the repository's config,
/// which the agent writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committer {
    pub name: String,
    pub email: String,
}

impl Default for Committer {
    fn default() -> Self {
        Committer {
            name: DEFAULT_NAME.into(),
            email: DEFAULT_EMAIL.into(),
        }
    }
}

impl Committer {
    /// Why `name` or `email` cannot go into a commit header, if it cannot.
    pub fn check(name: &str, email: &str) -> Result<(), String> {
        for (what, v) in [("name", name), ("email", email)] {
            if v.trim().is_empty()
                || v.bytes()
                    .any(|b| matches!(b, b'<' | b'>' | b'\n' | b'\r' | 0))
            {
                return Err(format!(
                    "committer {what} must be non-empty, without <, >, newlines or NUL"
                ));
            }
        }
        Ok(())
    }

    fn signature(&self) -> gix::actor::Signature {
        gix::actor::Signature {
            name: self.name.trim().into(),
            email: self.email.trim().into(),
            time: gix::date::Time::now_utc(),
        }
    }
}

fn check_message(message: &str) -> Result<(), CommitError> {
    if message.trim().is_empty() {
        return Err(CommitError::InvalidMessage("it is empty"));
    }
    if message.contains('\0') {
        return Err(CommitError::InvalidMessage("it contains a NUL byte"));
    }
    Ok(())
}

fn normalise_paths(paths: &[String]) -> Result<Vec<String>, CommitError> {
    let mut out = BTreeSet::new();
    for p in paths {
        out.insert(validate_commit_path(p)?);
    }
    if out.is_empty() {
        return Err(CommitPathError::Empty.into());
    }
    Ok(out.into_iter().collect())
}

/// HEAD's entries (files, symlinks, gitlinks) at or below each path.
fn tracked_entries(
    repo: &Repository,
    head_tree: Option<ObjectId>,
    paths: &[String],
) -> Result<BTreeMap<BString, (EntryKind, ObjectId)>, CommitError> {
    let mut out = BTreeMap::new();
    let Some(tree) = head_tree else {
        return Ok(out);
    };
    let tree = repo.find_tree(tree).map_err(git("read HEAD tree"))?;
    for path in paths {
        let Some(entry) = tree
            .lookup_entry(path.split('/'))
            .map_err(git("read HEAD tree"))?
        else {
            continue;
        };
        let kind = entry.mode().kind();
        if kind != EntryKind::Tree {
            out.insert(BString::from(path.as_str()), (kind, entry.object_id()));
            continue;
        }
        let sub = repo
            .find_tree(entry.object_id())
            .map_err(git("read HEAD tree"))?;
        for record in sub
            .traverse()
            .breadthfirst
            .files()
            .map_err(git("read HEAD tree"))?
        {
            let kind = record.mode.kind();
            if kind == EntryKind::Tree {
                continue;
            }
            let mut full = BString::from(path.as_str());
            full.push(b'/');
            full.extend_from_slice(&record.filepath);
            out.insert(full, (kind, record.oid));
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------
// Keeping `.git/index` in line with a published commit

/// Brings `.git/index` in line with the published `commit` for the committed paths.
/// Never fails the publish: whatever goes wrong or is refused is logged, and the index
/// is then left exactly as it was.
fn sync_index(ws: &Workspace, record: &Record, commit: ObjectId) {
    match update_index(ws, record, commit) {
        Ok(IndexUpdate::Updated(n)) => {
            debug!(%commit, entries = n, "index updated for the committed paths");
        }
        Ok(IndexUpdate::Created) => debug!(%commit, "index created from the commit's tree"),
        Err(reason) => {
            warn!(%commit, %reason, "the index (.git/index) was left untouched; `git status` may show the committed paths as staged with their old content");
        }
    }
}

enum IndexUpdate {
    /// An existing index was rewritten; the number of entries now set for the paths.
    Updated(usize),
    /// There was no index; one holding the commit's whole tree was written.
    Created,
}

const INDEX: &str = ".git/index";

fn update_index(ws: &Workspace, record: &Record, commit: ObjectId) -> Result<IndexUpdate, String> {
    let repo = &ws.repo;
    // Only when the work tree is still on this branch, at this commit.
    let head = resolve_head(repo).map_err(|e| format!("cannot read HEAD: {e}"))?;
    if head.reference != record.reference || head.commit != Some(commit) {
        return Err(format!(
            "HEAD no longer names {} at the published commit",
            record.reference.as_bstr()
        ));
    }
    let tree = head.tree.ok_or("the published commit has no tree")?;
    let index_path = ws.root_path.join(INDEX);
    // Held from before the read until the rename: git (or anyone honouring the lock)
    // cannot change the index in between. Dropping it removes `index.lock`.
    let lock = gix::lock::File::acquire_to_update_resource(
        &index_path,
        gix::lock::acquire::Fail::Immediately,
        None,
        0,
    )
    .map_err(|e| format!("cannot lock the index: {e}"))?;

    let meta = match ws.root.symlink_metadata(INDEX) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // No index yet (fresh repository): the commit's whole tree.
            let file = repo
                .index_from_tree(&tree)
                .map_err(|e| format!("cannot build an index from the tree: {e}"))?;
            commit_index(&file, lock)?;
            return Ok(IndexUpdate::Created);
        }
        Err(e) => return Err(format!("cannot stat {INDEX}: {e}")),
    };
    if meta.is_symlink() {
        return Err(format!("{INDEX} is a symlink, it is never followed"));
    }
    if !meta.is_file() {
        return Err(format!("{INDEX} is not a regular file"));
    }
    let (_, data) = read_file(
        &ws.root,
        OsStr::new(INDEX),
        &meta,
        INDEX.as_bytes().as_bstr(),
    )
    .map_err(|e| e.to_string())?;
    let hash = repo.object_hash();
    // The timestamp is only passed through, never written.
    let timestamp = gix::index::State::new(hash).timestamp();
    let options = gix::index::decode::Options {
        thread_limit: Some(1),
        ..Default::default()
    };
    let (mut state, checksum) = gix::index::State::from_bytes(&data, timestamp, hash, options)
        .map_err(|e| format!("cannot decode the index: {e}"))?;
    if let Some(expected) = checksum {
        let body = data
            .len()
            .checked_sub(hash.len_in_bytes())
            .and_then(|n| data.get(..n))
            .ok_or("the index is truncated")?;
        let mut hasher = gix::hash::hasher(hash);
        hasher.update(body);
        let actual = hasher
            .try_finalize()
            .map_err(|e| format!("cannot hash the index: {e}"))?;
        if actual != expected {
            return Err("the index checksum does not match its content".into());
        }
    }
    if state.link().is_some() {
        return Err("the index is split (core.splitIndex); not supported".into());
    }
    // Racy git: an entry whose file changed in the same second as the index
    // we read was "racily clean" there, and git checks such entries' content
    // rather than trusting their stat data. The index we write is newer, so
    // git would trust it and miss the change: smudge those entries (size 0),
    // as git does when it writes an index, so their content is checked again.
    if let Some(read_at) = meta
        .modified()
        .ok()
        .and_then(|t| t.into_std().duration_since(std::time::UNIX_EPOCH).ok())
    {
        for entry in state.entries_mut() {
            if u64::from(entry.stat.mtime.secs) >= read_at.as_secs() {
                entry.stat.size = 0;
            }
        }
    }
    if state.is_sparse() {
        return Err("the index is sparse (index.sparse); not supported".into());
    }

    let paths = if record.paths.is_empty() {
        changed_paths(repo, record.parent, tree)?
    } else {
        record.paths.clone()
    };
    let wanted = tracked_entries(repo, Some(tree), &paths).map_err(|e| e.to_string())?;
    for path in wanted.keys() {
        if path
            .split(|b| *b == b'/')
            .any(|c| c.is_empty() || c == b"." || c == b".." || is_dot_git(c))
        {
            return Err(format!("refusing to stage the path {path:?}"));
        }
    }
    // Files standing where the new entries need a directory are replaced too.
    let mut ancestors = BTreeSet::new();
    for path in wanted.keys() {
        for (i, b) in path.iter().enumerate() {
            if *b == b'/' {
                ancestors.insert(path[..i].as_bstr().to_owned());
            }
        }
    }
    let covered = |p: &BStr| -> bool {
        ancestors.contains(p)
            || paths.iter().any(|c| {
                let c = c.as_bytes();
                p.as_bytes() == c || (p.len() > c.len() && p.starts_with(c) && p[c.len()] == b'/')
            })
    };
    let unmerged = state
        .entries()
        .iter()
        .find(|e| e.stage() != gix::index::entry::Stage::Unconflicted && covered(e.path(&state)));
    if let Some(e) = unmerged {
        return Err(format!(
            "the index has unmerged entries for the committed path {:?}",
            e.path(&state)
        ));
    }
    state.remove_entries(|_, path, _| covered(path));
    for (path, (kind, id)) in &wanted {
        state.dangerously_push_entry(
            gix::index::entry::Stat::default(),
            *id,
            gix::index::entry::Flags::empty(),
            (*kind).into(),
            path.as_bstr(),
        );
    }
    state.sort_entries();
    // The cached trees no longer describe the entries.
    state.remove_tree();
    let file = gix::index::File::from_state(state, index_path);
    commit_index(&file, lock)?;
    Ok(IndexUpdate::Updated(wanted.len()))
}

/// Writes `file` into the held `lock` (`index.lock`) and renames it over the index.
fn commit_index(file: &gix::index::File, mut lock: gix::lock::File) -> Result<(), String> {
    use std::io::Write as _;
    let mut bytes = Vec::new();
    file.write_to(&mut bytes, Default::default())
        .map_err(|e| format!("cannot encode the index: {e}"))?;
    lock.write_all(&bytes)
        .map_err(|e| format!("cannot write index.lock: {e}"))?;
    lock.commit()
        .map_err(|e| format!("cannot rename index.lock over the index: {}", e.error))?;
    Ok(())
}

/// For records without paths: every file path whose entry differs between the
/// parent's tree and `tree`.
fn changed_paths(
    repo: &Repository,
    parent: Option<ObjectId>,
    tree: ObjectId,
) -> Result<Vec<String>, String> {
    let files = |tree: ObjectId| -> Result<BTreeMap<BString, (EntryKind, ObjectId)>, String> {
        let tree = repo.find_tree(tree).map_err(|e| e.to_string())?;
        let mut out = BTreeMap::new();
        for record in tree
            .traverse()
            .breadthfirst
            .files()
            .map_err(|e| e.to_string())?
        {
            if record.mode.kind() != EntryKind::Tree {
                out.insert(record.filepath, (record.mode.kind(), record.oid));
            }
        }
        Ok(out)
    };
    let old = match parent {
        Some(parent) => {
            let tree = repo
                .find_commit(parent)
                .map_err(|e| e.to_string())?
                .tree_id()
                .map_err(|e| e.to_string())?
                .detach();
            files(tree)?
        }
        None => BTreeMap::new(),
    };
    let new = files(tree)?;
    let mut out = BTreeSet::new();
    for (path, entry) in &old {
        if new.get(path) != Some(entry) {
            out.insert(path.clone());
        }
    }
    for path in new.keys() {
        if !old.contains_key(path) {
            out.insert(path.clone());
        }
    }
    out.into_iter()
        .map(|p| {
            // Checked for `.git` and `..` components with the other staged paths.
            String::from_utf8(p.into()).map_err(|_| "a changed path is not UTF-8".to_owned())
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Reading the workspace

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FileKind {
    Regular,
    Executable,
    Symlink,
}

impl FileKind {
    fn entry_kind(self) -> EntryKind {
        match self {
            FileKind::Regular => EntryKind::Blob,
            FileKind::Executable => EntryKind::BlobExecutable,
            FileKind::Symlink => EntryKind::Link,
        }
    }
}

struct Item {
    path: BString,
    kind: FileKind,
    /// The content; empty when `known` (read from a stat cache instead).
    data: Vec<u8>,
    /// The blob id, when a stat cache vouched for the file unchanged.
    known: Option<ObjectId>,
    /// How the file looked when read (regular files only).
    stamp: Option<Stamp>,
}

/// HEAD's entries under some paths: kind and id by path.
type Tracked = BTreeMap<BString, (EntryKind, ObjectId)>;

/// What identifies a file's state without reading it: a write or chmod
/// changes its ctime, which no unprivileged process can set back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mode: u32,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    pub(crate) fn of(m: &Metadata) -> Stamp {
        Stamp {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mode: m.mode(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }
}

/// Blob ids of files read before, by path and [`Stamp`]: a file whose
/// stamp is unchanged is not read again. Only files whose ctime is at
/// least [`RACY_SECS`] old are kept (a write in the same clock tick as the
/// read would not change the stamp).
#[derive(Debug)]
pub struct StatCache {
    entries: std::collections::HashMap<BString, (Stamp, FileKind, ObjectId)>,
    racy_secs: i64,
    /// HEAD's entries under the paths, by (HEAD's tree, paths).
    tracked: Option<(Option<ObjectId>, Vec<String>, Tracked)>,
    /// The last tree written, by what it was made of (HEAD's tree, the
    /// paths, and every file's path, mode and blob id, digested).
    last_tree: Option<([u8; 32], ObjectId)>,
}

impl Default for StatCache {
    fn default() -> Self {
        StatCache {
            entries: Default::default(),
            racy_secs: RACY_SECS,
            tracked: None,
            last_tree: None,
        }
    }
}

/// See [`StatCache`].
const RACY_SECS: i64 = 2;

impl StatCache {
    fn hit(&self, path: &BStr, stamp: &Stamp) -> Option<(FileKind, ObjectId)> {
        self.entries
            .get(path)
            .filter(|(s, _, _)| s == stamp)
            .map(|(_, k, id)| (*k, *id))
    }

    /// HEAD's entries under `paths`, kept for HEAD's tree.
    fn tracked(
        &mut self,
        repo: &Repository,
        head_tree: Option<ObjectId>,
        paths: &[String],
    ) -> Result<BTreeMap<BString, (EntryKind, ObjectId)>, CommitError> {
        if let Some((tree, p, map)) = &self.tracked
            && *tree == head_tree
            && p == paths
        {
            return Ok(map.clone());
        }
        let map = tracked_entries(repo, head_tree, paths)?;
        self.tracked = Some((head_tree, paths.to_vec(), map.clone()));
        Ok(map)
    }

    /// Forgets everything (after an error: nothing half-known is kept).
    fn clear(&mut self) {
        self.entries.clear();
        self.tracked = None;
        self.last_tree = None;
    }

    /// Replaces the entries by those of `items` (with their blob ids).
    /// When every item was a hit and none went, nothing changes.
    fn refill<'a>(&mut self, items: impl Iterator<Item = (&'a Item, ObjectId)>) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let items: Vec<(&Item, ObjectId)> = items.collect();
        if items.len() == self.entries.len() && items.iter().all(|(i, _)| i.known.is_some()) {
            return;
        }
        self.entries.clear();
        for (item, id) in items {
            if let Some(stamp) = item.stamp
                && stamp.ctime.0 <= now - self.racy_secs
            {
                self.entries
                    .insert(item.path.clone(), (stamp, item.kind, id));
            }
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl Item {
    /// The blob id of its content.
    fn oid(&self, hash: gix::hash::Kind) -> Result<ObjectId, CommitError> {
        match self.known {
            Some(id) => Ok(id),
            None => gix::objs::compute_hash(hash, gix::objs::Kind::Blob, &self.data)
                .map_err(|e| CommitError::InvalidPrepared(format!("hashing: {e}"))),
        }
    }

    /// Reads a regular file, unless `cache` vouches for it unchanged.
    fn regular(
        dir: &Dir,
        name: &OsStr,
        meta: &Metadata,
        rel: BString,
        cache: Option<&StatCache>,
    ) -> Result<Item, CommitError> {
        let stamp = Stamp::of(meta);
        if let Some((kind, id)) = cache.and_then(|c| c.hit(rel.as_bstr(), &stamp)) {
            return Ok(Item {
                path: rel,
                kind,
                data: Vec::new(),
                known: Some(id),
                stamp: Some(stamp),
            });
        }
        let (kind, data) = read_file(dir, name, meta, rel.as_bstr())?;
        Ok(Item {
            path: rel,
            kind,
            data,
            known: None,
            stamp: Some(stamp),
        })
    }
}

/// What was read for each given path: `None` when it is absent.
struct Snapshot {
    sections: Vec<(String, Option<Vec<Item>>)>,
}

impl Snapshot {
    fn digest(&self) -> String {
        let mut h = Sha256::new();
        let field = |h: &mut Sha256, bytes: &[u8]| {
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        h.update(FINGERPRINT_DOMAIN);
        for (path, section) in &self.sections {
            h.update(b"P");
            field(&mut h, path.as_bytes());
            match section {
                None => h.update(b"A"),
                Some(items) => {
                    h.update(b"D");
                    h.update((items.len() as u64).to_le_bytes());
                    for item in items {
                        h.update(b"F");
                        field(&mut h, &item.path);
                        let mode: &[u8] = match item.kind {
                            FileKind::Regular => b"100644",
                            FileKind::Executable => b"100755",
                            FileKind::Symlink => b"120000",
                        };
                        h.update(mode);
                        field(&mut h, &item.data);
                    }
                }
            }
        }
        hex::encode(h.finalize())
    }

    /// All files, each path once (given paths may overlap).
    fn files(&self) -> impl Iterator<Item = &Item> {
        // One section holds each path once: no need to remember them.
        let single = self.sections.len() <= 1;
        let mut seen: std::collections::HashSet<&[u8]> = std::collections::HashSet::new();
        self.sections
            .iter()
            .filter_map(|(_, s)| s.as_ref())
            .flatten()
            .filter(move |item| single || seen.insert(item.path.as_slice()))
    }
}

fn io_err(path: &BStr) -> impl Fn(std::io::Error) -> CommitError + '_ {
    move |source| CommitError::Io {
        path: path.to_str_lossy().into_owned(),
        source,
    }
}

fn is_dot_git(name: &[u8]) -> bool {
    name.eq_ignore_ascii_case(b".git")
}

fn read_snapshot(
    root: &Dir,
    paths: &[String],
    tracked: &BTreeMap<BString, (EntryKind, ObjectId)>,
) -> Result<Snapshot, CommitError> {
    read_snapshot_cached(root, paths, tracked, None)
}

/// [`read_snapshot`], files unchanged since `cache` was filled not read.
fn read_snapshot_cached(
    root: &Dir,
    paths: &[String],
    tracked: &BTreeMap<BString, (EntryKind, ObjectId)>,
    cache: Option<&StatCache>,
) -> Result<Snapshot, CommitError> {
    let mut sections = Vec::with_capacity(paths.len());
    for path in paths {
        let section = read_path(root, path, tracked, cache)?;
        sections.push((path.clone(), section));
    }
    Ok(Snapshot { sections })
}

/// Ignore rules in effect while walking: `.git/info/exclude`, then one list per
/// directory's `.gitignore`, deepest last (matched first).
#[derive(Clone)]
struct Excludes {
    search: gix::ignore::Search,
}

impl Excludes {
    fn new(root: &Dir) -> Result<Self, CommitError> {
        let mut search = gix::ignore::Search::default();
        if let Some(bytes) = read_regular_if_present(root, ".git/info/exclude")? {
            search
                .add_patterns_buffer(&bytes, ".git/info/exclude", None, Default::default())
                .map_err(io_err(b".git/info/exclude".as_bstr()))?;
        }
        Ok(Excludes { search })
    }

    /// Pushes the `.gitignore` of `dir` (repo-relative `rel`, empty for the root);
    /// returns whether a list was pushed.
    fn push_dir(&mut self, dir: &Dir, rel: &BStr) -> Result<bool, CommitError> {
        let Some(bytes) = read_regular_if_present(dir, ".gitignore")? else {
            return Ok(false);
        };
        let mut source = rel.to_owned();
        if !source.is_empty() {
            source.push(b'/');
        }
        source.extend_from_slice(b".gitignore");
        let source_path = PathBuf::from(OsStr::from_bytes(&source));
        self.search
            .add_patterns_buffer(&bytes, source_path, Some(Path::new("")), Default::default())
            .map_err(io_err(source.as_bstr()))?;
        Ok(true)
    }

    fn pop(&mut self) {
        self.search.patterns.pop();
    }

    fn is_ignored(&self, rel: &BStr, is_dir: bool) -> bool {
        self.search
            .pattern_matching_relative_path(rel, Some(is_dir), gix::glob::pattern::Case::Sensitive)
            .is_some_and(|m| !m.pattern.is_negative())
    }
}

/// Reads `name` in `dir` if it is a regular file (symlinks are not followed).
fn read_regular_if_present(dir: &Dir, name: &str) -> Result<Option<Vec<u8>>, CommitError> {
    match dir.symlink_metadata(name) {
        Ok(m) if m.is_file() => {
            let (_, data) = read_file(dir, OsStr::new(name), &m, name.as_bytes().as_bstr())?;
            Ok(Some(data))
        }
        Ok(_) => Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err(name.as_bytes().as_bstr())(e)),
    }
}

/// Opens `name` in `dir`, checks it is the same inode that `meta` (from lstat)
/// described, and reads it whole.
fn read_file(
    dir: &Dir,
    name: &OsStr,
    meta: &Metadata,
    rel: &BStr,
) -> Result<(FileKind, Vec<u8>), CommitError> {
    let mut file = dir.open(name).map_err(io_err(rel))?;
    let opened = file.metadata().map_err(io_err(rel))?;
    if !opened.is_file() || opened.dev() != meta.dev() || opened.ino() != meta.ino() {
        return Err(CommitError::ChangedWhileReading {
            path: rel.to_str_lossy().into_owned(),
        });
    }
    let mut data = Vec::new();
    file.read_to_end(&mut data).map_err(io_err(rel))?;
    let kind = if opened.mode() & 0o100 != 0 {
        FileKind::Executable
    } else {
        FileKind::Regular
    };
    Ok((kind, data))
}

fn read_symlink(dir: &Dir, name: &OsStr, rel: &BStr) -> Result<Vec<u8>, CommitError> {
    let target = dir.read_link_contents(name).map_err(io_err(rel))?;
    Ok(target.into_os_string().into_vec())
}

fn open_subdir(dir: &Dir, name: &OsStr, meta: &Metadata, rel: &BStr) -> Result<Dir, CommitError> {
    let sub = dir.open_dir(name).map_err(io_err(rel))?;
    let opened = sub.dir_metadata().map_err(io_err(rel))?;
    if opened.dev() != meta.dev() || opened.ino() != meta.ino() {
        return Err(CommitError::ChangedWhileReading {
            path: rel.to_str_lossy().into_owned(),
        });
    }
    Ok(sub)
}

/// Reads one given path: `None` when absent.
fn read_path(
    root: &Dir,
    path: &str,
    tracked: &BTreeMap<BString, (EntryKind, ObjectId)>,
    cache: Option<&StatCache>,
) -> Result<Option<Vec<Item>>, CommitError> {
    let components: Vec<&str> = path.split('/').collect();
    let Some((last, parents)) = components.split_last() else {
        return Err(CommitPathError::Empty.into());
    };
    let mut excludes = Excludes::new(root)?;
    excludes.push_dir(root, b"".as_bstr())?;
    let mut dir = root.try_clone().map_err(io_err(b".".as_bstr()))?;
    let mut rel = BString::default();
    for component in parents {
        if !rel.is_empty() {
            rel.push(b'/');
        }
        rel.extend_from_slice(component.as_bytes());
        let meta = match dir.symlink_metadata(component) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(rel.as_bstr())(e)),
        };
        if meta.is_symlink() {
            return Err(CommitError::PathBeyondSymlink {
                path: path.to_owned(),
                symlink: rel.to_str_lossy().into_owned(),
            });
        }
        if !meta.is_dir() {
            // A file where a directory would be: the path does not exist.
            return Ok(None);
        }
        dir = open_subdir(&dir, OsStr::new(component), &meta, rel.as_bstr())?;
        excludes.push_dir(&dir, rel.as_bstr())?;
    }
    let rel = BString::from(path);
    let name = OsStr::new(last);
    let meta = match dir.symlink_metadata(name) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(rel.as_bstr())(e)),
    };
    let mut items = Vec::new();
    if meta.is_symlink() {
        let data = read_symlink(&dir, name, rel.as_bstr())?;
        items.push(Item {
            path: rel,
            kind: FileKind::Symlink,
            data,
            known: None,
            stamp: None,
        });
    } else if meta.is_file() {
        items.push(Item::regular(&dir, name, &meta, rel, cache)?);
    } else if meta.is_dir() {
        if matches!(tracked.get(&rel), Some((EntryKind::Commit, _))) {
            return Ok(Some(items));
        }
        let sub = open_subdir(&dir, name, &meta, rel.as_bstr())?;
        if sub.symlink_metadata(".git").is_ok() {
            debug!(path, "skipping nested repository");
            return Ok(Some(items));
        }
        walk_dir(&sub, rel, false, &mut excludes, tracked, cache, &mut items)?;
    } else {
        return Err(CommitError::UnsupportedFileType {
            path: path.to_owned(),
        });
    }
    Ok(Some(items))
}

/// Recursively collects the files of `dir` (repo-relative `rel`), sorted by path.
/// Below an ignored directory only files tracked in HEAD are taken.
fn walk_dir(
    dir: &Dir,
    rel: BString,
    ignored_parent: bool,
    excludes: &mut Excludes,
    tracked: &BTreeMap<BString, (EntryKind, ObjectId)>,
    cache: Option<&StatCache>,
    items: &mut Vec<Item>,
) -> Result<(), CommitError> {
    use rayon::prelude::*;
    let pushed = excludes.push_dir(dir, rel.as_bstr())?;
    let mut names = Vec::new();
    for entry in dir.entries().map_err(io_err(rel.as_bstr()))? {
        let entry = entry.map_err(io_err(rel.as_bstr()))?;
        names.push(entry.file_name());
    }
    names.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    // Each name on rayon's pool (a directory with its own copy of the
    // ignore rules), the results put back in name order.
    let excludes_here: &Excludes = excludes;
    let parts: Vec<Result<Vec<Item>, CommitError>> = names
        .par_iter()
        .map(|name| {
            let mut out = Vec::new();
            walk_entry(
                dir,
                &rel,
                name,
                ignored_parent,
                excludes_here,
                tracked,
                cache,
                &mut out,
            )?;
            Ok(out)
        })
        .collect();
    if pushed {
        excludes.pop();
    }
    for part in parts {
        items.extend(part?);
    }
    Ok(())
}

/// One entry of a directory being walked (see [`walk_dir`]).
#[allow(clippy::too_many_arguments)]
fn walk_entry(
    dir: &Dir,
    rel: &BString,
    name: &std::ffi::OsString,
    ignored_parent: bool,
    excludes: &Excludes,
    tracked: &BTreeMap<BString, (EntryKind, ObjectId)>,
    cache: Option<&StatCache>,
    items: &mut Vec<Item>,
) -> Result<(), CommitError> {
    if is_dot_git(name.as_bytes()) {
        return Ok(());
    }
    let mut child = rel.clone();
    child.push(b'/');
    child.extend_from_slice(name.as_bytes());
    let meta = match dir.symlink_metadata(name) {
        Ok(m) => m,
        // Vanished since listing: it is simply not there.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err(child.as_bstr())(e)),
    };
    let is_tracked = tracked.contains_key(&child);
    if meta.is_dir() {
        if matches!(tracked.get(&child), Some((EntryKind::Commit, _))) {
            return Ok(());
        }
        let ignored = ignored_parent || excludes.is_ignored(child.as_bstr(), true);
        let prefix = {
            let mut p = child.clone();
            p.push(b'/');
            p
        };
        let has_tracked = tracked
            .range(prefix.clone()..)
            .next()
            .is_some_and(|(k, _)| k.starts_with(&prefix));
        if ignored && !has_tracked {
            return Ok(());
        }
        let sub = open_subdir(dir, name, &meta, child.as_bstr())?;
        if sub.symlink_metadata(".git").is_ok() {
            debug!(path = %child, "skipping nested repository");
            return Ok(());
        }
        let mut own = excludes.clone();
        return walk_dir(&sub, child, ignored, &mut own, tracked, cache, items);
    }
    let ignored = ignored_parent || excludes.is_ignored(child.as_bstr(), false);
    if ignored && !is_tracked {
        return Ok(());
    }
    if meta.is_symlink() {
        let data = read_symlink(dir, name, child.as_bstr())?;
        items.push(Item {
            path: child,
            kind: FileKind::Symlink,
            data,
            known: None,
            stamp: None,
        });
    } else if meta.is_file() {
        items.push(Item::regular(dir, name, &meta, child, cache)?);
    } else {
        // Sockets, FIFOs, devices: never opened, never committed (git skips them too).
        warn!(path = %child, "skipping a file that is neither regular, directory nor symlink");
    }
    Ok(())
}

#[cfg(test)]
mod tests;
