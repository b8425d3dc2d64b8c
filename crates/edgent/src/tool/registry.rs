//! The set of tools of this Worker: the app's [`Catalog`] (found by `edgent-build` in
//! `agents/tools/` and `agents/workflows/`), built and checked.

use super::Tool;
use crate::core::config::ToolSpec;
use crate::Catalog;

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
            .map(|(tool, why)| format!("tool `{tool}` ({}): {why}", source_file(tool)))
            .collect();
        f.write_str(&lines.join("; "))
    }
}

impl std::error::Error for RegistryError {}

/// Where a tool is defined, for messages.
fn source_file(name: &str) -> String {
    if Catalog::installed().is_toml_workflow(name) {
        format!("agents/workflows/{name}.toml")
    } else {
        format!("agents/tools/{name}.rs")
    }
}

impl Registry {
    /// The tools and workflows of the installed [`Catalog`] (see [`Registry::from_catalog`]).
    pub fn discovered() -> Result<Self, RegistryError> {
        Self::from_catalog(Catalog::installed())
    }

    /// The tools and workflows an app's build found (`agents/tools/*.rs`,
    /// `agents/workflows/*.rs` and `agents/workflows/*.toml`), checked.
    pub fn from_catalog(catalog: &Catalog) -> Result<Self, RegistryError> {
        let mut tools: Vec<(&'static str, Tool)> = catalog
            .tools
            .iter()
            .map(|(name, build)| (*name, build()))
            .collect();
        let mut problems = Vec::new();
        for (name, json) in catalog.toml_workflows {
            match Tool::from_workflow_json(json) {
                Ok(tool) => tools.push((name, tool)),
                Err(why) => problems.push(((*name).to_owned(), why)),
            }
        }
        if !problems.is_empty() {
            return Err(RegistryError { problems });
        }
        tools.sort_by_key(|(name, _)| *name);
        Self::build(tools)
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
