//! `update_context`: remembers facts about the conversation in the thread's key/value context
//! (the thread's SQLite) and tells the model with an injected system message. Shows a map
//! (record) argument, `flow.context` and `inject_message`.

use std::collections::BTreeMap;

use edgent::prelude::*;

/// Facts to remember or forget.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateContext {
    /// Keys and values to store, e.g. {"preferred_language": "pt"}.
    #[serde(default)]
    pub set: BTreeMap<String, String>,
    /// Keys to forget.
    #[serde(default)]
    pub remove: Vec<String>,
}

/// Registered as `update_context`.
pub fn tool() -> Tool {
    Tool::new("Remembers (or forgets) facts about this conversation as key/value pairs.")
        .handler(update_context)
        .refine(|u: &UpdateContext| {
            if u.set.is_empty() && u.remove.is_empty() {
                return Err("give at least one key in set or remove".into());
            }
            match u.set.keys().chain(&u.remove).find(|k| k.is_empty() || k.len() > 64) {
                Some(k) => Err(format!("key {k:?} must be 1-64 characters")),
                None => Ok(()),
            }
        })
}

async fn update_context(flow: FlowState, update: UpdateContext) -> Result<Json<serde_json::Map<String, serde_json::Value>>, ToolError> {
    for (key, value) in &update.set {
        flow.context.set(key, value)?;
    }
    for key in &update.remove {
        flow.context.remove(key)?;
    }
    let context = flow.context.all()?;
    let summary = context
        .iter()
        .map(|(k, v)| format!("{k} = {v}"))
        .collect::<Vec<_>>()
        .join("; ");
    inject_message(
        &flow,
        InjectMessage::new(Role::System, format!("Conversation context is now: {summary}")),
    )?;
    Ok(Json(context))
}
