//! Which `gatehost` the installed hooks (and MCP servers) run: the path
//! written into the agent CLIs' configuration.
//!
//! It owns the choice. When the `gatehost` the installing user's PATH finds
//! first is this very binary (the same file, after symlinks: device and
//! inode), the hooks run it by that PATH entry's absolute path
//! (`~/.cargo/bin/gatehost`), which a `cargo clean` or a rebuild in a
//! source tree does not remove, and which `cargo install` replaces in place.
//! Otherwise they run this binary by its own (canonical) path, and the
//! person is warned that a rebuild or `cargo clean` can break them.
//!
//! It must never write a bare `gatehost`: a hook command found through
//! PATH when the CLI runs it would run whatever that PATH finds first, and
//! the CLI's PATH is not the installer's (an agent can set it: Claude Code's
//! project settings take an `env`, Aider loads `.env` files from the
//! workspace). Relative PATH entries are never searched (they resolve
//! against the current directory).

use super::super::error::{CliError, CliResult};
use std::ffi::OsStr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The program the hooks run, and what the person must be told about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Program {
    /// An absolute path.
    pub path: PathBuf,
    /// Why the hooks do not run the `gatehost` on PATH, if they do not.
    pub warning: Option<String>,
}

/// The program for this process: its PATH and its own binary.
pub(super) fn this_program() -> CliResult<Program> {
    let exe = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .map_err(|e| CliError::new("io", format!("cannot find gatehost's own path: {e}")))?;
    Ok(choose(&exe, std::env::var_os("PATH").as_deref()))
}

/// The program for the binary `exe` (canonical), with `path_var` as PATH.
pub(super) fn choose(exe: &Path, path_var: Option<&OsStr>) -> Program {
    let rebuild = "a `cargo clean` or a rebuild that moves it breaks the hooks; \
                   put gatehost on PATH (`cargo install --path host`) and install again";
    match crate::supervise::find_on_path("gatehost", path_var) {
        Some(found) if same_file(&found, exe) => Program {
            path: std::path::absolute(&found).unwrap_or(found),
            warning: None,
        },
        Some(found) => Program {
            path: exe.to_path_buf(),
            warning: Some(format!(
                "the gatehost on PATH ({}) is not this binary: the hooks run this one by its \
                 own path, {}; {rebuild}",
                found.display(),
                exe.display()
            )),
        },
        None => Program {
            path: exe.to_path_buf(),
            warning: Some(format!(
                "PATH has no gatehost: the hooks run this binary by its own path, {}; {rebuild}",
                exe.display()
            )),
        },
    }
}

/// The same file: device and inode, through symlinks.
fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn executable(path: &Path) {
        std::fs::write(path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn a_symlink_on_path_to_this_binary_is_written_as_the_path_entry() {
        let t = tempfile::tempdir().unwrap();
        let exe = t.path().join("build/gatehost");
        std::fs::create_dir_all(exe.parent().unwrap()).unwrap();
        executable(&exe);
        let bin = t.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::os::unix::fs::symlink(&exe, bin.join("gatehost")).unwrap();
        let path = std::env::join_paths([Path::new("/nonexistent"), &bin]).unwrap();
        let p = choose(&exe, Some(&path));
        assert_eq!(p.path, bin.join("gatehost"), "not the symlink's target");
        assert_eq!(p.warning, None);
    }

    #[test]
    fn another_gatehost_first_on_path_or_none_keeps_this_binary_and_warns() {
        let t = tempfile::tempdir().unwrap();
        let exe = t.path().join("build/gatehost");
        std::fs::create_dir_all(exe.parent().unwrap()).unwrap();
        executable(&exe);
        let other = t.path().join("other");
        std::fs::create_dir_all(&other).unwrap();
        executable(&other.join("gatehost"));
        let p = choose(&exe, Some(other.as_os_str()));
        assert_eq!(p.path, exe);
        let w = p.warning.unwrap();
        assert!(
            w.contains(&other.join("gatehost").display().to_string()),
            "{w}"
        );
        assert!(w.contains("cargo clean"), "{w}");

        let p = choose(&exe, Some(OsStr::new("/nonexistent")));
        assert_eq!(p.path, exe);
        assert!(p.warning.unwrap().contains("PATH has no gatehost"));
        assert!(choose(&exe, None).warning.is_some());
    }
}
