//! `gatehost hook AGENT`: the agent CLIs' turn-end hooks, answered by the
//! same gates and the same retry count for every CLI.
//!
//! - [`adapter`]: what every CLI's adapter does (read its hook JSON into a
//!   [`HookInput`], write an [`Answer`] in its own format) and the shared
//!   parsing rules (UTF-8 BOM, unknown fields);
//! - [`claude`], [`codex`], [`gemini`], [`cursor`], [`qwen`],
//!   [`copilot`], [`opencode`], [`kiro`]: one adapter per CLI, holding all
//!   gatehost knows of it (its hook contract, where its hooks live and
//!   what `hook install` writes there, what `doctor` checks);
//! - [`decide`]: the pure decision from a gate outcome and the session's
//!   retry state to an answer (unit-tested for every state × input);
//! - [`state`]: the per-session standing on disk;
//! - [`ledger`]: one decision per stop, when one stop reaches gatehost
//!   twice (two registrations);
//! - [`outcome`]: what each session's last stop came to, kept for scripts
//!   (`gatehost hook status`);
//! - [`transcript`]: the last assistant message from a CLI's transcript;
//! - [`install`]: merging gatehost's entries into a CLI's configuration;
//! - [`plan`]: the vocabulary of what `hook install` writes where, which
//!   each adapter plans for its CLI.
//!
//! Where a stop's gate outcome comes from (standalone gates, or a daemon's
//! policies) is the command line's: `cli::hook`.
//!
//! It must never write anything but the CLI's answer on stdout (logs go to
//! stderr), never let a stop through because a gate could not run without
//! first blocking once with the error, and never block forever: retries are
//! counted by gatehost, not by the CLI's `stop_hook_active`.
//!
//! This crate (`gatehost-hook`) needs nothing else of gatehost: no daemon,
//! no gate, no store. It must never grow such a dependency; the command
//! line (`gatehost::cli::hook`) joins it to the gates.

#![warn(missing_docs)]

pub mod adapter;
pub mod claude;
mod claude_version;
pub mod codex;
pub mod copilot;
pub mod cursor;
pub mod decide;
pub mod gemini;
pub mod install;
pub mod kiro;
pub mod ledger;
pub mod opencode;
pub mod outcome;
pub mod plan;
pub mod qwen;
pub mod state;
pub mod transcript;

pub use adapter::{Adapter, AgentCli, Answer, HookError, HookInput, HookPoint, Rendered};

/// The adapter of `agent`'s hooks.
pub fn adapter(agent: AgentCli) -> &'static dyn Adapter {
    match agent {
        AgentCli::Claude => &claude::Claude,
        AgentCli::Codex => &codex::Codex,
        AgentCli::Gemini => &gemini::Gemini,
        AgentCli::Cursor => &cursor::Cursor,
        AgentCli::Qwen => &qwen::Qwen,
        AgentCli::Copilot => &copilot::Copilot,
        AgentCli::Opencode => &opencode::OpenCode,
        AgentCli::Kiro => &kiro::Kiro,
    }
}
