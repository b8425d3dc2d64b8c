//! Host tests: the pure core against real SQLite (rusqlite, same schema and SQL as the Durable
//! Object) and raw provider bytes. No Worker, no network, no clock: time is passed in.
//!
//! What they prove: storage, paging, the turn state machine (including crash recovery and
//! model failures), the OpenAI stream parser, tool and hook discovery rules and the hook
//! runners. What they do not: the Worker glue (router, WebSockets, alarms, D1) — that is
//! `tests/e2e/`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

mod access;
mod admin;
mod adversarial;
mod anthropic_request;
mod anthropic_stream;
mod chunk_window;
mod config_db;
mod config_resolve;
mod config_version;
mod conversation;
mod discovery;
mod docs_examples;
mod durable;
mod embeddings;
mod engine;
mod engine_props;
mod feature_tables;
mod first_run;
mod flow_host;
mod frame_log;
mod history_budget;
mod history_cache;
mod hooks;
mod live_chunks;
mod llm_conformance;
mod model_chain;
mod offer;
mod openai_stream;
mod protocol_schema;
mod regenerate;
mod request_memo;
mod runtime;
mod schedules;
mod sqlite;
mod statements;
mod store;
mod sub_prompt;
mod thread_index;
mod toml_workflows;
mod tools;
mod utilities;
mod workers_ai;

/// Installs the example app's catalogue (its tools, workflows and hooks) for the framework
/// code under test; every test that needs the app's code calls this (or [`registry`]) first.
fn install_app() {
    edgent_example::APP.install();
}

/// The example app's tools, built and checked.
fn registry() -> Result<edgent::tool::Registry, edgent::tool::RegistryError> {
    install_app();
    edgent_example::APP.registry()
}
