//! The fake host and the driver loop of the test harness.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use serde_json::{Map, Value};

use super::Sqlite;
use crate::config::{AgentConfig, ModelConfig};
use crate::engine::durable::{Ran, Window};
use crate::engine::store::{HistoryCache, Store, StoredToolCall};
use crate::engine::thread::{Action, ModelCall, Thread};
use crate::engine::tool_runs::{Admission, ToolRun};
use crate::llm::stream::{FinishReason, StreamEvent};
use crate::tool::{
    run_until_suspended, BoxFuture, CallToolResult, FlowHost, FlowState, HostError, HttpRequest,
    HttpResponse, Registry,
};
use crate::values::protocol::ServerFrame;
use crate::values::sql::{Sql, SqlValue};

/// Something that happens to the thread while a round trip is on its way (a stop arriving
/// while the deployment counter answers, say).
pub type Meanwhile = Box<dyn FnMut(&mut Thread<'_>)>;

/// Steps the engine may take in one [`TestHost::drive`] before the harness calls it a loop.
const MAX_DRIVE_STEPS: usize = 10_000;

/// A thread's database, the tools, a virtual clock and the world outside, as one
/// [`FlowHost`]. Thread `thread-1` of agent `support` exists from the start.
pub struct TestHost {
    /// The thread's SQLite.
    pub db: Sqlite,
    /// The tools the thread may run.
    pub registry: Registry,
    clock: Rc<Cell<i64>>,
    frames: RefCell<Vec<ServerFrame>>,
    secrets: Vec<(String, String)>,
    vars: Vec<(String, String)>,
    agent: AgentConfig,
    limiter: RefCell<Option<Window>>,
    limiter_asked: Cell<u32>,
    before_limiter_answer: RefCell<Meanwhile>,
    /// The model history cache the driver keeps (so host tests run the cached path).
    history: Rc<HistoryCache>,
}

impl TestHost {
    /// A host at time `now` (ms since the epoch) over a fresh database holding thread
    /// `thread-1`, with `registry`'s tools. Panics if SQLite cannot open in memory.
    pub fn new(registry: Registry, now: i64) -> Self {
        Self::with_clock(registry, Rc::new(Cell::new(now)))
    }

    /// A host whose virtual clock is `clock`, shared with the test (a tool may hold it to
    /// make a step take time).
    pub fn with_clock(registry: Registry, clock: Rc<Cell<i64>>) -> Self {
        let now = clock.get();
        let db = Sqlite::memory();
        #[allow(clippy::expect_used)] // a test harness: a broken schema is a failed test
        Thread::open(&db)
            .and_then(|mut t| t.create(now, "thread-1", "support", &[]))
            .expect("create the test thread");
        let names: Vec<&str> = registry.names().collect();
        let agent = agent(&names);
        TestHost {
            db,
            registry,
            clock,
            frames: RefCell::new(Vec::new()),
            secrets: Vec::new(),
            vars: Vec::new(),
            agent,
            limiter: RefCell::new(None),
            limiter_asked: Cell::new(0),
            before_limiter_answer: RefCell::new(Box::new(|_| {})),
            history: Rc::default(),
        }
    }

    /// A secret `flow.secret(name)` returns.
    pub fn secret(mut self, name: &str, value: &str) -> Self {
        self.secrets.push((name.to_owned(), value.to_owned()));
        self
    }

    /// A var `flow.var(name)` returns (`PUBLIC_URL` makes webhook URLs).
    pub fn var(mut self, name: &str, value: &str) -> Self {
        self.vars.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Shares the host: tools hold it through their [`FlowState`].
    pub fn into_rc(self) -> Rc<Self> {
        Rc::new(self)
    }

    /// A view of the thread (open one per event, as the Worker does).
    pub fn thread(&self) -> Thread<'_> {
        Thread::open_migrated(&self.db).with_history_cache(self.history.clone())
    }

    /// The thread's store, for reading what the engine stored.
    pub fn store(&self) -> Store<'_> {
        Store::new(&self.db)
    }

    /// The virtual time.
    pub fn now(&self) -> i64 {
        self.clock.get()
    }

    /// Moves the virtual clock to `t`.
    pub fn set_now(&self, t: i64) {
        self.clock.set(t);
    }

    /// Moves the virtual clock on by `ms`.
    pub fn advance(&self, ms: i64) {
        self.clock.set(self.clock.get().saturating_add(ms));
    }

    /// The frames sent so far, taken.
    pub fn take_frames(&self) -> Vec<ServerFrame> {
        std::mem::take(&mut *self.frames.borrow_mut())
    }

    /// The frames sent so far.
    pub fn frames(&self) -> Vec<ServerFrame> {
        self.frames.borrow().clone()
    }

    /// Keeps the frames `t` produced (after an input the test gave it directly).
    pub fn keep_frames(&self, t: &mut Thread<'_>) {
        self.frames
            .borrow_mut()
            .extend(std::iter::from_fn(|| t.poll_frame()));
    }

    /// What the deployment counter answers from now on (`None`: it cannot be reached).
    pub fn set_limiter(&self, window: Option<Window>) {
        *self.limiter.borrow_mut() = window;
    }

    /// How many times the engine asked the deployment counter.
    pub fn limiter_asked(&self) -> u32 {
        self.limiter_asked.get()
    }

    /// Runs `f` while the counter's answer is on its way.
    pub fn before_limiter_answer(&self, f: Meanwhile) {
        *self.before_limiter_answer.borrow_mut() = f;
    }

    /// The flow a top-level call `tool_call_id` would get.
    #[allow(clippy::expect_used)] // a test harness: no thread is a failed test
    pub fn flow(self: &Rc<Self>, tool_call_id: &str) -> FlowState {
        let summary = self.thread().summary().expect("the test thread");
        FlowState::top_level(self.clone(), &summary, &self.agent, tool_call_id)
    }

    /// Drives the thread as the Worker's driver does until it needs the model
    /// ([`Action::CallModel`]), waits for parked calls ([`Action::Wait`]) or is idle.
    /// `jitter` (0..1) goes to the retry backoff.
    ///
    /// # Panics
    /// On a storage error, or if the engine keeps asking for steps without end.
    #[allow(clippy::expect_used)] // a test harness: an engine error is a failed test
    pub fn drive(self: &Rc<Self>, jitter: f64) -> Action {
        for _ in 0..MAX_DRIVE_STEPS {
            let mut t = self.thread();
            let action = t.next_action(self.now(), 10).expect("next_action");
            self.keep_frames(&mut t);
            match action {
                Action::RunTool(call) => self.run_tools(&mut t, vec![call], jitter),
                Action::RunTools(calls) => self.run_tools(&mut t, calls, jitter),
                Action::Continue => {}
                other => return other,
            }
        }
        panic!("the engine took {MAX_DRIVE_STEPS} steps without stopping");
    }

    /// Performs what the engine asks for due calls: hands each to it, answers a limiter
    /// question, runs what it admitted and hands the outcomes back.
    #[allow(clippy::expect_used)] // a test harness: an engine error is a failed test
    pub fn run_tools(self: &Rc<Self>, t: &mut Thread<'_>, calls: Vec<StoredToolCall>, jitter: f64) {
        let mut runs: Vec<ToolRun> = Vec::new();
        for call in calls {
            let policy = self
                .registry
                .get(&call.call.name)
                .map(|tool| tool.policy().clone())
                .unwrap_or_default();
            let prompt_bindings = self.agent.prompt.tool_bindings.get(&call.call.name);
            let mut admitted = t
                .handle_due_call(self.now(), call, policy, prompt_bindings)
                .expect("handle_due_call");
            if let Admission::AskLimiter { call, policy, .. } = admitted {
                self.limiter_asked.set(self.limiter_asked.get() + 1);
                (self.before_limiter_answer.borrow_mut())(t);
                let window = *self.limiter.borrow();
                admitted = t
                    .handle_limiter_answer(self.now(), call, policy, window)
                    .expect("handle_limiter_answer");
            }
            if let Admission::Run(run) = admitted {
                runs.push(run);
            }
        }
        self.keep_frames(t);
        // The Worker runs these concurrently; none of them waits on real I/O here.
        let ends: Vec<Ran> = runs.iter().map(|run| self.execute(run)).collect();
        for (run, ran) in runs.iter().zip(ends) {
            t.handle_tool_outcome(self.now(), run, ran, jitter)
                .expect("handle_tool_outcome");
        }
        self.keep_frames(t);
    }

    /// One run of a call, with its stored bindings, until it finishes, parks or times out.
    pub fn execute(self: &Rc<Self>, run: &ToolRun) -> Ran {
        let call = &run.call;
        let Some(tool) = self.registry.get(&call.call.name) else {
            return Ran::Done(Ok(CallToolResult::error(format!(
                "unknown tool {:?}",
                call.call.name
            ))));
        };
        let flow = self.flow(&call.call.id).with_bindings(call.binding_map());
        let state = flow.run_state().clone();
        let attempt = tool.attempt(flow, &call.call.arguments);
        self.with_virtual_timeout(run_until_suspended(attempt, &state), run.policy.timeout)
    }

    /// The Worker races each run against its timeout. Host tools never wait on I/O, so a run
    /// still pending after many polls waits for nothing that will come: its timeout fires
    /// (and that much virtual time passes).
    fn with_virtual_timeout(&self, run: impl Future<Output = Ran>, timeout: Duration) -> Ran {
        let mut run = pin!(run);
        let mut cx = Context::from_waker(Waker::noop());
        for _ in 0..1_000 {
            if let Poll::Ready(ran) = run.as_mut().poll(&mut cx) {
                return ran;
            }
        }
        self.advance(i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX));
        Ran::TimedOut
    }

    /// Completes a model call with `text` and tool calls `(id, name, raw arguments)`, as a
    /// whole stream would.
    #[allow(clippy::expect_used)] // a test harness: an engine error is a failed test
    pub fn reply(&self, mut call: ModelCall, text: &str, calls: &[(&str, &str, &str)]) {
        let mut t = self.thread();
        for ev in reply_events(text, calls) {
            t.on_model_event(&mut call, ev).expect("a stream event");
        }
        t.finish_model_call(self.now(), call)
            .expect("finish_model_call");
        self.keep_frames(&mut t);
    }
}

/// The events of a whole streamed reply: `text`, then tool calls `(id, name, raw arguments)`,
/// the finish reason and the end of the stream.
pub fn reply_events(text: &str, calls: &[(&str, &str, &str)]) -> Vec<StreamEvent> {
    let mut events = Vec::new();
    if !text.is_empty() {
        events.push(StreamEvent::TextDelta(text.to_owned()));
    }
    for (index, (id, name, args)) in calls.iter().enumerate() {
        events.push(StreamEvent::ToolCallStart {
            index,
            id: (*id).to_owned(),
            name: (*name).to_owned(),
        });
        events.push(StreamEvent::ToolCallDelta {
            index,
            arguments: (*args).to_owned(),
        });
    }
    events.push(StreamEvent::Finish(if calls.is_empty() {
        FinishReason::Stop
    } else {
        FinishReason::ToolCalls
    }));
    events.push(StreamEvent::Done);
    events
}

/// The `support` agent's configuration with `tools`, for a flow outside a loaded turn.
#[allow(clippy::expect_used)] // a fixed, valid definition
pub fn agent(tools: &[&str]) -> AgentConfig {
    let json = serde_json::json!({
        "agent": { "id": "support", "side_a": { "prompt": "support" } },
        "prompt": {
            "name": "support", "model": "default", "system": "be helpful",
            "tools": tools,
        },
        "model": {
            "name": "default", "provider": "openai", "model": "m",
            "base_url": "http://127.0.0.1:9",
        },
    });
    AgentConfig {
        agent: serde_json::from_value(json["agent"].clone()).expect("agent"),
        side: crate::values::Side::A,
        prompt: serde_json::from_value(json["prompt"].clone()).expect("prompt"),
        models: vec![serde_json::from_value::<ModelConfig>(json["model"].clone()).expect("model")],
        delegates: Vec::new(),
    }
}

/// Polls a future that never waits on real I/O to completion.
pub fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

impl FlowHost for TestHost {
    fn sql(&self) -> &dyn Sql {
        &self.db
    }
    fn registry(&self) -> &Registry {
        &self.registry
    }
    fn now_ms(&self) -> i64 {
        self.clock.get()
    }
    fn broadcast(&self, frame: &ServerFrame) {
        self.frames.borrow_mut().push(frame.clone());
    }
    fn secret(&self, name: &str) -> Option<String> {
        self.secrets
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    }
    fn var(&self, name: &str) -> Option<String> {
        self.vars
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    }
    fn fetch(&self, _request: HttpRequest) -> BoxFuture<'static, Result<HttpResponse, HostError>> {
        Box::pin(async { Err(HostError::Unsupported("no network in host tests")) })
    }
    fn d1_query(
        &self,
        _binding: &str,
        _sql: &str,
        _params: Vec<SqlValue>,
    ) -> BoxFuture<'static, Result<Vec<Map<String, Value>>, HostError>> {
        Box::pin(async { Err(HostError::Unsupported("no D1 in host tests")) })
    }
}
