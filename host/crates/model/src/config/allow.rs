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
    /// The program as the configuration spells it (a bare name or a path).
    pub spelled: String,
    /// `None` when a bare name was not found on the host PATH at load.
    pub program: Option<PathBuf>,
    /// Which arguments a gate may give it.
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
    /// The program is not in `[shell] allow`.
    #[error("command '{0}' is not in the allowlist")]
    NotAllowed(String),
    /// The entry's bare name was not found on the host PATH when the
    /// configuration was loaded.
    #[error("command '{0}' is in the allowlist but was not found on the host PATH")]
    NotFound(String),
    /// `fix`: empty, or what the operator may change and where (the
    /// configuration file, the entry and its line as it would read).
    #[error("command '{command}': argument '{arg}' is refused: {why}{fix}")]
    Argument {
        /// The gate's command.
        command: String,
        /// The argument refused.
        arg: String,
        /// Which rule refused it (a denied subcommand, a flag, a path).
        why: String,
        /// Empty, or what the operator may change and where (the
        /// configuration file, the entry and its line as it would read).
        fix: String,
    },
    /// The entry admits the program only bare, and a gate the agent attached
    /// gave arguments.
    #[error("command '{command}': the allowlist admits it without arguments for agent gates{fix}")]
    NoArguments {
        /// The gate's command.
        command: String,
        /// Empty, or what the operator may change and where.
        fix: String,
    },
    #[error(
        "command '{command}': a gate the agent attached may not set env '{name}': \
         the allowlist entry shell.allow[{index}] (program \"{spelled}\") in {file} \
         does not list it; the operator may add env = [\"{name}\"] to that entry{risk}"
    )]
    /// A gate the agent attached sets a variable its entry does not list in
    /// `env`.
    Env {
        /// The gate's command.
        command: String,
        /// The variable's name.
        name: String,
        /// The entry's place in `[shell] allow`.
        index: usize,
        /// The entry's program, as the configuration spells it.
        spelled: String,
        /// The configuration file holding it.
        file: String,
        /// Empty, or a warning that the name makes programs run code.
        risk: &'static str,
    },
}

/// An entry as the configuration gives it, before resolution.
#[derive(Debug, Clone)]
pub struct EntrySpec {
    /// The program as the configuration spells it (a bare name or a path).
    pub program: String,
    /// Which arguments a gate may give it.
    pub args: ArgRule,
    /// The gate may open TCP connections (denied by the sandbox otherwise).
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

    /// The entries, in the configuration's order.
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
            let checked = check_args(&e.args, args, trust)
                .map_err(|r| self.refusal(command, e, r))
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

    /// The configuration file, as shown in messages.
    fn file(&self) -> String {
        self.source
            .clone()
            .unwrap_or_else(|| "the configuration".to_string())
    }

    /// The error for an argument `entry`'s rule refused, with what the
    /// operator may write instead: the entry as the line would read in
    /// `[shell] allow`, in the file it came from.
    fn refusal(&self, command: &str, entry: &AllowEntry, r: Refused) -> AllowError {
        let (file, i, spelled) = (self.file(), entry.index, &entry.spelled);
        let place = format!("the {spelled} entry (shell.allow[{i}]) of [shell] allow in {file}");
        let fix = match &r.problem {
            Problem::NoArguments => {
                let subs = vec![r.arg.clone()];
                format!(
                    "; to admit this one, the operator may write {place} as {}",
                    entry_toml(entry, &subs)
                )
            }
            Problem::NotSubcommand => {
                let mut subs = entry.args.subcommands.clone().unwrap_or_default();
                subs.push(r.arg.clone());
                format!(
                    "; to admit it, the operator may add {} to subcommands of {place}: {}",
                    toml_str(&r.arg),
                    entry_toml(entry, &subs)
                )
            }
            Problem::Denied => format!(" ({place})"),
            Problem::OutsidePath => {
                format!("; only free_args = true on {place} admits it (and then any argument)")
            }
            Problem::NoSubcommand => String::new(),
        };
        match r.problem {
            Problem::NoArguments => AllowError::NoArguments {
                command: command.to_string(),
                fix,
            },
            _ => AllowError::Argument {
                command: command.to_string(),
                arg: r.arg,
                why: r.why,
                fix,
            },
        }
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
                file: self.file(),
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

/// What an entry's rule refused in an agent's arguments.
#[derive(Debug)]
enum Problem {
    /// A bare entry, given arguments.
    NoArguments,
    /// A subcommand rule, and no argument.
    NoSubcommand,
    /// The first argument is not one of the subcommands.
    NotSubcommand,
    /// An option the entry denies.
    Denied,
    /// A path outside the workspace.
    OutsidePath,
}

/// The argument refused, why, and which rule refused it.
#[derive(Debug)]
struct Refused {
    arg: String,
    why: String,
    problem: Problem,
}

/// A string as TOML writes it (quoted and escaped).
fn toml_str(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

fn toml_list(items: &[String]) -> String {
    let items: Vec<String> = items.iter().map(|i| toml_str(i)).collect();
    format!("[{}]", items.join(", "))
}

/// `entry` as a `[shell] allow` table with `subcommands`, keeping its
/// other keys.
fn entry_toml(entry: &AllowEntry, subcommands: &[String]) -> String {
    let mut keys = vec![
        format!("program = {}", toml_str(&entry.spelled)),
        format!("subcommands = {}", toml_list(subcommands)),
    ];
    if !entry.args.deny.is_empty() {
        keys.push(format!("deny = {}", toml_list(&entry.args.deny)));
    }
    if entry.network {
        keys.push("network = true".into());
    }
    if !entry.env.is_empty() {
        keys.push(format!("env = {}", toml_list(&entry.env)));
    }
    format!("{{ {} }}", keys.join(", "))
}

/// Checks an agent's arguments against an entry's rule.
fn check_args(rule: &ArgRule, args: &[String], trust: Trust) -> Result<(), Refused> {
    if trust == Trust::Operator || rule.free {
        return Ok(());
    }
    if rule.bare {
        return match args.first() {
            None => Ok(()),
            Some(first) => Err(Refused {
                arg: first.clone(),
                why: String::new(),
                problem: Problem::NoArguments,
            }),
        };
    }
    let refuse = |arg: &str, why: String, problem: Problem| Refused {
        arg: arg.to_string(),
        why,
        problem,
    };
    let mut rest = args;
    if let Some(subs) = &rule.subcommands {
        let Some((first, tail)) = args.split_first() else {
            return Err(refuse(
                "",
                format!("a subcommand is required (one of: {})", subs.join(", ")),
                Problem::NoSubcommand,
            ));
        };
        if !subs.iter().any(|s| s == first) {
            return Err(refuse(
                first,
                format!("not an allowed subcommand (allowed: {})", subs.join(", ")),
                Problem::NotSubcommand,
            ));
        }
        rest = tail;
    }
    for arg in rest {
        if let Some(d) = rule.deny.iter().find(|d| denied(d, arg)) {
            return Err(refuse(
                arg,
                format!("the allowlist denies '{d}'"),
                Problem::Denied,
            ));
        }
        if let Some(why) = outside_path(arg) {
            return Err(refuse(arg, why, Problem::OutsidePath));
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
#[path = "allow_tests.rs"]
mod tests;
