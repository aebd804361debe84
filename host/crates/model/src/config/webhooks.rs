//! The operator's webhooks as configured: where each points ([`Target`]),
//! which events it receives ([`EventSet`], by default every event for a raw
//! `webhook_url` and [`ATTENTION`] for a chat format or `notify_url`) and in
//! which shape ([`Format`]). Only settings: rendering and posting are the
//! `notify` and `webhook` modules'.

use serde::Deserialize;

/// The shape a webhook's receiver expects (`webhook_format`,
/// `notify_format`, `[[daemon.webhooks]] format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// The event as JSON (`{cursor, at, type, sessionId, policyId,
    /// payload}`), signed by the Standard Webhooks scheme.
    #[default]
    Raw,
    /// A Slack incoming webhook: `{"text": …}` in Slack's mrkdwn.
    Slack,
    /// A Discord webhook: `{"content": …, "allowed_mentions": {"parse": []}}`.
    Discord,
    /// An ntfy topic URL: the message as the body, `Title`, `Priority`,
    /// `Tags` and `Click` headers.
    Ntfy,
}

impl Format {
    /// Its name in the configuration (`raw`, `slack`, `discord`, `ntfy`).
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Raw => "raw",
            Format::Slack => "slack",
            Format::Discord => "discord",
            Format::Ntfy => "ntfy",
        }
    }

    /// Whether a person reads it (a chat or a phone), not a program.
    pub fn is_chat(self) -> bool {
        !matches!(self, Format::Raw)
    }
}

/// The events where a person must act: a policy blocked (out of retries,
/// a gate that could not run, a deadline or a stale session), a change
/// waiting for the operator's ack, a commit that failed, a chain that
/// escalated (`review:escalated`), an agent gone silent, an agent's
/// permission request waiting for the operator, a routine's step escalated
/// to the operator or a routine failed, a session policy or a `next` refused,
/// a configuration rejected, a weakening of the configuration held until a
/// restart (`config:held`), a passkey registered or removed (a person
/// should know who can approve), the tokens rotated (the same), a fleet's
/// host found dead or taken over.
/// The default of `notify_url` and of every chat format.
pub const ATTENTION: &[&str] = &[
    "policy:blocked",
    "policy:commit-ready",
    "policy:commit-failed",
    "policy:expired",
    "policy:next-refused",
    "review:escalated",
    "session:stale",
    "session:permission-escalated",
    "session:policy-refused",
    "session:ungated",
    "routine:escalated",
    "routine:failed",
    "config:rejected",
    "config:held",
    "passkey:registered",
    "passkey:removed",
    "passkey:reset",
    "host:stale",
    "host:taken-over",
    "tokens:rotated",
];

/// Which events a webhook receives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventSet {
    /// Every event.
    All,
    /// These full names (`policy:blocked`).
    Only(Vec<&'static str>),
}

impl EventSet {
    /// [`ATTENTION`].
    pub fn attention() -> Self {
        EventSet::Only(ATTENTION.to_vec())
    }

    /// The set `names` stand for: event names, full or short as event
    /// filters take them (`blocked`, `session:stale`), or `"*"` alone for
    /// every event; an unknown name is an error naming the known ones.
    pub fn parse(names: &[String]) -> Result<Self, String> {
        if names.iter().any(|n| n == "*") {
            if names.len() > 1 {
                return Err("\"*\" (every event) stands alone".into());
            }
            return Ok(EventSet::All);
        }
        if names.is_empty() {
            return Err("names no event: list some, or \"*\" for every event".into());
        }
        let mut out = Vec::new();
        for n in names {
            let full = crate::bus::full_type(n)?;
            if !out.contains(&full) {
                out.push(full);
            }
        }
        Ok(EventSet::Only(out))
    }

    /// Whether events of kind `kind` (a full name, `policy:blocked`) go to
    /// the webhook.
    pub fn contains(&self, kind: &str) -> bool {
        match self {
            EventSet::All => true,
            EventSet::Only(list) => list.contains(&kind),
        }
    }
}

/// One of the operator's webhooks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Where deliveries are POSTed.
    pub url: String,
    /// The body's shape (raw JSON or a chat message).
    pub format: Format,
    /// The event kinds it is sent.
    pub events: EventSet,
}

impl Target {
    /// A target whose events are `events` if given, else the default for
    /// its place: every event for a raw `webhook_url`, [`ATTENTION`] for a
    /// chat format or a `notify_url`.
    pub fn new(
        url: String,
        format: Format,
        events: Option<&[String]>,
        attention_by_default: bool,
    ) -> Result<Self, String> {
        let events = match events {
            Some(names) => EventSet::parse(names)?,
            None if attention_by_default || format.is_chat() => EventSet::attention(),
            None => EventSet::All,
        };
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err("must be an http:// or https:// URL".into());
        }
        reqwest::Url::parse(&url).map_err(|e| format!("'{url}' is not a URL: {e}"))?;
        Ok(Target {
            url,
            format,
            events,
        })
    }
}
