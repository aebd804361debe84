//! The host configuration: the allowlist, judge adapters, slots and limits.
//!
//! Read from TOML outside the workspace (`--config`, else `$GATEHOST_CONFIG`,
//! else `<user config dir>/gatehost/config.toml`); with none, the
//! documented defaults apply and the allowlist is empty. Names in the
//! allowlist are looked up on the host's PATH once, here, at load.
//!
//! It must never read anything from the workspace: the supervised agent
//! writes there.

mod adapters;
pub mod agents;
mod allow;
pub mod code_env;
mod daemon;
mod diagnose;
mod hook;
mod limits;
pub use limits::WatchLimits;
pub mod notify_url;
mod places;
mod retention;
pub mod session_policies;
mod store;
mod wasm;
pub mod webhooks;

use adapters::JudgeSection;
pub use adapters::{Adapter, default_adapters};
pub use allow::{AllowEntry, AllowError, Allowlist, ArgRule, EntrySpec, Trust};
use daemon::DaemonSection;
pub use daemon::{AckRequires, DEFAULT_NUDGE, DaemonConfig, OnStale};
pub use hook::HookConfig;
pub use notify_url::NotifyPrefix;
pub use places::{canonical_places, overlapping_place};
pub use retention::Retention;
pub use session_policies::SessionPolicy;
pub use store::{
    DEFAULT_GRACE, DEFAULT_LEASE, MIN_LEASE, PASSWORD_ENV, PasswordError, PostgresConfig,
    StoreConfig,
};
use wasm::WasmSection;
pub use wasm::{PluginBounds, WasmConfig};

use crate::sandbox::SandboxConfig;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `[judge] slots` when not given: judges running at once, host-wide.
pub(crate) const DEFAULT_JUDGE_SLOTS: usize = 4;
/// `[limits] output_cap_bytes` when not given: the bytes of each gate output
/// stream kept (its tail).
pub(crate) const DEFAULT_OUTPUT_CAP: usize = 1024 * 1024;
/// `[limits] kill_grace_ms` when not given: from a gate's SIGTERM to its
/// SIGKILL.
pub(crate) const DEFAULT_KILL_GRACE_MS: u64 = 2000;
/// `[judge] max_context_bytes` when not given: longer context material for a
/// judge is cut (its head kept).
pub(crate) const DEFAULT_MAX_CONTEXT_BYTES: usize = 256 * 1024;
/// The smallest `[limits] gate_memory_bytes` and `gate_file_bytes` (and
/// `gate_scratch_bytes`) other than 0 (off): a smaller value is a unit
/// mistake, and no gate could run.
pub const MIN_GATE_MEMORY: u64 = 16 * 1024 * 1024;
/// The smallest `[limits] gate_file_bytes` and `gate_scratch_bytes` other
/// than 0 (off): a smaller value is a unit mistake.
pub(crate) const MIN_GATE_FILE_BYTES: u64 = 1024 * 1024;

/// Why the host configuration could not be loaded: the file unreadable, not
/// TOML of the right shape, a name it does not know, or a value refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read configuration {path}: {source}")]
    Read {
        /// The configuration file's path.
        path: String,
        /// Why it could not be read.
        source: std::io::Error,
    },
    /// The file is not TOML, or not of the configuration's shape.
    #[error("configuration {path}: {message}")]
    Parse {
        /// The configuration file's path.
        path: String,
        /// The parser's message.
        message: String,
        /// The key at fault (`daemon.listen`), when the error names one.
        key: Option<String>,
    },
    /// A table or key the configuration has no such name for, at the top
    /// of the file (`[sandox]`).
    #[error("unknown {kind} `{name}` in {path} line {line}{}", diagnose::did_you_mean(.suggestion))]
    Unknown {
        /// The configuration file's path.
        path: String,
        /// `table` or `key`.
        kind: &'static str,
        /// The name as written.
        name: String,
        /// Its line in the file, from 1.
        line: usize,
        /// The known name it is closest to, if one is close.
        suggestion: Option<String>,
    },
    /// A value the configuration refuses.
    #[error("configuration {path}: {key}: {message}")]
    Invalid {
        /// The configuration file's path.
        path: String,
        /// The setting at fault (`judge.slots`, `shell.allow[2]`).
        key: String,
        /// Why it is refused.
        message: String,
    },
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    shell: ShellSection,
    #[serde(default)]
    judge: JudgeSection,
    #[serde(default)]
    limits: limits::LimitsSection,
    #[serde(default)]
    wasm: WasmSection,
    #[serde(default)]
    daemon: DaemonSection,
    #[serde(default)]
    sandbox: SandboxSection,
    #[serde(default)]
    retention: retention::RetentionSection,
    #[serde(default)]
    hook: hook::HookSection,
    #[serde(default)]
    agents: agents::AgentsSection,
    #[serde(default)]
    store: store::StoreSection,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SandboxSection {
    enabled: Option<bool>,
    required: Option<bool>,
    #[serde(default)]
    read: Vec<String>,
    #[serde(default)]
    write: Vec<String>,
    user: Option<String>,
    scratch_dir: Option<String>,
    spawn: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ShellSection {
    #[serde(default)]
    allow: Vec<toml::Value>,
    #[serde(default)]
    pass_env: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct AllowRuleFile {
    program: String,
    subcommands: Option<Vec<String>>,
    #[serde(default)]
    deny: Vec<String>,
    #[serde(default)]
    free_args: bool,
    #[serde(default)]
    network: bool,
    /// Variables a gate the agent attached may set (exact names).
    #[serde(default)]
    env: Vec<String>,
}

/// A configured path: `~/…` names the host user's home.
fn home_path(p: &str) -> PathBuf {
    match (p.strip_prefix("~/"), dirs::home_dir()) {
        (Some(rest), Some(home)) => home.join(rest),
        _ => PathBuf::from(p),
    }
}

/// The resolved host configuration.
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// The file it was read from; `None` for the built-in defaults.
    pub source: Option<PathBuf>,
    /// The programs gates may run, and their argument rules (`[shell] allow`).
    pub allow: Allowlist,
    /// Judges running at once, host-wide (`[judge] slots`).
    pub judge_slots: usize,
    /// Context material longer than this is cut before a judge sees it
    /// (`[judge] max_context_bytes`).
    pub max_context_bytes: usize,
    /// The judge adapters by name (`[judge.adapters.NAME]`, and the built-in
    /// ones).
    pub adapters: BTreeMap<String, Adapter>,
    /// The bytes kept of each gate output stream, its tail (`[limits]
    /// output_cap_bytes`).
    pub output_cap: usize,
    /// From a gate's SIGTERM to its SIGKILL (`[limits] kill_grace_ms`).
    pub kill_grace: Duration,
    /// The bounds of a change set handed to judges and plugins (`[limits]
    /// change_file_cap_bytes`, `change_cap_bytes`): past them a file's
    /// content is left out, listed and said in the verdict.
    pub change_caps: crate::change::ChangeCaps,
    /// The watches of commit paths between turns (`[limits]`).
    pub watch_limits: WatchLimits,
    /// Memory, processes, file size and scratch of each gate's process
    /// tree (`[limits] gate_memory_bytes`, `gate_pids`, `gate_file_bytes`,
    /// `gate_scratch_bytes`; 0 turns one off).
    pub gate_limits: crate::supervise::GateLimits,
    /// The host PATH captured at load: programs are looked up on it, and
    /// gates receive it.
    pub host_path: Option<OsString>,
    /// The WASM plugins' bounds and places (`[wasm]`).
    pub wasm: WasmConfig,
    /// The daemon's settings (`[daemon]`).
    pub daemon: DaemonConfig,
    /// Standalone hooks' settings (`[hook]`).
    pub hook: HookConfig,
    /// The sandbox gates and agents run in (`[sandbox]`).
    pub sandbox: SandboxConfig,
    /// The agents the daemon starts (`[agents]`).
    pub agents: agents::AgentsConfig,
    /// What `serve` keeps (`[retention]`).
    pub retention: Retention,
    /// Where `serve` keeps it (`[store]`): SQLite unless a PostgreSQL URL.
    pub store: StoreConfig,
    /// Host environment variables a gate's `env: [NAMES]` may pass
    /// through (`[shell] pass_env`); no other name is handed to a gate.
    pub pass_env: Vec<String>,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            source: None,
            allow: Allowlist::default(),
            judge_slots: DEFAULT_JUDGE_SLOTS,
            max_context_bytes: DEFAULT_MAX_CONTEXT_BYTES,
            adapters: default_adapters(),
            output_cap: DEFAULT_OUTPUT_CAP,
            kill_grace: Duration::from_millis(DEFAULT_KILL_GRACE_MS),
            change_caps: crate::change::ChangeCaps::default(),
            watch_limits: WatchLimits::default(),
            gate_limits: crate::supervise::GateLimits::default(),
            host_path: std::env::var_os("PATH"),
            wasm: WasmConfig::default(),
            daemon: DaemonConfig::default(),
            hook: HookConfig::default(),
            sandbox: SandboxConfig::default(),
            agents: agents::AgentsConfig::default(),
            retention: Retention::default(),
            store: StoreConfig::default(),
            pass_env: Vec::new(),
        }
    }
}

impl HostConfig {
    /// The host's private paths this configuration names: no gate may
    /// reach them (the configuration file, token and secret files, the
    /// store's password file, the compiled-plugin cache, and what
    /// `[sandbox] protect` adds).
    pub fn private_paths(&self) -> Vec<PathBuf> {
        let d = &self.daemon;
        self.source
            .iter()
            .chain(d.agent_token_file.iter())
            .chain(d.operator_token_file.iter())
            .chain(d.webhook_secret_file.iter())
            .chain(d.notify_secret_file.iter())
            .chain(self.hook.notify_secret_file.iter())
            .chain(self.store.postgres.iter().flat_map(|p| &p.password_file))
            .chain(self.wasm.cache_dir.iter())
            .chain(self.sandbox.protect.iter())
            .cloned()
            .collect()
    }

    /// Where gates' private directories are made: `[sandbox] scratch_dir`,
    /// else a default (`crate::sandbox::scratch_root_of`).
    pub fn scratch_root(&self) -> Option<PathBuf> {
        crate::sandbox::scratch_root_of(&self.sandbox)
    }

    /// The host's own places that no gate may run in: the private paths
    /// (configuration, tokens, cache, data directory) and the scratch root.
    pub fn gate_free_places(&self) -> Vec<PathBuf> {
        let mut places = self.private_paths();
        places.extend(self.scratch_root());
        places
    }

    /// The host's own places that no workspace may hold or lie inside:
    /// those of [`Self::gate_free_places`] and the worktree directory
    /// (gates run in its checkouts, but an agent's workspace there could
    /// reach the others').
    pub fn host_places(&self) -> Vec<PathBuf> {
        let mut places = self.gate_free_places();
        places.extend(self.daemon.worktree_dir.clone());
        // A session policy's file decides what gates the agent's work.
        places.extend(self.daemon.session_policies.iter().map(|r| r.file.clone()));
        places
    }

    /// Where the configuration comes from: the explicit path, else
    /// `$GATEHOST_CONFIG`, else the user's config file if it exists.
    pub fn locate(explicit: Option<&Path>) -> Option<PathBuf> {
        if let Some(p) = explicit {
            return Some(p.to_path_buf());
        }
        if let Some(p) = std::env::var_os("GATEHOST_CONFIG").filter(|p| !p.is_empty()) {
            return Some(PathBuf::from(p));
        }
        let user = dirs::config_dir()?.join("gatehost").join("config.toml");
        user.is_file().then_some(user)
    }

    /// Loads the configuration from `path`, or the defaults for `None`.
    pub fn load(path: Option<&Path>) -> Result<Self, ConfigError> {
        let Some(path) = path else {
            return Ok(HostConfig::default());
        };
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: shown.clone(),
            source,
        })?;
        let mut config = Self::from_toml(&text, &shown)?;
        // `{config_dir}` in an adapter command names the directory of this
        // file, so a configuration can ship its own judge scripts.
        let dir = std::fs::canonicalize(path)
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf))
            .unwrap_or_default();
        let dir = dir.display().to_string();
        for adapter in config.adapters.values_mut() {
            for arg in &mut adapter.command {
                if arg.contains("{config_dir}") {
                    *arg = arg.replace("{config_dir}", &dir);
                }
            }
        }
        let expand =
            |p: &Path| PathBuf::from(p.display().to_string().replace("{config_dir}", &dir));
        config.wasm.plugin_dirs = config.wasm.plugin_dirs.iter().map(|p| expand(p)).collect();
        config.wasm.cache_dir = config.wasm.cache_dir.as_deref().map(expand);
        for adapter in config.adapters.values_mut() {
            adapter.read = adapter.read.iter().map(|p| expand(p)).collect();
            adapter.write = adapter.write.iter().map(|p| expand(p)).collect();
        }
        let sb = &mut config.sandbox;
        sb.read = sb.read.iter().map(|p| expand(p)).collect();
        sb.write = sb.write.iter().map(|p| expand(p)).collect();
        sb.scratch_dir = sb.scratch_dir.as_deref().map(expand);
        let d = &mut config.daemon;
        d.webhook_secret_file = d.webhook_secret_file.as_deref().map(expand);
        config.hook.notify_secret_file = config.hook.notify_secret_file.as_deref().map(expand);
        d.agent_token_file = d.agent_token_file.as_deref().map(expand);
        d.operator_token_file = d.operator_token_file.as_deref().map(expand);
        d.notify_secret_file = d.notify_secret_file.as_deref().map(expand);
        d.workspace_roots = d.workspace_roots.iter().map(|p| expand(p)).collect();
        if let Some(pg) = &mut config.store.postgres {
            pg.password_file = pg.password_file.as_deref().map(expand);
        }
        for rule in &mut d.session_policies {
            rule.file = expand(&rule.file);
            rule.workspaces = rule.workspaces.iter().map(|p| expand(p)).collect();
        }
        session_policies::read_files(&mut d.session_policies, Path::new(&dir)).map_err(
            |(key, message)| ConfigError::Invalid {
                path: shown.clone(),
                key,
                message,
            },
        )?;
        config.source = Some(path.to_path_buf());
        Ok(config)
    }

    /// Parses configuration text; `shown` names it in errors.
    pub fn from_toml(text: &str, shown: &str) -> Result<Self, ConfigError> {
        let file: ConfigFile =
            toml::from_str(text).map_err(|e| match diagnose::top_level_unknown(text, &e) {
                Some(u) => ConfigError::Unknown {
                    path: shown.to_string(),
                    kind: u.kind,
                    name: u.name,
                    line: u.line,
                    suggestion: u.suggestion,
                },
                None => ConfigError::Parse {
                    path: shown.to_string(),
                    message: diagnose::toml_message(text, &e),
                    key: diagnose::toml_key(text, &e),
                },
            })?;
        let invalid = |key: &str, message: String| ConfigError::Invalid {
            path: shown.to_string(),
            key: key.to_string(),
            message,
        };
        let mut config = HostConfig::default();
        let mut specs: Vec<EntrySpec> = Vec::new();
        for (i, a) in file.shell.allow.into_iter().enumerate() {
            let key = format!("shell.allow[{i}]");
            specs.push(match a {
                toml::Value::String(n) => EntrySpec {
                    program: n,
                    args: ArgRule {
                        bare: true,
                        ..ArgRule::default()
                    },
                    network: false,
                    env: Vec::new(),
                },
                toml::Value::Table(t) => {
                    let r: AllowRuleFile = t.try_into().map_err(|e: toml::de::Error| {
                        invalid(&key, crate::suggest::with_suggestion(e.message()))
                    })?;
                    EntrySpec {
                        program: r.program,
                        args: ArgRule {
                            subcommands: r.subcommands,
                            deny: r.deny,
                            free: r.free_args,
                            bare: false,
                        },
                        network: r.network,
                        env: r.env,
                    }
                }
                other => {
                    return Err(invalid(
                        &key,
                        format!(
                            "an entry is a program name or a table {{ program = …, subcommands = […], deny = […], free_args = …, network = …, env = […] }}, not a {}",
                            other.type_str()
                        ),
                    ));
                }
            });
        }
        config.allow = Allowlist::resolve_entries(&specs, config.host_path.as_deref())
            .map_err(|m| invalid("shell.allow", m))?
            .with_source(shown);
        for name in &file.shell.pass_env {
            if name == PASSWORD_ENV {
                return Err(invalid(
                    "shell.pass_env",
                    format!("{name} is the store's password: it is never handed to a gate"),
                ));
            }
            if !crate::sandbox::settable_env_name(std::ffi::OsStr::new(name)) {
                return Err(invalid(
                    "shell.pass_env",
                    format!("'{name}' is set by gatehost itself and cannot be passed through"),
                ));
            }
        }
        config.pass_env = file.shell.pass_env;
        config.agents = file.agents.resolve(home_path);
        let sb = file.sandbox;
        config.sandbox = SandboxConfig {
            enabled: sb.enabled.unwrap_or(true),
            required: sb.required.unwrap_or(true),
            read: sb.read.iter().map(|p| home_path(p)).collect(),
            write: sb.write.iter().map(|p| home_path(p)).collect(),
            user: sb.user,
            scratch_dir: sb.scratch_dir.as_deref().map(home_path),
            protect: Vec::new(),
            spawn: match sb.spawn.as_deref() {
                None => Default::default(),
                Some(text) => crate::supervise::SpawnMode::parse(text).ok_or_else(|| {
                    invalid(
                        "sandbox.spawn",
                        format!(
                            "must be {}, not {text:?}",
                            crate::supervise::SpawnMode::ALLOWED
                        ),
                    )
                })?,
            },
        };
        if let Some(slots) = file.judge.slots {
            if slots == 0 {
                return Err(invalid("judge.slots", "must be at least 1".into()));
            }
            config.judge_slots = slots;
        }
        if let Some(n) = file.judge.max_context_bytes {
            config.max_context_bytes = n;
        }
        for (name, a) in file.judge.adapters {
            if a.env.iter().any(|v| v == PASSWORD_ENV) {
                return Err(invalid(
                    &format!("judge.adapters.{name}.env"),
                    format!(
                        "{PASSWORD_ENV} is the store's password: it is never handed to a judge"
                    ),
                ));
            }
            let key = format!("judge.adapters.{name}.command");
            if a.command.first().is_none_or(|c| c.trim().is_empty()) {
                return Err(invalid(&key, "must name a program".into()));
            }
            if a.command[0].contains('/') && !Path::new(&a.command[0]).is_absolute() {
                return Err(invalid(
                    &key,
                    "the program must be a bare name or an absolute path".into(),
                ));
            }
            config.adapters.insert(
                name,
                Adapter {
                    command: a.command,
                    env: a.env,
                    default_model: a.default_model,
                    read: a.read.iter().map(|p| home_path(p)).collect(),
                    write: a.write.iter().map(|p| home_path(p)).collect(),
                    network: a.network.unwrap_or(true),
                },
            );
        }
        file.limits
            .apply(&mut config)
            .map_err(|(key, message)| invalid(&key, message))?;
        file.retention
            .apply(&mut config.retention)
            .map_err(|(key, message)| invalid(&key, message))?;
        config.hook = file.hook.resolve().map_err(|(key, m)| invalid(&key, m))?;
        config.store = file.store.resolve().map_err(|(key, m)| invalid(&key, m))?;
        let dm = file.daemon;
        config.daemon.targets = daemon::targets(&dm).map_err(|(key, m)| invalid(&key, m))?;
        config.daemon.enabled = dm.enabled.unwrap_or(true);
        if let Some(n) = dm.max_gating {
            if n == 0 {
                return Err(invalid("daemon.max_gating", "must be at least 1".into()));
            }
            config.daemon.max_gating = n;
        }
        config.daemon.session_policies = session_policies::parse(dm.session_policies)
            .map_err(|(key, message)| invalid(&key, message))?;
        if let Some(n) = dm.max_long_polls {
            if n == 0 {
                return Err(invalid(
                    "daemon.max_long_polls",
                    "must be at least 1".into(),
                ));
            }
            config.daemon.max_long_polls = Some(n);
        }
        config.daemon.webhook_url = dm.webhook_url;
        config.daemon.notify_url = dm.notify_url;
        if let Some(url) = dm.public_url {
            if !(url.starts_with("http://") || url.starts_with("https://"))
                || reqwest::Url::parse(&url).is_err()
            {
                return Err(invalid(
                    "daemon.public_url",
                    "must be an http:// or https:// URL".into(),
                ));
            }
            config.daemon.public_url = Some(url.trim_end_matches('/').to_string());
        }
        config.daemon.webhook_secret_file = dm.webhook_secret_file.map(PathBuf::from);
        if let Some(ms) = dm.webhook_timeout_ms {
            if ms == 0 {
                return Err(invalid(
                    "daemon.webhook_timeout_ms",
                    "must be at least 1".into(),
                ));
            }
            config.daemon.webhook_timeout = Duration::from_millis(ms);
        }
        config.daemon.worktree_dir = dm.worktree_dir.as_deref().map(home_path);
        if let Some(caches) = dm.worktree_caches {
            for (i, c) in caches.iter().enumerate() {
                let p = Path::new(c);
                let plain = !c.is_empty()
                    && p.components()
                        .all(|k| matches!(k, std::path::Component::Normal(_)))
                    && !p.starts_with(".git");
                if !plain {
                    return Err(invalid(
                        &format!("daemon.worktree_caches[{i}]"),
                        format!(
                            "{c:?}: a directory relative to the worktree's root (no '..', '.', absolute path or .git)"
                        ),
                    ));
                }
            }
            config.daemon.worktree_caches = caches;
        }
        if let Some(overlay) = dm.worktree_overlay {
            config.daemon.worktree_overlay = overlay;
        }
        if let Some(text) = &dm.heartbeat_timeout {
            config.daemon.heartbeat_timeout = Some(
                daemon::duration(text, Duration::from_secs(1))
                    .map_err(|m| invalid("daemon.heartbeat_timeout", m))?,
            );
        }
        config.daemon.on_stale = dm.on_stale.unwrap_or_default();
        config.daemon.ack_requires = dm.ack_requires.unwrap_or_default();
        if let Some(n) = dm.infra_retries {
            if n > daemon::MAX_INFRA_RETRIES {
                return Err(invalid(
                    "daemon.infra_retries",
                    format!("{n} is too many: at most {}", daemon::MAX_INFRA_RETRIES),
                ));
            }
            config.daemon.infra_retries = n;
        }
        if let Some(n) = dm.max_chain_depth {
            if n == 0 || n > daemon::MAX_CHAIN_DEPTH {
                return Err(invalid(
                    "daemon.max_chain_depth",
                    format!("{n}: must be between 1 and {}", daemon::MAX_CHAIN_DEPTH),
                ));
            }
            config.daemon.max_chain_depth = n;
        }
        if let Some(text) = &dm.infra_retry_backoff {
            config.daemon.infra_retry_backoff =
                daemon::duration(text, Duration::from_millis(10))
                    .map_err(|m| invalid("daemon.infra_retry_backoff", m))?;
        }
        if let Some(ms) = dm.attach_timeout_ms {
            if ms == 0 {
                return Err(invalid(
                    "daemon.attach_timeout_ms",
                    "must be at least 1".into(),
                ));
            }
            config.daemon.attach_timeout = Duration::from_millis(ms);
        }
        if let Some(n) = dm.webhook_max_attempts {
            if n == 0 {
                return Err(invalid(
                    "daemon.webhook_max_attempts",
                    "must be at least 1".into(),
                ));
            }
            config.daemon.webhook_max_attempts = n;
        }
        config.daemon.agent_token_file = dm.agent_token_file.map(PathBuf::from);
        config.daemon.operator_token_file = dm.operator_token_file.map(PathBuf::from);
        if let Some(n) = dm.default_nudge {
            config.daemon.default_nudge = n;
        }
        config.daemon.workspace_roots = dm.workspace_roots.iter().map(|p| home_path(p)).collect();
        config.daemon.notify_url_prefixes = dm
            .notify_url_prefixes
            .iter()
            .enumerate()
            .map(|(i, p)| {
                NotifyPrefix::parse(p)
                    .map_err(|m| invalid(&format!("daemon.notify_url_prefixes[{i}]"), m))
            })
            .collect::<Result<_, _>>()?;
        let who = crate::commit::Committer {
            name: dm.committer_name.unwrap_or(config.daemon.committer.name),
            email: dm.committer_email.unwrap_or(config.daemon.committer.email),
        };
        crate::commit::Committer::check(&who.name, &who.email)
            .map_err(|m| invalid("daemon.committer_name", m))?;
        config.daemon.committer = who;
        config.daemon.notify_secret_file = dm.notify_secret_file.as_deref().map(home_path);
        file.wasm
            .apply(&mut config.wasm)
            .map_err(|(key, message)| invalid(key, message))?;
        Ok(config)
    }
}

#[cfg(test)]
mod tests;
