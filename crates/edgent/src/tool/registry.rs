//! The set of tools of this Worker, built and checked from the tables an app's build wrote
//! (`agents/tools/`, `agents/workflows/`); [`crate::Catalog::registry`] builds it.

use serde_json::Value;

use super::prebuilt::Prebuilt;
use super::{Invalid, Tool, ToolConstructor};
use crate::llm::ToolSpec;
use crate::values::json_schema::check_schema;

/// An output type of the app: its name (what a prompt's `response_format.type_name` says) and
/// a function giving its JSON Schema (`edgent::tool::schema::schema_for::<T>`).
pub type OutputType = (&'static str, fn() -> Value);

/// Every registered tool, by name, and the app's output types.
#[derive(Debug, Default)]
pub struct Registry {
    tools: Vec<(&'static str, Tool)>,
    /// Output types with their schemas, built and checked once.
    schemas: Vec<(&'static str, Value)>,
}

/// Tools whose definitions cannot be offered to a model, each with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryError {
    /// `(tool name, problem)` pairs.
    pub problems: Vec<(String, Invalid)>,
    /// The tools among them that are TOML workflows (for the file named in messages).
    toml: Vec<String>,
    /// The names among them that are output types, not tools.
    schemas: Vec<String>,
}

impl std::fmt::Display for RegistryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let lines: Vec<String> = self
            .problems
            .iter()
            .map(|(tool, why)| {
                if tool.is_empty() {
                    return why.to_string();
                }
                if self.schemas.contains(tool) {
                    return format!("output type `{tool}` (Catalog::schemas): {why}");
                }
                let file = if self.toml.contains(tool) {
                    format!("agents/workflows/{tool}.toml")
                } else {
                    format!("agents/tools/{tool}.rs")
                };
                format!("tool `{tool}` ({file}): {why}")
            })
            .collect();
        f.write_str(&lines.join("; "))
    }
}

impl std::error::Error for RegistryError {}

impl RegistryError {
    /// A problem of the whole catalogue rather than of one tool (the message says which).
    pub(crate) fn whole(why: Invalid) -> Self {
        RegistryError {
            problems: vec![(String::new(), why)],
            toml: Vec::new(),
            schemas: Vec::new(),
        }
    }
}

impl Registry {
    /// The tools and workflows an app's build found (`agents/tools/*.rs`,
    /// `agents/workflows/*.rs` and `agents/workflows/*.toml` as `(name, JSON)`), checked.
    pub fn from_tables(
        constructors: &[(&'static str, ToolConstructor)],
        toml_workflows: &[(&'static str, &'static str)],
    ) -> Result<Self, RegistryError> {
        Self::from_tables_with(constructors, toml_workflows, None)
    }

    /// [`Registry::from_tables`], with the schemas a `prebuilt-schemas` build was given put
    /// in the tools' placeholders before the checks.
    pub(crate) fn from_tables_with(
        constructors: &[(&'static str, ToolConstructor)],
        toml_workflows: &[(&'static str, &'static str)],
        prebuilt: Option<&Prebuilt>,
    ) -> Result<Self, RegistryError> {
        let toml: Vec<String> = toml_workflows
            .iter()
            .map(|(n, _)| (*n).to_owned())
            .collect();
        let mut tools: Vec<(&'static str, Tool)> = constructors
            .iter()
            .map(|(name, build)| (*name, build()))
            .collect();
        let mut problems = Vec::new();
        if let Some(prebuilt) = prebuilt {
            for (name, tool) in &mut tools {
                if let Err(why) = prebuilt.fill(name, tool) {
                    problems.push(((*name).to_owned(), why));
                }
            }
        }
        for (name, json) in toml_workflows {
            match Tool::from_workflow_json(json) {
                Ok(tool) => tools.push((name, tool)),
                Err(why) => problems.push(((*name).to_owned(), why)),
            }
        }
        if !problems.is_empty() {
            return Err(RegistryError {
                problems,
                toml,
                schemas: Vec::new(),
            });
        }
        tools.sort_by_key(|(name, _)| *name);
        Self::build(tools).map_err(|e| RegistryError { toml, ..e })
    }

    /// A registry of the given tools, refusing any whose definition is broken (no handler,
    /// a refine rule over the wrong type, arguments that are not an object or nest too deep).
    pub fn build(tools: Vec<(&'static str, Tool)>) -> Result<Self, RegistryError> {
        let problems: Vec<(String, Invalid)> = tools
            .iter()
            .filter_map(|(name, tool)| tool.check().err().map(|why| ((*name).to_owned(), why)))
            .collect();
        if problems.is_empty() {
            Ok(Registry {
                tools,
                schemas: Vec::new(),
            })
        } else {
            Err(RegistryError {
                problems,
                toml: Vec::new(),
                schemas: Vec::new(),
            })
        }
    }

    /// This registry with the app's output types, each schema built once and checked as a
    /// prompt's own would be (an object schema in the subset edgent validates), so a type no
    /// answer could be checked against never ships.
    pub fn with_schemas(self, types: &[OutputType]) -> Result<Self, RegistryError> {
        self.with_schemas_from(types, None)
    }

    /// [`Registry::with_schemas`], taking each schema a `prebuilt-schemas` build left as a
    /// placeholder from the file it was given.
    pub(crate) fn with_schemas_from(
        mut self,
        types: &[OutputType],
        prebuilt: Option<&Prebuilt>,
    ) -> Result<Self, RegistryError> {
        let mut problems = Vec::new();
        for (name, schema_of) in types {
            let schema = match (schema_of(), prebuilt) {
                (Value::Null, Some(prebuilt)) => match prebuilt.output(name) {
                    Ok(schema) => schema,
                    Err(why) => {
                        problems.push(((*name).to_owned(), why));
                        continue;
                    }
                },
                (schema, _) => schema,
            };
            match check_schema(&schema) {
                Ok(()) => self.schemas.push((name, schema)),
                Err(why) => problems.push(((*name).to_owned(), why)),
            }
        }
        if problems.is_empty() {
            return Ok(self);
        }
        Err(RegistryError {
            schemas: problems.iter().map(|(n, _)| n.clone()).collect(),
            problems,
            toml: Vec::new(),
        })
    }

    /// The JSON Schema of the output type `name`.
    pub fn output_schema(&self, name: &str) -> Option<&Value> {
        self.schemas
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, s)| s)
    }

    /// The output types' names, in registration order.
    pub fn output_types(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.schemas.iter().map(|(n, _)| *n)
    }

    /// Looks a tool up by name.
    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|(n, _)| *n == name).map(|(_, t)| t)
    }

    /// Names in registration (alphabetical) order.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.tools.iter().map(|(n, _)| *n)
    }

    /// Model-facing descriptions of the tools named in `names` (unknown names are skipped),
    /// without their result schemas: providers have no field for them, and every model call
    /// builds these.
    pub fn specs<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> Vec<ToolSpec> {
        self.specs_with(names, false)
    }

    fn specs_with<'a>(
        &self,
        names: impl IntoIterator<Item = &'a str>,
        with_returns: bool,
    ) -> Vec<ToolSpec> {
        names
            .into_iter()
            .filter_map(|n| {
                self.tools
                    .iter()
                    .find(|(name, _)| *name == n)
                    .map(|(name, t)| ToolSpec {
                        name: (*name).to_owned(),
                        description: t.description().to_owned(),
                        parameters: t.shared_parameters(),
                        returns: t.returns().filter(|_| with_returns).cloned(),
                    })
            })
            .collect()
    }

    /// Every tool's spec with its result schema, for `GET /api/tools`.
    pub fn all_specs(&self) -> Vec<ToolSpec> {
        self.specs_with(self.names().collect::<Vec<_>>(), true)
    }
}

impl crate::engine::thread::ToolIndex for Registry {
    fn tool_names(&self) -> Vec<&str> {
        self.names().collect()
    }

    fn check_arguments(
        &self,
        name: &str,
        arguments: serde_json::Value,
    ) -> Option<Result<(), Invalid>> {
        self.get(name).map(|tool| tool.validate(arguments))
    }

    fn tool_policy(&self, name: &str) -> Option<crate::values::ToolPolicy> {
        self.get(name).map(|tool| tool.policy().clone())
    }
}
