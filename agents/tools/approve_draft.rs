//! `approve_draft`: the reviewer's stop tool in the example `review` agent (dual_ai). Calling
//! it ends the conversation; the agent's `stop_tool_response_property = "final_text"` makes
//! the approved text the conversation's result (what a parent gets when it calls `review`
//! as a tool).

use edgent::prelude::*;

/// The approved draft.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApproveDraft {
    /// The final text, exactly as it should be sent.
    pub final_text: String,
    /// Anything the author should know (optional).
    #[serde(default)]
    pub notes: Option<String>,
}

/// What the tool answers.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Approved {
    /// Always true.
    pub approved: bool,
    /// The approved text.
    pub final_text: String,
}

/// Registered as `approve_draft`.
pub fn tool() -> Tool {
    Tool::new("Approves the current draft and ends the review. Pass the final text exactly as it should be sent.")
        .handler(approve_draft)
        .refine(|a: &ApproveDraft| {
            if a.final_text.trim().is_empty() {
                Err("final_text must not be empty".into())
            } else {
                Ok(())
            }
        })
}

async fn approve_draft(_flow: FlowState, a: ApproveDraft) -> Result<Json<Approved>, ToolError> {
    Ok(Json(Approved {
        approved: true,
        final_text: a.final_text,
    }))
}
