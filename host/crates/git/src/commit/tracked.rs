//! `HEAD`'s entries under a read's paths ([`Tracked`]): each file's,
//! link's and gitlink's kind and blob id by path, sorted, each path once.
//!
//! It owns how they are looked up: by binary search, or from a hint (the
//! entry after the last one found), since a walk of the workspace asks
//! for its files in about path order. It must never hold a path twice nor
//! answer for a path it does not hold exactly.

use super::path_map::PathMap;
use gix::ObjectId;
use gix::bstr::{BStr, BString};
use gix::objs::tree::EntryKind;

/// See the module's documentation.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Tracked {
    /// By path (byte order, which is git's tree order for full paths),
    /// each path once, the paths in one buffer (no allocation per entry:
    /// `HEAD`'s 100,000 entries are read before every stop's walk).
    entries: PathMap<(EntryKind, ObjectId)>,
}

/// What [`Tracked`] holds for one path, as given to `collect`.
type Entry = (BString, (EntryKind, ObjectId));

impl Tracked {
    /// The entry at `path`.
    pub(super) fn get(&self, path: &[u8]) -> Option<&(EntryKind, ObjectId)> {
        self.entries.get(path)
    }

    /// [`Tracked::get`], the entry after the last one found (`hint`)
    /// tried first (then `hint` is the entry after this one's): a walk
    /// asks in about path order, so most lookups compare one path lying
    /// next to the last instead of searching (a `BTreeMap`'s search was
    /// 7% of a 100,000-file stop's samples). Also the entry's index (see
    /// [`Tracked::path_at`]).
    pub(super) fn get_near_at(
        &self,
        path: &[u8],
        hint: &mut usize,
    ) -> Option<(usize, (EntryKind, ObjectId))> {
        self.entries
            .get_near_at(path, hint)
            .map(|(at, entry)| (at, *entry))
    }

    /// The index of the entry at `path`, and the entry.
    pub(super) fn get_at(&self, path: &[u8]) -> Option<(usize, (EntryKind, ObjectId))> {
        self.entries.get_at(path).map(|(at, entry)| (at, *entry))
    }

    /// The path of the entry at `index` (from [`Tracked::get_near_at`]
    /// or [`Tracked::get_at`] on this same value).
    pub(super) fn path_at(&self, index: usize) -> Option<&BStr> {
        self.entries.path_at(index)
    }

    /// Whether any entry's path starts with `prefix` (a directory's path
    /// and a slash: whether anything below it is tracked).
    pub(super) fn has_under(&self, prefix: &[u8]) -> bool {
        self.entries.has_prefixed(prefix)
    }

    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (&BStr, &(EntryKind, ObjectId))> {
        self.entries.iter()
    }

    pub(super) fn keys(&self) -> impl Iterator<Item = &BStr> {
        self.entries.iter().map(|(key, _)| key)
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &(EntryKind, ObjectId)> {
        self.entries.values()
    }
}

/// Builds a [`Tracked`] from entries given in path order without an
/// allocation per entry; entries out of order (overlapping read paths, a
/// tree whose entries are not sorted) are taken too, sorted once at the
/// end.
#[derive(Default)]
pub(super) struct Builder {
    sorted: PathMap<(EntryKind, ObjectId)>,
    /// Set once an entry came out of order: then everything is here.
    loose: Option<Vec<Entry>>,
}

impl Builder {
    pub(super) fn push(&mut self, path: &[u8], entry: (EntryKind, ObjectId)) {
        if let Some(loose) = &mut self.loose {
            loose.push((BString::from(path), entry));
        } else if !self.sorted.push(path, entry) {
            let mut loose: Vec<Entry> = self
                .sorted
                .iter()
                .map(|(p, e)| (p.to_owned(), *e))
                .collect();
            loose.push((BString::from(path), entry));
            self.sorted.clear();
            self.loose = Some(loose);
        }
    }

    pub(super) fn finish(self) -> Tracked {
        match self.loose {
            Some(loose) => loose.into_iter().collect(),
            None => Tracked {
                entries: self.sorted,
            },
        }
    }
}

impl FromIterator<Entry> for Tracked {
    /// Sorted by path (entries read depth first from a tree come sorted
    /// already); a path given twice (overlapping paths) is kept once, with
    /// the last entry given, as a map would.
    fn from_iter<I: IntoIterator<Item = Entry>>(iter: I) -> Tracked {
        let mut entries: Vec<Entry> = iter.into_iter().collect();
        if !entries.is_sorted_by(|a, b| a.0 < b.0) {
            // Stable: of a path given twice, the last is first once reversed.
            entries.reverse();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            entries.dedup_by(|later, first| later.0 == first.0);
        }
        let mut map = PathMap::default();
        map.reserve(entries.len(), entries.iter().map(|(p, _)| p.len()).sum());
        for (path, entry) in entries {
            map.push(&path, entry);
        }
        Tracked { entries: map }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gix::bstr::ByteSlice;
    use std::collections::BTreeMap;

    fn id(byte: u8) -> ObjectId {
        ObjectId::from_bytes_or_panic(&[byte; 20])
    }

    fn entry(path: &str, byte: u8) -> Entry {
        (BString::from(path), (EntryKind::Blob, id(byte)))
    }

    /// The builder takes entries in order without copying them around,
    /// and entries out of order or repeated (a crafted tree, overlapping
    /// paths) as `collect` would: sorted, each path once, the last kept.
    #[test]
    fn the_builder_answers_as_collect_in_order_or_not() {
        for given in [
            vec![entry("a.txt", 1), entry("a/b", 2), entry("b", 3)],
            vec![entry("a/b", 2), entry("a.txt", 1), entry("b", 3)],
            vec![entry("a", 1), entry("b", 2), entry("a", 3), entry("c", 4)],
            vec![entry("b", 1), entry("b", 2)],
            vec![],
        ] {
            let mut builder = Builder::default();
            for (path, e) in &given {
                builder.push(path, *e);
            }
            let built = builder.finish();
            let collected: Tracked = given.clone().into_iter().collect();
            assert_eq!(built, collected, "{given:?}");
            let map: BTreeMap<BString, (EntryKind, ObjectId)> = given.into_iter().collect();
            assert!(built.iter().eq(map.iter().map(|(k, v)| (k.as_bstr(), v))));
        }
    }

    /// Unsorted and repeated paths come out sorted, each once with its
    /// last entry; lookups (plain, hinted whatever the hint, by prefix)
    /// answer as a `BTreeMap` built from the same entries does.
    #[test]
    fn lookups_answer_as_a_sorted_map_whatever_the_order_and_the_hint() {
        let given = vec![
            entry("src/b.rs", 1),
            entry("a.txt", 2),
            entry("src/a/x.rs", 3),
            entry("src.rs", 4),
            entry("src/b.rs", 5),
            entry("src-old/y", 6),
        ];
        let map: BTreeMap<BString, (EntryKind, ObjectId)> = given.iter().cloned().collect();
        let tracked: Tracked = given.into_iter().collect();
        assert_eq!(tracked.len(), map.len());
        assert!(
            tracked.iter().eq(map.iter().map(|(k, v)| (k.as_bstr(), v))),
            "{tracked:?}"
        );
        for path in [
            "a.txt",
            "src/b.rs",
            "src/a/x.rs",
            "src.rs",
            "src",
            "src/a",
            "b",
            "",
        ] {
            assert_eq!(
                tracked.get(path.as_bytes()),
                map.get(path.as_bytes().as_bstr()),
                "{path}"
            );
            for start in 0..=tracked.len() + 1 {
                let mut hint = start;
                let got = tracked
                    .get_near_at(path.as_bytes(), &mut hint)
                    .map(|(_, e)| e);
                assert_eq!(
                    got.as_ref(),
                    map.get(path.as_bytes().as_bstr()),
                    "{path} from {start}"
                );
                if got.is_none() {
                    assert_eq!(hint, start, "a miss leaves the hint");
                }
            }
        }
        // In order, each hinted lookup lands on the next entry.
        let mut hint = 0;
        for (path, value) in &map {
            assert_eq!(
                tracked.get_near_at(path, &mut hint).map(|(_, e)| e),
                Some(*value)
            );
        }
        assert_eq!(hint, map.len());
        for (prefix, under) in [
            ("src/", true),
            ("src/a/", true),
            ("src/b/", false),
            ("src-old/", true),
            ("a/", false),
            ("zzz/", false),
        ] {
            assert_eq!(tracked.has_under(prefix.as_bytes()), under, "{prefix}");
        }
    }
}
