//! `gatehost hook AGENT`: answer one hook call of an agent CLI. The hook
//! JSON is read on stdin, the answer written on stdout in the CLI's format
//! and nothing else (logs go to stderr), with the exit status the CLI
//! expects, always within the budget.
//!
//! Where the verdict comes from: standalone (`--gates FILE`: the gates run
//! here, in the hook's `cwd`, like `gatehost check`; [`standalone`])
//! or a daemon (`gatehost serve`: the session is registered as
//! `AGENT:<session_id>`, the turn-end reported, the verdicts of the policies
//! it counted awaited; [`daemon`]). Both feed the one pure
//! decision, [`crate::hook::decide`], with the session's standing kept by
//! [`crate::hook::state`].
//!
//! It must never answer with anything but the adapter's rendering, and
//! never let a stop through silently because something failed: every
//! failure is an [`Input::Error`] (block once, then stop with the message).

use super::error::{CliError, CliResult};
use crate::hook::decide::{Input, decide, notice};
use crate::hook::outcome::{KEPT_FOR, Outcomes, StopOutcome, classify};
use crate::hook::state::{Session, StateDir, followup_digest};
use crate::hook::{
    Adapter, AgentCli, Answer, HookError, HookInput, HookPoint, adapter::trim_reason,
};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

mod args;
pub(in crate::cli) mod daemon;
pub(in crate::cli) mod install;
mod program;
mod standalone;
mod status;
mod stop;

pub(super) use args::{HookArgs, HookCommand};

pub(super) fn run(command: HookCommand) -> CliResult<i32> {
    match command {
        HookCommand::Install(a) => install::install(&a),
        HookCommand::Uninstall(a) => install::uninstall(&a),
        HookCommand::Status(a) => status::status(&a),
        hook => match hook.answering() {
            Some((agent, args)) => Ok(answer_hook(agent, &args)),
            None => Err(CliError::input("not a hook of an agent CLI")),
        },
    }
}

/// The most of stdin read: hook JSON is small, a transcript is not sent.
const MAX_INPUT: u64 = 16 * 1024 * 1024;

/// Reads the hook call, decides, writes the answer; returns the exit status.
fn answer_hook(agent: AgentCli, args: &HookArgs) -> i32 {
    let started = Instant::now();
    let adapter = crate::hook::adapter(agent);
    let budget = args.budget.unwrap_or_else(|| default_budget(adapter));
    let mut raw = Vec::new();
    let read = std::io::stdin().take(MAX_INPUT).read_to_end(&mut raw);
    let parsed = match read {
        Ok(_) => adapter.parse(&raw).map_err(|e| match e {
            // An event gatehost does not answer (installed by hand on a
            // tool call, say) is not a stop: never refuse it.
            HookError::UnknownEvent(name) => Err(name),
            other => Ok(other.to_string()),
        }),
        Err(e) => Err(Ok(format!("cannot read the hook's stdin: {e}"))),
    };
    let (point, answer) = match parsed {
        Ok(input) => {
            tracing::info!(agent = agent.name(), session = %input.session_id, point = ?input.point,
                loop_hint = ?input.loop_hint, "hook called");
            (input.point, answer_input(agent, args, &input, budget))
        }
        Err(Err(event)) => {
            tracing::warn!(
                agent = agent.name(),
                event,
                "a hook event gatehost does not answer: nothing to say"
            );
            (HookPoint::SessionStart, Answer::Proceed)
        }
        Err(Ok(e)) => {
            // Nothing to count retries by: the CLI's own cap bounds this.
            tracing::error!(agent = agent.name(), error = %e, "unreadable hook input");
            (
                HookPoint::Stop,
                Answer::Block(format!("gatehost hook {}: {e}", agent.name())),
            )
        }
    };
    let answer = match answer {
        Answer::Block(r) => Answer::Block(trim_reason(&r, adapter.reason_limit())),
        Answer::StopWithMessage(m) => {
            eprintln!("{m}");
            Answer::StopWithMessage(trim_reason(&m, adapter.reason_limit()))
        }
        Answer::Proceed => Answer::Proceed,
    };
    let rendered = adapter.render(point, &answer);
    tracing::info!(agent = agent.name(), answer = ?answer, took_ms = started.elapsed().as_millis() as u64, "hook answered");
    let mut out = std::io::stdout().lock();
    if let Err(e) = out
        .write_all(rendered.stdout.as_bytes())
        .and_then(|()| out.flush())
    {
        tracing::error!(error = %e, "cannot write the hook's answer");
        return 1;
    }
    rendered.exit
}

/// A tenth (at least 5 s) below the CLI's own timeout.
fn default_budget(adapter: &dyn Adapter) -> Duration {
    let t = adapter.cli_timeout();
    t.saturating_sub((t / 10).max(Duration::from_secs(5)))
}

/// The answer to a parsed hook call: what happened, decided against the
/// session's standing.
fn answer_input(agent: AgentCli, args: &HookArgs, input: &HookInput, budget: Duration) -> Answer {
    let deadline = Instant::now() + budget;
    match input.point {
        HookPoint::SessionStart => {
            if args.gates.is_none() {
                daemon::greet(agent, args, input, deadline);
            }
            Answer::Proceed
        }
        HookPoint::TurnStart => {
            if args.gates.is_none() {
                daemon::turn_start(agent, args, input, deadline);
            }
            match StateDir::open(args.state_dir.as_deref()) {
                Ok(state) => settle(agent, args, &state, input, Input::Prompt, None, deadline).0,
                Err(e) => state_failure(input.point, &e.to_string()),
            }
        }
        HookPoint::Stop => stop::answer(agent, args, input, deadline),
        HookPoint::SessionEnd => {
            // The CLI gives a session's end a few seconds, not the budget:
            // half of what `hook install` wrote for it.
            let limit = crate::hook::adapter(agent).event_timeout(HookPoint::SessionEnd) / 2;
            end_session(agent, args, input, deadline.min(Instant::now() + limit));
            Answer::Proceed
        }
    }
}

/// What was decided for one hook call, under the session's lock: the
/// answer, the session's standing after it and (for a stop) its outcome.
type Settled = (Answer, Session, Option<StopOutcome>);

/// Decides `what` against the standing of the call's session (a
/// sub-agent's own, for a sub-agent's stop), records it (and a stop's
/// outcome for `gatehost hook status`), and notifies where a person must
/// act.
fn settle(
    agent: AgentCli,
    args: &HookArgs,
    state: &StateDir,
    input: &HookInput,
    what: Input,
    hook_config: Option<&crate::config::HookConfig>,
    deadline: Instant,
) -> Settled {
    tracing::info!(agent = agent.name(), session = %input.session_id, subagent = ?input.subagent, input = ?what, "hook verdict");
    let max = args.max_retries;
    let outcomes = Outcomes::under(state.path());
    let limit = crate::hook::adapter(agent).reason_limit();
    let prompt = input.prompt.as_deref().map(followup_digest);
    let key = input.standing_key();
    match state.update_session(agent, &key, |session: &Session| {
        // The CLI submitted gatehost's own block reason as the next prompt
        // (Cursor's followup_message): no person spoke.
        let own = what == Input::Prompt && prompt.is_some() && prompt == session.followup;
        if own {
            tracing::info!(
                agent = agent.name(),
                "the prompt is gatehost's own follow-up: the count goes on"
            );
        }
        let what = if own { &Input::OwnFollowUp } else { &what };
        let d = decide(session.standing, what, max);
        // The reason as the CLI will get it (trimmed as `answer_hook` does).
        let followup = match &d.answer {
            Answer::Block(reason) => Some(followup_digest(&trim_reason(reason, limit))),
            _ => session.followup.clone(),
        };
        let notice = notice(session.standing, what, &d);
        let outcome = (input.point == HookPoint::Stop).then(|| classify(what, &d.answer));
        if let Some(outcome) = &outcome {
            // Under the session's lock, as the standing: for scripts after
            // a headless run (`gatehost hook status`).
            if let Err(e) = outcomes.record(agent, &key, &input.cwd, outcome.clone()) {
                tracing::warn!(error = %e, "cannot keep the stop's outcome for `gatehost hook status`");
            }
        }
        let next = Session {
            standing: d.next,
            followup,
        };
        (next.clone(), (d.answer, next, outcome, notice))
    }) {
        Ok((answer, next, outcome, notice)) => {
            if let (Some(notice), Some(config)) = (notice, hook_config) {
                standalone::notify(agent, config, input, &notice, deadline);
            }
            (answer, next, outcome)
        }
        Err(e) => (
            state_failure(input.point, &e.to_string()),
            Session::default(),
            None,
        ),
    }
}

/// The session ended: the daemon is told it exited (its policies stop
/// waiting on it); a standalone hook forgets the session's retry count.
fn end_session(agent: AgentCli, args: &HookArgs, input: &HookInput, deadline: Instant) {
    if let Ok(state) = StateDir::open(args.state_dir.as_deref()) {
        let pruned = Outcomes::under(state.path()).prune(KEPT_FOR);
        if pruned > 0 {
            tracing::info!(pruned, "stop records older than 30 days removed");
        }
        let pruned = crate::hook::ledger::StopLedger::under(state.path()).prune();
        if pruned > 0 {
            tracing::info!(pruned, "stop ledger entries older than 15 minutes removed");
        }
        let pruned = state.prune(KEPT_FOR);
        if pruned > 0 {
            tracing::info!(pruned, "retry counts untouched for 30 days removed");
        }
    }
    if args.gates.is_none() {
        daemon::session_end(agent, args, input, deadline);
        return;
    }
    match StateDir::open(args.state_dir.as_deref())
        .and_then(|s| s.forget(agent, &input.session_id, deadline))
    {
        Ok(had) => {
            tracing::info!(agent = agent.name(), session = %input.session_id, had_standing = had, "session ended: its retry count is forgotten");
        }
        Err(e) => tracing::warn!(error = %e, "cannot forget the ended session's retry count"),
    }
}

/// Without its standing the hook cannot count: a stop is refused (the CLI's
/// own cap ends the loop), anything else goes on.
fn state_failure(point: HookPoint, error: &str) -> Answer {
    tracing::error!(error, "cannot keep the session's retry count");
    match point {
        HookPoint::Stop => Answer::Block(format!(
            "gatehost cannot keep this session's retry count, so this work is not accepted: {error}"
        )),
        _ => Answer::Proceed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The numbers `--help` and docs/agents.md give: the CLI's own hook
    /// timeout, the default budget below it, and a session end's timeout.
    #[test]
    fn the_documented_timeouts_and_budgets_are_the_codes() {
        for (agent, cli, budget) in [
            (AgentCli::Claude, 600, 540),
            (AgentCli::Codex, 600, 540),
            (AgentCli::Gemini, 60, 54),
            (AgentCli::Cursor, 60, 54),
            (AgentCli::Qwen, 60, 54),
            (AgentCli::Copilot, 30, 25),
            (AgentCli::Opencode, 600, 540),
            (AgentCli::Kiro, 30, 25),
        ] {
            let a = crate::hook::adapter(agent);
            assert_eq!(a.cli_timeout(), Duration::from_secs(cli), "{agent:?}");
            assert_eq!(default_budget(a), Duration::from_secs(budget), "{agent:?}");
            assert_eq!(
                a.event_timeout(HookPoint::SessionEnd),
                Duration::from_secs(3),
                "{agent:?}"
            );
            assert_eq!(a.event_timeout(HookPoint::Stop), a.cli_timeout());
        }
    }
}
