//! The events a policy publishes ([`PolicyEvent`]): their stored names,
//! and which of them a typed change ([`Change`]) is.
//!
//! It owns the names and the mapping only. It must never read a payload
//! (the model's codec does) nor name an event by a string the machine
//! compares: a change's event is [`PolicyEvent::of`], matched variant by
//! variant.

use crate::model::event::{Change, PolicyChange, ReviewChange};

/// The events a policy publishes, serialised to the names the API and
/// stored events have always used (`policy:…`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PolicyEvent {
    Attached,
    Watching,
    Queued,
    Gating,
    Passed,
    Failed,
    Nudge,
    CommitReady,
    Approved,
    Rejected,
    Stale,
    Committed,
    CommitFailed,
    Done,
    Blocked,
    Cancelled,
    NextRefused,
    /// Its `deadline` ran out.
    Expired,
    /// Its gate could not run and is tried again (`[daemon] infra_retries`).
    Retry,
    /// Not a transition: a queued policy waits because supervision is
    /// paused (`[daemon] enabled = false`).
    Paused,
    /// Its gate passed and its reviewer reviews the change (`review`).
    ReviewStarted,
    /// The reviewer's verdict: SHIP or BLOCK, with its findings.
    ReviewVerdict,
    /// The repair nudge (the findings) sent to the repairer.
    ReviewRepair,
    /// The reviewer shipped it: the policy goes on to its `then`.
    ReviewShipped,
    /// The reviewer blocked it `maxCycles` times: a person must look.
    ReviewEscalated,
}

impl PolicyEvent {
    pub const ALL: [PolicyEvent; 25] = [
        PolicyEvent::Attached,
        PolicyEvent::Watching,
        PolicyEvent::Queued,
        PolicyEvent::Gating,
        PolicyEvent::Passed,
        PolicyEvent::Failed,
        PolicyEvent::Nudge,
        PolicyEvent::CommitReady,
        PolicyEvent::Approved,
        PolicyEvent::Rejected,
        PolicyEvent::Stale,
        PolicyEvent::Committed,
        PolicyEvent::CommitFailed,
        PolicyEvent::Done,
        PolicyEvent::Blocked,
        PolicyEvent::Cancelled,
        PolicyEvent::NextRefused,
        PolicyEvent::Expired,
        PolicyEvent::Retry,
        PolicyEvent::Paused,
        PolicyEvent::ReviewStarted,
        PolicyEvent::ReviewVerdict,
        PolicyEvent::ReviewRepair,
        PolicyEvent::ReviewShipped,
        PolicyEvent::ReviewEscalated,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PolicyEvent::Attached => "policy:attached",
            PolicyEvent::Watching => "policy:watching",
            PolicyEvent::Queued => "policy:queued",
            PolicyEvent::Gating => "policy:gating",
            PolicyEvent::Passed => "policy:passed",
            PolicyEvent::Failed => "policy:failed",
            PolicyEvent::Nudge => "policy:nudge",
            PolicyEvent::CommitReady => "policy:commit-ready",
            PolicyEvent::Approved => "policy:approved",
            PolicyEvent::Rejected => "policy:rejected",
            PolicyEvent::Stale => "policy:stale",
            PolicyEvent::Committed => "policy:committed",
            PolicyEvent::CommitFailed => "policy:commit-failed",
            PolicyEvent::Done => "policy:done",
            PolicyEvent::Blocked => "policy:blocked",
            PolicyEvent::Cancelled => "policy:cancelled",
            PolicyEvent::NextRefused => "policy:next-refused",
            PolicyEvent::Expired => "policy:expired",
            PolicyEvent::Retry => "policy:retry",
            PolicyEvent::Paused => "policy:paused",
            PolicyEvent::ReviewStarted => "review:started",
            PolicyEvent::ReviewVerdict => "review:verdict",
            PolicyEvent::ReviewRepair => "review:repair",
            PolicyEvent::ReviewShipped => "review:shipped",
            PolicyEvent::ReviewEscalated => "review:escalated",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        PolicyEvent::ALL.into_iter().find(|e| e.as_str() == s)
    }

    /// The event `change` is: one per variant, matched exhaustively (a
    /// change added to the model does not compile until it is named here).
    pub fn of(change: &Change) -> PolicyEvent {
        use PolicyChange as P;
        use ReviewChange as R;
        match change {
            Change::Policy(c) => match c {
                P::Attached(_) => PolicyEvent::Attached,
                P::Queued(_) => PolicyEvent::Queued,
                P::Gating(_) => PolicyEvent::Gating,
                P::Passed(_) => PolicyEvent::Passed,
                P::Failed(_) => PolicyEvent::Failed,
                P::Nudge(_) => PolicyEvent::Nudge,
                P::Watching(_) => PolicyEvent::Watching,
                P::Blocked(_) => PolicyEvent::Blocked,
                P::CommitReady(_) => PolicyEvent::CommitReady,
                P::Approved(_) => PolicyEvent::Approved,
                P::Rejected(_) => PolicyEvent::Rejected,
                P::Stale(_) => PolicyEvent::Stale,
                P::Committed(_) => PolicyEvent::Committed,
                P::CommitFailed(_) => PolicyEvent::CommitFailed,
                P::Cancelled(_) => PolicyEvent::Cancelled,
                P::Done(_) => PolicyEvent::Done,
                P::NextRefused(_) => PolicyEvent::NextRefused,
                P::Paused(_) => PolicyEvent::Paused,
                P::Expired(_) => PolicyEvent::Expired,
                P::Retry(_) => PolicyEvent::Retry,
            },
            Change::Review(c) => match c {
                R::Started(_) => PolicyEvent::ReviewStarted,
                R::Verdict(_) => PolicyEvent::ReviewVerdict,
                R::Repair(_) => PolicyEvent::ReviewRepair,
                R::Shipped(_) => PolicyEvent::ReviewShipped,
                R::Escalated(_) => PolicyEvent::ReviewEscalated,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bus;
    use crate::model::event::Event;

    #[test]
    fn event_names_are_the_stored_ones() {
        for e in PolicyEvent::ALL {
            assert!(
                e.as_str().starts_with("policy:") || e.as_str().starts_with("review:"),
                "{}",
                e.as_str()
            );
            assert_eq!(PolicyEvent::parse(e.as_str()), Some(e));
        }
        assert_eq!(PolicyEvent::CommitReady.as_str(), "policy:commit-ready");
        assert_eq!(PolicyEvent::NextRefused.as_str(), "policy:next-refused");
        assert_eq!(PolicyEvent::Expired.as_str(), "policy:expired");
        assert_eq!(PolicyEvent::Retry.as_str(), "policy:retry");
        assert_eq!(PolicyEvent::parse("policy:unknown"), None);
    }

    /// Every policy and review event the daemon publishes (the model's
    /// examples, which encode to `golden.json` exactly) is the event of its
    /// stored kind, and every event has its change: the transition's
    /// check of a step's payload (`PolicyEvent::of(change) == event`)
    /// accepts exactly what it accepted when it compared the kinds' names.
    #[test]
    fn each_change_is_the_event_of_its_stored_kind_and_each_event_has_one() {
        let mut seen = Vec::new();
        for example in crate::model::event::examples() {
            let kind = example.kind().to_string();
            let change: Change = match example {
                Event::Policy(e) => e.change.into(),
                Event::Review(e) => e.change.into(),
                _ => continue,
            };
            let event = PolicyEvent::of(&change);
            assert_eq!(event.as_str(), kind, "{change:?}");
            assert_eq!(event.as_str(), change.kind(), "{change:?}");
            seen.push(event);
        }
        for e in PolicyEvent::ALL {
            assert!(seen.contains(&e), "no change is {}", e.as_str());
        }
        // A change of another event is never taken for this one.
        let done: Change = PolicyChange::done().into();
        assert_eq!(PolicyEvent::of(&done), PolicyEvent::Done);
        assert_ne!(PolicyEvent::of(&done), PolicyEvent::Committed);
    }

    /// Every event the lifecycle publishes is a name the filters know
    /// (`bus`'s lists; a new `PolicyEvent` not listed there could not be
    /// asked for), and every name listed is published.
    #[test]
    fn every_lifecycle_event_is_a_known_name() {
        for e in PolicyEvent::ALL {
            assert!(
                bus::POLICY_EVENTS.contains(&e.as_str())
                    || bus::REVIEW_EVENTS.contains(&e.as_str()),
                "{}",
                e.as_str()
            );
        }
        for e in bus::POLICY_EVENTS.iter().chain(bus::REVIEW_EVENTS) {
            assert!(
                PolicyEvent::parse(e).is_some(),
                "{e} is listed but never published"
            );
        }
    }
}
