//! What `gatehost hook install AGENT` writes where: the files each CLI
//! keeps its hooks and MCP servers in (user or project scope), the events
//! hooked in each CLI with the timeout in its unit, and the hook command
//! (this gatehost, `hook AGENT`, the options given, paths made absolute).
//!
//! It only plans: it must never read or write a file (the careful write is
//! [`super`]'s), and never plan an entry under a name that is not
//! gatehost's.

use super::super::super::error::{CliError, CliResult};
use super::super::args::{InstallArgs, Scope};
use super::super::program::Program;
use crate::hook::install::{HookSet, Layout, PLUGIN_FILE};
use crate::hook::{AgentCli, HookPoint};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// One change to one file.
#[derive(Debug, Clone)]
pub(super) enum Edit {
    Hooks(HookSet),
    Mcp {
        name: &'static str,
        server: Value,
    },
    /// Codex's `config.toml`: trust gatehost's hooks in this `hooks.json`.
    CodexTrust {
        hooks: PathBuf,
    },
    /// Codex's `config.toml`: `[mcp_servers.gatehost]` running this command
    /// with these arguments.
    CodexMcp {
        command: String,
        args: Vec<String>,
    },
    /// OpenCode: the whole file is gatehost's plugin, running this program
    /// with these arguments (no shell), waiting at most `timeout_ms`.
    Plugin {
        command: String,
        args: Vec<String>,
        timeout_ms: u64,
    },
}

/// A file and what gatehost puts in it.
#[derive(Debug, Clone)]
pub(super) struct FilePlan {
    pub(super) path: PathBuf,
    pub(super) edits: Vec<Edit>,
}

pub(super) const MCP_NAME: &str = "gatehost";

/// The files an agent's hooks (and MCP servers) live in, for a scope.
pub(in crate::cli) fn files(
    agent: AgentCli,
    scope: Scope,
    project: &Path,
) -> CliResult<Vec<PathBuf>> {
    let home =
        || dirs::home_dir().ok_or_else(|| CliError::new("no-home", "no home directory: set HOME"));
    let env_dir = |var: &str| {
        std::env::var_os(var)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let project = || -> CliResult<PathBuf> {
        std::path::absolute(project)
            .map_err(|e| CliError::input(format!("--project: {e}")).field("--project"))
    };
    Ok(match (agent, scope) {
        (AgentCli::Claude, Scope::User) => {
            // MCP servers of user scope are in .claude.json: in
            // $CLAUDE_CONFIG_DIR, else in the home directory.
            match env_dir("CLAUDE_CONFIG_DIR") {
                Some(dir) => vec![dir.join("settings.json"), dir.join(".claude.json")],
                None => {
                    let h = home()?;
                    vec![h.join(".claude/settings.json"), h.join(".claude.json")]
                }
            }
        }
        (AgentCli::Claude, Scope::Project) => {
            let p = project()?;
            vec![p.join(".claude/settings.json"), p.join(".mcp.json")]
        }
        // Codex trusts a hook only by its hash in the user's config.toml.
        (AgentCli::Codex, scope) => {
            let dir = env_dir("CODEX_HOME").map_or_else(|| home().map(|h| h.join(".codex")), Ok)?;
            let hooks = match scope {
                Scope::User => dir.join("hooks.json"),
                Scope::Project => project()?.join(".codex/hooks.json"),
            };
            vec![hooks, dir.join("config.toml")]
        }
        (AgentCli::Gemini, Scope::User) => vec![home()?.join(".gemini/settings.json")],
        (AgentCli::Gemini, Scope::Project) => vec![project()?.join(".gemini/settings.json")],
        (AgentCli::Qwen, Scope::User) => {
            let dir = env_dir("QWEN_HOME").map_or_else(|| home().map(|h| h.join(".qwen")), Ok)?;
            vec![dir.join("settings.json")]
        }
        (AgentCli::Qwen, Scope::Project) => vec![project()?.join(".qwen/settings.json")],
        // MCP servers of user scope are in mcp-config.json (where
        // `copilot mcp add` writes them, measured with 1.0.102).
        (AgentCli::Copilot, Scope::User) => {
            let dir =
                env_dir("COPILOT_HOME").map_or_else(|| home().map(|h| h.join(".copilot")), Ok)?;
            vec![dir.join("hooks/gatehost.json"), dir.join("mcp-config.json")]
        }
        (AgentCli::Copilot, Scope::Project) => {
            vec![project()?.join(".github/hooks/gatehost.json")]
        }
        (AgentCli::Opencode, Scope::User) => {
            let config = env_dir("XDG_CONFIG_HOME")
                .filter(|d| d.is_absolute())
                .map_or_else(|| home().map(|h| h.join(".config")), Ok)?;
            vec![config.join("opencode/plugin").join(PLUGIN_FILE)]
        }
        (AgentCli::Opencode, Scope::Project) => {
            vec![project()?.join(".opencode/plugin").join(PLUGIN_FILE)]
        }
        // An agent's file, named by `--kiro-agent`: see `kiro_agent_file`.
        (AgentCli::Kiro, _) => Vec::new(),
        (AgentCli::Cursor, Scope::User) => {
            let h = home()?;
            vec![h.join(".cursor/hooks.json"), h.join(".cursor/mcp.json")]
        }
        (AgentCli::Cursor, Scope::Project) => {
            let p = project()?;
            vec![p.join(".cursor/hooks.json"), p.join(".cursor/mcp.json")]
        }
    })
}

/// Kiro CLI's agents directory of `scope`.
pub(in crate::cli) fn kiro_agents_dir(scope: Scope, project: &Path) -> CliResult<PathBuf> {
    Ok(match scope {
        Scope::User => dirs::home_dir()
            .ok_or_else(|| CliError::new("no-home", "no home directory: set HOME"))?
            .join(".kiro/agents"),
        Scope::Project => std::path::absolute(project)
            .map_err(|e| CliError::input(format!("--project: {e}")).field("--project"))?
            .join(".kiro/agents"),
    })
}

/// The Kiro agent configuration `name` of `scope`: a plain name (no path),
/// whose file exists (gatehost never makes an agent: Kiro's default one
/// carries no hooks, and a new agent would change what the user runs).
pub(in crate::cli) fn kiro_agent_file(
    scope: Scope,
    project: &Path,
    name: Option<&str>,
) -> CliResult<PathBuf> {
    let dir = kiro_agents_dir(scope, project)?;
    let Some(name) = name else {
        let found = kiro_agent_names(&dir);
        return Err(CliError::input(format!(
            "--kiro-agent NAME is needed: Kiro CLI reads hooks from an agent's configuration ({}); {}",
            dir.join("NAME.json").display(),
            if found.is_empty() {
                "none is there yet: create one with Kiro (`kiro-cli agent create`)".to_string()
            } else {
                format!("there: {}", found.join(", "))
            }
        ))
        .field("--kiro-agent"));
    };
    let plain = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !name.starts_with('.');
    if !plain {
        return Err(CliError::input(format!(
            "--kiro-agent {name:?}: an agent's name (letters, digits, '-', '_', '.'), not a path"
        ))
        .field("--kiro-agent"));
    }
    let file = dir.join(format!("{name}.json"));
    if !file.is_file() {
        return Err(CliError::input(format!(
            "--kiro-agent {name}: {} does not exist; create the agent with Kiro first (gatehost adds hooks, it makes no agent)",
            file.display()
        ))
        .field("--kiro-agent"));
    }
    Ok(file)
}

/// The agents' names in `dir` (`NAME.json`), sorted.
pub(in crate::cli) fn kiro_agent_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|e| {
            let n = e.file_name().into_string().ok()?;
            n.strip_suffix(".json")
                .filter(|s| !s.is_empty() && !s.starts_with('.'))
                .map(String::from)
        })
        .collect();
    names.sort();
    names
}

/// The files `install` and `uninstall` change for `agent` in `scope`.
pub(in crate::cli) fn install_files(
    agent: AgentCli,
    scope: Scope,
    project: &Path,
    kiro_agent: Option<&str>,
) -> CliResult<Vec<PathBuf>> {
    match agent {
        AgentCli::Kiro => Ok(vec![kiro_agent_file(scope, project, kiro_agent)?]),
        _ => files(agent, scope, project),
    }
}

/// The arguments of the `gatehost mcp` entry: `mcp` and the daemon
/// options given to `install` (absolute paths), so that the MCP server
/// reaches the same daemon as the hooks.
fn mcp_args(args: &InstallArgs) -> CliResult<Vec<String>> {
    let mut words = vec!["mcp".to_string()];
    words.extend(daemon_words(args)?);
    Ok(words)
}

/// `--server`, `--token-file` and `--data-dir` as given to `install`, the
/// paths made absolute (the CLI runs its hooks and MCP servers from
/// anywhere); a path that is not there is refused, naming its option.
fn daemon_words(args: &InstallArgs) -> CliResult<Vec<String>> {
    let mut words = Vec::new();
    if let Some(url) = &args.server {
        words.push("--server".into());
        words.push(url.clone());
    }
    for (flag, path) in [
        ("--token-file", &args.token_file),
        ("--data-dir", &args.data_dir),
    ] {
        if let Some(p) = path {
            let abs = std::fs::canonicalize(p)
                .map_err(|e| CliError::input(format!("{flag} {}: {e}", p.display())).field(flag))?;
            words.push(flag.into());
            words.push(abs.display().to_string());
        }
    }
    Ok(words)
}

/// The hook command gatehost installs: `program` (see [`super::program`]),
/// `hook AGENT`, and the options given.
pub(super) fn hook_command(args: &InstallArgs, program: &Path) -> CliResult<String> {
    let words = hook_words(args, program)?;
    let quoted: Result<Vec<String>, _> = words
        .iter()
        .map(|w| shlex::try_quote(w).map(|q| q.into_owned()))
        .collect();
    quoted
        .map(|q| q.join(" "))
        .map_err(|e| CliError::input(format!("cannot quote the hook command: {e}")))
}

/// [`hook_command`]'s words, unquoted: the program, then its arguments.
fn hook_words(args: &InstallArgs, program: &Path) -> CliResult<Vec<String>> {
    let mut words = vec![
        program.display().to_string(),
        "hook".into(),
        args.agent.name().into(),
    ];
    for (flag, file) in [
        ("--gates", &args.gates),
        ("--subagent-gates", &args.subagent_gates),
        ("--config", &args.config),
    ] {
        if let Some(f) = file {
            let abs = std::fs::canonicalize(f)
                .map_err(|e| CliError::input(format!("{flag} {}: {e}", f.display())).field(flag))?;
            words.push(flag.into());
            words.push(abs.display().to_string());
        }
    }
    words.extend(daemon_words(args)?);
    if let Some(n) = args.max_retries {
        words.push("--max-retries".into());
        words.push(n.to_string());
    }
    if let Some(b) = args.budget {
        let limit = crate::hook::adapter(args.agent).cli_timeout();
        if b >= limit {
            return Err(CliError::input(format!(
                "--budget {} is not below {}'s hook timeout ({} s): the CLI would give up first",
                crate::gate::human_duration(b),
                args.agent.name(),
                limit.as_secs()
            ))
            .field("--budget"));
        }
        words.push("--budget".into());
        words.push(format!("{}ms", b.as_millis()));
    }
    if let Some(dir) = &args.state_dir {
        words.push("--state-dir".into());
        words.push(
            std::path::absolute(dir)
                .unwrap_or_else(|_| dir.clone())
                .display()
                .to_string(),
        );
    }
    Ok(words)
}

/// The unit of a CLI's hook `timeout`.
#[derive(Debug, Clone, Copy)]
enum Unit {
    /// Claude Code, Codex, Qwen Code.
    Seconds,
    /// Gemini CLI.
    Millis,
}

/// The events gatehost hooks in Claude Code.
const CLAUDE_EVENTS: &[(&str, HookPoint)] = &[
    ("Stop", HookPoint::Stop),
    ("SubagentStop", HookPoint::Stop),
    ("SessionStart", HookPoint::SessionStart),
    ("UserPromptSubmit", HookPoint::TurnStart),
    ("SessionEnd", HookPoint::SessionEnd),
];

/// The events gatehost hooks in Codex: not `SessionEnd`. Once its hook is
/// trusted (its hash taken over the timeout Codex clamps it to, 3 s),
/// `codex exec` 0.169 runs it after a Stop hook's block, mid-session: it
/// would forget a standalone session's retry count (and report a daemon
/// session exited) while the agent goes on. (An earlier gatehost wrote it
/// with 600 s, so Codex warned at every run and never ran it.)
const CODEX_EVENTS: &[(&str, HookPoint)] = &[
    ("Stop", HookPoint::Stop),
    ("SessionStart", HookPoint::SessionStart),
    ("UserPromptSubmit", HookPoint::TurnStart),
];

/// The events gatehost hooks in Qwen Code: a sub-agent's stop is gated
/// too; `UserPromptSubmit` is not hooked (see [`crate::hook::qwen`]).
const QWEN_EVENTS: &[(&str, HookPoint)] = &[
    ("Stop", HookPoint::Stop),
    ("SubagentStop", HookPoint::Stop),
    ("SessionStart", HookPoint::SessionStart),
    ("SessionEnd", HookPoint::SessionEnd),
];

/// What to write where, and the program the hooks run.
pub(super) fn plan(
    args: &InstallArgs,
    program: &Program,
    command: &str,
) -> CliResult<Vec<FilePlan>> {
    if args.mcp {
        refuse_mcp(args.agent, args.scope)?;
    }
    let files = install_files(
        args.agent,
        args.scope,
        &args.project,
        args.kiro_agent.as_deref(),
    )?;
    let adapter = crate::hook::adapter(args.agent);
    // Each event's hook with the timeout the CLI accepts for it, in the
    // CLI's unit.
    let grouped = |events: &[(&str, HookPoint)], unit: Unit| {
        Edit::Hooks(HookSet {
            layout: Layout::Grouped,
            entries: events
                .iter()
                .map(|(e, point)| {
                    let t = adapter.event_timeout(*point);
                    let timeout = match unit {
                        Unit::Seconds => json!(t.as_secs().max(1)),
                        Unit::Millis => json!(u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
                    };
                    let hook = json!({"type": "command", "command": command, "timeout": timeout});
                    ((*e).to_string(), hook)
                })
                .collect(),
        })
    };
    let exe = program.path.display().to_string();
    let mcp_args = mcp_args(args)?;
    let mcp = || Edit::Mcp {
        name: MCP_NAME,
        server: json!({"command": exe, "args": mcp_args}),
    };
    let mut plans: Vec<FilePlan> = Vec::new();
    let mut push = |path: &PathBuf, edit: Edit| match plans.iter_mut().find(|p| &p.path == path) {
        Some(p) => p.edits.push(edit),
        None => plans.push(FilePlan {
            path: path.clone(),
            edits: vec![edit],
        }),
    };
    match args.agent {
        AgentCli::Claude => {
            let mut hooks = grouped(CLAUDE_EVENTS, Unit::Seconds);
            let path = std::env::var_os("PATH").unwrap_or_default();
            match super::claude_version::decide(&super::claude_version::claudes_on(&path)) {
                Ok(said) => {
                    println!("{said}");
                    if let Edit::Hooks(set) = &mut hooks {
                        for (event, hook) in &mut set.entries {
                            if matches!(event.as_str(), "Stop" | "SubagentStop") {
                                hook["onFailure"] = json!("block");
                            }
                        }
                    }
                }
                Err(warning) => eprintln!("warning: {warning}"),
            }
            push(&files[0], hooks);
            if args.mcp {
                push(&files[1], mcp());
            }
        }
        AgentCli::Codex => {
            push(&files[0], grouped(CODEX_EVENTS, Unit::Seconds));
            push(
                &files[1],
                Edit::CodexTrust {
                    hooks: files[0].clone(),
                },
            );
            if args.mcp {
                push(
                    &files[1],
                    Edit::CodexMcp {
                        command: exe.clone(),
                        args: mcp_args.clone(),
                    },
                );
            }
        }
        AgentCli::Gemini => {
            push(
                &files[0],
                grouped(
                    &[
                        ("AfterAgent", HookPoint::Stop),
                        ("SessionStart", HookPoint::SessionStart),
                        ("SessionEnd", HookPoint::SessionEnd),
                    ],
                    Unit::Millis,
                ),
            );
            if args.mcp {
                push(&files[0], mcp());
            }
        }
        AgentCli::Qwen => {
            push(&files[0], grouped(QWEN_EVENTS, Unit::Seconds));
            if args.mcp {
                push(&files[0], mcp());
            }
        }
        AgentCli::Copilot => {
            if args.mcp {
                // As `copilot mcp add` writes it: a local server, every tool.
                push(
                    &files[1],
                    Edit::Mcp {
                        name: MCP_NAME,
                        server: json!({"type": "local", "command": exe, "args": mcp_args, "tools": ["*"]}),
                    },
                );
            }
            let t = adapter.event_timeout(HookPoint::Stop).as_secs();
            let hook = json!({"type": "command", "command": command, "timeoutSec": t});
            push(
                &files[0],
                Edit::Hooks(HookSet {
                    layout: Layout::Flat,
                    entries: vec![
                        ("agentStop".into(), hook.clone()),
                        ("subagentStop".into(), hook),
                    ],
                }),
            );
        }
        AgentCli::Opencode => {
            let mut words = hook_words(args, &program.path)?.into_iter();
            let command = words.next().unwrap_or_default();
            push(
                &files[0],
                Edit::Plugin {
                    command,
                    args: words.collect(),
                    timeout_ms: u64::try_from(adapter.cli_timeout().as_millis())
                        .unwrap_or(u64::MAX),
                },
            );
        }
        AgentCli::Kiro => {
            // `timeout_ms`, in milliseconds; `stop` gates, a person's
            // prompt starts the count again.
            let t = u64::try_from(adapter.cli_timeout().as_millis()).unwrap_or(u64::MAX);
            let hook = json!({"command": command, "timeout_ms": t});
            push(
                &files[0],
                Edit::Hooks(HookSet {
                    layout: Layout::Bare,
                    entries: vec![
                        ("stop".into(), hook.clone()),
                        ("userPromptSubmit".into(), hook),
                    ],
                }),
            );
        }
        AgentCli::Cursor => {
            let hook = json!({"command": command});
            push(
                &files[0],
                Edit::Hooks(HookSet {
                    layout: Layout::Flat,
                    entries: vec![
                        ("stop".into(), hook.clone()),
                        ("beforeSubmitPrompt".into(), hook),
                    ],
                }),
            );
            if args.mcp {
                push(&files[1], mcp());
            }
        }
    }
    Ok(plans)
}

/// `--mcp` where gatehost does not write the CLI's MCP configuration: an
/// error saying what to do instead, never a flag silently ignored.
fn refuse_mcp(agent: AgentCli, scope: Scope) -> CliResult<()> {
    let why = match (agent, scope) {
        (AgentCli::Opencode, _) => {
            "gatehost does not write OpenCode's MCP configuration: add \"mcp\": {\"gatehost\": \
             {\"type\": \"local\", \"command\": [\"/path/to/gatehost\", \"mcp\"]}} to opencode.json"
        }
        (AgentCli::Kiro, _) => {
            "gatehost does not write a Kiro agent's MCP servers (its `tools` must name them too): \
             add `gatehost mcp` under the agent's \"mcpServers\" and \"@gatehost\" to its \"tools\""
        }
        (AgentCli::Copilot, Scope::Project) => {
            "a project's MCP servers for Copilot CLI (.mcp.json, .github/mcp.json) are not written by \
             gatehost (.mcp.json is Claude Code's too): use --scope user, or `copilot mcp add`"
        }
        _ => return Ok(()),
    };
    Err(CliError::input(format!("--mcp: {why}")).field("--mcp"))
}
