//! `issue_refund`: a tool that needs a human's approval. Each call waits (status `waiting`,
//! `{"approval": "pending"}`) until a client approves it (`approve_tool` rpc or
//! `POST /api/threads/:id/tool-calls/:call/approve`) or rejects it, in which case the model
//! gets an error result with the reason.

use edgent::values::ids::new_id;
use edgent::prelude::*;

/// The refund to issue.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IssueRefund {
    /// The customer, e.g. `cus_1001`.
    pub customer_id: String,
    /// Amount in cents (1 to 100000).
    pub amount_cents: u32,
    /// Why.
    pub reason: String,
}

/// Registered as `issue_refund`.
pub fn tool() -> Tool {
    Tool::new("Refunds a customer; a human approves each refund before it is issued.")
        .handler(issue_refund)
        .needs_approval()
        .refine(|r: &IssueRefund| match r.amount_cents {
            1..=100_000 => Ok(()),
            a => Err(format!("amount_cents is {a}; it must be 1 to 100000")),
        })
}

async fn issue_refund(flow: FlowState, r: IssueRefund) -> Result<String, ToolError> {
    flow.storage.exec(
        "CREATE TABLE IF NOT EXISTS example_refunds (
            id TEXT PRIMARY KEY, customer_id TEXT NOT NULL, amount_cents INTEGER NOT NULL,
            reason TEXT NOT NULL, created_at INTEGER NOT NULL)",
        &[],
    )?;
    let id = format!("re_{}", new_id().replace('-', ""));
    flow.storage.exec(
        "INSERT INTO example_refunds (id, customer_id, amount_cents, reason, created_at) VALUES (?, ?, ?, ?, ?)",
        &[
            id.as_str().into(),
            r.customer_id.as_str().into(),
            r.amount_cents.into(),
            r.reason.as_str().into(),
            flow.now_ms.into(),
        ],
    )?;
    Ok(format!("refund {id} of {} cents issued to {}", r.amount_cents, r.customer_id))
}
