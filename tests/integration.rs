//! The whole-program tests: real `gatehost` processes, daemons on loopback,
//! git repositories and SQLite files. One test binary with a module per
//! area, so the crate is linked once for all of them (`cargo test --test
//! integration MODULE::` runs one area).

mod common;

mod check_cli;
mod daemon_commits;
mod daemon_durability;
mod daemon_lifecycle;
mod fallback_containment;
mod hostile_judge;
mod hostile_shell;
mod js_plugin;
mod judge_slots;
mod plugin_kit;
mod sandbox_gates;
mod wasm_gates;
mod wasm_host;
