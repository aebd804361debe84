//! Standing policies: policy templates the operator adds at run time
//! (`gatehost policy attach --template FILE --agent A --under DIR`,
//! `POST /v1/standing-policies`), stored, and attached by `engine::rules`
//! to every new session they match, exactly as a
//! `[[daemon.session_policies]]` rule of the configuration is, but without
//! editing the configuration or restarting.
//!
//! It owns adding, listing and removing them (operator only: the API
//! checks) and which session a template matches ([`matches`], a pure
//! function). Adding checks the template's shape (what can be checked with
//! no session); what needs a session (its gates against the workspace) is
//! checked when it attaches, and a refusal then is said as
//! `session:policy-refused`. It must never attach a policy itself.

use super::attach::check_template;
use super::sessions::invalid;
use super::{EngineResult, services::Settings};
use crate::config::session_policies::{applies, plain_agent};
use crate::model::event::{Event, Standing, StandingEvent};
use crate::store::{StandingRow, now_ms};
use std::path::Path;

/// The most standing policies a daemon holds (each is matched against
/// every new session).
pub const MAX_STANDING: usize = 100;

pub use crate::model::inputs::StandingRequest;

/// Whether a template for `agents`, `under` and `label` applies to the
/// session `id` (agent before `:`) whose canonical workspace is
/// `workspace` and whose label is `session_label`.
pub fn matches(
    agents: &[String],
    under: &[String],
    label: Option<&str>,
    id: &str,
    workspace: &Path,
    session_label: Option<&str>,
) -> bool {
    label.is_none_or(|l| session_label == Some(l)) && applies(agents, under, id, workspace)
}

/// The payload of `standing:added` and `standing:removed`.
fn standing_of(row: &StandingRow) -> Standing {
    Standing {
        standing_id: row.id.clone(),
        agents: row.agents.clone(),
        under: row.under.clone(),
        label: row.label.clone(),
    }
}

impl Settings {
    /// Adds a standing policy (operator only). Refused, storing nothing:
    /// an agent name that is not one, a relative directory, a policy that
    /// names sessions or does not parse, more than [`MAX_STANDING`].
    pub(crate) fn add_standing(&self, req: StandingRequest) -> EngineResult<StandingRow> {
        let e = self.engine();
        if let Some(a) = req.agents.iter().find(|a| !plain_agent(a)) {
            return Err(invalid(
                "agents",
                format!(
                    "{a:?}: an agent's name, as in its sessions' ids (claude, codex, gemini, cursor)"
                ),
            ));
        }
        let mut under = Vec::new();
        for u in &req.under {
            let p = Path::new(u);
            if !p.is_absolute() {
                return Err(invalid(
                    "under",
                    format!("{u:?}: must be an absolute directory"),
                ));
            }
            // Canonical where it exists (sessions' workspaces are); one that
            // does not exist yet is kept as given.
            let c = std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
            under.push(c.display().to_string());
        }
        if let Some(field) = req.policy.named_session() {
            return Err(invalid(
                format!("policy.{field}").as_str(),
                "a standing policy is attached to each session it matches, so it names none",
            ));
        }
        let policy = req.policy.parse()?;
        check_template(&policy, e.runner().config().daemon.max_chain_depth)?;
        let row = StandingRow {
            id: format!("sp_{}", uuid::Uuid::new_v4().simple()),
            agents: req.agents,
            under,
            label: req.label,
            policy: Some(policy),
            created_at: now_ms(),
            damage: None,
        };
        e.write(|tx| {
            if tx.standing_policies()?.len() >= MAX_STANDING {
                return Err(invalid(
                    "policy",
                    format!("{MAX_STANDING} standing policies are held already: remove one first"),
                ));
            }
            tx.insert_standing(&row)?;
            let event = Event::Standing(StandingEvent::Added(standing_of(&row)));
            e.append(tx, &event, None, None)?;
            Ok(())
        })?;
        tracing::info!(standing = %row.id, agents = ?row.agents, under = ?row.under, "a standing policy was added");
        Ok(row)
    }

    pub(crate) fn standing_policies(&self) -> EngineResult<Vec<StandingRow>> {
        Ok(self.engine().store().standing_policies()?)
    }

    /// Removes a standing policy (operator only); the policies it already
    /// attached go on. An unknown id is refused.
    pub(crate) fn remove_standing(&self, id: &str) -> EngineResult<StandingRow> {
        let e = self.engine();
        let row = e.write(|tx| {
            let Some(row) = tx.standing_policy(id)? else {
                return Err(invalid("id", format!("no standing policy '{id}'")));
            };
            tx.remove_standing(id)?;
            let event = Event::Standing(StandingEvent::Removed(standing_of(&row)));
            e.append(tx, &event, None, None)?;
            Ok(row)
        })?;
        tracing::info!(standing = %id, "a standing policy was removed");
        Ok(row)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn a_template_matches_by_agent_directory_and_label() {
        let ws = Path::new("/work/repo");
        // Every combination of the three conditions, each met or not.
        for agent_ok in [true, false] {
            for under_ok in [true, false] {
                for label_ok in [true, false] {
                    let agents = s(&["claude"]);
                    let under = s(&["/work"]);
                    let id = if agent_ok { "claude:abc" } else { "codex:abc" };
                    let w = if under_ok {
                        ws
                    } else {
                        Path::new("/elsewhere/repo")
                    };
                    let l = if label_ok {
                        Some("nightly")
                    } else {
                        Some("other")
                    };
                    assert_eq!(
                        matches(&agents, &under, Some("nightly"), id, w, l),
                        agent_ok && under_ok && label_ok,
                        "{agent_ok} {under_ok} {label_ok}"
                    );
                }
            }
        }
        // Empty conditions match anything.
        assert!(matches(&[], &[], None, "ses_1", ws, None));
        // A label asked for is not met by a session without one.
        assert!(!matches(&[], &[], Some("x"), "ses_1", ws, None));
        // No agent prefix is no agent's; a sibling directory is not under.
        assert!(!matches(&s(&["claude"]), &[], None, "claude", ws, None));
        assert!(!matches(&[], &s(&["/work/re"]), None, "s", ws, None));
    }
}
