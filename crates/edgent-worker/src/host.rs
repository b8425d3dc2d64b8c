//! [`FlowHost`] for the Durable Object: the thread's SQLite, its sockets, the Worker's
//! secrets, vars, D1 bindings and `fetch`.

use std::rc::Rc;
use std::time::Duration;

use serde_json::{Map, Value};
use wasm_bindgen::JsValue;
use worker::{AbortController, Env, Fetch, Headers, Method, Request, RequestInit, State};

use super::clock::{now, with_timeout};
use super::do_sql::DoSql;
use edgent::tool::{BoxFuture, FlowHost, HostError, HttpRequest, HttpResponse, Registry};
use edgent::values::protocol::ServerFrame;
use edgent::values::sql::{Sql, SqlValue};

/// One per tool call; cheap to build (JS handles are reference-counted).
pub(crate) struct ShellHost {
    pub(crate) sql: DoSql,
    pub(crate) state: State,
    pub(crate) env: Env,
    pub(crate) registry: Rc<Registry>,
}

/// Sends `frame` to every socket of the object; a closing socket just misses it.
pub(crate) fn broadcast(state: &State, frame: &ServerFrame) {
    let text = frame.to_json();
    for ws in state.get_websockets() {
        let _ = ws.send_with_str(&text);
    }
}

impl FlowHost for ShellHost {
    fn sql(&self) -> &dyn Sql {
        &self.sql
    }

    fn registry(&self) -> &Registry {
        &self.registry
    }

    fn now_ms(&self) -> i64 {
        now()
    }

    fn broadcast(&self, frame: &ServerFrame) {
        broadcast(&self.state, frame);
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
            let values: Vec<JsValue> = params
                .iter()
                .map(|p| match p {
                    SqlValue::Null => JsValue::NULL,
                    SqlValue::Integer(i) => JsValue::from_f64(*i as f64),
                    SqlValue::Real(f) => JsValue::from_f64(*f),
                    SqlValue::Text(s) => JsValue::from_str(s),
                })
                .collect();
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

async fn fetch(request: HttpRequest) -> Result<HttpResponse, HostError> {
    let method = Method::from(request.method.to_ascii_uppercase());
    let headers = Headers::new();
    for (k, v) in &request.headers {
        headers
            .set(k, v)
            .map_err(|e| HostError::BadRequest(format!("bad header {k:?}: {e}")))?;
    }
    let mut init = RequestInit::new();
    init.with_method(method).with_headers(headers);
    if let Some(body) = &request.body {
        init.with_body(Some(JsValue::from_str(body)));
    }
    let req = Request::new_with_init(&request.url, &init)
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
        let body = resp
            .text()
            .await
            .map_err(|e| HostError::Network(format!("reading the response failed: {e}")))?;
        if body.len() > HttpResponse::MAX_BODY {
            return Err(HostError::TooLarge);
        }
        Ok(HttpResponse {
            status,
            body,
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
