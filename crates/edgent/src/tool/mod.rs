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

mod durable;
mod flow;
mod handler;
mod http;
pub(crate) mod nested;
pub mod offer;
mod output;
pub mod policy;
pub(crate) mod prebuilt;
mod race;
mod registry;
pub mod schema;
pub mod select;
mod utils;

pub use crate::values::validate;
pub(crate) mod workflow_toml;

use std::any::{Any, TypeId};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use serde_json::Value;

pub use crate::values::policy::{
    LimitScope, RateLimit, RetryPolicy, ToolPolicy, WhenLimited, DEFAULT_TIMEOUT,
};
pub use crate::values::schedule::{Schedule, ScheduleSpec};
pub use crate::values::tool_error::{Retry, ToolError};
pub use crate::values::tool_result::{CallToolResult, Content, Source, SourceKind, ToolStatus};
pub use durable::{run_until_suspended, RunState, WebhookEvent};
pub(crate) use flow::broadcast;
pub use flow::{
    AgentView, Context, EventStream, FlowHost, FlowState, MessageHistory, Storage, ToolQueue,
};
pub use handler::{Handler, HandlerParts, IntoToolResult, Json, NoArgs, Outcome};
pub use http::{HostError, HttpRequest, HttpResponse};
pub use output::{ToolOutput, MAX_PART_BYTES, OUTPUT_EVENT};
pub use race::{Wait, Winner};
pub use registry::{OutputType, Registry, RegistryError};
pub use utils::{
    cancel_schedule, emit_ephemeral_event, emit_thread_event, force_turn, get_messages,
    inject_message, queue_tool, queue_tool_with_bindings, schedule,
};

use crate::values::Invalid;
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

/// A handler kept for calls that started on an older version of the tool.
struct KeptHandler {
    version: u32,
    args: ArgsSpec,
    run: RunFn,
}

/// A tool: description, argument schema, optional return schema and handler.
pub struct Tool {
    description: String,
    args: ArgsSpec,
    returns: Option<Value>,
    run: Option<RunFn>,
    refines: Vec<Refine>,
    policy: ToolPolicy,
    kept: Vec<KeptHandler>,
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
            policy: ToolPolicy::default(),
            kept: Vec::new(),
        }
    }

    /// A tool whose arguments are described by a JSON Schema alone, with no Rust type behind
    /// them (TOML workflows). `run` receives the arguments as a `serde_json::Map<String,
    /// Value>`, already checked against the schema's top level (required keys, unknown keys
    /// when `additionalProperties` is false, property types and enums); bad arguments become
    /// the same `invalid arguments` error results as a typed tool's.
    pub(crate) fn from_schema(description: impl Into<String>, schema: Value, run: RunFn) -> Self {
        let rules = schema.clone();
        Tool {
            args: ArgsSpec::schema_only(schema),
            run: Some(run),
            ..Tool::new(description)
        }
        .refine(move |args: &serde_json::Map<String, Value>| {
            // A refine rule answers with its message as text, like an author's rule.
            handler::check_schema(&rules, args).map_err(|why| why.to_string())
        })
    }

    /// Sets how failed attempts are retried (default: 3 attempts, 1 s then 2 s apart).
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.policy.retry = retry;
        self
    }

    /// Sets how long one attempt may take (default 30 s); a timed-out attempt is a failure
    /// (retried under the retry policy).
    pub fn timeout(mut self, timeout: std::time::Duration) -> Self {
        self.policy.timeout = timeout;
        self
    }

    /// Each call waits (status `waiting`) until a client approves or rejects it; a rejection
    /// is the error result the model sees.
    pub fn needs_approval(mut self) -> Self {
        self.policy.needs_approval = true;
        self
    }

    /// A client token (a browser's) may queue it with `queue_tool`, without bindings; other
    /// tools need the server key to be queued from outside (the model may call any offered
    /// tool).
    pub fn client_callable(mut self) -> Self {
        self.policy.client_callable = true;
        self
    }

    /// Offered over MCP (`POST /mcp`, `POST /mcp/:agent`): other agents and MCP clients may
    /// list and call it, through the same durable path as the model's calls (a client token
    /// calls it only if it is also [`client_callable`](Tool::client_callable)).
    pub fn mcp(mut self) -> Self {
        self.policy.mcp = true;
        self
    }

    /// Limits calls per minute (per thread, or per deployment too).
    pub fn rate_limit(mut self, limit: RateLimit) -> Self {
        self.policy.rate_limit = Some(limit);
        self
    }

    /// Limits a workflow's whole run, from its first start to its result, suspensions
    /// included; past it the call fails with an error result.
    pub fn deadline(mut self, deadline: std::time::Duration) -> Self {
        self.policy.deadline = Some(deadline);
        self
    }

    /// Reuses a successful result for the same arguments for `ttl` (for idempotent tools
    /// and workflows): the call is answered from the thread's cache without running.
    pub fn cache_results(mut self, ttl: std::time::Duration) -> Self {
        self.policy.cache_for = Some(ttl);
        self
    }

    /// How the thread runs this tool.
    pub fn policy(&self) -> &ToolPolicy {
        &self.policy
    }

    /// The same tool under another policy (operators' overrides). The version and the kept
    /// handlers' versions stay the tool's own: they describe its code, not how it runs.
    pub fn with_policy(mut self, policy: ToolPolicy) -> Self {
        let kept_versions = std::mem::take(&mut self.policy.kept_versions);
        self.policy = ToolPolicy {
            version: self.policy.version,
            kept_versions,
            ..policy
        };
        self
    }

    /// Declares the version of the tool's code (default 1). A call keeps the version it
    /// started on: after a deploy that changes it, a call that already recorded steps runs on
    /// the handler kept for its version ([`Tool::previous_version`]), or ends with the error
    /// result `workflow_version_changed` instead of replaying its records into changed code
    /// (docs/durable-tools.md, "Upgrading workflows"). Raise it when a change would replay
    /// recorded steps wrongly: steps renamed, reordered, added before others, or retyped.
    pub fn version(mut self, version: u32) -> Self {
        self.policy.version = version;
        self
    }

    /// Keeps `handler` for calls that started on `version` (older than the tool's own), so
    /// they finish on the code they started with. Its arguments may be of another type than
    /// the current handler's (the refine rules apply to their own type only).
    ///
    /// ```
    /// use edgent::prelude::*;
    ///
    /// pub fn tool() -> Tool {
    ///     Tool::new("Charges, then sends a receipt a day later.")
    ///         .version(2)
    ///         .handler(charge_v2) // new calls
    ///         .previous_version(1, charge_v1) // calls parked on version 1 finish on it
    /// }
    ///
    /// async fn charge_v1(flow: FlowState) -> Result<String, ToolError> {
    ///     flow.step("charge", || async { Ok(()) }).await?;
    ///     flow.sleep("settle", Duration::from_secs(86_400)).await?;
    ///     Ok("charged".into())
    /// }
    ///
    /// async fn charge_v2(flow: FlowState) -> Result<String, ToolError> {
    ///     flow.step("reserve", || async { Ok(()) }).await?; // a step before the others
    ///     flow.step("charge", || async { Ok(()) }).await?;
    ///     flow.sleep("settle", Duration::from_secs(86_400)).await?;
    ///     Ok("reserved and charged".into())
    /// }
    /// # assert!(tool().check().is_ok());
    /// ```
    pub fn previous_version<H, M>(mut self, version: u32, handler: H) -> Self
    where
        H: Handler<M>,
    {
        let parts = handler.into_parts();
        self.kept.push(KeptHandler {
            version,
            args: parts.args,
            run: parts.run,
        });
        self.policy.kept_versions.push(version);
        self
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

    /// The same schema, shared (what a [`crate::llm::ToolSpec`] holds).
    pub(crate) fn shared_parameters(&self) -> Rc<Value> {
        Rc::clone(&self.args.schema)
    }

    /// JSON Schema of a successful result, when the handler declares one.
    pub fn returns(&self) -> Option<&Value> {
        self.returns.as_ref()
    }

    /// Checks the definition: a handler is set, refine rules match the argument type, the
    /// argument schema is an object at most [`schema::MAX_DEPTH`] levels deep, and the kept
    /// handlers are of distinct versions older than the tool's.
    pub fn check(&self) -> Result<(), Invalid> {
        if self.run.is_none() {
            return Err("no handler: finish the definition with `.handler(your_fn)`".into());
        }
        let current = self.policy.version;
        if current == 0 {
            return Err("`.version(0)`: versions start at 1".into());
        }
        for (i, kept) in self.kept.iter().enumerate() {
            if kept.version >= current {
                return Err(format!(
                    "`.previous_version({}, …)` is not older than the tool's version {current}",
                    kept.version
                )
                .into());
            }
            if self.kept[..i].iter().any(|k| k.version == kept.version) {
                return Err(
                    format!("`.previous_version({}, …)` is given twice", kept.version).into(),
                );
            }
        }
        for r in &self.refines {
            if r.type_id != self.args.type_id {
                return Err(format!(
                    "a refine rule takes `{}` but the handler's arguments are `{}`",
                    r.type_name, self.args.type_name
                )
                .into());
            }
        }
        schema::check_arguments(&self.args.schema).map_err(|p| Invalid::new(p.to_string()))
    }

    /// Validates arguments without running anything (what `queue_tool` does at queue time).
    pub fn validate(&self, arguments: Value) -> Result<(), Invalid> {
        self.parse(arguments).map(drop)
    }

    fn parse(&self, arguments: Value) -> Result<Box<dyn Any>, Invalid> {
        self.parse_as(&self.args, arguments)
    }

    /// Parses arguments as `args` says (the current handler's or a kept one's); a refine rule
    /// over another type than the parsed one passes.
    fn parse_as(&self, args: &ArgsSpec, arguments: Value) -> Result<Box<dyn Any>, Invalid> {
        let parsed = (args.parse)(arguments)?;
        for r in &self.refines {
            (r.check)(parsed.as_ref())?;
        }
        Ok(parsed)
    }

    /// Runs one attempt with the raw argument text from the model. Never panics on bad
    /// input: malformed JSON, schema violations and failed refine rules become `error`
    /// results (not failures: retrying cannot fix them) that say what was wrong, so the
    /// model can correct its call. A workflow's sleep or webhook wait parks the run: poll it
    /// with [`run_until_suspended`].
    pub fn attempt(&self, flow: FlowState, raw_arguments: &str) -> BoxFuture<'static, Outcome> {
        self.attempt_with(&self.args, self.run.as_ref(), flow, raw_arguments)
    }

    /// [`Tool::attempt`] on the handler of `version`, the version the call started on: the
    /// tool's own, or one kept with [`Tool::previous_version`]. The engine's gate never starts
    /// a run on a version the tool has no handler for; if one came here, its result is the
    /// `workflow_version_changed` error rather than a run of changed code.
    pub fn attempt_on(
        &self,
        version: u32,
        flow: FlowState,
        raw_arguments: &str,
    ) -> BoxFuture<'static, Outcome> {
        if version == self.policy.version {
            return self.attempt(flow, raw_arguments);
        }
        match self.kept.iter().find(|k| k.version == version) {
            Some(kept) => self.attempt_with(&kept.args, Some(&kept.run), flow, raw_arguments),
            None => {
                let text = crate::engine::durable::version_changed_text(
                    "this tool",
                    version,
                    self.policy.version,
                );
                Box::pin(async move { Ok(CallToolResult::error(text)) })
            }
        }
    }

    fn attempt_with(
        &self,
        args: &ArgsSpec,
        run: Option<&RunFn>,
        flow: FlowState,
        raw_arguments: &str,
    ) -> BoxFuture<'static, Outcome> {
        let parsed = validate::parse_json(raw_arguments).and_then(|v| self.parse_as(args, v));
        match (parsed, run) {
            (Ok(args), Some(run)) => run(flow, args),
            (Err(why), _) => {
                let refused = CallToolResult::invalid_arguments(why);
                Box::pin(async move { Ok(refused) })
            }
            (Ok(_), None) => {
                Box::pin(async { Ok(CallToolResult::error("this tool has no handler")) })
            }
        }
    }

    /// Runs the tool once, without retries or suspension (sub-prompts, tests, workflow
    /// steps): a failure becomes its error result, and a workflow that tries to sleep or wait
    /// gets an error result saying it cannot here.
    pub fn call(&self, flow: FlowState, raw_arguments: &str) -> BoxFuture<'static, CallToolResult> {
        let state = flow.run_state().clone();
        let attempt = self.attempt(flow, raw_arguments);
        Box::pin(async move {
            match run_until_suspended(attempt, &state).await {
                crate::engine::durable::Ran::Done(Ok(result)) => result,
                crate::engine::durable::Ran::Done(Err(e)) => CallToolResult::error(e.text()),
                _ => CallToolResult::error(
                    "this tool sleeps or waits for a webhook, which only a top-level tool call can do",
                ),
            }
        })
    }
}
