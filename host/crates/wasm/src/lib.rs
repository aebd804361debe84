//! gatehost's WASM plugin host: third-party gate plugins (WASI components
//! built against `wit/v0.1`) loaded, cached, confined and bounded in
//! wasmtime ([`wasm`]), and the Rust plugins this crate carries in the
//! binary (`build.rs` builds them from `plugins/`; [`wasm::carried`]).
//!
//! It owns wasmtime and everything a plugin may touch. It must never let
//! a plugin's failure become a pass, never grant a plugin more than the
//! read-only workspace, its output and the host imports, and never run a
//! native process (a plugin's judge is the runner's, through
//! [`wasm::JudgeHost`]).

#![warn(missing_docs)]

// The change set plugins are given, the host configuration's bounds and
// the gate report's findings, at the paths the moved modules use.
use gatehost_git::change;
use gatehost_model::{config, verdict};

pub mod wasm;

pub use wasm::{PluginUsage, WasmHost};
