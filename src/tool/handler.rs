//! Handlers: the plain async functions a tool file writes, in the three supported shapes.
//!
//! ```text
//! async fn f(flow: FlowState) -> R                      // no arguments
//! async fn f(flow: FlowState, args: T) -> R             // typed, validated arguments
//! async fn f(flow: FlowState, args: T) -> Result<Json<O>, E>   // ... and a typed return schema
//! ```
//! `T: Deserialize + JsonSchema`, `R: IntoToolResult`, `E: Display`. An `Err` is a failure the thread may retry (see
//! [`ToolError`]); an `Ok(CallToolResult::error(..))` is an answer and is not retried.

use std::any::{Any, TypeId};
use std::future::Future;
use std::rc::Rc;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::schema::schema_for;
use super::validate::parse_args;
use super::{BoxFuture, CallToolResult, FlowState, ToolError};

/// What one attempt of a handler produced: a result (success or an error the tool chose to
/// answer with), or a failure the thread may retry.
pub type Outcome = Result<CallToolResult, ToolError>;

/// Turns a handler's return value into a [`CallToolResult`].
pub trait IntoToolResult {
    /// The conversion.
    fn into_tool_result(self) -> CallToolResult;

    /// The conversion, keeping a failure apart from a result so the thread can retry it.
    fn into_outcome(self) -> Outcome
    where
        Self: Sized,
    {
        Ok(self.into_tool_result())
    }

    /// The JSON Schema of what a successful call returns, when the type declares one
    /// ([`Json<T>`] does).
    fn return_schema() -> Option<Value> {
        None
    }
}

impl IntoToolResult for CallToolResult {
    fn into_tool_result(self) -> CallToolResult {
        self
    }
}

impl IntoToolResult for String {
    fn into_tool_result(self) -> CallToolResult {
        CallToolResult::text(self)
    }
}

impl<R: IntoToolResult, E: std::fmt::Display + 'static> IntoToolResult for Result<R, E> {
    fn into_tool_result(self) -> CallToolResult {
        match self {
            Ok(r) => r.into_tool_result(),
            Err(e) => CallToolResult::error(e.to_string()),
        }
    }

    /// `Err` is a failure: a [`ToolError`] keeps its retry advice, any other error is
    /// retried under the tool's policy.
    fn into_outcome(self) -> Outcome {
        match self {
            Ok(r) => Ok(r.into_tool_result()),
            Err(e) => Err(
                match (&e as &dyn std::any::Any).downcast_ref::<ToolError>() {
                    Some(tool_error) => tool_error.clone(),
                    None => ToolError::new(e.to_string()),
                },
            ),
        }
    }

    fn return_schema() -> Option<Value> {
        R::return_schema()
    }
}

/// A typed result, sent to the model as JSON text; its type becomes the tool's return schema
/// (listed by `GET /api/tools`).
#[derive(Debug, Clone, PartialEq)]
pub struct Json<T>(pub T);

impl<T: Serialize + JsonSchema> IntoToolResult for Json<T> {
    fn into_tool_result(self) -> CallToolResult {
        CallToolResult::json(&self.0)
    }

    fn return_schema() -> Option<Value> {
        Some(schema_for::<T>())
    }
}

/// The arguments of a tool that takes none: `{}` (unknown fields are refused).
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

pub(crate) type RunFn = Rc<dyn Fn(FlowState, Box<dyn Any>) -> BoxFuture<'static, Outcome>>;

/// What the registry knows about a tool's argument type.
#[derive(Clone)]
pub(crate) struct ArgsSpec {
    pub(crate) type_id: TypeId,
    pub(crate) type_name: &'static str,
    pub(crate) schema: Value,
    pub(crate) parse: fn(Value) -> Result<Box<dyn Any>, String>,
}

impl ArgsSpec {
    /// No arguments: `{}` only, described as such (not by `NoArgs`'s own doc comment).
    pub(crate) fn none() -> Self {
        ArgsSpec {
            schema: serde_json::json!({ "type": "object", "properties": {}, "additionalProperties": false }),
            ..Self::of::<NoArgs>()
        }
    }

    pub(crate) fn of<T: DeserializeOwned + JsonSchema + 'static>() -> Self {
        ArgsSpec {
            type_id: TypeId::of::<T>(),
            type_name: std::any::type_name::<T>(),
            schema: schema_for::<T>(),
            parse: parse_boxed::<T>,
        }
    }
}

fn parse_boxed<T: DeserializeOwned + 'static>(value: Value) -> Result<Box<dyn Any>, String> {
    parse_args::<T>(value).map(|t| Box::new(t) as Box<dyn Any>)
}

/// A handler with its types erased, so tools of every shape live in one registry.
pub struct HandlerParts {
    pub(crate) args: ArgsSpec,
    pub(crate) returns: Option<Value>,
    pub(crate) run: RunFn,
}

/// Implemented for async functions that can serve as tool handlers (see the module docs).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a tool handler",
    note = "a handler is `async fn(FlowState) -> R` or `async fn(FlowState, Args) -> R`, where `Args: Deserialize + JsonSchema` and `R` is `CallToolResult`, `Json<T>`, `String` or a `Result` of one of them with an error that implements `Display`"
)]
pub trait Handler<M>: 'static {
    /// Erases the handler's types.
    fn into_parts(self) -> HandlerParts;
}

impl<F, Fut, R> Handler<(FlowState,)> for F
where
    F: Fn(FlowState) -> Fut + 'static,
    Fut: Future<Output = R> + 'static,
    R: IntoToolResult,
{
    fn into_parts(self) -> HandlerParts {
        HandlerParts {
            args: ArgsSpec::none(),
            returns: R::return_schema(),
            run: Rc::new(move |flow, _args| {
                let fut = (self)(flow);
                Box::pin(async move { fut.await.into_outcome() })
            }),
        }
    }
}

impl<F, Fut, R, T> Handler<(FlowState, T)> for F
where
    F: Fn(FlowState, T) -> Fut + 'static,
    Fut: Future<Output = R> + 'static,
    R: IntoToolResult,
    T: DeserializeOwned + JsonSchema + 'static,
{
    fn into_parts(self) -> HandlerParts {
        HandlerParts {
            args: ArgsSpec::of::<T>(),
            returns: R::return_schema(),
            run: Rc::new(move |flow, args| match args.downcast::<T>() {
                Ok(args) => {
                    let fut = (self)(flow, *args);
                    Box::pin(async move { fut.await.into_outcome() })
                }
                // Unreachable through `Tool::call`, which parses with this same type.
                Err(_) => Box::pin(async {
                    Err(ToolError::fatal(
                        "internal error: arguments of the wrong type",
                    ))
                }),
            }),
        }
    }
}
