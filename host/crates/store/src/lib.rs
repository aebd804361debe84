//! gatehost's durable store, below the engine: sessions, policies,
//! routines, standing policies, passkeys, the event log and pending
//! webhook deliveries, as typed records behind one interface
//! ([`store::Records`], [`store::RecordsTx`], [`store::Backend`]), on
//! SQLite (one host, the default) or PostgreSQL (a store many hosts can
//! share) ([`store`] says how).
//!
//! It owns the schemas, their migrations and the only database driver
//! types of the workspace (rusqlite, tokio-postgres). It must never run a
//! gate, a process or a network call (but to its own PostgreSQL
//! database), nor know the engine's rules: it stores what the engine
//! decided, in one transaction with the events that say so.

#![warn(missing_docs)]

// The model's types its rows hold and the anchor's directory identity (and
// for the tests a commit plan's prepared commit), at the paths the moved
// modules use.
#[cfg(test)]
use gatehost_git::commit;
use gatehost_model::{config, model};
use gatehost_sandbox::anchor;

pub mod store;

pub use store::{Backend, Records, RecordsTx, Store, StoreError};
