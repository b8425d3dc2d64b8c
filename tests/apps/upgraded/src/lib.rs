//! The example app after a deploy that changed two workflows (tests/e2e/upgrade.test.mjs): a
//! call parked by the example app's build resumes here, on the handler kept for its version or
//! with the `workflow_version_changed` error result.

// The catalogue generated from `agents/` by build.rs.
include!(concat!(env!("OUT_DIR"), "/agents.rs"));

#[cfg(target_arch = "wasm32")]
edgent_worker::serve!(CATALOG);
