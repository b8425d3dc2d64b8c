//! The edgent example app: the `support` and `review` agents with their tools, workflows and
//! hooks in `agents/`. `build.rs` finds them; this file hands them to the Worker driver.

// The catalogue generated from `agents/`: `tools::<name>`, `hooks::<name>` and `CATALOG`.
include!(concat!(env!("OUT_DIR"), "/agents.rs"));

#[cfg(target_arch = "wasm32")]
edgent_worker::serve!(CATALOG);
