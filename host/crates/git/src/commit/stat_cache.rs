//! The stat cache: what a file's stat data says about it without reading
//! it ([`Stamp`]), and the blob ids of files read before by path and
//! stamp ([`StatCache`]), so that a file whose stamp is unchanged is not
//! read again.
//!
//! It owns when a remembered blob id may vouch for a file; it must never
//! make a change look unchanged (a file is remembered only once its ctime
//! is past the racy window, and vouched for only when every field of its
//! stamp is the same).

use super::CommitError;
use super::path_map::PathMap;
use super::read::{FileKind, Item};
use super::repo::tracked_entries;
use super::tracked::Tracked;
use cap_std::fs::{Metadata, MetadataExt};
use gix::bstr::BStr;
use gix::{ObjectId, Repository};

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
    /// By path, the paths end to end in one buffer ([`PathMap`]): a
    /// remembered cache of 100,000 files is loaded without an allocation
    /// or a hash per file (its load set when a stop's walk could start),
    /// and a walk looking its files up in order reads the entries front to
    /// back (`hit_near`).
    pub(super) entries: PathMap<Remembered>,
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

/// What the cache holds for a path: the file's stamp when read, its kind
/// and its blob id.
pub(super) type Remembered = (Stamp, FileKind, ObjectId);

impl StatCache {
    pub(super) fn hit(&self, path: &BStr, stamp: &Stamp) -> Option<(FileKind, ObjectId)> {
        self.entries
            .get(path)
            .filter(|(s, _, _)| s == stamp)
            .map(|(_, k, id)| (*k, *id))
    }

    /// [`StatCache::hit`], the entry after the last one found (`hint`)
    /// tried first: a walk asks in about path order, so most lookups
    /// compare one path lying next to the last instead of searching.
    /// `hint` is then the entry after the one found.
    pub(super) fn hit_near(
        &self,
        path: &BStr,
        stamp: &Stamp,
        hint: &mut usize,
    ) -> Option<(FileKind, ObjectId)> {
        let (s, kind, id) = self.entries.get_near(path, hint)?;
        (s == stamp).then_some((*kind, *id))
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

    /// The entries kept by [`StatCache::tracked`], when they are those of
    /// `tree` under `paths`.
    pub(super) fn tracked_of(
        &self,
        tree: ObjectId,
        paths: &[String],
    ) -> Option<std::sync::Arc<Tracked>> {
        match &self.tracked {
            Some((Some(t), p, map)) if *t == tree && p == paths => Some(map.clone()),
            _ => None,
        }
    }

    /// A cache that remembers files however recent (tests do not wait out
    /// the racy window).
    #[cfg(test)]
    pub(super) fn trusting_any_age() -> StatCache {
        StatCache {
            racy_secs: -3600,
            ..StatCache::default()
        }
    }

    /// Forgets everything (after an error: nothing half-known is kept).
    pub(super) fn clear(&mut self) {
        self.entries.clear();
        self.tracked = None;
        self.last_tree = None;
    }

    /// After a read that left the files the cache vouched for as
    /// `HEAD`'s unlisted (`unchanged`, by their index in `tracked`, the
    /// entries the read was given; their cache entries kept as they are):
    /// the entries become those of `unchanged` and of `items` (the files
    /// listed, with their blob ids), in place; those of listed files still
    /// in the racy window and of files the read did not find are dropped.
    /// Whether anything changed.
    pub(super) fn refill_keeping<'a>(
        &mut self,
        unchanged: &[usize],
        tracked: &Tracked,
        items: impl Iterator<Item = (&'a Item, ObjectId)>,
    ) -> bool {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let mut changes: Vec<(&[u8], Option<Remembered>)> = items
            .map(|(item, id)| {
                let entry = item
                    .stamp
                    .filter(|stamp| stamp.ctime.0 <= now - self.racy_secs)
                    .map(|stamp| (stamp, item.kind, id));
                (item.path.as_slice(), entry)
            })
            .collect();
        // A path listed twice (overlapping read paths): the last counts.
        changes.reverse();
        changes.sort_by(|a, b| a.0.cmp(b.0));
        changes.dedup_by(|later, first| later.0 == first.0);
        let (mut differs, mut after) = (false, self.entries.len());
        for (path, entry) in &changes {
            let now_held = self.entries.get(path);
            differs |= now_held != entry.as_ref();
            match (now_held, entry) {
                (None, Some(_)) => after += 1,
                (Some(_), None) => after -= 1,
                _ => {}
            }
        }
        let kept = changes.iter().filter(|(_, e)| e.is_some()).count();
        // Every unchanged path has its entry (it was a hit), each listed
        // one kept has one: as many entries as those, and they are all
        // there is. Else the others (files gone) are dropped.
        let stale = after != unchanged.len() + kept;
        if !differs && !stale {
            return false;
        }
        let seen: std::collections::HashSet<&[u8]> = if stale {
            unchanged
                .iter()
                .filter_map(|at| tracked.path_at(*at).map(<&[u8]>::from))
                .collect()
        } else {
            Default::default()
        };
        let keep = |path: &[u8]| seen.contains(path);
        self.entries = self.entries.merged(
            &changes,
            stale.then_some(&keep as super::path_map::Keep<'_>),
        );
        true
    }

    /// Learns the files of `items` (read again, by a snapshot that read
    /// only where a watch said): each one's entry becomes what was read
    /// (dropped when still in the racy window); every other entry stays.
    pub(super) fn remember(&mut self, items: &[&Item]) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let mut changes: Vec<(&[u8], Option<Remembered>)> = Vec::with_capacity(items.len());
        for item in items {
            let entry = match (item.stamp, item.known) {
                (Some(stamp), _) if stamp.ctime.0 > now - self.racy_secs => None,
                (Some(stamp), Some(id)) => Some((stamp, item.kind, id)),
                (Some(stamp), None) if item.oversized.is_none() => {
                    match gix::objs::compute_hash(
                        gix::hash::Kind::Sha1,
                        gix::objs::Kind::Blob,
                        &item.data,
                    ) {
                        Ok(id) => Some((stamp, item.kind, id)),
                        Err(_) => None,
                    }
                }
                _ => None,
            };
            changes.push((item.path.as_slice(), entry));
        }
        changes.sort_by(|a, b| a.0.cmp(b.0));
        changes.dedup_by(|later, first| later.0 == first.0);
        if changes
            .iter()
            .all(|(path, entry)| self.entries.get(path) == entry.as_ref())
        {
            return;
        }
        self.entries = self.entries.merged(&changes, None);
    }

    /// How many files it holds a stamp of.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it holds no stamp at all.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gix::bstr::ByteSlice;

    fn stamp(ino: u64) -> Stamp {
        Stamp {
            dev: 1,
            ino,
            size: 10,
            mode: 0o100644,
            mtime: (1, 0),
            ctime: (1, 0),
        }
    }

    fn id(byte: u8) -> ObjectId {
        ObjectId::from_bytes_or_panic(&[byte; 20])
    }

    /// A hinted lookup answers exactly as the plain one, whatever the
    /// hint: in order it moves along, out of order or past the end it
    /// falls back to a search, a path the cache lacks is no hit and
    /// leaves the hint, and another file's stamp is never taken for this
    /// one's.
    #[test]
    fn a_hinted_lookup_answers_as_the_table_whatever_the_hint() {
        let mut cache = StatCache::default();
        for (i, path) in ["a.txt", "b.txt", "src/c.rs"].into_iter().enumerate() {
            let n = i as u8 + 1;
            assert!(cache.entries.push(
                path.as_bytes(),
                (stamp(u64::from(n)), FileKind::Regular, id(n)),
            ));
        }
        fn ask(
            cache: &StatCache,
            path: &str,
            ino: u64,
            hint: &mut usize,
        ) -> Option<(FileKind, ObjectId)> {
            let got = cache.hit_near(path.as_bytes().as_bstr(), &stamp(ino), hint);
            assert_eq!(
                got,
                cache.hit(path.as_bytes().as_bstr(), &stamp(ino)),
                "{path}"
            );
            got
        }
        let mut hint = 0;
        assert_eq!(
            ask(&cache, "a.txt", 1, &mut hint),
            Some((FileKind::Regular, id(1)))
        );
        assert_eq!(hint, 1);
        assert_eq!(
            ask(&cache, "b.txt", 2, &mut hint),
            Some((FileKind::Regular, id(2)))
        );
        assert_eq!(hint, 2);
        // Out of order: found by a search, the hint follows it.
        assert_eq!(
            ask(&cache, "a.txt", 1, &mut hint),
            Some((FileKind::Regular, id(1)))
        );
        assert_eq!(hint, 1);
        // Absent: no hit, the hint stays.
        assert_eq!(ask(&cache, "b.rs", 2, &mut hint), None);
        assert_eq!(hint, 1);
        // The hinted entry (b.txt) is another file: its stamp and id are
        // not this one's.
        assert_eq!(
            ask(&cache, "src/c.rs", 2, &mut hint),
            None,
            "c's own stamp differs"
        );
        assert_eq!(hint, 3);
        let mut past = 99;
        assert_eq!(
            ask(&cache, "src/c.rs", 3, &mut past),
            Some((FileKind::Regular, id(3)))
        );
        // After a removal, still right.
        let gone: [(&[u8], _); 1] = [(b"a.txt", None)];
        cache.entries = cache.entries.merged(&gone, None);
        let mut hint = 0;
        assert_eq!(
            ask(&cache, "src/c.rs", 3, &mut hint),
            Some((FileKind::Regular, id(3)))
        );
        assert_eq!(ask(&cache, "a.txt", 1, &mut hint), None);
    }
}
