//! Other hosts' events on this daemon's bus (issue 51, "one bus for the
//! cluster"): with a store that other hosts write too (PostgreSQL), its
//! wake-ups ([`crate::store::Store::wakeups`]: another host's commit that
//! appended events, or its listener listening again after a lost
//! connection) are forwarded into [`crate::model::bus::Bus::published`], so
//! that long-polls, SSE and the webhook deliverer wake on them and re-read
//! the store by cursor as they do for this daemon's own commits.
//!
//! It owns that forwarding task only, which ends when the daemon stops
//! (or the store's wake-ups end). It must never read events or treat a
//! wake-up as one: a wake-up may be spurious, the store is the truth.

use super::Engine;

impl Engine {
    /// Starts forwarding the store's wake-ups into the bus, until the
    /// daemon stops: its task, or `None` for a store whose writers are all
    /// in this process (SQLite). Call inside the daemon's runtime.
    pub fn spawn_cluster_wakeups(&self) -> Option<tokio::task::JoinHandle<()>> {
        let mut woken = self.store().wakeups()?;
        let engine = self.clone();
        Some(tokio::spawn(async move {
            loop {
                tokio::select! {
                    changed = woken.changed() => {
                        if changed.is_err() {
                            // The store is gone: nothing more to hear.
                            return;
                        }
                        engine.bus().published();
                    }
                    _ = engine.stopped() => return,
                }
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::GateRunner;
    use crate::store::Store;
    use crate::store::pg_testdb::TestDb;
    use std::time::Duration;

    /// An event appended by another host (a second store on the same
    /// database) wakes this daemon's bus; the forwarding ends with the
    /// daemon. SQLite has none to forward.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn another_hosts_event_wakes_the_bus_until_the_daemon_stops() {
        let Some(db) = TestDb::new("another_hosts_event_wakes_the_bus_until_the_daemon_stops")
        else {
            return;
        };
        let other = Store::open_postgres(&db.options()).expect("open the other host's store");
        let store = Store::open_postgres(&db.options()).expect("open this host's store");
        let engine = Engine::new(store, GateRunner::new(crate::config::HostConfig::default()))
            .expect("engine");
        let mut bus = engine.bus().subscribe();
        bus.mark_unchanged();
        let task = engine.spawn_cluster_wakeups().expect("PostgreSQL forwards");
        // Listening, the store wakes the bus once (nothing written yet).
        tokio::time::timeout(Duration::from_secs(15), bus.changed())
            .await
            .expect("woken when listening")
            .expect("bus");
        let cursor = tokio::task::spawn_blocking(move || {
            other
                .write(|tx| {
                    tx.append_event(
                        &crate::model::event::Event::decode("policy:passed", serde_json::json!({})),
                        None,
                        None,
                        &[],
                    )
                })
                .expect("the other host appends")
        })
        .await
        .expect("join");
        tokio::time::timeout(Duration::from_secs(15), bus.changed())
            .await
            .expect("the other host's event wakes the bus")
            .expect("bus");
        let events = engine
            .events(&crate::store::EventFilter {
                host: None,
                since: 0,
                types: Vec::new(),
                session_ids: Vec::new(),
                policy_ids: Vec::new(),
                limit: 100,
            })
            .expect("read");
        assert_eq!(events.last().map(|e| e.cursor), Some(cursor));
        engine.begin_shutdown();
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("the forwarding ends with the daemon")
            .expect("join");
    }

    #[test]
    fn an_sqlite_store_has_nothing_to_forward() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("store");
        let engine = Engine::new(store, GateRunner::new(crate::config::HostConfig::default()))
            .expect("engine");
        assert!(engine.spawn_cluster_wakeups().is_none());
    }
}
