//! The shell-gate allowlist: which programs a gate may run, and with which
//! arguments.
//!
//! Default-deny, exact programs: a bare name is looked up on the host PATH
//! once, at load; an absolute path is taken as written. Each entry also
//! carries an argument rule, applied to gates the agent attached (the
//! agent chooses their arguments, and arguments are code: `git -c
//! alias.x='!cmd' x`, `cargo --config …`):
//! - a bare entry (`"true"`) admits no arguments from the agent;
//! - a table entry may list `subcommands` (the first argument must be one
//!   of them) and `deny` options (refused anywhere, as `--opt`, `--opt=…`
//!   or, for a short option, `-Ovalue`); every other argument must not be
//!   a path outside the workspace (absolute, `~`, or with a `..`
//!   component);
//! - `free_args = true` admits any arguments (the operator's choice).
//!
//! Variables are code too (`GIT_CONFIG_COUNT`/`KEY_0`/`VALUE_0` give `git
//! status` any `core.fsmonitor`): a gate the agent attached may set (its
//! `env` object) only the names its entry lists in `env = [...]`, exact
//! names, none by default. Listing a name known to run code
//! ([`super::code_env`]) is warned about at load.
//!
//! Gates the operator wrote (`gatehost check`, attached with the operator
//! token) may pass any arguments to an allowlisted program and set any
//! variable gatehost does not own. This module decides only; it runs
//! nothing.

use crate::supervise::find_on_path;
use std::path::{Component, Path, PathBuf};

/// Who wrote a gate: its arguments are trusted as far as its author is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Trust {
    /// Attached with the agent token (or unknown): argument rules apply.
    #[default]
    Agent,
    /// The operator's own gate file or the operator token.
    Operator,
}

/// What an entry lets an agent's gate pass as arguments.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ArgRule {
    /// The first argument must be one of these (`None`: no subcommand rule).
    pub subcommands: Option<Vec<String>>,
    /// Options refused anywhere in the arguments.
    pub deny: Vec<String>,
    /// Any argument goes.
    pub free: bool,
    /// Table entries check arguments; a bare entry admits none.
    pub bare: bool,
}

/// One allowlist entry: as written, the program it resolved to, and its
/// rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowEntry {
    pub spelled: String,
    /// `None` when a bare name was not found on the host PATH at load.
    pub program: Option<PathBuf>,
    pub args: ArgRule,
    /// The gate may open TCP connections (denied by the sandbox otherwise).
    pub network: bool,
    /// Variables a gate the agent attached may set (exact names).
    pub env: Vec<String>,
    /// Its place in `[shell] allow` (for messages: `shell.allow[i]`).
    pub index: usize,
}

/// Why a gate's command was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllowError {
    #[error("command '{0}' is not in the allowlist")]
    NotAllowed(String),
    #[error("command '{0}' is in the allowlist but was not found on the host PATH")]
    NotFound(String),
    #[error("command '{command}': argument '{arg}' is refused: {why}")]
    Argument {
        command: String,
        arg: String,
        why: String,
    },
    #[error(
        "command '{0}': the allowlist admits it without arguments for agent gates \
         (the operator may give its entry subcommands or free_args)"
    )]
    NoArguments(String),
    #[error(
        "command '{command}': a gate the agent attached may not set env '{name}': \
         the allowlist entry shell.allow[{index}] (program \"{spelled}\") in {file} \
         does not list it; the operator may add env = [\"{name}\"] to that entry{risk}"
    )]
    Env {
        command: String,
        name: String,
        index: usize,
        spelled: String,
        file: String,
        /// Empty, or a warning that the name makes programs run code.
        risk: &'static str,
    },
}

/// An entry as the configuration gives it, before resolution.
#[derive(Debug, Clone)]
pub struct EntrySpec {
    pub program: String,
    pub args: ArgRule,
    pub network: bool,
    /// Variables a gate the agent attached may set.
    pub env: Vec<String>,
}

/// The shell-gate allowlist.
#[derive(Debug, Clone, Default)]
pub struct Allowlist {
    entries: Vec<AllowEntry>,
    /// The configuration file it was read from, as shown in messages.
    source: Option<String>,
}

impl Allowlist {
    /// Builds the allowlist from bare names (no argument rule).
    pub fn resolve(spelled: &[String], path_var: Option<&std::ffi::OsStr>) -> Result<Self, String> {
        let specs: Vec<EntrySpec> = spelled
            .iter()
            .map(|s| EntrySpec {
                program: s.clone(),
                args: ArgRule {
                    bare: true,
                    ..ArgRule::default()
                },
                network: false,
                env: Vec::new(),
            })
            .collect();
        Self::resolve_entries(&specs, path_var)
    }

    /// Builds the allowlist, looking bare names up on `path_var` once.
    pub fn resolve_entries(
        specs: &[EntrySpec],
        path_var: Option<&std::ffi::OsStr>,
    ) -> Result<Self, String> {
        let mut entries = Vec::new();
        for (index, spec) in specs.iter().enumerate() {
            let entry = &spec.program;
            if entry.trim().is_empty() {
                return Err("an entry is empty".into());
            }
            check_env_names(index, entry, &spec.env)?;
            let program = if entry.contains('/') {
                let p = PathBuf::from(entry);
                if !p.is_absolute() {
                    return Err(format!(
                        "'{entry}' is a relative path; give a bare name (looked up on PATH) or an absolute path"
                    ));
                }
                Some(p)
            } else {
                let found = find_on_path(entry, path_var);
                if found.is_none() {
                    tracing::warn!(entry, "allowlisted program not found on the host PATH");
                }
                found
            };
            entries.push(AllowEntry {
                spelled: entry.clone(),
                program,
                args: spec.args.clone(),
                network: spec.network,
                env: spec.env.clone(),
                index,
            });
        }
        Ok(Allowlist {
            entries,
            source: None,
        })
    }

    /// Names the configuration file the entries came from (in refusals
    /// that tell the operator what to add there).
    pub fn with_source(mut self, shown: &str) -> Self {
        self.source = Some(shown.to_string());
        self
    }

    pub fn entries(&self) -> &[AllowEntry] {
        &self.entries
    }

    /// The exact program a gate's `command` runs, or why it may not run.
    ///
    /// A bare name is admitted when that name is listed, and runs the
    /// program it resolved to at load. An absolute path is admitted when it
    /// is exactly the program some entry resolved to. Anything else (a
    /// relative path such as `./true`, another directory's `true`) is
    /// refused: listing `true` admits `/usr/bin/true` and nothing else.
    pub fn admit(&self, command: &str) -> Result<PathBuf, AllowError> {
        self.matching(command)?
            .first()
            .and_then(|e| e.program.clone())
            .ok_or_else(|| AllowError::NotFound(command.to_string()))
    }

    /// Admits `command` with `args`, setting the variables `set_env`, as
    /// written by `trust`: the program to run and the entry that admitted
    /// it.
    pub fn admit_with_args(
        &self,
        command: &str,
        args: &[String],
        set_env: &[&str],
        trust: Trust,
    ) -> Result<(PathBuf, &AllowEntry), AllowError> {
        let entries = self.matching(command)?;
        let mut first_err = None;
        for e in &entries {
            let Some(program) = e.program.clone() else {
                first_err.get_or_insert(AllowError::NotFound(command.to_string()));
                continue;
            };
            let checked = check_args(command, &e.args, args, trust)
                .and_then(|()| self.check_env(command, e, set_env, trust));
            match checked {
                Ok(()) => return Ok((program, e)),
                Err(err) => {
                    first_err.get_or_insert(err);
                }
            }
        }
        Err(first_err.unwrap_or_else(|| AllowError::NotAllowed(command.to_string())))
    }

    /// Refuses a variable an agent's gate sets that `entry` does not list.
    fn check_env(
        &self,
        command: &str,
        entry: &AllowEntry,
        set_env: &[&str],
        trust: Trust,
    ) -> Result<(), AllowError> {
        if trust == Trust::Operator {
            return Ok(());
        }
        match set_env.iter().find(|n| !entry.env.iter().any(|e| e == *n)) {
            None => Ok(()),
            Some(name) => Err(AllowError::Env {
                command: command.to_string(),
                name: name.to_string(),
                index: entry.index,
                spelled: entry.spelled.clone(),
                file: self
                    .source
                    .clone()
                    .unwrap_or_else(|| "the configuration".to_string()),
                risk: if super::code_env::runs_code(name) {
                    " (it makes programs run code of the gate's choosing: see `gatehost docs security` before listing it)"
                } else {
                    ""
                },
            }),
        }
    }

    /// The entries that name `command` (by listed name, or by the exact
    /// program an entry resolved to).
    fn matching(&self, command: &str) -> Result<Vec<&AllowEntry>, AllowError> {
        let not_allowed = || AllowError::NotAllowed(command.to_string());
        let found: Vec<&AllowEntry> = if !command.contains('/') {
            self.entries
                .iter()
                .filter(|e| e.spelled == command)
                .collect()
        } else {
            let path = Path::new(command);
            if !path.is_absolute() {
                return Err(not_allowed());
            }
            self.entries
                .iter()
                .filter(|e| e.program.as_deref() == Some(path))
                .collect()
        };
        if found.is_empty() {
            return Err(not_allowed());
        }
        Ok(found)
    }
}

/// An entry's `env` names: exact variable names gatehost lets a gate set;
/// one known to make programs run code is warned about (the operator's
/// call, see [`super::code_env`]).
fn check_env_names(index: usize, program: &str, names: &[String]) -> Result<(), String> {
    for name in names {
        let valid =
            !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !valid {
            return Err(format!(
                "shell.allow[{index}] env: '{name}' is not a variable name (exact names of letters, digits and '_'; no patterns)"
            ));
        }
        if !crate::sandbox::settable_env_name(std::ffi::OsStr::new(name)) {
            return Err(format!(
                "shell.allow[{index}] env: '{name}' is set by gatehost and no gate may set it"
            ));
        }
        if super::code_env::runs_code(name) {
            tracing::warn!(
                entry = %format!("shell.allow[{index}]"),
                program,
                variable = %name,
                "an allowlist entry lets gates the agent attaches set a variable that makes programs run code of the agent's choosing"
            );
        }
    }
    Ok(())
}

/// Checks an agent's arguments against an entry's rule.
fn check_args(
    command: &str,
    rule: &ArgRule,
    args: &[String],
    trust: Trust,
) -> Result<(), AllowError> {
    if trust == Trust::Operator || rule.free {
        return Ok(());
    }
    if rule.bare {
        return match args.is_empty() {
            true => Ok(()),
            false => Err(AllowError::NoArguments(command.to_string())),
        };
    }
    let refuse = |arg: &str, why: String| AllowError::Argument {
        command: command.to_string(),
        arg: arg.to_string(),
        why,
    };
    let mut rest = args;
    if let Some(subs) = &rule.subcommands {
        let Some((first, tail)) = args.split_first() else {
            return Err(refuse(
                "",
                format!("a subcommand is required (one of: {})", subs.join(", ")),
            ));
        };
        if !subs.iter().any(|s| s == first) {
            return Err(refuse(
                first,
                format!("not an allowed subcommand (allowed: {})", subs.join(", ")),
            ));
        }
        rest = tail;
    }
    for arg in rest {
        if let Some(d) = rule.deny.iter().find(|d| denied(d, arg)) {
            return Err(refuse(arg, format!("the allowlist denies '{d}'")));
        }
        if let Some(why) = outside_path(arg) {
            return Err(refuse(arg, why));
        }
    }
    Ok(())
}

/// `--opt` denies `--opt` and `--opt=…`; `-O` denies `-O` and `-Ovalue`.
fn denied(deny: &str, arg: &str) -> bool {
    if arg == deny {
        return true;
    }
    if deny.starts_with("--") {
        return arg.strip_prefix(deny).is_some_and(|r| r.starts_with('='));
    }
    deny.len() == 2 && deny.starts_with('-') && arg.starts_with(deny)
}

/// Why `arg` names (or holds, after `=`) a path outside the workspace.
fn outside_path(arg: &str) -> Option<String> {
    let value = arg.split_once('=').map_or(arg, |(_, v)| v);
    for candidate in [arg, value] {
        if candidate.starts_with('/') || candidate.starts_with('~') {
            return Some(
                "an absolute path; agent gates name paths inside the workspace only".into(),
            );
        }
        if Path::new(candidate)
            .components()
            .any(|c| c == Component::ParentDir)
        {
            return Some(
                "a path with '..'; agent gates name paths inside the workspace only".into(),
            );
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allow(entries: &[&str]) -> Allowlist {
        let spelled: Vec<String> = entries.iter().map(|s| s.to_string()).collect();
        Allowlist::resolve(&spelled, Some(std::ffi::OsStr::new("/usr/bin:/bin")))
            .expect("allowlist")
    }

    fn ruled(program: &str, subcommands: Option<&[&str]>, deny: &[&str]) -> Allowlist {
        Allowlist::resolve_entries(
            &[EntrySpec {
                program: program.into(),
                args: ArgRule {
                    subcommands: subcommands.map(|s| s.iter().map(|x| x.to_string()).collect()),
                    deny: deny.iter().map(|x| x.to_string()).collect(),
                    free: false,
                    bare: false,
                },
                network: false,
                env: Vec::new(),
            }],
            // cargo lives in ~/.cargo/bin: the test's own PATH finds it.
            std::env::var_os("PATH").as_deref(),
        )
        .expect("allowlist")
    }

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_allowlist_is_default_deny() {
        let list = Allowlist::default();
        assert_eq!(
            list.admit("true").unwrap_err().to_string(),
            "command 'true' is not in the allowlist"
        );
    }

    #[test]
    fn a_listed_name_admits_exactly_its_resolved_program() {
        let list = allow(&["true"]);
        assert_eq!(list.admit("true").unwrap(), PathBuf::from("/usr/bin/true"));
        assert_eq!(
            list.admit("/usr/bin/true").unwrap(),
            PathBuf::from("/usr/bin/true")
        );
        for other in [
            "/elsewhere/true",
            "./true",
            "bin/true",
            "false",
            "/usr/bin/../bin/true",
        ] {
            assert_eq!(
                list.admit(other),
                Err(AllowError::NotAllowed(other.to_string())),
                "{other} must be refused"
            );
        }
    }

    #[test]
    fn an_absolute_entry_is_taken_as_written() {
        let list = allow(&["/usr/bin/git"]);
        assert_eq!(
            list.admit("/usr/bin/git").unwrap(),
            PathBuf::from("/usr/bin/git")
        );
        assert!(list.admit("git").is_err(), "the bare name is not listed");
    }

    #[test]
    fn a_listed_name_missing_from_path_says_so() {
        let list = allow(&["no-such-program-gatehost"]);
        assert_eq!(
            list.admit("no-such-program-gatehost"),
            Err(AllowError::NotFound("no-such-program-gatehost".into()))
        );
    }

    #[test]
    fn a_bare_entry_admits_no_agent_arguments_but_any_of_the_operators() {
        let list = allow(&["true"]);
        assert!(list.admit_with_args("true", &[], &[], Trust::Agent).is_ok());
        let err = list
            .admit_with_args("true", &args(&["x"]), &[], Trust::Agent)
            .unwrap_err();
        assert_eq!(err, AllowError::NoArguments("true".into()));
        assert!(
            list.admit_with_args("true", &args(&["x"]), &[], Trust::Operator)
                .is_ok()
        );
    }

    #[test]
    fn hostile_git_arguments_are_refused_naming_the_argument() {
        let list = ruled(
            "git",
            Some(&["diff", "status", "log"]),
            &["-c", "--no-index", "--output", "--ext-diff"],
        );
        let refused = |a: &[&str]| {
            list.admit_with_args("git", &args(a), &[], Trust::Agent)
                .expect_err("refused")
                .to_string()
        };
        let e = refused(&["-c", "alias.x=!touch /tmp/pwned", "x"]);
        assert!(
            e.contains("argument '-c'") && e.contains("not an allowed subcommand"),
            "{e}"
        );
        let e = refused(&["diff", "--no-index", "/dev/null", "/root/.ssh/id_rsa"]);
        assert!(
            e.contains("argument '--no-index'") && e.contains("denies"),
            "{e}"
        );
        let e = refused(&["diff", "/etc/shadow"]);
        assert!(
            e.contains("argument '/etc/shadow'") && e.contains("absolute path"),
            "{e}"
        );
        let e = refused(&["log", "--output=../x"]);
        assert!(e.contains("argument '--output=../x'"), "{e}");
        let e = refused(&["diff", "-cfoo"]);
        assert!(e.contains("argument '-cfoo'"), "{e}");
        let e = refused(&[]);
        assert!(e.contains("a subcommand is required"), "{e}");
        assert!(
            list.admit_with_args(
                "git",
                &args(&["diff", "--stat", "src/a b.rs"]),
                &[],
                Trust::Agent
            )
            .is_ok()
        );
    }

    #[test]
    fn hostile_cargo_arguments_are_refused_naming_the_argument() {
        let list = ruled(
            "cargo",
            Some(&["test", "build", "clippy"]),
            &["--config", "-Z"],
        );
        let refused = |a: &[&str]| {
            list.admit_with_args("cargo", &args(a), &[], Trust::Agent)
                .expect_err("refused")
                .to_string()
        };
        let e = refused(&["test", "--config", "build.rustc='/tmp/x'"]);
        assert!(e.contains("argument '--config'"), "{e}");
        assert!(refused(&["test", "--config=x"]).contains("argument '--config=x'"));
        assert!(refused(&["test", "-Zunstable-options"]).contains("argument '-Zunstable-options'"));
        assert!(
            refused(&["test", "--manifest-path", "/etc/Cargo.toml"])
                .contains("argument '/etc/Cargo.toml'")
        );
        assert!(
            refused(&["test", "--manifest-path=../other/Cargo.toml"])
                .contains("'--manifest-path=../other/Cargo.toml'")
        );
        assert!(refused(&["run"]).contains("argument 'run'"));
        assert!(
            list.admit_with_args(
                "cargo",
                &args(&["test", "--quiet", "--offline", "--", "--nocapture"]),
                &[],
                Trust::Agent
            )
            .is_ok()
        );
    }

    #[test]
    fn a_free_entry_admits_any_arguments() {
        let list = Allowlist::resolve_entries(
            &[EntrySpec {
                program: "sh".into(),
                args: ArgRule {
                    free: true,
                    ..ArgRule::default()
                },
                network: false,
                env: Vec::new(),
            }],
            Some(std::ffi::OsStr::new("/usr/bin:/bin")),
        )
        .expect("allowlist");
        assert!(
            list.admit_with_args("sh", &args(&["-c", "/anything ../x"]), &[], Trust::Agent)
                .is_ok()
        );
    }
}
