//! How the client commands show the daemon's answers to a person: one
//! line per session, policy or event. It owns only text; it must never
//! call the daemon or choose an exit code.

use crate::wire::{Event, Policy, PolicyStatus, Session};

/// `id  status (waiting for …): reason`, and the commit paths that changed
/// after the gate's snapshot on a line of their own.
pub fn policy_line(p: &Policy) -> String {
    let row = &p.row;
    let mut line = format!("{}  {}", row.id, row.status.as_str());
    if row.status == PolicyStatus::Watching && !row.pending.is_empty() {
        line.push_str(&format!(" (waiting for {})", row.pending.join(", ")));
    }
    if let Some(r) = &row.reason {
        line.push_str(&format!(": {r}"));
    }
    let changed: Vec<&str> = row
        .plan
        .as_ref()
        .and_then(|plan| plan["changedAfterSnapshot"].as_array())
        .map(|l| l.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    if !changed.is_empty() {
        line.push_str(&format!(
            "\n  changed since the gate's snapshot (not in the commit): {}",
            changed.join(", ")
        ));
    }
    line
}

/// `id  state  cwd`.
pub fn session_line(s: &Session) -> String {
    format!("{}  {}  {}", s.id, s.state.as_str(), s.cwd)
}

/// `#cursor type policy-or-session key="value" …`, values cut to 160
/// characters on one line.
pub fn event_line(e: &Event) -> String {
    let mut line = format!("#{} {}", e.cursor, e.kind);
    if let Some(pid) = &e.policy_id {
        line.push_str(&format!(" {pid}"));
    } else if let Some(sid) = &e.session_id {
        line.push_str(&format!(" {sid}"));
    }
    for key in ["outcome", "reason", "sha", "message", "by"] {
        if let Some(v) = e.payload[key].as_str() {
            let v: String = v.chars().take(160).collect::<String>().replace('\n', " ");
            line.push_str(&format!(" {key}={v:?}"));
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_event_line_names_its_policy_and_cuts_long_values() {
        let e = Event {
            cursor: 7,
            at: 0,
            kind: "policy:blocked".into(),
            session_id: Some("s1".into()),
            policy_id: Some("p1".into()),
            payload: json!({"reason": format!("a\nb{}", "x".repeat(300))}),
            damage: None,
        };
        let line = event_line(&e);
        assert!(
            line.starts_with("#7 policy:blocked p1 reason=\"a b"),
            "{line}"
        );
        assert!(!line.contains('\n'));
        assert!(line.len() < 200, "{line}");
    }
}
