//! The MCP side: the `rmcp` server handler (initialize, `tools/list`,
//! `tools/call`) and its stdio transport. A call of an unknown tool is a
//! protocol error (invalid params); everything else a call can go wrong
//! with is the tool's own error result (see [`super::calls`]).

use super::McpError;
use super::calls;
use super::current::Whereabouts;
use crate::client::Client;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, InitializeResult, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use std::sync::Arc;

const INSTRUCTIONS: &str = "gatehost gates your work: attach a policy (policy_attach) with a \
gate (naming no session attaches it to yours: session_current says which it is); when your turn ends the daemon runs the gate, nudges you with the \
reason when it fails, and on success emits an event or prepares a commit that a human \
acknowledges. Follow it with session_monitor and session_events_poll (continue from \
nextCursor). You cannot acknowledge or cancel: those are the operator's.";

/// The server: one daemon client (the agent's token) and the tool list.
#[derive(Debug, Clone)]
pub struct GatehostMcp {
    client: Client,
    at: Whereabouts,
    tools: Arc<Vec<Tool>>,
}

impl GatehostMcp {
    /// The server for an agent `at` its whereabouts (which session it is).
    pub fn new(client: Client, at: Whereabouts) -> Result<GatehostMcp, McpError> {
        let tools = super::tools::tools().map_err(McpError::Serve)?;
        Ok(GatehostMcp {
            client,
            at,
            tools: Arc::new(tools),
        })
    }
}

impl ServerHandler for GatehostMcp {
    fn get_info(&self) -> ServerConfig {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("gatehost", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.as_ref();
        let args = request.arguments.unwrap_or_default();
        tracing::debug!(tool = name, "tool call");
        match calls::call(&self.client, &self.at, name, args).await {
            Some(result) => Ok(result.into()),
            None => Err(ErrorData::invalid_params(
                format!(
                    "no tool '{name}' (the tools are {})",
                    super::TOOL_NAMES.join(", ")
                ),
                None,
            )),
        }
    }
}

/// Serves `server` on stdin and stdout until the client closes them.
pub async fn serve_stdio(server: GatehostMcp) -> Result<(), McpError> {
    let running = server
        .serve(rmcp::transport::stdio_pipes())
        .await
        .map_err(|e| McpError::Serve(e.to_string()))?;
    let reason = running
        .waiting()
        .await
        .map_err(|e| McpError::Serve(e.to_string()))?;
    tracing::info!(?reason, "the MCP connection ended");
    Ok(())
}
