//! The engine: the thread state machine, the only code that changes a thread's state.
//!
//! Inputs are `handle_*` methods and client commands on [`thread::Thread`]; outputs are the
//! next [`thread::Action`], the frames drained with `poll_frame` and the next wake-up time
//! ([`thread::Thread::poll_timeout`]). Time (`now`) and randomness (`jitter`) are passed in;
//! storage goes through the [`crate::values::sql::Sql`] seam. See `docs/architecture.md` for
//! the order of calls.

pub mod durable;
pub mod frame_log;
pub mod model_chain;
pub mod request_log;
pub mod retry;
pub mod schema;
pub mod store;
pub mod structured;
pub mod thread;
pub mod tool_records;
pub mod tool_runs;
pub mod wake;
