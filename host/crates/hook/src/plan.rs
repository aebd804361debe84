//! What `gatehost hook install AGENT` writes where, as each CLI's adapter
//! plans it: the scope, the directories a CLI's files are found from, the
//! edits of one file ([`Edit`]), and the plan being built ([`Planned`]).
//!
//! It owns the vocabulary of a plan and the helpers every adapter shares
//! (the hook entries of grouped events in the CLI's timeout unit). It must
//! never read or write a file: the careful write is the command line's
//! (`cli::hook::install`); an adapter's plan only names paths and edits.

use super::HookPoint;
use super::install::{HookSet, Layout};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// Where the CLI's configuration is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scope {
    /// The user's own configuration (out of the agent's workspace).
    User,
    /// The project's (in the workspace: the agent can edit it).
    Project,
}

/// Why a CLI's files cannot be found (no home directory, a project path
/// that cannot be made absolute, a Kiro agent that is not there).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PlaceError {
    /// `no-home`, or `bad-input` for what the command line gave.
    pub code: &'static str,
    /// What is missing or wrong, for a person.
    pub message: String,
    /// The option at fault (`--project`, `--kiro-agent`).
    pub field: Option<&'static str>,
}

impl PlaceError {
    /// An error in what the command line gave, naming its option.
    pub fn input(message: impl Into<String>, field: &'static str) -> Self {
        PlaceError {
            code: "bad-input",
            message: message.into(),
            field: Some(field),
        }
    }
}

/// The directories a CLI's files are found from: the home directory, the
/// project, and the environment (`CODEX_HOME`, `XDG_CONFIG_HOME`, …).
pub struct Dirs<'a> {
    project: &'a Path,
}

impl<'a> Dirs<'a> {
    /// The directories for `project` (`--project`, else the current
    /// directory), as given: [`Dirs::project`] makes it absolute.
    pub fn new(project: &'a Path) -> Self {
        Dirs { project }
    }

    /// The home directory.
    pub fn home(&self) -> Result<PathBuf, PlaceError> {
        dirs::home_dir().ok_or_else(|| PlaceError {
            code: "no-home",
            message: "no home directory: set HOME".into(),
            field: None,
        })
    }

    /// The project, made absolute.
    pub fn project(&self) -> Result<PathBuf, PlaceError> {
        std::path::absolute(self.project)
            .map_err(|e| PlaceError::input(format!("--project: {e}"), "--project"))
    }

    /// The directory a variable names, when it is set and not empty.
    pub fn env_dir(&self, var: &str) -> Option<PathBuf> {
        std::env::var_os(var)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    }

    /// The directory `var` names, else `default` under the home directory.
    pub fn env_or_home(&self, var: &str, default: &str) -> Result<PathBuf, PlaceError> {
        self.env_dir(var)
            .map_or_else(|| self.home().map(|h| h.join(default)), Ok)
    }
}

/// One change to one file.
#[derive(Debug, Clone)]
pub enum Edit {
    /// A JSON configuration: merge gatehost's hook entries into its
    /// `hooks` ([`crate::install::add_hooks`]).
    Hooks(HookSet),
    /// A JSON configuration: set `mcpServers.<name>` to `server`.
    Mcp {
        /// The server entry's key ([`MCP_NAME`]).
        name: &'static str,
        /// The entry's object (`{"command", "args"}`).
        server: Value,
    },
    /// Codex's `config.toml`: trust gatehost's hooks in this `hooks.json`.
    CodexTrust {
        /// The `hooks.json` whose gatehost entries are trusted.
        hooks: PathBuf,
    },
    /// Codex's `config.toml`: `[mcp_servers.gatehost]` running this command
    /// with these arguments.
    CodexMcp {
        /// The program (`gatehost`, or its path).
        command: String,
        /// Its arguments (`mcp`, …).
        args: Vec<String>,
    },
    /// OpenCode: the whole file is gatehost's plugin, running this program
    /// with these arguments (no shell), waiting at most `timeout_ms`.
    Plugin {
        /// The program the plugin runs (`gatehost`, or its path).
        command: String,
        /// Its arguments (`hook`, `opencode`, …).
        args: Vec<String>,
        /// How long the plugin waits for it (milliseconds).
        timeout_ms: u64,
    },
}

/// A file and what gatehost puts in it.
#[derive(Debug, Clone)]
pub struct FilePlan {
    /// The configuration file (made, with its directory, when missing).
    pub path: PathBuf,
    /// What is done to it, in order.
    pub edits: Vec<Edit>,
}

/// The name of gatehost's MCP server entry.
pub const MCP_NAME: &str = "gatehost";

/// What an adapter plans with: the files (its `install_files`), the
/// hook command, and the MCP server to add when `--mcp` is given.
pub struct InstallContext<'a> {
    /// The files to install into, as the adapter's `install_files` named
    /// them.
    pub files: &'a [PathBuf],
    /// The hook command, quoted for a shell.
    pub command: &'a str,
    /// The hook command's words, unquoted: the program, then its arguments.
    pub words: &'a [String],
    /// `--mcp`: the program and arguments of the `gatehost mcp` entry.
    pub mcp: Option<(&'a str, &'a [String])>,
}

impl InstallContext<'_> {
    /// The usual MCP server entry, when `--mcp` is given.
    pub fn mcp_server(&self) -> Option<Edit> {
        self.mcp.map(|(command, args)| Edit::Mcp {
            name: MCP_NAME,
            server: json!({"command": command, "args": args}),
        })
    }
}

/// The plan being built: each file once, its edits in order, and what the
/// installer is told.
#[derive(Debug, Default)]
pub struct Planned {
    /// The files, each once, in the order first planned.
    pub files: Vec<FilePlan>,
    /// Said on stdout.
    pub said: Vec<String>,
    /// Said on stderr as warnings.
    pub warnings: Vec<String>,
}

impl Planned {
    /// Adds `edit` to `path`'s plan.
    pub fn push(&mut self, path: &Path, edit: Edit) {
        match self.files.iter_mut().find(|p| p.path == path) {
            Some(p) => p.edits.push(edit),
            None => self.files.push(FilePlan {
                path: path.to_path_buf(),
                edits: vec![edit],
            }),
        }
    }
}

/// The unit of a CLI's hook `timeout`.
#[derive(Debug, Clone, Copy)]
pub enum Unit {
    /// Claude Code, Codex, Qwen Code.
    Seconds,
    /// Gemini CLI.
    Millis,
}

/// Each event's hook (`{"type": "command", command, timeout}`) with the
/// timeout the CLI accepts for it, in the CLI's unit.
pub fn grouped(
    event_timeout: impl Fn(HookPoint) -> std::time::Duration,
    command: &str,
    events: &[(&str, HookPoint)],
    unit: Unit,
) -> Edit {
    Edit::Hooks(HookSet {
        layout: Layout::Grouped,
        entries: events
            .iter()
            .map(|(e, point)| {
                let t = event_timeout(*point);
                let timeout = match unit {
                    Unit::Seconds => json!(t.as_secs().max(1)),
                    Unit::Millis => json!(u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
                };
                let hook = json!({"type": "command", "command": command, "timeout": timeout});
                ((*e).to_string(), hook)
            })
            .collect(),
    })
}

/// A duration in whole milliseconds.
pub fn millis(t: std::time::Duration) -> u64 {
    u64::try_from(t.as_millis()).unwrap_or(u64::MAX)
}
