//! A stop's hook call: where its verdict comes from (the gates here, a
//! sub-agent's own gate file, or the daemon), and one decision per stop
//! through the stop ledger ([`crate::hook::ledger`]): a stop that reached
//! another registration of gatehost first is answered with that
//! registration's decision, its standing taken over, never gated twice or
//! counted twice.
//!
//! It must never replay a decision for another stop (the ledger's
//! [`StopMark::same_stop`] decides), and never let a stop through because
//! the ledger could not be read: that is a state failure, which refuses.

use super::{HookArgs, settle, standalone, state_failure};
use crate::hook::adapter::trim_reason;
use crate::hook::ledger::{Caller, Decided, StopLedger, StopMark};
use crate::hook::outcome::Outcomes;
use crate::hook::state::{Session, StateDir, followup_digest};
use crate::hook::{AgentCli, Answer, HookInput, HookPoint};
use std::time::Instant;

/// The answer to a stop.
pub(super) fn answer(
    agent: AgentCli,
    args: &HookArgs,
    input: &HookInput,
    deadline: Instant,
) -> Answer {
    let gates = match &input.subagent {
        Some(_) => args.subagent_gates.as_ref().or(args.gates.as_ref()),
        None => args.gates.as_ref(),
    };
    if input.subagent.is_some() && gates.is_none() {
        // Daemon mode: the daemon gates the parent's turn-end, which takes
        // in what the sub-agent did; reporting the sub-agent's stop as a
        // turn-end would gate the parent in the middle of its turn.
        tracing::info!(agent = agent.name(), session = %input.session_id, subagent = ?input.subagent,
            "a sub-agent's stop is not gated in daemon mode (its parent's turn-end is); pass --subagent-gates FILE to gate it in the hook");
        return Answer::Proceed;
    }
    let state = match StateDir::open(args.state_dir.as_deref()) {
        Ok(s) => s,
        Err(e) => return state_failure(HookPoint::Stop, &e.to_string()),
    };
    let mark = StopMark::of(input);
    let held = if mark.is_known() {
        match StopLedger::under(state.path()).hold(&input.standing_key(), deadline) {
            Ok(held) => Some(held),
            Err(e) => return state_failure(HookPoint::Stop, &e.to_string()),
        }
    } else {
        tracing::debug!(
            agent = agent.name(),
            "the stop names no generation and no transcript: it cannot be told from the next, so it is not deduplicated"
        );
        None
    };
    let now = now_ms();
    let caller = Caller::of_this_process(agent.name());
    if let Some(decided) = held.as_ref().and_then(|h| h.decided(&mark, &caller, now)) {
        return replay(agent, &state, input, decided);
    }
    if held.as_ref().is_some_and(|h| h.repeated_by(&mark, &caller)) {
        tracing::info!(
            agent = agent.name(),
            session = %input.session_id,
            "this hook decided a stop with the same mark before: the CLI's next stop over a transcript it has not written yet, gated as a new stop"
        );
    }
    let (what, hook_config) = match gates {
        Some(gates) => standalone::verdict(args, gates, input, deadline),
        None => (super::daemon::verdict(agent, args, input, deadline), None),
    };
    let (answer, session, outcome) = settle(
        agent,
        args,
        &state,
        input,
        what,
        hook_config.as_ref(),
        deadline,
    );
    if let (Some(held), Some(outcome)) = (held, outcome) {
        let decided = Decided {
            mark,
            agent: agent.name().to_string(),
            caller: caller.as_str().to_string(),
            answer: answer.clone(),
            session,
            outcome,
            at_ms: now_ms(),
        };
        if let Err(e) = held.record(&decided) {
            // The answer stands; a duplicate of this stop would be gated
            // again, as without the ledger.
            tracing::warn!(error = %e, "cannot record the stop's decision in the stop ledger");
        }
    }
    answer
}

/// This stop was decided by another registration's hook call: its answer
/// again, in this CLI's terms, and its standing taken as this session's
/// own (so the next stop is counted from it whichever hook gets it first).
fn replay(agent: AgentCli, state: &StateDir, input: &HookInput, decided: &Decided) -> Answer {
    tracing::info!(
        agent = agent.name(),
        session = %input.session_id,
        decided_by = decided.agent,
        answer = ?decided.answer,
        "this stop was already decided by gatehost's {} hook: its answer is given again (gated once, counted once)",
        decided.agent
    );
    let limit = crate::hook::adapter(agent).reason_limit();
    let followup = match &decided.answer {
        Answer::Block(reason) => Some(followup_digest(&trim_reason(reason, limit))),
        _ => decided.session.followup.clone(),
    };
    let key = input.standing_key();
    let taken = Session {
        standing: decided.session.standing,
        followup,
    };
    let outcomes = Outcomes::under(state.path());
    let kept = state.update_session(agent, &key, |_| {
        if let Err(e) = outcomes.record(agent, &key, &input.cwd, decided.outcome.clone()) {
            tracing::warn!(error = %e, "cannot keep the stop's outcome for `gatehost hook status`");
        }
        (taken, ())
    });
    match kept {
        Ok(()) => decided.answer.clone(),
        Err(e) => state_failure(HookPoint::Stop, &e.to_string()),
    }
}

fn now_ms() -> u64 {
    u64::try_from(crate::store::now_ms()).unwrap_or(0)
}
