//! `get_current_time`: the current date and time in UTC. The smallest possible tool: no
//! arguments, no I/O.

use edgent::prelude::*;

/// Registered as `get_current_time` (the file stem).
pub fn tool() -> Tool {
    Tool::new("Returns the current date and time in UTC as an RFC 3339 timestamp.")
        // Harmless and argument-free: a browser holding a client token may queue it.
        .client_callable()
        // Offered over MCP too (`POST /mcp/:agent`): other agents may ask us the time.
        .mcp()
        .handler(get_current_time)
}

async fn get_current_time(flow: FlowState) -> CallToolResult {
    CallToolResult::text(rfc3339_from_ms(flow.now_ms))
}
