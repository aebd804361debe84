//! Finding, checking and compiling plugin files.
//!
//! A plugin is read once into memory; its sha256 is taken over those bytes,
//! and those bytes are what is compiled, so a file swapped after the check
//! changes nothing.
//!
//! Compiled components are cached on disk, outside any workspace, under the
//! file's digest and the engine's compatibility hash: a restart does not
//! recompile. Deserialising a cached component trusts its bytes completely
//! (they are native code), so an entry is used only when it is provably the
//! host's own:
//!
//! - the cache directory must be owned by the host's effective uid, or the
//!   cache is not used at all; it is created, or made, owner-only (0700);
//! - it holds a host key ([`KEY_FILE`], [`KEY_LEN`] random bytes), trusted
//!   only as a regular file, opened without following a symlink, owned by
//!   the effective uid, with no group or other permission bits and of
//!   exactly that length; anything else is replaced by a fresh key (every
//!   entry then fails to verify and is recompiled). A directory that was
//!   writable by others gets a fresh key too;
//! - an entry is two files: `<name>` holds exactly what
//!   [`Component::serialize`] wrote, and `<name>.tag` holds [`TAG_MAGIC`]
//!   and a keyed BLAKE3 tag under that key over [`MAC_DOMAIN`], the entry's
//!   name and those bytes. Both are opened without following a symlink (a
//!   FIFO, device or directory is refused, an entry is at most
//!   [`MAX_ENTRY_BYTES`]); the entry is mapped once (read-only, private),
//!   its tag checked in constant time over that mapping, and wasmtime then
//!   maps **the same open file** (through `/proc/self/fd`), so a name
//!   renamed over after the check changes nothing. Keyed BLAKE3 is a MAC
//!   made for this; entries of the older single-file formats (`GHMAC1`,
//!   `GHB3K1`) have no tag file and are recompiled once.
//!
//! Mapping instead of reading is what makes a cache hit cheap in a one-shot
//! `gatehost check` or hook: the code is not copied into fresh memory, only
//! the pages that run are touched, and a plugin's data segments are mapped
//! copy-on-write from the page cache. The file could still be written in
//! place after its tag was checked, but only by the host's own uid (entries
//! are 0600 in a 0700 directory it owns), which can read the key and sign
//! anything anyway; gatehost itself never writes an entry in place (a new
//! entry is a temporary file renamed over the old one).
//!
//! An entry that fails any check is reported (`tracing::warn!`), compiled
//! again from the plugin's bytes and overwritten with a signed entry.

use super::PluginError;
use sha2::{Digest, Sha256};
use std::fs::{File, OpenOptions, Permissions};
use std::hash::{Hash, Hasher};
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use wasmtime::Engine;
use wasmtime::component::Component;

/// A plugin file's bytes and identity.
#[derive(Debug)]
pub struct PluginFile {
    /// The plugin as the gate named it (its name, or its path).
    pub name: String,
    /// The file it was read from.
    pub path: PathBuf,
    /// The file's contents, as read (once, then hashed and compiled).
    pub bytes: Vec<u8>,
    /// sha256 of `bytes`, lower-case hex.
    pub digest: String,
}

impl PluginFile {
    /// Reads the file: a regular file only (opened non-blocking, so a FIFO
    /// cannot hang the caller; a device or directory is refused), of at
    /// most `max_bytes` (`[wasm] max_plugin_bytes`), read once.
    pub fn read(name: &str, path: &Path, max_bytes: u64) -> Result<Self, PluginError> {
        use std::os::unix::fs::OpenOptionsExt;
        let unreadable = |message: String| PluginError::Unreadable {
            plugin: name.to_string(),
            message: format!("{}: {message}", path.display()),
        };
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
            .open(path)
            .map_err(|e| unreadable(e.to_string()))?;
        let meta = file.metadata().map_err(|e| unreadable(e.to_string()))?;
        if !meta.is_file() {
            return Err(unreadable(
                "not a regular file (a FIFO, socket, device or directory is never read)".into(),
            ));
        }
        let refuse = || too_large(name, path, max_bytes);
        if meta.len() > max_bytes {
            return Err(refuse());
        }
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        file.take(max_bytes.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|e| unreadable(e.to_string()))?;
        if bytes.len() as u64 > max_bytes {
            return Err(refuse());
        }
        let digest = hex::encode(Sha256::digest(&bytes));
        Ok(PluginFile {
            name: name.to_string(),
            path: path.to_path_buf(),
            bytes,
            digest,
        })
    }
}

/// The refusal of a plugin file larger than `max_bytes`
/// (`[wasm] max_plugin_bytes`), however it would have been loaded.
pub(super) fn too_large(name: &str, path: &Path, max_bytes: u64) -> PluginError {
    PluginError::Unreadable {
        plugin: name.to_string(),
        message: format!(
            "{}: larger than [wasm] max_plugin_bytes ({max_bytes} bytes)",
            path.display()
        ),
    }
}

/// Checks the header: a component, not a core module or something else.
pub(super) fn check_header(file: &PluginFile) -> Result<(), PluginError> {
    let b = &file.bytes;
    let not = |message: &str| PluginError::NotAComponent {
        plugin: file.name.clone(),
        message: message.to_string(),
    };
    if b.len() < 8 || &b[0..4] != b"\0asm" {
        return Err(not("not a WebAssembly file"));
    }
    match (b[4], b[5], b[6], b[7]) {
        (1, 0, 0, 0) => Err(not(
            "a core WebAssembly module, not a component: build it for wasm32-wasip2 (`gatehost plugin new` starts a crate that does)",
        )),
        (_, _, 1, 0) => Ok(()),
        _ => Err(not("an unknown WebAssembly version or layer")),
    }
}

/// The names of a component's imports and exports.
pub(super) fn interface_of(engine: &Engine, component: &Component) -> (Vec<String>, Vec<String>) {
    let ty = component.component_type();
    let imports = ty.imports(engine).map(|(n, _)| n.to_string()).collect();
    let exports = ty.exports(engine).map(|(n, _)| n.to_string()).collect();
    (imports, exports)
}

/// The host key's file name inside the cache directory.
const KEY_FILE: &str = "host-key";
/// The host key's length in bytes.
pub(crate) const KEY_LEN: usize = 32;
/// What an entry's tag file starts with; the tag follows, and nothing else.
const TAG_MAGIC: &[u8] = b"GHB3K2";
/// The suffix of an entry's tag file.
const TAG_SUFFIX: &str = ".tag";
/// The length of an entry's keyed BLAKE3 tag.
const TAG_LEN: usize = 32;
/// Keeps the entry MAC apart from any other use of the key.
const MAC_DOMAIN: &[u8] = b"gatehost-cwasm-v3";
/// The largest cache entry read; a larger one is refused and recompiled.
const MAX_ENTRY_BYTES: u64 = 512 << 20;

/// How [`compile_cached_reporting`] came by a component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CacheUse {
    /// Deserialised from an entry this host signed.
    Hit,
    /// Compiled: there was no entry, or no usable cache directory.
    Compiled,
    /// Compiled because the entry was refused; the reason.
    Recompiled(String),
}

/// Compiles `file`, or loads it from the on-disk cache in `cache_dir`;
/// and whether the cache was used.
#[cfg(test)]
pub(crate) fn compile_cached_reporting(
    engine: &Engine,
    cache_dir: Option<&Path>,
    file: &PluginFile,
) -> Result<(Component, CacheUse), PluginError> {
    let cache = cache_dir.and_then(Cache::open_reporting);
    compile_with(engine, cache.as_ref(), file)
}

/// Compiles `file`, or loads it from `cache`; and whether the cache was
/// used.
pub(crate) fn compile_with(
    engine: &Engine,
    cache: Option<&Cache>,
    file: &PluginFile,
) -> Result<(Component, CacheUse), PluginError> {
    let name = entry_name(engine, &file.digest);
    let mut used = CacheUse::Compiled;
    if let Some(cache) = cache {
        match cache.load(engine, &name) {
            Ok(Some(component)) => return Ok((component, CacheUse::Hit)),
            Ok(None) => {}
            Err(reason) => {
                cache.report_refused(&name, &reason);
                used = CacheUse::Recompiled(reason);
            }
        }
    }
    let component =
        Component::from_binary(engine, &file.bytes).map_err(|e| PluginError::Invalid {
            plugin: file.name.clone(),
            message: format!("{e:#}"),
        })?;
    if let Some(cache) = cache
        && let Err(e) = cache.store(&name, &component)
    {
        tracing::warn!(path = %cache.dir.join(&name).display(), error = %e, "cannot cache the compiled component");
    }
    Ok((component, used))
}

/// The component compiled from the plugin whose SHA-256 is `digest`, if
/// `cache` holds a good entry for it; `None` otherwise (a refused entry is
/// reported, and left for [`compile_with`] to replace). Nothing is
/// compiled: the caller has no plugin bytes.
pub(crate) fn cached_only(engine: &Engine, cache: &Cache, digest: &str) -> Option<Component> {
    let name = entry_name(engine, digest);
    match cache.load(engine, &name) {
        Ok(found) => found,
        Err(reason) => {
            cache.report_refused(&name, &reason);
            None
        }
    }
}

/// The entry's file name: the plugin's digest and the engine's
/// compatibility hash.
fn entry_name(engine: &Engine, digest: &str) -> String {
    format!("{digest}-{:016x}.cwasm", engine_hash(engine))
}

/// The host's own compiled-component cache: a checked directory and the
/// key that signs its entries (and the digest records of
/// [`super::digests`]).
pub(crate) struct Cache {
    dir: PathBuf,
    key: [u8; KEY_LEN],
}

impl Cache {
    /// [`Cache::open`], or `None` with the reason logged.
    pub(crate) fn open_reporting(dir: &Path) -> Option<Cache> {
        match Cache::open(dir) {
            Ok(cache) => Some(cache),
            Err(reason) => {
                tracing::warn!(dir = %dir.display(), %reason, "not using the compiled-component cache");
                None
            }
        }
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    pub(crate) fn key(&self) -> &[u8; KEY_LEN] {
        &self.key
    }

    fn report_refused(&self, name: &str, reason: &str) {
        tracing::warn!(
            path = %self.dir.join(name).display(),
            %reason,
            "refusing a cached component; recompiling"
        );
    }

    /// Creates or checks `dir` (owned by the effective uid, made 0700) and
    /// reads or makes its key. An error says why the cache is not used.
    fn open(dir: &Path) -> Result<Self, String> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("cannot create it: {e}"))?;
        let meta = std::fs::metadata(dir).map_err(|e| format!("cannot inspect it: {e}"))?;
        if !meta.is_dir() {
            return Err("not a directory".into());
        }
        let euid = rustix::process::geteuid().as_raw();
        if meta.uid() != euid {
            return Err(format!(
                "owned by uid {}, not by this host's uid {euid}",
                meta.uid()
            ));
        }
        let mode = meta.mode() & 0o7777;
        if mode & 0o077 != 0 {
            std::fs::set_permissions(dir, Permissions::from_mode(0o700)).map_err(|e| {
                format!("open to other users (mode {mode:o}) and cannot chmod it: {e}")
            })?;
            tracing::warn!(dir = %dir.display(), mode = %format!("{mode:o}"), "the compiled-component cache was open to other users; made it 0700");
        }
        let distrust = (mode & 0o022 != 0)
            .then(|| format!("the cache directory was writable by others (mode {mode:o})"));
        let key = host_key(dir, distrust)?;
        Ok(Cache {
            dir: dir.to_path_buf(),
            key,
        })
    }

    /// The component in entry `name`: `None` when there is no entry, an
    /// error (the reason) when there is one that is not this host's or is
    /// unusable.
    fn load(&self, engine: &Engine, name: &str) -> Result<Option<Component>, String> {
        let Some(entry) = open_entry(&self.dir.join(name))? else {
            return Ok(None);
        };
        let tag = read_tag(&self.dir.join(format!("{name}{TAG_SUFFIX}")))?;
        self.load_verified(engine, name, entry, &tag).map(Some)
    }

    /// The component in the open `entry` if `tag` verifies over its bytes.
    fn load_verified(
        &self,
        engine: &Engine,
        name: &str,
        entry: File,
        tag: &[u8; TAG_LEN],
    ) -> Result<Component, String> {
        // SAFETY: a mapped file that is truncated or written while mapped
        // changes (or faults) under the reader. The entry is a regular file
        // (checked in `open_entry`), mode 0600 in a 0700 directory owned by
        // the host's uid (checked in `Cache::open`), and gatehost never
        // writes an entry in place; a process of that uid could break this
        // mapping, but it can read the key and sign anything anyway.
        let mapped = unsafe { memmap2::MmapOptions::new().populate().map(&entry) }
            .map_err(|e| format!("cannot map it: {e}"))?;
        // blake3::Hash compares in constant time.
        if self.tag(name, &mapped) != blake3::Hash::from_bytes(*tag) {
            return Err("not signed by this host: the tag does not verify".into());
        }
        let usable = |e: wasmtime::Error| format!("signed by this host but unusable: {e:#}");
        // wasmtime maps the entry itself, through this same open file: not
        // the name, which may have been renamed over since it was opened.
        let by_fd = PathBuf::from(format!("/proc/self/fd/{}", entry.as_raw_fd()));
        // (A stat, not a second open: wasmtime opens it once, below.)
        if by_fd.exists() {
            // SAFETY: deserialising runs these bytes as native code. They
            // are the bytes of the open file whose tag was just checked
            // under the host key, which only the host's uid can read
            // (checked in `read_key`): bytes `store` serialised for this
            // entry name, whose engine hash matches this engine's
            // configuration. See above for writes in place.
            return unsafe { Component::deserialize_file(engine, &by_fd) }.map_err(usable);
        }
        // No /proc: the checked bytes are copied instead of mapped.
        // SAFETY: as above; these are the mapped bytes just checked.
        unsafe { Component::deserialize(engine, &mapped[..]) }.map_err(usable)
    }

    /// The tag of entry `name` holding `serialized`.
    fn tag(&self, name: &str, serialized: &[u8]) -> blake3::Hash {
        blake3::Hasher::new_keyed(&self.key)
            .update(MAC_DOMAIN)
            .update(&(name.len() as u64).to_le_bytes())
            .update(name.as_bytes())
            .update(serialized)
            .finalize()
    }

    /// Writes `component` as entry `name` and its tag file, each a
    /// temporary file (mode 0600) renamed over the old one, the entry
    /// first: a reader never sees a tag without its entry's new bytes
    /// verify, it sees a mismatch and recompiles.
    fn store(&self, name: &str, component: &Component) -> Result<(), Box<dyn std::error::Error>> {
        let serialized = component.serialize()?;
        let tag = self.tag(name, &serialized);
        self.write_file(name, &[&serialized])?;
        self.write_file(&format!("{name}{TAG_SUFFIX}"), &[TAG_MAGIC, tag.as_bytes()])?;
        Ok(())
    }

    /// Writes `parts` as the file `name` in the cache directory: a
    /// temporary file (mode 0600), fsynced, renamed over the old one.
    fn write_file(&self, name: &str, parts: &[&[u8]]) -> std::io::Result<()> {
        let mut tmp = tempfile::Builder::new()
            .prefix(".entry-")
            .permissions(Permissions::from_mode(0o600))
            .tempfile_in(&self.dir)?;
        for part in parts {
            tmp.write_all(part)?;
        }
        tmp.as_file().sync_all()?;
        tmp.persist(self.dir.join(name))?;
        Ok(())
    }
}

/// Opens `path` for reading without following a symlink (`ELOOP`) and
/// without blocking on a FIFO.
fn open_no_follow(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags((rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32)
        .open(path)
}

/// Why opening `path` failed, in words.
fn open_failure(e: &std::io::Error) -> String {
    if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
        "it is a symbolic link".into()
    } else {
        format!("cannot open it: {e}")
    }
}

/// The entry at `path`, open: `None` when there is none, an error (the
/// reason) when it is a symlink, not a regular file or too large.
fn open_entry(path: &Path) -> Result<Option<File>, String> {
    let file = match open_no_follow(path) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(open_failure(&e)),
    };
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot inspect it: {e}"))?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if meta.len() > MAX_ENTRY_BYTES {
        return Err(format!("larger than {MAX_ENTRY_BYTES} bytes"));
    }
    Ok(Some(file))
}

/// The tag in the tag file at `path` (a regular file, not followed, of
/// exactly [`TAG_MAGIC`] and a tag); an error (the reason) otherwise,
/// a missing tag file included.
fn read_tag(path: &Path) -> Result<[u8; TAG_LEN], String> {
    let unsigned = |why: String| format!("not signed by this host: {why}");
    let file = match open_no_follow(path) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return Err(unsigned("it has no tag file".into()));
        }
        Err(e) => return Err(unsigned(format!("its tag file: {}", open_failure(&e)))),
    };
    let meta = file
        .metadata()
        .map_err(|e| unsigned(format!("cannot inspect its tag file: {e}")))?;
    let expected = (TAG_MAGIC.len() + TAG_LEN) as u64;
    if !meta.is_file() || meta.len() != expected {
        return Err(unsigned(format!(
            "its tag file is not a regular file of {expected} bytes"
        )));
    }
    let mut bytes = Vec::with_capacity(expected as usize);
    file.take(expected)
        .read_to_end(&mut bytes)
        .map_err(|e| unsigned(format!("cannot read its tag file: {e}")))?;
    bytes
        .strip_prefix(TAG_MAGIC)
        .and_then(|tag| <[u8; TAG_LEN]>::try_from(tag).ok())
        .ok_or_else(|| unsigned("its tag file has no valid header".into()))
}

/// The host key in `dir`: the trusted key file's contents, or a fresh key
/// that replaces a missing, untrusted (reported) or `distrust`ed one.
fn host_key(dir: &Path, distrust: Option<String>) -> Result<[u8; KEY_LEN], String> {
    let path = dir.join(KEY_FILE);
    let reason = match distrust {
        Some(reason) => reason,
        None => match read_key(&path) {
            Ok(Some(key)) => return Ok(key),
            Ok(None) => return new_key(dir, &path),
            Err(reason) => reason,
        },
    };
    tracing::warn!(path = %path.display(), %reason, "host key of the compiled-component cache not trusted; replacing it (cached components will be recompiled)");
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => return Err(format!("cannot remove the untrusted host key: {e}")),
    }
    new_key(dir, &path)
}

/// The key in the file at `path`: `None` when there is none, an error (the
/// reason) when it is not a regular file owned by the effective uid, with
/// no group/other bits, of exactly [`KEY_LEN`] bytes.
fn read_key(path: &Path) -> Result<Option<[u8; KEY_LEN]>, String> {
    let mut file = match open_no_follow(path) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(open_failure(&e)),
    };
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot inspect it: {e}"))?;
    let euid = rustix::process::geteuid().as_raw();
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if meta.uid() != euid {
        return Err(format!("owned by uid {}, not {euid}", meta.uid()));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(format!(
            "readable or writable by others (mode {:o})",
            meta.mode() & 0o7777
        ));
    }
    if meta.len() != KEY_LEN as u64 {
        return Err(format!("{} bytes long, not {KEY_LEN}", meta.len()));
    }
    let mut key = [0; KEY_LEN];
    file.read_exact(&mut key)
        .map_err(|e| format!("cannot read it: {e}"))?;
    Ok(Some(key))
}

/// Makes a fresh random key at `path` (written and fsynced under a
/// temporary name, mode 0600, then linked in only if `path` is still free);
/// if another host got there first, its key is read instead.
fn new_key(dir: &Path, path: &Path) -> Result<[u8; KEY_LEN], String> {
    let mut key = [0; KEY_LEN];
    File::open("/dev/urandom")
        .and_then(|mut r| r.read_exact(&mut key))
        .map_err(|e| format!("cannot read random bytes for a host key: {e}"))?;
    let write = || -> std::io::Result<tempfile::NamedTempFile> {
        let mut tmp = tempfile::Builder::new()
            .prefix(".key-")
            .permissions(Permissions::from_mode(0o600))
            .tempfile_in(dir)?;
        tmp.write_all(&key)?;
        tmp.as_file().sync_all()?;
        Ok(tmp)
    };
    let tmp = write().map_err(|e| format!("cannot write a host key: {e}"))?;
    match tmp.persist_noclobber(path) {
        Ok(_) => Ok(key),
        Err(e) if e.error.kind() == ErrorKind::AlreadyExists => match read_key(path) {
            Ok(Some(theirs)) => Ok(theirs),
            Ok(None) => Err("the host key vanished while being made".into()),
            Err(reason) => Err(format!("a concurrent host key is not trusted: {reason}")),
        },
        Err(e) => Err(format!("cannot install a host key: {}", e.error)),
    }
}

fn engine_hash(engine: &Engine) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests;
