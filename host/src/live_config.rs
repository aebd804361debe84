//! Live configuration of `gatehost serve`: what `serve` makes of a loaded
//! configuration before it uses it (its data directory's places, and the
//! checks that stop a start), what differs between two configurations,
//! which settings keep their old value until a restart, the typed payloads
//! of the `config:reloaded` and `config:rejected` events, which changes
//! would weaken a guarantee and are held until a restart (`weakening`,
//! with its `config:held` attention event), and noticing that the
//! configuration file changed.
//!
//! It owns those rules only. It must never swap the engine's configuration
//! (`Engine::reconfigure` does, whole, once this module checked it), and
//! never hand on a configuration it has not checked whole.

use crate::config::HostConfig;
use crate::engine::Engine;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub mod weakening;

/// How often the configuration file's metadata is looked at.
pub const POLL_EVERY: Duration = Duration::from_millis(500);

pub use crate::model::event::Trigger;
use crate::model::event::{ConfigEvent as Typed, Event};

/// The daemon-wide configuration events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigEvent {
    Reloaded,
    Rejected,
    /// A weakening of a guarantee, kept out of force until a restart.
    Held,
}

impl ConfigEvent {
    pub const ALL: [ConfigEvent; 3] = [
        ConfigEvent::Reloaded,
        ConfigEvent::Rejected,
        ConfigEvent::Held,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ConfigEvent::Reloaded => "config:reloaded",
            ConfigEvent::Rejected => "config:rejected",
            ConfigEvent::Held => weakening::HELD_EVENT,
        }
    }
}

pub use crate::model::event::{ConfigRejected, ConfigReloaded};

/// Reads the configuration at `path` (the defaults for `None`) and makes
/// of it what `serve` uses, with every check that stops a start.
pub fn load_for_serve(path: Option<&Path>, data_dir: &Path) -> Result<HostConfig, String> {
    let mut config = HostConfig::load(path).map_err(|e| e.to_string())?;
    prepare(&mut config, data_dir)?;
    Ok(config)
}

/// [`load_for_serve`] for a reload, which also refuses a file that sets
/// nothing (empty, or only comments and blank lines): a file caught while
/// it was being rewritten, or emptied by mistake, would otherwise put the
/// defaults in force live (no allowlist, no workspace roots). To go back
/// to the defaults, restart `serve`.
pub fn load_for_reload(path: &Path, data_dir: &Path) -> Result<HostConfig, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if text.parse::<toml::Table>().is_ok_and(|t| t.is_empty()) {
        return Err(format!(
            "{} sets nothing (it is empty, or only comments): a reload never empties the configuration in force; to run on the defaults, restart gatehost serve",
            path.display()
        ));
    }
    load_for_serve(Some(path), data_dir)
}

/// What `serve` adds to a loaded configuration (its data directory's
/// places), and the checks of the whole that stop a start (and reject a
/// reload): workspace roots clear of the host's places, session policies
/// that parse.
pub fn prepare(config: &mut HostConfig, data_dir: &Path) -> Result<(), String> {
    // The data directory (store, tokens, URL) is never a gate's to reach;
    // gates' private directories live in it, owner-only.
    config.sandbox.protect.push(data_dir.to_path_buf());
    // (Not with [sandbox] user: the data directory is closed to that user.)
    if config.daemon.worktree_dir.is_none() {
        let mut name = data_dir
            .file_name()
            .map(|n| n.to_os_string())
            .unwrap_or_else(|| "gatehost".into());
        name.push(".worktrees");
        config.daemon.worktree_dir = Some(data_dir.with_file_name(name));
    }
    if config.sandbox.scratch_dir.is_none() && config.sandbox.user.is_none() {
        config.sandbox.scratch_dir = Some(data_dir.join("scratch"));
    }
    if let Some(worktrees) = &config.daemon.worktree_dir
        && let Some(why) = inside_a_project(worktrees, data_dir)
    {
        return Err(why);
    }
    // A root that holds (or lies inside) the host's own places would let
    // the agent register a workspace around them.
    let places = config.host_places();
    for root in &config.daemon.workspace_roots {
        let shown = std::fs::canonicalize(root).unwrap_or_else(|_| root.clone());
        if let Some(place) = crate::config::overlapping_place(&shown, &places) {
            return Err(format!(
                "[daemon] workspace_roots: {} overlaps gatehost's own {} (its data directory, tokens, configuration, cache, scratch or worktrees); list the directories where agents work, apart from those",
                root.display(),
                place.display()
            ));
        }
    }
    // A session policy that cannot parse would be refused at every
    // registration: said now, once.
    for (i, rule) in config.daemon.session_policies.iter().enumerate() {
        let parsed = crate::model::attach::parse_input(rule.policy.clone());
        if let Err(e) = parsed {
            return Err(format!(
                "[[daemon.session_policies]] {i} ({}): {e}",
                rule.file.display()
            ));
        }
    }
    Ok(())
}

/// Build manifests whose tools look for more of the project in every
/// directory above the one they run in (cargo's workspace root, go's
/// `go.work`), and fail when one there cannot be read.
const WALKED_UP_MANIFESTS: &[&str] = &["Cargo.toml", "go.work"];

/// Why the worktree directory (where commit policies' gates run, on their
/// snapshot) cannot be where it is: a directory above it holds a manifest
/// of [`WALKED_UP_MANIFESTS`], which a gate's cargo or go would read and
/// the sandbox denies, so every such gate would fail as if the agent's
/// tests did (a data directory made in a project's checkout, such as
/// `--data-dir ./gh-data` in gatehost's own).
fn inside_a_project(worktrees: &Path, data_dir: &Path) -> Option<String> {
    let canonical = crate::config::canonical_places(&[worktrees.to_path_buf()]);
    let at = canonical.first().map_or(worktrees, PathBuf::as_path);
    let (dir, manifest) = at
        .ancestors()
        .skip(1)
        .filter(|d| d.parent().is_some())
        .find_map(|d| {
            WALKED_UP_MANIFESTS
                .iter()
                .map(|m| d.join(m))
                .find(|m| m.exists())
                .map(|m| (d.to_path_buf(), m))
        })?;
    Some(format!(
        "the worktree directory {} (where commit policies' gates run) lies inside the project {}: a gate's cargo or go there reads {}, which the sandbox denies, so every such gate would fail; \
         start serve with its data directory outside every project (now {}; for example the default, ~/.local/share/gatehost, or a directory made by `mktemp -d`), or set [daemon] worktree_dir outside it",
        at.display(),
        dir.display(),
        manifest.display(),
        data_dir.display()
    ))
}

/// A setting as compared: its name, whether a change needs a restart, and
/// its value as text (every configuration type's `Debug`, whose maps are
/// ordered).
struct Setting {
    name: String,
    restart: bool,
    value: String,
}

fn settings(c: &HostConfig) -> Vec<Setting> {
    fn s(name: &str, restart: bool, value: impl std::fmt::Debug) -> Setting {
        Setting {
            name: name.to_string(),
            restart,
            value: format!("{value:?}"),
        }
    }
    let d = &c.daemon;
    let mut out = vec![
        s("shell.allow", false, &c.allow),
        s("shell.pass_env", false, &c.pass_env),
        s("judge.slots", true, c.judge_slots),
        s("judge.max_context_bytes", false, c.max_context_bytes),
        s("limits.output_cap_bytes", false, c.output_cap),
        s("limits.kill_grace_ms", false, c.kill_grace),
        s("limits.gate_memory_bytes", false, c.gate_limits.memory),
        s("limits.gate_pids", false, c.gate_limits.pids),
        s("limits.gate_file_bytes", false, c.gate_limits.file_bytes),
        s(
            "limits.change_file_cap_bytes",
            false,
            c.change_caps.file_bytes,
        ),
        s("limits.change_cap_bytes", false, c.change_caps.total_bytes),
        // Live: read at each snapshot (0 turns the watch off at the next);
        // a watch's budget is set when it is made.
        s(
            "limits.watch_dirs_per_workspace",
            false,
            c.watch_limits.per_workspace,
        ),
        s("limits.watch_dirs_total", false, c.watch_limits.total),
        s("wasm", true, &c.wasm),
        s("sandbox", true, &c.sandbox),
        s("retention", true, &c.retention),
        // The store is opened once, at start.
        s("store", true, &c.store),
        s("hook", false, &c.hook),
        // Read when an agent starts: applies to the agents started next.
        s("agents", false, &c.agents),
        s("daemon.enabled", false, d.enabled),
        s("daemon.max_gating", true, d.max_gating),
        // Each operator webhook with its format and events; `targets` is
        // webhook_url's, notify_url's, then [[daemon.webhooks]].
        s(
            "daemon.webhook_url",
            false,
            d.webhook_url.as_ref().and(d.targets.first()),
        ),
        s(
            "daemon.notify_url",
            false,
            d.notify_url
                .as_ref()
                .and(d.targets.get(usize::from(d.webhook_url.is_some()))),
        ),
        s(
            "daemon.webhooks",
            false,
            d.targets
                .get(usize::from(d.webhook_url.is_some()) + usize::from(d.notify_url.is_some())..),
        ),
        s("daemon.public_url", false, &d.public_url),
        s("daemon.webhook_secret_file", true, &d.webhook_secret_file),
        s("daemon.webhook_timeout_ms", true, d.webhook_timeout),
        s("daemon.webhook_max_attempts", true, d.webhook_max_attempts),
        s("daemon.agent_token_file", true, &d.agent_token_file),
        s("daemon.operator_token_file", true, &d.operator_token_file),
        s("daemon.default_nudge", false, &d.default_nudge),
        s("daemon.workspace_roots", false, &d.workspace_roots),
        s("daemon.notify_url_prefixes", false, &d.notify_url_prefixes),
        s("daemon.notify_secret_file", true, &d.notify_secret_file),
        s("daemon.committer_name", false, &d.committer.name),
        s("daemon.committer_email", false, &d.committer.email),
        s("daemon.attach_timeout_ms", false, d.attach_timeout),
        s("daemon.worktree_dir", true, &d.worktree_dir),
        s("daemon.worktree_caches", true, &d.worktree_caches),
        s("daemon.worktree_overlay", false, d.worktree_overlay),
        s("daemon.max_long_polls", true, d.max_long_polls),
        s("daemon.session_policies", false, &d.session_policies),
        s("daemon.heartbeat_timeout", false, d.heartbeat_timeout),
        s("daemon.on_stale", false, d.on_stale),
        s("daemon.infra_retries", false, d.infra_retries),
        s("daemon.infra_retry_backoff", false, d.infra_retry_backoff),
        s("daemon.max_chain_depth", false, d.max_chain_depth),
        s("daemon.ack_requires", false, d.ack_requires),
    ];
    for (name, adapter) in &c.adapters {
        out.push(s(&format!("judge.adapters.{name}"), false, adapter));
    }
    out
}

/// What a reload changes: every setting whose value differs, in the order
/// of the configuration file's sections (adapters by name), and those of
/// them that need a restart.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    pub changed: Vec<String>,
    pub needs_restart: Vec<String>,
}

/// The settings of `new` that differ from `old`'s (an adapter added or
/// removed differs).
pub fn diff(old: &HostConfig, new: &HostConfig) -> Changes {
    let before = settings(old);
    let after = settings(new);
    let mut out = Changes::default();
    let value_in = |list: &[Setting], name: &str| {
        list.iter()
            .find(|s| s.name == name)
            .map(|s| s.value.clone())
    };
    let mut names: Vec<&Setting> = after.iter().collect();
    // An adapter only the old configuration had.
    names.extend(
        before
            .iter()
            .filter(|b| value_in(&after, &b.name).is_none()),
    );
    for s in names {
        if value_in(&before, &s.name) != value_in(&after, &s.name) {
            out.changed.push(s.name.clone());
            if s.restart {
                out.needs_restart.push(s.name.clone());
            }
        }
    }
    out
}

/// Puts `old`'s value back into `new` for every setting named in
/// `needs_restart` (those [`diff`] says need a restart): it stays in force
/// until the daemon restarts.
pub fn keep_until_restart(old: &HostConfig, new: &mut HostConfig, needs_restart: &[String]) {
    for name in needs_restart {
        let (o, n) = (&old.daemon, &mut new.daemon);
        match name.as_str() {
            "judge.slots" => new.judge_slots = old.judge_slots,
            "wasm" => new.wasm = old.wasm.clone(),
            "sandbox" => new.sandbox = old.sandbox.clone(),
            "retention" => new.retention = old.retention.clone(),
            "store" => new.store = old.store.clone(),
            "daemon.max_gating" => n.max_gating = o.max_gating,
            "daemon.webhook_secret_file" => n.webhook_secret_file = o.webhook_secret_file.clone(),
            "daemon.webhook_timeout_ms" => n.webhook_timeout = o.webhook_timeout,
            "daemon.webhook_max_attempts" => n.webhook_max_attempts = o.webhook_max_attempts,
            "daemon.agent_token_file" => n.agent_token_file = o.agent_token_file.clone(),
            "daemon.operator_token_file" => n.operator_token_file = o.operator_token_file.clone(),
            "daemon.notify_secret_file" => n.notify_secret_file = o.notify_secret_file.clone(),
            "daemon.worktree_dir" => n.worktree_dir = o.worktree_dir.clone(),
            "daemon.worktree_caches" => n.worktree_caches = o.worktree_caches.clone(),
            "daemon.max_long_polls" => n.max_long_polls = o.max_long_polls,
            other => {
                tracing::error!(
                    setting = other,
                    "a setting said to need a restart has no way to keep its old value; the new one applies"
                );
            }
        }
    }
}

/// What is looked at to notice that the configuration file changed: its
/// device and inode (an editor's rename over it), times and size, as
/// `stat` follows a symlink (a link switched to another file). `None`: it
/// cannot be read now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStamp(Option<(u64, u64, i64, i64, i64, i64, u64)>);

impl FileStamp {
    pub fn of(path: &Path) -> FileStamp {
        use std::os::unix::fs::MetadataExt;
        FileStamp(std::fs::metadata(path).ok().map(|m| {
            (
                m.dev(),
                m.ino(),
                m.mtime(),
                m.mtime_nsec(),
                m.ctime(),
                m.ctime_nsec(),
                m.size(),
            )
        }))
    }
}

/// The configuration file's path as events and logs show it.
pub fn shown(path: &Path) -> String {
    path.display().to_string()
}

/// Reads the configuration at `path` again and puts it in force, with a
/// `config:reloaded` event naming what changed; or, when it does not load
/// or does not pass `serve`'s checks, keeps the one in force and stores
/// `config:rejected` with the reason. Either is logged.
pub async fn reload(engine: &Engine, path: &Path, data_dir: &Path, trigger: Trigger) {
    let (p, d) = (path.to_path_buf(), data_dir.to_path_buf());
    let loaded = tokio::task::spawn_blocking(move || load_for_reload(&p, &d))
        .await
        .unwrap_or_else(|e| Err(format!("the reload task failed: {e}")));
    let source = shown(path);
    let mut new = match loaded {
        Ok(new) => new,
        Err(reason) => {
            tracing::error!(config = %source, ?trigger, %reason, "configuration rejected; the one in force is kept");
            let payload = ConfigRejected {
                source,
                trigger,
                reason,
            };
            if let Err(e) = engine.daemon_event(&Event::Config(Typed::Rejected(payload))) {
                tracing::error!(error = %e, "cannot store the config:rejected event");
            }
            return;
        }
    };
    let old = engine.runner();
    let changes = diff(old.config(), &new);
    keep_until_restart(old.config(), &mut new, &changes.needs_restart);
    let held = weakening::weakened(old.config(), &new);
    weakening::hold(old.config(), &mut new, &held);
    if !held.is_empty() {
        // Said (and stored) before the rest of the reload is in force.
        let reason = format!(
            "the configuration file lowers {}: the daemon keeps the stronger setting until it restarts (a file the daemon's user can write must not switch off what protects you; if you made this change, restart gatehost serve)",
            held.join(", ")
        );
        tracing::warn!(config = %source, ?trigger, held = %held.join(", "), %reason, "a weakening of the configuration is held until a restart");
        let payload = weakening::ConfigHeld {
            source: source.clone(),
            trigger,
            held: held.clone(),
            reason,
        };
        if let Err(e) = engine.daemon_event(&Event::Config(Typed::Held(payload))) {
            tracing::error!(error = %e, "cannot store the config:held event (the stronger setting is kept all the same)");
        }
    }
    tracing::info!(
        config = %source,
        ?trigger,
        changed = %changes.changed.join(", "),
        needs_restart = %changes.needs_restart.join(", "),
        enabled = new.daemon.enabled,
        "configuration reloaded"
    );
    for name in &changes.needs_restart {
        tracing::warn!(setting = %name, "changed in the configuration file, but it needs a restart: the old value stays in force until then");
    }
    let payload = ConfigReloaded {
        source,
        trigger,
        changed: changes.changed,
        needs_restart: changes.needs_restart,
        held,
        enabled: new.daemon.enabled,
    };
    if let Err(e) = engine.reconfigure(new, &Event::Config(Typed::Reloaded(payload))) {
        tracing::error!(error = %e, "the configuration is in force, but its config:reloaded event (or a paused policy's) could not be stored");
    }
}

/// Reloads on `hangup` (SIGHUP) and when the file at `path` changes from
/// `loaded` (its stamp taken before `serve` read it at start): its
/// [`FileStamp`] is looked at every [`POLL_EVERY`], and a change is read
/// once the stamp held still for one more look (a file being written in
/// place is not read half-way). Runs until the runtime stops. Without a
/// file (`serve` runs on the defaults) a SIGHUP is logged, nothing more.
pub async fn watch(
    engine: Engine,
    path: Option<PathBuf>,
    data_dir: PathBuf,
    mut hangup: tokio::signal::unix::Signal,
    loaded: Option<FileStamp>,
) {
    // A test hook: only SIGHUP reloads, so that a test knows its trigger.
    let poll = crate::test_hooks::config_poll();
    let mut applied = loaded;
    let mut seen = applied;
    let mut tick = tokio::time::interval(POLL_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        let trigger = tokio::select! {
            Some(()) = hangup.recv() => Trigger::Signal,
            _ = tick.tick(), if poll && path.is_some() => {
                let now = path.as_deref().map(FileStamp::of);
                let settled = now == seen;
                seen = now;
                if now == applied || !settled {
                    continue;
                }
                Trigger::File
            }
        };
        let Some(p) = &path else {
            tracing::warn!(
                "SIGHUP: gatehost serve runs on the built-in defaults (no configuration file); nothing to reload"
            );
            continue;
        };
        // Stamped before the read: a write after it is seen next time.
        applied = Some(FileStamp::of(p));
        seen = applied;
        reload(&engine, p, &data_dir, trigger).await;
    }
}

#[cfg(test)]
mod tests;
