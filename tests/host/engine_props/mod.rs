//! The engine as a state machine under random interleavings (issue 13, the adversarial layer).
//!
//! A proptest generates sequences of operations and applies them to one thread through the
//! shipped engine, on `edgent::testing::TestHost` (real SQLite with the Durable Object's length
//! limit, virtual time); tool calls run through the runtime's own runner
//! (`ThreadRuntime::run_tool_calls`). The driver here is the Durable Object's loop taken one
//! step at a time, so anything can happen between two steps: client operations while the
//! model streams, a crash at any statement, a clock jump. Each case draws its agent (ai_human
//! or dual_ai, parallel calls or not, a history budget, `max_steps`, `max_turns`, a stop tool)
//! and a palette of a few tools its calls use, so calls of one tool meet.
//!
//! Operations: user messages; `queue_tool` (known, unknown and invalid); `inject_message` of
//! every role at any position (tool messages naming real, unknown or no calls; taken ids;
//! silent); one step of the loop (a model call is kept in flight, tool calls run); the model's
//! reply (text of any size up to past `MAX_REPLY_BYTES`; tool calls with fresh, empty,
//! repeated, reused, 1 MB and odd ids, unknown, nameless and 1 MB names, empty, broken,
//! non-object, huge and escape-heavy arguments; more than `MAX_TOOL_CALLS_PER_REPLY` calls;
//! cut streams); provider failures (after partial text) and retried attempts; tool outcomes
//! (success, retryable and fatal errors, long errors, oversized results and step values,
//! timeouts, slow runs, durable sleeps of any length, webhook waits, approvals, rate limits per
//! thread and per deployment, cached results, a tool that queues, injects and forces a turn
//! while it runs, a tool that kills the Worker whenever it runs); webhooks (right and wrong
//! tokens, JSON or not); approvals and rejections; `stop`; `force_turn`; clock jumps (ms to two
//! years); a crash (the object's memory and the model call in flight dropped); a crash at the
//! n-th statement of any of these (that statement and every later one fail, as if the process
//! died there; a batch is atomic); and "settle". Each case ends with a crash (a stop before or
//! after it, sometimes), then settles.
//!
//! Invariants, after every operation: every finished call has exactly one result message (the
//! engine's; injected `tool` messages aside) and its row points at it, an unfinished call none;
//! every call is listed by the completed assistant reply it belongs to, and every listed call
//! has its row; call ids are unique across the thread; no result names no call; at most one
//! reply is pending (the one in flight); no stored text passes its documented cap; SQLite
//! never refused a statement as too big outside the one batch that handles it
//! (`store_reply`); the engine answers no storage error and the runtime logs none unless a
//! crash was injected. At every model call: the history is valid for every provider (each
//! assistant tool call followed by exactly its results, no result without its call, ids
//! unique; the OpenAI, Anthropic and Workers AI bodies built from it pair every call with its
//! results, the Anthropic one alternating from a user turn with unique, allowed wire ids).
//! `Wait` always has a wake time or a call awaiting approval. Settling (the model answers with
//! text, approvals are given, the clock moves to each wake time as the runtime's alarm would,
//! and a step is taken only when `step_wanted` says so) reaches a resting thread — not
//! running, no call without a result, no pending reply — within 200 steps plus 8 per open call.
//! Over a run, every kind of outcome listed in [`REACHED`] must occur in some case, so the
//! generators cannot quietly stop reaching them.
//!
//! What it does not prove: the runtime's own loop (`drive`, the model chain and its delays,
//! the alarm itself), sub-prompts and child threads, hooks, frames, crashes inside a tool's own
//! writes (tools write through the host's SQLite, outside the crash injection). See
//! docs/testing.md.
//!
//! Reproduce a failure: the panic message holds the minimal case (agent and operations);
//! `PROPTEST_RNG_SEED` and `PROPTEST_CASES` explore other cases (a run uses seed [`SEED`] and
//! [`CASES`] cases unless they are set), and a case found once stays in `regressions.rs` as a
//! plain test.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use proptest::prelude::*;
use serde_json::{json, Value};

use edgent::config::AgentConfig;
use edgent::engine::store::{Side, ThreadStatus};
use edgent::engine::thread::{Action, InjectMessage, ModelCall, Thread, TurnRules};
use edgent::llm::stream::StreamEvent;
use edgent::testing::TestHost;
use edgent::values::limits::{MAX_CONTENT_BYTES, MAX_REPLY_BYTES, MAX_TOOL_CALLS_PER_REPLY};
use edgent::values::message::Role;

mod agent;
mod history;
mod invariants;
mod ops;
mod regressions;
mod steps;
mod storage;
mod tools;
mod world;

use agent::{agent_config, setup, Setup};
use history::check_history;
use ops::{
    op, text, tool, Args, CallRef, CallSpec, End, IdKind, Jump, Op, ReplySpec, Size, LONG_ID,
    LONG_NAME,
};
use storage::Storage;
use tools::{registry, NS, TOOLS};
use world::{answered, new_world, World};

const T0: i64 = 1_795_300_162_000;
const PUBLIC_URL: &str = "https://agents.example";
/// Engine steps settling may take, plus [`STEPS_PER_OPEN_CALL`] per call still open.
const SETTLE_STEPS: usize = 200;
const STEPS_PER_OPEN_CALL: usize = 8;
/// Ids of messages this test injects (as a client or from a tool), to tell them from the
/// engine's own.
const INJECTED: &str = "inj-";

// ---- the property ---------------------------------------------------------------------------

/// Applies `ops` to a fresh thread under `setup`, checking the invariants after each, then
/// settles and checks that the thread rests.
fn run_case(setup: &Setup, ops: &[Op]) {
    let mut w = new_world(setup);
    for op in ops {
        w.apply(op);
        w.check();
    }
    let stop = |w: &mut World| {
        let now = w.now();
        let mut t = w.client();
        let _ = t.stop(now, "user");
        w.keep(&mut t);
    };
    if setup.finale == 1 {
        stop(&mut w);
    }
    w.crash();
    if setup.finale == 2 {
        stop(&mut w);
    }
    w.check();
    w.settle();
    w.check();
    tally("settled to rest");
    w.tally_case();
}

/// Cases per `cargo test` run, unless `PROPTEST_CASES` says otherwise.
const CASES: u32 = 256;
/// The seed of a `cargo test` run (so it explores the same cases every time), unless
/// `PROPTEST_RNG_SEED` says otherwise.
const SEED: u64 = 13;

fn config() -> ProptestConfig {
    let from_env = ProptestConfig::default();
    let set = |name: &str| std::env::var_os(name).is_some();
    ProptestConfig {
        cases: if set("PROPTEST_CASES") {
            from_env.cases
        } else {
            CASES
        },
        rng_seed: if set("PROPTEST_RNG_SEED") {
            from_env.rng_seed
        } else {
            proptest::test_runner::RngSeed::Fixed(SEED)
        },
        failure_persistence: None,
        ..from_env
    }
}

/// What the cases reached, tallied over a run: each must be reached at least once, or the
/// generators have stopped exercising it (checked at the default case count and up).
const REACHED: &[&str] = &[
    "model call",
    "reply with calls",
    "reply refused while streaming",
    "reply failed at its end",
    "provider id replaced",
    "call waits (Wait)",
    "tool: success",
    "tool: retried, gave up",
    "tool: fatal error cut",
    "tool: timed out",
    "tool: result over the cap",
    "tool: step value over the cap",
    "tool: slept and woke",
    "tool: webhook delivered",
    "tool: webhook timed out",
    "tool: approved",
    "tool: rejected",
    "tool: rate limited",
    "tool: cached",
    "tool: meddled",
    "tool: unknown",
    "tool: invalid arguments",
    "tool: abandoned after interruptions",
    "tool: cancelled by a stop",
    "injected result of no call",
    "stopped by user",
    "stopped by max_turns",
    "stopped by stop_tool",
    "dual_ai side b spoke",
    "crash at a statement",
    "settled to rest",
];

thread_local! {
    static TALLY: RefCell<HashMap<&'static str, u32>> = RefCell::new(HashMap::new());
}

fn tally(what: &'static str) {
    TALLY.with(|t| *t.borrow_mut().entry(what).or_default() += 1);
}

impl World {
    /// Tallies what this case reached, from what it stored.
    fn tally_case(&self) {
        let count = |sql: &str| -> i64 { self.host.db.0.query_row(sql, [], |r| r.get(0)).unwrap() };
        let results = |pattern: &str| {
            count(&format!(
                "SELECT COUNT(*) FROM messages WHERE role = 'tool' AND id NOT LIKE '{INJECTED}%' AND content LIKE '{pattern}'"
            ))
        };
        let checks: &[(&'static str, i64)] = &[
            ("tool: success", count("SELECT COUNT(*) FROM tool_calls WHERE status = 'success'")),
            ("tool: retried, gave up", results("%gave up after%")),
            ("tool: fatal error cut", results("%cut at%")),
            ("tool: timed out", results("%timed out after%")),
            ("tool: result over the cap", results("%over the limit%")),
            ("tool: step value over the cap", results("%step \"first\"%")),
            ("tool: slept and woke", results("rested")),
            ("tool: webhook delivered", results("{\"got\"%")),
            ("tool: webhook timed out", results("timed out")),
            ("tool: approved", results("approved run")),
            ("tool: rejected", results("%rejected this call%")),
            ("tool: rate limited", count("SELECT COUNT(*) FROM tool_calls WHERE detail LIKE '%rate_limit%' OR name = 'limited' AND status = 'success'")),
            ("tool: cached", results("cached %")),
            ("tool: meddled", results("meddled")),
            ("tool: unknown", results("%unknown tool%")),
            ("tool: invalid arguments", results("%invalid arguments%")),
            ("tool: abandoned after interruptions", results("%interrupted % times%")),
            ("tool: cancelled by a stop", results("%cancelled: the thread was stopped%")),
            ("injected result of no call", count(&format!(
                "SELECT COUNT(*) FROM messages WHERE role = 'tool' AND id LIKE '{INJECTED}%'"
            ))),
            ("stopped by user", count("SELECT COUNT(*) FROM thread WHERE stopped_by = 'user'")),
            ("stopped by max_turns", count("SELECT COUNT(*) FROM thread WHERE stopped_by = 'max_turns'")),
            ("stopped by stop_tool", count("SELECT COUNT(*) FROM thread WHERE stopped_by = 'stop_tool' OR result IS NOT NULL AND EXISTS (SELECT 1 FROM tool_calls WHERE name = 'finish' AND status = 'success')")),
            ("dual_ai side b spoke", count("SELECT COUNT(*) FROM messages WHERE role = 'assistant' AND side = 'b' AND status = 'completed'")),
            ("provider id replaced", count("SELECT COUNT(*) FROM tool_calls WHERE origin = 'model' AND length(id) = 37 AND id GLOB 'call_[0-9a-f]*'")),
        ];
        for (what, n) in checks {
            if *n > 0 {
                tally(what);
            }
        }
    }
}

#[test]
fn the_engine_keeps_its_invariants_under_any_interleaving() {
    let config = config();
    let cases = config.cases;
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let cases_strategy = (setup(), prop::collection::vec(op(), 1..60));
    if let Err(e) = runner.run(&cases_strategy, |(setup, ops)| {
        run_case(&setup, &ops);
        Ok(())
    }) {
        panic!("{e}");
    }
    let tally = TALLY.with(|t| t.borrow().clone());
    let mut rows: Vec<_> = tally.iter().collect();
    rows.sort();
    eprintln!("{cases} cases reached: {rows:?}");
    if cases >= CASES {
        for what in REACHED {
            assert!(tally.contains_key(what), "no case reached {what:?}");
        }
    }
}
