//! The real agent CLIs (Claude Code, Codex, Gemini, Qwen, Copilot, OpenCode,
//! Cursor, Aider, the ACP agents) run against the fake model API
//! (`tests/support/fake-model-api/`) with gatehost's hooks or daemon in their way.

mod aider;
mod claude;
mod claude_acp;
mod claude_mcp;
mod claude_subagent;
mod codex;
mod codex_acp;
mod copilot;
mod copilot_subagent;
mod cursor;
mod gemini;
mod gemini_acp;
mod opencode;
mod qwen;
