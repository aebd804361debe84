//! The whole-program tests: real `gatehost` processes, daemons on loopback,
//! git repositories, SQLite files and PostgreSQL databases. One test binary with a folder per
//! area and a module per file, so the crate is linked once for all of them
//! (`cargo test --test integration daemon::` runs one area,
//! `cargo test --test integration daemon::commits::` one file; the areas are
//! listed in `tests/README.md`).
//!
//! The tests that run the library's gate supervisor inside the test process
//! are in `tests/in_process.rs` (its files in `tests/in_process/`), a binary
//! of their own: that supervisor makes its process a child subreaper and
//! kills and reaps every child it did not spawn (a gate's orphans), which
//! here would be the daemons and `gatehost` runs of the tests beside it.

// A test binary has no face: its helpers' `pub` is for the other test
// modules (the workspace's `unreachable_pub` is for library crates).
#![allow(unreachable_pub)]

mod common;

mod agents;
mod cli;
mod daemon;
mod gates;
mod hooks;
mod sandbox;
mod store;
