//! What a person reads for an event: a title, a line or two, how urgent it
//! is and where to look. A pure function of the event ([`message`]); the
//! receiver's shape is the `render` module's.
//!
//! It reads the typed event (`model::event`), and never trusts its text: a reason is the agent's gate output as much
//! as gatehost's. It must never do I/O.

use crate::model::event::{
    BlockOutcome, ConfigEvent, Event, HookEvent, HookNotice, HostEvent, PasskeyEvent, PolicyChange,
    RefusedOrigin, ReviewChange, ReviewEvent, RoutineEvent, RoutineKind, SessionEvent, TokenEvent,
    WatchdogEvent,
};
use crate::store::EventRow;

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

/// The message for `event`; `base` is where the daemon's pages are (links
/// are left out without it).
pub fn message(event: &EventRow, base: Option<&str>) -> Message {
    let said = event.event.said(&["reason", "message", "by"]);
    let field = |key: &str| {
        said.iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.as_str())
    };
    let reason = field("reason").or(field("message")).map(clean);
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
    let policy_change = match &event.event {
        Event::Policy(e) => Some(&e.change),
        _ => None,
    };
    let (title, text, priority, tags): (String, String, Priority, &'static [&'static str]) =
        match (&event.event, policy_change) {
            (_, Some(PolicyChange::Blocked(b))) => {
                let what = match b.outcome {
                    BlockOutcome::Error => "its gate could not run",
                    BlockOutcome::Fail => "its gate still fails, out of retries",
                    _ => "it needs a person",
                };
                (
                    format!("gatehost: {subject} is blocked"),
                    because(what),
                    Priority::High,
                    &["no_entry"],
                )
            }
            (_, Some(PolicyChange::CommitReady(_))) => (
                format!("gatehost: {subject} awaits your review"),
                "Its gate passed; the change waits for your ack (approve or reject).".to_string(),
                Priority::High,
                &["eyes"],
            ),
            (_, Some(PolicyChange::CommitFailed(_))) => (
                format!("gatehost: the commit of {subject} failed"),
                because("the commit could not be made"),
                Priority::High,
                &["warning"],
            ),
            (_, Some(PolicyChange::Committed(c))) => (
                format!("gatehost: {subject} committed"),
                match &c.sha {
                    Some(sha) => format!("Committed as {}.", clean(sha)),
                    None => "Committed.".to_string(),
                },
                Priority::Default,
                &["white_check_mark"],
            ),
            (_, Some(PolicyChange::Expired(_))) => (
                format!("gatehost: {subject} passed its deadline"),
                because("its deadline ran out; it is blocked"),
                Priority::High,
                &["hourglass"],
            ),
            (_, Some(PolicyChange::NextRefused(_))) => (
                format!("gatehost: the next step of {subject} was refused"),
                because("the chained policy could not be attached"),
                Priority::High,
                &["warning"],
            ),
            (
                Event::Review(ReviewEvent {
                    change: ReviewChange::Escalated(r),
                    ..
                }),
                _,
            ) => (
                format!("gatehost: the review of {subject} escalates to you"),
                because(&format!(
                    "the reviewer blocked {} of {} cycles",
                    r.cycle, r.max_cycles
                )),
                Priority::High,
                &["rotating_light"],
            ),
            (
                Event::Routine(RoutineEvent {
                    kind: RoutineKind::Escalated,
                    payload: r,
                }),
                _,
            ) => (
                format!("gatehost: routine {} asks for your answer", clean_id(&r.routine_id)),
                format!(
                    "Step {} waits for input{}: answer with gatehost routine resolve {} {} --response TEXT{}.",
                    r.step.as_deref().map(clean).unwrap_or_default(),
                    r.message
                        .as_deref()
                        .map(|m| format!(" (it said: {})", clean(m)))
                        .unwrap_or_default(),
                    clean_id(&r.routine_id),
                    r.step.as_deref().map(clean).unwrap_or_default(),
                    r.timeout_ms
                        .map(|ms| format!(
                            " (the run fails after {} without an answer)",
                            humantime::format_duration(std::time::Duration::from_secs(ms / 1000))
                        ))
                        .unwrap_or_default()
                ),
                Priority::High,
                &["raising_hand"],
            ),
            (
                Event::Routine(RoutineEvent {
                    kind: RoutineKind::Failed,
                    payload: r,
                }),
                _,
            ) => (
                format!("gatehost: routine {} failed", clean_id(&r.routine_id)),
                because(&format!(
                    "step {} did not finish",
                    r.step.as_deref().map(clean).unwrap_or_default()
                )),
                Priority::High,
                &["warning"],
            ),
            (Event::Watchdog(WatchdogEvent::Stale(st)), _) => {
                let silent = humantime::format_duration(std::time::Duration::from_secs(
                    u64::try_from(st.silent_ms / 1000).unwrap_or(0),
                ))
                .to_string();
                (
                    format!("gatehost: {subject} has gone silent"),
                    format!(
                        "No report, hook call or heartbeat for {silent}: the agent may have crashed or hung."
                    ),
                    Priority::High,
                    &["zzz"],
                )
            }
            (Event::Session(SessionEvent::PermissionEscalated(p)), _) => (
                format!("gatehost: {subject} asks for your permission"),
                format!(
                    "Request {}: answer with gatehost session permission {} {} --allow or --deny (denied after {} without an answer).",
                    clean(&p.request),
                    session.clone().unwrap_or_default(),
                    clean(&p.request),
                    humantime::format_duration(std::time::Duration::from_secs(p.timeout_ms / 1000))
                ),
                Priority::High,
                &["raising_hand"],
            ),
            (Event::Session(SessionEvent::PolicyRefused(p)), _) => (
                format!("gatehost: a session policy was refused for {subject}"),
                because(&match &p.origin {
                    RefusedOrigin::File { file } => {
                        format!("the policy file {} does not apply", clean(file))
                    }
                    RefusedOrigin::Standing { standing_id } => {
                        format!("the standing policy {} does not apply", clean(standing_id))
                    }
                }),
                Priority::High,
                &["warning"],
            ),
            (Event::Session(SessionEvent::Ungated(u)), _) => (
                format!("gatehost: {subject} stopped with no gate"),
                format!(
                    "No policy of yours watches this session (in {}){}: its stop was let through ungated. \
                     Attach one (a standing policy, `gatehost policy attach --template`, matches new sessions); \
                     later ungated stops of this session are not announced again.",
                    clean(&u.cwd),
                    if u.reason.contains("the agent attached") {
                        " (only policies the agent attached itself do)"
                    } else {
                        ""
                    }
                ),
                Priority::High,
                &["warning"],
            ),
            (Event::Passkey(PasskeyEvent::Registered(p)), _) => (
                format!("gatehost: passkey '{}' was registered", clean(&p.name)),
                "It can approve changes from now on. If you did not add it, remove it on the page and look at who holds the operator token.".to_string(),
                Priority::High,
                &["key"],
            ),
            (Event::Passkey(PasskeyEvent::Removed(p)), _) => (
                format!("gatehost: passkey '{}' was removed", clean(&p.name)),
                "It can no longer approve changes.".to_string(),
                Priority::High,
                &["key"],
            ),
            (Event::Passkey(PasskeyEvent::Renamed(p)), _) => (
                format!("gatehost: a passkey is now named '{}'", clean(&p.name)),
                String::new(),
                Priority::Default,
                &["key"],
            ),
            (Event::Passkey(PasskeyEvent::Reset(r)), _) => (
                format!(
                    "gatehost: every passkey was removed ({})",
                    r.removed.len()
                ),
                "Someone with the daemon's data directory ran `gatehost passkey reset`. Register a passkey again (`gatehost passkey enrol-code`); if it was not you, look at who can use that machine's account.".to_string(),
                Priority::High,
                &["key", "warning"],
            ),
            (Event::Config(ConfigEvent::Rejected(_)), _) => (
                "gatehost: the new configuration was rejected".to_string(),
                because("the old configuration stays in force"),
                Priority::High,
                &["warning"],
            ),
            (Event::Config(ConfigEvent::Held(_)), _) => (
                "gatehost: a weakening of the configuration is held until a restart".to_string(),
                because("the stronger setting stays in force"),
                Priority::High,
                &["warning"],
            ),
            (Event::Config(ConfigEvent::Reloaded(r)), _) => (
                "gatehost: the configuration was reloaded".to_string(),
                if r.changed.is_empty() {
                    "Nothing changed.".to_string()
                } else {
                    format!("Changed: {}.", clean(&r.changed.join(", ")))
                },
                Priority::Default,
                &["gear"],
            ),
            (Event::Tokens(TokenEvent::Rotated(r)), _) => (
                format!("gatehost: the {} token(s) were rotated", clean(&r.tokens.join(" and "))),
                format!(
                    "The old {} refused from now on{}. If you did not rotate them, look at who holds the operator token.",
                    if r.tokens.len() > 1 { "ones are" } else { "one is" },
                    match &r.host {
                        Some(h) if r.cluster => format!(" on every host (rotated on {})", clean(h)),
                        _ => String::new(),
                    }
                ),
                Priority::High,
                &["key"],
            ),
            (Event::Host(HostEvent::Stale(h)), _) => (
                format!("gatehost: host {} stopped renewing its claim", clean(&h.host)),
                format!(
                    "Host {} (pid {} on {}) has not renewed its claim since its lease ended, grace included; {} of its policies {}.",
                    clean(&h.host),
                    h.pid,
                    clean(&h.machine),
                    h.policies.len(),
                    if h.takeover {
                        format!("are being taken over by {}", clean(&h.by))
                    } else {
                        "wait until it is back (workspaces are not shared: no other host can take them)".to_string()
                    }
                ),
                Priority::High,
                &["warning"],
            ),
            (Event::Host(HostEvent::TakenOver(t)), _) => (
                format!(
                    "gatehost: host {} took over host {}'s work",
                    clean(&t.by),
                    clean(&t.host)
                ),
                format!(
                    "{} policies and {} sessions moved to {}; it carries them on (a gate that was running runs again, a commit under way is finished from its prepared commit, never made twice).",
                    t.policies.len(),
                    t.sessions.len(),
                    clean(&t.by)
                ),
                Priority::High,
                &["arrows_counterclockwise"],
            ),
            (Event::Hook(HookEvent::Capped(h)), _) => (
                format!("gatehost: {} is out of retries", hook_subject(h, &session)),
                because("the gate still fails; the stop was let through"),
                Priority::High,
                &["no_entry"],
            ),
            (Event::Hook(HookEvent::GateError(h)), _) => (
                format!("gatehost: a gate could not run for {}", hook_subject(h, &session)),
                because("the work was not accepted"),
                Priority::High,
                &["warning"],
            ),
            (e, _) => {
                let by = field("by")
                    .map(|b| format!(" by {}", clean(b)))
                    .unwrap_or_default();
                (
                    format!("gatehost: {} {subject}{by}", clean(e.kind())),
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
fn hook_subject(h: &HookNotice, session: &Option<String>) -> String {
    let agent = clean(&h.agent);
    let mut out = if agent.is_empty() {
        "the agent".to_string()
    } else {
        agent
    };
    if let Some(s) = session {
        out.push_str(&format!(" session {s}"));
    }
    out.push_str(&format!(" in {}", clean(&h.cwd)));
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
