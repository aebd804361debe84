//! Repository access for commits: opening the workspace's repository
//! safely (a `.git` directory, or a linked worktree's gitfile checked by
//! [`super::layout`]; nothing special where gatehost writes), resolving
//! HEAD and the branch, and the objects and paths a commit is built from.
//!
//! It owns how the repository is opened and read; it must never run a
//! program the repository names, nor follow a symlink where it writes.

use super::layout::GitDirs;
use super::tracked::Tracked;
use super::{
    CommitError, CommitPathError, DEFAULT_EMAIL, DEFAULT_NAME, Prepared, validate_commit_path,
};
use cap_std::ambient_authority;
use cap_std::fs::Dir;
use gix::bstr::{BString, ByteSlice};
use gix::objs::tree::EntryKind;
use gix::refs::{FullName, Target};
use gix::{ObjectId, Repository};
use std::collections::BTreeSet;
use std::path::Path;

/// Refuses a FIFO, socket or device at `sub` (absent, regular files,
/// directories and symlinks pass: symlinks are dealt with where they
/// matter, and writes through them are confined by the caller).
pub(super) fn refuse_special(root: &Dir, sub: &str, label: &str) -> Result<(), CommitError> {
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
                "{label} is {what}; gatehost never reads or writes one"
            )));
        }
    }
    Ok(())
}

pub(super) struct Workspace {
    pub(super) root: Dir,
    pub(super) repo: Repository,
    /// The worktree's own git directory (`HEAD`, `index`).
    pub(super) git: Dir,
    /// The repository's git directory (objects, refs, `info/exclude`).
    pub(super) common: Dir,
    pub(super) dirs: GitDirs,
}

/// Which of a workspace's git directories a file is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum In {
    /// The worktree's own (`index`, `HEAD`).
    Git,
    /// The repository's (refs, objects, `packed-refs`).
    Common,
}

impl Workspace {
    pub(super) fn open(workspace: &Path) -> Result<Self, CommitError> {
        let dirs = GitDirs::of(workspace)?;
        Self::open_checked(workspace, dirs)
    }

    fn open_checked(workspace: &Path, dirs: GitDirs) -> Result<Self, CommitError> {
        let not_repo = |reason: &str| CommitError::NotARepository {
            workspace: workspace.to_path_buf(),
            reason: reason.to_owned(),
        };
        let root = crate::anchor::identity::open_canonical_dir(workspace)
            .map_err(|e| not_repo(&format!("cannot open the workspace: {e}")))?;
        let open = |p: &Path| {
            Dir::open_ambient_dir(p, ambient_authority())
                .map_err(|e| not_repo(&format!("cannot open {}: {e}", p.display())))
        };
        let (git, common) = if dirs.is_linked() {
            // Checked paths, free of symlinks (see `GitDirs`).
            (open(&dirs.git_dir)?, open(&dirs.common_dir)?)
        } else {
            // Through the workspace's handle: a `.git` swapped for a
            // symlink since the check does not lead out of it.
            let git = root
                .open_dir(".git")
                .map_err(|e| not_repo(&format!("cannot open .git: {e}")))?;
            let common = git
                .try_clone()
                .map_err(|e| not_repo(&format!("cannot open .git: {e}")))?;
            (git, common)
        };
        // gix writes below the git directories with plain std::fs: refuse
        // layouts that redirect it.
        if !dirs.is_linked() {
            for sub in ["commondir", "gitdir"] {
                if git.symlink_metadata(sub).is_ok() {
                    return Err(CommitError::UnsafeRepository(format!(".git/{sub} exists")));
                }
            }
        }
        let label = |place: In, sub: &str| dirs.label(place, sub);
        for sub in ["objects", "refs", "refs/heads", "logs"] {
            if let Ok(m) = common.symlink_metadata(sub)
                && m.is_symlink()
            {
                return Err(CommitError::UnsafeRepository(format!(
                    "{} is a symlink",
                    label(In::Common, sub)
                )));
            }
        }
        // Files gix reads or writes here: a FIFO would block the commit for
        // good, a device would be read or written as one.
        for (place, sub) in [
            (In::Git, "HEAD"),
            (In::Common, "config"),
            (In::Git, "config.worktree"),
            (In::Common, "packed-refs"),
            (In::Git, "index"),
            (In::Git, "logs/HEAD"),
        ] {
            let dir = if place == In::Git { &git } else { &common };
            refuse_special(dir, sub, &label(place, sub))?;
        }
        let options = gix::open::Options::isolated().strict_config(false);
        let repo = gix::open_opts(&dirs.git_dir, options)
            .map_err(|e| not_repo(&format!("cannot open it: {e}")))?;
        if dirs.is_linked() {
            // gix's own reading of the layout must agree with the checked one.
            let same = |a: &Path, b: &Path| {
                std::fs::canonicalize(a)
                    .ok()
                    .is_some_and(|a| Some(a) == std::fs::canonicalize(b).ok())
            };
            let agrees = same(repo.git_dir(), &dirs.git_dir)
                && same(repo.common_dir(), &dirs.common_dir)
                && repo.workdir().is_some_and(|w| same(w, workspace));
            if !agrees {
                return Err(CommitError::ForeignGitDir {
                    workspace: workspace.to_path_buf(),
                    reason: format!(
                        "git's reading of the linked worktree (gitdir {}, common dir {}) differs from the checked one",
                        repo.git_dir().display(),
                        repo.common_dir().display()
                    ),
                });
            }
        }
        Ok(Workspace {
            root,
            repo,
            git,
            common,
            dirs,
        })
    }

    /// The directory handle of `place`.
    pub(super) fn dir(&self, place: In) -> &Dir {
        match place {
            In::Git => &self.git,
            In::Common => &self.common,
        }
    }

    /// The path of `sub` in `place`, for messages.
    pub(super) fn label(&self, place: In, sub: &str) -> String {
        self.dirs.label(place, sub)
    }
}

impl GitDirs {
    /// `sub` of `place` as people read it: `.git/sub` in a main worktree,
    /// the absolute path in a linked one.
    pub(super) fn label(&self, place: In, sub: &str) -> String {
        if !self.is_linked() {
            return format!(".git/{sub}");
        }
        let dir = match place {
            In::Git => &self.git_dir,
            In::Common => &self.common_dir,
        };
        format!("{}/{sub}", dir.display())
    }
}

pub(super) fn git(op: &'static str) -> impl Fn(gix::Error) -> CommitError {
    move |source| CommitError::Git { op, source }
}

pub(super) struct Head {
    pub(super) reference: FullName,
    pub(super) commit: Option<ObjectId>,
    pub(super) tree: Option<ObjectId>,
}

pub(super) fn resolve_head(repo: &Repository) -> Result<Head, CommitError> {
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
pub(super) fn branch_target(
    repo: &Repository,
    name: &FullName,
) -> Result<Option<ObjectId>, CommitError> {
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

pub(super) fn ref_moved(prepared: &Prepared, actual: Option<ObjectId>) -> CommitError {
    CommitError::RefMoved {
        reference: prepared.reference.clone(),
        expected: prepared.parent.clone(),
        actual: actual.map(|a| a.to_hex().to_string()),
    }
}

/// A [`Prepared`] parsed and checked against the repository.
pub(super) struct Record {
    pub(super) reference: FullName,
    pub(super) commit: Option<ObjectId>,
    pub(super) parent: Option<ObjectId>,
    /// Normalised committed paths; empty for records stored before they were recorded.
    pub(super) paths: Vec<String>,
}

impl Record {
    pub(super) fn parse(repo: &Repository, prepared: &Prepared) -> Result<Self, CommitError> {
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

/// The repository's git directory (the workspace's `.git`, or for a
/// linked worktree the checked common directory, which holds the
/// worktree's own `worktrees/NAME`), opened without following a symlink:
/// the one directory gatehost's own writes may reach (see
/// `Sandbox::confine_git_writes`).
pub fn git_dir_handle(workspace: &Path) -> Result<std::os::fd::OwnedFd, CommitError> {
    use rustix::fs::{CWD, Mode, OFlags};
    let dirs = GitDirs::of(workspace)?;
    // A handle that only names the directory: `O_PATH` where there is one.
    #[cfg(target_os = "linux")]
    let naming = OFlags::PATH;
    #[cfg(not(target_os = "linux"))]
    let naming = OFlags::RDONLY;
    rustix::fs::openat(
        CWD,
        &dirs.common_dir,
        naming | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| {
        CommitError::UnsafeRepository(format!(
            "{} is not a directory gatehost can write beneath (a symlink?): {e}",
            dirs.common_dir.display()
        ))
    })
}

/// The repository of `workspace`, opened as the commit path opens it:
/// its git directories checked (see [`GitDirs`]), isolated from the
/// environment and the machine's configuration. For readers of its
/// objects (the snapshot worktrees).
pub fn open_repository(workspace: &Path) -> Result<Repository, CommitError> {
    Ok(Workspace::open(workspace)?.repo)
}

/// Who authors and commits: the host's configuration decides (`[daemon]
/// committer_name`, `committer_email`), never the repository's config,
/// which the agent writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committer {
    /// The author's and committer's name (`gatehost` by default).
    pub name: String,
    /// The author's and committer's e-mail (`gatehost@localhost` by
    /// default).
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

    pub(super) fn signature(&self) -> gix::actor::Signature {
        gix::actor::Signature {
            name: self.name.trim().into(),
            email: self.email.trim().into(),
            time: gix::date::Time::now_utc(),
        }
    }
}

pub(super) fn check_message(message: &str) -> Result<(), CommitError> {
    if message.trim().is_empty() {
        return Err(CommitError::InvalidMessage("it is empty"));
    }
    if message.contains('\0') {
        return Err(CommitError::InvalidMessage("it contains a NUL byte"));
    }
    Ok(())
}

pub(super) fn normalise_paths(paths: &[String]) -> Result<Vec<String>, CommitError> {
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
pub(super) fn tracked_entries(
    repo: &Repository,
    head_tree: Option<ObjectId>,
    paths: &[String],
) -> Result<Tracked, CommitError> {
    let Some(tree) = head_tree else {
        return Ok(Tracked::default());
    };
    let tree = repo.find_tree(tree).map_err(git("read HEAD tree"))?;
    let mut looked = Vec::new();
    for path in paths {
        let Some(entry) = tree
            .lookup_entry(path.split('/'))
            .map_err(git("read HEAD tree"))?
        else {
            continue;
        };
        looked.push((path, entry.mode().kind(), entry.object_id()));
    }
    // Each path's entries come in path order; the paths are taken in the
    // order their entries sort (a directory's as its name and a slash),
    // so that the whole comes sorted, with no allocation per entry.
    looked.sort_by_cached_key(|(path, kind, _)| {
        let mut key = BString::from(path.as_str());
        if *kind == EntryKind::Tree {
            key.push(b'/');
        }
        key
    });
    let mut found = super::tracked::Builder::default();
    for (path, kind, id) in looked {
        if kind != EntryKind::Tree {
            found.push(path.as_bytes(), (kind, id));
            continue;
        }
        let mut prefix = BString::from(path.as_str());
        collect_tree(repo, id, &mut prefix, 0, &mut found)?;
    }
    Ok(found.finish())
}

/// How deep trees may nest (git's own `core.maxTreeDepth` default): a
/// deeper one, which only a crafted commit holds, is refused rather than
/// walked.
const MAX_TREE_DEPTH: usize = 4096;

/// Every non-tree entry below the tree `id` (at `depth`), its path
/// `prefix/…`, pushed onto `out` depth first (in path order: no
/// allocation per entry) with one buffer per tree.
fn collect_tree(
    repo: &Repository,
    id: ObjectId,
    prefix: &mut BString,
    depth: usize,
    out: &mut super::tracked::Builder,
) -> Result<(), CommitError> {
    use gix::objs::FindExt as _;
    if depth >= MAX_TREE_DEPTH {
        return Err(CommitError::UnsafeRepository(format!(
            "HEAD's tree nests deeper than {MAX_TREE_DEPTH} directories (below {}…)",
            prefix[..prefix.len().min(200)].as_bstr()
        )));
    }
    let mut buf = Vec::new();
    let tree = repo
        .objects
        .find_tree(&id, &mut buf)
        .map_err(git("read HEAD tree"))?;
    for e in &tree.entries {
        let len = prefix.len();
        prefix.push(b'/');
        prefix.extend_from_slice(e.filename);
        let kind = e.mode.kind();
        if kind == EntryKind::Tree {
            collect_tree(repo, e.oid.to_owned(), prefix, depth + 1, out)?;
        } else {
            out.push(prefix, (kind, e.oid.to_owned()));
        }
        prefix.truncate(len);
    }
    Ok(())
}
