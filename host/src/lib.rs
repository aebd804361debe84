//! gatehost: a judge-gate host for supervising coding agents.
//!
//! When an agent's turn ends, a *gate* decides whether its work is
//! acceptable. The crate is split by concept:
//! - [`anchor`]: the workspace anchor, the only way to turn a workspace path
//!   into something usable;
//! - [`supervise`]: running a process tree with bounded time and output and
//!   nothing left behind;
//! - [`gate`]: gate objects and the shell and judge gates;
//! - [`verdict`]: the one result type of every gate;
//! - [`wasm`]: the WASM plugin host (wasmtime, WASI, bounds);
//! - [`config`]: the host configuration (allowlist and argument rules,
//!   adapters, limits, sandbox grants);
//! - [`sandbox`]: confinement of every process a native gate starts
//!   (Landlock, no capabilities, applied to the thread that spawns it);
//! - [`model`]: the typed model below the store and the engine; its
//!   [`model::event`] is every event the daemon stores and publishes, one
//!   typed enum with its one codec;
//! - [`store`]: the daemon's SQLite store (sessions, policies, events);
//! - [`bus`]: event names (from [`model::event`]) and the wake-up of
//!   long-polls;
//! - [`engine`]: the policy lifecycle over the store and the gates;
//! - [`commit`]: commits of exactly the gated paths, running nothing the
//!   workspace names;
//! - [`worktree`]: host-owned checkouts of a snapshot's tree, where a
//!   commit policy's gates run;
//! - [`webhook`]: signed, retried webhook delivery from the store's queue;
//! - [`api`]: the HTTP/JSON API and its two tokens;
//! - [`wire`]: the API's request and answer bodies, defined once;
//! - [`client`]: the typed client of that API (the CLI, tests and benches);
//! - [`hook`]: the agent CLIs' turn-end hooks (one adapter per CLI, the
//!   pure retry decision, the per-session standing, `hook install`'s
//!   configuration merge);
//! - [`mcp`]: the MCP server for agents (`gatehost mcp`), a client of that
//!   API with the agent token;
//! - [`cli`]: the `gatehost` command line (`check`, `plugin`, `serve` and
//!   the client commands).
//!
//! Invariant shared by all of them: nothing unclear passes. A timeout, a
//! crash, an unparseable judge or a refused path is `fail` or `error`, never
//! `pass`.

pub mod anchor;
pub mod api;
pub mod bus;
pub mod change;
pub mod cli;
pub mod client;
pub mod commit;
pub mod config;
pub mod engine;
pub mod fault_marker;
pub mod gate;
pub mod hook;
pub mod keyring;
pub mod live_config;
pub mod mcp;
pub mod model;
pub mod notify;
pub mod passkey;
pub mod permission;
pub mod sandbox;
pub mod store;
pub mod suggest;
pub mod supervise;
pub mod verdict;
pub mod wasm;
pub mod webhook;
pub mod wire;
pub mod worktree;

#[cfg(test)]
mod structure_tests;
