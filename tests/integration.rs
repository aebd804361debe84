//! The whole-program tests: real `gatehost` processes, daemons on loopback,
//! git repositories and SQLite files. One test binary with a module per
//! area, so the crate is linked once for all of them (`cargo test --test
//! integration MODULE::` runs one area).
//!
//! The tests that run the library's gate supervisor inside the test process
//! are in `tests/in_process.rs`, a binary of their own: that supervisor
//! makes its process a child subreaper and kills and reaps every child it
//! did not spawn (a gate's orphans), which here would be the daemons and
//! `gatehost` runs of the tests beside it.

mod common;

mod agent_aider;
mod agent_claude;
mod agent_claude_acp;
mod agent_claude_mcp;
mod agent_claude_subagent;
mod agent_codex;
mod agent_codex_acp;
mod agent_copilot;
mod agent_copilot_subagent;
mod agent_cursor;
mod agent_gemini;
mod agent_gemini_acp;
mod agent_opencode;
mod agent_qwen;
mod carried_plugins;
mod check_cli;
mod daemon_acp;
mod daemon_chains;
mod daemon_commits;
mod daemon_damaged_rows;
mod daemon_durability;
mod daemon_lifecycle;
mod daemon_limits;
mod daemon_live_config;
mod daemon_loopback;
mod daemon_notify;
mod daemon_passkey;
mod daemon_restart_leftovers;
mod daemon_retention;
mod daemon_review;
mod daemon_routine_faults;
mod daemon_routines;
mod daemon_session_ids;
mod daemon_session_policies;
mod daemon_store_fixture;
mod daemon_swap_race;
mod daemon_ui;
mod daemon_watchdog;
mod daemon_worktree_caches;
mod docs_walkthrough;
mod doctor;
mod hook_cost;
mod hook_install;
mod hook_install_qwen;
mod hook_kiro;
mod hook_once;
mod hostile_judge;
mod hostile_shell;
mod huge_inputs;
mod js_plugin;
mod linked_worktrees;
mod mcp;
mod plugin_kit;
mod sandbox_gates;
mod sandbox_reach;
mod wasm_gates;
