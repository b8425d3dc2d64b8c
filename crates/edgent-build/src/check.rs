//! Build-time checks of a TOML workflow: everything that can be known before it runs, so a
//! broken workflow fails `cargo build` with a message instead of failing a call. Runs only at
//! build time; the Worker's copy of each workflow has already passed these checks.

use std::collections::HashSet;

use serde_json::Value;

use crate::definition::{parse_text, Part, Reference, Text, Workflow, BINDINGS, INPUT};
use crate::Invalid;

/// Checks `workflow`. `is_tool` says whether a name is a tool in `agents/tools/` or a Rust
/// workflow. The error says what is wrong and how to fix it.
pub fn check(workflow: &Workflow, is_tool: &dyn Fn(&str) -> bool) -> Result<(), Invalid> {
    if workflow.description.trim().is_empty() {
        return Err(
            "missing `description`: add `description = \"...\"` saying what the workflow does (the model reads it)"
                .into(),
        );
    }
    for (key, value) in [
        ("timeout_seconds", workflow.timeout_seconds),
        ("deadline_seconds", workflow.deadline_seconds),
        ("cache_seconds", workflow.cache_seconds),
        ("max_attempts", workflow.max_attempts.map(u64::from)),
    ] {
        if value == Some(0) {
            return Err(format!("`{key}` is 0; it must be at least 1 (or left out)").into());
        }
    }
    let properties = check_input(workflow.input.as_ref())?;
    if workflow.steps.is_empty() {
        return Err(
            "no steps: add at least one `[[steps]]` table with a `name` and a `tool` (or a `parallel` group)"
                .into(),
        );
    }

    // Names visible to the step being checked: the roots, then each step once it is done.
    let mut known: HashSet<&str> = HashSet::from([INPUT, BINDINGS]);
    let mut used: HashSet<&str> = HashSet::new();
    for step in &workflow.steps {
        check_name(&step.name, &mut used)?;
        let at = format!("step `{}`", step.name);
        match (&step.tool, &step.parallel) {
            (Some(tool), None) => {
                check_call(&at, tool, step.args.as_ref(), &known, &properties, is_tool)?;
            }
            (None, Some(group)) => {
                if step.args.is_some() {
                    return Err(format!(
                        "{at}: `args` belongs on each member of `parallel`, not on the group"
                    )
                    .into());
                }
                if group.is_empty() {
                    return Err(format!(
                        "{at}: `parallel` is empty; list at least one `{{ name = \"...\", tool = \"...\", args = {{ ... }} }}` member"
                    ).into());
                }
                for member in group {
                    check_name(&member.name, &mut used)?;
                    let at = format!("{at}, member `{}`", member.name);
                    check_call(
                        &at,
                        &member.tool,
                        member.args.as_ref(),
                        &known,
                        &properties,
                        is_tool,
                    )?;
                }
                // Members become visible together, after the group: they run concurrently.
                known.extend(group.iter().map(|m| m.name.as_str()));
            }
            (Some(_), Some(_)) => {
                return Err(format!(
                "{at} has both `tool` and `parallel`; a step either calls one tool or runs a group"
            )
                .into())
            }
            (None, None) => {
                return Err(format!(
                "{at} needs `tool = \"...\"` (one call) or `parallel = [...]` (a group of calls)"
            )
                .into())
            }
        }
        known.insert(step.name.as_str());
    }
    if let Some(output) = &workflow.output {
        check_references("`output`", output, &known, &properties)?;
    }
    Ok(())
}

/// The declared input properties, after checking the schema describes an object.
fn check_input(input: Option<&Value>) -> Result<HashSet<String>, Invalid> {
    let Some(input) = input else {
        return Ok(HashSet::new());
    };
    if input.get("type").and_then(Value::as_str) != Some("object") {
        return Err(
            "`[input]` must be the JSON Schema of an object: add `type = \"object\"` and the arguments under `[input.properties.<name>]`"
                .into(),
        );
    }
    match input.get("properties") {
        None => Ok(HashSet::new()),
        Some(Value::Object(props)) => Ok(props.keys().cloned().collect()),
        Some(_) => Err(
            "`[input].properties` must be a table of `[input.properties.<name>]` schemas".into(),
        ),
    }
}

/// A step or member name: a reference root, unique, and not `input` or `bindings`.
fn check_name<'a>(name: &'a str, used: &mut HashSet<&'a str>) -> Result<(), Invalid> {
    let valid = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return Err(format!(
            "step name {name:?} is not valid: use letters, digits and `_`, starting with a letter (later steps refer to it as `${name}`)"
        ).into());
    }
    if name == INPUT || name == BINDINGS {
        return Err(format!(
            "step name `{name}` is reserved (`${name}` means the workflow's {}); rename the step",
            if name == INPUT {
                "arguments"
            } else {
                "runtime bindings"
            }
        )
        .into());
    }
    if !used.insert(name) {
        return Err(format!(
            "two steps are named `{name}`; step names (parallel members included) must be unique"
        )
        .into());
    }
    Ok(())
}

fn check_call(
    at: &str,
    tool: &str,
    args: Option<&Value>,
    known: &HashSet<&str>,
    properties: &HashSet<String>,
    is_tool: &dyn Fn(&str) -> bool,
) -> Result<(), Invalid> {
    if !is_tool(tool) {
        return Err(format!(
            "{at} calls `{tool}`, which is neither a tool in agents/tools/ nor a Rust workflow in agents/workflows/; check the name"
        ).into());
    }
    match args {
        None => Ok(()),
        Some(args @ Value::Object(_)) => check_references(at, args, known, properties),
        Some(_) => Err(format!(
            "{at}: `args` must be a table of the tool's arguments, e.g. `args = {{ city = \"$input.city\" }}`"
        ).into()),
    }
}

/// Every reference in `value` is well formed and names an earlier value.
fn check_references(
    at: &str,
    value: &Value,
    known: &HashSet<&str>,
    properties: &HashSet<String>,
) -> Result<(), Invalid> {
    for reference in references(value).map_err(|why| Invalid::new(format!("{at}: {why}")))? {
        check_reference(at, &reference, known, properties)?;
    }
    Ok(())
}

fn check_reference(
    at: &str,
    reference: &Reference,
    known: &HashSet<&str>,
    properties: &HashSet<String>,
) -> Result<(), Invalid> {
    if !known.contains(reference.root.as_str()) {
        return Err(format!(
            "{at}: `{reference}` refers to `{}`, which is not `input`, `bindings` or an earlier step; \
             a step can use only the values of steps before it (not of members of its own parallel group)",
            reference.root
        ).into());
    }
    if reference.root == INPUT {
        if let Some(first) = reference.path.first() {
            if !properties.contains(first) {
                return Err(format!(
                    "{at}: `{reference}`: the input has no property `{first}`; declare it under `[input.properties.{first}]`"
                ).into());
            }
        }
    }
    Ok(())
}

/// Every reference in the strings of `value` (object values and array items, recursively;
/// keys are never references), or the first malformed string's problem.
pub(crate) fn references(value: &Value) -> Result<Vec<Reference>, Invalid> {
    let mut found = Vec::new();
    collect(value, &mut found)?;
    Ok(found)
}

fn collect(value: &Value, found: &mut Vec<Reference>) -> Result<(), Invalid> {
    match value {
        Value::String(s) => match parse_text(s)? {
            Text::Whole(r) => found.push(r),
            Text::Parts(parts) => found.extend(parts.into_iter().filter_map(|p| match p {
                Part::Ref(r) => Some(r),
                Part::Literal(_) => None,
            })),
        },
        Value::Array(items) => items.iter().try_for_each(|v| collect(v, found))?,
        Value::Object(map) => map.values().try_for_each(|v| collect(v, found))?,
        _ => {}
    }
    Ok(())
}
