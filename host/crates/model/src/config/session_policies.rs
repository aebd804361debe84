//! Session policies (`[[daemon.session_policies]]`): the operator's rules
//! that attach a policy to sessions as they appear, so that an agent CLI's
//! hook in daemon mode is gated without anyone attaching by hand.
//!
//! A rule names the agents it applies to (the part of a hook session's id
//! before `:`, such as `claude` in `claude:<id>`; none: every session), the
//! workspaces (a session whose workspace lies under one; none: any), and a
//! file holding the policy's JSON (the body of `POST /v1/policies` without
//! its sessions). This module only parses and reads: it reads the policy
//! file once, at load, so nothing written to it later changes a running
//! daemon; it never reads the workspace, and the engine decides when a
//! rule attaches (`engine::rules`).

use serde::Deserialize;
use std::path::{Path, PathBuf};

/// One `[[daemon.session_policies]]` table as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Section {
    #[serde(default)]
    agents: Vec<String>,
    #[serde(default)]
    workspaces: Vec<String>,
    policy: String,
}

/// A rule, its policy read.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionPolicy {
    /// Agents (the session id's prefix before `:`); empty: every session.
    pub agents: Vec<String>,
    /// Workspaces under which a session's workspace must lie; empty: any.
    pub workspaces: Vec<PathBuf>,
    /// Where the policy was read from (named in events and errors).
    pub file: PathBuf,
    /// The policy's JSON object, as read at load (`Null` until then).
    pub policy: serde_json::Value,
}

impl SessionPolicy {
    /// Whether the rule applies to the session `id` whose canonical
    /// workspace is `workspace`.
    pub fn applies_to(&self, id: &str, workspace: &Path) -> bool {
        applies(&self.agents, &self.workspaces, id, workspace)
    }
}

/// Whether a rule for `agents` (empty: every agent) and `under` (empty:
/// anywhere) applies to the session `id` (its agent is the part before
/// `:`) whose canonical workspace is `workspace`. Shared by the
/// configuration's rules and the standing policies (`engine::standing`).
pub fn applies<P: AsRef<Path>>(agents: &[String], under: &[P], id: &str, workspace: &Path) -> bool {
    let agent_ok = agents.is_empty()
        || id
            .split_once(':')
            .is_some_and(|(agent, _)| agents.iter().any(|a| a == agent));
    let ws_ok = under.is_empty() || under.iter().any(|w| workspace.starts_with(w));
    agent_ok && ws_ok
}

/// Whether `a` is an agent's name as sessions' ids carry it.
pub fn plain_agent(a: &str) -> bool {
    !a.is_empty()
        && a.len() <= 64
        && a.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The rules of `sections`, their files not read yet. `key` names the
/// array in errors.
pub(super) fn parse(sections: Vec<Section>) -> Result<Vec<SessionPolicy>, (String, String)> {
    let mut out = Vec::new();
    for (i, s) in sections.into_iter().enumerate() {
        let key = format!("daemon.session_policies[{i}]");
        for a in &s.agents {
            if !plain_agent(a) {
                return Err((
                    format!("{key}.agents"),
                    format!(
                        "{a:?}: an agent's name, as in its sessions' ids (claude, codex, gemini, cursor)"
                    ),
                ));
            }
        }
        if s.policy.is_empty() {
            return Err((format!("{key}.policy"), "names no file".into()));
        }
        out.push(SessionPolicy {
            agents: s.agents,
            workspaces: s.workspaces.iter().map(|w| super::home_path(w)).collect(),
            file: super::home_path(&s.policy),
            policy: serde_json::Value::Null,
        });
    }
    Ok(out)
}

/// Reads each rule's policy file (a relative path is the configuration
/// directory's): a JSON object that names no sessions (the rule gives
/// them).
pub(super) fn read_files(
    rules: &mut [SessionPolicy],
    config_dir: &Path,
) -> Result<(), (String, String)> {
    for (i, rule) in rules.iter_mut().enumerate() {
        let key = format!("daemon.session_policies[{i}].policy");
        if rule.file.is_relative() {
            rule.file = config_dir.join(&rule.file);
        }
        let text = std::fs::read_to_string(&rule.file).map_err(|e| {
            (
                key.clone(),
                format!("cannot read {}: {e}", rule.file.display()),
            )
        })?;
        let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
            (
                key.clone(),
                format!("{}: not JSON: {e}", rule.file.display()),
            )
        })?;
        let Some(object) = value.as_object() else {
            return Err((
                key,
                format!("{}: must be a JSON object (a policy)", rule.file.display()),
            ));
        };
        for field in ["sessionId", "sessionIds"] {
            if object.contains_key(field) {
                return Err((
                    key,
                    format!(
                        "{}: names {field}; a session policy is attached to each session the rule matches, so it names none",
                        rule.file.display()
                    ),
                ));
            }
        }
        rule.policy = value;
        // Made canonical once, here, not at every registration (sessions'
        // workspaces are canonical); one that does not exist yet is kept
        // as written.
        for w in &mut rule.workspaces {
            if let Ok(c) = std::fs::canonicalize(&*w) {
                *w = c;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(agents: &[&str], workspaces: &[&Path]) -> SessionPolicy {
        SessionPolicy {
            agents: agents.iter().map(|a| a.to_string()).collect(),
            workspaces: workspaces.iter().map(|w| w.to_path_buf()).collect(),
            file: PathBuf::from("/etc/p.json"),
            policy: serde_json::Value::Null,
        }
    }

    #[test]
    fn a_rule_applies_by_agent_and_by_workspace() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = std::fs::canonicalize(dir.path()).expect("canonical");
        let inside = root.join("repo");
        let elsewhere = Path::new("/elsewhere/repo");
        assert!(rule(&[], &[]).applies_to("ses_1", elsewhere));
        assert!(rule(&["claude"], &[]).applies_to("claude:abc", elsewhere));
        assert!(!rule(&["claude"], &[]).applies_to("codex:abc", elsewhere));
        // A session id without an agent prefix is no agent's.
        assert!(!rule(&["claude"], &[]).applies_to("claude", elsewhere));
        assert!(!rule(&["claude"], &[]).applies_to("ses_claude", elsewhere));
        assert!(rule(&[], &[&root]).applies_to("s", &inside));
        assert!(!rule(&[], &[&root]).applies_to("s", elsewhere));
        // A sibling whose name starts the same is not inside.
        let sibling = PathBuf::from(format!("{}-other/repo", root.display()));
        assert!(!rule(&[], &[&root]).applies_to("s", &sibling));
        assert!(!rule(&["codex"], &[&root]).applies_to("claude:x", &inside));
    }

    #[test]
    fn a_policy_file_must_be_an_object_naming_no_session() {
        let dir = tempfile::tempdir().expect("tempdir");
        let write = |name: &str, text: &str| {
            std::fs::write(dir.path().join(name), text).expect("write");
            let mut r = rule(&[], &[]);
            r.file = PathBuf::from(name);
            r
        };
        let mut ok = [write("ok.json", r#"{"gate": {"command": "true"}}"#)];
        read_files(&mut ok, dir.path()).expect("read");
        assert_eq!(ok[0].file, dir.path().join("ok.json"));
        assert_eq!(ok[0].policy["gate"]["command"], "true");
        for (name, text, said) in [
            ("list.json", "[]", "must be a JSON object"),
            ("bad.json", "{", "not JSON"),
            ("named.json", r#"{"sessionId": "s1"}"#, "names sessionId"),
            (
                "named2.json",
                r#"{"sessionIds": ["s1"]}"#,
                "names sessionIds",
            ),
        ] {
            let mut r = [write(name, text)];
            let (key, message) = read_files(&mut r, dir.path()).expect_err(name);
            assert_eq!(key, "daemon.session_policies[0].policy");
            assert!(message.contains(said), "{name}: {message}");
        }
        let mut missing = [rule(&[], &[])];
        missing[0].file = PathBuf::from("absent.json");
        let (_, message) = read_files(&mut missing, dir.path()).expect_err("absent");
        assert!(message.contains("cannot read"), "{message}");
    }

    #[test]
    fn agents_are_plain_names() {
        for bad in ["", "cla:ude", "a b", "../x"] {
            let s = Section {
                agents: vec![bad.to_string()],
                workspaces: vec![],
                policy: "p.json".into(),
            };
            let (key, _) = parse(vec![s]).expect_err(bad);
            assert_eq!(key, "daemon.session_policies[0].agents");
        }
        let s = Section {
            agents: vec!["claude".into()],
            workspaces: vec![],
            policy: String::new(),
        };
        assert_eq!(
            parse(vec![s]).expect_err("no file").0,
            "daemon.session_policies[0].policy"
        );
    }
}
