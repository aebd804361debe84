//! The stat cache: what a file's stat data says about it without reading
//! it ([`Stamp`]), and the blob ids of files read before by path and
//! stamp ([`StatCache`]), so that a file whose stamp is unchanged is not
//! read again.
//!
//! It owns when a remembered blob id may vouch for a file; it must never
//! make a change look unchanged (a file is remembered only once its ctime
//! is past the racy window, and vouched for only when every field of its
//! stamp is the same).

use super::read::{FileKind, Item, Tracked};
use super::*;

/// What identifies a file's state without reading it: a write or chmod
/// changes its ctime, which no unprivileged process can set back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    pub(super) dev: u64,
    pub(super) ino: u64,
    pub(super) size: u64,
    pub(super) mode: u32,
    pub(super) mtime: (i64, i64),
    pub(super) ctime: (i64, i64),
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
    /// Hashed with a per-process random seed (foldhash): a path is
    /// hashed for every file of every walk (SipHash was a tenth of a
    /// remembered stop), and the agent chooses the paths.
    pub(super) entries: std::collections::HashMap<
        BString,
        (Stamp, FileKind, ObjectId),
        foldhash::fast::RandomState,
    >,
    pub(super) racy_secs: i64,
    /// HEAD's entries under the paths, by (HEAD's tree, paths).
    pub(super) tracked: Option<(Option<ObjectId>, Vec<String>, std::sync::Arc<Tracked>)>,
    /// The last tree written, by what it was made of (HEAD's tree, the
    /// paths, and every file's path, mode and blob id, digested).
    pub(super) last_tree: Option<([u8; 32], ObjectId)>,
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
pub(super) const RACY_SECS: i64 = 2;

impl StatCache {
    pub(super) fn hit(&self, path: &BStr, stamp: &Stamp) -> Option<(FileKind, ObjectId)> {
        self.entries
            .get(path)
            .filter(|(s, _, _)| s == stamp)
            .map(|(_, k, id)| (*k, *id))
    }

    /// HEAD's entries under `paths`, kept for HEAD's tree.
    pub(super) fn tracked(
        &mut self,
        repo: &Repository,
        head_tree: Option<ObjectId>,
        paths: &[String],
    ) -> Result<std::sync::Arc<Tracked>, CommitError> {
        if let Some((tree, p, map)) = &self.tracked
            && *tree == head_tree
            && p == paths
        {
            return Ok(map.clone());
        }
        let map = std::sync::Arc::new(tracked_entries(repo, head_tree, paths)?);
        self.tracked = Some((head_tree, paths.to_vec(), map.clone()));
        Ok(map)
    }

    /// Forgets everything (after an error: nothing half-known is kept).
    pub(super) fn clear(&mut self) {
        self.entries.clear();
        self.tracked = None;
        self.last_tree = None;
    }

    /// After a read that left the files the cache vouched for as
    /// `HEAD`'s unlisted (`unchanged`, their entries kept as they are):
    /// the entries become those of `unchanged` and of `items` (the files
    /// listed, with their blob ids), in place; those of listed files still
    /// in the racy window and of files the read did not find are dropped.
    /// Whether anything changed.
    pub(super) fn refill_keeping<'a>(
        &mut self,
        unchanged: &[BString],
        items: impl Iterator<Item = (&'a Item, ObjectId)>,
    ) -> bool {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let mut changed = false;
        let mut listed: Vec<&[u8]> = Vec::new();
        let mut kept = 0usize;
        for (item, id) in items {
            listed.push(item.path.as_slice());
            match item
                .stamp
                .filter(|stamp| stamp.ctime.0 <= now - self.racy_secs)
            {
                Some(stamp) => {
                    let entry = (stamp, item.kind, id);
                    if self.entries.get(&item.path) != Some(&entry) {
                        self.entries.insert(item.path.clone(), entry);
                        changed = true;
                    }
                    kept += 1;
                }
                None => changed |= self.entries.remove(&item.path).is_some(),
            }
        }
        // Every unchanged path has its entry (it was a hit), each listed
        // one kept has one: as many entries as those, and they are all
        // there is.
        if self.entries.len() != unchanged.len() + kept {
            let seen: std::collections::HashSet<&[u8]> = unchanged
                .iter()
                .map(|p| p.as_slice())
                .chain(listed)
                .collect();
            self.entries
                .retain(|path, _| seen.contains(path.as_slice()));
            changed = true;
        }
        changed
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}
