//! The fake host and the driver loop of the test harness.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use serde_json::Value;

use super::Sqlite;
use crate::config::{AgentConfig, ModelConfig};
use crate::engine::durable::Window;
use crate::engine::store::{Store, StoredToolCall, ThreadCache};
use crate::engine::thread::{Action, ModelCall, Thread};
use crate::llm::stream::{FinishReason, ProviderError, StreamEvent};
use crate::runtime::ThreadRuntime;
use crate::tool::{BoxFuture, FlowState, Registry};
use crate::values::protocol::ServerFrame;

/// Something that happens to the thread while a round trip is on its way (a stop arriving
/// while the deployment counter answers, say).
pub type Meanwhile = Box<dyn FnMut(&mut Thread<'_>)>;

/// Steps the engine may take in one [`TestHost::drive`] before the harness calls it a loop.
const MAX_DRIVE_STEPS: usize = 10_000;

/// Polls of a waiting future before the harness decides it waits for time (host tools never
/// wait on real I/O, so a future still pending after these waits for a sleep or nothing).
const POLLS_BEFORE_TIME_PASSES: usize = 1_000;

/// The host's pending sleeps: when each falls due, and the waker of its latest poll.
pub(super) type Timers = Rc<RefCell<Vec<(i64, Rc<RefCell<Waker>>)>>>;

/// One scripted model attempt.
pub(super) enum Scripted {
    /// Its events at once (or its failure to open).
    Answer(Result<Vec<StreamEvent>, ProviderError>),
    /// Its events, then a stream that never ends.
    Endless(Vec<StreamEvent>),
    /// Its events one per read, as a network stream delivers them, each read the given ms
    /// (of virtual time) after the last.
    Streamed(Vec<(i64, StreamEvent)>),
}
/// A thread's database, the tools, a virtual clock and the world outside, as one
/// [`FlowHost`](crate::tool::FlowHost) and [`Platform`](crate::runtime::Platform). Thread
/// `thread-1` of agent `support` exists from the start.
pub struct TestHost {
    /// The thread's SQLite.
    pub db: Sqlite,
    /// The tools the thread may run.
    pub registry: Registry,
    pub(super) clock: Rc<Cell<i64>>,
    pub(super) frames: RefCell<Vec<ServerFrame>>,
    /// The same frames as sent on the wire (with `seq` when logged).
    pub(super) sent: RefCell<Vec<String>>,
    pub(super) secrets: Vec<(String, String)>,
    pub(super) vars: Vec<(String, String)>,
    pub(super) agent: AgentConfig,
    pub(super) limiter: RefCell<Option<Window>>,
    pub(super) limiter_asked: Cell<u32>,
    pub(super) before_limiter_answer: RefCell<Meanwhile>,
    /// The cache a thread object keeps between its views (so host tests run the cached
    /// paths).
    cache: Rc<ThreadCache>,
    /// The backoff jitter the runtime uses (set by [`TestHost::drive`]).
    pub(super) jitter: Cell<f64>,
    /// Deadlines of the virtual sleeps that are waiting, with the waker of each.
    pub(super) timers: Timers,
    /// When the thread's alarm is set to fire (`None`: not set).
    pub(super) alarm: Cell<Option<i64>>,
    /// How many times the runtime set or deleted the alarm (each one a storage write).
    pub(super) alarm_writes: Cell<u32>,
    /// How long, in virtual ms, an alarm write takes to answer (applied when issued, as
    /// storage applies its operations in order): 0 by default.
    pub alarm_write_ms: Cell<u64>,
    /// Work the runtime spawned to run after its handler answered.
    pub(super) spawned: RefCell<Vec<BoxFuture<'static, ()>>>,
    /// What the runtime logged for the operator.
    pub(super) errors: RefCell<Vec<String>>,
    /// The model's answers, one per attempt, in order (see [`TestHost::script`]).
    pub(super) script: RefCell<VecDeque<Scripted>>,
    /// The request bodies the model was sent.
    pub(super) requests: RefCell<Vec<Value>>,
    /// The deployment's thread index (D1 in the Worker): look at its rows, or make it fail.
    pub index: Rc<super::SqliteD1>,
    /// The embedding model of tool selection: script its faults, look at its requests.
    pub embedder: super::ToyEmbedder,
    /// The chunks of replies streaming in this instance (a restart starts without them).
    pub live_chunks: crate::engine::frame_log::LiveChunks,
    /// Set to make the configuration database fail: looking an agent up answers this fault.
    pub config_fault: RefCell<Option<String>>,
    /// Set to make the agent's configuration a copy older than its bound, whose next check
    /// answers as this says (see [`StaleConfig`]).
    pub stale_config: RefCell<Option<StaleConfig>>,
    /// How long opening a model reply takes on the virtual clock (the request's round trip).
    pub model_open_ms: Cell<u64>,
    /// Set to start with an empty configuration cache (a new isolate): the next load takes
    /// this many ms on the virtual clock; until then only a copy the thread kept and gave
    /// back (`adopt_agent`) is cached.
    pub cold_config: Cell<Option<u64>>,
    /// The copy the runtime gave back while `cold_config` was set.
    pub adopted: RefCell<Option<Rc<AgentConfig>>>,
    /// The configuration's version stamp (`agent_version`).
    pub config_version: Cell<i64>,
    /// How many loads reached the configuration database.
    pub config_loads: Cell<u32>,
}

/// A cached configuration past its freshness bound: the turn loop plans with `cached` and the
/// next load confirms it, once, after `check_ms` on the virtual clock.
pub struct StaleConfig {
    /// The copy the loop plans with.
    pub cached: Rc<AgentConfig>,
    /// How long the check takes.
    pub check_ms: u64,
    /// What it finds: `None` the same copy, `Some(Ok(_))` a changed configuration,
    /// `Some(Err(_))` a database fault.
    pub found: Option<Result<AgentConfig, String>>,
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
        let host = Self::build(registry, clock);
        #[allow(clippy::expect_used)] // a test harness: a broken schema is a failed test
        Thread::open(&host.db)
            .and_then(|mut t| t.create(host.now(), "thread-1", "support", &[]))
            .expect("create the test thread");
        host
    }

    /// A host whose object holds no thread yet (for [`ThreadRuntime::create`]), at time
    /// `now`.
    pub fn without_thread(registry: Registry, now: i64) -> Self {
        Self::build(registry, Rc::new(Cell::new(now)))
    }

    /// The same storage, clock and configuration after the object restarted (a crash, an
    /// eviction, or a deploy of new code: `registry`'s tools). What the object held in memory
    /// is gone (its cache, frames, timers, spawned work); what its SQLite, its alarm and the
    /// deployment (D1, vars, secrets) hold is kept.
    ///
    /// # Panics
    /// If the host is still shared: drop the flows and runtimes that hold it first (work
    /// spawned and not yet run is dropped here).
    pub fn restarted(self: Rc<Self>, registry: Registry) -> Rc<Self> {
        // Work spawned and not run yet died with the instance (and holds its runtime).
        self.spawned.borrow_mut().clear();
        let Ok(old) = Rc::try_unwrap(self) else {
            panic!("restarted: the host is still shared (a flow or runtime holds it)");
        };
        let mut host = Self::build_over(old.db, registry, old.clock);
        host.secrets = old.secrets;
        host.vars = old.vars;
        host.agent = old.agent;
        host.index = old.index;
        // The alarm is the object's storage too.
        host.alarm.set(old.alarm.get());
        Rc::new(host)
    }

    fn build(registry: Registry, clock: Rc<Cell<i64>>) -> Self {
        Self::build_over(Sqlite::memory(), registry, clock)
    }

    fn build_over(db: Sqlite, registry: Registry, clock: Rc<Cell<i64>>) -> Self {
        let names: Vec<&str> = registry.names().collect();
        let agent = agent(&names);
        TestHost {
            db,
            registry,
            clock,
            frames: RefCell::new(Vec::new()),
            sent: RefCell::new(Vec::new()),
            secrets: Vec::new(),
            vars: Vec::new(),
            agent,
            limiter: RefCell::new(None),
            limiter_asked: Cell::new(0),
            before_limiter_answer: RefCell::new(Box::new(|_| {})),
            cache: Rc::default(),
            jitter: Cell::new(0.5),
            timers: Rc::default(),
            alarm: Cell::new(None),
            alarm_writes: Cell::new(0),
            alarm_write_ms: Cell::new(0),
            spawned: RefCell::default(),
            errors: RefCell::default(),
            script: RefCell::default(),
            requests: RefCell::default(),
            index: Rc::new(super::SqliteD1::thread_index()),
            embedder: super::ToyEmbedder::default(),
            live_chunks: Default::default(),
            config_fault: RefCell::default(),
            stale_config: RefCell::default(),
            model_open_ms: Cell::new(0),
            cold_config: Cell::new(None),
            adopted: RefCell::default(),
            config_version: Cell::new(1),
            config_loads: Cell::new(0),
        }
    }

    /// Runs the thread under `agent` (the `support` agent offering every registered tool by
    /// default; a second model makes a fallback chain).
    pub fn with_agent(mut self, agent: AgentConfig) -> Self {
        self.agent = agent;
        self
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
        Thread::open_migrated(&self.db).with_cache(self.cache.clone())
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

    /// The frames sent so far, taken (their wire texts too).
    pub fn take_frames(&self) -> Vec<ServerFrame> {
        self.sent.borrow_mut().clear();
        std::mem::take(&mut *self.frames.borrow_mut())
    }

    /// The frames sent so far.
    pub fn frames(&self) -> Vec<ServerFrame> {
        self.frames.borrow().clone()
    }

    /// The frames sent so far as their wire text (with `"seq"` when logged), taken.
    pub fn take_sent(&self) -> Vec<String> {
        std::mem::take(&mut *self.sent.borrow_mut())
    }

    /// Keeps the frames `t` produced (after an input the test gave it directly): numbered,
    /// logged and sent as the runtime does; a frame log failure is logged like the runtime's.
    pub fn keep_frames(&self, t: &mut Thread<'_>) {
        let frames = std::iter::from_fn(|| t.poll_frame()).collect();
        if let Err(e) = crate::tool::broadcast(self, frames) {
            self.errors
                .borrow_mut()
                .push(format!("frames sent without seq, not logged: {e}"));
        }
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
    /// ([`Action::CallModel`]), waits for parked calls ([`Action::Wait`]) or is idle: tool
    /// calls go through the shipped runtime ([`ThreadRuntime::run_tool_calls`]: admission, the
    /// limiter, the timeout, the outcome), in virtual time. `jitter` (0..1) goes to the retry
    /// backoff.
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

    /// Performs what the engine asks for due calls, as the runtime does: hands each to it,
    /// answers a limiter question, runs what it admitted (a run still pending once the
    /// futures settle has hit its timeout, and that much virtual time passes) and hands the
    /// outcomes back.
    #[allow(clippy::expect_used)] // a test harness: no thread is a failed test
    pub fn run_tools(self: &Rc<Self>, t: &mut Thread<'_>, calls: Vec<StoredToolCall>, jitter: f64) {
        self.jitter.set(jitter);
        let summary = t.summary().expect("the test thread");
        let runtime = ThreadRuntime::new(self.clone());
        let config = Rc::new(self.agent.clone());
        self.run(runtime.run_tool_calls(t, &config, &summary, calls));
        // The last outcome's frames are left for the driver's next flush: this one.
        self.keep_frames(t);
    }

    /// A runtime over this host, as a thread object keeps one: give it operations
    /// ([`ThreadRuntime::apply`]) under [`TestHost::run`], then [`TestHost::run_spawned`] to
    /// drive the turns they started.
    pub fn runtime(self: &Rc<Self>) -> Rc<ThreadRuntime> {
        ThreadRuntime::new(self.clone())
    }

    /// Queues the model's answer to its next attempt: the events of a whole reply
    /// ([`reply_events`]) or a provider error.
    pub fn script(&self, answer: Result<Vec<StreamEvent>, ProviderError>) {
        self.script.borrow_mut().push_back(Scripted::Answer(answer));
    }

    /// Queues a model attempt that delivers `events` one per read, as a model streaming over
    /// the network does (each text delta its own flush of frames).
    pub fn script_streamed(&self, events: Vec<StreamEvent>) {
        self.script_paced(events, 0);
    }

    /// Queues a model attempt that delivers `events` one per read, `gap_ms` of virtual time
    /// apart (a model that streams at its own pace).
    pub fn script_paced(&self, events: Vec<StreamEvent>, gap_ms: i64) {
        self.script_timed(events.into_iter().map(|e| (gap_ms, e)).collect());
    }

    /// Queues a model attempt that delivers each event in its own read, the given ms of
    /// virtual time after the one before (a model that pauses where it likes).
    pub fn script_timed(&self, events: Vec<(i64, StreamEvent)>) {
        self.script
            .borrow_mut()
            .push_back(Scripted::Streamed(events));
    }

    /// Queues a model attempt that sends `events` and then never ends (a stream that drips
    /// forever): only the attempt's overall deadline ends it, on the virtual clock.
    pub fn script_endless(&self, events: Vec<StreamEvent>) {
        self.script
            .borrow_mut()
            .push_back(Scripted::Endless(events));
    }

    /// The request bodies the model was sent so far.
    pub fn model_requests(&self) -> Vec<Value> {
        self.requests.borrow().clone()
    }

    /// When the thread's alarm fires (`None`: not set).
    pub fn alarm_at(&self) -> Option<i64> {
        self.alarm.get()
    }

    /// How many times the runtime set or deleted the alarm so far (each a storage write).
    pub fn alarm_writes(&self) -> u32 {
        self.alarm_writes.get()
    }

    /// Takes the alarm away, as the Durable Object runtime does when it fires it.
    pub fn take_alarm(&self) -> Option<i64> {
        self.alarm.take()
    }

    /// Fires the alarm as the Durable Object runtime would: the clock moves to its time (if
    /// that is later), the alarm is gone, and `rt.alarm()` runs, spawned work included.
    /// Returns when it was set to fire, or `None` (and runs nothing) when no alarm was set.
    pub fn fire_alarm(&self, rt: &ThreadRuntime) -> Option<i64> {
        let at = self.take_alarm()?;
        self.set_now(at.max(self.now()));
        self.run(rt.alarm());
        self.run_spawned();
        Some(at)
    }

    /// What the runtime logged for the operator so far.
    pub fn logged_errors(&self) -> Vec<String> {
        self.errors.borrow().clone()
    }

    /// Runs `work` to its end in virtual time: when every future waits, the clock jumps to
    /// the earliest sleep (a timeout, a retry's delay).
    ///
    /// # Panics
    /// If `work` waits for something that never comes (no sleep is pending).
    pub fn run<F: Future>(&self, work: F) -> F::Output {
        let mut work = pin!(work);
        let mut cx = Context::from_waker(Waker::noop());
        loop {
            for _ in 0..POLLS_BEFORE_TIME_PASSES {
                if let Poll::Ready(out) = work.as_mut().poll(&mut cx) {
                    return out;
                }
            }
            let next = self.timers.borrow().iter().map(|(t, _)| *t).min();
            let Some(next) = next else {
                panic!("the work waits for something that never comes (no sleep is pending)");
            };
            self.set_now(next.max(self.now()));
            let now = self.now();
            let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut *self.timers.borrow_mut())
                .into_iter()
                .partition(|(t, _)| *t <= now);
            *self.timers.borrow_mut() = later;
            for (_, waker) in due {
                waker.borrow().wake_by_ref();
            }
        }
    }

    /// Runs the work spawned so far side by side, as an event loop would (a piece that
    /// sleeps lets the others run meanwhile), until none is left.
    pub fn run_spawned_together(&self) {
        loop {
            let spawned = std::mem::take(&mut *self.spawned.borrow_mut());
            if spawned.is_empty() {
                return;
            }
            self.run(futures_util::future::join_all(spawned));
        }
    }

    /// Runs the work spawned so far side by side with `other` (say, another client's
    /// operation arriving while a turn runs), then whatever they spawned; `other`'s output.
    pub fn run_spawned_with<F: Future>(&self, other: F) -> F::Output {
        let spawned = std::mem::take(&mut *self.spawned.borrow_mut());
        let (_, out) = self.run(futures_util::future::join(
            futures_util::future::join_all(spawned),
            other,
        ));
        self.run_spawned_together();
        out
    }

    /// Runs the work the runtime spawned (turns started by an operation), one piece after the
    /// other, until none is left.
    pub fn run_spawned(&self) {
        loop {
            let spawned = std::mem::take(&mut *self.spawned.borrow_mut());
            if spawned.is_empty() {
                return;
            }
            for work in spawned {
                self.run(work);
            }
        }
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
            "base_url": "https://model.invalid/v1",
        },
    });
    AgentConfig {
        agent: serde_json::from_value(json["agent"].clone()).expect("agent"),
        side: crate::values::Side::A,
        prompt: serde_json::from_value(json["prompt"].clone()).expect("prompt"),
        models: vec![serde_json::from_value::<ModelConfig>(json["model"].clone()).expect("model")],
        delegates: Vec::new(),
        compaction: None,
        selection_models: Vec::new(),
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
