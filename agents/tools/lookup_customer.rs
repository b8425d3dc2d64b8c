//! `lookup_customer`: finds a customer in D1 by id or by email. Shows typed arguments with a
//! refine rule (at least one of two optional fields), a parameterised D1 query and a typed
//! return schema.

use edgent::prelude::*;

/// Who to look up. Give `customer_id`, `email`, or both.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LookupCustomer {
    /// The customer id, e.g. `cus_1001`.
    #[serde(default)]
    pub customer_id: Option<String>,
    /// The customer's email address (case does not matter).
    #[serde(default)]
    pub email: Option<String>,
}

/// A customer record.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Customer {
    /// Customer id.
    pub id: String,
    /// Full name.
    pub name: String,
    /// Email address.
    pub email: String,
    /// Subscription plan: free, pro or enterprise.
    pub plan: String,
}

/// Registered as `lookup_customer`.
pub fn tool() -> Tool {
    Tool::new("Looks up a customer by id or email and returns their id, name, email and plan.")
        // Offered over MCP (`POST /mcp/:agent`) to the server key's clients (not to browsers:
        // it is not client_callable).
        .mcp()
        .handler(lookup_customer)
        .refine(|a: &LookupCustomer| {
            let given = |v: &Option<String>| v.as_deref().is_some_and(|s| !s.trim().is_empty());
            if given(&a.customer_id) || given(&a.email) {
                Ok(())
            } else {
                Err("either customer_id or email is required".into())
            }
        })
}

async fn lookup_customer(flow: FlowState, args: LookupCustomer) -> Result<Json<Customer>, ToolError> {
    let id = args.customer_id.map(|s| s.trim().to_owned());
    let email = args.email.map(|s| s.trim().to_owned());
    // Both lookups use an index (the primary key, and `customers_by_email` NOCASE).
    let rows = flow
        .d1_query(
            "DB",
            "SELECT id, name, email, plan FROM customers
             WHERE id = ?1 OR email = ?2 COLLATE NOCASE LIMIT 1",
            &[id.clone().into(), email.clone().into()],
        )
        .await?;
    let Some(row) = rows.into_iter().next() else {
        let what = match (id, email) {
            (Some(id), Some(email)) => format!("id {id:?} or email {email:?}"),
            (Some(id), None) => format!("id {id:?}"),
            (None, Some(email)) => format!("email {email:?}"),
            (None, None) => "that query".into(),
        };
        return Err(ToolError::fatal(format!("no customer with {what}; check it with the user")));
    };
    let customer: Customer = serde_json::from_value(row.into())?;
    Ok(Json(customer))
}
