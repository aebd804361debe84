//! The `[daemon]` section: as written ([`DaemonSection`], checked by
//! `HostConfig::from_toml`) and as `gatehost serve` uses it
//! ([`DaemonConfig`], with its documented defaults). It only holds
//! settings; it never reads a file or the workspace.

use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct DaemonSection {
    pub(super) enabled: Option<bool>,
    pub(super) max_gating: Option<usize>,
    pub(super) webhook_url: Option<String>,
    pub(super) webhook_secret_file: Option<String>,
    pub(super) webhook_timeout_ms: Option<u64>,
    pub(super) webhook_max_attempts: Option<u32>,
    pub(super) webhook_format: Option<super::webhooks::Format>,
    pub(super) webhook_events: Option<Vec<String>>,
    pub(super) notify_url: Option<String>,
    pub(super) notify_format: Option<super::webhooks::Format>,
    pub(super) notify_events: Option<Vec<String>>,
    #[serde(default)]
    pub(super) webhooks: Vec<WebhookSection>,
    pub(super) public_url: Option<String>,
    pub(super) agent_token_file: Option<String>,
    pub(super) operator_token_file: Option<String>,
    pub(super) default_nudge: Option<String>,
    #[serde(default)]
    pub(super) workspace_roots: Vec<String>,
    #[serde(default)]
    pub(super) notify_url_prefixes: Vec<String>,
    pub(super) notify_secret_file: Option<String>,
    pub(super) committer_name: Option<String>,
    pub(super) committer_email: Option<String>,
    pub(super) attach_timeout_ms: Option<u64>,
    pub(super) worktree_dir: Option<String>,
    pub(super) worktree_caches: Option<Vec<String>>,
    pub(super) worktree_overlay: Option<bool>,
    pub(super) max_long_polls: Option<usize>,
    #[serde(default)]
    pub(super) session_policies: Vec<super::session_policies::Section>,
    pub(super) heartbeat_timeout: Option<String>,
    pub(super) on_stale: Option<OnStale>,
    pub(super) infra_retries: Option<u32>,
    pub(super) infra_retry_backoff: Option<String>,
    pub(super) max_chain_depth: Option<u32>,
    pub(super) ack_requires: Option<AckRequires>,
}

/// One of `[[daemon.webhooks]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct WebhookSection {
    pub(super) url: String,
    #[serde(default)]
    pub(super) format: super::webhooks::Format,
    pub(super) events: Option<Vec<String>>,
}

/// What the watchdog does to the policies of a stale session
/// (`[daemon] on_stale`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnStale {
    /// `blocked`, with its reason: a person looks.
    #[default]
    Block,
    /// `cancelled`.
    Cancel,
}

/// What approving a policy takes (`[daemon] ack_requires`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AckRequires {
    /// The operator's token (the CLI's `ack --approve`, the page's login).
    #[default]
    Token,
    /// A fresh WebAuthn assertion, user verified, from a passkey the
    /// operator registered on the page, bound to the policy and the
    /// snapshot's tree: the token alone approves nothing.
    Passkey,
}

/// The most `infra_retries` may be.
pub(super) const MAX_INFRA_RETRIES: u32 = 10;

/// The most `max_chain_depth` may be.
pub(super) const MAX_CHAIN_DEPTH: u32 = 64;

/// Parses a `[daemon]` duration (humantime's: "30s", "10m"), at least
/// `min`; an error is the message.
pub(super) fn duration(text: &str, min: Duration) -> Result<Duration, String> {
    let d = humantime::parse_duration(text.trim())
        .map_err(|e| format!("'{text}' is not a duration ({e}); try \"30s\", \"10m\""))?;
    if d < min {
        return Err(format!(
            "'{text}' is too short: at least {}",
            humantime::format_duration(min)
        ));
    }
    Ok(d)
}

/// Settings of `gatehost serve` (the `[daemon]` section).
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    /// Whether new gates start (`enabled = false` pauses supervision:
    /// turn-ends are recorded, queued policies wait). Default true.
    pub enabled: bool,
    /// Policies gating at once, host-wide (FIFO beyond it).
    pub max_gating: usize,
    /// A webhook fired for every event (sessions may add their own).
    pub webhook_url: Option<String>,
    /// The operator's webhooks: `webhook_url` (every event, raw, unless
    /// `webhook_format`/`webhook_events` say otherwise), `notify_url`
    /// (the events where a person must act, for every session) and each
    /// `[[daemon.webhooks]]`, in that order; signed with
    /// `webhook_secret_file`.
    pub targets: Vec<super::webhooks::Target>,
    /// The events where a person must act, of every session, go here
    /// (its target is in `targets`, after `webhook_url`'s).
    pub notify_url: Option<String>,
    /// Where a person reaches this daemon's pages, for the links in
    /// notifications (default: the address `serve` listens on).
    pub public_url: Option<String>,
    /// File holding the HMAC-SHA256 key that signs webhook bodies.
    pub webhook_secret_file: Option<PathBuf>,
    /// One delivery attempt's timeout (`webhook_timeout_ms`, default 10 s).
    pub webhook_timeout: Duration,
    /// Attempts before a delivery is given up (default 8).
    pub webhook_max_attempts: u32,
    /// Token files; default `<data dir>/agent.token`, `<data dir>/operator.token`.
    pub agent_token_file: Option<PathBuf>,
    /// The operator token's file (see `agent_token_file`).
    pub operator_token_file: Option<PathBuf>,
    /// Nudge template used when a policy's `onFail.nudge` is absent.
    pub default_nudge: String,
    /// Where the agent token may register workspaces (canonical
    /// directories; none: nowhere, only the operator registers).
    pub workspace_roots: Vec<PathBuf>,
    /// A session's `notifyUrl` must be under one of these (none: no
    /// session webhooks); compared as parsed URLs ([`notify_url`]).
    pub notify_url_prefixes: Vec<super::NotifyPrefix>,
    /// Key signing session webhooks (default `<data dir>/notify.key`,
    /// made on first start); never the operator's webhook secret.
    pub notify_secret_file: Option<PathBuf>,
    /// Author and committer of gatehost's commits (never the repository's
    /// `user.name`, which the agent writes).
    pub committer: crate::commit::Committer,
    /// The longest an attach may spend checking its gates (reading and
    /// compiling a plugin); past it nothing is attached (503).
    pub attach_timeout: Duration,
    /// Where commit policies' gates run: host-owned checkouts of their
    /// snapshot (default `<data dir>.worktrees`, beside the data
    /// directory, never inside it: gates write there).
    pub worktree_dir: Option<PathBuf>,
    /// Directories of a worktree (relative to its root, such as `target`)
    /// kept between runs of the operator's commit policies on one
    /// workspace; everything else a gate wrote there is removed before
    /// the next run. None by default.
    pub worktree_caches: Vec<String>,
    /// Whether a commit policy's gates see their worktree through an
    /// overlay of their run's own (Linux, the sandbox confining gates), so
    /// that nothing they write reaches it and it is never read back after
    /// a run. On by default; off, the worktree is settled back after each
    /// run.
    pub worktree_overlay: bool,
    /// Long-polls waiting at once (None: half the `nofile` soft limit,
    /// never more); past it one is answered 503 `too-many-waiters`.
    pub max_long_polls: Option<usize>,
    /// Rules attaching a policy to each new or idle session they match
    /// (`[[daemon.session_policies]]`), their policy files read at load.
    pub session_policies: Vec<super::SessionPolicy>,
    /// A session silent this long (no report, hook call or heartbeat; a
    /// session the daemon started: its process gone quiet is not enough,
    /// its process must be gone) is stale. `None`: no watchdog.
    pub heartbeat_timeout: Option<Duration>,
    /// What a stale session's watching policies become.
    pub on_stale: OnStale,
    /// Times a gate that could not run is tried again before its policy
    /// is blocked as `error` (a gate's "no" is never retried).
    pub infra_retries: u32,
    /// The first retry's wait; each next one waits twice as long (at
    /// most a minute).
    pub infra_retry_backoff: Duration,
    /// The most automatic continuations one attach may lead to: its
    /// `next` links and the `review.maxCycles` of every policy of its
    /// chain, counted together (an attach over it is refused, naming the
    /// field where the count crossed it).
    pub max_chain_depth: u32,
    /// What approving a policy takes (rejecting, cancelling and requesting
    /// changes always take the operator's token alone).
    pub ack_requires: AckRequires,
}

/// `[daemon] default_nudge` when not given: the nudge a failed gate sends
/// when its policy gives none (`{gate}`, `{code}`, `{reason}`, `{findings}`
/// and `{output}` are filled in).
pub const DEFAULT_NUDGE: &str = "The gate {gate} did not pass ({code}): {reason}\n{findings}{output}\nFix this and end your turn again.";

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            enabled: true,
            max_gating: 8,
            webhook_url: None,
            targets: Vec::new(),
            notify_url: None,
            public_url: None,
            webhook_secret_file: None,
            webhook_timeout: Duration::from_secs(10),
            webhook_max_attempts: 8,
            agent_token_file: None,
            operator_token_file: None,
            default_nudge: DEFAULT_NUDGE.to_string(),
            workspace_roots: Vec::new(),
            notify_url_prefixes: Vec::new(),
            notify_secret_file: None,
            committer: crate::commit::Committer::default(),
            attach_timeout: Duration::from_secs(120),
            worktree_dir: None,
            worktree_caches: Vec::new(),
            worktree_overlay: true,
            max_long_polls: None,
            session_policies: Vec::new(),
            heartbeat_timeout: None,
            on_stale: OnStale::Block,
            infra_retries: 2,
            infra_retry_backoff: Duration::from_secs(1),
            max_chain_depth: 16,
            ack_requires: AckRequires::Token,
        }
    }
}

/// The operator's webhooks as configured (see [`DaemonConfig::targets`]);
/// an error names the key.
pub(super) fn targets(d: &DaemonSection) -> Result<Vec<super::webhooks::Target>, (String, String)> {
    use super::webhooks::{Format, Target};
    let mut out = Vec::new();
    let at = |key: &str| {
        let key = key.to_string();
        move |m: String| (key, m)
    };
    if let Some(url) = &d.webhook_url {
        if let Some(events) = &d.webhook_events {
            super::webhooks::EventSet::parse(events).map_err(at("daemon.webhook_events"))?;
        }
        out.push(
            Target::new(
                url.clone(),
                d.webhook_format.unwrap_or_default(),
                d.webhook_events.as_deref(),
                false,
            )
            .map_err(at("daemon.webhook_url"))?,
        );
    } else if d.webhook_format.is_some() || d.webhook_events.is_some() {
        return Err((
            "daemon.webhook_format".into(),
            "is set without daemon.webhook_url".into(),
        ));
    }
    if let Some(url) = &d.notify_url {
        if let Some(events) = &d.notify_events {
            super::webhooks::EventSet::parse(events).map_err(at("daemon.notify_events"))?;
        }
        out.push(
            Target::new(
                url.clone(),
                d.notify_format.unwrap_or(Format::Raw),
                d.notify_events.as_deref(),
                true,
            )
            .map_err(at("daemon.notify_url"))?,
        );
    } else if d.notify_format.is_some() || d.notify_events.is_some() {
        return Err((
            "daemon.notify_format".into(),
            "is set without daemon.notify_url".into(),
        ));
    }
    for (i, w) in d.webhooks.iter().enumerate() {
        if let Some(events) = &w.events {
            super::webhooks::EventSet::parse(events)
                .map_err(at(&format!("daemon.webhooks[{i}].events")))?;
        }
        out.push(
            Target::new(w.url.clone(), w.format, w.events.as_deref(), false)
                .map_err(at(&format!("daemon.webhooks[{i}].url")))?,
        );
    }
    Ok(out)
}
