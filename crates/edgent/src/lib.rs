//! # edgent
//!
//! A Rust framework for AI agents on Cloudflare Workers. One conversation thread is one
//! SQLite-backed Durable Object; tools are Rust files in `agents/tools/`; agent configuration
//! lives in D1.
//!
//! The crate is split the way the architecture is:
//! - [`core`]: the thread state machine, storage, wire formats and API contracts, with no I/O
//!   (tested on the host against real SQLite);
//! - [`tool`]: the tool authoring API and the registry built from an app's [`Catalog`];
//! - [`hook`]: synchronous hooks over messages and tool results;
//! - [`catalog`]: the tools, workflows and hooks an app contributes (found by `edgent-build`).
//!
//! The Worker driver (router, `DurableThread`, bindings) is the `edgent-worker` crate; this
//! crate has no `worker` dependency and runs on the host.

pub mod catalog;
pub mod core;
pub mod hook;
pub mod tool;

pub use catalog::Catalog;

/// What a tool or hook file needs in scope: `use edgent::prelude::*;`.
pub mod prelude {
    pub use crate::core::message::{Message, Role, ToolCall};
    pub use crate::core::sql::SqlValue;
    pub use crate::core::store::{Order, Side};
    pub use crate::core::thread::InjectMessage;
    pub use crate::core::time::rfc3339_from_ms;
    pub use crate::hook::{Hook, HookContext, HookError};
    pub use crate::tool::{
        emit_thread_event, force_turn, get_messages, inject_message, queue_tool,
        queue_tool_with_bindings, CallToolResult, Content, FlowState, HttpRequest, HttpResponse,
        Json, LimitScope, RateLimit, RetryPolicy, Source, Tool, ToolError, ToolStatus,
        WebhookEvent,
    };
    pub use schemars::JsonSchema;
    pub use serde::{Deserialize, Serialize};
    pub use std::time::Duration;
}

/// What `edgent-build` shares with the runtime, so discovery and the runtime agree: the rules
/// for tool and hook names and the TOML workflow format. Not part of the app-facing API.
#[doc(hidden)]
pub mod build_support {
    pub use crate::core::tool_name::{validate_hook_name, validate_tool_name};
    pub use crate::tool::workflow_toml::definition;
}
