//! The hook inputs `gatehost doctor` sends a hook command (a synthetic
//! stop, a ping, a session's end, in each CLI's own JSON) and the check of
//! what it answers against the CLI's contract: exit 0, and on stdout only
//! what that CLI reads (anything else it ignores or fails on, and the
//! stop goes through unseen). Pure: no process is run here.

use crate::hook::{AgentCli, HookPoint};
use serde_json::{Value, json};
use std::path::Path;

/// Whether `stdout` and `exit`, a hook's answer at `point`, are what
/// `agent` reads; the problem otherwise.
pub(super) fn check(
    agent: AgentCli,
    point: HookPoint,
    stdout: &str,
    exit: i32,
) -> Result<(), String> {
    if exit != 0 {
        return Err(format!(
            "exit status {exit}: the CLI takes that as a crash, and lets the stop through"
        ));
    }
    let adapter = crate::hook::adapter(agent);
    let text = stdout.trim();
    if text.is_empty() {
        // Claude Code, Codex and Kiro read nothing as "go on"; the others
        // want JSON (gatehost's Qwen Code adapter always answers JSON).
        return if adapter.reads_empty_answer() {
            Ok(())
        } else {
            Err("nothing on stdout: this CLI reads a JSON object".into())
        };
    }
    let v: Value = serde_json::from_str(text)
        .map_err(|e| format!("stdout is not one JSON object ({e}): {}", excerpt(text)))?;
    let o = v
        .as_object()
        .ok_or_else(|| format!("stdout is JSON but not an object: {}", excerpt(text)))?;
    if let Some(k) = o
        .keys()
        .find(|k| !adapter.answer_keys().contains(&k.as_str()))
    {
        return Err(format!("`{k}` is not a key {} reads", agent.name()));
    }
    if let Some(d) = o.get("decision") {
        let allowed = adapter.decisions();
        if !d.as_str().is_some_and(|d| allowed.contains(&d)) {
            return Err(format!("decision {d} is not one {} reads", agent.name()));
        }
        if point != HookPoint::Stop {
            return Err("a decision on a hook that is not a stop".into());
        }
        if o.get("reason")
            .and_then(Value::as_str)
            .is_none_or(|r| r.trim().is_empty())
        {
            return Err("a block without a reason".into());
        }
    }
    for k in ["reason", "systemMessage", "stopReason", "followup_message"] {
        if o.get(k).is_some_and(|v| !v.is_string()) {
            return Err(format!("`{k}` is not a string"));
        }
    }
    Ok(())
}

fn excerpt(text: &str) -> String {
    text.chars().take(200).collect()
}

/// A stop of session `id` in `cwd`, as `agent` sends it.
pub(super) fn synthetic_stop(agent: AgentCli, id: &str, cwd: &Path) -> String {
    let message = "gatehost doctor: a synthetic stop";
    crate::hook::adapter(agent)
        .synthetic_stop(id, cwd, message)
        .to_string()
}

/// The end of session `id`, for the CLIs whose hooks have one.
pub(super) fn session_end(agent: AgentCli, id: &str, cwd: &Path) -> Option<String> {
    crate::hook::adapter(agent)
        .session_end(id, cwd)
        .map(|v| v.to_string())
}

/// An event no hook answers: the hook starts, reads it, and says nothing
/// (in the CLI's shape), without asking a daemon.
pub(super) fn ping(id: &str, cwd: &Path) -> String {
    json!({"session_id": id, "conversation_id": id, "cwd": cwd, "workspace_roots": [cwd],
        "hook_event_name": "GatehostDoctorPing"})
    .to_string()
}

/// Where in the agent's life `agent` calls a hook registered for `event`,
/// as its adapter reads it.
pub(super) fn point_of(agent: AgentCli, event: &str) -> Option<HookPoint> {
    let probe = json!({"session_id": "doctor", "conversation_id": "doctor", "cwd": "/",
        "workspace_roots": ["/"], "status": "completed", "hook_event_name": event});
    crate::hook::adapter(agent)
        .parse(probe.to_string().as_bytes())
        .ok()
        .map(|i| i.point)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hook::Answer;

    /// Every answer every adapter renders passes the check: the check is
    /// the contract the adapters are written to.
    #[test]
    fn every_adapters_every_answer_passes() {
        for agent in AgentCli::ALL {
            let a = crate::hook::adapter(agent);
            for point in [
                HookPoint::Stop,
                HookPoint::SessionStart,
                HookPoint::TurnStart,
            ] {
                for answer in [
                    Answer::Proceed,
                    Answer::Block("fix it".into()),
                    Answer::StopWithMessage("out of retries".into()),
                ] {
                    let r = a.render(point, &answer);
                    assert_eq!(
                        check(agent, point, &r.stdout, r.exit),
                        Ok(()),
                        "{agent:?} {point:?} {answer:?}: {r:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn what_a_cli_would_ignore_or_fail_on_is_named() {
        let cases = [
            (AgentCli::Claude, "", 2, "exit status 2"),
            (AgentCli::Claude, "ok", 0, "not one JSON object"),
            (AgentCli::Claude, "[1]", 0, "not an object"),
            (
                AgentCli::Claude,
                r#"{"decision":"block"}"#,
                0,
                "without a reason",
            ),
            (
                AgentCli::Claude,
                r#"{"decision":"deny","reason":"r"}"#,
                0,
                "decision",
            ),
            (AgentCli::Gemini, "", 0, "nothing on stdout"),
            (
                AgentCli::Cursor,
                r#"{"decision":"block","reason":"r"}"#,
                0,
                "`decision` is not a key",
            ),
            (
                AgentCli::Codex,
                r#"{"systemMessage": 3}"#,
                0,
                "not a string",
            ),
        ];
        for (agent, out, exit, words) in cases {
            let e = check(agent, HookPoint::Stop, out, exit).expect_err(out);
            assert!(e.contains(words), "{agent:?} {out}: {e}");
        }
        assert!(
            check(
                AgentCli::Gemini,
                HookPoint::Stop,
                r#"{"decision":"deny","reason":"r"}"#,
                0
            )
            .is_ok()
        );
    }

    #[test]
    fn the_synthetic_inputs_read_as_their_cli_sends_them() {
        let cwd = Path::new("/tmp/ws");
        for agent in AgentCli::ALL {
            let a = crate::hook::adapter(agent);
            let stop = a
                .parse(synthetic_stop(agent, "d-1", cwd).as_bytes())
                .expect("stop");
            assert_eq!(
                (stop.point, stop.session_id.as_str()),
                (HookPoint::Stop, "d-1"),
                "{agent:?}"
            );
            assert_eq!(stop.cwd, cwd, "{agent:?}");
            if let Some(end) = session_end(agent, "d-1", cwd) {
                assert_eq!(
                    a.parse(end.as_bytes()).expect("end").point,
                    HookPoint::SessionEnd
                );
            }
            assert!(
                matches!(
                    a.parse(ping("d-1", cwd).as_bytes()),
                    Err(crate::hook::HookError::UnknownEvent(_))
                ),
                "{agent:?}: the ping is an event no hook answers"
            );
        }
        assert_eq!(point_of(AgentCli::Claude, "Stop"), Some(HookPoint::Stop));
        assert_eq!(
            point_of(AgentCli::Gemini, "AfterAgent"),
            Some(HookPoint::Stop)
        );
        assert_eq!(point_of(AgentCli::Cursor, "stop"), Some(HookPoint::Stop));
        assert_eq!(
            point_of(AgentCli::Codex, "SessionStart"),
            Some(HookPoint::SessionStart)
        );
        assert_eq!(point_of(AgentCli::Claude, "PreToolUse"), None);
    }
}
