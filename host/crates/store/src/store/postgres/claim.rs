//! A PostgreSQL store opened for a host (issue 51): claiming its id at
//! open ([`PgStore::open_as`]: the id's session lock tried on the
//! heartbeat's own connection, then `hosts::claim` in a write transaction),
//! the check every write of a host makes inside its transaction
//! ([`check_claim`]), and the release at a clean stop (also when the store
//! is dropped).
//!
//! It owns when a claim is taken, checked and released; the SQL is
//! `hosts`, the in-process deadline and the heartbeat `lease`. It must
//! never let a write of a host through without its claim checked after the
//! write lock.

use super::bridge::Sql;
use super::lease::{self, Lease};
use super::{HostSpec, PgOptions, PgStore, hosts};
use crate::store::{StoreError, StoreResult};
use std::sync::Arc;
use std::time::Instant;

impl PgStore {
    /// As [`PgStore::open`], for the host `spec`: claims its id (a new
    /// fencing number; refused while another live process holds it) and
    /// starts the heartbeat that renews the lease. Every write checks the
    /// claim from then on.
    pub(in crate::store) fn open_as(opts: &PgOptions, spec: &HostSpec) -> StoreResult<PgStore> {
        let mut store = PgStore::connect(opts, Some(spec))?;
        let (before, after) = store.migrate()?;
        let dial = lease::dial(&store.parsed)?;
        let (client, locked) = store
            .bridge
            .wait(async {
                let c = dial().await?;
                let row = c
                    .query_one(hosts::HOST_LOCK, &[&spec.id])
                    .await
                    .map_err(|e| e.to_string())?;
                let got: bool = row.try_get("got").map_err(|e| e.to_string())?;
                Ok::<_, String>((c, got))
            })
            .map_err(StoreError::Unreachable)?;
        let sent = Instant::now();
        let fence = store.write_as(false, |tx| hosts::claim(&tx.sql, spec, locked))?;
        let held = Arc::new(Lease::new(spec, fence, sent));
        store
            .bridge
            .spawn(lease::heartbeat(held.clone(), dial, Some(client), locked));
        store.lease = Some(held);
        tracing::info!(at = %store.location, before, after, host = %spec.id, fence, "store opened on PostgreSQL; host claimed");
        Ok(store)
    }

    /// Ends this process's claim (a clean stop), so that its id can be
    /// claimed again at once; nothing when it holds none or lost it.
    pub(super) fn release(&self) {
        let Some(l) = &self.lease else { return };
        if matches!(l.acting(), Err(StoreError::Fenced(_))) {
            return;
        }
        match self.write_as(false, |tx| hosts::release(&tx.sql, &l.id, l.fence)) {
            Ok(true) => {
                l.released();
                tracing::info!(host = %l.id, fence = l.fence, "host claim released");
            }
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(host = %l.id, error = %e, "cannot release the host claim; it ends with its lease");
            }
        }
    }
}

impl Drop for PgStore {
    fn drop(&mut self) {
        self.release();
    }
}

/// Whether the claim `l` is this process's to act on, as the database
/// records it (in a write transaction, after the write lock).
pub(super) fn check_claim(sql: &Sql<'_>, l: &Lease) -> StoreResult<()> {
    match hosts::standing(sql, &l.id, l.fence)? {
        hosts::Standing::Held => Ok(()),
        hosts::Standing::Lapsed => Err(StoreError::LeaseLapsed(format!(
            "the lease of host '{}' (fencing number {}) ran out by the database's clock; it acts again once renewed",
            l.id, l.fence
        ))),
        hosts::Standing::Lost(why) => {
            l.lose(&why, "by a write the database refused");
            Err(StoreError::Fenced(why))
        }
    }
}
