//! TOML workflows: their references (`$a.b`, `${input.city}`, `$$`) and whole files, from
//! the text `edgent-build` reads to a run on the test host.

use std::rc::Rc;

use serde_json::{json, Map, Value};

use super::input::{any_value, Input};
use crate::testing::TestHost;
use crate::tool::workflow_toml::definition::{
    lookup, parse_reference, parse_text, resolve, Text, Workflow,
};
use crate::tool::{CallToolResult, Registry, Tool, ToolError};
use crate::values::Invalid;

/// Pieces reference strings are made of.
const REF_PIECES: &[&str] = &[
    "$",
    "$$",
    "${",
    "}",
    "{",
    "input",
    "bindings",
    "a",
    "b",
    "g",
    "x",
    ".",
    "city",
    "0",
    "1",
    "-",
    "_",
    " ",
    "é",
    "text",
    "$input.city",
    "${a.city}",
    "$a",
    "${bindings.account}",
    "$a.0",
    "${x}",
];

/// A string of reference pieces.
fn ref_text(input: &mut Input<'_>) -> String {
    (0..1 + input.below(5))
        .map(|_| input.pick(REF_PIECES).unwrap_or("$"))
        .collect()
}

/// A value with reference strings in it, a few levels deep.
fn ref_value(input: &mut Input<'_>, depth: u32) -> Value {
    match input.below(if depth > 2 { 2 } else { 4 }) {
        0 => Value::from(ref_text(input)),
        1 => any_value(input, 3),
        2 => Value::Array(
            (0..input.below(3))
                .map(|_| ref_value(input, depth + 1))
                .collect(),
        ),
        _ => {
            let mut map = Map::new();
            for _ in 0..input.below(3) {
                let key = input.pick(&["city", "a", "text", "n"]).unwrap_or("a");
                map.insert(key.to_owned(), ref_value(input, depth + 1));
            }
            Value::Object(map)
        }
    }
}

fn has_dollar(value: &Value) -> bool {
    match value {
        Value::String(s) => s.contains('$'),
        Value::Array(items) => items.iter().any(has_dollar),
        Value::Object(map) => map.values().any(has_dollar),
        _ => false,
    }
}

/// Input: the scope (values for `input`, `bindings`, `a` and `g`), then a value with reference
/// strings.
///
/// Parsing and resolving never panic and fail with a message; a whole reference prints back
/// as the text it was parsed from, and resolves to what it names; a value without a `$`
/// resolves to itself.
pub fn workflow_references(data: &[u8]) {
    let mut input = Input::new(data);
    let mut scope = Map::new();
    for root in ["input", "bindings", "a", "g"] {
        if input.below(4) != 0 {
            scope.insert(root.to_owned(), any_value(&mut input, 0));
        }
    }
    let value = ref_value(&mut input, 0);
    if let Value::String(s) = &value {
        match parse_text(s) {
            Ok(Text::Whole(r)) => {
                assert_eq!(
                    &r.to_string(),
                    s,
                    "a whole reference prints back as written"
                );
                assert_eq!(parse_reference(&s[1..]).as_ref(), Ok(&r));
                if let Ok(found) = lookup(&scope, &r) {
                    assert_eq!(resolve(&value, &scope).as_ref(), Ok(found));
                }
            }
            Ok(Text::Parts(_)) => {}
            Err(e) => assert!(!e.message().is_empty(), "an error without a message"),
        }
    }
    match resolve(&value, &scope) {
        Ok(resolved) => {
            if !has_dollar(&value) {
                assert_eq!(resolved, value, "a value without references changed");
            }
        }
        Err(e) => assert!(!e.message().is_empty(), "an error without a message"),
    }
}

/// A TOML string literal (JSON's escapes are TOML's).
fn toml_string(s: &str) -> String {
    Value::from(s).to_string()
}

/// A TOML inline table or value of `value`.
fn toml_value(value: &Value) -> String {
    match value {
        Value::Null => "\"\"".to_owned(),
        Value::String(s) => toml_string(s),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(toml_value).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(map) => {
            let fields: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{} = {}", toml_string(k), toml_value(v)))
                .collect();
            format!("{{ {} }}", fields.join(", "))
        }
        other => other.to_string(),
    }
}

/// Whether a step may call the workflow itself: it must end with an error at
/// `MAX_CALL_NESTING` (before that limit it recursed until the stack overflowed; the reproducer
/// is `tests/host/adversarial.rs` `a_workflow_that_calls_itself_ends_with_an_error`).
const SELF_CALLS: bool = true;

/// Step and member names.
const STEP_NAMES: &[&str] = &["a", "b", "g", "x", "input", "a", "1a", ""];
/// Tools a step may call: two that exist, the workflow itself, and one that does not.
const STEP_TOOLS: &[&str] = &["echo", "fail", "wf", "nope"];

/// A workflow file read from the input: a description, limits, an output, an input schema,
/// steps and parallel groups calling tools with reference-laden arguments.
fn workflow_text(input: &mut Input<'_>) -> String {
    let mut out = String::new();
    if input.below(8) != 0 {
        out.push_str(&format!("description = {}\n", toml_string(&input.text(12))));
    }
    for key in ["timeout_seconds", "max_attempts", "cache_seconds"] {
        if input.one_in(4) {
            out.push_str(&format!("{key} = {}\n", input.below(3)));
        }
    }
    if input.bool() {
        out.push_str(&format!("output = {}\n", toml_value(&ref_value(input, 1))));
    }
    if input.bool() {
        out.push_str("[input]\ntype = \"object\"\n");
        out.push_str("properties = { city = { type = \"string\", default = \"Porto\" } }\n");
        if input.bool() {
            out.push_str("required = [\"city\"]\n");
        }
    }
    for _ in 0..input.below(4) {
        out.push_str("[[steps]]\n");
        let name = input.pick(STEP_NAMES).unwrap_or("a");
        out.push_str(&format!("name = {}\n", toml_string(name)));
        if input.one_in(4) {
            let members: Vec<String> = (0..input.below(3))
                .map(|_| {
                    let name = input.pick(STEP_NAMES).unwrap_or("x");
                    let tool = input.pick(STEP_TOOLS).unwrap_or("echo");
                    let args = toml_value(&ref_value(input, 1));
                    format!(
                        "{{ name = {}, tool = {}, args = {args} }}",
                        toml_string(name),
                        toml_string(tool)
                    )
                })
                .collect();
            out.push_str(&format!("parallel = [{}]\n", members.join(", ")));
        } else {
            let tool = input.pick(STEP_TOOLS).unwrap_or("echo");
            out.push_str(&format!("tool = {}\n", toml_string(tool)));
            if input.bool() {
                out.push_str(&format!("args = {}\n", toml_value(&ref_value(input, 1))));
            }
        }
    }
    out
}

/// A tool that answers its arguments as JSON.
fn echo() -> Tool {
    Tool::from_schema(
        "Answers its arguments.",
        json!({ "type": "object" }),
        Rc::new(|_flow, args| {
            let value = args
                .downcast::<Map<String, Value>>()
                .map_or(Value::Null, |m| Value::Object(*m));
            Box::pin(async move { Ok(CallToolResult::json(&value)) })
        }),
    )
}

/// A tool that always fails.
fn fail() -> Tool {
    Tool::from_schema(
        "Fails.",
        json!({ "type": "object" }),
        Rc::new(|_flow, _args| Box::pin(async { Err(ToolError::fatal("it failed")) })),
    )
}

/// Parses TOML text as `edgent-build` does (`toml::from_str`); given by the driver, since the
/// framework does not depend on a TOML parser.
pub type ParseToml<'a> = &'a dyn Fn(&str) -> Result<Workflow, String>;
/// `edgent_build::check_workflow`; given by the driver (the build crate depends on this one).
pub type CheckWorkflow<'a> = &'a dyn Fn(&Workflow, &dyn Fn(&str) -> bool) -> Result<(), Invalid>;

/// Input: a mode byte, then the workflow file's text or the ops that build one.
///
/// The text parses or is refused with a message; a parsed workflow passes the build check or
/// is refused with a message; one that passes becomes a tool from the JSON the build embeds
/// (never refused: the build checked it), and runs on the test host (tools `echo` and `fail`;
/// itself as `wf` once [`SELF_CALLS`] is on) with any arguments and bindings to a result: an
/// error result says why.
pub fn workflow_toml(data: &[u8], parse: ParseToml<'_>, check: CheckWorkflow<'_>) {
    let mut input = Input::new(data);
    let text = if input.one_in(4) {
        String::from_utf8_lossy(input.rest()).into_owned()
    } else {
        workflow_text(&mut input)
    };
    let workflow = match parse(&text) {
        Ok(w) => w,
        Err(e) => return assert!(!e.is_empty(), "a parse error without a message"),
    };
    let is_tool = |name: &str| STEP_TOOLS[..2].contains(&name) || (SELF_CALLS && name == "wf");
    if let Err(e) = check(&workflow, &is_tool) {
        return assert!(!e.message().is_empty(), "a check error without a message");
    }
    #[allow(clippy::expect_used)] // a property body: a failure is a found defect
    let json = serde_json::to_string(&workflow).expect("a workflow serialises");
    let built = Tool::from_workflow_json(&json);
    assert!(built.is_ok(), "a checked workflow is refused: {built:?}");
    let Ok(tool) = built else { return };
    let Ok(itself) = Tool::from_workflow_json(&json) else {
        return;
    };
    let registry = Registry::build(vec![("echo", echo()), ("fail", fail()), ("wf", itself)]);
    assert!(registry.is_ok(), "the host's tools: {registry:?}");
    let Ok(registry) = registry else { return };
    let host = TestHost::new(registry, 1_800_000_000_000).into_rc();
    let bindings = match any_value(&mut input, 1) {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    let args = if input.bool() {
        json!({ "city": input.text(8) }).to_string()
    } else {
        any_value(&mut input, 1).to_string()
    };
    let flow = host.flow("call_1").with_bindings(bindings);
    let result = host.run(tool.call(flow, &args));
    if result.is_error() {
        assert!(
            !result.to_model_text().trim().is_empty(),
            "an error result without a message"
        );
    }
}
