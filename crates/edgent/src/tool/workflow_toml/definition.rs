//! The TOML workflow format (`agents/workflows/<name>.toml`) and its references, as plain
//! data: no runtime, only serde, serde_json and [`Invalid`] for what breaks the format.
//! `edgent-build` reads it (through `build_support`) to parse and check each workflow, then
//! embeds it as JSON; the runtime reads that JSON back with the
//! same types, so the build checks exactly what runs. See `docs/toml-workflows.md`.
//!
//! A reference names a value by a root (`input`, `bindings`, or a step) and a path of object
//! keys or array indexes: `$a.temperature`, `${input.cities.0}`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::values::Invalid;

/// The root holding the workflow's arguments.
pub const INPUT: &str = "input";
/// The root holding the caller's runtime bindings (`flow.bindings`).
pub const BINDINGS: &str = "bindings";

/// One workflow file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workflow {
    /// What the model sees. Defaulted so a missing one gets a message saying what to add
    /// rather than serde's bare "missing field".
    #[serde(default)]
    pub description: String,
    /// Per run (`Tool::timeout`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
    /// The whole workflow, suspensions included (`Tool::deadline`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_seconds: Option<u64>,
    /// Same input within this time: the stored result (`Tool::cache_results`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_seconds: Option<u64>,
    /// Attempts before the failure is the result (`RetryPolicy::attempts`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// The result: any value with references; the last step's value when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// JSON Schema of the arguments object; no arguments when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// Run in order.
    #[serde(default)]
    pub steps: Vec<Step>,
}

/// One `[[steps]]` entry: a tool call, or a group of calls run concurrently.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// How later steps refer to its value; also its recorded step name.
    pub name: String,
    /// The tool to call (or `parallel`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The tool's arguments, with references.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Value>,
    /// Calls run concurrently (or `tool`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel: Option<Vec<Call>>,
}

/// A member of a parallel group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Call {
    /// How later steps refer to its value; also its recorded step name.
    pub name: String,
    /// The tool to call.
    pub tool: String,
    /// The tool's arguments, with references.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Value>,
}

impl Workflow {
    /// The argument schema the model sees: `[input]`, or "no arguments".
    pub fn input_schema(&self) -> Value {
        self.input.clone().unwrap_or_else(|| {
            serde_json::json!({ "type": "object", "properties": {}, "additionalProperties": false })
        })
    }
}

/// `$root.path.to.value`: a root and a path of object keys or array indexes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// `input`, `bindings` or a step name.
    pub root: String,
    /// Keys (or indexes, for arrays) below the root.
    pub path: Vec<String>,
}

impl std::fmt::Display for Reference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "${}", self.root)?;
        self.path.iter().try_for_each(|p| write!(f, ".{p}"))
    }
}

/// What a string in `args` or `output` means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Text {
    /// Exactly `$root.path`: the referenced JSON value itself.
    Whole(Reference),
    /// Literal text with `${root.path}` interpolations.
    Parts(Vec<Part>),
}

/// A piece of an interpolated string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// Text as written (`$$` already turned into `$`).
    Literal(String),
    /// `${root.path}`.
    Ref(Reference),
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

/// A character that may appear in a reference after the `$`.
fn is_reference_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_.-".contains(c)
}

/// Parses `root.path.to.x` (without the `$`): an identifier root, then dot-separated
/// segments of letters, digits, `_` and `-`.
pub fn parse_reference(text: &str) -> Result<Reference, Invalid> {
    let mut parts = text.split('.');
    let root = parts.next().unwrap_or_default();
    let ident = root.starts_with(is_ident_start)
        && root.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ident {
        return Err(format!(
            "`${text}` is not a reference: it must start with a name (letters, digits and `_`, not starting with a digit)"
        )
        .into());
    }
    let path: Vec<String> = parts.map(str::to_owned).collect();
    let segment_ok = |s: &String| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-".contains(c))
    };
    if let Some(bad) = path.iter().find(|s| !segment_ok(s)) {
        return Err(format!(
            "`${text}`: path segment {bad:?} must be an object key or array index (letters, digits, `_` and `-`)"
        )
        .into());
    }
    Ok(Reference {
        root: root.to_owned(),
        path,
    })
}

/// Reads a string: exactly `$root.path` is a whole reference; otherwise `${root.path}`
/// interpolates, `$$` is a literal `$`, and a `$` not followed by a name is literal. A bare
/// `$name` inside a longer string is refused: it is almost surely a forgotten `{}`.
pub fn parse_text(text: &str) -> Result<Text, Invalid> {
    if let Some(rest) = text.strip_prefix('$') {
        if rest.starts_with(is_ident_start) && rest.chars().all(is_reference_char) {
            return parse_reference(rest).map(Text::Whole);
        }
    }
    let mut parts = Vec::new();
    let mut literal = String::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        literal.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(after) = after.strip_prefix('$') {
            literal.push('$');
            rest = after;
        } else if let Some(inner) = after.strip_prefix('{') {
            let Some(end) = inner.find('}') else {
                return Err(format!(
                    "{text:?}: `${{` has no closing `}}`; write `${{root.path}}`, or `$$` for a literal `$`"
                )
                .into());
            };
            if !literal.is_empty() {
                parts.push(Part::Literal(std::mem::take(&mut literal)));
            }
            parts.push(Part::Ref(parse_reference(&inner[..end])?));
            rest = &inner[end + 1..];
        } else if after.starts_with(is_ident_start) {
            let name: String = after
                .chars()
                .take_while(|c| is_reference_char(*c))
                .collect();
            return Err(format!(
                "{text:?}: `${name}` inside a longer string; write `${{{name}}}` to insert the value, or `$$` for a literal `$`"
            )
            .into());
        } else {
            literal.push('$');
            rest = after;
        }
    }
    literal.push_str(rest);
    if !literal.is_empty() {
        parts.push(Part::Literal(literal));
    }
    Ok(Text::Parts(parts))
}

/// The value `reference` names in `scope` (roots by name), or why there is none.
pub fn lookup<'a>(
    scope: &'a Map<String, Value>,
    reference: &Reference,
) -> Result<&'a Value, Invalid> {
    let mut value = scope
        .get(&reference.root)
        .ok_or_else(|| Invalid::new(format!("there is no value named `{}`", reference.root)))?;
    let mut at = reference.root.clone();
    for segment in &reference.path {
        let next = match value {
            Value::Object(map) => map.get(segment),
            Value::Array(items) => segment.parse::<usize>().ok().and_then(|i| items.get(i)),
            _ => return Err(format!("`{at}` is {}, which has no `{segment}`", kind(value)).into()),
        };
        value = next.ok_or_else(|| Invalid::new(format!("`{at}` has no `{segment}`")))?;
        at.push('.');
        at.push_str(segment);
    }
    Ok(value)
}

/// `value` with every reference replaced by what it names in `scope`. Whole references
/// keep the value's JSON type; interpolated ones insert strings as they are and other values
/// as JSON text.
pub fn resolve(value: &Value, scope: &Map<String, Value>) -> Result<Value, Invalid> {
    let unresolved =
        |r: &Reference, why: Invalid| Invalid::new(format!("`{r}` does not resolve: {why}"));
    Ok(match value {
        Value::String(s) => match parse_text(s)? {
            Text::Whole(r) => lookup(scope, &r)
                .map_err(|why| unresolved(&r, why))?
                .clone(),
            Text::Parts(parts) => {
                let mut out = String::new();
                for part in parts {
                    match part {
                        Part::Literal(text) => out.push_str(&text),
                        Part::Ref(r) => {
                            match lookup(scope, &r).map_err(|why| unresolved(&r, why))? {
                                Value::String(s) => out.push_str(s),
                                other => out.push_str(&other.to_string()),
                            }
                        }
                    }
                }
                Value::String(out)
            }
        },
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| resolve(v, scope))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| Ok((k.clone(), resolve(v, scope)?)))
                .collect::<Result<_, Invalid>>()?,
        ),
        other => other.clone(),
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
