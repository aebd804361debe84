//! The store's outages as the daemon lives them: a database that cannot be
//! reached (a PostgreSQL restart, a network cut) or a store that cannot be
//! written (a full disk, a read-only directory).
//!
//! [`Outage`] is told what each write transaction, the health probe and
//! the daemon's periodic tasks (the sweep, the watchdog, the routines'
//! tick, the webhook queue) found; it logs the start of an outage once at
//! `warn` with its cause, and its end once at `warn` with how long it
//! lasted, so that a loop retrying every second says nothing more (its
//! own line is `debug`). `GET /v1/health` reads the start and cause it
//! kept. What waited meanwhile is re-driven by the sweep from the stored
//! state (`recovery`), as after any failed task.
//!
//! It owns that bookkeeping only: it must never decide what is retried,
//! never change state, and never hold its lock across anything but its
//! own fields.

use crate::store::{StoreError, now_ms};
use std::sync::Mutex;

/// What kind of failure began the outage: which successes end it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// The database could not be reached: any answer of it ends this.
    Unreachable,
    /// It answered but refused writes (full, read-only): only a write that
    /// commits ends this.
    Unwritable,
}

#[derive(Debug, Clone)]
struct Down {
    kind: Kind,
    /// When it began (ms since the epoch).
    since: i64,
    /// The latest failure's message (the store's error: no password).
    cause: String,
}

/// The store's outage now, as [`Outage::current`] tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unavailable {
    /// When it began (ms since the epoch).
    pub(crate) since: i64,
    /// Why, as the latest failure said.
    pub(crate) cause: String,
}

/// The daemon's view of whether its store answers.
#[derive(Debug, Default)]
pub(crate) struct Outage {
    down: Mutex<Option<Down>>,
}

impl Outage {
    /// Notes a failure of the store: `true` when it is an outage (an
    /// unavailable store, logged here at its start), `false` for any other
    /// error (the caller says it).
    pub(crate) fn failed(&self, e: &StoreError) -> bool {
        let kind = match e {
            StoreError::Unreachable(_) => Kind::Unreachable,
            e if e.is_unavailable() => Kind::Unwritable,
            _ => return false,
        };
        let cause = e.to_string();
        let mut down = self.down.lock().unwrap_or_else(|p| p.into_inner());
        match down.as_mut() {
            Some(d) => {
                if kind == Kind::Unreachable {
                    d.kind = kind;
                }
                d.cause = cause;
            }
            None => {
                tracing::warn!(error = %cause, "the store is unavailable: requests that need it answer 503 and the daemon's work waits; retrying until it answers");
                *down = Some(Down {
                    kind,
                    since: now_ms(),
                    cause,
                });
            }
        }
        true
    }

    /// As [`Outage::failed`], for an engine error (an outage only when it
    /// is the store's).
    pub(crate) fn failed_engine(&self, e: &super::EngineError) -> bool {
        matches!(e, super::EngineError::Store(s) if self.failed(s))
    }

    /// The store answered a read: an outage of reachability ends.
    pub(crate) fn read_ok(&self) {
        self.ended(false);
    }

    /// A write committed: any outage ends.
    pub(crate) fn wrote(&self) {
        self.ended(true);
    }

    fn ended(&self, wrote: bool) {
        let mut down = self.down.lock().unwrap_or_else(|p| p.into_inner());
        let Some(d) = down.as_ref() else {
            return;
        };
        if d.kind == Kind::Unwritable && !wrote {
            return;
        }
        let lasted_ms = now_ms().saturating_sub(d.since);
        tracing::warn!(
            lasted_ms,
            last_error = %d.cause,
            "the store answers again; what waited for it is re-driven"
        );
        *down = None;
    }

    /// The outage now, if any.
    pub(crate) fn current(&self) -> Option<Unavailable> {
        self.down
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|d| Unavailable {
                since: d.since,
                cause: d.cause.clone(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_begins_at_its_first_failure_and_ends_at_the_success_that_proves_it_over() {
        let o = Outage::default();
        assert_eq!(o.current(), None);
        assert!(!o.failed(&StoreError::Backend("syntax".into())));
        assert_eq!(o.current(), None, "not an outage");
        assert!(o.failed(&StoreError::Unreachable("refused".into())));
        let first = o.current().expect("down");
        assert!(o.failed(&StoreError::Unreachable("still refused".into())));
        let now = o.current().expect("down");
        assert_eq!(now.since, first.since, "one outage, its start kept");
        assert!(now.cause.contains("still refused"), "{now:?}");
        o.read_ok();
        assert_eq!(o.current(), None, "a read proves it reachable");

        // A full disk: reads answer all along; only a write ends it.
        assert!(o.failed(&StoreError::Full("no space".into())));
        o.read_ok();
        assert!(o.current().is_some());
        o.wrote();
        assert_eq!(o.current(), None);
    }
}
