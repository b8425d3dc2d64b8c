//! JSON Schemas written on the host before a Worker build, for Workers built with edgent's
//! `prebuilt-schemas` feature.
//!
//! The schemas of an app's tools and output types come from its Rust types, through schemars.
//! Generating them in the Worker links schemars' generator and every type's `JsonSchema` impl
//! (about 5% of the wasm), and runs them in every new isolate before its first thread. With the
//! feature, the app's host test `edgent_export_schemas` ([`crate::export_schemas!`]) writes
//! them once, `scripts/build.sh` hands the file to the wasm build, and the registry takes each
//! schema from it where [`super::schema::schema_for`] left a placeholder. The checks that
//! follow (arguments an object, bounded depth, output types in the validated subset) are the
//! same either way, so a Worker refuses the same broken tools.
//!
//! The file: `{"tools": {name: {"arguments": schema, "returns": schema or null}},
//! "outputs": {name: schema}}`, Rust tools and workflows only (a TOML workflow's schema is in
//! its definition already).

use std::rc::Rc;

use serde_json::{Map, Value};

#[cfg(not(target_arch = "wasm32"))]
use super::Registry;
use super::{Invalid, Tool};

/// The advice given with every tool and output type missing from the file: an old file, or
/// one exported from another catalogue than the Worker serves.
const REBUILD: &str = "build the Worker with scripts/build.sh, which writes the schemas first, \
                       and give `export_schemas!` the catalogue `serve!` serves";

/// The schemas one app's export wrote, parsed.
#[derive(Debug)]
pub(crate) struct Prebuilt {
    tools: Map<String, Value>,
    outputs: Map<String, Value>,
}

impl Prebuilt {
    /// Parses the export's text, refusing anything but the shape [`export`] writes.
    pub(crate) fn parse(text: &str) -> Result<Self, Invalid> {
        let bad = |why: &str| Invalid::new(format!("the schemas written before the build: {why}"));
        let mut top = match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(top)) => top,
            Ok(_) => return Err(bad("not a JSON object")),
            Err(e) => return Err(bad(&format!("not JSON ({e})"))),
        };
        let mut section = |key: &str| match top.remove(key) {
            Some(Value::Object(map)) => Ok(map),
            _ => Err(bad(&format!("no `{key}` object"))),
        };
        Ok(Prebuilt {
            tools: section("tools")?,
            outputs: section("outputs")?,
        })
    }

    /// Puts the exported schemas where `tool` has placeholders (its arguments' type, its
    /// `Json<T>` result). A tool the export did not see is refused: the file is older than
    /// the tool.
    pub(crate) fn fill(&self, name: &str, tool: &mut Tool) -> Result<(), Invalid> {
        let needs_arguments = tool.args.schema.is_null();
        let needs_returns = tool.returns.as_ref().is_some_and(Value::is_null);
        if !needs_arguments && !needs_returns {
            return Ok(());
        }
        let missing = || {
            Invalid::new(format!(
                "its schemas are not in the file written before the build; {REBUILD}"
            ))
        };
        let entry = self.tools.get(name).ok_or_else(missing)?;
        if needs_arguments {
            let arguments = entry.get("arguments").ok_or_else(missing)?;
            // The export writes only schemas the host's checks accepted, so anything else is a
            // damaged file, not a broken tool.
            if !arguments.is_object() {
                return Err(Invalid::new(format!(
                    "its `arguments` in the file written before the build is not a JSON \
                     object; {REBUILD}"
                )));
            }
            tool.args.schema = Rc::new(arguments.clone());
        }
        if needs_returns {
            match entry.get("returns") {
                Some(returns) if returns.is_object() => tool.returns = Some(returns.clone()),
                _ => return Err(missing()),
            }
        }
        Ok(())
    }

    /// The exported schema of output type `name`.
    pub(crate) fn output(&self, name: &str) -> Result<Value, Invalid> {
        self.outputs.get(name).cloned().ok_or_else(|| {
            Invalid::new(format!(
                "its schema is not in the file written before the build; {REBUILD}"
            ))
        })
    }
}

/// The file [`Prebuilt::parse`] reads: the schemas of `tools` (the Rust tools and workflows;
/// names the registry does not have are skipped) and of every output type of `registry`.
/// Written on the host only.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn export(registry: &Registry, tools: &[&str]) -> String {
    let mut tool_schemas = Map::new();
    for name in tools {
        if let Some(tool) = registry.get(name) {
            let mut entry = Map::new();
            entry.insert("arguments".into(), tool.parameters().clone());
            entry.insert(
                "returns".into(),
                tool.returns().cloned().unwrap_or(Value::Null),
            );
            tool_schemas.insert((*name).to_owned(), Value::Object(entry));
        }
    }
    let outputs: Map<String, Value> = registry
        .output_types()
        .filter_map(|name| Some((name.to_owned(), registry.output_schema(name)?.clone())))
        .collect();
    let mut top = Map::new();
    top.insert("tools".into(), Value::Object(tool_schemas));
    top.insert("outputs".into(), Value::Object(outputs));
    Value::Object(top).to_string()
}

#[cfg(test)]
mod tests {
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};
    use serde_json::json;

    use super::*;
    use crate::tool::{FlowState, Json, RegistryError, ToolConstructor};

    /// Where to look something up.
    #[derive(Deserialize, JsonSchema)]
    struct Lookup {
        /// The key.
        key: String,
    }

    /// What was found.
    #[derive(Serialize, JsonSchema)]
    struct Found {
        /// The value.
        value: u32,
    }

    async fn lookup(_flow: FlowState, args: Lookup) -> Json<Found> {
        Json(Found {
            value: u32::from(!args.key.is_empty()),
        })
    }

    fn typed() -> Tool {
        Tool::new("Looks a key up.").handler(lookup)
    }

    fn untyped() -> Tool {
        Tool::new("Takes nothing.").handler(|_flow: FlowState| async { String::from("ok") })
    }

    fn triage() -> Value {
        json!({"type": "object", "properties": {"urgency": {"type": "integer"}}, "required": ["urgency"]})
    }

    const TOOLS: &[(&str, ToolConstructor)] = &[("lookup", typed), ("noop", untyped)];

    /// The file as the host writes it for [`TOOLS`] and one output type.
    fn exported() -> String {
        let registry = Registry::from_tables(TOOLS, &[])
            .and_then(|r| r.with_schemas(&[("triage", triage)]))
            .expect("the test tools build");
        export(&registry, &["lookup", "noop"])
    }

    /// What `schema_for` leaves in a `prebuilt-schemas` build.
    fn placeholder() -> Value {
        Value::Null
    }

    /// `typed` as a `prebuilt-schemas` build constructs it: placeholders for both schemas.
    fn typed_unfilled() -> Tool {
        let mut tool = typed();
        tool.args.schema = Rc::new(Value::Null);
        tool.returns = Some(Value::Null);
        tool
    }

    #[test]
    fn the_file_fills_every_placeholder_with_what_the_host_generated() {
        let generated = Registry::from_tables(TOOLS, &[]).expect("builds");
        let prebuilt = Prebuilt::parse(&exported()).expect("parses");
        let registry = Registry::from_tables_with(
            &[("lookup", typed_unfilled), ("noop", untyped)],
            &[],
            Some(&prebuilt),
        )
        .and_then(|r| r.with_schemas_from(&[("triage", placeholder)], Some(&prebuilt)))
        .expect("filled and checked");
        let lookup = registry.get("lookup").expect("registered");
        let original = generated.get("lookup").expect("registered");
        assert_eq!(lookup.parameters(), original.parameters());
        assert_eq!(lookup.returns(), original.returns());
        assert_eq!(
            lookup.parameters()["properties"]["key"]["description"],
            "The key."
        );
        assert_eq!(registry.output_schema("triage"), Some(&triage()));
        // A tool without placeholders keeps its own schema.
        assert_eq!(
            registry.get("noop").map(Tool::parameters),
            generated.get("noop").map(Tool::parameters)
        );
    }

    /// The file with `lookup`'s arguments replaced by `arguments`.
    fn with_arguments(arguments: Value) -> Prebuilt {
        let mut file: Value = serde_json::from_str(&exported()).expect("JSON");
        file["tools"]["lookup"]["arguments"] = arguments;
        Prebuilt::parse(&file.to_string()).expect("parses")
    }

    /// Why a registry of `typed_unfilled` as `lookup`, filled from `prebuilt`, is refused.
    fn refusal(prebuilt: &Prebuilt) -> RegistryError {
        Registry::from_tables_with(&[("lookup", typed_unfilled)], &[], Some(prebuilt))
            .expect_err("refused")
    }

    /// Why output type `triage`, filled from `prebuilt`, is refused.
    fn output_refusal(prebuilt: &Prebuilt) -> RegistryError {
        Registry::default()
            .with_schemas_from(&[("triage", placeholder)], Some(prebuilt))
            .expect_err("refused")
    }

    #[test]
    fn a_tool_the_file_does_not_have_is_refused_with_what_to_do() {
        let prebuilt = Prebuilt::parse(r#"{"tools": {}, "outputs": {}}"#).expect("parses");
        let shown = refusal(&prebuilt).to_string();
        assert!(
            shown.starts_with(
                "tool `lookup` (agents/tools/lookup.rs): its schemas are not in the file"
            ),
            "{shown}"
        );
        assert!(shown.contains("scripts/build.sh"), "{shown}");
    }

    #[test]
    fn a_result_schema_the_file_lacks_is_refused() {
        let file = json!({"tools": {"lookup": {"arguments": {"type": "object"}, "returns": null}}, "outputs": {}});
        let err = refusal(&Prebuilt::parse(&file.to_string()).expect("parses"));
        assert_eq!(err.problems.len(), 1, "{err}");
        assert_eq!(err.problems[0].0, "lookup");
    }

    #[test]
    fn an_output_type_the_file_lacks_is_refused() {
        let prebuilt = Prebuilt::parse(r#"{"tools": {}, "outputs": {}}"#).expect("parses");
        let err = output_refusal(&prebuilt);
        assert!(
            err.to_string().starts_with(
                "output type `triage` (Catalog::schemas): its schema is not in the file"
            ),
            "{err}"
        );
    }

    #[test]
    fn arguments_that_are_not_an_object_are_a_damaged_file() {
        for arguments in [Value::Null, json!("object"), json!([])] {
            let shown = refusal(&with_arguments(arguments.clone())).to_string();
            assert!(
                shown.contains(
                    "its `arguments` in the file written before the build is not a JSON object"
                ),
                "{arguments}: {shown}"
            );
            assert!(shown.contains("scripts/build.sh"), "{shown}");
        }
    }

    #[test]
    fn a_filled_schema_goes_through_the_checks_a_generated_one_does() {
        // A schema that is not of an object, one that refers to a definition (what schemars
        // writes for a recursive type), and one nested deeper than the limit: each is refused
        // as it would be if generated.
        let mut deep = json!({"type": "string"});
        for _ in 0..=crate::tool::schema::MAX_DEPTH {
            deep = json!({"type": "object", "properties": {"inner": deep}});
        }
        for (arguments, why) in [
            (json!({"type": "string"}), "object"),
            (
                json!({"type": "object", "properties": {"a": {"$ref": "#/definitions/A"}}}),
                "recursive",
            ),
            (deep, "levels deep"),
        ] {
            let shown = refusal(&with_arguments(arguments.clone())).to_string();
            assert!(
                shown.starts_with("tool `lookup` (agents/tools/lookup.rs): "),
                "{shown}"
            );
            assert!(shown.contains(why), "{arguments}: {shown}");
        }
        // And an output type outside the validated subset.
        let mut file: Value = serde_json::from_str(&exported()).expect("JSON");
        file["outputs"]["triage"] = json!({"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]+$"}}});
        let err = output_refusal(&Prebuilt::parse(&file.to_string()).expect("parses"));
        assert!(err.to_string().contains("pattern"), "{err}");
    }

    #[test]
    fn a_broken_file_is_refused_as_a_whole() {
        for (text, why) in [
            ("", "not JSON"),
            ("[]", "not a JSON object"),
            (r#"{"tools": {}}"#, "no `outputs` object"),
            (r#"{"tools": [], "outputs": {}}"#, "no `tools` object"),
        ] {
            let err = Prebuilt::parse(text).expect_err(text);
            assert!(
                err.to_string()
                    .starts_with("the schemas written before the build: "),
                "{err}"
            );
            assert!(err.to_string().contains(why), "{text}: {err}");
            assert_eq!(
                RegistryError::whole(err.clone()).to_string(),
                err.to_string()
            );
        }
    }

    #[test]
    fn the_file_has_the_rust_tools_asked_for_and_every_output_type() {
        let file: Value = serde_json::from_str(&exported()).expect("JSON");
        assert_eq!(file["tools"]["noop"]["returns"], Value::Null);
        assert_eq!(
            file["tools"]["lookup"]["returns"]["properties"]["value"]["type"],
            "integer"
        );
        assert_eq!(file["outputs"]["triage"], triage());
        let registry = Registry::from_tables(TOOLS, &[]).expect("builds");
        let only_lookup: Value =
            serde_json::from_str(&export(&registry, &["lookup", "not_a_tool"])).expect("JSON");
        assert_eq!(only_lookup["tools"].as_object().map(Map::len), Some(1));
    }
}
