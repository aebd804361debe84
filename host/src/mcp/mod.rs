//! `gatehost mcp`: an MCP server over stdio for the supervised agent. Its
//! tools (`policy_attach`, `policy_status`, `policy_list`,
//! `session_events_poll`, `session_monitor`, `session_current`,
//! `routine_status`, `routine_list`, `routine_start`, `routine_cancel`) are
//! calls of the daemon's API
//! through the typed [`crate::client::Client`], made with the agent's token;
//! the API's answers are their results and the API's errors their tool
//! errors (`isError`, with the error's code, message and field).
//!
//! It owns the tool list and the tools' input schemas (derived with
//! `schemars` from the types the daemon decodes the same input into, so
//! they cannot drift), running a call, the stdio transport, and the
//! startup check that its token is the agent's ([`check_agent_token`]).
//!
//! It must never hold the operator token (it refuses to start with it),
//! acknowledge or cancel a policy, answer a routine (its start and cancel
//! are the daemon's to refuse when a step is not the agent's own),
//! validate an attach itself (the daemon
//! does, once), or write anything on stdout but MCP messages: logs go to
//! stderr.

mod answer;
mod calls;
mod current;
mod monitor;
mod role;
mod server;
mod tools;

#[cfg(test)]
mod tests;

pub use answer::MAX_STRING;
pub use current::{SESSION_VAR, Whereabouts};
pub use role::{PROBE_ROUTE, check_agent_token, role_from_probe};
pub use server::{GatehostMcp, serve_stdio};
pub use tools::{MAX_POLL_LIMIT, MAX_WAIT_MS, TOOL_NAMES, attach_schema, tools};

/// Why `gatehost mcp` stopped or would not start.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// The token is the operator's: the agent's server must not hold it.
    #[error(
        "the token given to gatehost mcp is the operator's ({how}); an agent's MCP server must hold the agent token only"
    )]
    OperatorToken { how: String },
    /// The daemon does not know the token.
    #[error("the daemon refuses the token given to gatehost mcp (HTTP 401): {message}")]
    WrongToken { message: String },
    /// The token's role could not be told (the daemon unreachable, or an
    /// answer that says neither): not started, since it might be the
    /// operator's.
    #[error("cannot check that the token given to gatehost mcp is the agent's: {message}")]
    CannotVerify { message: String },
    /// The server could not be set up or its connection failed.
    #[error("the MCP server failed: {0}")]
    Serve(String),
}
