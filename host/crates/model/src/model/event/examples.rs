//! Examples of every event kind, with the shapes the daemon emits (the
//! golden test's input).

use super::{
    AnsweredBy, Approved, Attached, BlockOutcome, Blocked, Cancelled, ChangedAfter, ClientRefused,
    CommitReady, Committed, DamageRef, Empty, Event, Expired, FailReason, GateSummary,
    GateSummaryItem, Gating, HookEvent, HookNotice, InputSource, Live, Nudge, OnStaleName,
    Permission, PermissionEscalated, PolicyChange, PolicyEvent, PolicyHead, PolicyRefused, Queued,
    Reasoned, RefusedOrigin, Registered, Rejected, Report, Retry, ReviewChange, ReviewEnded,
    ReviewEvent, ReviewRepair, ReviewStarted, ReviewVerdict, RoutineEvent, RoutineKind,
    RoutinePayload, SessionEvent, Stale, StaleAck, Ungated, WatchdogEvent, Watching,
};
use crate::permission::{Decision, ToolAsk};
use crate::verdict::{Finding, Outcome, Severity};
use serde_json::json;

mod daemon;

fn s(v: &str) -> String {
    v.to_string()
}

fn head(status: &str) -> PolicyHead {
    PolicyHead {
        policy_id: s("pol-1"),
        status: s(status),
        session_ids: vec![s("claude-1")],
    }
}

fn policy(status: &str, change: PolicyChange) -> Event {
    Event::Policy(PolicyEvent {
        head: head(status),
        change,
    })
}

fn review(status: &str, change: ReviewChange) -> Event {
    Event::Review(ReviewEvent {
        head: head(status),
        change,
    })
}

fn report(state: &str, turn: i64, message: Option<&str>) -> Report {
    Report {
        session_id: s("claude-1"),
        state: s(state),
        turn,
        message: message.map(s),
    }
}

fn summary(outcome: Outcome) -> GateSummary {
    GateSummary {
        outcome,
        reason: s("1 of 1 gates failed: cargo test"),
        gates: vec![GateSummaryItem {
            gate: s("shell: cargo test"),
            outcome,
            reason: s("exit 101"),
            exit_code: Some(101),
            findings: vec![Finding {
                path: Some(s("src/lib.rs")),
                line: Some(3),
                severity: Severity::Error,
                message: s("a test failed"),
            }],
        }],
    }
}

fn tool() -> ToolAsk {
    ToolAsk {
        kind: Some(s("execute")),
        name: None,
        title: Some(s("cargo test")),
    }
}

fn routine(kind: RoutineKind, payload: RoutinePayload) -> Event {
    Event::Routine(RoutineEvent { kind, payload })
}

fn run(state: &str) -> RoutinePayload {
    RoutinePayload {
        routine_id: s("rt-1"),
        state: s(state),
        label: Some(s("nightly")),
        ..RoutinePayload::default()
    }
}

fn blocked(outcome: BlockOutcome, reason: &str) -> Blocked {
    Blocked {
        outcome,
        reason: Some(s(reason)),
        stale_sessions: None,
        gate_crashes: None,
        damage: None,
    }
}

/// One example or more of every kind, with the shapes the daemon emits.
pub fn examples() -> Vec<Event> {
    use PolicyChange as P;
    use ReviewChange as R;
    use RoutineKind as K;
    let mut all = vec![
        Event::Session(SessionEvent::Registered(Registered {
            session_id: s("claude-1"),
            cwd: s("/w/app"),
            workspace: s("/w/app"),
            label: None,
            started: false,
        })),
        Event::Session(SessionEvent::TurnStart(report("running", 0, None))),
        Event::Session(SessionEvent::TurnEnd(report("idle", 1, Some("done")))),
        Event::Session(SessionEvent::AwaitingInput(report(
            "awaiting-input",
            1,
            Some("which file?"),
        ))),
        Event::Session(SessionEvent::Exited(report(
            "exited",
            2,
            Some("exit status 0"),
        ))),
        Event::Session(SessionEvent::PolicyRefused(PolicyRefused {
            session_id: s("claude-1"),
            origin: RefusedOrigin::File {
                file: s("/etc/gatehost.toml"),
            },
            reason: s("does not parse"),
        })),
        Event::Session(SessionEvent::PolicyRefused(PolicyRefused {
            session_id: s("claude-1"),
            origin: RefusedOrigin::Standing {
                standing_id: s("st-1"),
            },
            reason: s("does not parse"),
        })),
        Event::Session(SessionEvent::Permission(Permission {
            session_id: s("acp-1"),
            request: s("perm-1"),
            tool_call_id: s("call-1"),
            tool: tool(),
            rule: Decision::Escalate,
            allowed: true,
            by: AnsweredBy::Routine,
            routine: Some(s("rt-1")),
        })),
        Event::Session(SessionEvent::Permission(Permission {
            session_id: s("acp-1"),
            request: s("perm-2"),
            tool_call_id: s("call-2"),
            tool: ToolAsk::default(),
            rule: Decision::Deny,
            allowed: false,
            by: AnsweredBy::Rule,
            routine: None,
        })),
        Event::Session(SessionEvent::PermissionEscalated(PermissionEscalated {
            session_id: s("acp-1"),
            request: s("perm-1"),
            tool_call_id: s("call-1"),
            tool: tool(),
            timeout_ms: 300_000,
        })),
        Event::Session(SessionEvent::ClientRefused(ClientRefused {
            session_id: s("acp-1"),
            method: s("fs/read_text_file"),
            target: s("/etc/passwd"),
            reason: s("gatehost offers no file-system or terminal to agents: use your own tools"),
        })),
        Event::Session(SessionEvent::Ungated(Ungated {
            session_id: s("claude-1"),
            cwd: s("/w/app"),
            turn: 1,
            reason: s("no policy watches this session: its stop was not gated"),
        })),
        Event::Watchdog(WatchdogEvent::Stale(Stale {
            session_id: s("claude-1"),
            last_heard_at: 1_000,
            silent_ms: 61_000,
            timeout_ms: 60_000,
            on_stale: OnStaleName::Block,
        })),
        Event::Watchdog(WatchdogEvent::Live(Live {
            session_id: s("claude-1"),
            by: s("report"),
            stale_at: 62_000,
        })),
        policy(
            "watching",
            P::Attached(Attached {
                then: s("commit"),
                label: Some(s("tests pass")),
                watch_after: 7,
                pending: vec![s("claude-1")],
                parent_id: None,
            }),
        ),
        policy(
            "queued",
            P::Queued(Queued {
                reason: s("session claude-1: session:turn-end"),
                gate_crashes: None,
            }),
        ),
        policy(
            "queued",
            P::Queued(Queued {
                reason: s("the daemon restarted while the gate ran; it runs again"),
                gate_crashes: Some(1),
            }),
        ),
        policy("gating", P::Gating(Gating { run: 1 })),
        policy("gating", P::Passed(summary(Outcome::Pass))),
        policy("gating", P::Failed(summary(Outcome::Fail))),
        policy(
            "nudging",
            P::Nudge(Nudge {
                message: s("The gate failed: fix it."),
                by: None,
                comments: None,
                retry: Some(1),
                max_retries: Some(3),
                sessions: Some(vec![s("claude-1")]),
            }),
        ),
        policy(
            "watching",
            P::Nudge(Nudge {
                message: s("Please change src/lib.rs:3"),
                by: Some(s("the operator")),
                comments: Some(json!([{"path": "src/lib.rs", "line": 3, "body": "rename"}])),
                retry: None,
                max_retries: None,
                sessions: Some(vec![s("claude-1")]),
            }),
        ),
        policy(
            "cancelled",
            P::Nudge(Nudge {
                message: s("not this way"),
                by: Some(s("the operator")),
                comments: None,
                retry: None,
                max_retries: None,
                sessions: None,
            }),
        ),
        policy(
            "watching",
            P::Watching(Watching {
                pending: vec![s("claude-1")],
            }),
        ),
        policy(
            "blocked",
            P::Blocked(blocked(
                BlockOutcome::Fail,
                "the gate failed after 3 retries: exit 101",
            )),
        ),
        policy(
            "blocked",
            P::Blocked(Blocked {
                stale_sessions: Some(vec![s("claude-1")]),
                ..blocked(BlockOutcome::Stale, "session(s) claude-1 went silent")
            }),
        ),
        policy(
            "blocked",
            P::Blocked(Blocked {
                gate_crashes: Some(2),
                ..blocked(BlockOutcome::Error, "the daemon died 2 times in a row")
            }),
        ),
        policy(
            "blocked",
            P::Blocked(Blocked {
                damage: Some(Some(DamageRef::Policy {
                    policy_id: s("pol-1"),
                    column: s("spec"),
                    message: s("expected value"),
                })),
                ..blocked(
                    BlockOutcome::Error,
                    "policy pol-1: its stored spec does not decode",
                )
            }),
        ),
        policy(
            "blocked",
            P::Blocked(Blocked {
                damage: Some(Some(DamageRef::Session {
                    session_id: s("claude-1"),
                    column: s("state"),
                    message: s("unknown state"),
                })),
                ..blocked(
                    BlockOutcome::Error,
                    "session claude-1: its stored state does not decode",
                )
            }),
        ),
        policy(
            "blocked",
            P::Blocked(Blocked {
                damage: Some(None),
                ..blocked(BlockOutcome::Error, "a stored row does not decode")
            }),
        ),
        policy(
            "blocked",
            P::Blocked(blocked(
                BlockOutcome::Expired,
                "its deadline (1h) passed while it was watching",
            )),
        ),
        policy(
            "blocked",
            P::Blocked(blocked(BlockOutcome::Review, "a person must look")),
        ),
        policy(
            "blocked",
            P::Blocked(Blocked {
                reason: None,
                ..blocked(BlockOutcome::Fail, "")
            }),
        ),
        policy(
            "awaiting-ack",
            P::CommitReady(CommitReady {
                plan: Some(Box::new(crate::model::plan::CommitPlan {
                    version: 1,
                    paths: vec![s("src")],
                    message: s("m"),
                    fingerprint: s("f"),
                    require_human_ack: true,
                    diff_summary: None,
                    snapshot: None,
                    changed_after_snapshot: None,
                })),
            }),
        ),
        policy("awaiting-ack", P::CommitReady(CommitReady { plan: None })),
        policy(
            "committing",
            P::Approved(Approved {
                by: s("policy (requireHumanAck: false)"),
                changed_after_snapshot: None,
            }),
        ),
        policy(
            "committing",
            P::Approved(Approved {
                by: s("the operator"),
                changed_after_snapshot: Some(ChangedAfter::Paths(vec![s("src/new.rs")])),
            }),
        ),
        policy(
            "committing",
            P::Approved(Approved {
                by: s("the operator"),
                changed_after_snapshot: Some(ChangedAfter::Failed {
                    error: s("permission denied"),
                }),
            }),
        ),
        policy(
            "cancelled",
            P::Rejected(Rejected {
                by: s("the operator"),
                comment: None,
            }),
        ),
        policy(
            "cancelled",
            P::Rejected(Rejected {
                by: s("the operator"),
                comment: Some(s("not this way")),
            }),
        ),
        policy(
            "queued",
            P::Stale(StaleAck {
                by: Some(s("the operator")),
                reason: s("the commit paths changed since the gate passed"),
            }),
        ),
        policy(
            "queued",
            P::Stale(StaleAck {
                by: None,
                reason: s("the commit paths changed after the ack; the gate runs again"),
            }),
        ),
        policy(
            "done",
            P::Committed(Committed {
                sha: Some(s("0123abcd")),
                nothing_to_commit: false,
                paths: Some(vec![s("src")]),
                note: None,
            }),
        ),
        policy(
            "cancelled",
            P::Committed(Committed {
                sha: None,
                nothing_to_commit: true,
                paths: None,
                note: Some(s("published in the instant the policy was cancelled")),
            }),
        ),
        policy(
            "committing",
            P::CommitFailed(Reasoned {
                reason: s("the commit could not be made: a symlink"),
            }),
        ),
        policy(
            "cancelled",
            P::Cancelled(Cancelled {
                from: Some(s("watching")),
                reason: Some(s("cancelled by the operator")),
                stale_sessions: None,
            }),
        ),
        policy(
            "cancelled",
            P::Cancelled(Cancelled {
                from: None,
                reason: Some(s("session(s) claude-1 went silent")),
                stale_sessions: Some(vec![s("claude-1")]),
            }),
        ),
        policy("done", P::Done(Empty {})),
        policy(
            "done",
            P::NextRefused(Reasoned {
                reason: s("the next policy names no gate"),
            }),
        ),
        policy(
            "queued",
            P::Paused(Reasoned {
                reason: s(
                    "supervision is paused ([daemon] enabled = false); the gate runs when it is enabled again",
                ),
            }),
        ),
        policy(
            "blocked",
            P::Expired(Expired {
                deadline_at: 3_600_000,
                was: s("watching"),
                reason: s("its deadline (1h) passed while it was watching"),
            }),
        ),
        policy(
            "gating",
            P::Retry(Retry {
                cause: s("the judge timed out"),
                attempt: 1,
                of: 2,
                wait_ms: 5_000,
            }),
        ),
        review(
            "reviewing",
            R::Started(ReviewStarted {
                cycle: 1,
                max_cycles: 5,
                reviewer: s("session reviewer-1"),
                prompt: Some(s("Review this change")),
                diff_bytes: 120,
            }),
        ),
        review(
            "reviewing",
            R::Started(ReviewStarted {
                cycle: 2,
                max_cycles: 5,
                reviewer: s("judge: claude"),
                prompt: None,
                diff_bytes: 0,
            }),
        ),
        review(
            "reviewing",
            R::Verdict(ReviewVerdict {
                cycle: 1,
                max_cycles: 5,
                verdict: s("BLOCK"),
                findings: s("add a test"),
            }),
        ),
        review(
            "watching",
            R::Repair(ReviewRepair {
                cycle: 1,
                max_cycles: 5,
                session: s("claude-1"),
                message: s("The reviewer blocked your change"),
            }),
        ),
        review(
            "done",
            R::Shipped(ReviewEnded {
                cycle: 2,
                max_cycles: 5,
                reason: Some(s("committed")),
            }),
        ),
        review(
            "blocked",
            R::Escalated(ReviewEnded {
                cycle: 5,
                max_cycles: 5,
                reason: None,
            }),
        ),
        routine(K::Started, run("running")),
        routine(
            K::StepStarted,
            RoutinePayload {
                step: Some(s("build")),
                session_id: Some(s("acp-1")),
                ..run("running")
            },
        ),
        routine(
            K::AwaitingInput,
            RoutinePayload {
                step: Some(s("build")),
                session_id: Some(s("acp-1")),
                source: Some(InputSource::TurnEnd),
                message: Some(s("which branch?")),
                ..run("waiting")
            },
        ),
        routine(
            K::AutoAllowed,
            RoutinePayload {
                step: Some(s("build")),
                session_id: Some(s("acp-1")),
                request: Some(s("perm-1")),
                ..run("running")
            },
        ),
        routine(
            K::Escalated,
            RoutinePayload {
                step: Some(s("build")),
                session_id: Some(s("acp-1")),
                source: Some(InputSource::Permission),
                request: Some(s("perm-1")),
                timeout_ms: Some(600_000),
                deadline_at: Some(700_000),
                ..run("escalated")
            },
        ),
        routine(
            K::Resolved,
            RoutinePayload {
                step: Some(s("build")),
                message: Some(s("main")),
                ..run("running")
            },
        ),
        routine(
            K::StepDone,
            RoutinePayload {
                step: Some(s("build")),
                ..run("running")
            },
        ),
        routine(
            K::StepRestarted,
            RoutinePayload {
                step: Some(s("build")),
                reason: Some(s("the daemon restarted")),
                restarts: Some(1),
                ..run("running")
            },
        ),
        routine(K::Done, run("done")),
        routine(
            K::Failed,
            RoutinePayload {
                step: Some(s("build")),
                fail_reason: Some(FailReason::SessionDied),
                reason: Some(s("its session exited before finishing")),
                ..run("failed")
            },
        ),
        routine(
            K::Cancelled,
            RoutinePayload {
                routine_id: s("rt-2"),
                state: s("cancelled"),
                reason: Some(s(
                    "cancelled by the operator; its stored row was damaged (spec)",
                )),
                damaged: true,
                ..RoutinePayload::default()
            },
        ),
    ];
    // The daemon's own (standing policies, passkeys, configuration, hosts,
    // tokens), then the standalone hook's.
    all.extend(daemon::examples());
    all.extend([
        Event::Hook(HookEvent::Capped(HookNotice {
            agent: s("claude"),
            session_id: s("claude-1"),
            cwd: s("/w/app"),
            reason: s("out of retries: the stop is let through"),
        })),
        Event::Hook(HookEvent::GateError(HookNotice {
            agent: s("codex"),
            session_id: s("codex-1"),
            cwd: s("/w/app"),
            reason: s("the gate could not run"),
        })),
    ]);
    all
}
