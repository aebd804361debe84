//! Plugin digests remembered across processes, by file identity.
//!
//! Pinning and the compiled-component cache both need a plugin's SHA-256,
//! and a one-shot process (`gatehost check`, a standalone hook) would
//! otherwise read and hash the whole file on every run: 1.4 ms for the
//! 1.5 MB `forbid-patterns`, more than the rest of loading it from the
//! cache. So the cache also keeps, per plugin path, the digest read there
//! and the file's identity at the time (device, inode, size, mtime,
//! ctime), tagged under the cache's host key; a file whose identity is
//! unchanged is not read again (as `gatehost serve` already does in
//! memory, and as git's index does).
//!
//! Owns the record files (`<cache>/digests/<BLAKE3 of the path>`). It must
//! never:
//!
//! - trust a record whose tag does not verify, that is not a regular file
//!   of the exact size (opened without following a symlink), or whose
//!   identity differs from the file's now;
//! - record a file changed less than [`SETTLE`] ago: a change within the
//!   file system's timestamp granularity could keep the same ctime (git's
//!   "racy" entries), and no one but root (or whoever sets the clock) can
//!   give a file an older ctime than its last change had.
//!
//! A stale record could only ever name a digest that was once read at that
//! path; what runs is the cache entry compiled from exactly those bytes
//! (checked against the gate's pin), never unhashed bytes.

use super::FileIdentity;
use super::load::{Cache, KEY_LEN};
use std::fs::{OpenOptions, Permissions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What a record starts with; the tag and the payload follow.
const MAGIC: &[u8] = b"GHPD1";
/// Keeps the record MAC apart from any other use of the key.
const DOMAIN: &[u8] = b"gatehost-plugin-digest-v1";
const TAG_LEN: usize = 32;
/// The payload: the identity, then the 32-byte SHA-256.
const PAYLOAD_LEN: usize = FileIdentity::BYTES + 32;
const RECORD_LEN: usize = MAGIC.len() + TAG_LEN + PAYLOAD_LEN;
/// How long after its last change a file's digest may be remembered.
pub(super) const SETTLE: Duration = Duration::from_secs(2);
/// The records' directory inside the cache directory.
const DIR: &str = "digests";

/// The digest records of one cache.
pub(crate) struct DigestRecords<'a> {
    cache: &'a Cache,
}

impl<'a> DigestRecords<'a> {
    pub(crate) fn new(cache: &'a Cache) -> Self {
        DigestRecords { cache }
    }

    /// The digest (lower-case hex) recorded for the file at `path` when it
    /// had `identity`, if a valid record says so.
    pub(crate) fn get(&self, path: &Path, identity: &FileIdentity) -> Option<String> {
        let mut file = OpenOptions::new()
            .read(true)
            .custom_flags(
                (rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32,
            )
            .open(self.record_path(path))
            .ok()?;
        let meta = file.metadata().ok()?;
        if !meta.is_file() || meta.len() != RECORD_LEN as u64 {
            return None;
        }
        let mut record = [0u8; RECORD_LEN];
        file.read_exact(&mut record).ok()?;
        let rest = record.strip_prefix(MAGIC)?;
        let (tag, payload) = rest.split_at(TAG_LEN);
        let tag: [u8; TAG_LEN] = tag.try_into().ok()?;
        // blake3::Hash compares in constant time.
        if self.tag(path, payload) != blake3::Hash::from_bytes(tag) {
            tracing::debug!(path = %path.display(), "a plugin digest record does not verify; reading the plugin");
            return None;
        }
        let (recorded, digest) = payload.split_at(FileIdentity::BYTES);
        (recorded == identity.to_bytes()).then(|| hex::encode(digest))
    }

    /// Records `digest` for the file at `path`, which had `identity` before
    /// it was read. Returns whether it was recorded: not when the file
    /// changed less than [`SETTLE`] ago, nor when the record cannot be
    /// written (logged; the next run reads the file again).
    pub(crate) fn put(&self, path: &Path, identity: &FileIdentity, digest: &str) -> bool {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i128);
        self.put_at(path, identity, digest, now)
    }

    /// [`DigestRecords::put`] at `now` (nanoseconds since the epoch).
    fn put_at(&self, path: &Path, identity: &FileIdentity, digest: &str, now: i128) -> bool {
        let Ok(raw) = hex::decode(digest) else {
            return false;
        };
        if now - identity.ctime_ns() < SETTLE.as_nanos() as i128 {
            return false;
        }
        let mut payload = identity.to_bytes().to_vec();
        payload.extend_from_slice(&raw);
        if payload.len() != PAYLOAD_LEN {
            return false;
        }
        let tag = self.tag(path, &payload);
        let write = || -> std::io::Result<()> {
            let dir = self.cache.dir().join(DIR);
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)?;
            let mut tmp = tempfile::Builder::new()
                .prefix(".record-")
                .permissions(Permissions::from_mode(0o600))
                .tempfile_in(&dir)?;
            tmp.write_all(MAGIC)?;
            tmp.write_all(tag.as_bytes())?;
            tmp.write_all(&payload)?;
            tmp.persist(self.record_path(path))?;
            Ok(())
        };
        match write() {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot record a plugin's digest");
                false
            }
        }
    }

    /// The record file for `path`: named by a hash of the path, never by
    /// the path itself.
    fn record_path(&self, path: &Path) -> PathBuf {
        let name = blake3::hash(path.as_os_str().as_encoded_bytes()).to_hex();
        self.cache.dir().join(DIR).join(&name[..32])
    }

    /// The tag over `path` and `payload`.
    fn tag(&self, path: &Path, payload: &[u8]) -> blake3::Hash {
        let key: &[u8; KEY_LEN] = self.cache.key();
        let path = path.as_os_str().as_encoded_bytes();
        blake3::Hasher::new_keyed(key)
            .update(DOMAIN)
            .update(&(path.len() as u64).to_le_bytes())
            .update(path)
            .update(payload)
            .finalize()
    }
}

#[cfg(test)]
mod tests;
