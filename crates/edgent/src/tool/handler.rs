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
use serde_json::{Map, Value};

use super::schema::schema_for;
use super::validate::parse_args;
use super::{BoxFuture, CallToolResult, FlowState, ToolError};
use crate::values::Invalid;

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
    pub(crate) schema: Rc<Value>,
    pub(crate) parse: fn(Value) -> Result<Box<dyn Any>, Invalid>,
}

impl ArgsSpec {
    /// No arguments: `{}` only, described as such (not by `NoArgs`'s own doc comment).
    pub(crate) fn none() -> Self {
        ArgsSpec {
            schema: Rc::new(
                serde_json::json!({ "type": "object", "properties": {}, "additionalProperties": false }),
            ),
            ..Self::of::<NoArgs>()
        }
    }

    /// Arguments described by a JSON Schema alone, with no Rust type (TOML workflows): any
    /// JSON object parses, as a `Map`; [`check_schema`] (run as a refine rule) holds it to
    /// the schema.
    pub(crate) fn schema_only(schema: Value) -> Self {
        ArgsSpec {
            schema: Rc::new(schema),
            ..Self::of::<Map<String, Value>>()
        }
    }

    pub(crate) fn of<T: DeserializeOwned + JsonSchema + 'static>() -> Self {
        ArgsSpec {
            type_id: TypeId::of::<T>(),
            type_name: std::any::type_name::<T>(),
            schema: Rc::new(schema_for::<T>()),
            parse: parse_boxed::<T>,
        }
    }
}

/// Checks an arguments object against the top level of its JSON Schema: `required` keys,
/// `additionalProperties = false`, and each given property's `type` (one or a list of
/// `string`, `number`, `integer`, `boolean`, `array`, `object`, `null`) and `enum`. Nested
/// values are not checked: the tools they are passed on to check their own arguments. The
/// errors read like serde's, which typed tools report.
pub(crate) fn check_schema(schema: &Value, args: &Map<String, Value>) -> Result<(), Invalid> {
    let empty = Map::new();
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let required = schema.get("required").and_then(Value::as_array);
    for key in required.into_iter().flatten().filter_map(Value::as_str) {
        if !args.contains_key(key) {
            return Err(format!("missing field `{key}`").into());
        }
    }
    if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
        if let Some(extra) = args.keys().find(|k| !properties.contains_key(*k)) {
            let expected = match properties
                .keys()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
            {
                keys if keys.is_empty() => "there are no fields".to_owned(),
                keys => format!("expected one of {}", keys.join(", ")),
            };
            return Err(format!("unknown field `{extra}`, {expected}").into());
        }
    }
    for (key, value) in args {
        let Some(property) = properties.get(key) else {
            continue;
        };
        let types: Vec<&str> = match property.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !types.is_empty() && !types.iter().any(|t| has_type(value, t)) {
            let expected: Vec<&str> = types.iter().map(|t| a_type(t)).collect();
            return Err(format!(
                "at `{key}`: invalid type: {}, expected {}",
                describe(value),
                expected.join(" or ")
            )
            .into());
        }
        if let Some(allowed) = property.get("enum").and_then(Value::as_array) {
            if !allowed.contains(value) {
                let shown = |v: &Value| match v {
                    Value::String(s) => format!("`{s}`"),
                    other => other.to_string(),
                };
                let allowed: Vec<String> = allowed.iter().map(shown).collect();
                return Err(format!(
                    "at `{key}`: unknown variant {}, expected one of {}",
                    shown(value),
                    allowed.join(", ")
                )
                .into());
            }
        }
    }
    Ok(())
}

/// Whether `value` is of JSON Schema type `name` (an integer is a number without a
/// fractional part, `2.0` included).
fn has_type(value: &Value, name: &str) -> bool {
    match name {
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => value.as_f64().is_some_and(|n| n.fract() == 0.0),
        "boolean" => value.is_boolean(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        "null" => value.is_null(),
        _ => true, // not a type this check knows: leave it to the tool
    }
}

fn a_type(name: &str) -> &str {
    match name {
        "string" => "a string",
        "number" => "a number",
        "integer" => "an integer",
        "boolean" => "a boolean",
        "array" => "an array",
        "object" => "an object",
        other => other,
    }
}

/// A value as serde names it in "invalid type" errors.
fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("boolean `{b}`"),
        Value::Number(n) if n.is_f64() => format!("floating point `{n}`"),
        Value::Number(n) => format!("integer `{n}`"),
        Value::String(s) => format!("string {s:?}"),
        Value::Array(_) => "sequence".to_owned(),
        Value::Object(_) => "map".to_owned(),
    }
}

fn parse_boxed<T: DeserializeOwned + 'static>(value: Value) -> Result<Box<dyn Any>, Invalid> {
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
