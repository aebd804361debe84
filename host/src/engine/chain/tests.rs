//! `decide` for every chain state × outcome, written out (not derived
//! from the code under test), with the cycle at the boundaries.

use super::*;
use crate::exhaustive::variants;
use crate::model::chain::describe;
use ChainAction as A;
use ChainOutcome as O;
use ChainState as S;

fn states() -> Vec<ChainState> {
    vec![
        S::Authoring,
        S::Reviewing { cycle: 1, max: 3 },
        S::Reviewing { cycle: 3, max: 3 },
        S::Reviewing { cycle: 1, max: 1 },
        S::Repairing { cycle: 1, max: 3 },
        S::Repairing { cycle: 2, max: 3 },
        S::Shipped,
        S::Escalated,
    ]
}

impl ChainOutcome {
    /// Every outcome (checked against the type by
    /// [`every_state_and_outcome_is_listed`]).
    fn all() -> Vec<ChainOutcome> {
        vec![
            O::GatePassed,
            O::Ship,
            O::Block {
                repairer_alive: true,
            },
            O::Block {
                repairer_alive: false,
            },
            O::Recover,
            O::ReviewerSilent,
        ]
    }
}

/// A variant added to the state or the outcome does not compile until it
/// is named here, and this fails until its list holds it.
#[test]
fn every_state_and_outcome_is_listed() {
    variants!(ChainOutcome;
        O::GatePassed,
        O::Ship,
        O::Block { .. },
        O::Recover,
        O::ReviewerSilent,
    )
    .assert_listed(&ChainOutcome::all());
    variants!(ChainState;
        S::Authoring,
        S::Reviewing { .. },
        S::Repairing { .. },
        S::Shipped,
        S::Escalated,
    )
    .assert_listed(&states());
}

fn expected(state: ChainState, outcome: ChainOutcome) -> ChainAction {
    let alive = O::Block {
        repairer_alive: true,
    };
    let gone = O::Block {
        repairer_alive: false,
    };
    let table: Vec<(ChainState, ChainOutcome, ChainAction)> = vec![
        (S::Authoring, O::GatePassed, A::Review { cycle: 1 }),
        (S::Authoring, O::Ship, A::Ignore),
        (S::Authoring, alive, A::Ignore),
        (S::Authoring, gone, A::Ignore),
        (S::Authoring, O::Recover, A::Ignore),
        (S::Authoring, O::ReviewerSilent, A::Ignore),
        // Cycle 1 of 3: a BLOCK repairs.
        (S::Reviewing { cycle: 1, max: 3 }, O::GatePassed, A::Ignore),
        (S::Reviewing { cycle: 1, max: 3 }, O::Ship, A::Ship),
        (S::Reviewing { cycle: 1, max: 3 }, alive, A::Repair),
        (S::Reviewing { cycle: 1, max: 3 }, gone, A::Escalate),
        (S::Reviewing { cycle: 1, max: 3 }, O::Recover, A::Resume),
        (
            S::Reviewing { cycle: 1, max: 3 },
            O::ReviewerSilent,
            A::Escalate,
        ),
        // The last cycle: a BLOCK escalates; SHIP still ships.
        (S::Reviewing { cycle: 3, max: 3 }, O::GatePassed, A::Ignore),
        (S::Reviewing { cycle: 3, max: 3 }, O::Ship, A::Ship),
        (S::Reviewing { cycle: 3, max: 3 }, alive, A::Escalate),
        (S::Reviewing { cycle: 3, max: 3 }, gone, A::Escalate),
        (S::Reviewing { cycle: 3, max: 3 }, O::Recover, A::Resume),
        (
            S::Reviewing { cycle: 3, max: 3 },
            O::ReviewerSilent,
            A::Escalate,
        ),
        // maxCycles 1: the first BLOCK escalates.
        (S::Reviewing { cycle: 1, max: 1 }, O::GatePassed, A::Ignore),
        (S::Reviewing { cycle: 1, max: 1 }, O::Ship, A::Ship),
        (S::Reviewing { cycle: 1, max: 1 }, alive, A::Escalate),
        (S::Reviewing { cycle: 1, max: 1 }, gone, A::Escalate),
        (S::Reviewing { cycle: 1, max: 1 }, O::Recover, A::Resume),
        (
            S::Reviewing { cycle: 1, max: 1 },
            O::ReviewerSilent,
            A::Escalate,
        ),
        // Repairing: the repaired turn's pass starts the next review.
        (
            S::Repairing { cycle: 1, max: 3 },
            O::GatePassed,
            A::Review { cycle: 2 },
        ),
        (S::Repairing { cycle: 1, max: 3 }, O::Ship, A::Ignore),
        (S::Repairing { cycle: 1, max: 3 }, alive, A::Ignore),
        (S::Repairing { cycle: 1, max: 3 }, gone, A::Ignore),
        (S::Repairing { cycle: 1, max: 3 }, O::Recover, A::Ignore),
        (
            S::Repairing { cycle: 1, max: 3 },
            O::ReviewerSilent,
            A::Ignore,
        ),
        (
            S::Repairing { cycle: 2, max: 3 },
            O::GatePassed,
            A::Review { cycle: 3 },
        ),
        (S::Repairing { cycle: 2, max: 3 }, O::Ship, A::Ignore),
        (S::Repairing { cycle: 2, max: 3 }, alive, A::Ignore),
        (S::Repairing { cycle: 2, max: 3 }, gone, A::Ignore),
        (S::Repairing { cycle: 2, max: 3 }, O::Recover, A::Ignore),
        (
            S::Repairing { cycle: 2, max: 3 },
            O::ReviewerSilent,
            A::Ignore,
        ),
        // Terminal: nothing fires twice.
        // Re-gated after SHIP (the content changed under a stale ack):
        // the new content is reviewed anew.
        (S::Shipped, O::GatePassed, A::Review { cycle: 1 }),
        (S::Shipped, O::Ship, A::Ignore),
        (S::Shipped, alive, A::Ignore),
        (S::Shipped, gone, A::Ignore),
        (S::Shipped, O::Recover, A::Ignore),
        (S::Shipped, O::ReviewerSilent, A::Ignore),
        (S::Escalated, O::GatePassed, A::Ignore),
        (S::Escalated, O::Ship, A::Ignore),
        (S::Escalated, alive, A::Ignore),
        (S::Escalated, gone, A::Ignore),
        (S::Escalated, O::Recover, A::Ignore),
        (S::Escalated, O::ReviewerSilent, A::Ignore),
    ];
    assert_eq!(table.len(), states().len() * ChainOutcome::all().len());
    table
        .into_iter()
        .find(|(s, o, _)| *s == state && *o == outcome)
        .map(|(_, _, a)| a)
        .unwrap_or_else(|| panic!("{state:?} × {outcome:?} is not listed"))
}

#[test]
fn every_chain_state_and_outcome_is_decided_as_listed() {
    let mut n = 0;
    for state in states() {
        for outcome in ChainOutcome::all() {
            assert_eq!(
                decide(state, outcome),
                expected(state, outcome),
                "{state:?} × {outcome:?}"
            );
            n += 1;
        }
    }
    assert_eq!(n, 48);
}

/// A chain driven by its decision alone, BLOCK twice then SHIP: two
/// repairs, one ship, and nothing after it.
#[test]
fn block_twice_then_ship_repairs_twice_and_ships_once() {
    let max = 5;
    let mut state = S::Authoring;
    let mut actions = Vec::new();
    let verdicts = [false, false, true];
    let mut next_verdict = verdicts.iter();
    loop {
        let outcome = match state {
            S::Authoring | S::Repairing { .. } => O::GatePassed,
            S::Reviewing { .. } => match next_verdict.next() {
                Some(true) => O::Ship,
                Some(false) => O::Block {
                    repairer_alive: true,
                },
                None => unreachable!("reviewed more than three times"),
            },
            S::Shipped | S::Escalated => break,
        };
        let action = decide(state, outcome);
        actions.push(action);
        state = match (state, action) {
            (_, A::Review { cycle }) => S::Reviewing { cycle, max },
            (S::Reviewing { cycle, max }, A::Repair) => S::Repairing { cycle, max },
            (_, A::Ship) => S::Shipped,
            (_, A::Escalate) => S::Escalated,
            (s, _) => s,
        };
    }
    assert_eq!(actions.iter().filter(|a| **a == A::Repair).count(), 2);
    assert_eq!(actions.iter().filter(|a| **a == A::Ship).count(), 1);
    assert_eq!(actions.last(), Some(&A::Ship));
    for o in [
        O::Ship,
        O::Block {
            repairer_alive: true,
        },
        O::Recover,
    ] {
        assert_eq!(decide(state, o), A::Ignore);
    }
}

#[test]
fn a_status_line_names_the_cycle() {
    let r = ChainRecord {
        phase: ChainPhase::Reviewing,
        cycle: 2,
        max_cycles: 5,
        ship_to: ShipTo::AwaitAck,
        diff: None,
        started_after: 0,
        findings: None,
        nonce: None,
    };
    assert_eq!(describe("reviewing", Some(&r)), "reviewing (cycle 2 of 5)");
    assert_eq!(describe("watching", None), "watching");
}
