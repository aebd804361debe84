//! Sessions: agent runs the daemon knows, registered and reported through
//! the API (how agent hooks feed it); those gatehost starts and follows are
//! `started`'s. Registration ([`Sessions::register`]) checks the workspace
//! (`workspace`: under the agent's roots, clear of the host's own places)
//! and issues the session's key; a report, with that key, is one
//! transaction (`report`). What a report,
//! a registration or the watchdog's silence does to a session is the pure
//! machine's (`machine::decide`); this module and `report` perform it. It
//! must never change a session's state but by that decision, nor record
//! a report the caller's key does not cover.

use super::keys::{self, Caller};
use super::{EngineError, EngineResult, services::Sessions};
use crate::config::Trust;
use crate::model::event::{self as ev, Event, SessionEvent, WatchdogEvent};
use crate::store::{SessionRow, SessionState, now_ms};
use serde::{Deserialize, Serialize};

pub(super) mod machine;
mod report;
mod workspace;

pub(super) use workspace::{Located, locate, open_registered};
use workspace::{check_clear_of_host, check_root};

/// The event of a session's first stop that no policy watched.
pub(super) const UNGATED: &str = "session:ungated";

/// The most of a message kept per report.
pub(super) const MAX_MESSAGE: usize = 64 * 1024;

pub use crate::model::inputs::RegisterInput;

/// A registered (or started) session, with its key when this request
/// was given one: on its first registration (or start), or when the agent
/// claims a session stored before keys existed. The key is answered once
/// and never again (only its digest is kept).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Registered {
    #[serde(flatten)]
    pub session: SessionRow,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_key: Option<String>,
}

pub use crate::model::inputs::ReportKind;

/// What a report did: its event's cursor (none for a heartbeat) and the
/// policies a turn-end counted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReportOutcome {
    pub cursor: Option<i64>,
    pub policies: Vec<String>,
    /// A turn-end no live policy has the session as a member of: not gated.
    pub ungated: bool,
}

pub(super) fn invalid(field: &str, message: impl Into<String>) -> EngineError {
    EngineError::Invalid {
        field: field.into(),
        message: message.into(),
    }
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))
}

/// The prefix of the ids the daemon gives its routines' runs, and so of
/// their ACP steps' sessions (`<run>.s<step>.r<n>`): the agent token
/// cannot register an id under it, so no agent holds a key to a session
/// a run is about to start.
pub(super) const RESERVED_PREFIX: &str = "rt_";

fn reserved_id(id: &str) -> bool {
    id.starts_with(RESERVED_PREFIX)
}

/// A session's webhook must go where the operator allows
/// (`[daemon] notify_url_prefixes`); the URL as parsed, which is what is
/// stored and posted to.
fn check_url(
    url: &Option<String>,
    prefixes: &[crate::config::NotifyPrefix],
) -> EngineResult<Option<String>> {
    url.as_deref()
        .map(|u| crate::config::notify_url::admit(u, prefixes).map_err(|m| invalid("notifyUrl", m)))
        .transpose()
}

pub(super) fn cap(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = s.len() - max;
        while !s.is_char_boundary(cut) {
            cut += 1;
        }
        s = s[cut..].to_string();
    }
    s
}

impl Sessions {
    /// Registers a session for the credential `by`, or updates the label,
    /// cwd and URL of a known one it owns (hooks may register on every
    /// start). The agent token registers only under `workspace_roots` and
    /// never takes over a session the operator registered or started.
    pub(crate) fn register(
        &self,
        input: RegisterInput,
        caller: &Caller,
    ) -> EngineResult<Registered> {
        let registered = self.register_with(input, None, caller)?;
        crate::test_hooks::abort_after_register(&registered.session.id);
        Ok(registered)
    }

    pub(super) fn register_with(
        &self,
        input: RegisterInput,
        command: Option<(Vec<String>, i64)>,
        caller: &Caller,
    ) -> EngineResult<Registered> {
        let engine = self.engine();
        let by = caller.trust;
        let id = input
            .id
            .clone()
            .unwrap_or_else(|| format!("ses_{}", uuid::Uuid::new_v4().simple()));
        if !valid_id(&id) {
            return Err(invalid(
                "id",
                "1 to 128 characters among letters, digits, '-', '_', '.', ':'",
            ));
        }
        if by == Trust::Agent && reserved_id(&id) {
            return Err(EngineError::Forbidden {
                code: "session-id-reserved",
                message: format!(
                    "session ids beginning with '{RESERVED_PREFIX}' are the daemon's (its routines' steps' sessions); the agent token cannot register '{id}'"
                ),
            });
        }
        if let Some(l) = &input.label
            && l.len() > super::attach::MAX_LABEL
        {
            return Err(invalid(
                "label",
                format!(
                    "{} bytes: at most {} are accepted",
                    l.len(),
                    super::attach::MAX_LABEL
                ),
            ));
        }
        // One configuration for the whole registration.
        let runner = engine.runner();
        let daemon = &runner.config().daemon;
        let notify_url = check_url(&input.notify_url, &daemon.notify_url_prefixes)?;
        let located = locate(&input.cwd, input.workspace.as_deref())?;
        if by == Trust::Agent {
            check_root(
                &located,
                &daemon.workspace_roots,
                runner.config().source.as_deref(),
            )?;
        }
        check_clear_of_host(&located, &runner.config().host_places())?;
        let Located { cwd, ws, anchor } = located;
        let pin = anchor.identity();
        // The host the store stamps a new row with (none on SQLite).
        let this_host = engine.store().host().map(|(h, _)| h);
        engine.write(|tx| {
            let now = now_ms();
            let existing = tx.session(&id)?;
            if let Some(e) = existing.as_ref().and_then(super::damage::session_error) {
                tracing::error!(session = %id, error = %e, "a register over a session whose stored row does not decode is refused");
                return Err(e);
            }
            // Starting an agent never adopts a session someone registered
            // before: whoever holds that session's key would speak for
            // the agent the operator started (its turn-ends, its
            // routine's answers).
            if let (Some(e), Some(_)) = (&existing, &command) {
                let whose = match e.owner {
                    Trust::Operator => "the operator",
                    Trust::Agent => "the agent token",
                };
                tracing::warn!(session = %id, owner = whose, "a start under an existing session id is refused");
                return Err(EngineError::Conflict {
                    code: "session-id-taken",
                    message: format!(
                        "session id '{id}' is already registered (by {whose}); a started session never takes over an existing one: choose another id, or leave it out for a fresh one"
                    ),
                });
            }
            if let Some(e) = &existing
                && e.owner == Trust::Operator
                && by == Trust::Agent
            {
                return Err(EngineError::Forbidden {
                    code: "session-owned-by-operator",
                    message: format!(
                        "session '{id}' was registered by the operator; the agent token cannot register it again, move it or change its webhook"
                    ),
                });
            }
            // A new session gets its key; a known one is re-registered
            // only with it (or by the operator), but one stored before
            // keys existed is claimed by the first agent that does.
            let issued = match &existing {
                None => Some(match &input.session_key {
                    Some(k) => keys::proposed(k)?,
                    None => keys::issue(),
                }),
                Some(e) if caller.may_claim(e) => {
                    tracing::warn!(session = %id, "a session stored without a key was claimed by the agent token");
                    Some(keys::issue())
                }
                Some(e) => {
                    caller.check(e)?;
                    None
                }
            };
            let mut s = existing.clone().unwrap_or(SessionRow {
                host: this_host.clone(),
                id: id.clone(),
                label: None,
                cwd: String::new(),
                workspace: String::new(),
                state: SessionState::Running,
                turns: 0,
                last_turn_cursor: None,
                last_message: None,
                heartbeat_at: Some(now),
                notify_url: None,
                command: None,
                pid: None,
                created_at: now,
                updated_at: now,
                owner: by,
                key_digest: None,
                stale_at: None,
                damage: None,
                workspace_pin: None,
            });
            if let Some((_, digest)) = &issued {
                s.key_digest = Some(digest.clone());
            }
            s.label = input.label.clone().or(s.label);
            s.cwd = cwd.display().to_string();
            s.workspace = ws.display().to_string();
            s.workspace_pin = Some(pin);
            s.notify_url = notify_url.clone().or(s.notify_url);
            let input = machine::Input::Register {
                started: command.is_some(),
            };
            let step = match machine::decide(machine::Standing::of(&s), input) {
                machine::Decision::Go(step) => step,
                machine::Decision::Refuse(machine::Refusal::Exited) => {
                    return Err(EngineError::Conflict {
                        code: "exited",
                        message: format!("session {id} has exited"),
                    });
                }
                other => {
                    return Err(EngineError::Internal(format!(
                        "session {id}: a registration was decided {other:?}"
                    )));
                }
            };
            self.enter(tx, &mut s, &step, "registration")?;
            if let Some((argv, pid)) = &command {
                s.command = Some(argv.clone());
                s.pid = Some(*pid);
            }
            s.updated_at = now;
            tx.put_session(&s)?;
            if existing.is_none() {
                let registered = ev::Registered {
                    session_id: s.id.clone(),
                    cwd: s.cwd.clone(),
                    workspace: s.workspace.clone(),
                    label: s.label.clone(),
                    started: command.is_some(),
                };
                let event = Event::Session(SessionEvent::Registered(registered));
                engine.append(tx, &event, Some(&s.id), None)?;
            }
            if step.does(machine::Effect::AttachPolicies) {
                engine.settings().attach_session_policies(tx, &s, "registered")?;
            }
            Ok(Registered {
                session: s,
                session_key: issued.map(|(key, _)| key),
            })
        })
    }

    /// Performs what every step of a session does to its row: heard from
    /// (`Touch`), live again when it was stale (`session:live`, said;
    /// `by`: a report, a registration; its policies the watchdog
    /// reclaimed stay as they are), and its new state.
    pub(super) fn enter(
        &self,
        tx: &mut crate::store::Tx<'_>,
        s: &mut SessionRow,
        step: &machine::Step,
        by: &str,
    ) -> EngineResult<()> {
        if step.does(machine::Effect::Touch) {
            let now = now_ms();
            s.heartbeat_at = Some(now);
            s.updated_at = now;
        }
        s.state = step.to;
        if !step.events.contains(&machine::Event::Live) {
            return Ok(());
        }
        // The machine says `live` of a stale session only.
        let Some(stale_at) = s.stale_at.take() else {
            return Err(EngineError::Internal(format!(
                "session {} is live again but was never stale",
                s.id
            )));
        };
        let live = ev::Live {
            session_id: s.id.clone(),
            by: by.to_string(),
            stale_at,
        };
        self.engine().append(
            tx,
            &Event::Watchdog(WatchdogEvent::Live(live)),
            Some(&s.id),
            None,
        )?;
        tracing::info!(session = %s.id, by, "a stale session is live again");
        Ok(())
    }
}
