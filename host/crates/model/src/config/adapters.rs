//! Judge adapters (`[judge]`): the argv templates that run an LLM judge,
//! the built-in ones, and the section that configures them.
//!
//! It owns what an adapter is and how its file form is read; it must never
//! run one (the gate layer does, confined).

use super::home_path;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct JudgeSection {
    pub slots: Option<usize>,
    pub max_context_bytes: Option<usize>,
    #[serde(default)]
    pub adapters: BTreeMap<String, AdapterFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AdapterFile {
    pub command: Vec<String>,
    #[serde(default)]
    pub env: Vec<String>,
    pub default_model: Option<String>,
    #[serde(default)]
    pub read: Vec<String>,
    #[serde(default)]
    pub write: Vec<String>,
    pub network: Option<bool>,
}

/// A judge adapter: an argv template with `{model}` placeholders, and the
/// host environment variables passed through to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adapter {
    /// The argv, with `{model}` replaced by the gate's model (or
    /// `default_model`).
    pub command: Vec<String>,
    /// Host environment variables passed through to it (its API key).
    pub env: Vec<String>,
    /// The model used when a gate names none.
    pub default_model: Option<String>,
    /// Paths the adapter may read in the sandbox (its configuration and
    /// credentials), beyond the system and every absolute path of its
    /// command.
    pub read: Vec<PathBuf>,
    /// Paths the adapter may write (its state directory, if it keeps one).
    pub write: Vec<PathBuf>,
    /// TCP connections allowed (judges call their API; default true).
    pub network: bool,
}

impl Adapter {
    fn new(command: &[&str], env: &[&str]) -> Self {
        Adapter {
            command: command.iter().map(|s| s.to_string()).collect(),
            env: env.iter().map(|s| s.to_string()).collect(),
            default_model: None,
            read: Vec::new(),
            write: Vec::new(),
            network: true,
        }
    }

    /// The same adapter, with these paths (`~/…` allowed) readable.
    fn reading(mut self, paths: &[&str]) -> Self {
        self.read = paths.iter().map(|p| home_path(p)).collect();
        self
    }

    /// The argv for one run. With a model (the gate's, else the adapter's
    /// default) every `{model}` is replaced. Without one, a `{model}`
    /// argument that follows a flag (`--model {model}`) is dropped together
    /// with the flag; a `{model}` anywhere else makes the model required.
    pub fn argv(&self, name: &str, model: Option<&str>) -> Result<Vec<String>, String> {
        let model = model.or(self.default_model.as_deref());
        let mut argv: Vec<String> = Vec::with_capacity(self.command.len());
        for arg in &self.command {
            match model {
                Some(m) => argv.push(arg.replace("{model}", m)),
                None if arg.contains("{model}") => {
                    let follows_flag = arg == "{model}"
                        && argv.len() > 1
                        && argv.last().is_some_and(|prev| prev.starts_with('-'));
                    if !follows_flag {
                        return Err(format!(
                            "judge adapter '{name}' needs a model: the gate names none and the adapter has no default_model"
                        ));
                    }
                    argv.pop();
                }
                None => argv.push(arg.clone()),
            }
        }
        if argv.is_empty() {
            return Err(format!("judge adapter '{name}' has an empty command"));
        }
        Ok(argv)
    }
}

/// The adapters shipped with gatehost; `[judge.adapters.NAME]` in the
/// configuration adds adapters or replaces these by name.
pub fn default_adapters() -> BTreeMap<String, Adapter> {
    let mut m = BTreeMap::new();
    m.insert(
        "claude".into(),
        // A judge, not an agent: no settings but the user's own, no MCP
        // server, no tools, nothing kept (Claude Code 2.x flags).
        Adapter::new(
            &[
                "claude",
                "-p",
                "--model",
                "{model}",
                "--setting-sources",
                "user",
                "--strict-mcp-config",
                "--tools",
                "",
                "--no-session-persistence",
            ],
            &[
                "ANTHROPIC_API_KEY",
                "ANTHROPIC_AUTH_TOKEN",
                "ANTHROPIC_BASE_URL",
                "CLAUDE_CONFIG_DIR",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
                "CLAUDE_CODE_MAX_RETRIES",
                "DISABLE_AUTOUPDATER",
                "DISABLE_TELEMETRY",
                "XDG_CONFIG_HOME",
            ],
        )
        .reading(&["~/.claude", "~/.claude.json", "~/.config/anthropic"]),
    );
    m.insert(
        "codex".into(),
        Adapter::new(
            &["codex", "exec", "--model", "{model}", "-"],
            &[
                "OPENAI_API_KEY",
                "OPENAI_BASE_URL",
                "CODEX_HOME",
                "XDG_CONFIG_HOME",
            ],
        )
        .reading(&["~/.codex"]),
    );
    m.insert(
        "gemini".into(),
        Adapter::new(
            &["gemini", "--model", "{model}"],
            &["GEMINI_API_KEY", "GOOGLE_API_KEY", "XDG_CONFIG_HOME"],
        )
        .reading(&["~/.gemini"]),
    );
    m.insert(
        "llm".into(),
        Adapter::new(
            &["llm", "-m", "{model}"],
            &[
                "LLM_USER_PATH",
                "OPENAI_API_KEY",
                "ANTHROPIC_API_KEY",
                "XDG_CONFIG_HOME",
            ],
        )
        .reading(&["~/.config/io.datasette.llm"]),
    );
    m.insert(
        "ollama".into(),
        Adapter::new(&["ollama", "run", "{model}"], &["OLLAMA_HOST"]),
    );
    m
}
