//! `conversation_stats`: counts this thread's messages by role. Shows `get_messages`: it pages
//! through the history 100 messages at a time instead of loading it whole; and
//! `flow.output()`: clients see its progress (a `progress` data part per page) while it runs.

use std::collections::BTreeMap;

use edgent::prelude::*;

/// What to count.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConversationStats {
    /// Count only the most recent N messages (all when null).
    #[serde(default)]
    pub last: Option<u32>,
}

/// Message counts.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Stats {
    /// Messages counted.
    pub messages: u32,
    /// Count per role (user, assistant, tool, system).
    pub by_role: BTreeMap<String, u32>,
}

/// Registered as `conversation_stats`.
pub fn tool() -> Tool {
    Tool::new("Counts the messages of this conversation by role.").handler(conversation_stats)
}

async fn conversation_stats(flow: FlowState, args: ConversationStats) -> Result<Json<Stats>, ToolError> {
    const PAGE: u32 = 100;
    let wanted = args.last.unwrap_or(u32::MAX);
    let mut stats = Stats { messages: 0, by_role: BTreeMap::new() };
    let mut offset = 0;
    while stats.messages < wanted {
        let page = get_messages(&flow, PAGE.min(wanted - stats.messages), offset, Order::Desc)?;
        for m in &page.messages {
            stats.messages += 1;
            *stats.by_role.entry(m.role.as_str().to_owned()).or_default() += 1;
        }
        // Streamed to clients (and logged for a socket that resumes); the model reads the
        // result only.
        flow.output().data("progress", &serde_json::json!({ "counted": stats.messages }))?;
        if !page.has_more || page.messages.is_empty() {
            break;
        }
        offset += PAGE;
    }
    Ok(Json(stats))
}
