//! What a person reads for an event: a title, a line or two, how urgent it
//! is and where to look. A pure function of the event ([`message`]); the
//! receiver's shape is the `render` module's.
//!
//! It reads only the fields of an event's payload it shows (typed, below),
//! and never trusts their text: a reason is the agent's gate output as much
//! as gatehost's. It must never do I/O.

use crate::store::EventRow;
use serde::Deserialize;

/// How urgent a message is (ntfy's priority; chats show it as a word).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    /// Something is stuck until a person acts.
    High,
    /// Worth a look.
    Default,
}

/// A notification as a person reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// One line, no markup (`gatehost: policy p1 is blocked`).
    pub title: String,
    /// What happened and what to do, plain text (cut short).
    pub text: String,
    pub priority: Priority,
    /// The policy's page, for a policy event.
    pub link: Option<String>,
    /// ntfy tags (emoji short codes) for the kind of event.
    pub tags: &'static [&'static str],
}

/// The most of the agent's text (a reason) one message carries.
pub const MAX_REASON_CHARS: usize = 600;

/// The payload fields a message shows; absent ones are `None`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Shown {
    reason: Option<String>,
    outcome: Option<String>,
    message: Option<String>,
    silent_ms: Option<i64>,
    cycle: Option<u32>,
    request: Option<String>,
    timeout_ms: Option<u64>,
    max_cycles: Option<u32>,
    file: Option<String>,
    standing_id: Option<String>,
    sha: Option<String>,
    by: Option<String>,
    agent: Option<String>,
    cwd: Option<String>,
    #[serde(default)]
    changed: Vec<String>,
    routine_id: Option<String>,
    step: Option<String>,
    name: Option<String>,
}

/// The message for `event`; `base` is where the daemon's pages are (links
/// are left out without it).
pub fn message(event: &EventRow, base: Option<&str>) -> Message {
    let shown: Shown = serde_json::from_value(event.payload.clone()).unwrap_or_default();
    let reason = shown
        .reason
        .as_deref()
        .or(shown.message.as_deref())
        .map(clean);
    let policy = event.policy_id.as_deref().map(clean_id);
    let session = event.session_id.as_deref().map(clean_id);
    let subject = match (&policy, &session) {
        (Some(p), _) => format!("policy {p}"),
        (None, Some(s)) => format!("session {s}"),
        (None, None) => "the daemon".to_string(),
    };
    let because = |what: &str| match &reason {
        Some(r) if !r.is_empty() => format!("{what}: {r}"),
        _ => what.to_string(),
    };
    let (title, text, priority, tags): (String, String, Priority, &'static [&'static str]) =
        match event.kind.as_str() {
            "policy:blocked" => {
                let what = match shown.outcome.as_deref() {
                    Some("error") => "its gate could not run",
                    Some("fail") => "its gate still fails, out of retries",
                    _ => "it needs a person",
                };
                (
                    format!("gatehost: {subject} is blocked"),
                    because(what),
                    Priority::High,
                    &["no_entry"],
                )
            }
            "policy:commit-ready" => (
                format!("gatehost: {subject} awaits your review"),
                "Its gate passed; the change waits for your ack (approve or reject).".to_string(),
                Priority::High,
                &["eyes"],
            ),
            "policy:commit-failed" => (
                format!("gatehost: the commit of {subject} failed"),
                because("the commit could not be made"),
                Priority::High,
                &["warning"],
            ),
            "policy:committed" => (
                format!("gatehost: {subject} committed"),
                match &shown.sha {
                    Some(sha) => format!("Committed as {}.", clean(sha)),
                    None => "Committed.".to_string(),
                },
                Priority::Default,
                &["white_check_mark"],
            ),
            "policy:expired" => (
                format!("gatehost: {subject} passed its deadline"),
                because("its deadline ran out; it is blocked"),
                Priority::High,
                &["hourglass"],
            ),
            "policy:next-refused" => (
                format!("gatehost: the next step of {subject} was refused"),
                because("the chained policy could not be attached"),
                Priority::High,
                &["warning"],
            ),
            "review:escalated" => (
                format!("gatehost: the review of {subject} escalates to you"),
                because(&match (shown.cycle, shown.max_cycles) {
                    (Some(c), Some(m)) => format!("the reviewer blocked {c} of {m} cycles"),
                    _ => "the reviewer never shipped it".to_string(),
                }),
                Priority::High,
                &["rotating_light"],
            ),
            "routine:escalated" => (
                format!(
                    "gatehost: routine {} asks for your answer",
                    shown
                        .routine_id
                        .as_deref()
                        .map(clean_id)
                        .unwrap_or_default()
                ),
                format!(
                    "Step {} waits for input{}: answer with gatehost routine resolve {} {} --response TEXT{}.",
                    shown.step.as_deref().map(clean).unwrap_or_default(),
                    shown
                        .message
                        .as_deref()
                        .map(|m| format!(" (it said: {})", clean(m)))
                        .unwrap_or_default(),
                    shown
                        .routine_id
                        .as_deref()
                        .map(clean_id)
                        .unwrap_or_default(),
                    shown.step.as_deref().map(clean).unwrap_or_default(),
                    shown
                        .timeout_ms
                        .map(|ms| format!(
                            " (the run fails after {} without an answer)",
                            humantime::format_duration(std::time::Duration::from_secs(ms / 1000))
                        ))
                        .unwrap_or_default()
                ),
                Priority::High,
                &["raising_hand"],
            ),
            "routine:failed" => (
                format!(
                    "gatehost: routine {} failed",
                    shown
                        .routine_id
                        .as_deref()
                        .map(clean_id)
                        .unwrap_or_default()
                ),
                because(&format!(
                    "step {} did not finish",
                    shown.step.as_deref().map(clean).unwrap_or_default()
                )),
                Priority::High,
                &["warning"],
            ),
            "session:stale" => {
                let silent = shown
                    .silent_ms
                    .map(|ms| {
                        humantime::format_duration(std::time::Duration::from_secs(
                            u64::try_from(ms / 1000).unwrap_or(0),
                        ))
                        .to_string()
                    })
                    .unwrap_or_else(|| "too long".into());
                (
                    format!("gatehost: {subject} has gone silent"),
                    format!(
                        "No report, hook call or heartbeat for {silent}: the agent may have crashed or hung."
                    ),
                    Priority::High,
                    &["zzz"],
                )
            }
            "session:permission-escalated" => (
                format!("gatehost: {subject} asks for your permission"),
                format!(
                    "Request {}: answer with gatehost session permission {} {} --allow or --deny{}.",
                    shown.request.as_deref().map(clean).unwrap_or_default(),
                    session.clone().unwrap_or_default(),
                    shown.request.as_deref().map(clean).unwrap_or_default(),
                    shown
                        .timeout_ms
                        .map(|ms| format!(
                            " (denied after {} without an answer)",
                            humantime::format_duration(std::time::Duration::from_secs(ms / 1000))
                        ))
                        .unwrap_or_default()
                ),
                Priority::High,
                &["raising_hand"],
            ),
            "session:policy-refused" => (
                format!("gatehost: a session policy was refused for {subject}"),
                because(&match (&shown.file, &shown.standing_id) {
                    (Some(f), _) => format!("the policy file {} does not apply", clean(f)),
                    (None, Some(id)) => format!("the standing policy {} does not apply", clean(id)),
                    (None, None) => "a session policy does not apply".to_string(),
                }),
                Priority::High,
                &["warning"],
            ),
            "session:ungated" => (
                format!("gatehost: {subject} stopped with no gate"),
                format!(
                    "No policy of yours watches this session{}{}: its stop was let through ungated. \
                     Attach one (a standing policy, `gatehost policy attach --template`, matches new sessions); \
                     later ungated stops of this session are not announced again.",
                    shown
                        .cwd
                        .as_deref()
                        .map(|c| format!(" (in {})", clean(c)))
                        .unwrap_or_default(),
                    if reason.as_deref().is_some_and(|r| r.contains("the agent attached")) {
                        " (only policies the agent attached itself do)"
                    } else {
                        ""
                    }
                ),
                Priority::High,
                &["warning"],
            ),
            "passkey:registered" => (
                format!(
                    "gatehost: passkey '{}' was registered",
                    clean(shown.name.as_deref().unwrap_or("?"))
                ),
                "It can approve changes from now on. If you did not add it, remove it on the page and look at who holds the operator token.".to_string(),
                Priority::High,
                &["key"],
            ),
            "passkey:removed" => (
                format!(
                    "gatehost: passkey '{}' was removed",
                    clean(shown.name.as_deref().unwrap_or("?"))
                ),
                "It can no longer approve changes.".to_string(),
                Priority::High,
                &["key"],
            ),
            "config:rejected" => (
                "gatehost: the new configuration was rejected".to_string(),
                because("the old configuration stays in force"),
                Priority::High,
                &["warning"],
            ),
            "config:held" => (
                "gatehost: a weakening of the configuration is held until a restart".to_string(),
                because("the stronger setting stays in force"),
                Priority::High,
                &["warning"],
            ),
            "config:reloaded" => (
                "gatehost: the configuration was reloaded".to_string(),
                if shown.changed.is_empty() {
                    "Nothing changed.".to_string()
                } else {
                    format!("Changed: {}.", clean(&shown.changed.join(", ")))
                },
                Priority::Default,
                &["gear"],
            ),
            "hook:capped" => (
                format!(
                    "gatehost: {} is out of retries",
                    hook_subject(&shown, &session)
                ),
                because("the gate still fails; the stop was let through"),
                Priority::High,
                &["no_entry"],
            ),
            "hook:gate-error" => (
                format!(
                    "gatehost: a gate could not run for {}",
                    hook_subject(&shown, &session)
                ),
                because("the work was not accepted"),
                Priority::High,
                &["warning"],
            ),
            kind => {
                let by = shown
                    .by
                    .as_deref()
                    .map(|b| format!(" by {}", clean(b)))
                    .unwrap_or_default();
                (
                    format!("gatehost: {} {subject}{by}", clean(kind)),
                    reason.clone().unwrap_or_default(),
                    Priority::Default,
                    &[],
                )
            }
        };
    let link = match (base, &event.policy_id) {
        (Some(base), Some(p)) => Some(super::policy_link(base, p)),
        _ => None,
    };
    Message {
        title,
        text,
        priority,
        link,
        tags,
    }
}

/// A standalone hook's subject: the agent CLI, its session and workspace.
fn hook_subject(shown: &Shown, session: &Option<String>) -> String {
    let agent = shown.agent.as_deref().map(clean).unwrap_or_default();
    let mut out = if agent.is_empty() {
        "the agent".to_string()
    } else {
        agent
    };
    if let Some(s) = session {
        out.push_str(&format!(" session {s}"));
    }
    if let Some(cwd) = &shown.cwd {
        out.push_str(&format!(" in {}", clean(cwd)));
    }
    out
}

/// `text` on one line of at most [`MAX_REASON_CHARS`] characters: control
/// characters (newlines, escapes, bidi overrides) become spaces, runs of
/// spaces one.
pub fn clean(text: &str) -> String {
    let mut out = String::new();
    let mut count = 0;
    let mut space = false;
    for c in text.chars() {
        let c = if c.is_control() || is_bidi(c) { ' ' } else { c };
        if c == ' ' {
            if space || out.is_empty() {
                continue;
            }
            space = true;
        } else {
            space = false;
        }
        if count == MAX_REASON_CHARS {
            out.push('…');
            break;
        }
        out.push(c);
        count += 1;
    }
    out.trim_end().to_string()
}

/// An id as shown: cleaned and at most 80 characters.
fn clean_id(id: &str) -> String {
    let c = clean(id);
    match c.char_indices().nth(80) {
        Some((i, _)) => format!("{}…", &c[..i]),
        None => c,
    }
}

/// The Unicode bidirectional controls, which can make a line read as
/// another.
fn is_bidi(c: char) -> bool {
    matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}
