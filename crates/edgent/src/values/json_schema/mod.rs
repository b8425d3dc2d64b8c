//! JSON Schema for values a model writes as a whole (a prompt's `response_format`): the subset
//! edgent checks, the check of a schema itself, and whether OpenAI's strict mode takes it.
//!
//! Tool arguments need none of this: their schema comes from a Rust type, and deserialising
//! into that type is the check (`values::validate`). An answer's schema may be written by hand
//! in a prompt, so it is checked here, keyword by keyword. Only the keywords below are taken;
//! a schema using any other is refused when the prompt is written, so no rule in a schema is
//! silently left unchecked. (A crate validating all of JSON Schema would bring a regex engine
//! and several times this file's code into the Worker.)
//!
//! - checked: `type` (one name or a list), `properties`, `required`, `additionalProperties`
//!   (a boolean or a schema), `items` (one schema), `enum`, `const`, `anyOf`, `oneOf`,
//!   `allOf`, `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`, `minLength`,
//!   `maxLength`, `minItems`, `maxItems`, `uniqueItems`;
//! - read and ignored (annotations): `title`, `description`, `default`, `examples`,
//!   `format`, `$schema`, `$comment`, `deprecated`, `readOnly`, `writeOnly`;
//! - refused: everything else (`$ref` and `$defs`, `pattern`, `not`, `if`, tuples, …).

use std::collections::HashSet;

use serde_json::Value;

use crate::values::invalid::Invalid;

mod value;
pub use value::validate;

/// Largest schema, as JSON text: it travels with every model request of the prompt.
pub const MAX_SCHEMA_BYTES: usize = 16 * 1024;
/// Deepest nesting of subschemas (the root is level 1): validation recurses once per level.
pub const MAX_SCHEMA_DEPTH: usize = 16;
/// Errors reported for one value: enough for a model to fix its answer, short enough to read.
const MAX_ERRORS: usize = 8;

/// Keywords that constrain a value.
const CHECKED: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "anyOf",
    "oneOf",
    "allOf",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "uniqueItems",
];
/// Keywords that describe and constrain nothing.
const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "default",
    "examples",
    "format",
    "$schema",
    "$comment",
    "deprecated",
    "readOnly",
    "writeOnly",
];
const TYPES: &[&str] = &[
    "object", "array", "string", "number", "integer", "boolean", "null",
];

/// Checks that `schema` is an object schema (`"type": "object"` at the top, what both a JSON
/// answer format and a tool's input take), uses only the keywords above with values of the
/// right shape, and stays within [`MAX_SCHEMA_BYTES`] and [`MAX_SCHEMA_DEPTH`].
pub fn check_schema(schema: &Value) -> Result<(), Invalid> {
    let size = schema.to_string().len();
    if size > MAX_SCHEMA_BYTES {
        return Err(format!(
            "the schema is {size} bytes of JSON; at most {MAX_SCHEMA_BYTES} are allowed"
        )
        .into());
    }
    if schema.get("type") != Some(&Value::from("object")) {
        return Err(
            "the schema must describe a JSON object (\"type\": \"object\" at the top); wrap \
             other values in a property"
                .into(),
        );
    }
    check_node(schema, "", 1)
}

fn check_node(schema: &Value, path: &str, depth: usize) -> Result<(), Invalid> {
    let at = |why: String| Invalid::new(format!("{}{why}", place(path)));
    if depth > MAX_SCHEMA_DEPTH {
        return Err(at(format!(
            "subschemas nest more than {MAX_SCHEMA_DEPTH} levels deep"
        )));
    }
    let map = match schema {
        Value::Object(map) => map,
        // `true` takes any value, `false` none.
        Value::Bool(_) => return Ok(()),
        _ => return Err(at("a schema must be an object or a boolean".into())),
    };
    for (key, value) in map {
        let child = |segment: &str| join(path, segment);
        match key.as_str() {
            "type" => {
                let names: Vec<&Value> = match value {
                    Value::Array(list) if !list.is_empty() => list.iter().collect(),
                    single => vec![single],
                };
                if !names
                    .iter()
                    .all(|n| n.as_str().is_some_and(|n| TYPES.contains(&n)))
                {
                    return Err(at(format!(
                        "`type` must be one of {} or a list of them",
                        TYPES.join(", ")
                    )));
                }
            }
            "properties" => {
                let Value::Object(props) = value else {
                    return Err(at("`properties` must be an object of schemas".into()));
                };
                for (name, sub) in props {
                    check_node(sub, &child(name), depth + 1)?;
                }
            }
            "required" => {
                if !value
                    .as_array()
                    .is_some_and(|names| names.iter().all(Value::is_string))
                {
                    return Err(at("`required` must be a list of property names".into()));
                }
            }
            "additionalProperties" => check_node(value, &child("*"), depth + 1)?,
            "items" => {
                if value.is_array() {
                    return Err(at(
                        "`items` must be one schema (tuples are not supported)".into()
                    ));
                }
                check_node(value, &child("[]"), depth + 1)?;
            }
            "enum" => {
                if value.as_array().is_none_or(|list| list.is_empty()) {
                    return Err(at("`enum` must be a non-empty list".into()));
                }
            }
            "anyOf" | "oneOf" | "allOf" => {
                let Some(branches) = value.as_array().filter(|b| !b.is_empty()) else {
                    return Err(at(format!("`{key}` must be a non-empty list of schemas")));
                };
                for sub in branches {
                    check_node(sub, path, depth + 1)?;
                }
            }
            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => {
                if !value.is_number() {
                    return Err(at(format!("`{key}` must be a number")));
                }
            }
            "minLength" | "maxLength" | "minItems" | "maxItems" => {
                if !value.is_u64() {
                    return Err(at(format!("`{key}` must be a whole number, 0 or more")));
                }
            }
            "uniqueItems" => {
                if !value.is_boolean() {
                    return Err(at("`uniqueItems` must be true or false".into()));
                }
            }
            k if ANNOTATIONS.contains(&k) || k == "const" => {}
            other => {
                return Err(at(format!(
                    "`{other}` is not supported (checked keywords: {}; annotations: {})",
                    CHECKED.join(", "),
                    ANNOTATIONS.join(", ")
                )))
            }
        }
    }
    Ok(())
}

/// Where a problem is, as the start of a sentence.
fn place(path: &str) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!("at `{path}`: ")
    }
}

/// `path` and one more step (`items`, `[0]`, `*`), as errors name a place: `items[0].sku`.
pub(crate) fn join(path: &str, segment: &str) -> String {
    if path.is_empty() {
        segment.to_owned()
    } else if segment.starts_with('[') {
        format!("{path}{segment}")
    } else {
        format!("{path}.{segment}")
    }
}

/// Whether `schema`'s `type` is `ty` or a list holding it.
pub(crate) fn has_type(schema: &Value, ty: &str) -> bool {
    match schema.get("type") {
        Some(Value::String(t)) => t == ty,
        Some(Value::Array(ts)) => ts.iter().any(|t| t == ty),
        _ => false,
    }
}

/// Whether OpenAI's strict structured outputs take `schema` as it is: every object closed
/// (`additionalProperties: false`) with every property required, every place typed, and no
/// `oneOf` or `allOf`. Another schema is sent without `strict` (the model is then asked, not
/// constrained, and edgent's check stays the guarantee).
pub fn strict_compatible(schema: &Value) -> bool {
    let Value::Object(map) = schema else {
        return false;
    };
    if map.contains_key("oneOf") || map.contains_key("allOf") {
        return false;
    }
    if let Some(Value::Array(branches)) = map.get("anyOf") {
        return branches.iter().all(strict_compatible);
    }
    if !(map.contains_key("type") || map.contains_key("enum") || map.contains_key("const")) {
        return false;
    }
    if has_type(schema, "object") || map.contains_key("properties") {
        let properties = map
            .get("properties")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let required: HashSet<&str> = map
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let closed = map.get("additionalProperties") == Some(&Value::Bool(false));
        if !closed
            || properties.len() != required.len()
            || !properties.keys().all(|k| required.contains(k.as_str()))
            || !properties.values().all(strict_compatible)
        {
            return false;
        }
    }
    map.get("items").is_none_or(strict_compatible)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Map};

    fn order() -> Value {
        json!({
            "type": "object",
            "description": "An order.",
            "properties": {
                "sku": { "type": "string", "minLength": 2 },
                "quantity": { "type": "integer", "minimum": 1, "format": "uint32" },
                "size": { "enum": ["s", "m", "l"] },
                "note": { "type": ["string", "null"] },
                "lines": {
                    "type": "array",
                    "maxItems": 2,
                    "items": {
                        "type": "object",
                        "properties": { "n": { "type": "number", "exclusiveMaximum": 10 } },
                        "required": ["n"],
                        "additionalProperties": false
                    }
                }
            },
            "required": ["sku", "quantity"],
            "additionalProperties": false
        })
    }

    #[test]
    fn a_fitting_value_has_no_errors() {
        check_schema(&order()).unwrap();
        let good = json!({ "sku": "ab", "quantity": 2, "size": "m", "note": null, "lines": [{ "n": 9.5 }] });
        assert_eq!(validate(&order(), &good), Vec::<String>::new());
        assert_eq!(
            validate(&order(), &json!({ "sku": "ab", "quantity": 2.0 })),
            Vec::<String>::new()
        );
    }

    #[test]
    fn every_problem_names_its_place() {
        let bad = json!({
            "quantity": 0, "size": "xl", "note": 5, "colour": "red",
            "lines": [{ "n": 10 }, { "m": 1 }, { "n": 1 }]
        });
        assert_eq!(
            validate(&order(), &bad),
            [
                "the answer is missing the required property `sku`",
                "at `colour`: this property is not allowed",
                "at `lines`: should have at most 2 items, not 3",
                "at `lines[0].n`: should be less than 10",
                "at `lines[1]`: is missing the required property `n`",
                "at `lines[1].m`: this property is not allowed",
                "at `note`: should be a string or null, not an integer",
                "at `quantity`: should be at least 1",
            ]
        );
        assert_eq!(
            validate(&order(), &json!("an order")),
            ["the answer should be an object, not a string"]
        );
        assert_eq!(
            validate(
                &order(),
                &json!({ "sku": "a", "quantity": 1.5, "size": "xl" })
            ),
            [
                "at `quantity`: should be an integer, not a number",
                "at `size`: should be one of [\"s\",\"m\",\"l\"]",
                "at `sku`: should have at least 2 characters, not 1",
            ]
        );
    }

    #[test]
    fn branches_say_how_close_the_value_came() {
        let schema = json!({ "type": "object", "properties": { "v": {
            "oneOf": [{ "type": "string" }, { "type": "integer", "maximum": 3 }, { "const": 2 }]
        }}});
        assert!(validate(&schema, &json!({ "v": "x" })).is_empty());
        assert_eq!(
            validate(&schema, &json!({ "v": 2 })),
            ["at `v`: matches 2 of the allowed shapes, and must match exactly one"]
        );
        assert_eq!(
            validate(&schema, &json!({ "v": 7 })),
            ["at `v`: matches none of the 3 allowed shapes (the closest: at `v`: should be a string, not an integer)"]
        );
        let all =
            json!({ "type": "object", "allOf": [{ "required": ["a"] }, { "required": ["b"] }] });
        assert_eq!(validate(&all, &json!({ "a": 1 })).len(), 1);
        let unique = json!({ "type": "object", "properties": { "t": { "type": "array", "uniqueItems": true } } });
        assert_eq!(
            validate(&unique, &json!({ "t": [1, 2, 1] })),
            ["at `t`: should not repeat an item"]
        );
        let none = json!({ "type": "object", "additionalProperties": { "type": "boolean" } });
        assert_eq!(
            validate(&none, &json!({ "ok": true, "no": 1 })),
            ["at `no`: should be a boolean, not an integer"]
        );
    }

    #[test]
    fn errors_stop_at_a_readable_number() {
        let schema = json!({ "type": "object", "additionalProperties": false });
        let many: Map<String, Value> = (0..50).map(|i| (format!("k{i}"), json!(i))).collect();
        assert_eq!(validate(&schema, &Value::Object(many)).len(), MAX_ERRORS);
    }

    #[test]
    fn schemas_outside_the_subset_are_refused_with_the_keyword() {
        let refused = |schema: Value| check_schema(&schema).unwrap_err().to_string();
        assert!(refused(json!({ "type": "string" })).contains("\"type\": \"object\""));
        assert!(refused(json!({ "properties": {} })).contains("\"type\": \"object\""));
        assert!(refused(json!({ "type": "object", "properties": { "a": { "type": "string", "pattern": "^a" } } }))
            .starts_with("at `a`: `pattern` is not supported"));
        assert!(refused(json!({ "type": "object", "$defs": {} }))
            .starts_with("`$defs` is not supported"));
        assert!(
            refused(json!({ "type": "object", "properties": { "a": { "type": "text" } } }))
                .contains("`type` must be one of")
        );
        assert!(refused(
            json!({ "type": "object", "properties": { "a": { "type": "array", "items": [] } } })
        )
        .contains("tuples are not supported"));
        assert!(refused(json!({ "type": "object", "required": "a" })).contains("`required`"));
        assert!(
            refused(json!({ "type": "object", "properties": { "a": 5 } }))
                .contains("at `a`: a schema must be")
        );
        assert!(
            refused(json!({ "type": "object", "properties": { "a": { "maxLength": -1 } } }))
                .contains("whole number")
        );
        let big = json!({ "type": "object", "description": "x".repeat(MAX_SCHEMA_BYTES) });
        assert!(refused(big).contains("bytes of JSON"));
        let mut deep = json!({ "type": "object" });
        for _ in 0..MAX_SCHEMA_DEPTH {
            deep = json!({ "type": "object", "properties": { "a": deep } });
        }
        assert!(refused(deep).contains("nest more than"));
    }

    #[test]
    fn strict_mode_is_used_only_for_closed_fully_required_objects() {
        assert!(!strict_compatible(&order()), "optional properties");
        let closed = json!({
            "type": "object",
            "properties": {
                "a": { "type": "string" },
                "b": { "type": "array", "items": { "anyOf": [{ "type": "string" }, { "type": "null" }] } }
            },
            "required": ["a", "b"],
            "additionalProperties": false
        });
        assert!(strict_compatible(&closed));
        let mut open = closed.clone();
        open["properties"]["b"]["items"] = json!({ "type": "object" });
        assert!(
            !strict_compatible(&open),
            "a nested object that is not closed"
        );
        let mut untyped = closed;
        untyped["properties"]["a"] = json!({ "description": "anything" });
        assert!(!strict_compatible(&untyped));
    }
}
