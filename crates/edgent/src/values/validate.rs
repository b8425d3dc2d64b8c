//! Turning the model's raw argument text into a typed value, with errors a model can act on.
//!
//! The argument type is the schema (both come from the same Rust type), so deserialising it
//! is checking against the schema. `serde_path_to_error` adds where the problem is, which is
//! what a model needs to fix its call.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::values::invalid::Invalid;

/// Parses the raw argument text the model sent. Empty text means `{}` (some models send
/// nothing for a tool without parameters).
pub fn parse_json(raw: &str) -> Result<Value, Invalid> {
    if raw.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    serde_json::from_str(raw).map_err(|e| {
        Invalid::new(format!(
            "the arguments are not valid JSON ({e}); send one JSON object"
        ))
    })
}

/// Deserialises `value` into `T`, naming the offending field on failure.
pub fn parse_args<T: DeserializeOwned>(value: Value) -> Result<T, Invalid> {
    if !value.is_object() {
        return Err(format!("the arguments must be a JSON object, not {}", kind(&value)).into());
    }
    serde_path_to_error::deserialize::<_, T>(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        Invalid::new(if path == "." || path.is_empty() {
            inner
        } else {
            format!("at `{path}`: {inner}")
        })
    })
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
