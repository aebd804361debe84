//! The part of a tree a worktree holds: all of it, or only what lies at or
//! under some paths (and the directories on the way to them), for gates
//! that name the paths they need.
//!
//! Owns: which paths are in a view, and the key that keeps worktrees of
//! different views apart (a worktree only ever holds one view, so that
//! bringing it to the next tree by the trees' difference stays exact).
//! Must never: widen a view silently, or hold a path that is not a valid
//! commit path (`..`, absolute, `.git`).

use gix::bstr::{BStr, BString, ByteSlice};
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// What of a tree a worktree holds (see the module doc).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct View(Option<Arc<[BString]>>);

impl View {
    /// The whole tree.
    pub fn whole() -> View {
        View(None)
    }

    /// Only `paths` (commit paths: each is validated and normalised; one
    /// that is not valid makes the view whole, never narrower than asked).
    pub fn only<'a>(paths: impl IntoIterator<Item = &'a str>) -> View {
        let mut kept = std::collections::BTreeSet::new();
        for p in paths {
            match crate::commit::validate_commit_path(p) {
                Ok(p) => kept.insert(BString::from(p)),
                Err(_) => return View::whole(),
            };
        }
        if kept.is_empty() {
            return View::whole();
        }
        View(Some(kept.into_iter().collect()))
    }

    /// Whether the view is the whole tree.
    pub fn is_whole(&self) -> bool {
        self.0.is_none()
    }

    /// Whether `path` (a directory when `is_dir`) is in the view: at or
    /// under one of its paths, or a directory on the way to one.
    pub(super) fn holds(&self, path: &BStr, is_dir: bool) -> bool {
        let Some(paths) = &self.0 else {
            return true;
        };
        let below = |inner: &[u8], outer: &[u8]| {
            inner.len() > outer.len() && inner.starts_with(outer) && inner[outer.len()] == b'/'
        };
        paths
            .iter()
            .any(|p| path == p.as_bstr() || below(path, p) || (is_dir && below(p, path)))
    }

    /// The part of a worktree's directory name that tells views apart
    /// (empty for the whole tree).
    pub(super) fn key(&self) -> String {
        match &self.0 {
            None => String::new(),
            Some(paths) => {
                let mut h = Sha256::new();
                for p in paths.iter() {
                    h.update(p);
                    h.update([0]);
                }
                format!("v{}-", hex::encode(&h.finalize()[..4]))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_view_holds_its_paths_what_is_under_them_and_the_directories_on_the_way() {
        let v = View::only(["src/api", "Cargo.toml", "src/api/"]);
        for (path, is_dir, held) in [
            ("src/api", true, true),
            ("src/api/x.rs", false, true),
            ("src/api/deep/y.rs", false, true),
            ("src", true, true),
            ("src", false, false),
            ("src/apis", true, false),
            ("src/apis/z.rs", false, false),
            ("src/other.rs", false, false),
            ("Cargo.toml", false, true),
            ("Cargo.lock", false, false),
            ("docs", true, false),
        ] {
            assert_eq!(v.holds(path.into(), is_dir), held, "{path} {is_dir}");
        }
        assert!(View::whole().holds("anything/at/all".into(), false));
        // Normalised and deduplicated: the same view, the same key.
        assert_eq!(v.key(), View::only(["Cargo.toml", "src/api"]).key());
        assert_ne!(v.key(), View::only(["src"]).key());
        assert_eq!(View::whole().key(), "");
        // Never narrower than asked: an invalid path makes it whole.
        assert!(View::only(["src", "../etc"]).is_whole());
        assert!(View::only([]).is_whole());
    }
}
