//! Tool authoring: what a file in `agents/tools/` writes, and how the thread runs it.
//!
//! A tool reads like an axum handler: a plain async function that receives the
//! [`FlowState`] and returns something that becomes a [`CallToolResult`]. Errors are values:
//! a handler that fails produces an `error` result the model can read, never a crash.
//!
//! ```
//! use edgent::prelude::*;
//!
//! /// Built by the registry generated from `agents/tools/` (the file stem is the name).
//! pub fn tool() -> Tool {
//!     Tool::new("Says hello.").handler(hello)
//! }
//!
//! async fn hello(flow: FlowState) -> CallToolResult {
//!     CallToolResult::text(format!("hello from thread {}", flow.thread_id))
//! }
//! # let _ = tool();
//! ```

mod registry;
mod result;

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;

pub use registry::Registry;
pub use result::{CallToolResult, Content, ToolStatus};

/// The execution context a tool receives.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowState {
    /// The thread this call belongs to.
    pub thread_id: String,
    /// The agent running the thread.
    pub agent_id: String,
    /// Completed turns.
    pub turn_count: i64,
    /// 0 at the top level.
    pub depth: u32,
    /// The call being executed.
    pub tool_call_id: String,
    /// The current time, ms since the Unix epoch (passed in, never read from a clock here).
    pub now_ms: i64,
}

/// A boxed, non-`Send` future (Workers are single-threaded).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// Builds a tool; every file in `agents/tools/` exports one as `pub fn tool() -> Tool`.
pub type ToolConstructor = fn() -> Tool;

type ErasedHandler = Box<dyn Fn(FlowState, Value) -> BoxFuture<'static, CallToolResult>>;

/// A tool: description, argument schema and handler, ready to be registered.
pub struct Tool {
    description: String,
    parameters: Value,
    handler: Option<ErasedHandler>,
}

impl std::fmt::Debug for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tool")
            .field("description", &self.description)
            .field("parameters", &self.parameters)
            .finish_non_exhaustive()
    }
}

impl Tool {
    /// Starts a tool with the description the model sees.
    pub fn new(description: impl Into<String>) -> Self {
        Tool {
            description: description.into(),
            parameters: serde_json::json!({ "type": "object", "properties": {}, "additionalProperties": false }),
            handler: None,
        }
    }

    /// Sets the handler: an async function of the flow returning a result.
    pub fn handler<H, T>(mut self, handler: H) -> Self
    where
        H: Handler<T>,
    {
        self.handler = Some(handler.erase());
        self
    }

    /// The description the model sees.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// JSON Schema of the arguments object.
    pub fn parameters(&self) -> &Value {
        &self.parameters
    }

    /// Runs the tool with raw arguments from the model. Never panics on bad input: malformed
    /// JSON or a missing handler become `error` results.
    pub fn call(&self, flow: FlowState, raw_arguments: &str) -> BoxFuture<'static, CallToolResult> {
        let args = if raw_arguments.trim().is_empty() {
            Value::Object(Default::default())
        } else {
            match serde_json::from_str::<Value>(raw_arguments) {
                Ok(v) => v,
                Err(e) => {
                    let msg = format!("arguments are not valid JSON ({e}); send a JSON object");
                    return Box::pin(async move { CallToolResult::error(msg) });
                }
            }
        };
        match &self.handler {
            Some(h) => h(flow, args),
            None => Box::pin(async { CallToolResult::error("this tool has no handler") }),
        }
    }
}

/// Turns a handler's return value into a [`CallToolResult`].
pub trait IntoToolResult {
    /// The conversion.
    fn into_tool_result(self) -> CallToolResult;
}

impl IntoToolResult for CallToolResult {
    fn into_tool_result(self) -> CallToolResult {
        self
    }
}

impl<E: std::fmt::Display> IntoToolResult for Result<CallToolResult, E> {
    fn into_tool_result(self) -> CallToolResult {
        self.unwrap_or_else(|e| CallToolResult::error(e.to_string()))
    }
}

/// Implemented for async functions that can serve as tool handlers.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a tool handler",
    note = "a handler is an `async fn(FlowState) -> CallToolResult` (or `-> Result<CallToolResult, E>` with `E: Display`)"
)]
pub trait Handler<T>: 'static {
    /// Erases the handler's type so tools of every shape live in one registry.
    fn erase(self) -> ErasedHandler;
}

impl<F, Fut, R> Handler<(FlowState,)> for F
where
    F: Fn(FlowState) -> Fut + 'static,
    Fut: Future<Output = R> + 'static,
    R: IntoToolResult,
{
    fn erase(self) -> ErasedHandler {
        Box::new(move |flow, args| {
            let not_object = !args.is_object();
            let fut = (self)(flow);
            Box::pin(async move {
                if not_object {
                    return CallToolResult::error(
                        "arguments must be a JSON object (this tool takes none: send {})",
                    );
                }
                fut.await.into_tool_result()
            })
        })
    }
}
