//! Reading the workspace: the commit paths' content, read once, without
//! following a symlink out, refusing FIFOs and devices, checking each
//! inode after opening it.
//!
//! It owns how workspace files are read for a commit; it must never write
//! anything.

use super::repo::Workspace;
use super::stat_cache::{Stamp, StatCache};
use super::tracked::Tracked;
use super::walk::{read_path, walk_pool};
use super::{CommitError, FINGERPRINT_DOMAIN};
use cap_std::fs::{Dir, Metadata, MetadataExt};
use gix::ObjectId;
use gix::bstr::{BStr, BString, ByteSlice};
use gix::objs::tree::EntryKind;
use sha2::{Digest, Sha256};
use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::ffi::OsStringExt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FileKind {
    Regular,
    Executable,
    Symlink,
}

impl FileKind {
    pub(super) fn entry_kind(self) -> EntryKind {
        match self {
            FileKind::Regular => EntryKind::Blob,
            FileKind::Executable => EntryKind::BlobExecutable,
            FileKind::Symlink => EntryKind::Link,
        }
    }
}

pub(super) struct Item {
    pub(super) path: BString,
    pub(super) kind: FileKind,
    /// The content; empty when `known` (read from a stat cache instead).
    pub(super) data: Vec<u8>,
    /// The blob id, when a stat cache vouched for the file unchanged.
    pub(super) known: Option<ObjectId>,
    /// How the file looked when read (regular files only).
    pub(super) stamp: Option<Stamp>,
    /// HEAD's entry at its path (from the tracked entries the read was
    /// given), looked up once, as the file was read.
    pub(super) head: Option<(EntryKind, ObjectId)>,
    /// Set when the file was larger than the read's content cap: never
    /// read into memory (`data` empty), its size, and its blob id when it
    /// is tracked (hashed as it streamed, to know whether it changed).
    pub(super) oversized: Option<Oversized>,
}

/// A file left out of a capped read (see [`Reads::content_cap`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct Oversized {
    pub(super) bytes: u64,
    pub(super) cap: u64,
    pub(super) id: Option<ObjectId>,
}

/// How a snapshot's files are read.
#[derive(Clone, Copy, Default)]
pub(super) struct Reads<'a> {
    /// Files unchanged since it was filled are not read.
    pub(super) cache: Option<&'a StatCache>,
    /// A regular file larger than this is not read into memory (a change
    /// set's per-file cap; never set for a commit's snapshot, which must
    /// write the blob).
    pub(super) content_cap: Option<u64>,
    /// A file the cache vouches for whose blob and mode are HEAD's is not
    /// listed, only its path kept (`Snapshot::unchanged`): a change set
    /// needs only what changed, and a snapshot's tree is HEAD's edited
    /// where the workspace differs (see `tree::write_tree_with`). Never
    /// for paths that overlap (the read turns it off).
    pub(super) skip_unchanged: bool,
    /// Each directory walked, and each on the way to a commit path, is
    /// watched before it is listed (a snapshot's, see `watch`; or the
    /// watch kept between turns, see `standing`).
    pub(super) watch: Option<&'a dyn Watcher>,
}

/// What a read tells the watch that follows it: each directory before it
/// is listed, and each regular file with more than one link (writable
/// through a directory no watch sees).
pub(super) trait Watcher: Sync {
    /// `dir` (by its descriptor, repository-relative `rel`) is about to be
    /// listed: any change to its entries matters.
    fn walked(&self, dir: &Dir, rel: &BStr);
    /// `dir` is on the way to the commit path `next` names in it.
    fn on_the_way(&self, dir: &Dir, rel: &BStr, next: &str);
    /// The regular file `rel` has `links` links (more than one).
    fn linked(&self, rel: &BStr, links: u64);
}

/// What a walk found: the files listed, and the paths of the files left
/// unlisted because they are HEAD's (see [`Reads::skip_unchanged`]).
#[derive(Default)]
pub(super) struct Found {
    pub(super) items: Vec<Item>,
    pub(super) unchanged: Vec<usize>,
    /// Where the stat cache's next entry is likely (see
    /// [`StatCache::hit_near`]): one walker's files come in path order.
    hint: usize,
    /// Where `HEAD`'s next entry is likely (see [`Tracked::get_near_at`]).
    pub(super) head_hint: usize,
    /// A path's buffer the walk reuses for each file (see `walk_entry`):
    /// a file the cache vouches for costs no allocation.
    pub(super) scratch: BString,
}

impl Found {
    /// Takes the regular file `name` of `dir`: unlisted when `reads` skips
    /// unchanged files and the cache vouches for HEAD's blob and mode,
    /// else read (see [`Item::regular`]).
    pub(super) fn regular(
        &mut self,
        dir: &Dir,
        name: &OsStr,
        meta: &Metadata,
        rel: &BStr,
        reads: Reads<'_>,
        head: Option<(usize, (EntryKind, ObjectId))>,
    ) -> Result<(), CommitError> {
        if let Some(watch) = reads.watch
            && meta.nlink() > 1
        {
            // Writable through another directory, which is not watched.
            watch.linked(rel, meta.nlink());
        }
        if reads.skip_unchanged
            && let (Some(cache), Some((at, (head_kind, head_id)))) = (reads.cache, head)
            && cache
                .hit_near(rel, &Stamp::of(meta), &mut self.hint)
                .is_some_and(|(kind, id)| id == head_id && kind.entry_kind() == head_kind)
        {
            // Its index in `HEAD`'s entries, not its path: 100,000
            // unchanged files were as many allocations kept to the end.
            self.unchanged.push(at);
            return Ok(());
        }
        let head = head.map(|(_, entry)| entry);
        self.items
            .push(Item::regular(dir, name, meta, rel.to_owned(), reads, head)?);
        Ok(())
    }
}

impl Item {
    /// A symbolic link, its target as its content.
    pub(super) fn symlink(
        path: BString,
        target: Vec<u8>,
        head: Option<(EntryKind, ObjectId)>,
    ) -> Item {
        Item {
            path,
            kind: FileKind::Symlink,
            data: target,
            known: None,
            stamp: None,
            head,
            oversized: None,
        }
    }

    /// The blob id of its content.
    pub(super) fn oid(&self, hash: gix::hash::Kind) -> Result<ObjectId, CommitError> {
        if let Some(o) = &self.oversized {
            return o.id.ok_or_else(|| {
                CommitError::InvalidPrepared(format!(
                    "{}: a file over the cap has no blob id",
                    self.path
                ))
            });
        }
        match self.known {
            Some(id) => Ok(id),
            None => gix::objs::compute_hash(hash, gix::objs::Kind::Blob, &self.data)
                .map_err(|e| CommitError::InvalidPrepared(format!("hashing: {e}"))),
        }
    }

    /// Reads a regular file, unless the stat cache vouches for it
    /// unchanged, or it is over the read's content cap (then only a
    /// tracked one, `head` being HEAD's entry at its path, is read,
    /// streaming, for its blob id).
    pub(super) fn regular(
        dir: &Dir,
        name: &OsStr,
        meta: &Metadata,
        rel: BString,
        reads: Reads<'_>,
        head: Option<(EntryKind, ObjectId)>,
    ) -> Result<Item, CommitError> {
        let stamp = Stamp::of(meta);
        if let Some((kind, id)) = reads.cache.and_then(|c| c.hit(rel.as_bstr(), &stamp)) {
            return Ok(Item {
                path: rel,
                kind,
                data: Vec::new(),
                known: Some(id),
                stamp: Some(stamp),
                head,
                oversized: None,
            });
        }
        if let Some(cap) = reads.content_cap
            && meta.len() > cap
        {
            let (kind, id) = if head.is_some() {
                hash_file(dir, name, meta, rel.as_bstr())?
            } else {
                (FileKind::of(meta), None)
            };
            return Ok(Item {
                path: rel,
                kind,
                data: Vec::new(),
                known: None,
                stamp: Some(stamp),
                head,
                oversized: Some(Oversized {
                    bytes: meta.len(),
                    cap,
                    id,
                }),
            });
        }
        let (kind, data) = read_file(dir, name, meta, rel.as_bstr())?;
        Ok(Item {
            path: rel,
            kind,
            data,
            known: None,
            stamp: Some(stamp),
            head,
            oversized: None,
        })
    }
}

/// What was read for each given path: `None` when it is absent.
pub(super) struct Snapshot {
    pub(super) sections: Vec<(String, Option<Vec<Item>>)>,
    /// The files left unlisted as HEAD's (only when read with
    /// [`Reads::skip_unchanged`]), each once.
    pub(super) unchanged: Vec<usize>,
}

impl Snapshot {
    pub(super) fn digest(&self) -> String {
        let mut h = Sha256::new();
        let field = |h: &mut Sha256, bytes: &[u8]| {
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        h.update(FINGERPRINT_DOMAIN);
        for (path, section) in &self.sections {
            h.update(b"P");
            field(&mut h, path.as_bytes());
            match section {
                None => h.update(b"A"),
                Some(items) => {
                    h.update(b"D");
                    h.update((items.len() as u64).to_le_bytes());
                    for item in items {
                        h.update(b"F");
                        field(&mut h, &item.path);
                        let mode: &[u8] = match item.kind {
                            FileKind::Regular => b"100644",
                            FileKind::Executable => b"100755",
                            FileKind::Symlink => b"120000",
                        };
                        h.update(mode);
                        field(&mut h, &item.data);
                    }
                }
            }
        }
        hex::encode(h.finalize())
    }

    /// All files, each path once (given paths may overlap).
    pub(super) fn files(&self) -> impl Iterator<Item = &Item> {
        // One section holds each path once: no need to remember them.
        let single = self.sections.len() <= 1;
        let mut seen: std::collections::HashSet<&[u8]> = std::collections::HashSet::new();
        self.sections
            .iter()
            .filter_map(|(_, s)| s.as_ref())
            .flatten()
            .filter(move |item| single || seen.insert(item.path.as_slice()))
    }
}

pub(super) fn io_err(path: &BStr) -> impl Fn(std::io::Error) -> CommitError + '_ {
    move |source| CommitError::Io {
        path: path.to_str_lossy().into_owned(),
        source,
    }
}

pub(super) fn is_dot_git(name: &[u8]) -> bool {
    name.eq_ignore_ascii_case(b".git")
}

pub(super) fn read_snapshot(
    ws: &Workspace,
    paths: &[String],
    tracked: &Tracked,
) -> Result<Snapshot, CommitError> {
    read_snapshot_cached(ws, paths, tracked, None)
}

/// [`read_snapshot`], files unchanged since `cache` was filled not read.
pub(super) fn read_snapshot_cached(
    ws: &Workspace,
    paths: &[String],
    tracked: &Tracked,
    cache: Option<&StatCache>,
) -> Result<Snapshot, CommitError> {
    read_snapshot_with(
        ws,
        paths,
        tracked,
        Reads {
            cache,
            content_cap: None,
            skip_unchanged: false,
            watch: None,
        },
    )
}

/// [`read_snapshot`], read as `reads` says.
pub(super) fn read_snapshot_with(
    ws: &Workspace,
    paths: &[String],
    tracked: &Tracked,
    reads: Reads<'_>,
) -> Result<Snapshot, CommitError> {
    let mut reads = reads;
    // Overlapping paths would list a file twice: then each is listed.
    let nested = |a: &String, b: &String| {
        a == b || b.starts_with(&format!("{a}/")) || a.starts_with(&format!("{b}/"))
    };
    if paths
        .iter()
        .enumerate()
        .any(|(i, a)| paths[i + 1..].iter().any(|b| nested(a, b)))
    {
        reads.skip_unchanged = false;
    }
    let (root, common) = (&ws.root, &ws.common);
    let read_all = || -> Result<Snapshot, CommitError> {
        let mut sections = Vec::with_capacity(paths.len());
        let mut unchanged = Vec::new();
        for path in paths {
            let section = read_path(root, common, path, tracked, reads)?.map(|found| {
                unchanged.extend(found.unchanged);
                found.items
            });
            sections.push((path.clone(), section));
        }
        Ok(Snapshot {
            sections,
            unchanged,
        })
    };
    match walk_pool() {
        Some(pool) => pool.install(read_all),
        None => read_all(),
    }
}

/// Reads `name` in `dir` if it is a regular file (symlinks are not followed).
pub(super) fn read_regular_if_present(
    dir: &Dir,
    name: &str,
) -> Result<Option<Vec<u8>>, CommitError> {
    match dir.symlink_metadata(name) {
        Ok(m) if m.is_file() => {
            let (_, data) = read_file(dir, OsStr::new(name), &m, name.as_bytes().as_bstr())?;
            Ok(Some(data))
        }
        Ok(_) => Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err(name.as_bytes().as_bstr())(e)),
    }
}

/// The largest file read from a workspace (into a change set, a snapshot
/// or a commit). Past it the read is refused before anything is
/// allocated: a sparse 3 GiB untracked file took the daemon to 4.1 GiB.
pub(super) const MAX_FILE_BYTES: u64 = 128 * 1024 * 1024;

/// Opens `name` in `dir`, checks it is the same inode that `meta` (from lstat)
/// described, and reads it whole: at most [`MAX_FILE_BYTES`], whatever
/// size it claims or grows to while it is read.
pub(super) fn read_file(
    dir: &Dir,
    name: &OsStr,
    meta: &Metadata,
    rel: &BStr,
) -> Result<(FileKind, Vec<u8>), CommitError> {
    let mut file = dir.open(name).map_err(io_err(rel))?;
    let opened = file.metadata().map_err(io_err(rel))?;
    if !opened.is_file() || opened.dev() != meta.dev() || opened.ino() != meta.ino() {
        return Err(CommitError::ChangedWhileReading {
            path: rel.to_str_lossy().into_owned(),
        });
    }
    let too_large = |bytes: u64| CommitError::FileTooLarge {
        path: rel.to_str_lossy().into_owned(),
        bytes,
        max: MAX_FILE_BYTES,
    };
    if opened.len() > MAX_FILE_BYTES {
        return Err(too_large(opened.len()));
    }
    let mut data = Vec::with_capacity(usize::try_from(opened.len()).unwrap_or(0));
    (&mut file)
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut data)
        .map_err(io_err(rel))?;
    if data.len() as u64 > MAX_FILE_BYTES {
        // It grew while it was read.
        return Err(too_large(data.len() as u64));
    }
    Ok((FileKind::of(&opened), data))
}

/// Opens `name` in `dir` as [`read_file`] does and hashes it as a blob as
/// it streams (a bounded buffer, whatever its size): its kind and blob id.
fn hash_file(
    dir: &Dir,
    name: &OsStr,
    meta: &Metadata,
    rel: &BStr,
) -> Result<(FileKind, Option<ObjectId>), CommitError> {
    let file = dir.open(name).map_err(io_err(rel))?;
    let opened = file.metadata().map_err(io_err(rel))?;
    if !opened.is_file() || opened.dev() != meta.dev() || opened.ino() != meta.ino() {
        return Err(CommitError::ChangedWhileReading {
            path: rel.to_str_lossy().into_owned(),
        });
    }
    let len = opened.len();
    let mut stream = std::io::BufReader::with_capacity(1 << 16, file.take(len));
    let id = gix::objs::compute_stream_hash(
        gix::hash::Kind::Sha1,
        gix::objs::Kind::Blob,
        &mut stream,
        len,
        &mut gix::progress::Discard,
        &std::sync::atomic::AtomicBool::new(false),
    )
    .map_err(|e| CommitError::InvalidPrepared(format!("hashing {rel}: {e}")))?;
    Ok((FileKind::of(&opened), Some(id)))
}

impl FileKind {
    /// A regular file's kind by its mode (executable by its owner's x bit).
    fn of(meta: &Metadata) -> FileKind {
        if meta.mode() & 0o100 != 0 {
            FileKind::Executable
        } else {
            FileKind::Regular
        }
    }
}

pub(super) fn read_symlink(dir: &Dir, name: &OsStr, rel: &BStr) -> Result<Vec<u8>, CommitError> {
    let target = dir.read_link_contents(name).map_err(io_err(rel))?;
    Ok(target.into_os_string().into_vec())
}
