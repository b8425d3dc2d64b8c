//! The public HTTP API: authentication, validation, and forwarding to the thread's object.

use serde_json::json;
use worker::{Env, Headers, Method, Request, RequestInit, Response, Result};

use super::clock::now;
use super::d1::D1;
use super::http::{
    boxed, error, json, logged, origin, query_pairs, query_param, raw_query, read_body,
    read_body_within, registry_error,
};
use edgent::api::access::{self, presented, Principal, SUBPROTOCOL, TOKEN_SECRET};
use edgent::api::cors::{AllowedOrigins, ALLOWED_ORIGINS_VAR};
use edgent::api::ops::OP_PREFIX;
use edgent::api::routes::{route, Route};
use edgent::api::tools::{deployment_limit, tool_entry, RecommendQuery};
use edgent::api::{ApiError, CreateThread};
use edgent::config::admin::Kind;
use edgent::config::policy::ModelPolicy;
use edgent::runtime::{admin, recommend, thread_index};
use edgent::tool::policy::policy_for;
use edgent::values::ids::new_id;
use edgent::values::limits::{MAX_BODY_BYTES, MAX_CHAT_BODY_BYTES};

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Answers one request: CORS first (a preflight, then the headers of the answer), then the
/// route.
pub(crate) async fn handle(req: Request, env: Env) -> Result<Response> {
    let allowed = AllowedOrigins::parse(
        env.var(ALLOWED_ORIGINS_VAR)
            .ok()
            .map(|v| v.to_string())
            .as_deref(),
    );
    let origin = req.headers().get("origin").ok().flatten();
    if req.method() == Method::Options {
        return match allowed.preflight(origin.as_deref()) {
            Ok(headers) => Ok(Response::empty()?
                .with_status(204)
                .with_headers(headers_of(&headers))),
            Err(e) => error(&e),
        };
    }
    let resp = route_request(req, env, &allowed, origin.as_deref()).await?;
    let cors = allowed.response_headers(origin.as_deref());
    if cors.is_empty() || resp.status_code() == 101 {
        return Ok(resp);
    }
    // A response from the thread's object has immutable headers: copy them.
    let headers = Headers::new();
    for (name, value) in resp.headers().entries() {
        let _ = headers.set(&name, &value);
    }
    for (name, value) in &cors {
        let _ = headers.set(name, value);
    }
    Ok(resp.with_headers(headers))
}

fn headers_of(pairs: &[(&str, String)]) -> Headers {
    let headers = Headers::new();
    for (name, value) in pairs {
        let _ = headers.set(name, value);
    }
    headers
}

/// Routes one request (the table is [`edgent::api::routes`]).
async fn route_request(
    mut req: Request,
    env: Env,
    allowed: &AllowedOrigins,
    origin: Option<&str>,
) -> Result<Response> {
    let path = req.path();
    let method = req.method();
    let route = route(method.as_ref(), &path);
    let principal = if route.needs_key() {
        match authenticate(&req, &env, &route) {
            Ok(principal) => principal,
            Err(e) => return error(&e),
        }
    } else {
        Principal::Server
    };
    if matches!(route, Route::ThreadStream(_) | Route::NewThreadStream)
        && !allowed.admits_socket(origin)
    {
        return error(&ApiError::new(
            403,
            "forbidden",
            format!("this origin may not open sockets; list it in {ALLOWED_ORIGINS_VAR}"),
        ));
    }
    let outcome = match route {
        Route::Health => return json(200, &json!({ "ok": true, "version": VERSION })),
        Route::Refused { error: e, .. } => Err(e),
        Route::Webhook { thread_id, token } => {
            boxed(webhook(&mut req, &env, thread_id, token)).await
        }
        Route::ThreadStream(id) => boxed(stream(&req, &env, Some(id), &principal)).await,
        // The object decodes the rest (`ThreadOp::from_http` is the one table of them) and
        // checks the operation's scope.
        Route::ThreadOp { thread_id, op } => {
            boxed(forward(&mut req, &env, thread_id, method, &op, &principal)).await
        }
        // The MCP server checks a token against the session it names.
        Route::Mcp { agent } => boxed(super::mcp::handle(&mut req, &env, agent, &principal)).await,
        // Everything else is the server's.
        _ if principal != Principal::Server => Err(ApiError::new(
            403,
            "forbidden",
            "a client token reaches only its own thread; this route needs the server key",
        )),
        Route::Tools => boxed(tools(&env)).await,
        Route::RecommendTools => boxed(recommend_tools(&req, &env)).await,
        Route::CreateThread => boxed(create_thread(&mut req, &env)).await,
        Route::PutConfig => boxed(configure(&mut req, &env, None)).await,
        Route::ListDefinitions(kind) => {
            boxed(async { answer(admin::list(&D1(env.clone()), kind).await) }).await
        }
        Route::GetDefinition(kind, name) => {
            boxed(async { answer(admin::get(&D1(env.clone()), kind, name).await) }).await
        }
        Route::PutDefinition(kind, name) => {
            boxed(configure(&mut req, &env, Some((kind, name)))).await
        }
        Route::DeleteDefinition(kind, name) => {
            boxed(async { answer(admin::delete(&D1(env.clone()), kind, name).await) }).await
        }
        Route::NewThreadStream => boxed(stream(&req, &env, None, &principal)).await,
        Route::ListThreads => {
            boxed(async {
                let listed = thread_index::list_threads(&D1(env.clone()), &query_pairs(&req)).await;
                answer(listed.map(|page| (200, page)))
            })
            .await
        }
        Route::DeleteThread(thread_id) => boxed(delete_thread(&env, thread_id)).await,
        _ => Err(ApiError::not_found("no such route")),
    };
    match outcome {
        Ok(resp) => Ok(resp),
        Err(e) => error(&e),
    }
}

/// Who presents the request's credential (see [`edgent::api::access::presented`]); a client
/// token must be for the thread the route reaches.
fn authenticate(
    req: &Request,
    env: &Env,
    route: &Route<'_>,
) -> std::result::Result<Principal, ApiError> {
    let expected = env
        .secret("EDGENT_API_KEY")
        .map(|s| s.to_string())
        .map_err(|_| {
            ApiError::new(
                500,
                "not_configured",
                "EDGENT_API_KEY is not set on this Worker",
            )
        })?;
    let header = |name: &str| req.headers().get(name).ok().flatten();
    let authorization = header("authorization");
    let subprotocols = route
        .key_in_query()
        .then(|| header("sec-websocket-protocol"))
        .flatten();
    let query_token = route
        .key_in_query()
        .then(|| query_param(req, "token"))
        .flatten();
    let credential = presented(
        authorization.as_deref(),
        subprotocols.as_deref(),
        query_token.as_deref(),
    );
    let secret = env.secret(TOKEN_SECRET).ok().map(|s| s.to_string());
    let principal = access::authenticate(&expected, secret.as_deref(), credential, now() / 1000)?;
    if let Principal::Client(token) = &principal {
        if let Some(thread) = route.thread_id() {
            if thread != token.thread_id {
                return Err(ApiError::new(
                    403,
                    "forbidden",
                    "this token is for another thread",
                ));
            }
        }
    }
    Ok(principal)
}

/// Tells the thread's object who calls (internal requests are built here, so a client
/// cannot set this header itself).
pub(crate) fn set_principal(
    internal: &Request,
    principal: &Principal,
) -> std::result::Result<(), ApiError> {
    if *principal == Principal::Server {
        return Ok(());
    }
    let text = serde_json::to_string(principal).map_err(|e| logged("bad principal", e))?;
    internal
        .headers()
        .set(PRINCIPAL_HEADER, &text)
        .map_err(|e| logged("could not build the thread request", e))
}

fn stub(env: &Env, thread_id: &str) -> std::result::Result<worker::Stub, ApiError> {
    env.durable_object("THREADS")
        .and_then(|ns| ns.id_from_name(thread_id)?.get_stub())
        .map_err(|e| logged("thread storage is unavailable", e))
}

/// A configuration API answer as a response.
fn answer(
    outcome: std::result::Result<(u16, serde_json::Value), ApiError>,
) -> std::result::Result<Response, ApiError> {
    let (status, body) = outcome?;
    json(status, &body).map_err(|e| logged("could not build the response", e))
}

/// `PUT /api/config` (no `one`) or `PUT /api/{kind}/:name`: prompts may list the registered
/// tools.
async fn configure(
    req: &mut Request,
    env: &Env,
    one: Option<(Kind, &str)>,
) -> std::result::Result<Response, ApiError> {
    let body = read_body(req).await?;
    let registry = edgent::Catalog::installed_registry().map_err(|e| registry_error(&e))?;
    let tools: Vec<&str> = registry.names().collect();
    let schemas: Vec<&str> = registry.output_types().collect();
    let models = ModelPolicy::from_vars(|k| env.var(k).ok().map(|v| v.to_string()));
    let rules = admin::WriteRules {
        tools: &tools,
        schemas: &schemas,
        models: &models,
    };
    let db = D1(env.clone());
    answer(match one {
        Some((kind, name)) => admin::put(&db, kind, name, &body, rules, now()).await,
        None => admin::put_config(&db, &body, rules, now()).await,
    })
}

/// Tells a new thread where clients reach us (for webhook URLs).
fn set_origin(internal: &Request, req: &Request) {
    if let Some(origin) = origin(req) {
        let _ = internal.headers().set("x-edgent-origin", &origin);
    }
}

async fn create_thread(req: &mut Request, env: &Env) -> std::result::Result<Response, ApiError> {
    let body = read_body(req).await?;
    // Parsed here only to refuse a malformed body before an object exists; the thread's
    // object checks the agent (one configuration read, where the thread is made).
    CreateThread::parse(&body)?;
    let thread_id = new_id();
    let internal = internal_request(Method::Post, "/create", &thread_id, Some(body))?;
    set_origin(&internal, req);
    send_to(env, &thread_id, internal).await
}

/// `DELETE /api/threads/:id`: the thread's object erases it (404 when it holds none), then its
/// index row goes, also after a 404, so a row that an interrupted delete left behind is
/// removed by sending the delete again.
async fn delete_thread(env: &Env, thread_id: &str) -> std::result::Result<Response, ApiError> {
    let internal = internal_request(Method::Post, "/delete", thread_id, None)?;
    let erased = send_to(env, thread_id, internal).await?;
    if matches!(erased.status_code(), 200 | 404) {
        thread_index::delete_from_index(&D1(env.clone()), thread_id).await?;
    }
    Ok(erased)
}

/// `GET /api/tools`: every tool's schema, how it runs and its deployment-wide status.
async fn tools(env: &Env) -> std::result::Result<Response, ApiError> {
    let registry = edgent::Catalog::installed_registry().map_err(|e| registry_error(&e))?;
    let var = |k: &str| env.var(k).ok().map(|v| v.to_string());
    let mut out = Vec::new();
    for spec in registry.all_specs() {
        let policy = policy_for(&registry, &spec.name, var);
        let mut full = false;
        if let Some(per_minute) = deployment_limit(&policy) {
            if let Ok(w) = super::rate_limiter::peek(env, &spec.name).await {
                full = w.used >= per_minute;
            }
        }
        out.push(tool_entry(&spec, &policy, full));
    }
    json(200, &json!({ "tools": out })).map_err(|e| logged("could not answer", e))
}

/// `GET /api/tools/recommend?task=&limit=&prompt=`: the tools ranked for the task.
async fn recommend_tools(req: &Request, env: &Env) -> std::result::Result<Response, ApiError> {
    let query = RecommendQuery::parse(&query_pairs(req))?;
    let registry = edgent::Catalog::installed_registry().map_err(|e| registry_error(&e))?;
    let policy = ModelPolicy::from_vars(|k| env.var(k).ok().map(|v| v.to_string()));
    let embedder = crate::model::WorkerEmbedder(env.clone());
    let ranked =
        recommend::recommend(&D1(env.clone()), &registry, &query, &embedder, &policy).await;
    answer(ranked.map(|body| (200, body)))
}

/// `POST /webhooks/:thread_id/:token` (shape checked by the route; the thread's object looks
/// the token up).
async fn webhook(
    req: &mut Request,
    env: &Env,
    thread_id: &str,
    token: &str,
) -> std::result::Result<Response, ApiError> {
    let body = read_body(req).await?;
    let internal = internal_request(Method::Post, "/webhook", thread_id, Some(body))?;
    internal
        .headers()
        .set("x-edgent-webhook-token", token)
        .map_err(|e| logged("could not build the webhook request", e))?;
    send_to(env, thread_id, internal).await
}

async fn forward(
    req: &mut Request,
    env: &Env,
    thread_id: &str,
    method: Method,
    op: &str,
    principal: &Principal,
) -> std::result::Result<Response, ApiError> {
    let body = if method == Method::Post {
        // The AI SDK posts its whole conversation to the chat route; every other body is small.
        let max = if op == format!("{OP_PREFIX}/chat") {
            MAX_CHAT_BODY_BYTES
        } else {
            MAX_BODY_BYTES
        };
        Some(read_body_within(req, max).await?)
    } else {
        None
    };
    let query = raw_query(req).filter(|q| !q.is_empty());
    let path = match query {
        Some(q) => format!("{op}?{q}"),
        None => op.to_owned(),
    };
    let internal = internal_request(method, &path, thread_id, body)?;
    set_principal(&internal, principal)?;
    send_to(env, thread_id, internal).await
}

/// Names the internal header carrying the caller to the thread's object.
pub(crate) const PRINCIPAL_HEADER: &str = "x-edgent-principal";

/// A thread's WebSocket; with no thread (`GET /api/threads/new/stream?agent_id=…`) a new
/// thread is created by the same request and the `hello` frame names it.
async fn stream(
    req: &Request,
    env: &Env,
    thread: Option<&str>,
    principal: &Principal,
) -> std::result::Result<Response, ApiError> {
    let upgrade = req
        .headers()
        .get("upgrade")
        .ok()
        .flatten()
        .unwrap_or_default();
    if !upgrade.eq_ignore_ascii_case("websocket") {
        return Err(ApiError::new(
            426,
            "upgrade_required",
            "this route is a WebSocket: send Upgrade: websocket",
        ));
    }
    // Checked here, before the upgrade; the object reads its own copy from a header.
    let after = query_param(req, "after")
        .map(|a| edgent::api::ops::parse_after(&a))
        .transpose()?;
    let (thread_id, create) = match thread {
        Some(id) => (id.to_owned(), None),
        None => {
            // The object checks the agent before it accepts the socket.
            let create = CreateThread::from_query(&query_pairs(req))?;
            (new_id(), Some(create))
        }
    };
    let internal = internal_request(Method::Get, "/stream", &thread_id, None)?;
    let headers = internal.headers();
    let set = |name: &str, value: &str| {
        headers
            .set(name, value)
            .map_err(|e| logged("could not build the upgrade request", e))
    };
    set("upgrade", "websocket")?;
    set_principal(&internal, principal)?;
    let subprotocols = req.headers().get("sec-websocket-protocol").ok().flatten();
    if access::offers_subprotocol(subprotocols.as_deref()) {
        // The object answers the upgrade with it, as browsers require.
        set("x-edgent-subprotocol", SUBPROTOCOL)?;
    }
    if let Some(after) = after {
        set("x-edgent-after", &after.to_string())?;
    }
    if let Some(create) = create {
        // Internal only: the object creates the thread before it accepts the socket.
        let create = serde_json::to_string(&create).map_err(|e| logged("bad create", e))?;
        set("x-edgent-create", &create)?;
        set_origin(&internal, req);
    }
    send_to(env, &thread_id, internal).await
}

/// A 500 whose cause goes to the log, not to the client.
pub(crate) fn internal_request(
    method: Method,
    path: &str,
    thread_id: &str,
    body: Option<Vec<u8>>,
) -> std::result::Result<Request, ApiError> {
    let headers = Headers::new();
    let _ = headers.set("x-edgent-thread-id", thread_id);
    let _ = headers.set("content-type", "application/json");
    let mut init = RequestInit::new();
    init.with_method(method).with_headers(headers);
    if let Some(body) = body {
        init.with_body(Some(
            worker::js_sys::Uint8Array::from(body.as_slice()).into(),
        ));
    }
    super::http::outgoing(&format!("https://thread.internal{path}"), &init)
        .map_err(|e| logged("could not build the thread request", e))
}

pub(crate) async fn send_to(
    env: &Env,
    thread_id: &str,
    req: Request,
) -> std::result::Result<Response, ApiError> {
    stub(env, thread_id)?
        .fetch_with_request(req)
        .await
        .map_err(|e| logged("thread unavailable, try again", e))
}
