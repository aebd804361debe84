//! What a plugin is granted: the imports it may have (the v0.1 host
//! interface, and the WASI interfaces the host provides, confined), and
//! which of the workspace's doors it uses. A component importing anything
//! else (sockets, http, another version of the host interface) is refused
//! at load, naming the import. It owns only that decision; it must never
//! grant by default.

use super::PluginError;
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

/// Refuses a component that imports anything not granted; says which of
/// the workspace's doors it imports (a plugin that imports neither the
/// filesystem nor the host interface is given no handle on the workspace,
/// which saves opening one for every evaluation).
pub(super) fn check_imports(
    plugin: &str,
    engine: &Engine,
    component: &Component,
) -> Result<Uses, PluginError> {
    let ty = component.component_type();
    let mut uses = Uses::default();
    for (name, _) in ty.imports(engine) {
        let Some(granted) = grant(name) else {
            return Err(PluginError::ForbiddenImport {
                plugin: plugin.to_string(),
                import: name.to_string(),
            });
        };
        uses.filesystem |= granted.filesystem;
        uses.host |= granted.host;
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

/// Whether `import` (a component import's name) is granted, and what it
/// opens.
pub(super) fn grant(import: &str) -> Option<Uses> {
    GRANTED_IMPORT_PREFIXES
        .iter()
        .any(|p| import.starts_with(p))
        .then(|| Uses {
            filesystem: import.starts_with(FILESYSTEM_IMPORT_PREFIX),
            host: import.starts_with(HOST_IMPORT_PREFIX),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_interface_and_confined_wasi_are_granted_and_nothing_else() {
        assert_eq!(
            grant("gatehost:gate/host@0.1.0"),
            Some(Uses {
                filesystem: false,
                host: true
            })
        );
        assert_eq!(
            grant("wasi:filesystem/types@0.2.3"),
            Some(Uses {
                filesystem: true,
                host: false
            })
        );
        assert_eq!(grant("wasi:cli/stdout@0.2.0"), Some(Uses::default()));
        for refused in [
            "wasi:sockets/tcp@0.2.0",
            "wasi:http/outgoing-handler@0.2.0",
            "gatehost:gate/host@0.2.0",
            "gatehost:gate/host",
            "wasi:cli/stdout@0.3.0",
            "",
        ] {
            assert_eq!(grant(refused), None, "{refused}");
        }
    }
}
