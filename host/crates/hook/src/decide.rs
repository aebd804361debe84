//! The hook's decision: from the session's standing and what happened (a
//! prompt, a gate's outcome), the answer to give the agent CLI and the
//! standing that follows. A pure function, [`decide`], unit-tested for every
//! standing × input.
//!
//! It owns the retry rules every CLI shares:
//! - a failing gate blocks the stop with its nudge, at most `max_retries`
//!   times in a row; the next failure lets the stop happen with a message
//!   the user sees (the session is then *exhausted* until a gate passes or a
//!   person sends a new prompt);
//! - a gate that could not run blocks once, naming the error, then lets the
//!   stop happen with the error shown: never an endless loop, never a silent
//!   pass;
//! - in daemon mode the policy counts the retries: a nudge blocks, a
//!   blocked policy stops with its reason;
//! - a gate still running at the budget blocks ("still running"), so the
//!   next stop gets its verdict;
//! - a daemon stop no policy watches goes through, with a message saying
//!   it was not gated (never silently).
//!
//! It must never read the CLI's own loop flag (`stop_hook_active`): an agent
//! that claims done, is refused and claims again is not let through by it.

use super::adapter::Answer;
use serde::{Deserialize, Serialize};

/// Where a session stands, as far as the hook's retries go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(tag = "standing", rename_all = "kebab-case")]
pub enum Standing {
    /// No failure since the last pass or prompt.
    #[default]
    Clear,
    /// The last `blocks` stops were refused for a failing gate.
    Failing {
        /// Stops refused in a row, counted against `max_retries`.
        blocks: u32,
    },
    /// A gate could not run and the one block for it was spent (`blocks`:
    /// the failures' count before it, kept).
    ErrorShown {
        /// The failing gate's blocks before the error, kept for when the
        /// gate runs again.
        blocks: u32,
    },
    /// Out of retries: stops go through with the block named, until a gate
    /// passes or a person sends a new prompt.
    Exhausted,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// A person sent a prompt: a new turn, the count starts again.
    Prompt,
    /// The CLI submitted gatehost's own last block reason as a prompt
    /// (Cursor's `followup_message`): no person spoke, the count goes on.
    OwnFollowUp,
    /// The gates passed (daemon: every policy watching the turn passed,
    /// awaits an ack, or was cancelled).
    Pass,
    /// Standalone: a gate failed; the nudge says why. Counted here.
    Fail(String),
    /// Daemon: a policy failed and nudged (its retries, counted by it).
    Nudged(String),
    /// Daemon: a policy is out of retries or blocked; the reason says why.
    Blocked(String),
    /// The gate could not run (or the daemon could not be asked).
    Error(String),
    /// The gate was still running at the budget.
    Running(String),
    /// Daemon: no policy watches this session (`AGENT:ID`): nothing gates
    /// its stop.
    Ungated(String),
}

/// The answer and the standing after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// What the hook tells the CLI for this stop.
    pub answer: Answer,
    /// The session's standing to save for its next stop.
    pub next: Standing,
}

/// The decision. `max_retries` is standalone mode's count of blocks for a
/// failing gate before the stop is let through.
pub fn decide(standing: Standing, input: &Input, max_retries: u32) -> Decision {
    use Standing::{Clear, ErrorShown, Exhausted, Failing};
    let go = |answer, next| Decision { answer, next };
    match (standing, input) {
        (_, Input::Prompt | Input::Pass) => go(Answer::Proceed, Clear),
        (_, Input::OwnFollowUp) => go(Answer::Proceed, standing),
        (Exhausted, Input::Fail(nudge) | Input::Nudged(nudge)) => {
            go(Answer::StopWithMessage(exhausted(nudge)), Exhausted)
        }
        (Clear | Failing { .. } | ErrorShown { .. }, Input::Fail(nudge)) => {
            let blocks = blocks(standing);
            if blocks < max_retries {
                go(Answer::Block(nudge.clone()), Failing { blocks: blocks + 1 })
            } else {
                go(Answer::StopWithMessage(exhausted(nudge)), Exhausted)
            }
        }
        (Clear | Failing { .. } | ErrorShown { .. }, Input::Nudged(nudge)) => go(
            Answer::Block(nudge.clone()),
            Failing {
                blocks: blocks(standing).saturating_add(1),
            },
        ),
        (_, Input::Blocked(reason)) => go(
            Answer::StopWithMessage(format!(
                "gatehost: the policy watching this session is blocked: {reason}"
            )),
            Exhausted,
        ),
        (Clear | Failing { .. }, Input::Error(reason)) => go(
            Answer::Block(format!(
                "gatehost could not run the gate, so this work is not accepted: {reason}"
            )),
            ErrorShown {
                blocks: blocks(standing),
            },
        ),
        (ErrorShown { .. } | Exhausted, Input::Error(reason)) => go(
            Answer::StopWithMessage(format!(
                "gatehost could not run the gate; the work was not accepted: {reason}"
            )),
            standing,
        ),
        (_, Input::Ungated(session)) => go(
            Answer::StopWithMessage(format!(
                "gatehost: no policy watches this session ({session}), so this stop was not \
                 gated. Attach one to it, or a standing policy that matches it \
                 (gatehost policy attach --template FILE --agent AGENT --under DIR)."
            )),
            standing,
        ),
        (_, Input::Running(what)) => go(
            Answer::Block(format!(
                "gatehost: the gate is still running ({what}). Its verdict is not in yet: \
                 end your turn again to get it."
            )),
            standing,
        ),
    }
}

/// What a standalone hook tells a person (`[hook] notify_url`) about one
/// stop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// The session ran out of retries at this stop: it is let through with
    /// the gate still failing (once, when it becomes exhausted).
    Capped(String),
    /// A gate could not run (every such stop: blocked once, then let
    /// through).
    GateError(String),
}

impl Notice {
    /// The notification's event type.
    pub fn kind(&self) -> &'static str {
        match self {
            Notice::Capped(_) => "hook:capped",
            Notice::GateError(_) => "hook:gate-error",
        }
    }

    /// The notification's text: the block reason the stop was let through
    /// with, or the gate's error.
    pub fn reason(&self) -> &str {
        match self {
            Notice::Capped(r) | Notice::GateError(r) => r,
        }
    }
}

/// The notice of a standalone stop, from the standing before it, what
/// happened and the decision. Daemon-mode inputs (`Nudged`, `Blocked`)
/// have none: the daemon notifies of its policies itself.
pub fn notice(before: Standing, input: &Input, decision: &Decision) -> Option<Notice> {
    match input {
        Input::Error(reason) => Some(Notice::GateError(reason.clone())),
        Input::Fail(reason)
            if before != Standing::Exhausted && decision.next == Standing::Exhausted =>
        {
            Some(Notice::Capped(reason.clone()))
        }
        _ => None,
    }
}

fn blocks(standing: Standing) -> u32 {
    match standing {
        Standing::Failing { blocks } | Standing::ErrorShown { blocks } => blocks,
        Standing::Clear | Standing::Exhausted => 0,
    }
}

fn exhausted(nudge: &str) -> String {
    format!("gatehost: blocked, out of retries: the gate still does not pass. {nudge}")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::Standing::{Clear, ErrorShown, Exhausted, Failing};
    use super::*;

    const STANDINGS: [Standing; 6] = [
        Clear,
        Failing { blocks: 1 },
        Failing { blocks: 2 },
        ErrorShown { blocks: 0 },
        ErrorShown { blocks: 1 },
        Exhausted,
    ];

    /// One of every input, in the tables' column order.
    pub(crate) fn inputs() -> Vec<Input> {
        vec![
            Input::Prompt,
            Input::OwnFollowUp,
            Input::Pass,
            Input::Fail("F".into()),
            Input::Nudged("N".into()),
            Input::Blocked("B".into()),
            Input::Error("E".into()),
            Input::Running("R".into()),
            Input::Ungated("claude:s".into()),
        ]
    }

    /// A variant added to the input or the standing does not compile
    /// until it is named here, and this fails until its list holds it.
    #[test]
    fn every_standing_and_input_is_listed() {
        use gatehost_exhaustive::variants;
        variants!(Input;
            Input::Prompt,
            Input::OwnFollowUp,
            Input::Pass,
            Input::Fail(_),
            Input::Nudged(_),
            Input::Blocked(_),
            Input::Error(_),
            Input::Running(_),
            Input::Ungated(_),
        )
        .assert_listed(&inputs());
        variants!(Standing;
            Clear,
            Failing { .. },
            ErrorShown { .. },
            Exhausted,
        )
        .assert_listed(&STANDINGS);
    }

    /// The kind of answer, for the table.
    fn kind(a: &Answer) -> &'static str {
        match a {
            Answer::Proceed => "go",
            Answer::Block(_) => "block",
            Answer::StopWithMessage(_) => "stop",
        }
    }

    #[test]
    fn every_standing_and_input_against_a_table_written_by_hand() {
        // max_retries = 2. Rows: standings in STANDINGS order; columns:
        // inputs in inputs() order. Each cell: answer kind, next standing.
        let b0 = ErrorShown { blocks: 0 };
        let b1 = ErrorShown { blocks: 1 };
        let f1 = Failing { blocks: 1 };
        let f2 = Failing { blocks: 2 };
        let f3 = Failing { blocks: 3 };
        #[rustfmt::skip]
        let table: [[(&str, Standing); 9]; 6] = [
            // Prompt        OwnFollowUp       Pass          Fail              Nudged        Blocked              Error             Running           Ungated
            [("go", Clear), ("go", Clear),     ("go", Clear), ("block", f1),    ("block", f1), ("stop", Exhausted), ("block", b0),    ("block", Clear), ("stop", Clear)],
            [("go", Clear), ("go", f1),        ("go", Clear), ("block", f2),    ("block", f2), ("stop", Exhausted), ("block", b1),    ("block", f1),    ("stop", f1)],
            [("go", Clear), ("go", f2),        ("go", Clear), ("stop", Exhausted), ("block", f3), ("stop", Exhausted), ("block", ErrorShown { blocks: 2 }), ("block", f2), ("stop", f2)],
            [("go", Clear), ("go", b0),        ("go", Clear), ("block", f1),    ("block", f1), ("stop", Exhausted), ("stop", b0),     ("block", b0),    ("stop", b0)],
            [("go", Clear), ("go", b1),        ("go", Clear), ("block", f2),    ("block", f2), ("stop", Exhausted), ("stop", b1),     ("block", b1),    ("stop", b1)],
            [("go", Clear), ("go", Exhausted), ("go", Clear), ("stop", Exhausted), ("stop", Exhausted), ("stop", Exhausted), ("stop", Exhausted), ("block", Exhausted), ("stop", Exhausted)],
        ];
        for (s, row) in STANDINGS.iter().zip(table) {
            for (i, (want_kind, want_next)) in inputs().iter().zip(row) {
                let d = decide(*s, i, 2);
                assert_eq!(
                    (kind(&d.answer), d.next),
                    (want_kind, want_next),
                    "{s:?} × {i:?}"
                );
            }
        }
    }

    #[test]
    fn a_standalone_stop_notifies_when_capped_once_and_at_every_gate_error() {
        // max_retries = 2; cells: the notice's kind, if any (columns as in
        // inputs()).
        #[rustfmt::skip]
        // Ungated is a daemon stop: the daemon tells of it (`session:ungated`).
        let table: [[Option<&str>; 9]; 6] = [
            // Prompt OwnFollowUp Pass  Fail            Nudged Blocked Error                   Running Ungated
            [None,    None,       None, None,           None,  None,   Some("hook:gate-error"), None,   None],
            [None,    None,       None, None,           None,  None,   Some("hook:gate-error"), None,   None],
            [None,    None,       None, Some("hook:capped"), None, None, Some("hook:gate-error"), None, None],
            [None,    None,       None, None,           None,  None,   Some("hook:gate-error"), None,   None],
            [None,    None,       None, None,           None,  None,   Some("hook:gate-error"), None,   None],
            [None,    None,       None, None,           None,  None,   Some("hook:gate-error"), None,   None],
        ];
        for (s, row) in STANDINGS.iter().zip(table) {
            for (i, want) in inputs().iter().zip(row) {
                let d = decide(*s, i, 2);
                let n = notice(*s, i, &d);
                assert_eq!(n.as_ref().map(Notice::kind), want, "{s:?} × {i:?}");
                if let Some(n) = n {
                    // It carries the gate's own words.
                    assert!(matches!(n.reason(), "F" | "E"), "{n:?}");
                }
            }
        }
        // Capped exactly once over a run of failures.
        let mut s = Clear;
        let mut capped = 0;
        for _ in 0..10 {
            let i = Input::Fail("x".into());
            let d = decide(s, &i, 3);
            capped += usize::from(matches!(notice(s, &i, &d), Some(Notice::Capped(_))));
            s = d.next;
        }
        assert_eq!(capped, 1);
    }

    #[test]
    fn exactly_max_retries_blocks_then_a_stop_that_names_the_block() {
        for max in 0..5 {
            let mut s = Clear;
            let mut blocks = 0;
            for _ in 0..10 {
                let d = decide(s, &Input::Fail("tests fail".into()), max);
                s = d.next;
                match d.answer {
                    Answer::Block(r) => {
                        assert_eq!(r, "tests fail");
                        blocks += 1;
                    }
                    Answer::StopWithMessage(m) => {
                        assert!(m.contains("blocked") && m.contains("tests fail"), "{m}");
                        break;
                    }
                    Answer::Proceed => panic!("a failing gate never proceeds silently"),
                }
            }
            assert_eq!(blocks, max);
        }
    }

    #[test]
    fn an_error_blocks_once_then_stops_and_never_passes() {
        let d = decide(Clear, &Input::Error("adapter missing".into()), 2);
        assert!(matches!(&d.answer, Answer::Block(r) if r.contains("adapter missing")));
        let d = decide(d.next, &Input::Error("adapter missing".into()), 2);
        assert!(matches!(&d.answer, Answer::StopWithMessage(m) if m.contains("adapter missing")));
        let d = decide(d.next, &Input::Error("adapter missing".into()), 2);
        assert!(matches!(d.answer, Answer::StopWithMessage(_)));
    }

    #[test]
    fn no_input_but_a_pass_or_a_prompt_proceeds_and_a_follow_up_keeps_the_count() {
        for s in STANDINGS {
            for i in inputs() {
                let d = decide(s, &i, 3);
                if d.answer == Answer::Proceed {
                    assert!(
                        matches!(i, Input::Prompt | Input::OwnFollowUp | Input::Pass),
                        "{s:?} × {i:?}"
                    );
                }
                // Only a person or a pass starts the count again.
                if i == Input::OwnFollowUp {
                    assert_eq!(d.next, s, "{s:?}");
                }
            }
        }
    }
}
