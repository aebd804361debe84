//! Whole-program tests that drive the library's gate runner inside the test
//! process (containment without cgroups, judge slots, the WASM host). They
//! are a binary of their own, apart from `tests/integration.rs`: the gate
//! supervisor makes its process a child subreaper and kills and reaps every
//! child of it that it did not spawn (a gate's orphans), so it must never
//! share a process with tests that start daemons and `gatehost` runs.

// A test binary has no face: its helpers' `pub` is for the other test
// modules (the workspace's `unreachable_pub` is for library crates).
#![allow(unreachable_pub)]

mod common;

#[path = "in_process/fallback_containment.rs"]
mod fallback_containment;
#[path = "in_process/judge_slots.rs"]
mod judge_slots;
#[path = "in_process/wasm_host.rs"]
mod wasm_host;
