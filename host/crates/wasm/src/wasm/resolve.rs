//! Resolving a plugin a gate names: by name, first in the plugin
//! directories (an operator's own build wins), then among the plugins
//! carried in the binary (`carried`); remembered, with the file's
//! identity, so that a warm evaluation does no path walk. Or by path. Its
//! digest is checked against the gate's pin (a mismatch never reveals the
//! file's digest), a carried plugin's too; the compiled plugin reused
//! while the file's identity is unchanged (a carried plugin's bytes never
//! change). It owns where a plugin's bytes come from; it must never load a
//! file whose identity changed without reading it again, nor a plugin
//! larger than `[wasm] max_plugin_bytes` (checked on the identity's size
//! before any remembered digest is trusted, and on a carried plugin's
//! length).

use super::carried::{self, Carried};
use super::{LoadedPlugin, PluginError, PluginFile, WasmHost};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where a named plugin was found.
#[derive(Debug, Clone)]
pub struct NamedPlugin {
    source: Source,
    /// Whether this came from memory (and must be checked at load).
    remembered: bool,
}

#[derive(Debug, Clone)]
enum Source {
    /// `<dir>/<name>.wasm` in a plugin directory.
    File {
        path: PathBuf,
        /// `path` with every symlink resolved (for the "inside the
        /// workspace" check).
        canonical: PathBuf,
        identity: Option<FileIdentity>,
    },
    /// Carried in the binary.
    Carried(&'static Carried),
}

impl NamedPlugin {
    /// Whether the plugin's file lies under `root` (symlinks resolved): a
    /// carried plugin never does.
    pub fn inside(&self, root: &Path) -> bool {
        match &self.source {
            Source::File { canonical, .. } => canonical.starts_with(root),
            Source::Carried(_) => false,
        }
    }

    /// Where the plugin is, for messages.
    pub fn describe(&self) -> String {
        match &self.source {
            Source::File { path, .. } => path.display().to_string(),
            Source::Carried(c) => format!("the carried {}", c.name),
        }
    }
}

/// Where [`WasmHost::find_named`] found a plugin.
#[derive(Debug, Clone)]
pub enum Located {
    /// A file in a plugin directory, at this path.
    File(PathBuf),
    /// A plugin carried in the binary.
    Carried(&'static Carried),
}

impl WasmHost {
    /// Loads the plugin at `path`, checking its digest against `pinned`
    /// when given. An unchanged file (same identity as when it was last
    /// read) is served from memory without reading or hashing it again.
    pub fn load_path(
        &self,
        name: &str,
        path: &Path,
        pinned: Option<&str>,
    ) -> Result<Arc<LoadedPlugin>, PluginError> {
        self.load_path_identified(name, path, pinned).0
    }

    /// `load_path`, and the identity the file had (taken before reading).
    fn load_path_identified(
        &self,
        name: &str,
        path: &Path,
        pinned: Option<&str>,
    ) -> (Result<Arc<LoadedPlugin>, PluginError>, Option<FileIdentity>) {
        let identity = FileIdentity::of(path);
        let load = || -> Result<Arc<LoadedPlugin>, PluginError> {
            // The size limit holds however the plugin would be loaded: a
            // digest another run remembered (read under a larger limit)
            // is no reason to run a file this host would not read.
            if let Some(id) = &identity
                && id.size() > self.config.max_plugin_bytes
            {
                return Err(super::load::too_large(
                    name,
                    path,
                    self.config.max_plugin_bytes,
                ));
            }
            let known = identity.and_then(|id| {
                let by_path = self.by_path.lock().unwrap_or_else(|p| p.into_inner());
                by_path
                    .get(path)
                    .filter(|(cached, _)| *cached == id)
                    .map(|(_, p)| p.clone())
            });
            let Some(plugin) = known else {
                let remember = |plugin: &Arc<LoadedPlugin>| {
                    if let Some(id) = identity {
                        self.by_path
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .insert(path.to_path_buf(), (id, plugin.clone()));
                    }
                };
                // Another process read this file, unchanged since: its
                // digest is known, and the cache may hold its component.
                if let Some(id) = &identity
                    && let Some(digest) = self.remembered_digest(path, id)
                {
                    check_pin(name, pinned, &digest)?;
                    if let Some(plugin) = self.load_known(name, &digest, id.size())? {
                        remember(&plugin);
                        return Ok(plugin);
                    }
                }
                let file = PluginFile::read(name, path, self.config.max_plugin_bytes)?;
                check_pin(name, pinned, &file.digest)?;
                let digest = file.digest.clone();
                let plugin = self.load(file)?;
                // Record the identity seen *before* reading: if the file
                // changed meanwhile, the next run reads it again.
                remember(&plugin);
                if let Some(id) = &identity
                    && let Some(cache) = self.cache()
                {
                    super::digests::DigestRecords::new(cache).put(path, id, &digest);
                }
                return Ok(plugin);
            };
            check_pin(name, pinned, &plugin.digest)?;
            Ok(plugin)
        };
        (load(), identity)
    }

    /// The digest another run recorded for the file at `path` when it had
    /// `identity`, if the cache holds such a record.
    fn remembered_digest(&self, path: &std::path::Path, identity: &FileIdentity) -> Option<String> {
        let cache = self.cache()?;
        super::digests::DigestRecords::new(cache).get(path, identity)
    }

    /// `find_named`, remembered: the plugin's path, its canonical form and
    /// the identity its file had when it was found. A remembered entry is
    /// returned without touching the disk; `load_named` checks it.
    pub fn find_named_cached(&self, name: &str) -> Result<NamedPlugin, PluginError> {
        let cached = self
            .named
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned();
        if let Some(named) = cached {
            return Ok(named);
        }
        let source = match self.find_named(name)? {
            Located::File(path) => {
                let identity = FileIdentity::of(&path);
                let canonical =
                    std::fs::canonicalize(&path).map_err(|e| PluginError::Unreadable {
                        plugin: name.to_string(),
                        message: format!("{}: {e}", path.display()),
                    })?;
                Source::File {
                    path,
                    canonical,
                    identity,
                }
            }
            Located::Carried(c) => Source::Carried(c),
        };
        let named = NamedPlugin {
            source,
            remembered: true,
        };
        self.named
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.to_string(), named.clone());
        Ok(NamedPlugin {
            remembered: false,
            ..named
        })
    }

    /// Forgets where a named plugin was found (its file changed or went).
    pub fn forget_named(&self, name: &str) {
        self.named
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(name);
    }

    /// Loads a plugin found by `find_named_cached`. When the file no longer
    /// has the identity it had when it was found (replaced, re-pointed,
    /// removed), returns `Ok(None)`: the caller forgets the entry and finds
    /// the plugin again, so that no decision rests on a stale path.
    pub fn load_named(
        &self,
        name: &str,
        named: &NamedPlugin,
        pinned: Option<&str>,
    ) -> Result<Option<Arc<LoadedPlugin>>, PluginError> {
        let (path, identity) = match &named.source {
            Source::File { path, identity, .. } => (path, identity),
            Source::Carried(c) => return self.load_carried(name, c, pinned).map(Some),
        };
        let (plugin, seen) = self.load_path_identified(name, path, pinned);
        if named.remembered && seen != *identity {
            return Ok(None);
        }
        plugin.map(Some)
    }

    /// Loads a carried plugin: its pin checked against the digest taken at
    /// build time, then from memory, the compile cache, or compiled from
    /// the binary's bytes.
    pub fn load_carried(
        &self,
        name: &str,
        carried: &'static Carried,
        pinned: Option<&str>,
    ) -> Result<Arc<LoadedPlugin>, PluginError> {
        let size = carried.bytes.len() as u64;
        if size > self.config.max_plugin_bytes {
            return Err(PluginError::Unreadable {
                plugin: name.to_string(),
                message: format!(
                    "the carried {} is larger than [wasm] max_plugin_bytes ({} bytes)",
                    carried.name, self.config.max_plugin_bytes
                ),
            });
        }
        check_pin(name, pinned, carried.sha256)?;
        if let Some(plugin) = self.load_known(name, carried.sha256, size)? {
            return Ok(plugin);
        }
        self.load(PluginFile {
            name: name.to_string(),
            path: PathBuf::from(format!("(carried) {}.wasm", carried.name)),
            bytes: carried.bytes.to_vec(),
            digest: carried.sha256.to_string(),
        })
    }

    /// Where a named plugin is: `<dir>/<name>.wasm` (or `<name>` with `_`
    /// for `-`) in the first plugin directory that has it, else the
    /// plugin of that name carried in the binary.
    pub fn find_named(&self, name: &str) -> Result<Located, PluginError> {
        let valid = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if valid {
            for dir in &self.config.plugin_dirs {
                for file in [
                    format!("{name}.wasm"),
                    format!("{}.wasm", name.replace('-', "_")),
                ] {
                    let p = dir.join(file);
                    if p.is_file() {
                        return Ok(Located::File(p));
                    }
                }
            }
            if let Some(c) = carried::find(name) {
                return Ok(Located::Carried(c));
            }
        }
        Err(PluginError::NotFound {
            plugin: name.to_string(),
            dirs: if self.config.plugin_dirs.is_empty() {
                "none configured: [wasm] plugin_dirs".to_string()
            } else {
                self.config
                    .plugin_dirs
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            },
            carried: carried::summary(),
        })
    }
}

fn check_pin(name: &str, pinned: Option<&str>, digest: &str) -> Result<(), PluginError> {
    match pinned {
        Some(expected) if !expected.eq_ignore_ascii_case(digest) => {
            Err(PluginError::DigestMismatch {
                plugin: name.to_string(),
                expected: expected.to_ascii_lowercase(),
            })
        }
        _ => Ok(()),
    }
}

/// What identifies a file's content without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileIdentity {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl FileIdentity {
    /// The length of [`FileIdentity::to_bytes`].
    pub(super) const BYTES: usize = 8 * 3 + 16 * 2;

    /// The identity as fixed-width little-endian fields.
    pub(super) fn to_bytes(self) -> [u8; Self::BYTES] {
        let mut out = [0u8; Self::BYTES];
        out[0..8].copy_from_slice(&self.dev.to_le_bytes());
        out[8..16].copy_from_slice(&self.ino.to_le_bytes());
        out[16..24].copy_from_slice(&self.size.to_le_bytes());
        out[24..40].copy_from_slice(&self.mtime_ns.to_le_bytes());
        out[40..56].copy_from_slice(&self.ctime_ns.to_le_bytes());
        out
    }

    /// When the file last changed (its inode included), in nanoseconds
    /// since the epoch.
    pub(super) fn ctime_ns(&self) -> i128 {
        self.ctime_ns
    }

    /// The file's size in bytes.
    pub(super) fn size(&self) -> u64 {
        self.size
    }

    pub(super) fn of(path: &std::path::Path) -> Option<Self> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path).ok()?;
        Some(FileIdentity {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime_ns: m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128,
            ctime_ns: m.ctime() as i128 * 1_000_000_000 + m.ctime_nsec() as i128,
        })
    }
}

#[cfg(test)]
mod tests;
