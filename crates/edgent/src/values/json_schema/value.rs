//! Checking a value against a schema that passed [`super::check_schema`]: every keyword of
//! the subset, each problem naming its place.

use serde_json::{Map, Value};

use super::*;

/// Checks `value` against `schema` (one that passed [`check_schema`]): the problems found,
/// each naming where it is (``at `items[0].sku`: …``), at most a handful; empty when it fits.
pub fn validate(schema: &Value, value: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    check_value(schema, value, "", &mut errors);
    errors
}

fn check_value(schema: &Value, value: &Value, path: &str, out: &mut Vec<String>) {
    if out.len() >= MAX_ERRORS {
        return;
    }
    let mut fail = |why: String| {
        if out.len() < MAX_ERRORS {
            out.push(if path.is_empty() {
                format!("the answer {why}")
            } else {
                format!("at `{path}`: {why}")
            });
        }
    };
    let map = match schema {
        Value::Object(map) => map,
        Value::Bool(true) => return,
        _ => return fail("is not allowed here (the schema allows no value)".into()),
    };
    if let Some(wanted) = map.get("type") {
        if !type_matches(wanted, value) {
            // Nothing else at this place can hold for a value of the wrong type.
            return fail(format!(
                "should be {}, not {}",
                type_names(wanted),
                kind(value)
            ));
        }
    }
    if let Some(Value::Array(allowed)) = map.get("enum") {
        if !allowed.contains(value) {
            fail(format!(
                "should be one of {}",
                short(&Value::from(allowed.clone()))
            ));
        }
    }
    if let Some(wanted) = map.get("const") {
        if wanted != value {
            fail(format!("should be {}", short(wanted)));
        }
    }
    match value {
        Value::Number(n) => check_number(map, n.as_f64().unwrap_or(f64::NAN), &mut fail),
        Value::String(s) => {
            let length = s.chars().count() as u64;
            if let Some(min) = map.get("minLength").and_then(Value::as_u64) {
                if length < min {
                    fail(format!(
                        "should have at least {min} characters, not {length}"
                    ));
                }
            }
            if let Some(max) = map.get("maxLength").and_then(Value::as_u64) {
                if length > max {
                    fail(format!(
                        "should have at most {max} characters, not {length}"
                    ));
                }
            }
        }
        Value::Array(items) => {
            let count = items.len() as u64;
            if let Some(min) = map.get("minItems").and_then(Value::as_u64) {
                if count < min {
                    fail(format!("should have at least {min} items, not {count}"));
                }
            }
            if let Some(max) = map.get("maxItems").and_then(Value::as_u64) {
                if count > max {
                    fail(format!("should have at most {max} items, not {count}"));
                }
            }
            if map.get("uniqueItems") == Some(&Value::Bool(true)) {
                let mut seen = HashSet::new();
                if !items.iter().all(|item| seen.insert(item.to_string())) {
                    fail("should not repeat an item".into());
                }
            }
        }
        _ => {}
    }
    // The branches and the members are checked at their own places; `fail` has done its part.
    check_branches(map, value, path, out);
    match value {
        Value::Object(fields) => check_object(map, fields, path, out),
        Value::Array(items) => {
            if let Some(item_schema) = map.get("items") {
                for (i, item) in items.iter().enumerate() {
                    check_value(item_schema, item, &join(path, &format!("[{i}]")), out);
                }
            }
        }
        _ => {}
    }
}

fn check_number(map: &Map<String, Value>, n: f64, fail: &mut impl FnMut(String)) {
    let bound = |key: &str| map.get(key).and_then(Value::as_f64);
    if let Some(min) = bound("minimum").filter(|min| n < *min) {
        fail(format!("should be at least {min}"));
    }
    if let Some(max) = bound("maximum").filter(|max| n > *max) {
        fail(format!("should be at most {max}"));
    }
    if let Some(min) = bound("exclusiveMinimum").filter(|min| n <= *min) {
        fail(format!("should be more than {min}"));
    }
    if let Some(max) = bound("exclusiveMaximum").filter(|max| n >= *max) {
        fail(format!("should be less than {max}"));
    }
}

fn check_object(
    map: &Map<String, Value>,
    fields: &Map<String, Value>,
    path: &str,
    out: &mut Vec<String>,
) {
    if let Some(Value::Array(required)) = map.get("required") {
        for name in required.iter().filter_map(Value::as_str) {
            if !fields.contains_key(name) && out.len() < MAX_ERRORS {
                out.push(format!(
                    "{}is missing the required property `{name}`",
                    if path.is_empty() {
                        "the answer ".to_owned()
                    } else {
                        format!("at `{path}`: ")
                    }
                ));
            }
        }
    }
    let properties = map.get("properties").and_then(Value::as_object);
    for (name, field) in fields {
        let at = join(path, name);
        match (
            properties.and_then(|p| p.get(name)),
            map.get("additionalProperties"),
        ) {
            (Some(sub), _) => check_value(sub, field, &at, out),
            (None, Some(Value::Bool(false))) => {
                if out.len() < MAX_ERRORS {
                    out.push(format!("at `{at}`: this property is not allowed"));
                }
            }
            (None, Some(extra)) => check_value(extra, field, &at, out),
            (None, None) => {}
        }
    }
}

fn check_branches(map: &Map<String, Value>, value: &Value, path: &str, out: &mut Vec<String>) {
    if let Some(Value::Array(all)) = map.get("allOf") {
        for branch in all {
            check_value(branch, value, path, out);
        }
    }
    for (key, exactly_one) in [("anyOf", false), ("oneOf", true)] {
        let Some(Value::Array(branches)) = map.get(key) else {
            continue;
        };
        let outcomes: Vec<Vec<String>> = branches
            .iter()
            .map(|b| validate_at(b, value, path))
            .collect();
        let matching = outcomes.iter().filter(|e| e.is_empty()).count();
        let why = match matching {
            0 => {
                let closest = outcomes
                    .iter()
                    .min_by_key(|e| e.len())
                    .and_then(|e| e.first());
                format!(
                    "matches none of the {} allowed shapes{}",
                    branches.len(),
                    closest.map_or(String::new(), |e| format!(" (the closest: {e})"))
                )
            }
            n if exactly_one && n > 1 => {
                format!("matches {n} of the allowed shapes, and must match exactly one")
            }
            _ => continue,
        };
        if out.len() < MAX_ERRORS {
            out.push(if path.is_empty() {
                format!("the answer {why}")
            } else {
                format!("at `{path}`: {why}")
            });
        }
    }
}

fn validate_at(schema: &Value, value: &Value, path: &str) -> Vec<String> {
    let mut errors = Vec::new();
    check_value(schema, value, path, &mut errors);
    errors
}

fn type_matches(wanted: &Value, value: &Value) -> bool {
    let one = |name: &str| match name {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => value.as_f64().is_some_and(|f| f.fract() == 0.0),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        _ => false,
    };
    match wanted {
        Value::String(name) => one(name),
        Value::Array(names) => names.iter().filter_map(Value::as_str).any(one),
        _ => true,
    }
}

fn type_names(wanted: &Value) -> String {
    let article = |name: &str| match name {
        "object" | "array" | "integer" => format!("an {name}"),
        "null" => "null".to_owned(),
        other => format!("a {other}"),
    };
    match wanted {
        Value::String(name) => article(name),
        Value::Array(names) => names
            .iter()
            .filter_map(Value::as_str)
            .map(article)
            .collect::<Vec<_>>()
            .join(" or "),
        _ => "anything".to_owned(),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a number",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A value as JSON text, cut to a readable length.
fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.len() <= 120 {
        return text;
    }
    let mut end = 117;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}
