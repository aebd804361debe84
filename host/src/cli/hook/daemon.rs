//! Daemon hooks (`gatehost hook AGENT` with a running `gatehost serve`):
//! the CLI's session is the daemon's session `AGENT:<session_id>`,
//! registered on first contact (its cwd from the hook); a stop reports the
//! turn-end with the agent's last message and waits, by the budget, for the
//! verdicts of the policies that turn-end counted.
//!
//! It owns reading those verdicts from the event bus: a `policy:nudge`
//! refuses the stop with the nudge, `policy:blocked` lets it happen with the
//! reason, a pass (`policy:passed`, `commit-ready`, `done`, `committed`) or
//! `policy:cancelled` lets it happen; a policy with none by the budget is
//! still running. A call the daemon refuses because its store is
//! unavailable (503 `store-unavailable`: its database restarting or cut
//! off; nothing of the call was stored) is asked again a second later (its
//! `Retry-After`), within the budget. It holds the agent token only and
//! must never ack, cancel or attach.

use crate::client::{Client, ClientError};
use crate::hook::decide::Input;
use crate::hook::{AgentCli, HookInput};
use crate::model::event::{Event, PolicyChange, PolicyEvent};
use crate::wire::{EventQuery, RegisterRequest, ReportKind, ReportRequest};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The longest single long-poll; the budget is spent in slices of this.
const SLICE: Duration = Duration::from_secs(20);

/// How long to wait before asking again a daemon whose store is
/// unavailable (the `Retry-After` it answers).
const OUTAGE_RETRY: Duration = Duration::from_secs(1);

/// What each counted policy said about this turn.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Said {
    Passed,
    Nudged(String),
    Blocked(String),
}

/// `SessionStart`: register the session.
pub(super) fn greet(agent: AgentCli, args: &super::HookArgs, input: &HookInput, deadline: Instant) {
    if let Err(e) = with_client(args, deadline, |c| async move {
        register(&c, agent, input, deadline).await.map(|_| ())
    }) {
        tracing::warn!(error = %e, "cannot register the session with the daemon");
    }
}

/// A prompt: register the session and mark the turn's start.
pub(super) fn turn_start(
    agent: AgentCli,
    args: &super::HookArgs,
    input: &HookInput,
    deadline: Instant,
) {
    if let Err(e) = with_client(args, deadline, |c| async move {
        let id = register(&c, agent, input, deadline).await?;
        report(&c, &id, ReportKind::TurnStart, deadline).await
    }) {
        tracing::warn!(error = %e, "cannot report the turn's start to the daemon");
    }
}

/// The session ended: report it exited. A session the daemon never saw
/// (no SessionStart reached it) is not registered just to end it.
pub(super) fn session_end(
    agent: AgentCli,
    args: &super::HookArgs,
    input: &HookInput,
    deadline: Instant,
) {
    let id = daemon_id(agent, input);
    let result = with_client(args, deadline, |c| async move {
        report(&c, &daemon_id(agent, input), ReportKind::Exited, deadline).await
    });
    match result {
        Ok(()) => tracing::info!(session = %id, "session ended: reported exited"),
        Err(e) => {
            tracing::warn!(session = %id, error = %e, "cannot report the session's end to the daemon");
        }
    }
}

/// A stop: report the turn-end and wait for the counted policies' verdicts.
pub(super) fn verdict(
    agent: AgentCli,
    args: &super::HookArgs,
    input: &HookInput,
    deadline: Instant,
) -> Input {
    let message = input.last_message.clone().or_else(|| {
        input
            .transcript_path
            .as_deref()
            .and_then(crate::hook::transcript::last_assistant_message)
    });
    let outcome = with_client(args, deadline, |c| async move {
        let id = register(&c, agent, input, deadline).await?;
        let turn_end = ReportRequest {
            kind: ReportKind::TurnEnd,
            message,
        };
        let reported = through_outage(deadline, || c.report(&id, &turn_end))
            .await
            .map_err(|e| format!("cannot report the turn-end: {e}"))?;
        if reported.policies.is_empty() {
            // Nothing to wait for: no policy watches the session (said,
            // never silent), or its policies wait on other sessions.
            return Ok(if reported.ungated {
                Input::Ungated(id)
            } else {
                Input::Pass
            });
        }
        let since = reported.cursor.unwrap_or(0);
        // Reading the policies' events needs the session's key.
        wait_verdicts(
            &c.with_keys_for([id.as_str()]),
            since,
            &reported.policies,
            deadline,
        )
        .await
    });
    outcome.unwrap_or_else(|e| Input::Error(format!("the daemon: {e}")))
}

async fn wait_verdicts(
    c: &Client,
    mut since: i64,
    policies: &[String],
    deadline: Instant,
) -> Result<Input, String> {
    let mut said: BTreeMap<String, Said> = BTreeMap::new();
    while said.len() < policies.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            let waiting: Vec<&str> = policies
                .iter()
                .filter(|p| !said.contains_key(*p))
                .map(String::as_str)
                .collect();
            return Ok(combine(&said).unwrap_or_else(|| {
                Input::Running(format!("policy {} has no verdict yet", waiting.join(", ")))
            }));
        }
        let wait = left.min(SLICE);
        let page = match c
            .events(&EventQuery {
                since: Some(since),
                types: Some("passed,nudge,blocked,commit-ready,done,committed,cancelled".into()),
                policy: Some(policies.join(",")),
                limit: Some(200),
                wait: Some(format!("{}", wait.as_millis())),
                ..EventQuery::default()
            })
            .await
        {
            Ok(page) => page,
            // Too many long-polls wait at the daemon, or its store is
            // unavailable: poll again in a second (its Retry-After),
            // within the deadline.
            Err(e) if e.is_too_many_waiters() || unavailable(&e) => {
                tokio::time::sleep(Duration::from_secs(1).min(left)).await;
                continue;
            }
            Err(e) => return Err(format!("cannot read the event bus: {e}")),
        };
        for e in &page.events {
            since = since.max(e.cursor);
            let Some(pid) = e.policy_id.clone() else {
                continue;
            };
            if said.contains_key(&pid) {
                continue;
            }
            let s = match &e.event {
                Event::Policy(PolicyEvent {
                    change: PolicyChange::Nudge(n),
                    ..
                }) => Said::Nudged(n.message.clone()),
                Event::Policy(PolicyEvent {
                    change: PolicyChange::Blocked(b),
                    ..
                }) => Said::Blocked(b.reason.clone().unwrap_or_default()),
                _ => Said::Passed,
            };
            said.insert(pid, s);
        }
        since = since.max(page.next_cursor);
    }
    Ok(combine(&said).unwrap_or(Input::Pass))
}

/// One input from the policies' verdicts: a nudge wins (the agent has work
/// to do), then a block; `None` when all passed.
fn combine(said: &BTreeMap<String, Said>) -> Option<Input> {
    let nudges: Vec<&str> = said
        .values()
        .filter_map(|s| match s {
            Said::Nudged(m) => Some(m.as_str()),
            _ => None,
        })
        .collect();
    if !nudges.is_empty() {
        return Some(Input::Nudged(nudges.join("\n\n")));
    }
    let blocks: Vec<&str> = said
        .values()
        .filter_map(|s| match s {
            Said::Blocked(r) => Some(r.as_str()),
            _ => None,
        })
        .collect();
    if !blocks.is_empty() {
        return Some(Input::Blocked(blocks.join("; ")));
    }
    None
}

/// The session's id in the daemon: `AGENT:<session_id>`.
fn daemon_id(agent: AgentCli, input: &HookInput) -> String {
    format!("{}:{}", agent.name(), input.session_id)
}

/// Whether the daemon refused a call because its store is unavailable.
fn unavailable(e: &ClientError) -> bool {
    e.code() == "store-unavailable"
}

/// Calls `call` again, a second apart, while the daemon refuses it because
/// its store is unavailable (nothing of the call was stored) and the
/// budget leaves time for another try (said once, at the first refusal);
/// its last answer.
async fn through_outage<T, Fut>(
    deadline: Instant,
    mut call: impl FnMut() -> Fut,
) -> Result<T, ClientError>
where
    Fut: std::future::Future<Output = Result<T, ClientError>>,
{
    let mut said = false;
    loop {
        match call().await {
            Err(e)
                if unavailable(&e)
                    && deadline.saturating_duration_since(Instant::now()) > OUTAGE_RETRY =>
            {
                if !said {
                    tracing::warn!(error = %e, "the daemon's store is unavailable; asking again within the budget");
                    said = true;
                }
                tokio::time::sleep(OUTAGE_RETRY).await;
            }
            out => return out,
        }
    }
}

/// Reports `kind` (with no message) for the daemon session `id`.
async fn report(c: &Client, id: &str, kind: ReportKind, deadline: Instant) -> Result<(), String> {
    let request = ReportRequest {
        kind,
        message: None,
    };
    through_outage(deadline, || c.report(id, &request))
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Registers (or refreshes) the session; returns its daemon id.
async fn register(
    c: &Client,
    agent: AgentCli,
    input: &HookInput,
    deadline: Instant,
) -> Result<String, String> {
    let id = daemon_id(agent, input);
    let request = RegisterRequest {
        id: Some(id.clone()),
        label: Some(agent.name().to_string()),
        cwd: input.cwd.display().to_string(),
        ..RegisterRequest::default()
    };
    through_outage(deadline, || c.register(&request))
        .await
        .map_err(|e| format!("cannot register session {id}: {e}"))?;
    Ok(id)
}

/// Runs `body` with a client of the daemon on a small runtime, by `deadline`.
fn with_client<T, F, Fut>(args: &super::HookArgs, deadline: Instant, body: F) -> Result<T, String>
where
    F: FnOnce(Client) -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let server = find_server(args)?;
    let token = find_token(args)?;
    // The session's key, answered at its first registration, is kept in
    // the user's keyring and presented on every later call about it.
    let client = Client::new(&server, token)
        .map_err(|e| e.to_string())?
        .with_keyring(crate::keyring::Keyring::default_for_user());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    let left = deadline.saturating_duration_since(Instant::now());
    rt.block_on(async {
        tokio::time::timeout(left + Duration::from_millis(500), body(client))
            .await
            .map_err(|_| "the daemon did not answer within the hook's budget".to_string())?
    })
}

/// Whether the daemon these hook options name answers, with the token they
/// name, by `deadline`: its URL, or why not (`gatehost doctor`).
pub(in crate::cli) fn daemon_answers(
    args: &super::HookArgs,
    deadline: Instant,
) -> Result<String, String> {
    let server = find_server(args)?;
    let asked = server.clone();
    with_client(args, deadline, |c| async move {
        c.health()
            .await
            .map(|_| ())
            .map_err(|e| format!("the daemon at {asked}: {e}"))
    })?;
    Ok(server)
}

fn find_server(args: &super::HookArgs) -> Result<String, String> {
    let dir = data_dir(args);
    crate::cli::server_args::discover(args.daemon.server.as_deref(), dir.as_deref()).map_err(|_| {
        let looked = dir.map_or_else(
            || "no data directory to look in".to_string(),
            |d| {
                format!(
                    "no {} in {}",
                    super::super::serve::SERVER_URL_FILE,
                    d.display()
                )
            },
        );
        format!(
            "no gates and no daemon ({looked}): pass --gates FILE (standalone), or run \
                 `gatehost serve` and point the hook at it with --data-dir DIR (or \
                 GATEHOST_DATA_DIR) or --server URL (or GATEHOST_SERVER)"
        )
    })
}

fn find_token(args: &super::HookArgs) -> Result<String, String> {
    if let Some(t) = &args.daemon.token {
        return Ok(t.clone());
    }
    let file = args
        .token_file
        .clone()
        .or_else(|| data_dir(args).map(|d| d.join(crate::api::auth::AGENT_TOKEN_FILE)))
        .ok_or("no agent token: set GATEHOST_TOKEN")?;
    // Owner-only, as the daemon writes its own: a token file others can
    // read is refused, not used.
    crate::api::auth::read_or_create(&file, false)
        .map_err(|e| format!("no agent token: {e}; pass --token-file FILE or set GATEHOST_TOKEN"))
}

/// The daemon's data directory: `--data-dir` (or `GATEHOST_DATA_DIR`), else the default.
fn data_dir(args: &super::HookArgs) -> Option<std::path::PathBuf> {
    args.data_dir
        .clone()
        .or_else(super::super::serve::default_data_dir)
}
