//! Environment variables that make common programs run code of the
//! setter's choosing: `GIT_CONFIG_*` (any `core.fsmonitor`, `core.pager`,
//! alias …), `GIT_EXTERNAL_DIFF`, `LD_PRELOAD`, `BASH_ENV`, `PYTHONPATH`,
//! `NODE_OPTIONS`, `RUSTC_WRAPPER` and the like.
//!
//! An allowlist entry's `env = [...]` lets a gate the agent attached set
//! the names it lists; listing one of these gives the agent the program's
//! code execution under the entry's grants. That is the operator's call
//! (a test rig may need `PYTHONPATH`), so the load only warns, naming the
//! entry and the variable. This module only recognises names; it decides
//! nothing and is not a complete list (no list can be: programs read
//! variables of their own), only the well-known ones.

/// Names matched exactly.
const EXACT: &[&str] = &[
    "BASH_ENV",
    "ENV",
    "SHELL",
    "SHELLOPTS",
    "PROMPT_COMMAND",
    "PS4",
    "IFS",
    "EDITOR",
    "VISUAL",
    "PAGER",
    "MANPAGER",
    "BROWSER",
    "GIT_EXTERNAL_DIFF",
    "GIT_EXEC_PATH",
    "GIT_PAGER",
    "GIT_EDITOR",
    "GIT_SEQUENCE_EDITOR",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "GIT_PROXY_COMMAND",
    "GIT_TEMPLATE_DIR",
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_COMMON_DIR",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "PYTHONSTARTUP",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONUSERBASE",
    "PYTHONBREAKPOINT",
    "NODE_OPTIONS",
    "NODE_PATH",
    "NODE_REPL_EXTERNAL_MODULE",
    "PERL5OPT",
    "PERL5LIB",
    "PERLLIB",
    "PERL5DB",
    "RUBYOPT",
    "RUBYLIB",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "CLASSPATH",
    "RUSTC",
    "RUSTC_WRAPPER",
    "RUSTC_WORKSPACE_WRAPPER",
    "RUSTDOC",
    "RUSTFLAGS",
    "RUSTDOCFLAGS",
    "CARGO_HOME",
    "CARGO_ENCODED_RUSTFLAGS",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "CC",
    "CXX",
    "LD",
    "AR",
    "CPP",
    "MAKEFLAGS",
    "MAKEFILES",
    "GCONV_PATH",
    "TERMINFO",
    "HOME",
    "XDG_CONFIG_HOME",
    "PATH",
];

/// Prefixes: any name starting with one of these.
const PREFIXES: &[&str] = &[
    "GIT_CONFIG",
    "GIT_SSH",
    "GIT_TRACE",
    "LD_",
    "DYLD_",
    "BASH_FUNC_",
    "CARGO_BUILD_",
    "CARGO_TARGET_",
    "CARGO_REGISTRIES_",
    "NPM_CONFIG_",
    "PIP_",
    "GATEHOST_",
];

/// Whether setting `name` is known to let its setter run code through
/// some common program (or redirect what it reads as configuration).
pub fn runs_code(name: &str) -> bool {
    EXACT.contains(&name) || PREFIXES.iter().any(|p| name.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_well_known_ones_are_recognised() {
        for n in [
            "GIT_CONFIG_COUNT",
            "GIT_CONFIG_KEY_0",
            "GIT_CONFIG_VALUE_0",
            "GIT_CONFIG_PARAMETERS",
            "GIT_CONFIG_GLOBAL",
            "GIT_EXTERNAL_DIFF",
            "GIT_EXEC_PATH",
            "GIT_SSH",
            "GIT_SSH_COMMAND",
            "GIT_PAGER",
            "GIT_EDITOR",
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "BASH_ENV",
            "ENV",
            "PYTHONSTARTUP",
            "PYTHONPATH",
            "NODE_OPTIONS",
            "PERL5OPT",
            "RUSTC_WRAPPER",
            "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER",
        ] {
            assert!(runs_code(n), "{n}");
        }
        for n in [
            "RUST_LOG",
            "RUST_BACKTRACE",
            "NO_COLOR",
            "TZ",
            "CI",
            "ENVIRONMENT",
        ] {
            assert!(!runs_code(n), "{n}");
        }
    }
}
