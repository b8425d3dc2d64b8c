//! The edgent example app: the `support` and `review` agents with their tools, workflows and
//! hooks in `agents/`. `build.rs` finds them; this file hands them to the Worker driver.

// The catalogue generated from `agents/`: `tools::<name>`, `hooks::<name>` and `CATALOG`.
include!(concat!(env!("OUT_DIR"), "/agents.rs"));

#[cfg(target_arch = "wasm32")]
edgent_worker::serve!(CATALOG);

/// The Rust examples in docs/ and the README compile as doctests of the example app, which
/// has the tools and hooks they name. Fragments (a builder chain, a signature) are fenced
/// `rust,ignore`; examples that need a running thread are `rust,no_run`.
#[cfg(doctest)]
mod docs {
    #[doc = include_str!("../README.md")]
    struct Readme;
    #[doc = include_str!("../docs/tools.md")]
    struct Tools;
    #[doc = include_str!("../docs/durable-tools.md")]
    struct DurableTools;
    #[doc = include_str!("../docs/hooks.md")]
    struct Hooks;
    #[doc = include_str!("../docs/agents.md")]
    struct Agents;
}
