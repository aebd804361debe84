//! The ignore rules in effect while the workspace is walked: the git
//! directory's `info/exclude`, then each directory's `.gitignore`, deepest
//! last, read through the confined directory handles (never a global
//! excludes file, never `core.excludesFile`: the agent writes the
//! repository's configuration). It only matches paths; it never walks.

use super::CommitError;
use super::read::{io_err, read_regular_if_present};
use cap_std::fs::Dir;
use gix::bstr::{BStr, ByteSlice};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Ignore rules in effect while walking: `info/exclude` of the repository's
/// git directory (`common`), then one list per
/// directory's `.gitignore`, deepest last (matched first).
#[derive(Clone)]
pub(super) struct Excludes {
    pub(super) search: gix::ignore::Search,
}

impl Excludes {
    pub(super) fn new(common: &Dir) -> Result<Self, CommitError> {
        let mut search = gix::ignore::Search::default();
        if let Some(bytes) = read_regular_if_present(common, "info/exclude")? {
            search
                .add_patterns_buffer(&bytes, ".git/info/exclude", None, Default::default())
                .map_err(io_err(b".git/info/exclude".as_bstr()))?;
        }
        Ok(Excludes { search })
    }

    /// Pushes the `.gitignore` of `dir` (repo-relative `rel`, empty for the root);
    /// returns whether a list was pushed.
    pub(super) fn push_dir(&mut self, dir: &Dir, rel: &BStr) -> Result<bool, CommitError> {
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

    pub(super) fn pop(&mut self) {
        self.search.patterns.pop();
    }

    pub(super) fn is_ignored(&self, rel: &BStr, is_dir: bool) -> bool {
        self.search
            .pattern_matching_relative_path(rel, Some(is_dir), gix::glob::pattern::Case::Sensitive)
            .is_some_and(|m| !m.pattern.is_negative())
    }
}
