//! gatehost's typed model: the data the API, the store and the engine
//! share, below all three, and what it takes to check it.
//!
//! - [`model`]: the typed model (an attach input, a commit plan, a review
//!   chain, a routine's run, a gate report, the request bodies the API and
//!   the engine share, every event the daemon stores and publishes, one
//!   typed enum with its one codec in [`model::event`]): data and the pure
//!   rules that keep it well formed;
//! - [`verdict`] (`model::report`): the one result type of every gate;
//! - [`gate`]: the gate specs (shell, judge, wasm) as a gate file writes
//!   them, parsed and checked;
//! - [`config`]: the host configuration (allowlist and argument rules,
//!   adapters, limits, sandbox grants);
//! - [`permission`]: the pure permission rule of an ACP session;
//! - [`bus`]: event names and the wake-up of long-polls;
//! - [`suggest`]: "did you mean" for misspelt names.
//!
//! It owns data and the rules that keep it well formed. It must never run
//! a gate, open a database or load a WASM module: the API's client
//! (`gatehost-client`) builds on it, and a client compiles neither
//! wasmtime nor SQLite (`cargo tree -p gatehost-client -e normal`).

#![warn(missing_docs)]

// The git and process crates' types the model and the configuration name
// (a commit plan's snapshot, the sandbox's grants, the gates' limits), at
// the paths the moved modules use.
use gatehost_git::{change, commit};
use gatehost_sandbox::{sandbox, supervise};

pub mod bus;
pub mod config;
pub mod gate;
pub mod model;
pub mod permission;
pub mod suggest;

/// The gate report, at its old path ([`model::report`]).
pub use model::report as verdict;

pub use config::{HostConfig, Trust};
pub use gate::{Gate, GateSpec, SpecError};
pub use model::event::Event;
pub use verdict::{Outcome, RunReport, Verdict};
