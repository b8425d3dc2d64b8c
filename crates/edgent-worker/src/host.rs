//! The Durable Object as the runtime's [`Platform`] (and the tools' [`FlowHost`]): the
//! thread's SQLite, alarm and sockets, the Worker's secrets, vars, D1 bindings, `fetch`, the
//! `AI` binding, the deployment's rate limiters and the other threads' objects.

use std::rc::Rc;
use std::time::Duration;

use serde_json::{Map, Value};
use wasm_bindgen::JsValue;
use worker::{
    AbortController, Delay, Env, Fetch, Headers, Method, RequestInit, RequestRedirect, State,
};

use super::clock::{now, with_timeout};
use super::d1::{to_js, D1};
use super::do_sql::DoSql;
use super::http::read_at_most;
use edgent::config::{AgentConfig, ModelConfig};
use edgent::engine::durable::Window;
use edgent::engine::frame_log::LiveChunks;
use edgent::engine::store::Side;
use edgent::llm::stream::ProviderError;
use edgent::runtime::{agents, ModelReply, Platform};
use edgent::tool::{BoxFuture, FlowHost, HostError, HttpRequest, HttpResponse, Registry};
use edgent::values::protocol::ServerFrame;
use edgent::values::sql::{Sql, SqlValue};

// One call per frame for every socket: the text crosses into JavaScript once (not once per
// socket), and no handle per socket is made and freed in the wasm. A socket that is closing
// throws; it just misses the frame, as before.
#[wasm_bindgen::prelude::wasm_bindgen(inline_js = "export function edgent_send_all(state, text) {
    for (const ws of state.getWebSockets()) {
        try {
            ws.send(text);
        } catch {}
    }
}")]
extern "C" {
    fn edgent_send_all(state: &JsValue, text: &str);
}

/// One per thread object instance (JS handles are reference-counted).
pub(crate) struct ShellHost {
    pub(crate) sql: DoSql,
    pub(crate) state: State,
    pub(crate) env: Env,
    pub(crate) registry: Rc<Registry>,
    /// The AI SDK answers streaming from this object (fed every broadcast frame).
    pub(crate) chats: Rc<crate::chat::ChatStreams>,
    /// The MCP calls waiting for their outcome in this instance.
    pub(crate) mcp: Rc<crate::mcp_calls::McpCalls>,
    /// The chunks of replies streaming in this instance (not in the frame log).
    pub(crate) live_chunks: LiveChunks,
}

impl FlowHost for ShellHost {
    fn acquire_limit(
        &self,
        tool: &str,
        per_minute: u32,
    ) -> BoxFuture<'static, Result<Window, String>> {
        let (env, tool) = (self.env.clone(), tool.to_owned());
        Box::pin(async move {
            crate::rate_limiter::acquire(&env, &tool, per_minute)
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn sleep(&self, ms: u64) -> BoxFuture<'static, ()> {
        // setTimeout wraps past 2^31 - 1 ms and would fire at once.
        let ms = ms.min(edgent::values::limits::MAX_TIMER_MS);
        Box::pin(Delay::from(Duration::from_millis(ms)))
    }

    fn sql(&self) -> &dyn Sql {
        &self.sql
    }

    fn registry(&self) -> &Registry {
        &self.registry
    }

    fn now_ms(&self) -> i64 {
        now()
    }

    fn live_chunks(&self) -> &LiveChunks {
        &self.live_chunks
    }

    /// The text goes to every socket of the object (the framework numbered it and logged it or
    /// kept it, a streamed chunk, in `live_chunks`; a closing socket just misses it) and to
    /// every open AI SDK answer.
    fn send_to_sockets(&self, text: &str, frame: &ServerFrame) {
        if matches!(frame, ServerFrame::Status { .. }) {
            crate::thread_object::close_expired_client_sockets(&self.state);
        }
        let state: &JsValue = self.state.as_raw().as_ref();
        edgent_send_all(state, text);
        self.chats.push(text);
        self.mcp.push(text);
    }

    fn secret(&self, name: &str) -> Option<String> {
        self.env.secret(name).ok().map(|s| s.to_string())
    }

    fn var(&self, name: &str) -> Option<String> {
        self.env.var(name).ok().map(|s| s.to_string())
    }

    fn fetch(&self, request: HttpRequest) -> BoxFuture<'static, Result<HttpResponse, HostError>> {
        Box::pin(fetch(request))
    }

    fn d1_query(
        &self,
        binding: &str,
        sql: &str,
        params: Vec<SqlValue>,
    ) -> BoxFuture<'static, Result<Vec<Map<String, Value>>, HostError>> {
        let db = self.env.d1(binding);
        let binding = binding.to_owned();
        let sql = sql.to_owned();
        Box::pin(async move {
            let db = db.map_err(|_| HostError::NoBinding(binding))?;
            let values: Vec<JsValue> = params.iter().map(to_js).collect();
            let result = db
                .prepare(&sql)
                .bind(&values)
                .map_err(|e| HostError::Query(format!("D1 query could not be prepared: {e}")))?
                .all()
                .await
                .map_err(|e| HostError::Query(format!("D1 query failed: {e}")))?;
            result
                .results::<Map<String, Value>>()
                .map_err(|e| HostError::Query(format!("D1 rows could not be read: {e}")))
        })
    }

    fn env(&self) -> Option<&dyn std::any::Any> {
        Some(&self.env)
    }
}

impl edgent::runtime::Embedder for ShellHost {
    fn embed(
        &self,
        model: &ModelConfig,
        body: Value,
        timeout_ms: u32,
    ) -> BoxFuture<'static, Result<Value, ProviderError>> {
        Box::pin(crate::model::embed(
            self.env.clone(),
            model.clone(),
            body,
            timeout_ms,
        ))
    }
}

impl Platform for ShellHost {
    fn set_alarm(&self, in_ms: i64) -> BoxFuture<'static, Result<(), String>> {
        let storage = self.state.storage();
        Box::pin(async move { storage.set_alarm(in_ms).await.map_err(|e| e.to_string()) })
    }

    fn delete_alarm(&self) -> BoxFuture<'static, Result<(), String>> {
        let storage = self.state.storage();
        Box::pin(async move { storage.delete_alarm().await.map_err(|e| e.to_string()) })
    }

    fn spawn(&self, work: BoxFuture<'static, ()>) {
        worker::wasm_bindgen_futures::spawn_local(work);
    }

    fn index_db(&self) -> Rc<dyn edgent::runtime::ConfigDb> {
        Rc::new(D1(self.env.clone()))
    }

    fn log_error(&self, message: &str) {
        worker::console_error!("{message}");
    }

    fn fresh_agent(&self, agent_id: &str, side: Side) -> Option<Rc<AgentConfig>> {
        agents::fresh_agent(agent_id, side, now())
    }

    fn cached_agent(&self, agent_id: &str, side: Side) -> Option<Rc<AgentConfig>> {
        agents::cached_agent(agent_id, side)
    }

    fn agent_copy(&self, config: &Rc<AgentConfig>) -> Option<(i64, Rc<str>)> {
        agents::kept_copy(config)
    }

    fn adopt_agent_copy(
        &self,
        agent_id: &str,
        side: Side,
        version: i64,
        copy: &str,
    ) -> Option<Rc<AgentConfig>> {
        agents::adopt(agent_id, side, version, copy, now())
    }

    fn load_agent(
        &self,
        agent_id: &str,
        side: Side,
    ) -> BoxFuture<'static, Result<Result<Rc<AgentConfig>, String>, String>> {
        let (db, agent_id) = (D1(self.env.clone()), agent_id.to_owned());
        Box::pin(async move {
            let loaded = agents::load_agent(&db, &agent_id, side, now()).await?;
            Ok(loaded.map_err(|e| e.to_string()))
        })
    }

    fn agent_exists(&self, agent_id: &str) -> BoxFuture<'static, Result<bool, String>> {
        let (db, agent_id) = (D1(self.env.clone()), agent_id.to_owned());
        Box::pin(async move { agents::agent_exists(&db, &agent_id, now()).await })
    }

    fn agent_has_side(
        &self,
        agent_id: &str,
        side: Side,
    ) -> BoxFuture<'static, Result<bool, String>> {
        let (db, agent_id) = (D1(self.env.clone()), agent_id.to_owned());
        Box::pin(async move { agents::agent_has_side(&db, &agent_id, side).await })
    }

    fn open_model(
        &self,
        model: &ModelConfig,
        body: String,
    ) -> BoxFuture<'static, Result<Box<dyn ModelReply>, ProviderError>> {
        Box::pin(crate::model::open(self.env.clone(), model.clone(), body))
    }

    fn ask_thread(
        &self,
        thread_id: &str,
        method: &'static str,
        path: &str,
        body: Option<Value>,
    ) -> BoxFuture<'static, Result<(u16, Value), String>> {
        let env = self.env.clone();
        let body = body.map(|b| b.to_string().into_bytes());
        let request =
            crate::router::internal_request(Method::from(method.to_owned()), path, thread_id, body);
        let thread_id = thread_id.to_owned();
        Box::pin(async move {
            let mut resp =
                crate::router::send_to(&env, &thread_id, request.map_err(|e| e.message)?)
                    .await
                    .map_err(|e| e.message)?;
            let status = resp.status_code();
            let value: Value = resp.json().await.map_err(|e| e.to_string())?;
            Ok((status, value))
        })
    }
}

async fn fetch(request: HttpRequest) -> Result<HttpResponse, HostError> {
    fetch_at_most(request, HttpResponse::MAX_BODY).await
}

/// [`fetch`] reading at most `max_body` bytes of the answer ([`HostError::TooLarge`] past it).
pub(crate) async fn fetch_at_most(
    request: HttpRequest,
    max_body: usize,
) -> Result<HttpResponse, HostError> {
    let method = Method::from(request.method.to_ascii_uppercase());
    let headers = Headers::new();
    for (k, v) in &request.headers {
        headers
            .set(k, v)
            .map_err(|e| HostError::BadRequest(format!("bad header {k:?}: {e}")))?;
    }
    let mut init = RequestInit::new();
    init.with_method(method).with_headers(headers);
    if !request.follow_redirects {
        init.with_redirect(RequestRedirect::Manual);
    }
    if let Some(body) = &request.body {
        init.with_body(Some(JsValue::from_str(body)));
    }
    let req = super::http::outgoing(&request.url, &init)
        .map_err(|e| HostError::BadRequest(format!("bad request to {}: {e}", request.url)))?;
    let abort = AbortController::default();
    let limit = Duration::from_millis(u64::from(request.timeout_ms));
    let exchange = async {
        let mut resp = Fetch::Request(req)
            .send_with_signal(&abort.signal())
            .await
            .map_err(|e| HostError::Network(format!("request failed: {e}")))?;
        let status = resp.status_code();
        let headers: Vec<(String, String)> = resp.headers().entries().collect();
        let (body, whole) = read_at_most(&mut resp, max_body)
            .await
            .map_err(|e| HostError::Network(format!("reading the response failed: {e}")))?;
        if !whole {
            // Dropping the stream stops the read (the timeout's abort is for a stall).
            return Err(HostError::TooLarge);
        }
        Ok(HttpResponse {
            status,
            body: String::from_utf8_lossy(&body).into_owned(),
            headers,
        })
    };
    match with_timeout(exchange, limit).await {
        Some(out) => out,
        None => {
            abort.abort();
            Err(HostError::Timeout {
                after_ms: request.timeout_ms,
            })
        }
    }
}
