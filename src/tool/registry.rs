//! The set of tools compiled into this Worker (generated from `agents/tools/` by `build.rs`).

use super::Tool;
use crate::core::config::ToolSpec;

/// Every registered tool, by name.
#[derive(Debug, Default)]
pub struct Registry {
    tools: Vec<(&'static str, Tool)>,
}

impl Registry {
    /// The tools discovered in `agents/tools/` at build time.
    pub fn discovered() -> Self {
        Registry {
            tools: crate::generated::TOOLS
                .iter()
                .map(|(name, build)| (*name, build()))
                .collect(),
        }
    }

    /// A registry of the given tools (for tests and embedding).
    pub fn from_tools(tools: Vec<(&'static str, Tool)>) -> Self {
        Registry { tools }
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
                    })
            })
            .collect()
    }

    /// Every tool's spec, for `GET /api/tools`.
    pub fn all_specs(&self) -> Vec<ToolSpec> {
        self.specs(self.names().collect::<Vec<_>>())
    }
}
