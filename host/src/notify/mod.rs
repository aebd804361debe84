//! Notifications: the text a person reads for an event ([`message`]), rendered for a
//! receiver ([`render`]): the raw event JSON, a Slack or Discord incoming
//! webhook's message, or an ntfy topic's notification.
//!
//! Text the agent can write (a gate's reason, a session's label) reaches a
//! chat: it is cut short, stripped of control characters and escaped so it
//! can never mention a channel or a user, or forge a link (Slack's
//! `<!channel>`, Discord's `@everyone`: Discord is told to parse no mention
//! at all). Where the operator's webhooks point, which events each
//! receives and in which shape ([`Target`], [`Format`], [`EventSet`]) are
//! the configuration's, re-exported here. It owns no I/O: the daemon's delivery queue
//! (the `webhook` module) and the standalone hook post what it renders.

pub mod message;
pub mod render;
#[cfg(test)]
mod tests;

pub use message::{Message, Priority, message};
pub use render::{Body, render};

pub use crate::config::webhooks::{ATTENTION, EventSet, Format, Target};

/// Where a policy's page is, for a link in a message: the web page's
/// policy view (`/ui/#policy/{id}`, the route the page reads) under the
/// daemon's address (or `[daemon] public_url`).
pub fn policy_link(base: &str, policy_id: &str) -> String {
    format!(
        "{}/ui/#policy/{}",
        base.trim_end_matches('/'),
        percent_encoded(policy_id)
    )
}

/// `id` with every byte but unreserved ones percent-encoded (ids are
/// validated names, but a link must never be steered by one).
pub fn percent_encoded(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'~' | b':') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
