//! The checks of an attach input that need nothing but the input, made
//! at attach and again on every read of a stored spec (a spec of the wrong
//! shape is a decode error, never a default). It must never look at a
//! session, the runner or a file.

use super::{
    AttachInput, GateOn, Invalid, MAX_CHAIN, MAX_COMMIT_MESSAGE, MAX_LABEL, MAX_NUDGE,
    MAX_RETRIES_LIMIT, Then, WatchFrom, invalid,
};
use crate::commit::validate_commit_path;
use crate::config::Trust;
use serde_json::Value;

/// The checks of an attach input that need nothing but the input (no
/// session, runner or file): sizes, members named, gates that parse, the
/// commit and its rules, options in range (the gates were parsed with
/// the input). `chained`: a `next` policy, whose members default to its
/// parent's.
pub fn check_shape(
    input: &AttachInput,
    at: &str,
    chained: bool,
    depth: usize,
) -> Result<(), Invalid> {
    let f = |name: &str| format!("{at}{name}");
    let too_long = |field: &str, value: &str, max: usize| {
        (value.len() > max).then(|| {
            invalid(
                f(field),
                format!("{} bytes: at most {max} are accepted", value.len()),
            )
        })
    };
    if let Some(e) = input
        .label
        .as_deref()
        .and_then(|l| too_long("label", l, MAX_LABEL))
        .or_else(|| {
            input
                .on_fail
                .nudge
                .as_deref()
                .and_then(|n| too_long("onFail.nudge", n, MAX_NUDGE))
        })
        .or_else(|| {
            input
                .commit
                .as_ref()
                .and_then(|c| too_long("commit.message", &c.message, MAX_COMMIT_MESSAGE))
        })
    {
        return Err(e);
    }
    super::review::check_review(input, at)?;
    if depth > MAX_CHAIN {
        return Err(invalid(
            f("next"),
            format!("chains deeper than {MAX_CHAIN} are refused"),
        ));
    }
    if let Some(list) = &input.session_ids
        && list.is_empty()
    {
        return Err(invalid(f("sessionIds"), "must name at least one session"));
    }
    if input.members().is_empty() && !chained {
        return Err(invalid(
            f("sessionId"),
            "name the session (sessionId) or sessions (sessionIds) to watch",
        ));
    }
    let gates = input.gates();
    match (input.then, &input.commit) {
        (Then::Commit, None) => {
            return Err(invalid(
                f("commit"),
                "then: \"commit\" needs commit: {paths, message}",
            ));
        }
        (Then::Emit, Some(_)) => {
            return Err(invalid(
                f("commit"),
                "given, but then is not \"commit\" (set then: \"commit\", or drop commit)",
            ));
        }
        (Then::Commit, Some(c)) => {
            if c.paths.is_empty() {
                return Err(invalid(f("commit.paths"), "must name at least one path"));
            }
            for (i, p) in c.paths.iter().enumerate() {
                validate_commit_path(p)
                    .map_err(|e| invalid(f(&format!("commit.paths[{i}]")), e.to_string()))?;
            }
            if c.message.trim().is_empty() {
                return Err(invalid(f("commit.message"), "must not be empty"));
            }
            if c.message.contains('\0') {
                return Err(invalid(f("commit.message"), "must not contain a NUL byte"));
            }
            // Operator power stays with the operator: the agent can neither
            // waive the human's ack nor commit what no gate judged.
            if input.attached_by == Trust::Agent {
                if !c.require_human_ack {
                    return Err(invalid(
                        f("commit.requireHumanAck"),
                        "only the operator token may attach a commit without a human's ack",
                    ));
                }
                if gates.is_empty() {
                    return Err(invalid(
                        f("gate"),
                        "a commit policy attached with the agent token needs a gate (only the operator may commit what no gate judged)",
                    ));
                }
                if input.gate_on == Some(GateOn::Workspace) {
                    return Err(invalid(
                        f("gateOn"),
                        "only the operator token may gate a commit on the live workspace (what passed would not be what is committed)",
                    ));
                }
            }
        }
        (Then::Emit, None) => {}
    }
    if input.then == Then::Emit && input.gate_on == Some(GateOn::Snapshot) {
        return Err(invalid(
            f("gateOn"),
            "\"snapshot\" needs then: \"commit\" (a snapshot is of the commit paths)",
        ));
    }
    if let Some(n) = input.on_fail.max_retries
        && n > MAX_RETRIES_LIMIT
    {
        return Err(invalid(
            f("onFail.maxRetries"),
            format!("must be between 0 and {MAX_RETRIES_LIMIT}"),
        ));
    }
    input
        .deadline_duration()
        .map_err(|m| invalid(f("deadline"), m))?;
    if let Some(n) = &input.on_fail.nudge
        && n.trim().is_empty()
    {
        return Err(invalid(
            f("onFail.nudge"),
            "must not be empty (omit it for the default nudge)",
        ));
    }
    if let Some(WatchFrom::Cursor(c)) = input.watch_from
        && c < 0
    {
        return Err(invalid(f("watchFrom"), "a cursor is at least 0"));
    }
    Ok(())
}

/// Checks an attach input read back from the store, as strictly as
/// the engine's attach checks one at attach, but for what needs the sessions, the
/// runner or the workspace (checked again when the gate runs): a stored
/// spec of the wrong shape is a decode error, never a default.
pub fn check_stored(input: &AttachInput) -> Result<(), Invalid> {
    let mut at = String::new();
    let mut next = Some(input);
    let mut depth = 0;
    while let Some(i) = next {
        check_shape(i, &at, depth > 0, depth)?;
        at.push_str("next.");
        depth += 1;
        next = i.next.as_deref();
    }
    Ok(())
}

/// Where `value` (an attach input) holds a list or a scalar where an
/// object belongs (the input itself, `onFail`, `commit`, `next`): serde
/// would read `[]` as a struct of defaults (no gate).
pub fn not_an_object(value: &Value) -> Option<String> {
    let mut at = String::new();
    let mut cur = Some(value);
    while let Some(v) = cur {
        let Value::Object(map) = v else {
            return Some(if at.is_empty() {
                "policy".into()
            } else {
                at.trim_end_matches('.').to_string()
            });
        };
        for key in ["onFail", "commit", "review"] {
            if let Some(inner) = map.get(key)
                && !inner.is_object()
                && !inner.is_null()
            {
                return Some(format!("{at}{key}"));
            }
        }
        at.push_str("next.");
        cur = map.get("next").filter(|n| !n.is_null());
    }
    None
}

/// Checks what can be checked of a policy before it has a session (a
/// standing policy's template): its shape, its gates' shape and its chain's
/// depth. The rest (the gates against a workspace, commit paths, a
/// reviewer) is checked when it attaches to a session.
pub fn check_template(input: &AttachInput, max_chain_depth: u32) -> Result<(), Invalid> {
    super::review::check_depth(input, max_chain_depth)?;
    // Its session is given when it attaches: checked as if it had one.
    let mut with_member = input.clone();
    with_member.session_ids = Some(vec!["template".into()]);
    check_shape(&with_member, "", false, 0)
}
