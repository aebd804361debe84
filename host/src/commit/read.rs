//! Reading the workspace: the commit paths' content, read once, without
//! following a symlink out, refusing FIFOs and devices, checking each
//! inode after opening it.
//!
//! It owns how workspace files are read for a commit; it must never write
//! anything.

use super::*;

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
}

/// What a walk found: the files listed, and the paths of the files left
/// unlisted because they are HEAD's (see [`Reads::skip_unchanged`]).
#[derive(Default)]
pub(super) struct Found {
    pub(super) items: Vec<Item>,
    pub(super) unchanged: Vec<BString>,
    /// Where the stat cache's next entry is likely (see
    /// [`StatCache::hit_near`]): one walker's files come in path order.
    hint: usize,
    /// Where `HEAD`'s next entry is likely (see [`Tracked::get_near`]).
    head_hint: usize,
}

impl Found {
    /// Takes the regular file `name` of `dir`: unlisted when `reads` skips
    /// unchanged files and the cache vouches for HEAD's blob and mode,
    /// else read (see [`Item::regular`]).
    fn regular(
        &mut self,
        dir: &Dir,
        name: &OsStr,
        meta: &Metadata,
        rel: BString,
        reads: Reads<'_>,
        head: Option<(EntryKind, ObjectId)>,
    ) -> Result<(), CommitError> {
        if reads.skip_unchanged
            && let (Some(cache), Some((head_kind, head_id))) = (reads.cache, head)
            && cache
                .hit_near(rel.as_bstr(), &Stamp::of(meta), &mut self.hint)
                .is_some_and(|(kind, id)| id == head_id && kind.entry_kind() == head_kind)
        {
            self.unchanged.push(rel);
            return Ok(());
        }
        self.items
            .push(Item::regular(dir, name, meta, rel, reads, head)?);
        Ok(())
    }
}

impl Item {
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
    pub(super) unchanged: Vec<BString>,
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

/// The threads the workspace is walked on: rayon's, with stacks deep
/// enough for [`MAX_WALK_DEPTH`] levels of the walk's recursion (a
/// thread's default 2 MiB were not, in a debug build, for 256). Made
/// once; where it cannot be, the walk runs on rayon's global pool.
fn walk_pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .thread_name(|i| format!("gatehost-walk-{i}"))
            .stack_size(WALK_STACK_BYTES)
            .build()
            .map_err(|e| warn!(error = %e, "cannot start the workspace walk's threads"))
            .ok()
    })
    .as_ref()
}

/// See [`walk_pool`]: address space, touched only as deep as a walk goes.
const WALK_STACK_BYTES: usize = 64 * 1024 * 1024;

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
pub const MAX_FILE_BYTES: u64 = 128 * 1024 * 1024;

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

pub(super) fn open_subdir(
    dir: &Dir,
    name: &OsStr,
    meta: &Metadata,
    rel: &BStr,
) -> Result<Dir, CommitError> {
    let sub = dir.open_dir(name).map_err(io_err(rel))?;
    let opened = sub.dir_metadata().map_err(io_err(rel))?;
    if opened.dev() != meta.dev() || opened.ino() != meta.ino() {
        return Err(CommitError::ChangedWhileReading {
            path: rel.to_str_lossy().into_owned(),
        });
    }
    Ok(sub)
}

/// Reads one given path: `None` when absent.
pub(super) fn read_path(
    root: &Dir,
    common: &Dir,
    path: &str,
    tracked: &Tracked,
    reads: Reads<'_>,
) -> Result<Option<Found>, CommitError> {
    let components: Vec<&str> = path.split('/').collect();
    let Some((last, parents)) = components.split_last() else {
        return Err(CommitPathError::Empty.into());
    };
    let mut excludes = Excludes::new(common)?;
    excludes.push_dir(root, b"".as_bstr())?;
    let mut dir = root.try_clone().map_err(io_err(b".".as_bstr()))?;
    let mut rel = BString::default();
    // Whether a directory on the way is ignored: then, as for git, so is
    // everything below it but what HEAD tracks.
    let mut ignored = false;
    for component in parents {
        if !rel.is_empty() {
            rel.push(b'/');
        }
        rel.extend_from_slice(component.as_bytes());
        ignored = ignored || excludes.is_ignored(rel.as_bstr(), true);
        let meta = match dir.symlink_metadata(component) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(rel.as_bstr())(e)),
        };
        if meta.is_symlink() {
            return Err(CommitError::PathBeyondSymlink {
                path: path.to_owned(),
                symlink: rel.to_str_lossy().into_owned(),
            });
        }
        if !meta.is_dir() {
            // A file where a directory would be: the path does not exist.
            return Ok(None);
        }
        dir = open_subdir(&dir, OsStr::new(component), &meta, rel.as_bstr())?;
        excludes.push_dir(&dir, rel.as_bstr())?;
    }
    let rel = BString::from(path);
    let name = OsStr::new(last);
    let meta = match dir.symlink_metadata(name) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(rel.as_bstr())(e)),
    };
    let mut items = Found::default();
    if meta.is_symlink() {
        let data = read_symlink(&dir, name, rel.as_bstr())?;
        let head = tracked.get(&rel).copied();
        items.items.push(Item {
            path: rel,
            kind: FileKind::Symlink,
            data,
            known: None,
            stamp: None,
            head,
            oversized: None,
        });
    } else if meta.is_file() {
        let head = tracked.get(&rel).copied();
        items.regular(&dir, name, &meta, rel, reads, head)?;
    } else if meta.is_dir() {
        if matches!(tracked.get(&rel), Some((EntryKind::Commit, _))) {
            return Ok(Some(items));
        }
        let sub = open_subdir(&dir, name, &meta, rel.as_bstr())?;
        if sub.symlink_metadata(".git").is_ok() {
            debug!(path, "skipping nested repository");
            return Ok(Some(items));
        }
        let ignored = ignored || excludes.is_ignored(rel.as_bstr(), true);
        walk_dir(
            &sub,
            rel,
            ignored,
            &mut excludes,
            tracked,
            reads,
            &mut items,
        )?;
    } else {
        return Err(CommitError::UnsupportedFileType {
            path: path.to_owned(),
        });
    }
    Ok(Some(items))
}

/// How many names of a directory one task of the walk takes: one each
/// cost an allocation and a task per file.
const WALK_CHUNK: usize = 16;

/// How deep the walk goes into the workspace's directories. The walk
/// recurses (frames per level, on the walk's threads): a chain of 3,000
/// nested directories, which the agent can make in a second, overflowed
/// a 2 MiB stack and aborted the host, a hook's crash the agent's CLI
/// takes for "no objection". Past it the read is refused (a gate error,
/// fail closed).
pub const MAX_WALK_DEPTH: usize = 512;

/// Recursively collects the files of `dir` (repo-relative `rel`), sorted by path.
/// Below an ignored directory only files tracked in HEAD are taken.
pub(super) fn walk_dir(
    dir: &Dir,
    rel: BString,
    ignored_parent: bool,
    excludes: &mut Excludes,
    tracked: &Tracked,
    reads: Reads<'_>,
    items: &mut Found,
) -> Result<(), CommitError> {
    use rayon::prelude::*;
    if rel.iter().filter(|b| **b == b'/').count() >= MAX_WALK_DEPTH {
        let mut shown = rel.to_str_lossy().into_owned();
        shown.truncate(shown.floor_char_boundary(200));
        return Err(CommitError::TooDeep {
            path: shown,
            max: MAX_WALK_DEPTH,
        });
    }
    let pushed = excludes.push_dir(dir, rel.as_bstr())?;
    let mut names = Vec::new();
    for entry in dir.entries().map_err(io_err(rel.as_bstr()))? {
        let entry = entry.map_err(io_err(rel.as_bstr()))?;
        names.push(entry.file_name());
    }
    names.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    // Names on rayon's pool a few at a time (a directory with its own
    // copy of the ignore rules), the results put back in name order.
    let excludes_here: &Excludes = excludes;
    let parts: Vec<Result<Found, CommitError>> = names
        .par_chunks(WALK_CHUNK)
        .map(|chunk| {
            let mut out = Found::default();
            for name in chunk {
                walk_entry(
                    dir,
                    &rel,
                    name,
                    ignored_parent,
                    excludes_here,
                    tracked,
                    reads,
                    &mut out,
                )?;
            }
            Ok(out)
        })
        .collect();
    if pushed {
        excludes.pop();
    }
    for part in parts {
        let part = part?;
        items.items.extend(part.items);
        items.unchanged.extend(part.unchanged);
    }
    Ok(())
}

/// One entry of a directory being walked (see [`walk_dir`]).
#[allow(clippy::too_many_arguments)]
pub(super) fn walk_entry(
    dir: &Dir,
    rel: &BString,
    name: &std::ffi::OsString,
    ignored_parent: bool,
    excludes: &Excludes,
    tracked: &Tracked,
    reads: Reads<'_>,
    items: &mut Found,
) -> Result<(), CommitError> {
    if is_dot_git(name.as_bytes()) {
        return Ok(());
    }
    // Sized once (a clone then a push reallocated, for every file).
    let mut child = BString::from(Vec::with_capacity(rel.len() + 1 + name.len()));
    child.extend_from_slice(rel);
    child.push(b'/');
    child.extend_from_slice(name.as_bytes());
    let meta = match dir.symlink_metadata(name) {
        Ok(m) => m,
        // Vanished since listing: it is simply not there.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err(child.as_bstr())(e)),
    };
    let head = tracked.get_near(&child, &mut items.head_hint);
    if meta.is_dir() {
        if matches!(head, Some((EntryKind::Commit, _))) {
            return Ok(());
        }
        let ignored = ignored_parent || excludes.is_ignored(child.as_bstr(), true);
        let prefix = {
            let mut p = child.clone();
            p.push(b'/');
            p
        };
        let has_tracked = tracked.has_under(&prefix);
        if ignored && !has_tracked {
            return Ok(());
        }
        let sub = open_subdir(dir, name, &meta, child.as_bstr())?;
        if sub.symlink_metadata(".git").is_ok() {
            debug!(path = %child, "skipping nested repository");
            return Ok(());
        }
        let mut own = excludes.clone();
        return walk_dir(&sub, child, ignored, &mut own, tracked, reads, items);
    }
    // A tracked file is taken, ignored or not (its rules are not matched).
    if head.is_none() && (ignored_parent || excludes.is_ignored(child.as_bstr(), false)) {
        return Ok(());
    }
    if meta.is_symlink() {
        let data = read_symlink(dir, name, child.as_bstr())?;
        items.items.push(Item {
            path: child,
            kind: FileKind::Symlink,
            data,
            known: None,
            stamp: None,
            head,
            oversized: None,
        });
    } else if meta.is_file() {
        items.regular(dir, name, &meta, child, reads, head)?;
    } else {
        // Sockets, FIFOs, devices: never opened, never committed (git skips them too).
        warn!(path = %child, "skipping a file that is neither regular, directory nor symlink");
    }
    Ok(())
}
