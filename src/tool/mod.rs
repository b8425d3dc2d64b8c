//! Tool authoring: what a file in `agents/tools/` writes, and how the thread runs it.
//!
//! A tool reads like an axum handler: a plain async function that receives the [`FlowState`]
//! and, optionally, its already-validated arguments, and returns something that becomes a
//! [`CallToolResult`]. Errors are values: bad arguments and failing handlers produce `error`
//! results the model can read, never a crash.
//!
//! ```
//! use edgent::prelude::*;
//!
//! /// Arguments: doc comments become the descriptions the model sees.
//! #[derive(Deserialize, JsonSchema)]
//! pub struct Greet {
//!     /// Who to greet.
//!     name: String,
//!     /// How many exclamation marks (default 1).
//!     #[serde(default = "one")]
//!     excitement: u8,
//! }
//! fn one() -> u8 { 1 }
//!
//! pub fn tool() -> Tool {
//!     Tool::new("Greets someone.")
//!         .handler(greet)
//!         .refine(|a: &Greet| if a.name.trim().is_empty() { Err("name must not be blank".into()) } else { Ok(()) })
//! }
//!
//! async fn greet(flow: FlowState, args: Greet) -> CallToolResult {
//!     let bang = "!".repeat(args.excitement.into());
//!     CallToolResult::text(format!("hello {}{bang} (thread {})", args.name, flow.thread_id))
//! }
//! # let _ = tool();
//! ```

mod flow;
mod handler;
mod http;
mod registry;
mod result;
pub mod schema;
mod utils;
pub mod validate;

use std::any::{Any, TypeId};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use serde_json::Value;

pub use flow::{Context, EventStream, FlowHost, FlowState, MessageHistory, Storage, ToolQueue};
pub use handler::{Handler, HandlerParts, IntoToolResult, Json, NoArgs};
pub use http::{HttpRequest, HttpResponse};
pub use registry::{Registry, RegistryError};
pub use result::{CallToolResult, Content, Source, SourceKind, ToolStatus};
pub use utils::{
    emit_thread_event, force_turn, get_messages, inject_message, queue_tool, ToolError,
};

use handler::{ArgsSpec, RunFn};

/// A boxed, non-`Send` future (Workers are single-threaded).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// Builds a tool; every file in `agents/tools/` exports one as `pub fn tool() -> Tool`.
pub type ToolConstructor = fn() -> Tool;

type RuleFn = Rc<dyn Fn(&dyn Any) -> Result<(), String>>;

/// A rule checked after the arguments deserialise and before the handler runs.
struct Refine {
    type_id: TypeId,
    type_name: &'static str,
    check: RuleFn,
}

/// A tool: description, argument schema, optional return schema and handler.
pub struct Tool {
    description: String,
    args: ArgsSpec,
    returns: Option<Value>,
    run: Option<RunFn>,
    refines: Vec<Refine>,
}

impl std::fmt::Debug for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tool")
            .field("description", &self.description)
            .field("arguments", &self.args.type_name)
            .field("returns", &self.returns)
            .finish_non_exhaustive()
    }
}

impl Tool {
    /// Starts a tool with the description the model sees.
    pub fn new(description: impl Into<String>) -> Self {
        Tool {
            description: description.into(),
            args: ArgsSpec::none(),
            returns: None,
            run: None,
            refines: Vec::new(),
        }
    }

    /// Sets the handler. Its argument type (if any) gives the parameters schema, its return
    /// type (if [`Json<T>`]) the return schema.
    pub fn handler<H, M>(mut self, handler: H) -> Self
    where
        H: Handler<M>,
    {
        let parts = handler.into_parts();
        self.args = parts.args;
        self.returns = parts.returns;
        self.run = Some(parts.run);
        self
    }

    /// Adds a rule over the typed arguments, checked after they deserialise (like zod's
    /// `.refine`): `Err(text)` becomes an error result telling the model what to fix.
    /// `T` must be the handler's argument type; the registry refuses the tool otherwise.
    pub fn refine<T: 'static>(mut self, rule: impl Fn(&T) -> Result<(), String> + 'static) -> Self {
        self.refines.push(Refine {
            type_id: TypeId::of::<T>(),
            type_name: std::any::type_name::<T>(),
            check: Rc::new(move |args: &dyn Any| match args.downcast_ref::<T>() {
                Some(args) => rule(args),
                None => Ok(()), // refused when the registry is built
            }),
        });
        self
    }

    /// The description the model sees.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// JSON Schema of the arguments object.
    pub fn parameters(&self) -> &Value {
        &self.args.schema
    }

    /// JSON Schema of a successful result, when the handler declares one.
    pub fn returns(&self) -> Option<&Value> {
        self.returns.as_ref()
    }

    /// Checks the definition: a handler is set, refine rules match the argument type, and the
    /// argument schema is an object at most [`schema::MAX_DEPTH`] levels deep.
    pub fn check(&self) -> Result<(), String> {
        if self.run.is_none() {
            return Err("no handler: finish the definition with `.handler(your_fn)`".into());
        }
        for r in &self.refines {
            if r.type_id != self.args.type_id {
                return Err(format!(
                    "a refine rule takes `{}` but the handler's arguments are `{}`",
                    r.type_name, self.args.type_name
                ));
            }
        }
        schema::check_arguments(&self.args.schema).map_err(|p| p.to_string())
    }

    /// Validates arguments without running anything (what `queue_tool` does at queue time).
    pub fn validate(&self, arguments: Value) -> Result<(), String> {
        self.parse(arguments).map(drop)
    }

    fn parse(&self, arguments: Value) -> Result<Box<dyn Any>, String> {
        let parsed = (self.args.parse)(arguments)?;
        for r in &self.refines {
            (r.check)(parsed.as_ref())?;
        }
        Ok(parsed)
    }

    /// Runs the tool with the raw argument text from the model. Never panics on bad input:
    /// malformed JSON, schema violations and failed refine rules become `error` results that
    /// say what was wrong, so the model can correct its call.
    pub fn call(&self, flow: FlowState, raw_arguments: &str) -> BoxFuture<'static, CallToolResult> {
        let parsed = validate::parse_json(raw_arguments).and_then(|v| self.parse(v));
        match (parsed, &self.run) {
            (Ok(args), Some(run)) => run(flow, args),
            (Err(why), _) => {
                let text =
                    format!("invalid arguments: {why}. Fix the arguments and call the tool again.");
                Box::pin(async move { CallToolResult::error(text) })
            }
            (Ok(_), None) => Box::pin(async { CallToolResult::error("this tool has no handler") }),
        }
    }
}
