//! The stat cache kept between processes: a one-shot `gatehost hook`
//! remembers, in a file of the hook state directory (never the
//! workspace), each tracked file's stat data and blob id, so that its next
//! stop reads and hashes only the files whose stat data changed.
//!
//! It owns that file: its format (postcard, a format number, the
//! workspace's path, a BLAKE3 digest of the rest), its reading (no symlink
//! followed, a regular file of at most [`MAX_BYTES`]) and its atomic
//! replacement (a private temporary file renamed over it). It must never
//! make a change look unchanged: an entry vouches for a file only when its
//! device, inode, size, mode, mtime and ctime are all the same (a write or
//! a chmod moves the ctime, which only root can set back), only files whose
//! ctime was at least [`super::stat_cache::RACY_SECS`] old when the read began are
//! remembered, and only files whose content was then HEAD's blob. A file
//! that is missing, unreadable, not the format or whose digest fails is an
//! empty cache (everything is read again), logged, never an error.
//!
//! Its digest catches damage, not a writer: whoever can write the state
//! directory could make a changed file look unchanged (docs/security.md
//! says to keep it outside the agent's reach, as the hooks' retry counts).
//!
//! What it never reads: `.git/index`. Its stat data would do the same job,
//! but the agent writes `.git`: an index entry with the stat data of a file
//! it changed (same size, mtime set back, the new ctime copied in) and the
//! old blob id would hide the change. The state directory is the host's,
//! as the hooks' retry counts are (see `hook::state`).

use super::read::FileKind;
use super::stat_cache::{Stamp, StatCache};
use gix::ObjectId;
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The largest remembered file read (about 100 bytes per file: 2.5
/// million files).
pub const MAX_BYTES: u64 = 256 * 1024 * 1024;

/// Bumped when the encoding changes: an older file is then ignored.
const FORMAT: u32 = 1;

/// The file's layout (postcard): a [`Head`], then `count` [`Entry`]s in
/// path order, then a BLAKE3 digest of all that. Written and read a piece
/// at a time: each entry is decoded as it is put in the cache, with no
/// vector of them all in between (10 MB at 100,000 files, a page fault
/// every 4 KiB of it). (The same bytes as format 1's one struct of the
/// three fields, the entries a sequence: its length, then its items.)
#[derive(Serialize, Deserialize)]
struct Head<'a> {
    format: u32,
    workspace: &'a [u8],
    count: usize,
}

/// The fewest bytes an encoded [`Entry`] takes (every field at its
/// smallest): bounds what a count read from the file may reserve.
const MIN_ENTRY_BYTES: usize = 11;

#[derive(Serialize, Deserialize)]
struct Entry<'a> {
    path: &'a [u8],
    dev: u64,
    ino: u64,
    size: u64,
    mode: u32,
    mtime: (i64, i64),
    ctime: (i64, i64),
    executable: bool,
    id: &'a [u8],
}

/// The cache remembered for `workspace` in `file`; empty when there is
/// none or it cannot be used (logged).
pub fn load(file: &Path, workspace: &Path) -> StatCache {
    let mut cache = StatCache::default();
    match read(file, workspace, &mut cache) {
        Ok(()) => {}
        Err(Why::Absent) => {}
        Err(why) => {
            tracing::warn!(file = %file.display(), reason = %why, "the remembered stat cache is not used: every file is read");
            cache.clear();
        }
    }
    cache
}

#[derive(Debug, thiserror::Error)]
enum Why {
    #[error("absent")]
    Absent,
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("not a regular file of at most {MAX_BYTES} bytes")]
    NotRegular,
    #[error("its digest does not match (cut short or changed)")]
    Digest,
    #[error("not readable as this format: {0}")]
    Format(String),
    #[error("it is another workspace's")]
    OtherWorkspace,
    #[error("its entries end before their count")]
    Short,
}

fn read(file: &Path, workspace: &Path, cache: &mut StatCache) -> Result<(), Why> {
    use std::os::unix::ffi::OsStrExt;
    let f = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(file)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Why::Absent),
        Err(e) => return Err(e.into()),
    };
    let meta = f.metadata()?;
    if !meta.is_file() || meta.len() > MAX_BYTES {
        return Err(Why::NotRegular);
    }
    // Read a piece at a time (no buffer of the whole file: 7 MB at
    // 100,000 files, the stop's peak memory while it was held), digested
    // as it comes; entries are put in the cache before the digest is
    // checked, and [`load`] empties the cache when it then fails.
    let payload = usize::try_from(meta.len())
        .ok()
        .and_then(|len| len.checked_sub(DIGEST_BYTES))
        .ok_or(Why::Digest)?;
    let mut input = Pieces::new(f, payload);
    let (format, ours, count) = input.decode(|b| {
        let (head, after) = postcard::take_from_bytes::<Head<'_>>(b).map_err(undecodable)?;
        let ours = head.workspace == workspace.as_os_str().as_bytes();
        Ok(((head.format, ours, head.count), after))
    })?;
    if format != FORMAT {
        return Err(Why::Format(format!("format {format}")));
    }
    if !ours {
        return Err(Why::OtherWorkspace);
    }
    // Reserved for at most as many entries as the bytes can hold.
    let rest = payload.saturating_sub(input.consumed());
    cache
        .entries
        .reserve(count.min(rest / MIN_ENTRY_BYTES), rest);
    for _ in 0..count {
        input.decode(|b| {
            let (e, after) = postcard::take_from_bytes::<Entry<'_>>(b).map_err(undecodable)?;
            let id = ObjectId::try_from(e.id).map_err(|e| Why::Format(e.to_string()))?;
            let stamp = Stamp {
                dev: e.dev,
                ino: e.ino,
                size: e.size,
                mode: e.mode,
                mtime: e.mtime,
                ctime: e.ctime,
            };
            let kind = if e.executable {
                FileKind::Executable
            } else {
                FileKind::Regular
            };
            if !cache.entries.push(e.path, (stamp, kind, id)) {
                return Err(Why::Format("its paths are not in order, each once".into()));
            }
            Ok(((), after))
        })?;
    }
    if input.consumed() != payload {
        return Err(Why::Format(format!(
            "{} bytes past its entries",
            payload.saturating_sub(input.consumed())
        )));
    }
    input.check_digest()
}

/// A decoding error: [`Why::Short`] when the bytes given end within the
/// item (more may be read), else [`Why::Format`].
fn undecodable(e: postcard::Error) -> Why {
    match e {
        postcard::Error::DeserializeUnexpectedEnd => Why::Short,
        e => Why::Format(e.to_string()),
    }
}

/// The digest's length at the file's end (BLAKE3).
const DIGEST_BYTES: usize = 32;

/// The first read's size (a piece grows only for an entry longer than it).
const PIECE_BYTES: usize = 64 * 1024;

/// A remembered file read a piece at a time: its first `payload` bytes
/// decoded in order (an item never spans what is decoded and what is not
/// yet read) and digested as they are read, then its digest.
struct Pieces {
    file: std::fs::File,
    /// Bytes read and not yet decoded: `buf[start..end]`.
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// The file's offset of `buf[0]`.
    offset: usize,
    /// Bytes read from the file so far.
    read: usize,
    payload: usize,
    hasher: blake3::Hasher,
    eof: bool,
}

impl Pieces {
    fn new(file: std::fs::File, payload: usize) -> Pieces {
        Pieces {
            file,
            buf: vec![0; PIECE_BYTES.min(payload + DIGEST_BYTES).max(DIGEST_BYTES)],
            start: 0,
            end: 0,
            offset: 0,
            read: 0,
            payload,
            hasher: blake3::Hasher::new(),
            eof: false,
        }
    }

    /// The payload's bytes decoded so far.
    fn consumed(&self) -> usize {
        self.offset + self.start
    }

    /// Reads more: what is not decoded moved to the front, the buffer
    /// doubled when that is all of it. `false` at the file's end.
    fn fill(&mut self) -> Result<bool, Why> {
        if self.eof {
            return Ok(false);
        }
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.offset += self.start;
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buf.len() {
            let grown = self.buf.len().saturating_mul(2);
            if grown as u64 > MAX_BYTES {
                return Err(Why::NotRegular);
            }
            self.buf.resize(grown, 0);
        }
        let n = loop {
            match self.file.read(&mut self.buf[self.end..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            }
        };
        if n == 0 {
            self.eof = true;
            return Ok(false);
        }
        // Digested: the bytes of this read that are the payload's.
        let first = self.read;
        self.read += n;
        if first < self.payload {
            let upto = self.read.min(self.payload) - first;
            self.hasher.update(&self.buf[self.end..self.end + upto]);
        }
        self.end += n;
        if self.read as u64 > MAX_BYTES {
            return Err(Why::NotRegular);
        }
        Ok(true)
    }

    /// Decodes the next item with `f` (given the payload's bytes read and
    /// not yet decoded, it answers the item and the bytes after it), more
    /// read until it has enough.
    fn decode<T>(&mut self, mut f: impl FnMut(&[u8]) -> Result<(T, &[u8]), Why>) -> Result<T, Why> {
        loop {
            let limit = self.payload.saturating_sub(self.offset).min(self.end);
            let window = &self.buf[self.start.min(limit)..limit];
            let all_read = self.offset + limit >= self.payload;
            match f(window).map(|(item, after)| (item, after.len())) {
                Ok((item, left)) => {
                    self.start = limit - left;
                    return Ok(item);
                }
                Err(Why::Short) if !all_read && self.fill()? => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// After the payload: the file's last [`DIGEST_BYTES`] are the
    /// payload's digest, and nothing follows them.
    fn check_digest(mut self) -> Result<(), Why> {
        while self.fill()? {}
        let at = self.payload - self.offset;
        let digest = self.buf.get(at..self.end).ok_or(Why::Digest)?;
        if self.read != self.payload + DIGEST_BYTES
            || digest != self.hasher.finalize().as_bytes().as_slice()
        {
            return Err(Why::Digest);
        }
        Ok(())
    }
}

/// Writes `cache` as `file` (its directory made owner-only if missing),
/// atomically: a reader sees the old file or the new one.
pub fn save(file: &Path, workspace: &Path, cache: &StatCache) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let dir = file
        .parent()
        .ok_or_else(|| std::io::Error::other("the remembered stat cache has no directory"))?;
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    // In path order, as the cache holds them.
    let entries: Vec<Entry<'_>> = cache
        .entries
        .iter()
        .map(|(path, (s, kind, id))| Entry {
            path,
            dev: s.dev,
            ino: s.ino,
            size: s.size,
            mode: s.mode,
            mtime: s.mtime,
            ctime: s.ctime,
            executable: *kind == FileKind::Executable,
            id: id.as_slice(),
        })
        .collect();
    let head = Head {
        format: FORMAT,
        workspace: workspace.as_os_str().as_bytes(),
        count: entries.len(),
    };
    let mut bytes = postcard::to_stdvec(&head).map_err(std::io::Error::other)?;
    for entry in &entries {
        bytes = postcard::to_extend(entry, bytes).map_err(std::io::Error::other)?;
    }
    let digest = blake3::hash(&bytes);
    bytes.extend_from_slice(digest.as_bytes());
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(&bytes)?;
    tmp.persist(file).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::ChangeCaps;
    use crate::commit::test_git::git;
    use crate::commit::workspace_changes_remembered;

    /// A repository of three committed files, and a cache that takes
    /// files however recent (the tests do not wait out the racy window).
    fn setup() -> (tempfile::TempDir, StatCache) {
        let t = tempfile::tempdir().expect("tempdir");
        let ws = t.path();
        git(ws, &["init", "-q", "-b", "main"]);
        for (name, text) in [
            ("a.txt", "a\n"),
            ("b.txt", "b\n"),
            ("src/c.rs", "fn c() {}\n"),
        ] {
            let p = ws.join(name);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(p, text).expect("write");
        }
        git(ws, &["add", "-A"]);
        git(ws, &["commit", "-q", "-m", "init"]);
        let cache = StatCache::trusting_any_age();
        (t, cache)
    }

    #[test]
    fn a_remembered_cache_vouches_for_unchanged_files_and_never_hides_a_change() {
        let (t, mut cache) = setup();
        let ws = t.path();
        let caps = ChangeCaps::default();
        let (changes, changed) = workspace_changes_remembered(ws, caps, &mut cache).expect("first");
        assert!(changes.is_empty() && changed);
        assert_eq!(cache.len(), 3, "HEAD's files remembered");
        let (_, changed) = workspace_changes_remembered(ws, caps, &mut cache).expect("second");
        assert!(!changed, "all hits: nothing to save");
        // Kept across processes: saved, loaded, the same answers.
        let state = tempfile::tempdir().expect("state");
        let file = state.path().join("stat-cache/x.bin");
        save(&file, ws, &cache).expect("save");
        let mut loaded = load(&file, ws);
        assert_eq!(loaded.len(), 3);
        loaded.racy_secs = -3600;
        // The same size, the mtime set back: the ctime still moved, so the
        // change is seen (read, not taken from the cache).
        let a = ws.join("a.txt");
        let before = std::fs::metadata(&a).expect("meta");
        std::fs::write(&a, "A\n").expect("write");
        let times = std::fs::FileTimes::new().set_modified(before.modified().expect("mtime"));
        std::fs::File::options()
            .write(true)
            .open(&a)
            .expect("open")
            .set_times(times)
            .expect("set mtime back");
        let (changes, changed) =
            workspace_changes_remembered(ws, caps, &mut loaded).expect("after the change");
        let paths: Vec<String> = changes
            .iter()
            .map(|c| c.path_lossy().into_owned())
            .collect();
        assert_eq!(paths, ["a.txt"]);
        assert!(changed, "a.txt is no longer HEAD's: forgotten");
        assert_eq!(loaded.len(), 2);
        // A forged .git/index (the agent writes .git) changes nothing: it
        // is never read.
        std::fs::write(ws.join(".git/index"), b"DIRC garbage").expect("index");
        let (changes, _) =
            workspace_changes_remembered(ws, caps, &mut loaded).expect("forged index");
        assert_eq!(changes.len(), 1);
    }

    /// With the cache vouching for HEAD's files (left unlisted by the
    /// read), a deletion is still seen, an addition too, a file put back
    /// as HEAD has it is unchanged, and the cache keeps exactly HEAD's
    /// files still there.
    #[test]
    fn unlisted_unchanged_files_still_let_deletions_and_additions_through() {
        let (t, mut cache) = setup();
        let ws = t.path();
        let caps = ChangeCaps::default();
        workspace_changes_remembered(ws, caps, &mut cache).expect("fill");
        assert_eq!(cache.len(), 3);
        std::fs::remove_file(ws.join("b.txt")).expect("rm");
        std::fs::write(ws.join("src/new.rs"), "fn n() {}\n").expect("write");
        let (changes, changed) = workspace_changes_remembered(ws, caps, &mut cache).expect("rm");
        let listed: Vec<(String, crate::change::ChangeKind)> = changes
            .iter()
            .map(|c| (c.path_lossy().into_owned(), c.kind))
            .collect();
        assert_eq!(
            listed,
            [
                ("src/new.rs".to_string(), crate::change::ChangeKind::Added),
                ("b.txt".to_string(), crate::change::ChangeKind::Deleted),
            ]
        );
        assert!(changed, "b.txt forgotten");
        assert_eq!(cache.len(), 2, "a.txt and src/c.rs");
        // Nothing else changed: nothing to save, the same answer.
        let (again, changed) = workspace_changes_remembered(ws, caps, &mut cache).expect("again");
        assert_eq!(again.len(), 2);
        assert!(!changed);
        // b.txt back as HEAD has it: no change at all, and remembered.
        std::fs::write(ws.join("b.txt"), "b\n").expect("write");
        std::fs::remove_file(ws.join("src/new.rs")).expect("rm");
        let (none, changed) = workspace_changes_remembered(ws, caps, &mut cache).expect("back");
        assert!(none.is_empty(), "{none:?}");
        assert!(changed);
        assert_eq!(cache.len(), 3);
    }

    /// The read behind a remembered change set really leaves HEAD's files
    /// the cache vouches for unlisted (the test above would pass with
    /// every file listed), and a read without the cache lists them all.
    #[test]
    fn a_change_sets_read_lists_only_what_the_cache_cannot_vouch_for() {
        use crate::commit::read::{Reads, read_snapshot_with};
        let (t, mut cache) = setup();
        let ws = t.path();
        workspace_changes_remembered(ws, ChangeCaps::default(), &mut cache).expect("fill");
        std::fs::write(ws.join("a.txt"), "A\n").expect("write");
        let workspace = crate::commit::Workspace::open(ws).expect("open");
        let head = crate::commit::resolve_head(&workspace.repo).expect("head");
        let paths = vec!["a.txt".to_string(), "b.txt".to_string(), "src".to_string()];
        let tracked =
            crate::commit::tracked_entries(&workspace.repo, head.tree, &paths).expect("tracked");
        let read = |skip_unchanged| {
            let reads = Reads {
                cache: Some(&cache),
                content_cap: None,
                skip_unchanged,
                watch: None,
            };
            read_snapshot_with(&workspace, &paths, &tracked, reads).expect("read")
        };
        let skipped = read(true);
        let listed: Vec<String> = skipped.files().map(|i| i.path.to_string()).collect();
        assert_eq!(listed, ["a.txt"]);
        let mut unchanged: Vec<String> = skipped
            .unchanged
            .iter()
            .filter_map(|at| tracked.path_at(*at).map(|p| p.to_string()))
            .collect();
        unchanged.sort();
        assert_eq!(unchanged, ["b.txt", "src/c.rs"]);
        let all = read(false);
        assert_eq!(all.files().count(), 3);
        assert!(all.unchanged.is_empty());
    }

    /// An entry at its smallest takes [`MIN_ENTRY_BYTES`]; a file whose
    /// count promises more entries than it holds, or that holds bytes
    /// past them, is an empty cache (its digest right all the same).
    #[test]
    fn a_remembered_file_whose_count_is_not_its_entries_is_an_empty_cache() {
        let smallest = Entry {
            path: b"",
            dev: 0,
            ino: 0,
            size: 0,
            mode: 0,
            mtime: (0, 0),
            ctime: (0, 0),
            executable: false,
            id: b"",
        };
        assert_eq!(
            postcard::to_stdvec(&smallest).expect("encode").len(),
            MIN_ENTRY_BYTES
        );
        let (t, mut cache) = setup();
        let ws = t.path();
        workspace_changes_remembered(ws, ChangeCaps::default(), &mut cache).expect("fill");
        let state = tempfile::tempdir().expect("state");
        let file = state.path().join("c.bin");
        save(&file, ws, &cache).expect("save");
        assert_eq!(load(&file, ws).len(), 3, "as saved");
        let bytes = std::fs::read(&file).expect("read");
        let payload = &bytes[..bytes.len() - 32];
        // The same file re-encoded: its head with another count, then its
        // entries as they are.
        let workspace = ws.as_os_str().as_encoded_bytes();
        let prefix = |count: usize| {
            postcard::to_stdvec(&Head {
                format: FORMAT,
                workspace,
                count,
            })
            .expect("encode")
        };
        let entries = &payload[prefix(3).len()..];
        for (count, extra, what) in [
            (3, &b""[..], "the same"),
            (4, &b""[..], "a count past the entries"),
            (usize::MAX, &b""[..], "a count past any memory"),
            (3, &b"\0"[..], "bytes past the entries"),
        ] {
            let mut forged = prefix(count);
            forged.extend_from_slice(entries);
            forged.extend_from_slice(extra);
            let digest = blake3::hash(&forged);
            forged.extend_from_slice(digest.as_bytes());
            std::fs::write(&file, &forged).expect("write");
            let expected = if what == "the same" { 3 } else { 0 };
            assert_eq!(load(&file, ws).len(), expected, "{what}");
        }
    }

    #[test]
    fn a_remembered_file_that_is_damaged_another_workspaces_or_a_symlink_is_an_empty_cache() {
        let (t, mut cache) = setup();
        let ws = t.path();
        workspace_changes_remembered(ws, ChangeCaps::default(), &mut cache).expect("fill");
        let state = tempfile::tempdir().expect("state");
        let dir = state.path().to_path_buf();
        let file = dir.join("c.bin");
        save(&file, ws, &cache).expect("save");
        assert_eq!(load(&file, ws).len(), 3);
        assert!(
            load(&file, &ws.join("other")).is_empty(),
            "another workspace's"
        );
        assert!(load(&dir.join("absent.bin"), ws).is_empty());
        let mut bytes = std::fs::read(&file).expect("read");
        let mid = bytes.len() / 2;
        bytes[mid] ^= 1;
        let damaged = dir.join("damaged.bin");
        std::fs::write(&damaged, &bytes).expect("write");
        assert!(load(&damaged, ws).is_empty(), "its digest fails");
        std::fs::write(&damaged, &bytes[..10]).expect("write");
        assert!(load(&damaged, ws).is_empty(), "cut short");
        let link = dir.join("link.bin");
        std::os::unix::fs::symlink(&file, &link).expect("symlink");
        assert!(load(&link, ws).is_empty(), "a symlink is not followed");
    }

    /// A file of many pieces (entries across the reads' boundaries, one
    /// entry longer than a piece) loads exactly as saved; a byte changed,
    /// or the file cut, in any piece but the first is an empty cache.
    #[test]
    fn a_remembered_file_of_many_pieces_loads_as_saved_or_not_at_all() {
        let mut cache = StatCache::default();
        let long = format!("d/{}", "x".repeat(PIECE_BYTES + 100));
        let mut paths: Vec<String> = (0..5_000).map(|i| format!("src/f{i:05}.rs")).collect();
        paths.push(long);
        paths.sort();
        for (i, path) in paths.iter().enumerate() {
            let n = i as u64;
            let stamp = Stamp {
                dev: 3,
                ino: 1_000_000 + n,
                size: n * 37,
                mode: 0o100644,
                mtime: (1_700_000_000 + i as i64, (n * 7919 % 1_000_000_000) as i64),
                ctime: (1_700_000_000 + i as i64, 5),
            };
            let kind = if i % 3 == 0 {
                FileKind::Executable
            } else {
                FileKind::Regular
            };
            let id = ObjectId::from_bytes_or_panic(&[(i % 251) as u8; 20]);
            assert!(cache.entries.push(path.as_bytes(), (stamp, kind, id)));
        }
        let ws = Path::new("/ws");
        let state = tempfile::tempdir().expect("state");
        let file = state.path().join("many.bin");
        save(&file, ws, &cache).expect("save");
        let bytes = std::fs::read(&file).expect("read");
        assert!(bytes.len() > 4 * PIECE_BYTES, "{} bytes", bytes.len());
        let loaded = load(&file, ws);
        assert_eq!(loaded.entries, cache.entries, "as saved");
        for at in [PIECE_BYTES + 5, 3 * PIECE_BYTES - 1, bytes.len() - 40] {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x40;
            std::fs::write(&file, &damaged).expect("write");
            assert!(load(&file, ws).is_empty(), "a byte changed at {at}");
            std::fs::write(&file, &bytes[..at]).expect("write");
            assert!(load(&file, ws).is_empty(), "cut at {at}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        std::fs::write(&file, &longer).expect("write");
        assert!(load(&file, ws).is_empty(), "a byte after its digest");
    }
}
