//! Host tests for edgent and for apps built on it: the shipped engine over real SQLite, in
//! virtual time, with one fake host. Enable with the `testing` feature (in
//! `[dev-dependencies]`: `edgent = { …, features = ["testing"] }`).
//!
//! [`TestHost`] holds a thread's database (rusqlite running the Durable Object's statements),
//! a registry, a virtual clock, the frames sent, and the answers of the world outside (secrets,
//! vars, the deployment rate limiter). [`TestHost::drive`] does what the Worker does between
//! model calls: it asks the engine for the next action and runs the tool calls through the
//! shipped runtime (a run still pending after the futures settle has hit its timeout, and
//! that much virtual time passes), until the engine needs the model, waits or goes idle.
//! [`TestHost::reply`] answers a model call.
//!
//! The host is also the runtime's platform: [`TestHost::runtime`] gives the thread runtime the
//! Worker uses, [`TestHost::script`] queues the model's answers, [`TestHost::run`] performs an
//! operation in virtual time and [`TestHost::run_spawned`] drives the turn it started.
//!
//! A crash needs no special code: everything is in SQLite, so a test "crashes" by dropping
//! its `Thread` or a pending `ModelCall` and driving again.
//!
//! ```
//! use edgent::testing::TestHost;
//! use edgent::engine::thread::Action;
//! use edgent::prelude::*;
//!
//! fn hello() -> Tool {
//!     Tool::new("Greets.").handler(|_flow: FlowState| async { CallToolResult::text("hi") })
//! }
//!
//! let registry = edgent::tool::Registry::build(vec![("hello", hello())]).unwrap();
//! let host = TestHost::new(registry, 1_700_000_000_000).into_rc();
//! host.thread().post_user_message(host.now(), "greet me").unwrap();
//! let Action::CallModel(call) = host.drive(0.5) else { panic!("the model is owed a call") };
//! host.reply(call, "", &[("c1", "hello", "{}")]);
//! let Action::CallModel(call) = host.drive(0.5) else { panic!("the result goes back") };
//! host.reply(call, "Done.", &[]);
//! assert!(matches!(host.drive(0.5), Action::Idle));
//! ```

pub mod adversarial;
mod d1;
mod embedder;
mod host;
mod platform;
mod sqlite;

pub use crate::engine::thread::{Action, ModelCall};
pub use d1::SqliteD1;
pub use embedder::{EmbedAnswer, ToyEmbedder};
pub use host::{agent, block_on, reply_events, Meanwhile, StaleConfig, TestHost};
pub use sqlite::Sqlite;
