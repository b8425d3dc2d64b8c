//! The world a case runs in ([`World`]): the thread's host, storage, clock and memory, and the
//! operations applied to it (a client's requests, the model's answers, clock jumps, crashes).

use super::*;

use edgent::engine::store::ThreadCache;
use edgent::engine::thread::ThreadError;
use edgent::llm::stream::ProviderError;

pub(super) struct World {
    pub(super) host: Rc<TestHost>,
    pub(super) clock: Rc<Cell<i64>>,
    pub(super) storage: Rc<Storage>,
    /// The object's memory (a crash starts a new one).
    pub(super) cache: Rc<ThreadCache>,
    configs: [Rc<AgentConfig>; 2],
    pub(super) setup: Setup,
    /// The model call in flight.
    pub(super) model: Option<ModelCall>,
    pub(super) fresh: u32,
}

pub(super) fn new_world(s: &Setup) -> World {
    edgent_example::APP.install();
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
pub(super) fn answered<T>(w: &World, what: &str, r: Result<T, ThreadError>) -> Option<T> {
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
    pub(super) fn now(&self) -> i64 {
        self.clock.get()
    }

    /// A view for a client operation (the runtime applies those without turn rules).
    pub(super) fn client(&self) -> Thread<'_> {
        Thread::open_migrated(&*self.storage).with_cache(self.cache.clone())
    }

    /// The configuration of the side that runs now.
    pub(super) fn config(&self) -> Rc<AgentConfig> {
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

    pub(super) fn keep(&self, t: &mut Thread<'_>) {
        while t.poll_frame().is_some() {}
        let _ = t.take_hook_failures();
    }

    pub(super) fn crash(&mut self) {
        self.model = None;
        self.cache = Rc::default();
        self.storage.crash_in.set(None);
        self.storage.crashed.set(false);
    }

    pub(super) fn call_ids(&self) -> Vec<String> {
        self.strings("SELECT id FROM tool_calls ORDER BY seq")
    }

    pub(super) fn strings(&self, sql: &str) -> Vec<String> {
        let conn = &self.host.db.0;
        let mut stmt = conn.prepare(sql).unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    /// Performs `op`; a tool that killed the Worker meanwhile restarts the object.
    pub(super) fn apply(&mut self, op: &Op) {
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
                // `webhooks` is a feature table: absent until the thread's first durable step.
                let has_webhooks = !self
                    .strings("SELECT name FROM sqlite_master WHERE name = 'webhooks'")
                    .is_empty();
                let tokens = if has_webhooks {
                    self.strings("SELECT token FROM webhooks ORDER BY created_at, token")
                } else {
                    Vec::new()
                };
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
}
