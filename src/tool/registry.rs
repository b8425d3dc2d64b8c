//! The set of tools compiled into this Worker (generated from `agents/tools/` by `build.rs`).

use super::Tool;
use crate::core::config::ToolSpec;

/// Every registered tool, by name.
#[derive(Debug, Default)]
pub struct Registry {
    tools: Vec<(&'static str, Tool)>,
}

/// Tools whose definitions cannot be offered to a model, each with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryError {
    /// `(tool name, problem)` pairs.
    pub problems: Vec<(String, String)>,
}

impl std::fmt::Display for RegistryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let lines: Vec<String> = self
            .problems
            .iter()
            .map(|(tool, why)| format!("tool `{tool}` (agents/tools/{tool}.rs): {why}"))
            .collect();
        f.write_str(&lines.join("; "))
    }
}

impl std::error::Error for RegistryError {}

impl Registry {
    /// The tools discovered in `agents/tools/` at build time, checked.
    pub fn discovered() -> Result<Self, RegistryError> {
        Self::build(
            crate::generated::TOOLS
                .iter()
                .map(|(name, build)| (*name, build()))
                .collect(),
        )
    }

    /// A registry of the given tools, refusing any whose definition is broken (no handler,
    /// a refine rule over the wrong type, arguments that are not an object or nest too deep).
    pub fn build(tools: Vec<(&'static str, Tool)>) -> Result<Self, RegistryError> {
        let problems: Vec<(String, String)> = tools
            .iter()
            .filter_map(|(name, tool)| tool.check().err().map(|why| ((*name).to_owned(), why)))
            .collect();
        if problems.is_empty() {
            Ok(Registry { tools })
        } else {
            Err(RegistryError { problems })
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
