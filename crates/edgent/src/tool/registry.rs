//! The set of tools of this Worker, built and checked from the tables an app's build wrote
//! (`agents/tools/`, `agents/workflows/`); [`crate::Catalog::registry`] builds it.

use super::{Invalid, Tool, ToolConstructor};
use crate::llm::ToolSpec;

/// Every registered tool, by name.
#[derive(Debug, Default)]
pub struct Registry {
    tools: Vec<(&'static str, Tool)>,
}

/// Tools whose definitions cannot be offered to a model, each with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryError {
    /// `(tool name, problem)` pairs.
    pub problems: Vec<(String, Invalid)>,
    /// The tools among them that are TOML workflows (for the file named in messages).
    toml: Vec<String>,
}

impl std::fmt::Display for RegistryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let lines: Vec<String> = self
            .problems
            .iter()
            .map(|(tool, why)| {
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

impl Registry {
    /// The tools and workflows an app's build found (`agents/tools/*.rs`,
    /// `agents/workflows/*.rs` and `agents/workflows/*.toml` as `(name, JSON)`), checked.
    pub fn from_tables(
        constructors: &[(&'static str, ToolConstructor)],
        toml_workflows: &[(&'static str, &'static str)],
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
        for (name, json) in toml_workflows {
            match Tool::from_workflow_json(json) {
                Ok(tool) => tools.push((name, tool)),
                Err(why) => problems.push(((*name).to_owned(), why)),
            }
        }
        if !problems.is_empty() {
            return Err(RegistryError { problems, toml });
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
            Ok(Registry { tools })
        } else {
            Err(RegistryError {
                problems,
                toml: Vec::new(),
            })
        }
    }

    /// Looks a tool up by name.
    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|(n, _)| *n == name).map(|(_, t)| t)
    }

    /// Names in registration (alphabetical) order.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.tools.iter().map(|(n, _)| *n)
    }

    /// Model-facing descriptions of the tools named in `names` (unknown names are skipped).
    pub fn specs<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> Vec<ToolSpec> {
        names
            .into_iter()
            .filter_map(|n| {
                self.tools
                    .iter()
                    .find(|(name, _)| *name == n)
                    .map(|(name, t)| ToolSpec {
                        name: (*name).to_owned(),
                        description: t.description().to_owned(),
                        parameters: t.parameters().clone(),
                        returns: t.returns().cloned(),
                    })
            })
            .collect()
    }

    /// Every tool's spec, for `GET /api/tools`.
    pub fn all_specs(&self) -> Vec<ToolSpec> {
        self.specs(self.names().collect::<Vec<_>>())
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
