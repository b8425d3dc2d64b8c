//! A [`FlowHost`] for host tests: real SQLite, the discovered registry, a virtual clock, and
//! the frames it was asked to broadcast. No network: `fetch` and D1 answer with an error.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use edgent::config::{AgentConfig, ModelConfig};
use edgent::engine::thread::Thread;
use edgent::tool::{BoxFuture, FlowHost, FlowState, HttpRequest, HttpResponse, Registry};
use edgent::values::protocol::ServerFrame;
use edgent::values::sql::{Sql, SqlValue};
use serde_json::{Map, Value};

use crate::sqlite::Sqlite;

pub(crate) struct TestHost {
    pub(crate) db: Sqlite,
    pub(crate) registry: Registry,
    pub(crate) now: Cell<i64>,
    pub(crate) frames: RefCell<Vec<ServerFrame>>,
}

impl TestHost {
    /// A host over a fresh database holding thread `thread-1` (agent `support`).
    pub(crate) fn with_thread(now: i64) -> Rc<Self> {
        let host = Rc::new(TestHost {
            db: Sqlite::memory(),
            registry: crate::registry().unwrap(),
            now: Cell::new(now),
            frames: RefCell::new(Vec::new()),
        });
        Thread::open(&host.db)
            .unwrap()
            .create(now, "thread-1", "support", &[])
            .unwrap();
        host
    }

    pub(crate) fn thread(&self) -> Thread<'_> {
        Thread::open_migrated(&self.db)
    }

    /// The flow a tool call would get.
    pub(crate) fn flow(self: &Rc<Self>, tool_call_id: &str) -> FlowState {
        let summary = self.thread().summary().unwrap();
        FlowState::top_level(
            self.clone(),
            &summary,
            Rc::new(agent(&["get_current_time"])),
            tool_call_id,
        )
    }

    pub(crate) fn take_frames(&self) -> Vec<ServerFrame> {
        std::mem::take(&mut *self.frames.borrow_mut())
    }
}

pub(crate) fn agent(tools: &[&str]) -> AgentConfig {
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
        side: edgent::engine::store::Side::A,
        prompt: serde_json::from_value(json["prompt"].clone()).expect("prompt"),
        models: vec![serde_json::from_value::<ModelConfig>(json["model"].clone()).expect("model")],
        delegates: Vec::new(),
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
        self.now.get()
    }
    fn broadcast(&self, frame: &ServerFrame) {
        self.frames.borrow_mut().push(frame.clone());
    }
    fn secret(&self, name: &str) -> Option<String> {
        (name == "TEST_SECRET").then(|| "s3cret".to_owned())
    }
    fn var(&self, _name: &str) -> Option<String> {
        None
    }
    fn fetch(&self, _request: HttpRequest) -> BoxFuture<'static, Result<HttpResponse, String>> {
        Box::pin(async { Err("no network in host tests".to_owned()) })
    }
    fn d1_query(
        &self,
        _binding: &str,
        _sql: &str,
        _params: Vec<SqlValue>,
    ) -> BoxFuture<'static, Result<Vec<Map<String, Value>>, String>> {
        Box::pin(async { Err("no D1 in host tests".to_owned()) })
    }
}

/// Polls a future that never waits on real I/O to completion.
pub(crate) fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}
