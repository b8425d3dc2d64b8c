//! `process_order`: places an order. Shows nested typed arguments (an array of objects with a
//! map, a tagged union, nullable and defaulted fields), the thread's own SQLite (`storage`),
//! `queue_tool` (a confirmation is queued on the root flow and runs right after this tool) and
//! `force_turn` (the assistant speaks after the queue drains, even when a client queued the
//! order on an idle thread).

use std::collections::BTreeMap;

use edgent::values::ids::new_id;
use edgent::prelude::*;

/// An order to place.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcessOrder {
    /// The customer placing the order, e.g. `cus_1001`.
    pub customer_id: String,
    /// What to order (at least one line).
    pub items: Vec<OrderLine>,
    /// How to deliver it.
    pub shipping: Shipping,
    /// Where to send the confirmation email; none is sent when null.
    #[serde(default)]
    pub confirmation_email: Option<String>,
    /// Wrap the order as a gift.
    #[serde(default)]
    pub gift_wrap: bool,
}

/// One order line.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OrderLine {
    /// Product SKU, e.g. `TSHIRT-RED`.
    pub sku: String,
    /// How many (1-100).
    pub quantity: u32,
    /// Product options such as size or colour.
    #[serde(default)]
    pub options: BTreeMap<String, String>,
}

/// Delivery method.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(tag = "method", rename_all = "snake_case", deny_unknown_fields)]
pub enum Shipping {
    /// Standard delivery (3-5 days).
    Standard,
    /// Express delivery by a date.
    Express {
        /// Latest delivery date, YYYY-MM-DD.
        deliver_by: String,
    },
    /// Pick up in a store.
    Pickup {
        /// The store's id.
        store_id: String,
    },
}

/// What the model gets back.
#[derive(Debug, Serialize, JsonSchema)]
pub struct OrderConfirmation {
    /// The new order's id.
    pub order_id: String,
    /// Total units ordered.
    pub units: u32,
    /// `confirmed`.
    pub status: String,
    /// The queued confirmation's tool call id, if one was sent.
    pub notification_call_id: Option<String>,
}

/// Registered as `process_order`.
pub fn tool() -> Tool {
    Tool::new("Places an order for a customer and sends a confirmation.")
        .handler(process_order)
        .refine(|o: &ProcessOrder| {
            if o.items.is_empty() {
                return Err("items must contain at least one line".into());
            }
            if let Some((i, line)) = o.items.iter().enumerate().find(|(_, l)| !(1..=100).contains(&l.quantity)) {
                return Err(format!("items[{i}].quantity is {}; it must be 1-100", line.quantity));
            }
            Ok(())
        })
}

async fn process_order(flow: FlowState, order: ProcessOrder) -> Result<Json<OrderConfirmation>, ToolError> {
    // The tool's own table in the thread's SQLite; `IF NOT EXISTS` makes it self-migrating.
    flow.storage.exec(
        "CREATE TABLE IF NOT EXISTS example_orders (
            id TEXT PRIMARY KEY, customer_id TEXT NOT NULL, units INTEGER NOT NULL,
            shipping TEXT NOT NULL, created_at INTEGER NOT NULL)",
        &[],
    )?;
    let order_id = format!("ord_{}", new_id().replace('-', ""));
    let units: u32 = order.items.iter().map(|l| l.quantity).sum();
    let shipping = match &order.shipping {
        Shipping::Standard => "standard".to_owned(),
        Shipping::Express { deliver_by } => format!("express by {deliver_by}"),
        Shipping::Pickup { store_id } => format!("pickup at {store_id}"),
    };
    flow.storage.exec(
        "INSERT INTO example_orders (id, customer_id, units, shipping, created_at) VALUES (?, ?, ?, ?, ?)",
        &[
            order_id.as_str().into(),
            order.customer_id.as_str().into(),
            i64::from(units).into(),
            shipping.as_str().into(),
            flow.now_ms.into(),
        ],
    )?;
    let notification_call_id = match &order.confirmation_email {
        Some(email) => Some(queue_tool(
            flow.root(),
            "send_notification",
            serde_json::json!({
                "channel": "email",
                "to": email,
                "message": format!("Order {order_id} confirmed: {units} item(s), {shipping}."),
            }),
        )?),
        None => None,
    };
    force_turn(&flow, Side::A)?;
    Ok(Json(OrderConfirmation {
        order_id,
        units,
        status: "confirmed".into(),
        notification_call_id,
    }))
}
