//! The command line apart from hooks and the daemon: `check`, `doctor`,
//! `mcp`, and the docs' walkthrough run as written.

mod check;
mod docs_walkthrough;
mod doctor;
mod mcp;
