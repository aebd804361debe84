//! `gatehost hook status`: what a session's last stop came to, read from
//! the hook state directory's stop records ([`crate::hook::outcome`]), for
//! a person or a script after a headless run. It must never change a
//! record or a standing.

use super::args::StatusArgs;
use crate::cli::error::{CliError, CliResult};
use crate::hook::AgentCli;
use crate::hook::outcome::{OutcomeError, Outcomes, StopOutcome, StopRecord};
use crate::hook::state::StateDir;

/// Prints the record; 0 when the last stop passed, 1 when it did not.
pub(super) fn status(args: &StatusArgs) -> CliResult<i32> {
    let state = StateDir::open(args.state_dir.as_deref())
        .map_err(|e| CliError::new("no-state", e.to_string()).field("--state-dir"))?;
    let outcomes = Outcomes::under(state.path());
    let record = match &args.session {
        Some(session) => {
            let (agent, id) = parse_session(session)?;
            outcomes.get(agent, id)
        }
        None => outcomes.last(args.cwd.as_deref()),
    }
    .map_err(|e| match e {
        OutcomeError::None { .. } => CliError::new("no-record", e.to_string()).hint(
            "no hook answered a stop of it with this state directory (pass the hooks' --state-dir if they have one)",
        ),
        other => CliError::new("record", other.to_string()),
    })?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&record).map_err(|e| CliError::new("record", e.to_string()))?
        );
    } else {
        println!("{}", human(&record));
    }
    Ok(if record.last.accepted() { 0 } else { 1 })
}

/// `AGENT:ID`.
fn parse_session(session: &str) -> CliResult<(AgentCli, &str)> {
    let bad = || {
        CliError::input(format!("{session:?} is not AGENT:ID"))
            .field("AGENT:ID")
            .hint("name the session as the daemon does: claude:<session id>, codex:<id>, gemini:<id>, cursor:<id>")
    };
    let (agent, id) = session.split_once(':').ok_or_else(bad)?;
    let agent = AgentCli::from_name(agent).ok_or_else(bad)?;
    if id.is_empty() {
        return Err(bad());
    }
    Ok((agent, id))
}

/// The record in a few lines.
fn human(r: &StopRecord) -> String {
    let last = match &r.last {
        StopOutcome::Passed => "passed".to_string(),
        StopOutcome::SentBack { reason } => format!("sent back: {reason}"),
        StopOutcome::LetThrough { why, message } => {
            let why = serde_json::to_value(why)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            format!("let through without a pass ({why}): {message}")
        }
    };
    let at = humantime::format_rfc3339_seconds(
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(r.at),
    );
    format!(
        "{}  in {}\nlast stop ({at}): {last}\nstops: {}, sent back: {}, let through: {}",
        r.session,
        r.cwd.display(),
        r.stops,
        r.sent_back,
        r.let_through
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_named_agent_colon_id() {
        assert_eq!(
            parse_session("claude:abc:def").expect("ok"),
            (AgentCli::Claude, "abc:def")
        );
        for bad in ["abc", "claude:", "vim:abc", ":abc"] {
            assert!(parse_session(bad).is_err(), "{bad}");
        }
    }
}
