//! Whole-program tests that drive the library's gate runner inside the test
//! process (containment without cgroups, judge slots, the WASM host). They
//! are a binary of their own, apart from `tests/integration.rs`: the gate
//! supervisor makes its process a child subreaper and kills and reaps every
//! child of it that it did not spawn (a gate's orphans), so it must never
//! share a process with tests that start daemons and `gatehost` runs.

mod common;

mod fallback_containment;
mod judge_slots;
mod wasm_host;
