//! The edgent example app: the `support` and `review` agents with their tools, workflows and
//! hooks in `agents/`. `build.rs` finds them; this file hands them to the Worker driver.

// The catalogue generated from `agents/`: `tools::<name>`, `hooks::<name>` and `CATALOG`.
include!(concat!(env!("OUT_DIR"), "/agents.rs"));

/// The answers a prompt may ask for by type: `response_format = { type_name = "ticket_triage" }`
/// (docs/agents.md, "Structured answers").
pub mod outputs {
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    /// How a support request is triaged.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct TicketTriage {
        /// What the request is about.
        pub category: Category,
        /// From 1 (can wait) to 5 (urgent).
        #[schemars(range(min = 1, max = 5))]
        pub urgency: u8,
        /// One sentence for the team that picks it up.
        pub summary: String,
    }

    /// The teams requests go to: `billing` (invoices, refunds, plans), `shipping` (orders on
    /// their way), `account` (logins and profiles), `other`.
    // Variants without doc comments: schemars writes a documented variant as a `oneOf` branch,
    // and a plain `enum` keeps the schema in OpenAI's strict subset.
    #[allow(missing_docs)]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "snake_case")]
    pub enum Category {
        Billing,
        Shipping,
        Account,
        Other,
    }
}

/// The app: the catalogue generated from `agents/`, with the output types above.
pub const APP: edgent::Catalog = CATALOG.with_schemas(&[(
    "ticket_triage",
    edgent::tool::schema::schema_for::<outputs::TicketTriage>,
)]);

#[cfg(target_arch = "wasm32")]
edgent_worker::serve!(APP);

// The schemas the Worker carries, written on the host before each wasm build (scripts/build.sh).
edgent::export_schemas!(APP);

/// The Rust examples in docs/ and the README compile as doctests of the example app, which
/// has the tools and hooks they name. Fragments (a builder chain, a signature) are fenced
/// `rust,ignore`; examples that need a running thread are `rust,no_run`.
#[cfg(doctest)]
mod docs {
    #[doc = include_str!("../README.md")]
    struct Readme;
    #[doc = include_str!("../docs/tools.md")]
    struct Tools;
    #[doc = include_str!("../docs/durable-tools.md")]
    struct DurableTools;
    #[doc = include_str!("../docs/hooks.md")]
    struct Hooks;
    #[doc = include_str!("../docs/agents.md")]
    struct Agents;
}
