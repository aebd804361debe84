//! Where a workspace's git directories are, checked before anything is
//! read from or written to them.
//!
//! Two layouts are accepted. The workspace's `.git` is a directory (a
//! repository's main worktree): it is both the worktree's own git
//! directory and the common one. Or `.git` is a regular file
//! `gitdir: /repo/.git/worktrees/NAME` (a linked worktree made by `git
//! worktree add`): the worktree's own directory (its `HEAD`, `index`,
//! `logs/HEAD`) is `/repo/.git/worktrees/NAME`, the common one (objects,
//! refs, config, `info/exclude`) is `/repo/.git`.
//!
//! The agent writes the `.git` file, so before a linked worktree's
//! directories are used they are proven to be the repository's own, with
//! the check git itself makes and more: the `gitdir:` path is absolute,
//! free of `.` and `..` components and of symlinks (it is its own
//! canonical form), is a directory `COMMON/worktrees/NAME`; its `gitdir`
//! file points back at this workspace's `.git`; its `commondir` leads to
//! `COMMON`; `COMMON` is a git directory (`HEAD`, `objects/`, `refs/`, no
//! `commondir` of its own) that does not lie inside the workspace. Anything
//! else is refused with the path named, never followed.
//!
//! It owns that decision; it must never follow a path it has not checked,
//! nor open a repository (the sibling `repo` module does).

use super::CommitError;
use super::read::{read_file, read_regular_if_present};
use cap_std::ambient_authority;
use cap_std::fs::{Dir, Metadata};
use gix::bstr::ByteSlice;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use tracing::warn;

/// A workspace's git directories, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitDirs {
    /// The worktree's own git directory (`HEAD`, `index`): `.git` of the
    /// workspace, or `COMMON/worktrees/NAME` of a linked worktree.
    pub git_dir: PathBuf,
    /// The repository's git directory (objects, refs, config): the same
    /// as `git_dir` but for a linked worktree.
    pub common_dir: PathBuf,
    /// The linked worktree's name (`NAME`), `None` for a main worktree.
    pub linked: Option<String>,
}

/// The largest `.git` file, `gitdir` or `commondir` file read (git's own
/// limit is larger; a real one holds a path).
const MAX_POINTER_BYTES: u64 = 4096;

impl GitDirs {
    /// The git directories of `workspace` (see the module doc).
    pub fn of(workspace: &Path) -> Result<Self, CommitError> {
        let not_repo = |reason: String| CommitError::NotARepository {
            workspace: workspace.to_path_buf(),
            reason,
        };
        let root = crate::anchor::identity::open_canonical_dir(workspace)
            .map_err(|e| not_repo(format!("cannot open the workspace: {e}")))?;
        let meta = match root.symlink_metadata(".git") {
            Ok(m) => m,
            Err(e) => return Err(not_repo(format!(".git: {e}"))),
        };
        if meta.is_dir() {
            let git = workspace.join(".git");
            return Ok(GitDirs {
                git_dir: git.clone(),
                common_dir: git,
                linked: None,
            });
        }
        if !meta.is_file() {
            return Err(not_repo(
                ".git is neither a directory nor a regular file (a symlink is never followed)"
                    .into(),
            ));
        }
        linked(workspace, &root, &meta)
    }

    /// True for a linked worktree.
    pub fn is_linked(&self) -> bool {
        self.linked.is_some()
    }
}

/// The checks of a linked worktree's `.git` file (see the module doc).
fn linked(workspace: &Path, root: &Dir, meta: &Metadata) -> Result<GitDirs, CommitError> {
    let refuse = |reason: String| {
        warn!(workspace = %workspace.display(), %reason, "linked worktree refused");
        CommitError::ForeignGitDir {
            workspace: workspace.to_path_buf(),
            reason,
        }
    };
    let canonical_ws = std::fs::canonicalize(workspace)
        .map_err(|e| refuse(format!("cannot resolve the workspace's path: {e}")))?;
    if meta.len() > MAX_POINTER_BYTES {
        return Err(refuse(format!(
            "its .git file holds {} bytes, more than a gitdir: line",
            meta.len()
        )));
    }
    let (_, text) = read_file(root, OsStr::new(".git"), meta, b".git".as_bstr())?;
    let git_dir = gix::discover::parse::gitdir(&text)
        .map_err(|e| refuse(format!("its .git file is not a `gitdir: PATH` line: {e}")))?;
    let shown = git_dir.display();
    if !git_dir.is_absolute() {
        return Err(refuse(format!(
            "its .git file names the relative gitdir {shown}; only an absolute one (as git writes by default) is accepted"
        )));
    }
    if git_dir.components().any(|c| {
        matches!(
            c,
            std::path::Component::CurDir | std::path::Component::ParentDir
        )
    }) {
        return Err(refuse(format!(
            "its gitdir {shown} has a `.` or `..` component"
        )));
    }
    let resolved = std::fs::canonicalize(&git_dir)
        .map_err(|e| refuse(format!("its gitdir {shown} cannot be resolved: {e}")))?;
    if resolved != git_dir {
        return Err(refuse(format!(
            "its gitdir {shown} leads through a symlink (to {}); it is never followed",
            resolved.display()
        )));
    }
    if !std::fs::symlink_metadata(&git_dir).is_ok_and(|m| m.is_dir()) {
        return Err(refuse(format!("its gitdir {shown} is not a directory")));
    }
    let (Some(name), Some(worktrees)) = (git_dir.file_name(), git_dir.parent()) else {
        return Err(refuse(format!(
            "its gitdir {shown} is not REPOSITORY/worktrees/NAME"
        )));
    };
    let common = match worktrees.parent() {
        Some(common) if worktrees.file_name() == Some(OsStr::new("worktrees")) => common,
        _ => {
            return Err(refuse(format!(
                "its gitdir {shown} is not REPOSITORY/worktrees/NAME"
            )));
        }
    };
    let name = name.to_string_lossy().into_owned();
    if common.starts_with(&canonical_ws) {
        return Err(refuse(format!(
            "its repository {} lies inside the workspace",
            common.display()
        )));
    }
    let dir = Dir::open_ambient_dir(&git_dir, ambient_authority())
        .map_err(|e| refuse(format!("cannot open its gitdir {shown}: {e}")))?;
    let pointer = |file: &str| -> Result<PathBuf, CommitError> {
        let missing = || refuse(format!("{shown}/{file} is missing or not a regular file"));
        let meta = dir.symlink_metadata(file).map_err(|_| missing())?;
        if !meta.is_file() {
            return Err(missing());
        }
        if meta.len() > MAX_POINTER_BYTES {
            return Err(refuse(format!(
                "{shown}/{file} is too large to hold a path"
            )));
        }
        let text = read_regular_if_present(&dir, file)?.ok_or_else(missing)?;
        let path = gix::path::from_bstr(text.trim_end().as_bstr())
            .map_err(|e| refuse(format!("{shown}/{file} is not a path: {e}")))?
            .into_owned();
        if path.as_os_str().is_empty() {
            return Err(refuse(format!("{shown}/{file} is empty")));
        }
        Ok(git_dir.join(path))
    };
    // Back to this worktree, as git checks it.
    let back = pointer("gitdir")?;
    let dot_git = canonical_ws.join(".git");
    if std::fs::canonicalize(&back).ok().as_ref() != Some(&dot_git) {
        return Err(refuse(format!(
            "{shown}/gitdir names {}, not this worktree's {}: the gitdir belongs to another worktree",
            back.display(),
            dot_git.display()
        )));
    }
    // On to the repository.
    let common_named = pointer("commondir")?;
    if std::fs::canonicalize(&common_named).ok().as_deref() != Some(common) {
        return Err(refuse(format!(
            "{shown}/commondir leads to {}, not to the repository {} that holds the gitdir",
            common_named.display(),
            common.display()
        )));
    }
    for (sub, dir) in [("HEAD", false), ("objects", true), ("refs", true)] {
        let ok = std::fs::symlink_metadata(common.join(sub))
            .is_ok_and(|m| if dir { m.is_dir() } else { m.is_file() });
        if !ok {
            return Err(refuse(format!(
                "{} is not a git directory (no {sub} {})",
                common.display(),
                if dir { "directory" } else { "file" }
            )));
        }
    }
    if std::fs::symlink_metadata(common.join("commondir")).is_ok() {
        return Err(refuse(format!(
            "{} has a commondir of its own; it is not a repository's git directory",
            common.display()
        )));
    }
    Ok(GitDirs {
        git_dir: git_dir.clone(),
        common_dir: common.to_path_buf(),
        linked: Some(name),
    })
}

#[cfg(test)]
mod tests;
