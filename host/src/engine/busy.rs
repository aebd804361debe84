//! Which policies have a nudge or commit task running: one task per policy
//! at a time, and the mark held by a guard, so that a task that ends in
//! any way (returns, fails, panics, is aborted) leaves its policy free.
//!
//! It owns the set of busy policies. It must never decide anything about
//! a policy's state (that is the machine's), and never be marked or
//! cleared other than through [`TaskGuard`].

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// The policies with a task running.
#[derive(Debug, Default, Clone)]
pub(super) struct Busy(Arc<Mutex<HashSet<String>>>);

impl Busy {
    /// Marks `id` busy, or `None` if a task of it runs.
    pub(super) fn begin(&self, id: &str) -> Option<TaskGuard> {
        let fresh = self
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.to_string());
        fresh.then(|| TaskGuard {
            busy: self.clone(),
            id: id.to_string(),
        })
    }

    #[cfg(test)]
    fn is_busy(&self, id: &str) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(id)
    }
}

/// A task of one policy running: the policy is free again when the guard
/// is dropped, however the task ended (a panic unwinds through it, an
/// aborted task's future is dropped with it).
#[derive(Debug)]
pub(crate) struct TaskGuard {
    busy: Busy,
    id: String,
}

impl Drop for TaskGuard {
    fn drop(&mut self) {
        self.busy
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_task_per_policy_and_free_once_it_ends() {
        let busy = Busy::default();
        let task = busy.begin("p1").expect("free");
        assert!(busy.begin("p1").is_none(), "a second task of p1 began");
        assert!(busy.begin("p2").is_some(), "another policy is not busy");
        drop(task);
        assert!(!busy.is_busy("p1"));
        assert!(busy.begin("p1").is_some());
    }

    /// A task that panics leaves its policy free (the guard is dropped as
    /// the task unwinds): before, the mark stayed and no nudge or commit
    /// of that policy ran again until the daemon restarted.
    #[tokio::test]
    async fn a_panic_in_a_guarded_task_leaves_the_policy_free() {
        let busy = Busy::default();
        let task = busy.begin("p1").expect("free");
        let ended = tokio::spawn(async move {
            let _task = task;
            panic!("a task fails unexpectedly");
        })
        .await;
        assert!(ended.expect_err("the task panicked").is_panic());
        assert!(!busy.is_busy("p1"), "the panicked task left p1 busy");
        assert!(busy.begin("p1").is_some());
    }
}
