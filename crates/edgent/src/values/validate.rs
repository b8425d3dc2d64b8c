//! Turning the model's raw argument text into a typed value, with errors a model can act on.
//!
//! The argument type is the schema (both come from the same Rust type), so deserialising it
//! is checking against the schema. The error says where the problem is (``at
//! `items[0].quantity` ``), which is what a model needs to fix its call: the value is
//! deserialised from its pretty-printed text, one field per line, and the line of the error
//! names the field. (A path-tracking deserializer wrapper did this before; instantiated for
//! every argument type, it was a twentieth of the Worker's code.)

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
    // Only the `from_str` call depends on `T`: the rest lives in plain functions, so it is not
    // copied into every argument type's instance (17 of them in the example app).
    let text = pretty_object(&value)?;
    serde_json::from_str::<T>(&text).map_err(|e| error_at(&text, &e))
}

/// The arguments' pretty-printed text, which [`error_at`] reads the failing field's path from.
fn pretty_object(value: &Value) -> Result<String, Invalid> {
    if !value.is_object() {
        return Err(format!("the arguments must be a JSON object, not {}", kind(value)).into());
    }
    Ok(serde_json::to_string_pretty(value).unwrap_or_default())
}

/// Serde's error for `text`, its position replaced by the path of the field it points at.
fn error_at(text: &str, e: &serde_json::Error) -> Invalid {
    let position = format!(" at line {} column {}", e.line(), e.column());
    let full = e.to_string();
    let inner = full.strip_suffix(&position).unwrap_or(&full);
    let path = path_at(text, e.line());
    Invalid::new(if path.is_empty() {
        inner.to_owned()
    } else {
        format!("at `{path}`: {inner}")
    })
}

/// The path (`items[0].quantity`) of what line `line` (1-based) of a pretty-printed JSON
/// value holds: the field or element on it, or the object or array it closes.
fn path_at(text: &str, line: usize) -> String {
    /// An open object or array: how it was reached, and for an array its next index.
    struct Open {
        reached_by: Option<String>,
        next_index: Option<usize>,
    }
    let join = |stack: &[Open], last: Option<&String>| {
        let mut path = String::new();
        for seg in stack
            .iter()
            .filter_map(|o| o.reached_by.as_ref())
            .chain(last)
        {
            if !path.is_empty() && !seg.starts_with('[') {
                path.push('.');
            }
            path.push_str(seg);
        }
        path
    };
    let mut stack: Vec<Open> = Vec::new();
    for (i, raw) in text.lines().enumerate().take(line) {
        let is_last = i + 1 == line;
        let t = raw.trim();
        if t.starts_with('}') || t.starts_with(']') {
            if is_last {
                return join(&stack, None);
            }
            stack.pop();
            continue;
        }
        let (seg, rest) = match stack.last_mut() {
            Some(Open {
                next_index: Some(n),
                ..
            }) => {
                *n += 1;
                (Some(format!("[{}]", *n - 1)), t)
            }
            Some(_) => match key_of(t) {
                Some((key, rest)) => (Some(key), rest),
                None => (None, t),
            },
            None => (None, t),
        };
        let opens = (rest.starts_with('{') && !rest.starts_with("{}"))
            || (rest.starts_with('[') && !rest.starts_with("[]"));
        if is_last && !opens {
            return join(&stack, seg.as_ref());
        }
        if opens {
            stack.push(Open {
                reached_by: seg,
                next_index: rest.starts_with('[').then_some(0),
            });
            if is_last {
                return join(&stack, None);
            }
        }
    }
    join(&stack, None)
}

/// The key a pretty-printed object line starts with, and the rest after its colon.
fn key_of(line: &str) -> Option<(String, &str)> {
    let bytes = line.as_bytes();
    if bytes.first() != Some(&b'"') {
        return None;
    }
    let mut i = 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => break,
            _ => i += 1,
        }
    }
    let key: String = serde_json::from_str(line.get(..=i)?).ok()?;
    let rest = line
        .get(i + 1..)?
        .trim_start()
        .strip_prefix(':')?
        .trim_start();
    Some((key, rest))
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Order {
        items: Vec<Line>,
        to: String,
        #[serde(default)]
        notes: Vec<String>,
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Line {
        sku: String,
        quantity: u32,
        #[serde(default)]
        tags: Vec<String>,
    }

    fn error(v: Value) -> String {
        parse_args::<Order>(v).unwrap_err().to_string()
    }

    #[test]
    fn errors_name_the_field_as_a_path() {
        let bad_quantity = json!({ "items": [{ "sku": "a", "quantity": 1 }, { "sku": "b", "quantity": "two" }], "to": "x" });
        assert_eq!(
            error(bad_quantity),
            "at `items[1].quantity`: invalid type: string \"two\", expected u32"
        );
        let missing = json!({ "items": [{ "tags": [], "quantity": 1 }], "to": "x" });
        assert_eq!(error(missing), "at `items[0]`: missing field `sku`");
        let at_root = json!({ "items": [] });
        assert_eq!(error(at_root), "missing field `to`");
        let unknown = json!({ "items": [], "to": "x", "colour": "red" });
        assert!(error(unknown).starts_with("at `colour`: unknown field `colour`"));
        let nested = json!({ "items": [], "to": "x", "notes": ["ok", 5] });
        assert_eq!(
            error(nested),
            "at `notes[1]`: invalid type: integer `5`, expected a string"
        );
        let odd_key = json!({ "items": [{ "sku": "a", "quantity": 1, "tags": [{}] }], "to": "x" });
        assert!(error(odd_key).starts_with("at `items[0].tags[0]`: invalid type: map"));
        assert!(parse_args::<Order>(
            json!({ "items": [{ "sku": "a", "quantity": 2 }], "to": "x" })
        )
        .is_ok());
    }

    #[test]
    fn keys_with_quotes_and_colons_are_read_whole() {
        let text = "{\n  \"a\\\":b\": {\n    \"c\": 1\n  }\n}";
        assert_eq!(path_at(text, 3), "a\":b.c");
    }
}
