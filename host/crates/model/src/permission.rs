//! The permission rule of an ACP session: how the daemon answers an
//! agent's `session/request_permission` (a tool call it wants to make).
//!
//! A rule is data (`permission` in `session start`'s input, or
//! `[agents] permission` in the configuration) and its decision a pure
//! function of the rule and the request ([`decide`]), so that every case is
//! a unit test. This module must never do I/O nor answer anything but
//! allow, deny or escalate; the escalation itself (waiting for the
//! operator, the timeout) is `acp`'s.
//!
//! The order: a tool whose kind or name is in `deny` is denied; else one in
//! `allow` is allowed; else `otherwise` decides (`deny`, the default, or
//! `escalate` to the operator, who has `timeoutMs` to answer before the
//! request is denied). No rule at all denies everything: fail closed.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How long an escalation waits for the operator by default.
pub const DEFAULT_ESCALATION_MS: u64 = 5 * 60 * 1000;
/// The longest an escalation may wait.
pub const MAX_ESCALATION_MS: u64 = 24 * 60 * 60 * 1000;

/// What a tool that neither list names gets.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Otherwise {
    /// Denied at once.
    #[default]
    Deny,
    /// Asked of the operator, who has `timeoutMs` to answer (then it is
    /// denied).
    Escalate,
}

/// A session's permission rule.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PermissionRule {
    /// Tool kinds (`read`, `edit`, `delete`, `move`, `search`, `execute`,
    /// `think`, `fetch`, `switch_mode`, `other`) or tool names allowed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    /// Tool kinds or names denied, even if `allow` names them too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<String>,
    /// What any other tool gets.
    #[serde(default)]
    pub otherwise: Otherwise,
    /// How long an escalation waits for the operator (then: deny).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

impl PermissionRule {
    /// The escalation's wait, bounded.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(
            self.timeout_ms
                .unwrap_or(DEFAULT_ESCALATION_MS)
                .clamp(1, MAX_ESCALATION_MS),
        )
    }
}

/// What the agent asks to do, as the rule sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolAsk {
    /// The tool's kind as ACP names it (`execute`), when the agent said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The tool's name or title, when the agent said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The tool call's title, when the agent gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// The rule's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Decision {
    /// The tool is allowed.
    Allow,
    /// The tool is denied.
    Deny,
    /// A person is asked (`session:permission-escalated`).
    Escalate,
}

/// Whether `list` names the tool (its kind, name or title; exact,
/// case-insensitive). A tool that says neither kind nor name matches
/// nothing.
fn names(list: &[String], ask: &ToolAsk) -> bool {
    let said = [&ask.kind, &ask.name, &ask.title];
    list.iter().any(|entry| {
        said.iter()
            .filter_map(|s| s.as_deref())
            .any(|s| s.eq_ignore_ascii_case(entry))
    })
}

/// The decision of `rule` on `ask` (see the module doc).
pub fn decide(rule: &PermissionRule, ask: &ToolAsk) -> Decision {
    if names(&rule.deny, ask) {
        return Decision::Deny;
    }
    if names(&rule.allow, ask) {
        return Decision::Allow;
    }
    match rule.otherwise {
        Otherwise::Deny => Decision::Deny,
        Otherwise::Escalate => Decision::Escalate,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(kind: Option<&str>, name: Option<&str>) -> ToolAsk {
        ToolAsk {
            kind: kind.map(str::to_string),
            name: name.map(str::to_string),
            title: None,
        }
    }

    fn rule(allow: &[&str], deny: &[&str], otherwise: Otherwise) -> PermissionRule {
        PermissionRule {
            allow: allow.iter().map(|s| s.to_string()).collect(),
            deny: deny.iter().map(|s| s.to_string()).collect(),
            otherwise,
            timeout_ms: None,
        }
    }

    #[test]
    fn every_list_and_fallback_against_every_kind_of_request() {
        use Decision::*;
        let asks = [
            ("allowed kind", ask(Some("read"), None)),
            ("allowed name", ask(Some("other"), Some("grep"))),
            (
                "denied kind also allowed",
                ask(Some("execute"), Some("grep")),
            ),
            ("unlisted", ask(Some("edit"), Some("write_file"))),
            ("says nothing", ask(None, None)),
            ("case differs", ask(Some("READ"), None)),
        ];
        let rules = [
            (
                rule(&["read", "grep"], &["execute"], Otherwise::Deny),
                [Allow, Allow, Deny, Deny, Deny, Allow],
            ),
            (
                rule(&["read", "grep"], &["execute"], Otherwise::Escalate),
                [Allow, Allow, Deny, Escalate, Escalate, Allow],
            ),
            (
                rule(&[], &[], Otherwise::Escalate),
                [Escalate, Escalate, Escalate, Escalate, Escalate, Escalate],
            ),
            (
                PermissionRule::default(),
                [Deny, Deny, Deny, Deny, Deny, Deny],
            ),
        ];
        for (r, want) in &rules {
            for ((label, a), w) in asks.iter().zip(want) {
                assert_eq!(decide(r, a), *w, "{label} under {r:?}");
            }
        }
    }

    #[test]
    fn the_title_counts_as_a_name_and_the_timeout_is_bounded() {
        let a = ToolAsk {
            kind: None,
            name: None,
            title: Some("ls".into()),
        };
        assert_eq!(
            decide(&rule(&["ls"], &[], Otherwise::Deny), &a),
            Decision::Allow
        );
        let mut r = PermissionRule::default();
        assert_eq!(r.timeout(), Duration::from_millis(DEFAULT_ESCALATION_MS));
        r.timeout_ms = Some(0);
        assert_eq!(r.timeout(), Duration::from_millis(1));
        r.timeout_ms = Some(u64::MAX);
        assert_eq!(r.timeout(), Duration::from_millis(MAX_ESCALATION_MS));
    }

    #[test]
    fn a_rule_is_read_from_json_and_refuses_unknown_fields() {
        let r: PermissionRule = serde_json::from_str(
            r#"{"allow": ["read"], "otherwise": "escalate", "timeoutMs": 100}"#,
        )
        .expect("parse");
        assert_eq!(r.otherwise, Otherwise::Escalate);
        assert!(serde_json::from_str::<PermissionRule>(r#"{"alow": ["read"]}"#).is_err());
    }
}
