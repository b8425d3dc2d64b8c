//! A prompt's `response_format`: the final answer is a JSON value of a given schema, written
//! in the prompt (`{"schema": {...}, "name"?: "..."}`) or named from the output types the app
//! registers in its catalogue (`{"type_name": "..."}`, a Rust type's schema). How it reaches
//! each wire format and how answers are checked: [docs/agents.md](../../../../docs/agents.md).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::llm::request::{OutputFormat, ToolChoice};
use crate::values::json_schema::check_schema;
use crate::values::Invalid;

/// The answer's name when the format gives none and names no type.
pub const DEFAULT_ANSWER_NAME: &str = "final_answer";

/// The shape of a prompt's final answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResponseFormat {
    /// What the answer is called: OpenAI's `json_schema.name`, the Anthropic answer tool's
    /// name. Default: `type_name`, else `final_answer`. 1-64 of `a-z A-Z 0-9 _ -`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A JSON Schema of an object, in the subset edgent checks
    /// ([`crate::values::json_schema`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Value>,
    /// An output type the app registers (`Catalog::schemas`), instead of `schema`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub type_name: Option<String>,
}

impl ResponseFormat {
    /// Rules that need no other row: one of `schema` or `type_name`, a schema edgent can
    /// check, an answer name every wire format takes and that no tool of the prompt has, and
    /// a `tool_choice` that lets the model answer at all.
    pub fn check(&self, tools: &[String], tool_choice: ToolChoice) -> Result<(), Invalid> {
        let fail = |why: String| Err(Invalid::new(format!("response_format: {why}")));
        match (&self.schema, &self.type_name) {
            (Some(schema), None) => {
                if let Err(why) = check_schema(schema) {
                    return fail(format!("schema: {why}"));
                }
            }
            (None, Some(type_name)) => {
                if !fits_a_wire_name(type_name) {
                    return fail(format!(
                        "type_name {type_name:?} must be 1-64 characters of a-z A-Z 0-9 _ -"
                    ));
                }
            }
            _ => {
                return fail(
                    "give exactly one of \"schema\" (a JSON Schema of an object) or \
                     \"type_name\" (an output type the app registers)"
                        .into(),
                )
            }
        }
        let name = self.answer_name();
        if !fits_a_wire_name(name) {
            return fail(format!(
                "name {name:?} must be 1-64 characters of a-z A-Z 0-9 _ -"
            ));
        }
        if tools.iter().any(|t| t == name) {
            return fail(format!(
                "name {name:?} is also one of the prompt's tools; the Anthropic format offers the \
                 answer as a tool of that name, so pick another \"name\""
            ));
        }
        if tool_choice == ToolChoice::Required {
            return fail(
                "tool_choice \"required\" leaves the model no way to answer (with the OpenAI \
                 format the answer is a message, never a tool call); use \"auto\""
                    .into(),
            );
        }
        Ok(())
    }

    /// What the answer is called.
    pub fn answer_name(&self) -> &str {
        self.name
            .as_deref()
            .or(self.type_name.as_deref())
            .unwrap_or(DEFAULT_ANSWER_NAME)
    }

    /// The format a request carries: the prompt's own schema, or the registered type's, which
    /// `registered` looks up by name. `Err` says why there is none.
    pub fn resolve<'a>(
        &'a self,
        registered: impl FnOnce(&str) -> Option<&'a Value>,
    ) -> Result<OutputFormat<'a>, String> {
        let schema = match (&self.schema, &self.type_name) {
            (Some(schema), _) => schema,
            (None, Some(type_name)) => registered(type_name).ok_or_else(|| {
                format!(
                    "response_format names the output type {type_name:?}, which this Worker \
                     does not register (Catalog::schemas)"
                )
            })?,
            (None, None) => return Err("response_format has no schema".into()),
        };
        Ok(OutputFormat {
            name: self.answer_name(),
            schema,
        })
    }
}

/// Whether `name` is taken by every wire format as a schema's or a tool's name.
fn fits_a_wire_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> ResponseFormat {
        serde_json::from_value(v).unwrap()
    }

    fn refusal(v: Value, tools: &[&str], choice: ToolChoice) -> String {
        let tools: Vec<String> = tools.iter().map(|t| (*t).to_owned()).collect();
        parse(v).check(&tools, choice).unwrap_err().to_string()
    }

    #[test]
    fn a_schema_or_a_type_name_with_a_name_for_the_wire() {
        let schema = json!({ "type": "object", "properties": { "a": { "type": "string" } } });
        let f = parse(json!({ "schema": schema }));
        assert!(f.check(&[], ToolChoice::Auto).is_ok());
        assert_eq!(f.answer_name(), DEFAULT_ANSWER_NAME);
        let resolved = f.resolve(|_| None).unwrap();
        assert_eq!((resolved.name, resolved.schema), ("final_answer", &schema));

        let typed = parse(json!({ "type_name": "Triage" }));
        assert!(typed.check(&[], ToolChoice::None).is_ok());
        assert_eq!(typed.answer_name(), "Triage");
        let registered = json!({ "type": "object" });
        assert_eq!(
            typed
                .resolve(|n| (n == "Triage").then_some(&registered))
                .unwrap()
                .schema,
            &registered
        );
        assert!(typed
            .resolve(|_| None)
            .unwrap_err()
            .contains("does not register"));
        let named = parse(json!({ "type_name": "Triage", "name": "triage" }));
        assert_eq!(named.answer_name(), "triage");
    }

    #[test]
    fn bad_formats_are_refused_saying_why() {
        let object = json!({ "type": "object" });
        assert!(refusal(json!({}), &[], ToolChoice::Auto).contains("exactly one of"));
        assert!(refusal(
            json!({ "schema": object, "type_name": "T" }),
            &[],
            ToolChoice::Auto
        )
        .contains("exactly one of"));
        assert!(refusal(
            json!({ "schema": { "type": "array" } }),
            &[],
            ToolChoice::Auto
        )
        .starts_with("response_format: schema: the schema must describe a JSON object"));
        assert!(
            refusal(json!({ "type_name": "a b" }), &[], ToolChoice::Auto).contains("type_name")
        );
        assert!(refusal(
            json!({ "schema": object, "name": "x.y" }),
            &[],
            ToolChoice::Auto
        )
        .contains("name \"x.y\""));
        assert!(refusal(
            json!({ "schema": object, "name": "lookup" }),
            &["lookup"],
            ToolChoice::Auto
        )
        .contains("also one of the prompt's tools"));
        assert!(refusal(
            json!({ "schema": object }),
            &["lookup"],
            ToolChoice::Required
        )
        .contains("tool_choice \"required\""));
        let unknown: Result<ResponseFormat, _> =
            serde_json::from_value(json!({ "schema": object, "strict": true }));
        assert!(unknown.is_err(), "unknown fields are refused");
    }
}
