//! Gate specs: what a gate file says (a shell gate, a judge, a plugin),
//! parsed and checked ([`spec`]), and what every kind is as data
//! ([`kind::GateKind`]).
//!
//! It owns the shapes and their checks. It must never run a gate: the
//! runner (gatehost's `gate` module) does, through its own trait over
//! these same types.

mod judge;
pub mod kind;
mod shell;
pub mod spec;
mod wasm;

pub use kind::{GateKind, SpecError};
pub use spec::{Gate, GateSpec, Kind, parse_gate, parse_gate_file};
