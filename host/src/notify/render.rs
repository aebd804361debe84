//! An event as a receiver takes it: the body, its content type and the
//! headers a format adds ([`render`]). Pure; the caller posts it (and adds
//! the Standard Webhooks signature headers over the body, whatever the
//! format: a receiver that does not check them ignores them).
//!
//! Escaping is per format, so the agent's text never becomes markup:
//! Slack's `&`, `<`, `>` are entities (no `<!channel>`, `<@U…>` or forged
//! `<url|label>` link), Discord parses no mention (`allowed_mentions`) and
//! its markdown characters are escaped, ntfy's body and headers are plain
//! text (headers carry no newline and only visible ASCII).

use super::{Format, Message, Priority};
use crate::store::EventRow;
use serde_json::json;

/// What is posted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Body {
    pub content_type: &'static str,
    pub bytes: Vec<u8>,
    /// Headers of the format (ntfy's), beside the signature's.
    pub headers: Vec<(&'static str, String)>,
}

/// Discord refuses a `content` longer than this.
const DISCORD_MAX: usize = 2000;
/// Slack cuts a `text` past about this many characters.
const SLACK_MAX: usize = 3000;
/// ntfy's default largest message.
const NTFY_MAX: usize = 4096;

/// `event` in `format`; `message` is [`super::message`]'s for it (unused
/// for raw).
pub fn render(format: Format, event: &EventRow, message: &Message) -> Body {
    match format {
        Format::Raw => Body {
            content_type: "application/json",
            bytes: serde_json::to_vec(event).unwrap_or_default(),
            headers: Vec::new(),
        },
        Format::Slack => {
            let mut text = format!("*{}*", slack_escape(&message.title));
            if !message.text.is_empty() {
                text.push('\n');
                text.push_str(&slack_escape(&message.text));
            }
            if let Some(link) = &message.link {
                // The link is gatehost's own (its base and an encoded id).
                text.push_str(&format!("\n<{}|Open the policy>", slack_escape(link)));
            }
            Body {
                content_type: "application/json",
                bytes: json!({"text": cut(&text, SLACK_MAX)})
                    .to_string()
                    .into_bytes(),
                headers: Vec::new(),
            }
        }
        Format::Discord => {
            let mut content = format!("**{}**", discord_escape(&message.title));
            if !message.text.is_empty() {
                content.push('\n');
                content.push_str(&discord_escape(&message.text));
            }
            if let Some(link) = &message.link {
                content.push_str(&format!("\n<{link}>"));
            }
            Body {
                content_type: "application/json",
                bytes: json!({
                    "content": cut(&content, DISCORD_MAX),
                    "allowed_mentions": {"parse": []},
                })
                .to_string()
                .into_bytes(),
                headers: Vec::new(),
            }
        }
        Format::Ntfy => {
            let mut headers = vec![
                ("Title", header_text(&message.title)),
                (
                    "Priority",
                    match message.priority {
                        Priority::High => "high".to_string(),
                        Priority::Default => "default".to_string(),
                    },
                ),
            ];
            if !message.tags.is_empty() {
                headers.push(("Tags", message.tags.join(",")));
            }
            if let Some(link) = &message.link {
                headers.push(("Click", header_text(link)));
            }
            let text = if message.text.is_empty() {
                message.title.clone()
            } else {
                message.text.clone()
            };
            Body {
                content_type: "text/plain; charset=utf-8",
                bytes: cut(&text, NTFY_MAX).into_bytes(),
                headers,
            }
        }
    }
}

/// Slack's three control characters as entities.
fn slack_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Discord's markdown and mention characters escaped with a backslash
/// (mentions are also off by `allowed_mentions`); `<` too, so no `<@id>`
/// or `<#channel>` renders.
fn discord_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(
            c,
            '\\' | '*' | '_' | '~' | '`' | '|' | '>' | '<' | '@' | '#' | '[' | ']' | '(' | ')'
        ) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Visible ASCII only, for a header (other characters become `?`).
fn header_text(text: &str) -> String {
    text.chars()
        .map(|c| if (' '..='~').contains(&c) { c } else { '?' })
        .collect::<String>()
        .chars()
        .take(250)
        .collect()
}

/// `text` within `max` bytes, cut at a character boundary with `…`.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}
