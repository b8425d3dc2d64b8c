//! Durable tool calls in virtual time: retries with backoff, timeouts, workflow replay with
//! sleeps and webhooks, approvals, rate limits, result caching and whole-run deadlines, and how
//! parked calls shape the turn. The host is the shipped harness (`edgent::testing::TestHost`):
//! it performs what the engine asks (runs tools, a run still pending with nothing left to wake
//! it has hit its timeout; answers the deployment counter) and hands the outcomes back; every
//! decision is the engine's, over real SQLite.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use edgent::engine::durable::{
    cache_key, deliver_webhook, deployment_gate, settle, tool_status, CallStatus, Gate, Ran,
    Settle, Suspension, WebhookRefusal, Window,
};
use edgent::engine::store::{Order, StoredToolCall, ThreadStatus};
use edgent::engine::thread::{Action, ModelCall, Thread, ThreadError};
use edgent::engine::tool_records::ToolCallRecord;
use edgent::engine::tool_runs::Admission;
use edgent::engine::wake::CONFIG_RETRY_MS;
use edgent::testing::TestHost;
use edgent::tool::{
    CallToolResult, FlowState, RateLimit, Registry, RetryPolicy, Tool, ToolError, ToolPolicy,
    WebhookEvent,
};
use edgent::values::message::Role;
use edgent::values::protocol::ServerFrame;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Map, Value};

const T0: i64 = 1_795_300_162_000;
const MAX_STEPS: u32 = 10;
const PUBLIC_URL: &str = "https://agents.example";

// ---- the host: the shipped harness (edgent::testing) with this file's helpers ------------

type Clock = Rc<Cell<i64>>;

fn clock() -> Clock {
    Rc::new(Cell::new(T0))
}

/// A host whose thread may run `tools`, on the shared virtual clock, with a public URL for
/// webhook links.
fn host(clock: &Clock, tools: Vec<(&'static str, Tool)>) -> Rc<TestHost> {
    TestHost::with_clock(Registry::build(tools).unwrap(), clock.clone())
        .var("PUBLIC_URL", PUBLIC_URL)
        .into_rc()
}

/// Reads of what the engine stored, for assertions.
trait Stored {
    fn policy(&self, name: &str) -> ToolPolicy;
    fn call(&self, id: &str) -> StoredToolCall;
    fn record(&self, id: &str) -> ToolCallRecord;
    fn next_wake(&self) -> Option<i64>;
    fn status(&self) -> ThreadStatus;
    fn queue(&self, name: &str, args: Value) -> String;
    fn tool_statuses(&self, id: &str) -> Vec<String>;
}

impl Stored for TestHost {
    fn policy(&self, name: &str) -> ToolPolicy {
        self.registry.get(name).unwrap().policy().clone()
    }

    fn call(&self, id: &str) -> StoredToolCall {
        self.store().tool_call(id).unwrap().unwrap()
    }

    fn record(&self, id: &str) -> ToolCallRecord {
        self.store()
            .tool_call_page(200, 0, Order::Asc)
            .unwrap()
            .tool_calls
            .into_iter()
            .find(|c| c.id == id)
            .unwrap()
    }

    fn next_wake(&self) -> Option<i64> {
        self.store().next_wake().unwrap()
    }

    fn status(&self) -> ThreadStatus {
        self.thread().summary().unwrap().status
    }

    /// Queues a call as a tool or a client would.
    fn queue(&self, name: &str, args: Value) -> String {
        let mut t = self.thread();
        let id = t
            .queue_tool(self.now(), &self.registry, name, args)
            .unwrap();
        self.keep_frames(&mut t);
        id
    }

    /// The statuses the `tool` frames announced for one call, in order.
    fn tool_statuses(&self, id: &str) -> Vec<String> {
        self.frames()
            .iter()
            .filter_map(|f| match f {
                ServerFrame::Tool {
                    tool_call_id,
                    status,
                    ..
                } if tool_call_id == id => Some(status.as_str().to_owned()),
                _ => None,
            })
            .collect()
    }
}

/// Drives the thread until it needs the model or has nothing to do.
fn drive(h: &Rc<TestHost>, jitter: f64) -> Action {
    h.drive(jitter)
}

fn drive_idle(h: &Rc<TestHost>) {
    drive_idle_with(h, 0.5);
}

fn drive_idle_with(h: &Rc<TestHost>, jitter: f64) {
    match drive(h, jitter) {
        Action::Idle => {}
        other => panic!("expected the thread to go idle, got {other:?}"),
    }
}

fn expect_model(h: &Rc<TestHost>) -> ModelCall {
    match drive(h, 0.5) {
        Action::CallModel(call) => call,
        other => panic!("expected a model call, got {other:?}"),
    }
}

/// Completes a model call with `text` and tool calls `(id, name, raw arguments)`.
fn reply(h: &TestHost, call: ModelCall, text: &str, calls: &[(&str, &str, &str)]) {
    h.reply(call, text, calls);
}

/// Posts a user message and answers the model call it causes with these tool calls.
fn model_calls(h: &Rc<TestHost>, calls: &[(&str, &str, &str)]) {
    let mut t = h.thread();
    t.post_user_message(h.now(), "please").unwrap();
    h.keep_frames(&mut t);
    let call = expect_model(h);
    reply(h, call, "", calls);
}

fn result_of(h: &TestHost, id: &str) -> String {
    h.record(id).result.unwrap_or_default()
}

// ---- tools ---------------------------------------------------------------------------------

fn counter() -> Rc<Cell<u32>> {
    Rc::new(Cell::new(0))
}

/// A step tool that counts its runs and answers `outcome(run number)`.
fn step_tool(
    runs: &Rc<Cell<u32>>,
    outcome: impl Fn(u32) -> Result<String, ToolError> + 'static,
) -> Tool {
    let runs = runs.clone();
    let outcome = Rc::new(outcome);
    Tool::new("A step tool.").handler(move |_flow: FlowState| {
        let runs = runs.clone();
        let outcome = outcome.clone();
        async move {
            runs.set(runs.get() + 1);
            outcome(runs.get())
        }
    })
}

/// A workflow that sleeps `secs` then answers `rested`, counting the runs that woke.
fn napper(secs: u64, woke: &Rc<Cell<u32>>) -> Tool {
    let woke = woke.clone();
    Tool::new("Naps.").handler(move |flow: FlowState| {
        let woke = woke.clone();
        async move {
            flow.sleep("nap", Duration::from_secs(secs)).await?;
            woke.set(woke.get() + 1);
            Ok::<_, ToolError>("rested".to_owned())
        }
    })
}

fn ok_tool(runs: &Rc<Cell<u32>>) -> Tool {
    step_tool(runs, |_| Ok("done".to_owned()))
}

mod failures;
mod gates;
mod nested;
mod races;
mod turn;
mod versions;
mod workflows;
