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
//! [`CASES`] cases unless they are set), and a case found once stays below as a plain test.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use proptest::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

use edgent::config::AgentConfig;
use edgent::engine::store::{Side, ThreadCache, ThreadStatus};
use edgent::engine::thread::{Action, InjectMessage, ModelCall, Thread, ThreadError, TurnRules};
use edgent::llm::stream::{ProviderError, StreamEvent};
use edgent::llm::{build_request, ModelRequest, Provider, Target, ToolChoice};
use edgent::testing::{reply_events, TestHost};
use edgent::tool::{
    queue_tool, BoxFuture, CallToolResult, FlowHost, FlowState, RateLimit, Registry, Tool,
    ToolError, WebhookEvent,
};
use edgent::values::limits::{
    MAX_CONTENT_BYTES, MAX_ERROR_TEXT_BYTES, MAX_REPLY_BYTES, MAX_STEP_VALUE_BYTES,
    MAX_TOOL_CALLS_PER_REPLY, MAX_TOOL_RESULT_BYTES,
};
use edgent::values::message::{Message, MessageStatus, Role};
use edgent::values::sql::{Row, Sql, SqlError, SqlValue};

const T0: i64 = 1_795_300_162_000;
const PUBLIC_URL: &str = "https://agents.example";
/// Engine steps settling may take, plus [`STEPS_PER_OPEN_CALL`] per call still open.
const SETTLE_STEPS: usize = 200;
const STEPS_PER_OPEN_CALL: usize = 8;
/// Ids of messages this test injects (as a client or from a tool), to tell them from the
/// engine's own.
const INJECTED: &str = "inj-";

// ---- storage that can crash ---------------------------------------------------------------

/// The thread object's storage: the host's SQLite, where a crash can be set to happen at the
/// n-th statement from now. That statement and every later one fail until the object
/// restarts, as if the process died there (a batch is one statement: it is atomic).
struct Storage {
    host: Rc<TestHost>,
    /// Set by a tool that kills the Worker: the next statement is the crash.
    kills: Rc<Cell<bool>>,
    crash_in: Cell<Option<u32>>,
    crashed: Cell<bool>,
    /// Crashes `crash_in` caused.
    hits: Cell<u32>,
    /// Statements SQLite refused as too big outside a batch: each is a limit breached without
    /// a clear error.
    too_big: RefCell<Vec<String>>,
}

impl Storage {
    fn tick(&self) -> Result<(), SqlError> {
        if self.kills.replace(false) {
            self.crashed.set(true);
        }
        if self.crashed.get() {
            return Err(SqlError("the object crashed".into()));
        }
        match self.crash_in.get() {
            Some(0) => {
                self.hits.set(self.hits.get() + 1);
                self.crashed.set(true);
                self.crash_in.set(None);
                Err(SqlError("the object crashed".into()))
            }
            Some(n) => {
                self.crash_in.set(Some(n - 1));
                Ok(())
            }
            None => Ok(()),
        }
    }

    fn faulting(&self) -> bool {
        self.crashed.get() || self.crash_in.get().is_some()
    }
}

impl Sql for Storage {
    fn exec(&self, statement: &str, params: &[SqlValue]) -> Result<Vec<Row>, SqlError> {
        self.tick()?;
        let out = self.host.db.exec(statement, params);
        if let Err(e) = &out {
            if e.0.to_ascii_lowercase().contains("too big") {
                let words: Vec<&str> = statement.split_whitespace().take(8).collect();
                self.too_big.borrow_mut().push(words.join(" "));
            }
        }
        out
    }

    fn batch(&self, statements: &[(&str, &[SqlValue])]) -> Result<Vec<Vec<Row>>, SqlError> {
        self.tick()?;
        let out = self.host.db.batch(statements);
        // `store_reply` turns a reply too big as stored into a failed model call (documented).
        let reply = statements
            .first()
            .is_some_and(|(s, _)| s.starts_with("UPDATE messages SET content"));
        if let Err(e) = &out {
            if !reply && e.0.to_ascii_lowercase().contains("too big") {
                let words: Vec<&str> = statements
                    .iter()
                    .flat_map(|(s, _)| s.split_whitespace().take(4))
                    .collect();
                self.too_big.borrow_mut().push(words.join(" "));
            }
        }
        out
    }
}

// ---- the tools ------------------------------------------------------------------------------

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct N {
    /// A size, a count or a duration, as each tool reads it.
    #[serde(default)]
    n: u64,
}

/// Tools by index, for the generators. `nope` is not registered; the empty name is a call
/// without a name.
const TOOLS: &[&str] = &[
    "echo", "fail", "fatal", "hang", "slow", "nap", "hook", "guarded", "limited", "shared",
    "meddle", "cached", "stepper", "crashy", "finish", "nope", "",
];

/// Sizes and durations the `n` argument takes.
const NS: &[u64] = &[
    0,
    1,
    7,
    100,
    5_000,
    40_000,
    1_000_000,
    1_100_000,
    4_000_000_000,
];

fn capped(n: u64, max: u64) -> usize {
    usize::try_from(n.min(max)).unwrap_or(0)
}

/// `kills`: set by the `crashy` tool, which kills the Worker whenever it runs (the object's
/// next statement fails as if the process died there).
fn registry(clock: &Rc<Cell<i64>>, kills: &Rc<Cell<bool>>) -> Registry {
    let slow_clock = clock.clone();
    let kills = kills.clone();
    let tools: Vec<(&'static str, Tool)> = vec![
        (
            "echo",
            Tool::new("Answers n bytes.").handler(|_f: FlowState, a: N| async move {
                Ok::<_, ToolError>("e".repeat(capped(a.n, 1_100_000)))
            }),
        ),
        (
            "fail",
            Tool::new("Fails, retryably.").handler(|_f: FlowState, _a: N| async {
                Err::<String, _>(ToolError::new("upstream down"))
            }),
        ),
        (
            "fatal",
            Tool::new("Fails for good, at length.").handler(|_f: FlowState, a: N| async move {
                Err::<String, _>(ToolError::fatal("f".repeat(capped(a.n, 40_000).max(1))))
            }),
        ),
        (
            "hang",
            Tool::new("Never answers.")
                .handler(|_f: FlowState, _a: N| async {
                    std::future::pending::<()>().await;
                    Ok::<_, ToolError>("never".to_owned())
                })
                .timeout(Duration::from_secs(2)),
        ),
        (
            "slow",
            Tool::new("Takes n ms.").handler(move |_f: FlowState, a: N| {
                let clock = slow_clock.clone();
                async move {
                    let ms = i64::try_from(a.n.min(100_000_000)).unwrap_or(0);
                    clock.set(clock.get() + ms);
                    Ok::<_, ToolError>("slept".to_owned())
                }
            }),
        ),
        (
            "nap",
            Tool::new("Sleeps n ms, durably.").handler(|flow: FlowState, a: N| async move {
                flow.sleep("nap", Duration::from_millis(a.n)).await?;
                Ok::<_, ToolError>("rested".to_owned())
            }),
        ),
        (
            "hook",
            Tool::new("Waits for a callback.").handler(|flow: FlowState, _a: N| async move {
                Ok::<_, ToolError>(
                    match flow
                        .wait_for_webhook("callback", Duration::from_secs(300))
                        .await?
                    {
                        WebhookEvent::Received(body) => {
                            CallToolResult::json(&json!({ "got": body }))
                        }
                        WebhookEvent::TimedOut => CallToolResult::text("timed out"),
                    },
                )
            }),
        ),
        (
            "guarded",
            Tool::new("Needs approval.")
                .handler(|_f: FlowState, _a: N| async {
                    Ok::<_, ToolError>("approved run".to_owned())
                })
                .needs_approval(),
        ),
        (
            "limited",
            Tool::new("Once a minute per thread.")
                .handler(|_f: FlowState, _a: N| async {
                    Ok::<_, ToolError>("limited ok".to_owned())
                })
                .rate_limit(RateLimit::per_minute(1)),
        ),
        (
            "shared",
            Tool::new("Twice a minute per deployment.")
                .handler(|_f: FlowState, _a: N| async {
                    Ok::<_, ToolError>("shared ok".to_owned())
                })
                .rate_limit(RateLimit::per_minute(2).per_deployment()),
        ),
        (
            "meddle",
            Tool::new("Changes the thread while it runs.").handler(
                |flow: FlowState, a: N| async move {
                    let id = format!("{INJECTED}tool-{}", edgent::values::ids::new_id());
                    match a.n % 5 {
                        0 => {
                            let mut m = InjectMessage::new(Role::Tool, "a result of nothing");
                            m.id = Some(id);
                            m.tool_call_id = Some("call_nobody_made".into());
                            edgent::tool::inject_message(&flow, m)?;
                        }
                        1 => {
                            queue_tool(&flow, "echo", json!({ "n": 3 }))?;
                        }
                        2 => {
                            let mut m = InjectMessage::new(Role::User, "a word from a tool");
                            m.id = Some(id);
                            edgent::tool::inject_message(&flow, m)?;
                        }
                        3 => edgent::tool::force_turn(&flow, Side::A)?,
                        _ => {
                            queue_tool(&flow, "nope", json!({}))?;
                        }
                    }
                    Ok::<_, ToolError>("meddled".to_owned())
                },
            ),
        ),
        (
            "cached",
            Tool::new("Cached for a minute.")
                .handler(|_f: FlowState, a: N| async move {
                    Ok::<_, ToolError>(format!("cached {}", a.n))
                })
                .cache_results(Duration::from_secs(60)),
        ),
        (
            "stepper",
            Tool::new("Records a step of n bytes, sleeps, records another.").handler(
                |flow: FlowState, a: N| async move {
                    let size = capped(a.n, 1_100_000);
                    let first: String = flow
                        .step("first", || async move { Ok("s".repeat(size)) })
                        .await?;
                    flow.sleep("pause", Duration::from_secs(1)).await?;
                    let second: u64 = flow.step("second", || async { Ok(2u64) }).await?;
                    Ok::<_, ToolError>(format!("stepped {} {second}", first.len()))
                },
            ),
        ),
        (
            "crashy",
            Tool::new("Kills the Worker whenever it runs.").handler(move |_f: FlowState, _a: N| {
                let kills = kills.clone();
                async move {
                    kills.set(true);
                    Ok::<_, ToolError>("survived".to_owned())
                }
            }),
        ),
        (
            "finish",
            Tool::new("Ends the conversation.").handler(|_f: FlowState, a: N| async move {
                Ok::<_, ToolError>(CallToolResult::json(&json!({ "answer": a.n })))
            }),
        ),
    ];
    Registry::build(tools).unwrap()
}

// ---- the agent ------------------------------------------------------------------------------

/// How the thread's agent is configured for a case.
#[derive(Debug, Clone)]
struct Setup {
    dual: bool,
    parallel: bool,
    /// `max_history_tokens` (`None`: the default).
    budget: Option<u32>,
    max_steps: u32,
    max_turns: u32,
    stop_tool: bool,
    /// The tools this case's calls draw from (indexes into [`TOOLS`]): a few per case, so
    /// that calls of the same tool meet (two calls for one rate-limit slot, say).
    palette: Vec<u8>,
    /// How the case ends before settling: 0 a crash; 1 a stop, then a crash; 2 a crash, then
    /// a stop (what a crash leaves on a stopped thread).
    finale: u8,
}

impl Setup {
    /// The tool a generated index names.
    fn tool(&self, i: u8) -> u8 {
        self.palette[usize::from(i) % self.palette.len()]
    }
}

fn setup() -> impl Strategy<Value = Setup> {
    (
        (
            prop::bool::weighted(0.25),
            any::<bool>(),
            prop_oneof![Just(None), (20u32..2_000).prop_map(Some)],
            1u32..8,
            prop_oneof![3 => Just(1_000u32), 1 => 2u32..12],
            prop::bool::weighted(0.3),
        ),
        prop::collection::vec(tool(), 1..5),
        prop_oneof![4 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8)],
    )
        .prop_map(
            |((dual, parallel, budget, max_steps, max_turns, stop_tool), palette, finale)| Setup {
                dual,
                parallel,
                budget,
                max_steps,
                // Settling runs a dual_ai conversation to its end: keep it short.
                max_turns: if dual { max_turns.min(8) } else { max_turns },
                stop_tool,
                palette,
                finale,
            },
        )
}

fn agent_config(s: &Setup, names: &[&str], side: Side) -> AgentConfig {
    let mut side_cfg = json!({ "prompt": "support", "max_steps": s.max_steps });
    if s.stop_tool {
        side_cfg["stop_tool"] = json!("finish");
        side_cfg["stop_tool_response_property"] = json!("answer");
    }
    let mut agent = json!({
        "id": "support",
        "kind": if s.dual { "dual_ai" } else { "ai_human" },
        "side_a": side_cfg.clone(),
        "max_turns": s.max_turns,
    });
    if s.dual {
        let mut b = side_cfg;
        b["label"] = json!("other");
        agent["side_b"] = b;
    }
    let mut model = json!({
        "name": "default", "provider": "openai", "model": "m",
        "base_url": "https://model.invalid/v1",
    });
    if let Some(budget) = s.budget {
        model["max_history_tokens"] = json!(budget);
    }
    let prompt = json!({
        "name": "support", "model": "default", "system": "be helpful",
        "tools": names, "parallel_tool_calls": s.parallel,
    });
    AgentConfig {
        agent: serde_json::from_value(agent).unwrap(),
        side,
        prompt: serde_json::from_value(prompt).unwrap(),
        models: vec![serde_json::from_value(model).unwrap()],
        delegates: Vec::new(),
    }
}

// ---- operations -----------------------------------------------------------------------------

/// Text sizes.
#[derive(Debug, Clone, Copy)]
enum Size {
    Empty,
    Short(u8),
    /// A few KiB.
    Long,
    /// Just past a client message's limit (32 KiB).
    OverContent,
    /// Hundreds of KiB.
    Big,
    /// Past the reply limit (1 MiB).
    OverReply,
}

fn text(size: Size, fill: char) -> String {
    let n = match size {
        Size::Empty => 0,
        Size::Short(n) => usize::from(n) + 1,
        Size::Long => 4_000,
        Size::OverContent => MAX_CONTENT_BYTES + 1,
        Size::Big => 700_000,
        Size::OverReply => MAX_REPLY_BYTES + 1,
    };
    std::iter::repeat_n(fill, n).collect()
}

/// A tool call id as a provider might send it.
#[derive(Debug, Clone, Copy)]
enum IdKind {
    Fresh,
    Empty,
    /// The id of the call before it in the same reply.
    SameAsPrevious,
    /// An id the thread already holds (by index).
    Reused(u8),
    /// This many characters.
    Long(u32),
    /// Characters some wire formats do not allow (`a.b`, `a b`, `a_b` …).
    Odd(u8),
}

/// Arguments as the model (or a client) sends them.
#[derive(Debug, Clone, Copy)]
enum Args {
    /// `{"n": NS[i]}`.
    Good(u8),
    Empty,
    Broken,
    NotObject,
    WrongField,
    /// Under the reply cap raw, far over the row limit once escaped in JSON.
    Escapey,
    /// Past the reply cap.
    Huge,
}

impl Args {
    fn raw(self) -> String {
        match self {
            Args::Good(i) => format!("{{\"n\":{}}}", NS[usize::from(i) % NS.len()]),
            Args::Empty => String::new(),
            Args::Broken => "{\"n\":".into(),
            Args::NotObject => "[1,2]".into(),
            Args::WrongField => "{\"zzz\":1}".into(),
            Args::Escapey => format!(
                "{{\"n\":1,\"pad\":\"{}\"}}",
                "\u{1}".repeat(MAX_REPLY_BYTES - 64)
            ),
            Args::Huge => format!("{{\"n\":1,\"pad\":\"{}\"}}", "h".repeat(MAX_REPLY_BYTES)),
        }
    }

    fn value(self) -> Value {
        serde_json::from_str(&self.raw()).unwrap_or_else(|_| json!({ "n": "not a number" }))
    }
}

#[derive(Debug, Clone)]
struct CallSpec {
    id: IdKind,
    tool: u8,
    args: Args,
}

#[derive(Debug, Clone, Copy)]
enum End {
    Whole,
    /// The stream stopped: no finish reason, no end marker.
    Cut,
    /// A finish reason without the end marker.
    FinishOnly,
}

#[derive(Debug, Clone)]
struct ReplySpec {
    text: Size,
    calls: Vec<CallSpec>,
    /// When set, this many calls of `echo` past `MAX_TOOL_CALLS_PER_REPLY - 8` follow.
    fan_out: Option<u8>,
    end: End,
}

#[derive(Debug, Clone, Copy)]
enum CallRef {
    None,
    Unknown,
    /// A call the thread holds (by index).
    Existing(u8),
}

#[derive(Debug, Clone, Copy)]
enum Jump {
    Ms(u16),
    Minutes(u16),
    Days(u16),
}

#[derive(Debug, Clone)]
enum Op {
    User(Size),
    Queue {
        tool: u8,
        args: Args,
    },
    Inject {
        role: u8,
        before: Option<u8>,
        call: CallRef,
        silent: bool,
        taken_id: bool,
        text: Size,
    },
    /// One step of the object's loop.
    Step,
    /// The model answers the call in flight (after one step of the loop when none is).
    Reply(ReplySpec),
    /// The model call fails after `partial` text (likewise).
    Fail {
        partial: bool,
        kind: u8,
    },
    /// An attempt fails after some text and the chain tries again (the reply is reset;
    /// likewise).
    Retry,
    Stop,
    Force(bool),
    Approve {
        pick: u8,
        yes: bool,
    },
    Webhook {
        pick: u8,
        known: bool,
        json: bool,
    },
    Clock(Jump),
    /// The object is evicted: its memory and the model call in flight are gone.
    Crash,
    /// The object dies at the n-th statement of the operation.
    CrashDuring(u8, Box<Op>),
    /// Answer everything until the thread rests.
    Settle,
}

fn size() -> impl Strategy<Value = Size> {
    prop_oneof![
        2 => Just(Size::Empty),
        10 => any::<u8>().prop_map(Size::Short),
        2 => Just(Size::Long),
        1 => Just(Size::OverContent),
        1 => Just(Size::Big),
        1 => Just(Size::OverReply),
    ]
}

fn args() -> impl Strategy<Value = Args> {
    prop_oneof![
        12 => any::<u8>().prop_map(Args::Good),
        1 => Just(Args::Empty),
        1 => Just(Args::Broken),
        1 => Just(Args::NotObject),
        1 => Just(Args::WrongField),
        1 => Just(Args::Escapey),
        1 => Just(Args::Huge),
    ]
}

fn id_kind() -> impl Strategy<Value = IdKind> {
    prop_oneof![
        10 => Just(IdKind::Fresh),
        1 => Just(IdKind::Empty),
        2 => Just(IdKind::SameAsPrevious),
        3 => any::<u8>().prop_map(IdKind::Reused),
        1 => prop_oneof![Just(41u32), Just(64), Just(300), Just(LONG_ID)].prop_map(IdKind::Long),
        4 => any::<u8>().prop_map(IdKind::Odd),
    ]
}

fn tool() -> impl Strategy<Value = u8> {
    0..u8::try_from(TOOLS.len()).unwrap()
}

/// A tool for the model to call: one of [`TOOLS`], or (rarely) an unknown name of
/// [`LONG_NAME`] bytes.
fn called_tool() -> impl Strategy<Value = u8> {
    prop_oneof![40 => tool(), 1 => Just(u8::try_from(TOOLS.len()).unwrap())]
}

/// The length of the unknown tool name a model may send: under the reply cap (which counts
/// names), but its error result (the name, and the name quoted) would pass the row limit.
const LONG_NAME: usize = 1_000_000;

/// The longest call id a model may send: under the reply cap (which counts ids), but with a
/// 1 MB result the result's row would pass the row limit.
const LONG_ID: u32 = 999_000;

fn reply_spec() -> impl Strategy<Value = ReplySpec> {
    let call =
        (id_kind(), called_tool(), args()).prop_map(|(id, tool, args)| CallSpec { id, tool, args });
    (
        prop_oneof![3 => Just(Size::Empty), 6 => any::<u8>().prop_map(Size::Short), 1 => size()],
        prop_oneof![3 => Just(Vec::new()), 5 => prop::collection::vec(call, 1..5)],
        prop_oneof![30 => Just(None), 1 => (0u8..12).prop_map(Some)],
        prop_oneof![10 => Just(End::Whole), 1 => Just(End::Cut), 1 => Just(End::FinishOnly)],
    )
        .prop_map(|(text, calls, fan_out, end)| ReplySpec {
            text,
            calls,
            fan_out,
            end,
        })
}

fn plain_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => prop_oneof![10 => any::<u8>().prop_map(Size::Short), 1 => size()].prop_map(Op::User),
        6 => (tool(), args()).prop_map(|(tool, args)| Op::Queue { tool, args }),
        9 => (
            0u8..4,
            prop::option::weighted(0.4, any::<u8>()),
            prop_oneof![Just(CallRef::None), Just(CallRef::Unknown), any::<u8>().prop_map(CallRef::Existing)],
            prop::bool::weighted(0.2),
            prop::bool::weighted(0.05),
            size(),
        )
            .prop_map(|(role, before, call, silent, taken_id, text)| Op::Inject {
                role,
                before,
                call,
                silent,
                taken_id,
                text,
            }),
        30 => Just(Op::Step),
        36 => reply_spec().prop_map(Op::Reply),
        3 => (any::<bool>(), any::<u8>()).prop_map(|(partial, kind)| Op::Fail { partial, kind }),
        3 => Just(Op::Retry),
        1 => Just(Op::Stop),
        3 => any::<bool>().prop_map(Op::Force),
        12 => (any::<u8>(), prop::bool::weighted(0.7)).prop_map(|(pick, yes)| Op::Approve { pick, yes }),
        6 => (any::<u8>(), prop::bool::weighted(0.8), prop::bool::weighted(0.8))
            .prop_map(|(pick, known, json)| Op::Webhook { pick, known, json }),
        9 => prop_oneof![
            4 => any::<u16>().prop_map(|ms| Jump::Ms(ms % 5_000)),
            2 => any::<u16>().prop_map(|m| Jump::Minutes(m % 600)),
            1 => any::<u16>().prop_map(|d| Jump::Days(d % 800)),
        ]
        .prop_map(Op::Clock),
        6 => Just(Op::Crash),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        36 => plain_op(),
        12 => (
            prop_oneof![3 => 0u8..6, 2 => 0u8..16, 1 => 0u8..64],
            plain_op()
        )
            .prop_map(|(n, op)| Op::CrashDuring(n, Box::new(op))),
        1 => Just(Op::Settle),
    ]
}

// ---- the world ------------------------------------------------------------------------------

struct World {
    host: Rc<TestHost>,
    clock: Rc<Cell<i64>>,
    storage: Rc<Storage>,
    /// The object's memory (a crash starts a new one).
    cache: Rc<ThreadCache>,
    configs: [Rc<AgentConfig>; 2],
    setup: Setup,
    /// The model call in flight.
    model: Option<ModelCall>,
    fresh: u32,
}

fn new_world(s: &Setup) -> World {
    edgent_example::CATALOG.install();
    let clock = Rc::new(Cell::new(T0));
    let kills = Rc::new(Cell::new(false));
    let registry = registry(&clock, &kills);
    let names: Vec<&str> = TOOLS[..TOOLS.len() - 2].to_vec();
    let a = agent_config(s, &names, Side::A);
    let b = agent_config(s, &names, Side::B);
    let host = TestHost::with_clock(registry, clock.clone())
        .with_agent(a.clone())
        .var("PUBLIC_URL", PUBLIC_URL)
        .into_rc();
    let storage = Rc::new(Storage {
        host: host.clone(),
        kills,
        crash_in: Cell::new(None),
        crashed: Cell::new(false),
        hits: Cell::new(0),
        too_big: RefCell::new(Vec::new()),
    });
    World {
        host,
        clock,
        storage,
        cache: Rc::default(),
        configs: [Rc::new(a), Rc::new(b)],
        setup: s.clone(),
        model: None,
        fresh: 0,
    }
}

/// What an operation's engine call returned: refusals of bad input are answers; a storage
/// error is a defect unless a crash was injected.
fn answered<T>(w: &World, what: &str, r: Result<T, ThreadError>) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(ThreadError::Sql(e)) => {
            assert!(
                w.storage.faulting(),
                "{what}: a storage error with no crash injected: {e}"
            );
            None
        }
        Err(_) => None,
    }
}

impl World {
    fn now(&self) -> i64 {
        self.clock.get()
    }

    /// A view for a client operation (the runtime applies those without turn rules).
    fn client(&self) -> Thread<'_> {
        Thread::open_migrated(&*self.storage).with_cache(self.cache.clone())
    }

    /// The configuration of the side that runs now.
    fn config(&self) -> Rc<AgentConfig> {
        let side = self.host.thread().summary().unwrap().current_side;
        match (self.setup.dual, side) {
            (true, Side::B) => self.configs[1].clone(),
            _ => self.configs[0].clone(),
        }
    }

    /// A view for a step of the loop, under the running side's rules.
    fn stepper(&self, config: &AgentConfig) -> Thread<'_> {
        let mut t = self.client();
        t.set_rules(TurnRules::from_config(config));
        t
    }

    fn keep(&self, t: &mut Thread<'_>) {
        while t.poll_frame().is_some() {}
        let _ = t.take_hook_failures();
    }

    fn crash(&mut self) {
        self.model = None;
        self.cache = Rc::default();
        self.storage.crash_in.set(None);
        self.storage.crashed.set(false);
    }

    fn call_ids(&self) -> Vec<String> {
        self.strings("SELECT id FROM tool_calls ORDER BY seq")
    }

    fn strings(&self, sql: &str) -> Vec<String> {
        let conn = &self.host.db.0;
        let mut stmt = conn.prepare(sql).unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    /// Performs `op`; a tool that killed the Worker meanwhile restarts the object.
    fn apply(&mut self, op: &Op) {
        self.perform(op);
        if self.storage.crashed.get() {
            self.crash(); // a tool killed the Worker
        }
        // Frames and tools' broadcasts are not checked here; keep memory flat.
        self.host.take_frames();
    }

    fn perform(&mut self, op: &Op) {
        match op {
            Op::User(size) => {
                let content = text(*size, 'u');
                if content.is_empty() || content.len() > MAX_CONTENT_BYTES {
                    return; // refused by the API before the engine (400 / 413)
                }
                let now = self.now();
                let mut t = self.client();
                let r = t.post_user_message(now, &content);
                self.keep(&mut t);
                let _ = answered(self, "post_user_message", r);
            }
            Op::Queue { tool, args } => {
                let name = TOOLS[usize::from(self.setup.tool(*tool))];
                let now = self.now();
                let registry = &self.host.registry;
                let mut t = self.client();
                let r = t.queue_tool(now, registry, name, args.value());
                self.keep(&mut t);
                let _ = answered(self, "queue_tool", r);
            }
            Op::Inject {
                role,
                before,
                call,
                silent,
                taken_id,
                text: size,
            } => {
                let role =
                    [Role::User, Role::Assistant, Role::System, Role::Tool][usize::from(*role) % 4];
                let mut m = InjectMessage::new(role, text(*size, 'i'));
                self.fresh += 1;
                m.id = Some(format!("{INJECTED}{}", self.fresh));
                let ids = self.strings("SELECT id FROM messages WHERE depth = 0 ORDER BY position");
                if *taken_id && !ids.is_empty() {
                    m.id = Some(ids[ids.len() / 2].clone());
                }
                m.before_message_id = before.map(|i| match ids.len() {
                    0 => "missing".to_owned(),
                    n => ids[usize::from(i) % n].clone(),
                });
                let calls = self.call_ids();
                m.tool_call_id = match call {
                    CallRef::None => None,
                    CallRef::Unknown => Some("call_nobody_made".into()),
                    CallRef::Existing(i) if !calls.is_empty() => {
                        Some(calls[usize::from(*i) % calls.len()].clone())
                    }
                    CallRef::Existing(_) => Some("call_none_yet".into()),
                };
                m.silent = *silent;
                let now = self.now();
                let mut t = self.client();
                let r = t.inject_message(now, m, 0);
                self.keep(&mut t);
                let _ = answered(self, "inject_message", r);
            }
            Op::Step => {
                self.step(false);
            }
            Op::Reply(spec) => {
                self.step(false);
                self.reply(spec);
            }
            Op::Fail { partial, kind } => {
                self.step(false);
                let Some(mut call) = self.model.take() else {
                    return;
                };
                let now = self.now();
                let mut t = self.stepper(&self.config());
                if *partial {
                    let _ = t.on_model_event(&mut call, StreamEvent::TextDelta("half a".into()));
                }
                let error = match kind % 5 {
                    0 => ProviderError::Http {
                        status: 500,
                        message: "boom".into(),
                        retry_after_ms: None,
                    },
                    1 => ProviderError::Timeout("stalled".into()),
                    2 => ProviderError::Truncated,
                    3 => ProviderError::Malformed("garbage".into()),
                    _ => ProviderError::TooLarge("too much".into()),
                };
                let r = t.fail_model_call(now, call, &error);
                self.keep(&mut t);
                let _ = answered(self, "fail_model_call", r);
            }
            Op::Retry => {
                self.step(false);
                let Some(mut call) = self.model.take() else {
                    return;
                };
                let mut t = self.stepper(&self.config());
                let _ = t.on_model_event(&mut call, StreamEvent::TextDelta("first try".into()));
                let error = ProviderError::Network("reset".into());
                t.report_retry(&error, "m", "trying again");
                t.reset_model_call(&mut call);
                self.keep(&mut t);
                drop(t);
                self.model = Some(call);
            }
            Op::Stop => {
                let now = self.now();
                let mut t = self.client();
                let r = t.stop(now, "user");
                self.keep(&mut t);
                let _ = answered(self, "stop", r);
            }
            Op::Force(b) => {
                let side = if *b && self.setup.dual {
                    Side::B
                } else {
                    Side::A
                };
                let now = self.now();
                let mut t = self.client();
                let r = t.force_turn(now, side);
                self.keep(&mut t);
                let _ = answered(self, "force_turn", r);
            }
            Op::Approve { pick, yes } => {
                let waiting = self
                    .strings("SELECT id FROM tool_calls WHERE approval = 'pending' ORDER BY seq");
                let all = self.call_ids();
                let id = match (waiting.len(), all.len()) {
                    (0, 0) => "call_none".to_owned(),
                    (0, n) => all[usize::from(*pick) % n].clone(),
                    (n, _) => waiting[usize::from(*pick) % n].clone(),
                };
                let now = self.now();
                let mut t = self.client();
                let r = t.decide_approval(now, &id, *yes, Some("not now"));
                self.keep(&mut t);
                let _ = answered(self, "decide_approval", r);
            }
            Op::Webhook { pick, known, json } => {
                let tokens = self.strings("SELECT token FROM webhooks ORDER BY created_at, token");
                let token = if *known && !tokens.is_empty() {
                    tokens[usize::from(*pick) % tokens.len()].clone()
                } else {
                    "0".repeat(64)
                };
                let body: &[u8] = if *json {
                    br#"{"paid":true}"#
                } else {
                    b"not json"
                };
                let now = self.now();
                let t = self.client();
                let r = t.deliver_webhook(&token, body, now);
                let _ = answered(self, "deliver_webhook", r);
            }
            Op::Clock(jump) => {
                let ms = match jump {
                    Jump::Ms(ms) => i64::from(*ms),
                    Jump::Minutes(m) => i64::from(*m) * 60_000,
                    Jump::Days(d) => i64::from(*d) * 86_400_000,
                };
                self.clock.set(self.now() + ms);
            }
            Op::Crash => self.crash(),
            Op::CrashDuring(n, op) => {
                let hits = self.storage.hits.get();
                self.storage.crash_in.set(Some(u32::from(*n)));
                self.perform(op);
                if self.storage.hits.get() > hits {
                    tally("crash at a statement");
                }
                self.crash();
            }
            Op::Settle => self.settle(),
        }
    }

    /// One step of the object's loop: the engine's next action, performed (a model call is
    /// kept in flight for the operations that follow). Returns the action's kind.
    fn step(&mut self, settling: bool) -> Option<&'static str> {
        if self.model.is_some() {
            return None; // the object is busy with the model: the loop waits for it
        }
        let config = self.config();
        let now = self.now();
        let storage = self.storage.clone();
        let mut t = Thread::open_migrated(&*storage).with_cache(self.cache.clone());
        t.set_rules(TurnRules::from_config(&config));
        let action = t.next_action(now, config.max_steps());
        let action = answered(self, "next_action", action)?;
        let kind = match action {
            Action::Idle => "idle",
            Action::Continue => "continue",
            Action::Wait => {
                self.check_wait(&t);
                tally("call waits (Wait)");
                "wait"
            }
            Action::CallModel(call) => {
                check_history(&call.history, &format!("model call at {}", self.now()));
                tally("model call");
                self.model = Some(call);
                "model"
            }
            Action::RunTool(call) => {
                self.run_tools(&mut t, &config, vec![call]);
                "tool"
            }
            Action::RunTools(calls) => {
                self.run_tools(&mut t, &config, calls);
                "tool"
            }
        };
        self.keep(&mut t);
        drop(t);
        if settling {
            if let Some(call) = self.model.take() {
                self.finish(call, &reply_events("done.", &[]));
            }
        }
        Some(kind)
    }

    fn run_tools(
        &self,
        t: &mut Thread<'_>,
        config: &Rc<AgentConfig>,
        calls: Vec<edgent::engine::store::StoredToolCall>,
    ) {
        let Some(summary) = answered(self, "summary", t.summary()) else {
            return;
        };
        let runtime = self.host.runtime();
        let before = self.host.logged_errors().len();
        self.host
            .run(runtime.run_tool_calls(t, config, &summary, calls));
        if !self.storage.faulting() {
            let logged = self.host.logged_errors().split_off(before);
            assert!(
                logged.iter().all(|e| !e.contains("could not")),
                "the runtime could not store a tool call's state with no crash injected: {logged:?}"
            );
        }
    }

    /// `Wait` must end by itself (a wake time) or by a client (an approval).
    fn check_wait(&self, t: &Thread<'_>) {
        if self.storage.faulting() {
            return;
        }
        let wake = t.poll_timeout().unwrap();
        let approvals = self.strings(
            "SELECT id FROM tool_calls WHERE approval = 'pending' AND status NOT IN ('success', 'error')",
        );
        assert!(
            wake.is_some() || !approvals.is_empty(),
            "the turn waits for nothing: no wake time and no call awaiting approval"
        );
    }

    fn reply(&mut self, spec: &ReplySpec) {
        let Some(call) = self.model.take() else {
            return;
        };
        let known = self.call_ids();
        let mut calls: Vec<(String, String, String)> = Vec::new();
        for c in &spec.calls {
            self.fresh += 1;
            let id = match c.id {
                IdKind::Fresh => format!("call_{}", self.fresh),
                IdKind::Empty => String::new(),
                IdKind::SameAsPrevious => calls
                    .last()
                    .map(|(id, _, _)| id.clone())
                    .unwrap_or_else(|| format!("call_{}", self.fresh)),
                IdKind::Reused(k) if !known.is_empty() => {
                    known[usize::from(k) % known.len()].clone()
                }
                IdKind::Reused(_) => "call_1".into(),
                IdKind::Long(n) => {
                    let n = usize::try_from(n).unwrap();
                    format!("call_{}_{}", self.fresh, "L".repeat(n))[..n].to_owned()
                }
                IdKind::Odd(k) => ["a.b", "a_b", "a b", "a/b", "é", "a-b", "a:b", "a+b"]
                    [usize::from(k) % 8]
                    .to_owned(),
            };
            let name = match usize::from(c.tool) {
                i if i >= TOOLS.len() => "n".repeat(LONG_NAME),
                _ => TOOLS[usize::from(self.setup.tool(c.tool))].to_owned(),
            };
            calls.push((id, name, c.args.raw()));
        }
        if let Some(extra) = spec.fan_out {
            let n = MAX_TOOL_CALLS_PER_REPLY - 8 + usize::from(extra);
            for k in 0..n {
                calls.push((
                    format!("fan_{}_{k}", self.fresh),
                    "echo".into(),
                    "{\"n\":1}".into(),
                ));
            }
        }
        let refs: Vec<(&str, &str, &str)> = calls
            .iter()
            .map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str()))
            .collect();
        let mut events = reply_events(&text(spec.text, 'r'), &refs);
        match spec.end {
            End::Whole => {}
            End::Cut => events.truncate(events.len() - 2),
            End::FinishOnly => {
                events.pop();
            }
        }
        self.finish(call, &events);
    }

    /// Streams `events` into the call and completes it as the runtime does: an event the
    /// reply refuses (too large, malformed) fails the call; otherwise it is finished.
    fn finish(&mut self, mut call: ModelCall, events: &[StreamEvent]) {
        let now = self.now();
        let config = self.config();
        let storage = self.storage.clone();
        let mut t = Thread::open_migrated(&*storage).with_cache(self.cache.clone());
        t.set_rules(TurnRules::from_config(&config));
        let mut refused = None;
        for ev in events {
            if let Err(e) = t.on_model_event(&mut call, ev.clone()) {
                refused = Some(e);
                break;
            }
        }
        let message_id = call.message_id.clone();
        let r = match refused {
            Some(e) => {
                tally("reply refused while streaming");
                t.fail_model_call(now, call, &e)
            }
            None => t.finish_model_call(now, call),
        };
        self.keep(&mut t);
        drop(t);
        if answered(self, "finish_model_call", r).is_some() && !self.storage.faulting() {
            let stored = self.strings(&format!(
                "SELECT status || ' ' || IFNULL(tool_calls, '') FROM messages WHERE id = '{message_id}'"
            ));
            match stored.first().map(String::as_str) {
                Some(s) if s.starts_with("failed") => tally("reply failed at its end"),
                Some(s) if s.starts_with("completed [") => tally("reply with calls"),
                _ => {}
            }
        }
    }

    /// Answers everything, as the world eventually does: the model replies with text,
    /// approvals are granted, and the clock moves to each wake time (the alarm the runtime
    /// sets from `poll_timeout`); a step is taken only when `step_wanted` says so. The thread
    /// must come to rest within the bound.
    fn settle(&mut self) {
        if let Some(call) = self.model.take() {
            self.finish(call, &reply_events("done.", &[]));
        }
        let open = self
            .strings("SELECT id FROM tool_calls WHERE status NOT IN ('success', 'error')")
            .len();
        let bound = SETTLE_STEPS + STEPS_PER_OPEN_CALL * open;
        for _ in 0..bound {
            for id in self.strings(
                "SELECT id FROM tool_calls WHERE approval = 'pending' AND status NOT IN ('success', 'error')",
            ) {
                let now = self.now();
                let mut t = self.client();
                t.decide_approval(now, &id, true, None).unwrap();
                self.keep(&mut t);
            }
            let wanted = self.client().step_wanted(self.now()).unwrap();
            if wanted.is_some() {
                let kind = self.step(true);
                if self.storage.crashed.get() {
                    self.crash(); // a tool killed the Worker: the alarm resumes the turn
                    continue;
                }
                match kind {
                    Some("wait") => {}
                    Some(_) => continue,
                    None => unreachable!("no model call is in flight while settling"),
                }
            }
            match self.client().poll_timeout().unwrap() {
                Some(at) => self.clock.set(at.max(self.now())),
                None if wanted.is_some() => {}
                None => {
                    self.check_rest();
                    return;
                }
            }
        }
        panic!(
            "the thread did not come to rest in {bound} steps: {}",
            self.describe()
        );
    }

    /// A thread at rest: not running, no call without a result, no pending reply.
    fn check_rest(&self) {
        let summary = self.host.thread().summary().unwrap();
        let open = self.strings(
            "SELECT id || ' ' || name || ' ' || status FROM tool_calls WHERE status NOT IN ('success', 'error')",
        );
        let pending = self.strings("SELECT id FROM messages WHERE status = 'pending'");
        assert!(
            summary.status != ThreadStatus::Running && open.is_empty() && pending.is_empty(),
            "the thread is stranded: status {:?}, calls without a result {open:?}, pending replies {pending:?}",
            summary.status
        );
    }

    fn describe(&self) -> String {
        let summary = self.host.thread().summary().unwrap();
        let calls = self.strings(
            "SELECT substr(id, 1, 40) || ' ' || substr(name, 1, 20) || ' ' || status || ' wake ' || IFNULL(wake_at, '-') FROM tool_calls WHERE status NOT IN ('success', 'error')",
        );
        format!(
            "status {:?}, needs_model {}, steps {}, now {}, open calls {calls:?}",
            summary.status,
            summary.needs_model,
            summary.steps,
            self.now()
        )
    }

    /// The stored invariants (see the module docs).
    fn check(&self) {
        let too_big = self.storage.too_big.borrow().clone();
        assert!(
            too_big.is_empty(),
            "SQLite refused a statement as too big (a limit breached without a clear error): {too_big:?}"
        );
        let conn = &self.host.db.0;
        let rows = |sql: &str| -> Vec<Vec<Option<String>>> {
            let mut stmt = conn.prepare(sql).unwrap();
            let n = stmt.column_count();
            stmt.query_map([], |r| (0..n).map(|i| r.get(i)).collect())
                .unwrap()
                .map(Result::unwrap)
                .collect()
        };
        let short = |id: &str| id.chars().take(40).collect::<String>();
        // Every message that lists calls, read once: each call listed once in the thread, by
        // a completed assistant reply.
        let mut listed_by: HashMap<String, String> = HashMap::new();
        for row in rows(
            "SELECT id, role, status, tool_calls FROM messages
             WHERE tool_calls IS NOT NULL AND tool_calls != '[]'",
        ) {
            let [Some(message), Some(role), Some(status), Some(listed)] = &row[..] else {
                panic!("a message row without its columns");
            };
            assert_eq!(role, "assistant", "message {message} lists calls");
            assert_eq!(
                status, "completed",
                "reply {message} keeps calls while {status}"
            );
            for c in serde_json::from_str::<Vec<Value>>(listed).unwrap() {
                let id = c["id"].as_str().unwrap().to_owned();
                let twice = listed_by.insert(id.clone(), message.clone());
                assert!(twice.is_none(), "call id {} is listed twice", short(&id));
            }
        }
        // The engine's results, by the call they answer.
        let mut results: HashMap<String, Vec<String>> = HashMap::new();
        for row in rows(&format!(
            "SELECT tool_call_id, id FROM messages WHERE role = 'tool' AND id NOT LIKE '{INJECTED}%'"
        )) {
            let [call, Some(message)] = &row[..] else {
                panic!("a result row without its columns");
            };
            results
                .entry(call.clone().unwrap_or_default())
                .or_default()
                .push(message.clone());
        }
        // Each call: listed by its message; finished with exactly one result it points at, or
        // unfinished with none.
        let calls = rows("SELECT id, status, result_message_id, message_id FROM tool_calls");
        for row in &calls {
            let [Some(id), Some(status), result_id, Some(message)] = &row[..] else {
                panic!("a call row without its columns");
            };
            assert_eq!(
                listed_by.get(id),
                Some(message),
                "call {} is not listed by its message",
                short(id)
            );
            let found = results.remove(id).unwrap_or_default();
            if matches!(status.as_str(), "success" | "error") {
                assert_eq!(
                    found.len(),
                    1,
                    "finished call {} has {} results",
                    short(id),
                    found.len()
                );
                assert_eq!(result_id.as_ref(), Some(&found[0]), "call {}", short(id));
            } else {
                assert!(
                    found.is_empty() && result_id.is_none(),
                    "unfinished call {} ({status}) has a result",
                    short(id)
                );
            }
        }
        assert_eq!(
            listed_by.len(),
            calls.len(),
            "a reply lists calls that have no row"
        );
        let orphans: Vec<String> = results.keys().map(|k| short(k)).collect();
        assert!(orphans.is_empty(), "results of no call: {orphans:?}");
        // At most one pending reply: the one in flight.
        let pending = self.strings("SELECT id FROM messages WHERE status = 'pending'");
        assert!(pending.len() <= 1, "{} replies are pending", pending.len());
        if let (Some(call), Some(p)) = (&self.model, pending.first()) {
            assert_eq!(
                &call.message_id, p,
                "the pending reply is not the one in flight"
            );
        }
        // Stored texts within their caps.
        let cap = |sql: &str| -> i64 {
            conn.query_row(sql, [], |r| r.get::<_, Option<i64>>(0))
                .unwrap()
                .unwrap_or(0)
        };
        let text_cap = i64::try_from(MAX_REPLY_BYTES.max(MAX_TOOL_RESULT_BYTES) + 1024).unwrap();
        assert!(cap("SELECT MAX(length(CAST(content AS BLOB))) FROM messages") <= text_cap);
        assert!(
            cap("SELECT MAX(length(CAST(arguments AS BLOB))) FROM tool_calls")
                <= i64::try_from(MAX_REPLY_BYTES).unwrap()
        );
        assert!(
            cap("SELECT MAX(length(CAST(value AS BLOB))) FROM tool_steps")
                <= i64::try_from(MAX_STEP_VALUE_BYTES + 64).unwrap()
        );
        assert!(
            cap("SELECT MAX(length(CAST(last_error AS BLOB))) FROM tool_calls")
                <= i64::try_from(MAX_ERROR_TEXT_BYTES + 64).unwrap()
        );
    }
}

// ---- history validity -----------------------------------------------------------------------

/// The history a model is sent must be valid for every provider.
fn check_history(history: &[Message], context: &str) {
    let fail = |why: String| -> ! {
        let shape: Vec<String> = history
            .iter()
            .map(|m| {
                let calls: Vec<&str> = m
                    .tool_calls
                    .iter()
                    .map(|c| &c.id[..c.id.len().min(20)])
                    .collect();
                format!(
                    "{}{}{}",
                    m.role.as_str(),
                    if calls.is_empty() {
                        String::new()
                    } else {
                        format!("{calls:?}")
                    },
                    m.tool_call_id
                        .as_deref()
                        .map(|i| format!("<{}>", &i[..i.len().min(20)]))
                        .unwrap_or_default()
                )
            })
            .collect();
        panic!("invalid model history ({context}): {why}\n{shape:?}")
    };
    // Provider-neutral: each call followed by exactly its results, nothing else is a result.
    let mut ids = HashSet::new();
    let mut i = 0;
    while i < history.len() {
        let m = &history[i];
        if m.status != MessageStatus::Completed || m.silent || m.depth != 0 {
            fail(format!(
                "message {i} is {:?}, silent {}, depth {}",
                m.status, m.silent, m.depth
            ));
        }
        match m.role {
            Role::Tool => fail(format!("message {i} is a result without its call")),
            Role::Assistant if !m.tool_calls.is_empty() => {
                let want: Vec<&str> = m.tool_calls.iter().map(|c| c.id.as_str()).collect();
                for id in &want {
                    if !ids.insert(*id) {
                        fail(format!(
                            "call id {:?} appears twice",
                            &id[..id.len().min(40)]
                        ));
                    }
                }
                let mut got = Vec::new();
                while history.get(i + 1).is_some_and(|r| r.role == Role::Tool) {
                    i += 1;
                    got.push(history[i].tool_call_id.as_deref().unwrap_or(""));
                }
                let (mut a, mut b) = (want.clone(), got.clone());
                a.sort_unstable();
                b.sort_unstable();
                if a != b {
                    fail(format!(
                        "message {i}: calls {} answered by {} results",
                        want.len(),
                        got.len()
                    ));
                }
            }
            _ => {}
        }
        i += 1;
    }
    for provider in [Provider::OpenAi, Provider::Anthropic, Provider::WorkersAi] {
        let body = build_request(&ModelRequest {
            target: Target {
                provider,
                model: "m",
                base_url: "https://model.invalid/v1",
                max_output_tokens: None,
            },
            system: "be helpful",
            history,
            tools: &[],
            tool_choice: ToolChoice::Auto,
            parallel_tool_calls: false,
        });
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let why = match provider {
            Provider::Anthropic => anthropic_problem(&messages),
            _ => chat_problem(&messages),
        };
        if let Some(why) = why {
            fail(format!("{} body: {why}", provider.as_str()));
        }
    }
}

/// Chat completions: an assistant message's `tool_calls` are answered by the `tool` messages
/// right after it, each once; no `tool` message elsewhere.
fn chat_problem(messages: &[Value]) -> Option<String> {
    let mut open: Vec<String> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let role = m["role"].as_str().unwrap_or("");
        if role == "tool" {
            let id = m["tool_call_id"].as_str().unwrap_or("").to_owned();
            match open.iter().position(|o| *o == id) {
                Some(k) => {
                    open.remove(k);
                }
                None => return Some(format!("message {i}: a tool message answers no open call")),
            }
            continue;
        }
        if !open.is_empty() {
            return Some(format!(
                "message {i}: {} calls unanswered before it",
                open.len()
            ));
        }
        if let Some(calls) = m["tool_calls"].as_array() {
            open = calls
                .iter()
                .map(|c| c["id"].as_str().unwrap_or("").to_owned())
                .collect();
        }
    }
    (!open.is_empty()).then(|| format!("{} calls unanswered at the end", open.len()))
}

/// Messages API: turns alternate from a user turn, no empty content or blank text, every
/// `tool_use` answered at the start of the next user turn and nowhere else, ids unique and of
/// the allowed characters.
fn anthropic_problem(messages: &[Value]) -> Option<String> {
    let mut ids = HashSet::new();
    let mut open: Vec<String> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let role = m["role"].as_str().unwrap_or("");
        let want = if i % 2 == 0 { "user" } else { "assistant" };
        if role != want {
            return Some(format!("turn {i} is {role}, not {want}"));
        }
        let blocks = m["content"].as_array().cloned().unwrap_or_default();
        if blocks.is_empty() {
            return Some(format!("turn {i} is empty"));
        }
        let mut answered: Vec<String> = Vec::new();
        let mut past_results = false;
        for b in &blocks {
            match b["type"].as_str().unwrap_or("") {
                "text" => {
                    if b["text"].as_str().unwrap_or("").trim().is_empty() {
                        return Some(format!("turn {i} has a blank text block"));
                    }
                    past_results = true;
                }
                "tool_use" => {
                    let id = b["id"].as_str().unwrap_or("").to_owned();
                    let ok = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
                    if id.is_empty() || !id.chars().all(ok) {
                        return Some(format!("turn {i}: tool_use id of characters not allowed"));
                    }
                    if !ids.insert(id.clone()) {
                        return Some(format!(
                            "turn {i}: tool_use id {:?} is not unique",
                            &id[..id.len().min(40)]
                        ));
                    }
                    if role != "assistant" {
                        return Some(format!("turn {i}: tool_use in a user turn"));
                    }
                }
                "tool_result" => {
                    if past_results {
                        return Some(format!("turn {i}: a tool_result after other content"));
                    }
                    answered.push(b["tool_use_id"].as_str().unwrap_or("").to_owned());
                }
                _ => past_results = true,
            }
        }
        if role == "user" {
            let (mut a, mut b) = (open.clone(), answered.clone());
            a.sort_unstable();
            b.sort_unstable();
            if a != b {
                return Some(format!(
                    "turn {i} answers {} of {} tool_use blocks (or others)",
                    answered.len(),
                    open.len()
                ));
            }
            open.clear();
        } else {
            open = blocks
                .iter()
                .filter(|b| b["type"] == "tool_use")
                .map(|b| b["id"].as_str().unwrap_or("").to_owned())
                .collect();
        }
    }
    (!open.is_empty()).then(|| format!("{} tool_use blocks unanswered at the end", open.len()))
}

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

// ---- regressions: each case the property found, as a plain test -----------------------------

/// A case's setup with every option at its plainest and `tools` as the palette.
fn plain(tools: &[&str]) -> Setup {
    Setup {
        dual: false,
        parallel: false,
        budget: None,
        max_steps: 4,
        max_turns: 1_000,
        stop_tool: false,
        palette: tools
            .iter()
            .map(|t| u8::try_from(TOOLS.iter().position(|n| n == t).unwrap()).unwrap())
            .collect(),
        finale: 0,
    }
}

/// A reply calling the palette's first tool once per id, with `{"n": 0}`.
fn calling(ids: &[IdKind]) -> Op {
    Op::Reply(ReplySpec {
        text: Size::Empty,
        calls: ids
            .iter()
            .map(|&id| CallSpec {
                id,
                tool: 0,
                args: Args::Good(0),
            })
            .collect(),
        fan_out: None,
        end: End::Whole,
    })
}

/// A view of `w`'s thread as a new instance of the object sees it (its memory empty).
fn new_instance(w: &World) -> Thread<'_> {
    Thread::open_migrated(&*w.storage).with_cache(Rc::default())
}

#[test]
fn a_reply_a_stop_cut_short_is_not_left_pending_by_a_crash() {
    // Stopped while the model streams, then the object dies before the stream ends: the reply
    // stayed `pending` for good (a stopped thread took no step to fail it).
    let mut w = new_world(&plain(&["echo"]));
    for op in [Op::User(Size::Short(0)), Op::Step, Op::Stop, Op::Crash] {
        w.apply(&op);
    }
    assert_eq!(
        w.strings("SELECT status FROM messages WHERE role = 'assistant'"),
        ["pending"]
    );
    let now = w.now();
    let mut t = new_instance(&w);
    assert!(
        t.wants_step(now).unwrap(),
        "the watchdog must step the stopped thread once"
    );
    assert!(matches!(t.next_action(now, 4).unwrap(), Action::Idle));
    drop(t);
    assert_eq!(
        w.strings("SELECT status FROM messages WHERE role = 'assistant'"),
        ["failed"]
    );
    assert!(
        !new_instance(&w).wants_step(now).unwrap(),
        "and then never again"
    );
    // The other order: a crash mid-stream, then a stop from a new instance.
    run_case(
        &plain(&["echo"]),
        &[Op::User(Size::Short(0)), Op::Step, Op::Crash, Op::Stop],
    );
}

#[test]
fn a_call_a_crash_cut_short_on_a_stopped_thread_gets_its_result() {
    // The Worker dies while a call runs, and the next request is a stop: the call stayed
    // `running` for good, without a result.
    let mut w = new_world(&plain(&["crashy"]));
    for op in [
        Op::Queue {
            tool: 0,
            args: Args::Good(0),
        },
        Op::Step,
        Op::Stop,
    ] {
        w.apply(&op);
    }
    assert_eq!(w.strings("SELECT status FROM tool_calls"), ["running"]);
    let now = w.now();
    let mut t = new_instance(&w);
    assert!(t.wants_step(now).unwrap());
    assert!(matches!(t.next_action(now, 4).unwrap(), Action::Idle));
    drop(t);
    let results = w.strings("SELECT content FROM messages WHERE role = 'tool'");
    assert_eq!(
        results,
        ["Error: cancelled: the thread was stopped (by user)"]
    );
    w.check();
}

#[test]
fn a_queued_call_is_stored_with_its_message_or_not_at_all() {
    // A failing statement between the message holding a queued call and the call's row left
    // the message without its call: a call the history shows that never runs.
    for n in 0..4 {
        let mut w = new_world(&plain(&["echo"]));
        w.apply(&Op::CrashDuring(
            n,
            Box::new(Op::Queue {
                tool: 0,
                args: Args::Good(0),
            }),
        ));
        w.check();
        run_case(
            &plain(&["echo"]),
            &[Op::CrashDuring(
                n,
                Box::new(Op::Queue {
                    tool: 0,
                    args: Args::Good(0),
                }),
            )],
        );
    }
}

#[test]
fn a_result_is_stored_with_its_call_closed_or_not_at_all() {
    // A failing statement between a call's result message and the update closing the call
    // left a result on a call still `running`, which ran again and got a second result.
    for n in 0..12 {
        run_case(
            &plain(&["echo"]),
            &[
                Op::Queue {
                    tool: 0,
                    args: Args::Good(0),
                },
                Op::CrashDuring(n, Box::new(Op::Step)),
            ],
        );
    }
}

#[test]
fn an_approval_is_stored_with_its_wake_up_or_not_at_all() {
    // A failing statement after the decision was stored but before the call was made due
    // left the call waiting for good, and a second decision was refused (not pending).
    for (n, yes) in (0..7).flat_map(|n| [(n, true), (n, false)]) {
        let setup = plain(&["guarded"]);
        let mut w = new_world(&setup);
        w.apply(&Op::Queue {
            tool: 0,
            args: Args::Good(0),
        });
        w.apply(&Op::Step);
        assert_eq!(w.strings("SELECT approval FROM tool_calls"), ["pending"]);
        w.apply(&Op::CrashDuring(n, Box::new(Op::Approve { pick: 0, yes })));
        w.check();
        let decided = w.strings("SELECT approval FROM tool_calls");
        if decided != ["pending"] {
            let due = w.strings("SELECT id FROM tool_calls WHERE wake_at IS NOT NULL");
            assert_eq!(
                due.len(),
                1,
                "decided ({decided:?}) but not due (crash at {n})"
            );
        }
        w.settle();
    }
}

#[test]
fn a_rate_limited_call_that_wakes_to_a_full_window_waits_for_the_next() {
    // Three calls of a tool allowed once a minute: the second and third park until the window
    // frees; when it does, the second takes the slot and the third, gated again, kept its
    // old wake time (already passed), so the driver stepped it without end for a minute.
    let mut w = new_world(&plain(&["limited"]));
    for op in [
        Op::User(Size::Short(0)),
        Op::Step,
        calling(&[IdKind::Fresh, IdKind::Fresh, IdKind::Fresh]),
        Op::Step,
        Op::Step,
        Op::Step,
    ] {
        w.apply(&op);
    }
    let wakes = |w: &World| {
        w.strings(
            "SELECT id || ' ' || status || ' ' || (wake_at - 1795300162000) FROM tool_calls
             WHERE status = 'rate_limited' ORDER BY seq",
        )
    };
    assert_eq!(wakes(&w).len(), 2, "{:?}", wakes(&w));
    w.clock.set(T0 + 60_000);
    w.apply(&Op::Step); // the second call takes the freed slot
    w.apply(&Op::Step); // the third is gated again
    let third = wakes(&w);
    assert_eq!(third.len(), 1);
    assert!(third[0].ends_with(" rate_limited 120000"), "{third:?}");
    let mut t = w.client();
    assert!(matches!(t.next_action(w.now(), 4).unwrap(), Action::Wait));
    drop(t);
    w.settle();
}

#[test]
fn provider_ids_that_some_wire_cannot_carry_are_replaced_by_ours() {
    // `a.b` and `a_b` were kept as they came; the Messages API allows neither `.` nor ` `, the
    // body mapped both to `a_b`, and every later request of the thread was refused (two
    // tool_use blocks with one id). A 1 MB id was kept too (and repeated in its result, whose
    // row a 1 MB result took past the limit).
    let mut w = new_world(&plain(&["echo"]));
    for op in [
        Op::User(Size::Short(0)),
        Op::Step,
        calling(&[
            IdKind::Odd(0),
            IdKind::Odd(1),
            IdKind::Odd(2),
            IdKind::Long(LONG_ID),
            IdKind::Long(41),
        ]),
    ] {
        w.apply(&op);
        w.check();
    }
    let ids = w.strings("SELECT id FROM tool_calls ORDER BY seq");
    assert_eq!(ids.len(), 5);
    assert_eq!(ids[1], "a_b", "an id every wire takes is kept");
    for id in [&ids[0], &ids[2], &ids[3], &ids[4]] {
        assert!(
            id.starts_with("call_") && id.len() == 37,
            "replaced: {}",
            &id[..id.len().min(50)]
        );
    }
    run_case(
        &plain(&["echo"]),
        &[
            Op::User(Size::Short(0)),
            Op::Step,
            calling(&[IdKind::Odd(7), IdKind::Odd(0)]),
            Op::User(Size::Short(0)),
        ],
    );
}

#[test]
fn a_tool_name_longer_than_any_tool_fails_the_reply_once() {
    // An unknown tool name of 1 MB: its error result repeated it (name and text) past the row
    // limit, the result could not be stored, the call ran again after each "interruption" and
    // ended as "interrupted 3 times" (the false error of issue 13 #5).
    let mut w = new_world(&plain(&["echo"]));
    let long = u8::try_from(TOOLS.len()).unwrap();
    w.apply(&Op::User(Size::Short(0)));
    w.apply(&Op::Reply(ReplySpec {
        text: Size::Short(3),
        calls: vec![CallSpec {
            id: IdKind::Fresh,
            tool: long,
            args: Args::Good(0),
        }],
        fan_out: None,
        end: End::Whole,
    }));
    w.check();
    assert_eq!(
        w.strings("SELECT status FROM messages WHERE role = 'assistant'"),
        ["failed"]
    );
    assert!(w.call_ids().is_empty(), "none of its calls is stored");
    let summary = w.host.thread().summary().unwrap();
    assert_eq!(summary.status, ThreadStatus::Idle);
    assert!(summary
        .last_error
        .unwrap()
        .contains("tool names have at most 64"));
    w.settle();
}

/// A set of futures polled only once woken, as `join_all` over more than 30 futures polls.
struct PolledWhenWoken(Vec<(BoxFuture<'static, ()>, Arc<Woken>)>);

struct Woken(AtomicBool);

impl Wake for Woken {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

impl Future for PolledWhenWoken {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        self.0.retain_mut(|(future, woken)| {
            if !woken.0.swap(false, Ordering::SeqCst) {
                return true;
            }
            let waker = Waker::from(woken.clone());
            future
                .as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending()
        });
        if self.0.is_empty() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

#[test]
fn the_harness_wakes_a_sleep_when_the_clock_reaches_it() {
    // The harness moved the clock to a sleep's deadline but never woke the sleep: a combinator
    // that polls only woken futures (`join_all` over more than 30 of them, when the engine ran
    // a parallel reply's calls all at once) waited for good ("the work waits for something
    // that never comes").
    let w = new_world(&plain(&["echo"]));
    let sleeps = (0..40)
        .map(|i| {
            (
                w.host.sleep(1_000 + i),
                Arc::new(Woken(AtomicBool::new(true))),
            )
        })
        .collect();
    w.host.run(PolledWhenWoken(sleeps));
    assert_eq!(w.now(), T0 + 1_039);
}
