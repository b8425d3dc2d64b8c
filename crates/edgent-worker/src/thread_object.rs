//! `ThreadObject`: one conversation thread per Durable Object (the app's `DurableThread` class,
//! defined by [`serve!`](crate::serve), wraps it).
//!
//! Requests come from the router (already authenticated and validated). Work starts in the
//! invocation that stored it: the handler arms the watchdog alarm, answers, and drives the
//! thread (loops on [`Thread::next_action`]) until it is idle, without waiting for an alarm to
//! fire. The watchdog stays armed while a turn runs, so if the object is evicted or the process
//! dies mid-turn, the alarm fires and the loop resumes from what SQLite says; the alarm also
//! wakes parked calls when they are due.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use worker::{
    Env, Request, Response, Result, State, WebSocket, WebSocketIncomingMessage, WebSocketPair,
};

mod delegate;
mod tools;
mod turn;

use super::clock::now;
use super::config::agent_has_side;
use super::do_sql::DoSql;
use super::host::{broadcast, ShellHost};
use super::http::{error, json, logged, read_body, registry_error};
use edgent::api::ops::ThreadOp;
use edgent::api::{ApiError, CreateThread};
use edgent::engine::store::{HistoryCache, Side};
use edgent::engine::thread::{Thread, ThreadError};
use edgent::engine::wake::WATCHDOG_MS;
use edgent::tool::{Registry, RegistryError};
use edgent::values::protocol::{
    parse_client_frame, ClientFrame, ErrorBody, ServerFrame, PROTOCOL_VERSION,
};

/// What each socket remembers across hibernation.
#[derive(Serialize, Deserialize)]
struct Attachment {
    thread_id: String,
    connected_at: i64,
}

fn thread_error(e: &ThreadError) -> ApiError {
    match e {
        ThreadError::NotFound => ApiError::not_found("thread not found"),
        ThreadError::AlreadyExists => ApiError::new(409, "conflict", "thread already exists"),
        ThreadError::Stopped => ApiError::new(409, "thread_stopped", "the thread is stopped"),
        ThreadError::UnknownTool(why) => ApiError::new(400, "unknown_tool", why.clone()),
        ThreadError::InvalidArguments(why) => ApiError::new(400, "invalid_arguments", why.clone()),
        ThreadError::Invalid(why) => ApiError::invalid(why.clone()),
        ThreadError::Conflict(why) => ApiError::new(409, "conflict", why.clone()),
        ThreadError::Sql(e) => {
            worker::console_error!("thread storage error: {e}");
            ApiError::internal("thread storage error")
        }
    }
}

/// The Durable Object hosting one thread: what the app's `DurableThread` class runs.
pub struct ThreadObject {
    state: State,
    env: Env,
    /// True while this instance runs the turn loop (a second alarm must not start another).
    driving: Cell<bool>,
    /// Set by `start_work` when it left stored work to the running loop, which checks it
    /// (instead of reading storage) before it stops driving.
    work_arrived: Cell<bool>,
    /// The model history this instance read last: a model call reads only what was appended
    /// since (see `edgent::engine::store::HistoryCache`).
    history: Rc<HistoryCache>,
    /// The prompt and hook names this instance last recorded in the thread row (a write
    /// skipped when they did not change).
    hooks_recorded: RefCell<Option<(String, Vec<String>)>>,
    /// Until when the watchdog alarm is known to be armed (0: not known), so the loop does not
    /// set it again right after the handler did.
    armed_until: Cell<i64>,
    /// Set by `stop` so a streaming model call is cut short.
    stop_requested: Cell<bool>,
    /// The schema was checked (and migrated) by this instance: later views skip the check.
    schema_ready: Cell<bool>,
    /// The tool registry, built (and checked) once per instance.
    registry: RefCell<Option<std::result::Result<Rc<Registry>, RegistryError>>>,
}

/// The Durable Object interface, called by the app's `DurableThread` (see [`serve!`](crate::serve)).
impl ThreadObject {
    /// A new instance for `state` (the object's storage) and the Worker's `env`.
    pub fn new(state: State, env: Env) -> Self {
        ThreadObject {
            state,
            env,
            driving: Cell::new(false),
            armed_until: Cell::new(0),
            work_arrived: Cell::new(false),
            hooks_recorded: RefCell::new(None),
            history: Rc::default(),
            stop_requested: Cell::new(false),
            schema_ready: Cell::new(false),
            registry: RefCell::new(None),
        }
    }

    /// A request from the router or a parent thread.
    pub async fn fetch(self: &Rc<Self>, mut req: Request) -> Result<Response> {
        let path = req.path();
        let result = match (req.method(), path.as_str()) {
            (worker::Method::Post, "/create") => self.create(&mut req).await,
            (worker::Method::Post, "/webhook") => self.webhook(&mut req).await,
            (worker::Method::Post, "/run") => self
                .run_to_end()
                .await
                .map(|s| (200, json!(s)))
                .map_err(|e| ApiError::internal(e.to_string())),
            (worker::Method::Get, "/stream") => return self.accept_socket(),
            (_, op) => match op.strip_prefix(super::router::OP_PREFIX) {
                Some(op) if op.is_empty() || op.starts_with('/') => {
                    self.http_op(&mut req, op).await
                }
                _ => Err(ApiError::not_found("no such thread operation")),
            },
        };
        match result {
            Ok((status, body)) => json(status, &body),
            Err(e) => error(&e),
        }
    }

    /// The alarm: drives the thread until it is idle or waiting.
    pub async fn alarm(&self) -> Result<Response> {
        // A fired alarm is gone: the loop must arm the watchdog again.
        self.armed_until.set(0);
        self.drive().await;
        Response::ok("")
    }

    /// A frame from a client socket.
    pub async fn websocket_message(
        self: &Rc<Self>,
        ws: WebSocket,
        message: WebSocketIncomingMessage,
    ) -> Result<()> {
        let text = match message {
            WebSocketIncomingMessage::String(s) => s,
            WebSocketIncomingMessage::Binary(_) => {
                send(
                    &ws,
                    &ServerFrame::error(
                        "bad_frame",
                        "binary frames are not supported; send JSON text",
                        None,
                    ),
                );
                return Ok(());
            }
        };
        match parse_client_frame(&text) {
            Err(frame) => send(&ws, &frame),
            Ok(ClientFrame::Ping) => send(&ws, &ServerFrame::Pong),
            Ok(ClientFrame::Rpc { id, method, params }) => {
                let answer = match ThreadOp::from_rpc(&method, &params) {
                    Ok(op) => self.apply(op).await,
                    Err(e) => Err(e),
                };
                let reply = match answer {
                    Ok(result) => ServerFrame::Result {
                        id,
                        ok: true,
                        result: Some(result),
                        error: None,
                    },
                    Err(e) => ServerFrame::Result {
                        id,
                        ok: false,
                        result: None,
                        error: Some(ErrorBody {
                            code: e.code.into(),
                            message: e.message,
                        }),
                    },
                };
                send(&ws, &reply);
            }
        }
        Ok(())
    }

    /// A client closed its socket.
    pub async fn websocket_close(
        &self,
        ws: WebSocket,
        _code: usize,
        _reason: String,
        _was_clean: bool,
    ) -> Result<()> {
        // Complete the closing handshake; the socket may already be gone, which is fine.
        let _ = ws.close(Some(1000), Some("bye"));
        Ok(())
    }

    /// A client socket failed.
    pub async fn websocket_error(&self, _ws: WebSocket, _error: worker::Error) -> Result<()> {
        Ok(())
    }
}

impl ThreadObject {
    fn sql(&self) -> DoSql {
        DoSql(self.state.storage().sql())
    }

    /// Runs `f` against the thread (404 if this object holds none) and broadcasts the frames
    /// it produced.
    fn with_thread<T>(
        &self,
        f: impl FnOnce(&mut Thread<'_>) -> std::result::Result<T, ThreadError>,
    ) -> std::result::Result<T, ApiError> {
        self.with_opened(false, f)
    }

    fn with_opened<T>(
        &self,
        create_schema: bool,
        f: impl FnOnce(&mut Thread<'_>) -> std::result::Result<T, ThreadError>,
    ) -> std::result::Result<T, ApiError> {
        let sql = self.sql();
        let mut thread = self
            .open(&sql, create_schema)
            .map_err(|e| thread_error(&e))?;
        let out = f(&mut thread).map_err(|e| thread_error(&e));
        self.flush(&mut thread);
        out
    }

    /// A thread view. Only the first open of this instance checks the schema: with
    /// `create_schema` it creates or migrates it, without it an object that never held a
    /// thread answers `NotFound` and stays untouched.
    fn open<'s>(
        &self,
        sql: &'s DoSql,
        create_schema: bool,
    ) -> std::result::Result<Thread<'s>, ThreadError> {
        let thread = if self.schema_ready.get() {
            Thread::open_migrated(sql)
        } else if create_schema {
            Thread::open(sql)?
        } else {
            Thread::open_existing(sql)?
        };
        self.schema_ready.set(true);
        Ok(thread.with_history_cache(self.history.clone()))
    }

    fn flush(&self, thread: &mut Thread<'_>) {
        while let Some(frame) = thread.poll_frame() {
            broadcast(&self.state, &frame);
        }
        // A failing hook is skipped (its input is used) and logged, never shown to users.
        for failure in thread.take_hook_failures() {
            worker::console_error!("{failure}");
        }
    }

    /// The registry of this Worker's tools; a broken tool definition is reported, not hidden.
    fn registry(&self) -> std::result::Result<Rc<Registry>, RegistryError> {
        self.registry
            .borrow_mut()
            .get_or_insert_with(|| edgent::Catalog::installed().registry().map(Rc::new))
            .clone()
    }

    /// A second handle on this object's state (the same JS object) for the tool host.
    fn state_handle(&self) -> State {
        use wasm_bindgen::JsCast;
        let raw: &wasm_bindgen::JsValue = self.state.as_raw().as_ref();
        State::from(
            raw.clone()
                .unchecked_into::<worker::worker_sys::DurableObjectState>(),
        )
    }

    /// What tools get to reach the thread and the platform.
    fn host(&self) -> std::result::Result<Rc<ShellHost>, ApiError> {
        let registry = self.registry().map_err(|e| registry_error(&e))?;
        Ok(Rc::new(ShellHost {
            sql: self.sql(),
            state: self.state_handle(),
            env: self.env.clone(),
            registry,
        }))
    }

    async fn create(&self, req: &mut Request) -> std::result::Result<(u16, Value), ApiError> {
        let body = read_body(req).await?;
        let create = CreateThread::parse(&body)?;
        let thread_id = req
            .headers()
            .get("x-edgent-thread-id")
            .ok()
            .flatten()
            .ok_or_else(|| ApiError::invalid("missing thread id"))?;
        // Set only by a parent thread's agent tool (the router never forwards a query).
        let parent = req.url().ok().and_then(|u| {
            u.query_pairs()
                .find(|(k, _)| k == "parent")
                .map(|(_, v)| v.into_owned())
        });
        // Where clients reach us, for webhook URLs (set by the router from the request).
        let origin = req.headers().get("x-edgent-origin").ok().flatten();
        // The first message may need the agent's hooks before any turn has loaded them.
        let config = super::config::load_agent(&self.env, &create.agent_id, Side::A)
            .await
            .ok()
            .and_then(Result::ok);
        let summary = self.with_opened(true, |t| {
            let summary = t.create(now(), &thread_id, &create.agent_id, &create.tags)?;
            t.link(parent.as_deref(), origin.as_deref())?;
            if let Some(c) = &config {
                t.set_hook_config(&c.prompt.name, c.hooks())?;
            }
            Ok(summary)
        })?;
        Ok((
            201,
            json!({ "thread_id": summary.thread_id, "agent_id": summary.agent_id, "created_at": summary.created_at, "tags": summary.tags }),
        ))
    }

    /// A client operation over HTTP: decoded into the same [`ThreadOp`] as an rpc.
    async fn http_op(
        self: &Rc<Self>,
        req: &mut Request,
        path: &str,
    ) -> std::result::Result<(u16, Value), ApiError> {
        let method = req.method();
        let url = req.url().map_err(|_| ApiError::invalid("bad url"))?;
        let query: Vec<(String, String)> = url
            .query_pairs()
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        let body = if method == worker::Method::Post {
            read_body(req).await?
        } else {
            Vec::new()
        };
        let op = ThreadOp::from_http(method.as_ref(), path, &query, &body)?
            .ok_or_else(|| ApiError::not_found("no such thread operation"))?;
        let status = op.http_status();
        self.apply(op).await.map(|body| (status, body))
    }

    /// Applies one client operation, whichever transport it came by: the one place each
    /// operation is carried out, so HTTP and rpc answer alike.
    async fn apply(self: &Rc<Self>, op: ThreadOp) -> std::result::Result<Value, ApiError> {
        if let Some(side) = op.forced_side() {
            self.check_side(side).await?;
        }
        let starts_work = op.starts_work();
        let answer = match op {
            ThreadOp::Summary => self.with_thread(|t| Ok(json!(t.summary()?)))?,
            ThreadOp::SendMessage(post) => {
                let message = self.with_thread(|t| t.post_user_message(now(), &post.content))?;
                json!({ "message_id": message.id })
            }
            ThreadOp::InjectMessage(inject) => {
                let message = self.with_thread(|t| t.inject_message(now(), inject, 0))?;
                json!({ "message": message })
            }
            ThreadOp::QueueTool(p) => {
                let registry = self.registry().map_err(|e| registry_error(&e))?;
                let call_id = self.with_thread(|t| {
                    t.queue_tool_with_bindings(
                        now(),
                        registry.as_ref(),
                        &p.name,
                        p.args,
                        p.bindings.as_ref(),
                    )
                })?;
                json!({ "tool_call_id": call_id })
            }
            ThreadOp::GetMessages(q) => json!(self.with_thread(|t| t.messages_query(&q))?),
            ThreadOp::GetToolCalls(q) => json!(self.with_thread(|t| {
                t.summary()?;
                t.tool_call_page(q.limit, q.offset, q.order)
            })?),
            ThreadOp::GetLogs(q) => json!(self.with_thread(|t| {
                t.summary()?;
                t.request_log_page(q.limit, q.offset, q.order)
            })?),
            ThreadOp::ToolStatuses => self.tool_statuses()?,
            ThreadOp::DecideApproval(p) => {
                self.with_thread(|t| {
                    t.decide_approval(now(), &p.tool_call_id, p.approved, p.reason.as_deref())
                })?;
                json!({ "tool_call_id": p.tool_call_id, "approved": p.approved })
            }
            ThreadOp::ForceTurn(p) => {
                self.with_thread(|t| t.force_turn(now(), p.side))?;
                json!({ "side": p.side })
            }
            ThreadOp::Stop => {
                self.stop_requested.set(true);
                self.with_thread(|t| t.stop(now(), "user"))?;
                json!({ "ok": true })
            }
            _ => return Err(ApiError::not_found("no such thread operation")),
        };
        if starts_work {
            self.start_work().await;
        }
        Ok(answer)
    }

    /// A `force_turn` may only name a side the thread's agent has.
    async fn check_side(&self, side: Side) -> std::result::Result<(), ApiError> {
        let agent_id = self.with_thread(|t| Ok(t.summary()?.agent_id))?;
        let has_side = agent_has_side(&self.env, &agent_id, side)
            .await
            .map_err(|e| logged("could not read the agent", e))?;
        if has_side {
            Ok(())
        } else {
            Err(ApiError::invalid(format!(
                "agent {agent_id:?} has no side {} configured",
                side.as_str()
            )))
        }
    }

    /// Each tool's status in this thread: `busy` (a call is running or parked), `rate_limited`
    /// (its window is full), `error` (its last call failed) or `available`.
    fn tool_statuses(&self) -> std::result::Result<Value, ApiError> {
        let host = self.host()?;
        let statuses = self.with_thread(|t| {
            let mut out = Vec::new();
            for name in host.registry.names() {
                let policy = super::policy::policy_for(&host.env, &host.registry, name);
                let status = t.tool_status(name, &policy, now())?;
                out.push(json!({ "name": name, "status": status }));
            }
            Ok(out)
        })?;
        Ok(json!({ "tools": statuses }))
    }

    /// A POST to a webhook URL: wrong tokens get 404, a second delivery or a finished wait
    /// 409, a body that is not JSON 400 (after the token check); nothing changes on refusal.
    async fn webhook(
        self: &Rc<Self>,
        req: &mut Request,
    ) -> std::result::Result<(u16, Value), ApiError> {
        use edgent::engine::durable::WebhookRefusal;
        let token = req
            .headers()
            .get("x-edgent-webhook-token")
            .ok()
            .flatten()
            .unwrap_or_default();
        let not_found = || ApiError::not_found("no such webhook");
        let sql = self.sql();
        let thread = self.open(&sql, false).map_err(|_| not_found())?;
        // The router has already bounded the body; `deliver_webhook` checks the token first.
        let body = read_body(req).await?;
        let outcome = thread
            .deliver_webhook(&token, &body, now())
            .map_err(|e| logged("webhook storage error", e))?;
        match outcome {
            Ok(call_id) => {
                self.start_work().await;
                Ok((202, json!({ "ok": true, "tool_call_id": call_id })))
            }
            Err(WebhookRefusal::Unknown) => Err(not_found()),
            Err(WebhookRefusal::Closed(why)) => Err(ApiError::new(409, "webhook_closed", why)),
            Err(WebhookRefusal::NotJson(why)) => Err(ApiError::new(400, "invalid_json", why)),
        }
    }

    fn accept_socket(&self) -> Result<Response> {
        let sql = self.sql();
        let (thread_id, status) = match self
            .open(&sql, false)
            .and_then(|t| Ok((t.summary()?.thread_id, t.status_frame()?)))
        {
            Ok(v) => v,
            Err(e) => return error(&thread_error(&e)),
        };
        let pair = WebSocketPair::new()?;
        let server = pair.server;
        self.state.accept_web_socket(&server);
        server.serialize_attachment(Attachment {
            thread_id: thread_id.clone(),
            connected_at: now(),
        })?;
        send(
            &server,
            &ServerFrame::Hello {
                thread_id,
                protocol: PROTOCOL_VERSION,
            },
        );
        send(&server, &status);
        Response::from_websocket(pair.client)
    }

    /// Asks for the turn loop to run (now). Idempotent and cheap.
    /// Starts the work a handler just stored, in this invocation: arms the watchdog first (so
    /// a crash from here on is resumed by the alarm), then drives the thread once the handler
    /// has answered. A loop already running in this instance sees the work itself (it reads
    /// storage before every step and again before it stops).
    async fn start_work(self: &Rc<Self>) {
        match self.state.storage().set_alarm(WATCHDOG_MS).await {
            Ok(()) => self.armed_until.set(now() + WATCHDOG_MS),
            Err(e) => worker::console_error!("could not arm the watchdog: {e}"),
        }
        if self.driving.get() {
            self.work_arrived.set(true);
            return;
        }
        let this = Rc::clone(self);
        worker::wasm_bindgen_futures::spawn_local(async move { this.drive().await });
    }
}

fn send(ws: &WebSocket, frame: &ServerFrame) {
    let _ = ws.send_with_str(frame.to_json());
}
