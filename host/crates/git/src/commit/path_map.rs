//! A map from repository paths to values, sorted by path, its paths kept
//! end to end in one buffer ([`PathMap`]): built in path order without an
//! allocation or a hash per entry (a remembered stat cache of 100,000
//! files is loaded this way), looked up by binary search or from a hint
//! (a walk asks in about path order), rebuilt by merging sorted changes.
//!
//! Must never: hold a path twice, or answer for a path it does not hold
//! exactly.

use gix::bstr::{BStr, ByteSlice};

/// Which entries a merge keeps (see [`PathMap::merged`]).
pub(super) type Keep<'a> = &'a dyn Fn(&[u8]) -> bool;

/// See the module's documentation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PathMap<V> {
    /// Every path, end to end, in the entries' order.
    bytes: Vec<u8>,
    /// Where each path ends in `bytes` (it starts where the previous one
    /// ends), and its value; by path (byte order), each path once.
    entries: Vec<(usize, V)>,
}

impl<V> Default for PathMap<V> {
    fn default() -> Self {
        PathMap {
            bytes: Vec::new(),
            entries: Vec::new(),
        }
    }
}

impl<V> PathMap<V> {
    /// Room for `entries` paths of `bytes` bytes in all.
    pub(super) fn reserve(&mut self, entries: usize, bytes: usize) {
        self.entries.reserve(entries);
        self.bytes.reserve(bytes);
    }

    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub(super) fn clear(&mut self) {
        self.entries.clear();
        self.bytes.clear();
    }

    fn path(&self, at: usize) -> &[u8] {
        let start = at.checked_sub(1).map_or(0, |before| self.entries[before].0);
        &self.bytes[start..self.entries[at].0]
    }

    /// Appends `path` after every path held: refused (`false`, nothing
    /// changed) unless it sorts after the last one.
    pub(super) fn push(&mut self, path: &[u8], value: V) -> bool {
        if let Some(last) = self.entries.len().checked_sub(1)
            && self.path(last) >= path
        {
            return false;
        }
        self.bytes.extend_from_slice(path);
        self.entries.push((self.bytes.len(), value));
        true
    }

    fn find(&self, path: &[u8]) -> Option<usize> {
        // A binary search by index: each probe reads its path from `bytes`.
        let (mut lo, mut hi) = (0, self.entries.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.path(mid).cmp(path) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(mid),
            }
        }
        None
    }

    pub(super) fn get(&self, path: &[u8]) -> Option<&V> {
        self.find(path).map(|at| &self.entries[at].1)
    }

    /// [`PathMap::get`], the entry after the last one found (`hint`) tried
    /// first; then `hint` is the entry after this one. A path not held
    /// leaves `hint` as it was.
    pub(super) fn get_near(&self, path: &[u8], hint: &mut usize) -> Option<&V> {
        self.get_near_at(path, hint).map(|(_, value)| value)
    }

    /// [`PathMap::get_near`], with the entry's index (see
    /// [`PathMap::path_at`]).
    pub(super) fn get_near_at(&self, path: &[u8], hint: &mut usize) -> Option<(usize, &V)> {
        let at = match self.entries.get(*hint) {
            Some(_) if self.path(*hint) == path => *hint,
            _ => self.find(path)?,
        };
        *hint = at + 1;
        Some((at, &self.entries[at].1))
    }

    /// The index of the entry at `path`, and its value.
    pub(super) fn get_at(&self, path: &[u8]) -> Option<(usize, &V)> {
        self.find(path).map(|at| (at, &self.entries[at].1))
    }

    /// The path of the entry at `index`.
    pub(super) fn path_at(&self, index: usize) -> Option<&BStr> {
        (index < self.entries.len()).then(|| self.path(index).as_bstr())
    }

    /// Whether a path held starts with `prefix`.
    pub(super) fn has_prefixed(&self, prefix: &[u8]) -> bool {
        let (mut lo, mut hi) = (0, self.entries.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.path(mid) < prefix {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo < self.entries.len() && self.path(lo).starts_with(prefix)
    }

    /// The values, in path order.
    pub(super) fn values(&self) -> impl Iterator<Item = &V> {
        self.entries.iter().map(|(_, value)| value)
    }

    /// Every path and its value, in path order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&BStr, &V)> {
        (0..self.entries.len()).map(|at| (self.path(at).as_bstr(), &self.entries[at].1))
    }
}

impl<V: Clone> PathMap<V> {
    /// This map with `changes` made (sorted by path, each path once: a
    /// value to put, or `None` to remove), and, when `keep` is given, only
    /// the entries it keeps among those `changes` does not name.
    pub(super) fn merged(
        &self,
        changes: &[(&[u8], Option<V>)],
        keep: Option<Keep<'_>>,
    ) -> PathMap<V> {
        let mut out = PathMap::default();
        out.reserve(self.len() + changes.len(), self.bytes.len());
        let kept = |path: &[u8]| keep.is_none_or(|keep| keep(path));
        let (mut i, mut j) = (0, 0);
        loop {
            let next_old = (i < self.len()).then(|| self.path(i));
            match (next_old, changes.get(j)) {
                (None, None) => break,
                (Some(old), Some((path, _))) if old < *path => {
                    if kept(old) {
                        out.push(old, self.entries[i].1.clone());
                    }
                    i += 1;
                }
                (Some(old), None) => {
                    if kept(old) {
                        out.push(old, self.entries[i].1.clone());
                    }
                    i += 1;
                }
                (old, Some((path, value))) => {
                    if old == Some(*path) {
                        i += 1;
                    }
                    if let Some(value) = value {
                        out.push(path, value.clone());
                    }
                    j += 1;
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(paths: &[&str]) -> PathMap<usize> {
        let mut m = PathMap::default();
        for (i, p) in paths.iter().enumerate() {
            assert!(m.push(p.as_bytes(), i));
        }
        m
    }

    #[test]
    fn paths_are_held_in_order_once_and_found_exactly() {
        let mut m = map(&["a", "a.txt", "a/b", "b"]);
        assert!(!m.push(b"a/b", 9), "not after the last");
        assert!(!m.push(b"a", 9));
        assert_eq!(m.len(), 4);
        for (i, p) in ["a", "a.txt", "a/b", "b"].iter().enumerate() {
            assert_eq!(m.get(p.as_bytes()), Some(&i));
        }
        for absent in ["", "a/", "a/bc", "c", "0"] {
            assert_eq!(m.get(absent.as_bytes()), None, "{absent}");
        }
        let listed: Vec<(String, usize)> = m.iter().map(|(p, v)| (p.to_string(), *v)).collect();
        assert_eq!(listed[2], ("a/b".to_string(), 2));
        // From a hint: in order, out of order, absent, past the end.
        let mut hint = 0;
        assert_eq!(m.get_near(b"a", &mut hint), Some(&0));
        assert_eq!(hint, 1);
        assert_eq!(m.get_near(b"a.txt", &mut hint), Some(&1));
        assert_eq!(m.get_near(b"a", &mut hint), Some(&0));
        assert_eq!(hint, 1);
        assert_eq!(m.get_near(b"zz", &mut hint), None);
        assert_eq!(hint, 1);
        let mut past = 99;
        assert_eq!(m.get_near(b"b", &mut past), Some(&3));
        m.clear();
        assert!(m.is_empty() && m.get(b"a").is_none());
    }

    #[test]
    fn a_merge_puts_replaces_removes_and_keeps_what_it_is_told() {
        let m = map(&["a", "c", "e"]);
        let changes: Vec<(&[u8], Option<usize>)> = vec![
            (b"b", Some(10)),
            (b"c", Some(11)),
            (b"e", None),
            (b"f", Some(12)),
            (b"g", None),
        ];
        let all: Vec<(String, usize)> = m
            .merged(&changes, None)
            .iter()
            .map(|(p, v)| (p.to_string(), *v))
            .collect();
        let want = [("a", 0), ("b", 10), ("c", 11), ("f", 12)];
        assert_eq!(all, want.map(|(p, v)| (p.to_string(), v)).to_vec());
        // `keep` decides only for the entries the changes do not name.
        let none = |_: &[u8]| false;
        let kept: Vec<String> = m
            .merged(&changes, Some(&none))
            .iter()
            .map(|(p, _)| p.to_string())
            .collect();
        assert_eq!(kept, ["b", "c", "f"]);
    }
}
