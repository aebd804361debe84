//! `HEAD`'s entries under a read's paths ([`Tracked`]): each file's,
//! link's and gitlink's kind and blob id by path, sorted, each path once.
//!
//! It owns how they are looked up: by binary search, or from a hint (the
//! entry after the last one found), since a walk of the workspace asks
//! for its files in about path order. It must never hold a path twice nor
//! answer for a path it does not hold exactly.

use super::*;

/// See the module's documentation.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Tracked {
    /// By path (byte order, which is git's tree order for full paths),
    /// each path once.
    entries: Vec<(BString, (EntryKind, ObjectId))>,
}

/// What [`Tracked`] holds for one path.
type Entry = (BString, (EntryKind, ObjectId));

impl Tracked {
    fn find(&self, path: &[u8]) -> Option<usize> {
        self.entries
            .binary_search_by(|(key, _)| key.as_slice().cmp(path))
            .ok()
    }

    /// The entry at `path`.
    pub(super) fn get(&self, path: &[u8]) -> Option<&(EntryKind, ObjectId)> {
        self.find(path).map(|at| &self.entries[at].1)
    }

    /// [`Tracked::get`], the entry after the last one found (`hint`)
    /// tried first (then `hint` is the entry after this one's): a walk
    /// asks in about path order, so most lookups compare one path lying
    /// next to the last instead of searching (a `BTreeMap`'s search was
    /// 7% of a 100,000-file stop's samples).
    /// Also the entry's index (see [`Tracked::path_at`]).
    pub(super) fn get_near_at(
        &self,
        path: &[u8],
        hint: &mut usize,
    ) -> Option<(usize, (EntryKind, ObjectId))> {
        let at = match self.entries.get(*hint) {
            Some((key, _)) if key.as_slice() == path => *hint,
            _ => self.find(path)?,
        };
        *hint = at + 1;
        Some((at, self.entries[at].1))
    }

    /// The index of the entry at `path`, and the entry.
    pub(super) fn get_at(&self, path: &[u8]) -> Option<(usize, (EntryKind, ObjectId))> {
        self.find(path).map(|at| (at, self.entries[at].1))
    }

    /// The path of the entry at `index` (from [`Tracked::get_near_at`]
    /// or [`Tracked::get_at`] on this same value).
    pub(super) fn path_at(&self, index: usize) -> Option<&BString> {
        self.entries.get(index).map(|(key, _)| key)
    }

    /// Whether any entry's path starts with `prefix` (a directory's path
    /// and a slash: whether anything below it is tracked).
    pub(super) fn has_under(&self, prefix: &[u8]) -> bool {
        let at = self
            .entries
            .partition_point(|(key, _)| key.as_slice() < prefix);
        self.entries
            .get(at)
            .is_some_and(|(key, _)| key.starts_with(prefix))
    }

    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(super) fn iter(&self) -> Iter<'_> {
        self.entries.iter().map(as_pair)
    }

    pub(super) fn keys(&self) -> impl Iterator<Item = &BString> {
        self.entries.iter().map(|(key, _)| key)
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &(EntryKind, ObjectId)> {
        self.entries.iter().map(|(_, value)| value)
    }
}

/// [`Tracked::iter`]'s iterator: path and entry, in path order.
pub(super) type Iter<'a> = std::iter::Map<
    std::slice::Iter<'a, Entry>,
    fn(&'a Entry) -> (&'a BString, &'a (EntryKind, ObjectId)),
>;

fn as_pair(entry: &Entry) -> (&BString, &(EntryKind, ObjectId)) {
    (&entry.0, &entry.1)
}

impl<'a> IntoIterator for &'a Tracked {
    type Item = (&'a BString, &'a (EntryKind, ObjectId));
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl FromIterator<Entry> for Tracked {
    /// Sorted by path (entries read depth first from a tree come sorted
    /// already); a path given twice (overlapping paths) is kept once, with
    /// the last entry given, as a map would.
    fn from_iter<I: IntoIterator<Item = Entry>>(iter: I) -> Tracked {
        let mut entries: Vec<Entry> = iter.into_iter().collect();
        if !entries.is_sorted_by(|a, b| a.0 < b.0) {
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            entries.dedup_by(|later, kept| {
                let same = later.0 == kept.0;
                if same {
                    std::mem::swap(&mut later.1, &mut kept.1);
                }
                same
            });
        }
        Tracked { entries }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(byte: u8) -> ObjectId {
        ObjectId::from_bytes_or_panic(&[byte; 20])
    }

    fn entry(path: &str, byte: u8) -> Entry {
        (BString::from(path), (EntryKind::Blob, id(byte)))
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
        assert!(tracked.iter().eq(map.iter()), "{tracked:?}");
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
