//! Declarative workflows: `agents/workflows/<name>.toml` becomes a [`Tool`] that calls other
//! tools in order, each call a recorded step (see `docs/toml-workflows.md`).
//!
//! `edgent-build` parses and checks each file and embeds it as JSON
//! (in the app's generated [`Catalog`](crate::Catalog)); this module turns that JSON into a tool. A run walks
//! the steps from the top like any Rust workflow: steps recorded by an earlier run (before a
//! retry or a restart) return their values without calling their tools again.

pub mod definition;

use std::rc::Rc;
use std::time::Duration;

use futures_util::future::join_all;
use serde_json::{Map, Value};

use self::definition::{resolve, Workflow, BINDINGS, INPUT};
use super::{CallToolResult, FlowState, Invalid, Outcome, RetryPolicy, Tool, ToolError};

impl Tool {
    /// A declarative workflow from its definition as JSON: the format of
    /// `docs/toml-workflows.md`, which `build.rs` embeds for every `agents/workflows/*.toml`
    /// (after checking tool names and reference order there; this does not repeat those
    /// checks, so a bad reference here fails its run instead).
    pub fn from_workflow_json(json: &str) -> Result<Tool, Invalid> {
        let workflow: Workflow = serde_json::from_str(json)
            .map_err(|e| Invalid::new(format!("the workflow definition does not parse ({e})")))?;
        let workflow = Rc::new(workflow);
        let runs = workflow.clone();
        let mut tool = Tool::from_schema(
            workflow.description.clone(),
            workflow.input_schema(),
            Rc::new(move |flow, args| {
                let workflow = runs.clone();
                Box::pin(async move {
                    match args.downcast::<Map<String, Value>>() {
                        Ok(args) => run(&workflow, &flow, *args).await,
                        // Unreachable: `Tool::from_schema` parses arguments as a `Map`.
                        Err(_) => Err(ToolError::fatal(
                            "internal error: arguments of the wrong type",
                        )),
                    }
                })
            }),
        );
        if let Some(s) = workflow.timeout_seconds {
            tool = tool.timeout(Duration::from_secs(s));
        }
        if let Some(s) = workflow.deadline_seconds {
            tool = tool.deadline(Duration::from_secs(s));
        }
        if let Some(s) = workflow.cache_seconds {
            tool = tool.cache_results(Duration::from_secs(s));
        }
        if let Some(n) = workflow.max_attempts {
            tool = tool.retry(RetryPolicy::attempts(n));
        }
        Ok(tool)
    }
}

/// One run: every step in order, then the output.
async fn run(workflow: &Workflow, flow: &FlowState, mut input: Map<String, Value>) -> Outcome {
    fill_defaults(&workflow.input_schema(), &mut input);
    // Every value a reference can name, by root: the arguments, the bindings, then each step.
    let mut scope = Map::new();
    scope.insert(INPUT.to_owned(), Value::Object(input));
    scope.insert(BINDINGS.to_owned(), Value::Object(flow.bindings.clone()));
    let mut last = Value::Null;
    for step in &workflow.steps {
        let value = match (&step.tool, &step.parallel) {
            (Some(tool), _) => {
                let args = arguments(&step.name, step.args.as_ref(), &scope)?;
                call(flow, &step.name, tool, args).await?
            }
            (None, Some(group)) => {
                // Resolve every member's arguments first: a bad reference fails the group
                // before any of its tools runs.
                let calls = group
                    .iter()
                    .map(|m| Ok((m, arguments(&m.name, m.args.as_ref(), &scope)?)))
                    .collect::<Result<Vec<_>, ToolError>>()?;
                let results = join_all(
                    calls
                        .into_iter()
                        .map(|(m, args)| call(flow, &m.name, &m.tool, args)),
                )
                .await;
                // Members that succeeded are recorded even if another failed: a retry runs
                // only the failed ones again.
                let mut values = Map::new();
                for (member, result) in group.iter().zip(results) {
                    let value = result?;
                    scope.insert(member.name.clone(), value.clone());
                    values.insert(member.name.clone(), value);
                }
                Value::Object(values)
            }
            // Refused by the build-time check.
            (None, None) => {
                return Err(ToolError::fatal(format!(
                    "step {:?} has neither a tool nor a parallel group",
                    step.name
                )))
            }
        };
        scope.insert(step.name.clone(), value.clone());
        last = value;
    }
    let output = match &workflow.output {
        Some(output) => resolve(output, &scope)
            .map_err(|why| ToolError::fatal(format!("the workflow's output: {why}")))?,
        None => last,
    };
    Ok(match output {
        Value::String(text) => CallToolResult::text(text),
        other => CallToolResult::json(&other),
    })
}

/// A step's arguments with their references resolved. An unresolved reference is fatal:
/// the same arguments and earlier values would fail the same way on every retry.
fn arguments(
    step: &str,
    args: Option<&Value>,
    scope: &Map<String, Value>,
) -> Result<Value, ToolError> {
    match args {
        Some(args) => {
            resolve(args, scope).map_err(|why| ToolError::fatal(format!("step {step:?}: {why}")))
        }
        None => Ok(Value::Object(Map::new())),
    }
}

/// Runs `tool` as the recorded step `name`. Its value is the result text parsed as JSON, or
/// the text itself when it is not JSON.
async fn call(flow: &FlowState, name: &str, tool: &str, args: Value) -> Result<Value, ToolError> {
    let value = flow
        .step(name, || async {
            let result = flow.call_tool(tool, args).await?;
            let text = result.to_model_text();
            if result.is_error() {
                // An error result is the tool's answer: asking again gets the same one.
                let text = text.strip_prefix("Error: ").unwrap_or(&text);
                return Err(ToolError::fatal(text));
            }
            Ok(serde_json::from_str(&text).unwrap_or(Value::String(text)))
        })
        .await;
    value.map_err(|e| name_the_tool(e, name, tool))
}

/// `step "a" failed: …` (written by [`FlowState::step`]) becomes `step "a" (tool) failed: …`,
/// keeping the failure's retry advice.
fn name_the_tool(error: ToolError, step: &str, tool: &str) -> ToolError {
    let Some(rest) = error
        .text()
        .strip_prefix(&format!("step {step:?} failed: "))
    else {
        return error; // not the tool's failure (a storage error, a reused name): as it is
    };
    let text = format!("step {step:?} ({tool}) failed: {rest}");
    match error.retry() {
        super::Retry::Backoff => ToolError::new(text),
        super::Retry::After(ms) => ToolError::retry_after(text, Duration::from_millis(ms)),
        super::Retry::Never => ToolError::fatal(text),
    }
}

/// Missing optional arguments take their schema `default`, so a reference to them resolves.
fn fill_defaults(schema: &Value, input: &mut Map<String, Value>) {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (key, property) in properties {
        if let Some(default) = property.get("default") {
            input.entry(key.clone()).or_insert_with(|| default.clone());
        }
    }
}
