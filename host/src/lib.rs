//! gatehost: a judge-gate host for supervising coding agents.
//!
//! When an agent's turn ends, a *gate* decides whether its work is
//! acceptable. This crate is the daemon and the command line; the parts
//! below them are crates of their own in `host/crates/`, re-exported here
//! at their old paths (`gatehost::commit` is `gatehost_git::commit`):
//! `gatehost-sandbox` (anchor, sandbox, supervise), `gatehost-git`
//! (change, commit, worktree), `gatehost-model` (model, verdict, config,
//! permission, bus, suggest and the gate specs), `gatehost-wasm` (wasm),
//! `gatehost-store` (store),
//! `gatehost-client` (wire, client, session_key, keyring),
//! `gatehost-hook` (hook) and
//! `gatehost-test-hooks` (test_hooks). The modules, by concept, from the
//! bottom up:
//! - [`model`]: the typed model below the store and the engine (an attach
//!   input, a commit plan, a review chain, a routine's run, a gate report,
//!   the request bodies the API and the engine share,
//!   every event the daemon stores and publishes, one typed enum with its
//!   one codec in [`model::event`]): data and the pure rules that keep it
//!   well formed;
//! - [`verdict`] (`model::report`): the one result type of every gate;
//! - [`anchor`]: the workspace anchor, the only way to turn a workspace path
//!   into something usable (opened once, checked on what was opened);
//! - [`change`]: the change set, typed (which files changed and how);
//! - [`supervise`]: running a process tree with bounded time and output and
//!   nothing left behind;
//! - [`sandbox`]: confinement of every process a native gate starts
//!   (Landlock, no capabilities, `no_new_privs`, applied in the spawned
//!   child between `clone3` and `execve`), and the gates' scratch places;
//! - [`gate`]: the runner of gates and their kinds (shell, judge, wasm),
//!   each one implementation of the `RunGate` trait over its spec (the
//!   `GateKind` of gatehost-model);
//! - [`wasm`]: the WASM plugin host (wasmtime, WASI, bounds);
//! - [`config`]: the host configuration (allowlist and argument rules,
//!   adapters, limits, sandbox grants);
//! - [`live_config`]: what `serve` makes of a configuration, and its
//!   reloads (differences, settings held until a restart, weakenings);
//! - [`permission`]: the pure permission rule of an ACP session;
//! - [`store`]: the daemon's durable store (sessions, policies, routines,
//!   standing policies, passkeys, events, deliveries) as typed records
//!   behind one interface (`Records`, `RecordsTx`, `Backend`), on SQLite
//!   (the default) or PostgreSQL;
//! - [`bus`]: event names (from [`model::event`]) and the wake-up of
//!   long-polls;
//! - [`fault_marker`]: how a start tells the daemon's own fault from a kill;
//! - [`commit`]: commits of exactly the gated paths, running nothing the
//!   workspace names;
//! - [`worktree`]: host-owned checkouts of a snapshot's tree, where a
//!   commit policy's gates run;
//! - [`engine`]: the policy lifecycle over the store and the gates, review
//!   chains, sessions, started agents, routines, operator settings;
//! - [`passkey`]: the operator's passkeys (WebAuthn) and the proof of a
//!   human an ack may require;
//! - [`notify`]: the text a person reads for an event, rendered for a chat;
//! - [`webhook`]: signed, retried webhook delivery from the store's queue;
//! - [`api`]: the HTTP/JSON API, its two tokens, the page;
//! - [`wire`]: the API's request and answer bodies, defined once;
//! - [`client`]: the typed client of that API (the CLI, tests and benches);
//! - [`session_key`]: a session key's form (made, checked, digested) and
//!   the header that carries keys, for the daemon and the client alike;
//! - [`keyring`]: the client side's store of session keys;
//! - [`hook`]: the agent CLIs' turn-end hooks (one adapter per CLI, the
//!   pure retry decision, the per-session standing, `hook install`'s
//!   configuration merge);
//! - [`mcp`]: the MCP server for agents (`gatehost mcp`), a client of that
//!   API with the agent token;
//! - [`suggest`]: "did you mean" for misspelt names;
//! - [`test_hooks`]: the hooks whole-program tests reach the daemon by
//!   (an abort at a chosen step, store faults, a barrier), compiled out
//!   of the product (the `test-hooks` feature, on in test builds only);
//! - [`cli`]: the `gatehost` command line (`check`, `plugin`, `serve` and
//!   the client commands), and the one place errors become exit codes.
//!
//! Invariant shared by all of them: nothing unclear passes. A timeout, a
//! crash, an unparseable judge or a refused path is `fail` or `error`, never
//! `pass`.

pub use gatehost_sandbox::anchor;
pub mod api;
pub use gatehost_git::change;
pub use gatehost_model::bus;
pub mod cli;
pub use gatehost_client::client;
pub use gatehost_git::commit;
pub use gatehost_model::config;
pub mod engine;
pub mod fault_marker;
pub mod gate;
pub use gatehost_client::keyring;
pub use gatehost_hook as hook;
pub mod live_config;
pub mod mcp;
pub use gatehost_model::model;
pub mod notify;
pub mod passkey;
pub use gatehost_client::session_key;
pub use gatehost_model::permission;
pub use gatehost_model::suggest;
/// The gate report, at its old path ([`model::report`]).
pub use gatehost_model::verdict;
pub use gatehost_sandbox::sandbox;
pub use gatehost_sandbox::supervise;
pub use gatehost_store::store;
pub use gatehost_test_hooks as test_hooks;
pub use gatehost_wasm::wasm;
pub mod webhook;
pub use gatehost_client::wire;
pub use gatehost_git::worktree;

#[cfg(test)]
use gatehost_exhaustive as exhaustive;
#[cfg(test)]
mod structure_tests;
