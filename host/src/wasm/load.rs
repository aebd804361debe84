//! Finding, checking and compiling plugin files.
//!
//! A plugin is read once into memory; its sha256 is taken over those bytes,
//! and those bytes are what is compiled, so a file swapped after the check
//! changes nothing. Compiled components are cached on disk, outside any
//! workspace, under the file's digest and the engine's compatibility hash:
//! a restart does not recompile. Only files this host wrote are ever
//! deserialised (deserialising trusts the bytes completely).

use super::PluginError;
use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use wasmtime::Engine;
use wasmtime::component::Component;

/// The import through which a plugin reaches the workspace's files.
const FILESYSTEM_IMPORT_PREFIX: &str = "wasi:filesystem/";
/// The host interface (`log`, `file-diff`, `judge`, `read-files` …).
const HOST_IMPORT_PREFIX: &str = "gatehost:gate/host@";

/// Imports a plugin may have. Anything else (sockets, http, another
/// version of the host interface) is refused at load.
const GRANTED_IMPORT_PREFIXES: &[&str] = &[
    "gatehost:gate/host@0.1.",
    "gatehost:gate/types@0.1.",
    "wasi:cli/environment@0.2.",
    "wasi:cli/exit@0.2.",
    "wasi:cli/stdin@0.2.",
    "wasi:cli/stdout@0.2.",
    "wasi:cli/stderr@0.2.",
    "wasi:cli/terminal-input@0.2.",
    "wasi:cli/terminal-output@0.2.",
    "wasi:cli/terminal-stdin@0.2.",
    "wasi:cli/terminal-stdout@0.2.",
    "wasi:cli/terminal-stderr@0.2.",
    "wasi:io/",
    "wasi:filesystem/",
    "wasi:clocks/",
    "wasi:random/",
];

/// A plugin file's bytes and identity.
#[derive(Debug)]
pub struct PluginFile {
    pub name: String,
    pub path: PathBuf,
    pub bytes: Vec<u8>,
    /// sha256 of `bytes`, lower-case hex.
    pub digest: String,
}

impl PluginFile {
    pub fn read(name: &str, path: &Path) -> Result<Self, PluginError> {
        let bytes = std::fs::read(path).map_err(|e| PluginError::Unreadable {
            plugin: name.to_string(),
            message: format!("{}: {e}", path.display()),
        })?;
        let digest = hex::encode(Sha256::digest(&bytes));
        Ok(PluginFile {
            name: name.to_string(),
            path: path.to_path_buf(),
            bytes,
            digest,
        })
    }
}

/// Checks the header: a component, not a core module or something else.
pub fn check_header(file: &PluginFile) -> Result<(), PluginError> {
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
            "a core WebAssembly module, not a component: build it for wasm32-wasip2 (see docs/plugins.md)",
        )),
        (_, _, 1, 0) => Ok(()),
        _ => Err(not("an unknown WebAssembly version or layer")),
    }
}

/// Refuses a component that imports anything not granted; says which of
/// the workspace's doors it imports (a plugin that imports neither the
/// filesystem nor the host interface is given no handle on the workspace,
/// which saves opening one for every evaluation).
pub fn check_imports(
    file: &PluginFile,
    engine: &Engine,
    component: &Component,
) -> Result<Uses, PluginError> {
    let ty = component.component_type();
    let mut uses = Uses::default();
    for (name, _) in ty.imports(engine) {
        if !GRANTED_IMPORT_PREFIXES.iter().any(|p| name.starts_with(p)) {
            return Err(PluginError::ForbiddenImport {
                plugin: file.name.clone(),
                import: name.to_string(),
            });
        }
        uses.filesystem |= name.starts_with(FILESYSTEM_IMPORT_PREFIX);
        uses.host |= name.starts_with(HOST_IMPORT_PREFIX);
    }
    Ok(uses)
}

/// Which imports that reach the workspace a component has.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Uses {
    /// `wasi:filesystem` (the read-only preopen).
    pub filesystem: bool,
    /// `gatehost:gate/host` (`workspace-files`, `read-files`).
    pub host: bool,
}

/// The names of a component's imports and exports.
pub fn interface_of(engine: &Engine, component: &Component) -> (Vec<String>, Vec<String>) {
    let ty = component.component_type();
    let imports = ty.imports(engine).map(|(n, _)| n.to_string()).collect();
    let exports = ty.exports(engine).map(|(n, _)| n.to_string()).collect();
    (imports, exports)
}

/// Compiles `file`, or loads it from the on-disk cache.
pub fn compile_cached(
    engine: &Engine,
    cache_dir: Option<&Path>,
    file: &PluginFile,
) -> Result<Component, PluginError> {
    let cached = cache_dir.map(|d| {
        d.join(format!(
            "{}-{:016x}.cwasm",
            file.digest,
            engine_hash(engine)
        ))
    });
    if let Some(path) = &cached
        && path.is_file()
    {
        // SAFETY: the cache directory belongs to the host (never a
        // workspace); its files were written by `serialize` below for this
        // very engine configuration, which the file name encodes.
        match unsafe { Component::deserialize_file(engine, path) } {
            Ok(c) => return Ok(c),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "unusable cached component; recompiling");
            }
        }
    }
    let component =
        Component::from_binary(engine, &file.bytes).map_err(|e| PluginError::Invalid {
            plugin: file.name.clone(),
            message: format!("{e:#}"),
        })?;
    if let Some(path) = &cached
        && let Err(e) = write_cache(path, &component)
    {
        tracing::warn!(path = %path.display(), error = %e, "cannot cache the compiled component");
    }
    Ok(component)
}

fn write_cache(path: &Path, component: &Component) -> Result<(), Box<dyn std::error::Error>> {
    let dir = path.parent().ok_or("cache path has no directory")?;
    std::fs::create_dir_all(dir)?;
    let bytes = component.serialize()?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(&bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path)?;
    Ok(())
}

fn engine_hash(engine: &Engine) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(bytes: &[u8]) -> PluginFile {
        PluginFile {
            name: "t".into(),
            path: PathBuf::from("t.wasm"),
            bytes: bytes.to_vec(),
            digest: String::new(),
        }
    }

    #[test]
    fn headers_tell_modules_components_and_junk_apart() {
        assert!(check_header(&file(b"\0asm\x0d\0\x01\0rest")).is_ok());
        let e = check_header(&file(b"\0asm\x01\0\0\0"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("core WebAssembly module"), "{e}");
        let e = check_header(&file(b"#!/bin/sh\n")).unwrap_err().to_string();
        assert!(e.contains("not a WebAssembly file"), "{e}");
        let e = check_header(&file(b"\0as")).unwrap_err().to_string();
        assert!(e.contains("not a WebAssembly file"), "{e}");
    }
}
