//! The pure core: everything about a thread that does not need a Worker.
//!
//! Nothing in here touches `worker` types, the network or the clock. Time comes in as a
//! `now` argument (milliseconds since the Unix epoch), SQL goes through the [`sql::Sql`]
//! trait (Durable Object SQLite in the Worker, rusqlite on the host) and model bytes are
//! fed in by whoever owns the connection. That is what lets `cargo test` drive whole
//! conversations on the host, in virtual time, against the same SQL the Durable Object runs.

pub mod admin;
pub mod anthropic;
pub mod api;
pub mod config;
pub mod durable;
pub mod ids;
pub mod message;
pub mod model_chain;
pub mod openai;
pub mod ops;
pub mod protocol;
pub mod provider;
pub mod request_log;
pub mod retry;
pub mod schema;
pub mod sql;
pub mod sse;
pub mod store;
pub mod stream;
pub mod thread;
pub mod time;
pub mod tool_name;
pub mod tool_records;
pub mod tool_runs;
pub mod wake;
pub mod workers_ai;
