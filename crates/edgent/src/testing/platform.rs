//! The test host as the runtime's platform: virtual time, a scripted model, a recorded alarm,
//! and no network.

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use serde_json::{Map, Value};

use super::host::{Scripted, TestHost, Timers};
use crate::config::{AgentConfig, ModelConfig};
use crate::engine::durable::Window;
use crate::engine::store::Side;
use crate::llm::stream::{ProviderError, StreamEvent};
use crate::runtime::{ModelReply, Platform, WholeReply};
use crate::tool::{BoxFuture, FlowHost, HostError, HttpRequest, HttpResponse, Registry};
use crate::values::protocol::ServerFrame;
use crate::values::sql::{Sql, SqlValue};

/// A sleep on the host's virtual clock: ready once the clock reaches `until` (the harness
/// moves the clock when every future waits, see [`TestHost::run`], and wakes the sleeps that
/// fell due: a combinator that polls only woken futures, such as `join_all` over more than
/// 30 of them, polls this one again).
struct VirtualSleep {
    until: i64,
    clock: Rc<std::cell::Cell<i64>>,
    timers: Timers,
    /// Its entry in `timers`, once polled: one entry per sleep, whose waker a later poll
    /// replaces (the host polls every piece of work many times while time stands still, and
    /// its no-op waker never "will wake" its clone, so an entry per poll grew without bound).
    entry: Option<Rc<std::cell::RefCell<Waker>>>,
}

impl VirtualSleep {
    fn new(ms: i64, clock: &Rc<std::cell::Cell<i64>>, timers: &Timers) -> Self {
        VirtualSleep {
            until: clock.get().saturating_add(ms),
            clock: clock.clone(),
            timers: timers.clone(),
            entry: None,
        }
    }
}

impl Future for VirtualSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.clock.get() >= self.until {
            return Poll::Ready(());
        }
        match &self.entry {
            Some(waker) if waker.borrow().will_wake(cx.waker()) => {}
            Some(waker) => *waker.borrow_mut() = cx.waker().clone(),
            None => {
                let waker = Rc::new(std::cell::RefCell::new(cx.waker().clone()));
                self.timers.borrow_mut().push((self.until, waker.clone()));
                self.entry = Some(waker);
            }
        }
        Poll::Pending
    }
}

/// A reply that sends its events, then never ends.
struct EndlessReply(Option<Vec<StreamEvent>>);

impl ModelReply for EndlessReply {
    fn next_events(&mut self) -> BoxFuture<'_, Result<Option<Vec<StreamEvent>>, ProviderError>> {
        match self.0.take() {
            Some(events) => Box::pin(async move { Ok(Some(events)) }),
            None => Box::pin(std::future::pending()),
        }
    }

    fn cancel(&mut self) {}
}

/// A reply whose events arrive one per read, each the given ms of virtual time after the
/// last (0: at once).
struct StreamedReply {
    events: std::collections::VecDeque<(i64, StreamEvent)>,
    clock: Rc<std::cell::Cell<i64>>,
    timers: Timers,
}

impl ModelReply for StreamedReply {
    fn next_events(&mut self) -> BoxFuture<'_, Result<Option<Vec<StreamEvent>>, ProviderError>> {
        let (gap_ms, next) = match self.events.pop_front() {
            Some((gap_ms, event)) => (gap_ms, Some(vec![event])),
            None => (0, None),
        };
        let gap = (gap_ms > 0).then(|| VirtualSleep::new(gap_ms, &self.clock, &self.timers));
        Box::pin(async move {
            if let Some(gap) = gap {
                gap.await;
            }
            Ok(next)
        })
    }

    fn cancel(&mut self) {}
}

impl crate::runtime::Embedder for TestHost {
    fn embed(
        &self,
        model: &ModelConfig,
        body: Value,
        timeout_ms: u32,
    ) -> BoxFuture<'static, Result<Value, ProviderError>> {
        self.embedder.embed(model, body, timeout_ms)
    }
}

impl TestHost {
    /// The agent's configuration for `side`, when the thread's agent has it.
    fn configured(&self, agent_id: &str, side: Side) -> Option<Rc<AgentConfig>> {
        (agent_id == self.agent.agent_id() && side == self.agent.side)
            .then(|| Rc::new(self.agent.clone()))
    }

    /// One alarm write: applied in the order issued, answered `alarm_write_ms` later.
    fn write_alarm(&self, at: Option<i64>) -> BoxFuture<'static, Result<(), String>> {
        self.alarm.set(at);
        self.alarm_writes.set(self.alarm_writes.get() + 1);
        let landed = self.sleep(self.alarm_write_ms.get());
        Box::pin(async move {
            landed.await;
            Ok(())
        })
    }
}

impl Platform for TestHost {
    fn set_alarm(&self, in_ms: i64) -> BoxFuture<'static, Result<(), String>> {
        self.write_alarm(Some(self.now().saturating_add(in_ms)))
    }

    fn delete_alarm(&self) -> BoxFuture<'static, Result<(), String>> {
        self.write_alarm(None)
    }

    fn spawn(&self, work: BoxFuture<'static, ()>) {
        self.spawned.borrow_mut().push(work);
    }

    fn index_db(&self) -> Rc<dyn crate::runtime::ConfigDb> {
        self.index.clone()
    }

    fn log_error(&self, message: &str) {
        self.errors.borrow_mut().push(message.to_owned());
    }

    fn jitter(&self) -> f64 {
        self.jitter.get()
    }

    fn fresh_agent(&self, agent_id: &str, side: Side) -> Option<Rc<AgentConfig>> {
        if self.stale_config.borrow().is_some() || self.cold_config.get().is_some() {
            return None;
        }
        self.configured(agent_id, side)
    }

    fn cached_agent(&self, agent_id: &str, side: Side) -> Option<Rc<AgentConfig>> {
        let stale = self
            .stale_config
            .borrow()
            .as_ref()
            .map(|s| s.cached.clone());
        let adopted = || self.adopted.borrow().clone();
        stale
            .or_else(adopted)
            .filter(|c| c.agent_id() == agent_id && c.side == side)
    }

    /// The configuration as JSON (the Worker keeps the D1 rows instead).
    fn agent_copy(&self, config: &Rc<AgentConfig>) -> Option<(i64, Rc<str>)> {
        let copy = serde_json::to_string(&**config).ok()?;
        Some((self.config_version.get(), copy.into()))
    }

    fn adopt_agent_copy(
        &self,
        agent_id: &str,
        side: Side,
        _version: i64,
        copy: &str,
    ) -> Option<Rc<AgentConfig>> {
        self.cold_config.get()?;
        let config: AgentConfig = serde_json::from_str(copy).ok()?;
        let config = Rc::new(config);
        self.adopted.replace(Some(config.clone()));
        self.cached_agent(agent_id, side)
    }

    fn load_agent(
        &self,
        agent_id: &str,
        side: Side,
    ) -> BoxFuture<'static, Result<Result<Rc<AgentConfig>, String>, String>> {
        self.config_loads.set(self.config_loads.get() + 1);
        if let Some(stale) = self.stale_config.take() {
            let checked = self.sleep(stale.check_ms);
            return Box::pin(async move {
                checked.await;
                match stale.found {
                    None => Ok(Ok(stale.cached)),
                    Some(found) => found.map(|c| Ok(Rc::new(c))),
                }
            });
        }
        if let Some(ms) = self.cold_config.take() {
            // The isolate's first load: from now on it holds the configuration.
            self.adopted.replace(None);
            let loaded = self.sleep(ms);
            let found = self
                .configured(agent_id, side)
                .ok_or_else(|| format!("no agent {agent_id:?} with side {}", side.as_str()));
            return Box::pin(async move {
                loaded.await;
                Ok(found)
            });
        }
        let fault = self.config_fault.borrow().clone();
        let found = self
            .configured(agent_id, side)
            .ok_or_else(|| format!("no agent {agent_id:?} with side {}", side.as_str()));
        Box::pin(async move { fault.map_or(Ok(found), Err) })
    }

    fn agent_exists(&self, agent_id: &str) -> BoxFuture<'static, Result<bool, String>> {
        let fault = self.config_fault.borrow().clone();
        let exists = agent_id == self.agent.agent_id();
        Box::pin(async move { fault.map_or(Ok(exists), Err) })
    }

    fn agent_has_side(
        &self,
        agent_id: &str,
        side: Side,
    ) -> BoxFuture<'static, Result<bool, String>> {
        let has = self.configured(agent_id, side).is_some();
        Box::pin(async move { Ok(has) })
    }

    fn open_model(
        &self,
        _model: &ModelConfig,
        body: String,
    ) -> BoxFuture<'static, Result<Box<dyn ModelReply>, ProviderError>> {
        // Kept parsed, for tests to look into (the runtime only ever sends valid JSON).
        let body = serde_json::from_str(&body).unwrap_or(Value::String(body));
        self.requests.borrow_mut().push(body);
        let answer = self.script.borrow_mut().pop_front().unwrap_or_else(|| {
            Scripted::Answer(Err(ProviderError::Config(
                "the test scripted no model reply".into(),
            )))
        });
        let opened = self.sleep(self.model_open_ms.get());
        let (clock, timers) = (self.clock.clone(), self.timers.clone());
        Box::pin(async move {
            opened.await;
            match answer {
                Scripted::Answer(answer) => {
                    answer.map(|events| Box::new(WholeReply::new(events)) as Box<dyn ModelReply>)
                }
                Scripted::Endless(events) => Ok(Box::new(EndlessReply(Some(events))) as _),
                Scripted::Streamed(events) => Ok(Box::new(StreamedReply {
                    events: events.into(),
                    clock,
                    timers,
                }) as _),
            }
        })
    }

    fn ask_thread(
        &self,
        _thread_id: &str,
        _method: &'static str,
        _path: &str,
        _body: Option<Value>,
    ) -> BoxFuture<'static, Result<(u16, Value), String>> {
        Box::pin(async { Err("host tests have no other threads".to_owned()) })
    }
}

impl FlowHost for TestHost {
    fn acquire_limit(
        &self,
        _tool: &str,
        _per_minute: u32,
    ) -> BoxFuture<'static, Result<Window, String>> {
        self.limiter_asked.set(self.limiter_asked.get() + 1);
        // What happens meanwhile happens to the thread as stored (the runtime's view reads it).
        let mut t = self.thread();
        (self.before_limiter_answer.borrow_mut())(&mut t);
        self.keep_frames(&mut t);
        let window = self
            .limiter
            .borrow()
            .ok_or_else(|| "the counter is unreachable".to_owned());
        Box::pin(async move { window })
    }

    fn sleep(&self, ms: u64) -> BoxFuture<'static, ()> {
        let ms = i64::try_from(ms).unwrap_or(i64::MAX);
        Box::pin(VirtualSleep::new(ms, &self.clock, &self.timers))
    }

    fn sql(&self) -> &dyn Sql {
        &self.db
    }
    fn registry(&self) -> &Registry {
        &self.registry
    }
    fn now_ms(&self) -> i64 {
        self.clock.get()
    }
    fn live_chunks(&self) -> &crate::engine::frame_log::LiveChunks {
        &self.live_chunks
    }
    fn send_to_sockets(&self, text: &str, frame: &ServerFrame) {
        self.frames.borrow_mut().push(frame.clone());
        self.sent.borrow_mut().push(text.to_owned());
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
