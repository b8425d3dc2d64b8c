//! A minimal edgent app: one tool in `agents/tools/`, one agent in `agents/agents/`.

// The catalogue generated from `agents/` by build.rs: `tools::say_hello` and `CATALOG`.
include!(concat!(env!("OUT_DIR"), "/agents.rs"));

#[cfg(target_arch = "wasm32")]
edgent_worker::serve!(CATALOG);

// The tools' JSON Schemas for the Worker, written on the host before each wasm build.
edgent::export_schemas!(CATALOG);

/// docs/getting-started.md starts from this app: its Rust examples compile as this crate's
/// doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/getting-started.md")]
struct GettingStarted;
