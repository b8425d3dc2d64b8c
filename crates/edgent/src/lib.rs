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

pub mod api;
pub mod catalog;
pub mod config;
pub mod engine;
pub mod hook;
pub mod llm;
pub mod tool;
pub mod values;

#[cfg(feature = "testing")]
pub mod testing;

pub use catalog::Catalog;

/// What a tool or hook file needs in scope: `use edgent::prelude::*;`.
pub mod prelude {
    pub use crate::engine::store::{Order, Side};
    pub use crate::engine::thread::InjectMessage;
    pub use crate::hook::{Hook, HookContext, HookError};
    pub use crate::tool::{
        emit_thread_event, force_turn, get_messages, inject_message, queue_tool,
        queue_tool_with_bindings, CallToolResult, Content, FlowState, HttpRequest, HttpResponse,
        Json, LimitScope, RateLimit, RetryPolicy, Source, Tool, ToolError, ToolStatus,
        WebhookEvent,
    };
    pub use crate::values::message::{Message, Role, ToolCall};
    pub use crate::values::sql::SqlValue;
    pub use crate::values::time::rfc3339_from_ms;
    pub use schemars::JsonSchema;
    pub use serde::{Deserialize, Serialize};
    pub use std::time::Duration;
}

/// What `edgent-build` shares with the runtime, so discovery and the runtime agree: the rules
/// for tool and hook names and the TOML workflow format. Not part of the app-facing API.
#[doc(hidden)]
pub mod build_support {
    pub use crate::tool::workflow_toml::definition;
    pub use crate::values::tool_name::{validate_hook_name, validate_tool_name};
}
