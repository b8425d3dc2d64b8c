//! # edgent
//!
//! A Rust framework for AI agents on Cloudflare Workers. One conversation thread is one
//! SQLite-backed Durable Object; tools are Rust files in `agents/tools/`; agent configuration
//! lives in D1.
//!
//! # What an app uses
//! - [`prelude`]: everything a tool or hook file needs (`use edgent::prelude::*;`);
//! - [`tool`]: the tool authoring API (handlers, policies, [`tool::FlowState`], durable steps);
//! - [`hook`]: synchronous hooks over messages and tool results;
//! - [`values`]: the plain values the rest is made of (messages, tool results, statuses, ids);
//! - [`catalog`]: the tools, workflows and hooks an app contributes (written by `edgent-build`);
//! - `testing` (feature `testing`): a host harness for an app's own tool tests.
//!
//! The Worker driver (router, `DurableThread`, bindings) is the `edgent-worker` crate; this
//! crate has no `worker` dependency and runs on the host.
//!
//! # What the driver uses
//! The layers under the engine (`llm` wire formats, `config`, `engine`, `api` contracts) are
//! public only so that `edgent-worker` can drive them and edgent's own host tests can reach
//! them. They are hidden from these docs and are not covered by semver: an app that names
//! them may break on any release. (See docs/decisions/2026-11-23-framework-crates-and-engine.md
//! for why this is `#[doc(hidden)]` rather than crate-private.) Inside them, the store is
//! crate-private: the driver changes a thread only through the engine's `Thread`.

#[doc(hidden)]
pub mod api;
pub mod catalog;
#[doc(hidden)]
pub mod config;
#[doc(hidden)]
pub mod engine;
pub mod hook;
#[doc(hidden)]
pub mod llm;
#[doc(hidden)]
pub mod runtime;
pub mod tool;
pub mod values;

#[cfg(feature = "testing")]
pub mod testing;

pub use catalog::Catalog;

/// The host test that writes an app's JSON Schemas for a Worker built with edgent's
/// `prebuilt-schemas` feature: one line in the app's `src/lib.rs`, naming the catalogue the
/// Worker serves.
///
/// ```ignore
/// edgent::export_schemas!(APP);
/// ```
///
/// It defines the test `edgent_export_schemas`, which `scripts/build.sh` runs on the host
/// before each wasm build (`EDGENT_SCHEMAS_OUT=<file> cargo test --lib edgent_export_schemas
/// -- --exact`) and hands the file to the build. In a plain `cargo test` it checks that the
/// schemas can be written and writes nothing.
#[macro_export]
macro_rules! export_schemas {
    ($catalog:expr) => {
        #[cfg(test)]
        #[test]
        fn edgent_export_schemas() {
            if let Err(why) =
                $crate::Catalog::write_schemas_for_build(&$catalog, env!("CARGO_PKG_NAME"))
            {
                panic!("{why}");
            }
        }
    };
}

/// What a tool or hook file needs in scope: `use edgent::prelude::*;`.
pub mod prelude {
    pub use crate::engine::store::{Order, Side};
    pub use crate::engine::thread::InjectMessage;
    pub use crate::hook::{Hook, HookContext, HookError};
    pub use crate::tool::{
        cancel_schedule, emit_ephemeral_event, emit_thread_event, force_turn, get_messages,
        inject_message, queue_tool, queue_tool_with_bindings, schedule, CallToolResult, Content,
        FlowState, HttpRequest, HttpResponse, Json, LimitScope, RateLimit, RetryPolicy, Schedule,
        ScheduleSpec, Source, Tool, ToolError, ToolStatus, Wait, WebhookEvent, Winner,
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
    pub use crate::values::Invalid;
}
