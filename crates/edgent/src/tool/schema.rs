//! JSON Schemas for tool arguments and returns, generated from Rust types by schemars.
//!
//! Schemas are draft-07 with every subschema inlined, because that is what every provider
//! accepts in a function definition. A schema that cannot be inlined (a recursive type) or
//! that nests deeper than [`MAX_DEPTH`] is refused when the registry is built, so a tool a
//! model could never call correctly never ships.

use schemars::generate::{SchemaGenerator, SchemaSettings};
use schemars::{JsonSchema, Schema};
use serde_json::{Map, Value};

use crate::values::json_schema::{has_type, join};

/// Deepest nesting of objects and arrays allowed in an argument schema (the arguments object
/// itself is level 1).
pub const MAX_DEPTH: usize = 7;

/// Whether this build takes its schemas from the app's export (the `prebuilt-schemas`
/// feature): then [`schema_for`] answers [`Value::Null`], a placeholder the registry replaces
/// with the schema the host wrote for the same tool or output type.
pub const PREBUILT: bool = cfg!(feature = "prebuilt-schemas");

/// The schema of `T`, ready to send to a model: inlined, without `$schema` or `title`, and
/// with `true` ("anything") written as `{}`. With `prebuilt-schemas`, [`Value::Null`]: the
/// placeholder the registry fills from the app's export; the generation below is then never
/// reached, so neither schemars' generator nor any type's `JsonSchema` impl is linked.
pub fn schema_for<T: JsonSchema + ?Sized>() -> Value {
    if PREBUILT {
        return Value::Null;
    }
    // Only the generation is generic: the settings and the clean-up are plain functions, not
    // copied into each tool's argument and return type (two instances per tool).
    finish(generator().into_root_schema_for::<T>())
}

/// Draft-07, every subschema inlined, no `$schema`.
fn generator() -> SchemaGenerator {
    SchemaSettings::draft07()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator()
}

/// The generated schema without its `title`, normalised.
fn finish(schema: Schema) -> Value {
    let mut value = schema.to_value();
    if let Value::Object(map) = &mut value {
        map.remove("title");
    }
    normalise(&mut value);
    value
}

/// Replaces boolean `true` subschemas by `{}`: both mean "any value", but some providers only
/// accept objects.
fn normalise(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                let holds_schema = matches!(
                    key.as_str(),
                    "items" | "additionalProperties" | "not" | "if" | "then" | "else"
                );
                if holds_schema && *child == Value::Bool(true) {
                    *child = Value::Object(Map::new());
                } else if key == "properties" {
                    if let Value::Object(props) = child {
                        for prop in props.values_mut() {
                            if *prop == Value::Bool(true) {
                                *prop = Value::Object(Map::new());
                            }
                            normalise(prop);
                        }
                    }
                } else if key != "enum" && key != "const" && key != "default" && key != "examples" {
                    normalise(child);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(normalise),
        _ => {}
    }
}

/// Why an argument schema cannot be offered to a model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemaProblem {
    /// The arguments are not a JSON object (a struct).
    NotAnObject,
    /// Nesting deeper than [`MAX_DEPTH`] at this path.
    TooDeep {
        /// Where the limit is crossed, e.g. `order.items[].options`.
        path: String,
        /// The depth reached there.
        depth: usize,
    },
    /// A recursive type: its depth is unbounded.
    Recursive {
        /// Where the recursion starts.
        path: String,
    },
}

impl std::fmt::Display for SchemaProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SchemaProblem::NotAnObject => f.write_str(
                "the argument type must be a struct (a JSON object); wrap enums and single values in a field",
            ),
            SchemaProblem::TooDeep { path, depth } => write!(
                f,
                "arguments nest {depth} levels deep at `{path}`; at most {MAX_DEPTH} levels are allowed (flatten the type)"
            ),
            SchemaProblem::Recursive { path } => write!(
                f,
                "`{path}` is a recursive type; tool arguments must have a bounded depth of at most {MAX_DEPTH}"
            ),
        }
    }
}

/// Checks that `schema` describes an object nesting at most [`MAX_DEPTH`] levels.
pub fn check_arguments(schema: &Value) -> Result<(), SchemaProblem> {
    if !has_type(schema, "object") {
        return Err(SchemaProblem::NotAnObject);
    }
    walk(schema, "", 0)
}

fn walk(schema: &Value, path: &str, depth: usize) -> Result<(), SchemaProblem> {
    let Value::Object(map) = schema else {
        return Ok(());
    };
    if map.contains_key("$ref") {
        return Err(SchemaProblem::Recursive {
            path: if path.is_empty() {
                "(arguments)".into()
            } else {
                path.to_owned()
            },
        });
    }
    let container = has_type(schema, "object")
        || has_type(schema, "array")
        || map.contains_key("properties")
        || map.contains_key("items");
    let depth = depth + usize::from(container);
    if depth > MAX_DEPTH {
        return Err(SchemaProblem::TooDeep {
            path: if path.is_empty() {
                "(arguments)".into()
            } else {
                path.to_owned()
            },
            depth,
        });
    }
    if let Some(Value::Object(props)) = map.get("properties") {
        for (name, sub) in props {
            walk(sub, &join(path, name), depth)?;
        }
    }
    match map.get("items") {
        Some(Value::Array(tuple)) => {
            for (i, sub) in tuple.iter().enumerate() {
                walk(sub, &join(path, &format!("[{i}]")), depth)?;
            }
        }
        Some(sub) => walk(sub, &join(path, "[]"), depth)?,
        None => {}
    }
    if let Some(sub) = map.get("additionalProperties") {
        walk(sub, &join(path, "*"), depth)?;
    }
    // Union branches describe the same value, so they sit at the same depth.
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(branches)) = map.get(key) {
            for sub in branches {
                walk(sub, path, depth - usize::from(container))?;
            }
        }
    }
    Ok(())
}
