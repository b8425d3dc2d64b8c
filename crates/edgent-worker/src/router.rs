//! The public HTTP API: authentication, validation, and forwarding to the thread's object.

use serde_json::json;
use worker::{Env, Headers, Method, Request, RequestInit, Response, Result};

use super::admin;
use super::config::agent_exists;
use super::http::{error, json, logged, read_body, registry_error};
use edgent::api::ops::OP_PREFIX;
use edgent::api::{authorized, ApiError, CreateThread};
use edgent::config::admin::Kind;
use edgent::values::ids::{is_uuid, new_id};

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Routes one request.
pub(crate) async fn handle(mut req: Request, env: Env) -> Result<Response> {
    let path = req.path();
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let method = req.method();

    if method == Method::Get && segments == ["api", "health"] {
        return json(200, &json!({ "ok": true, "version": VERSION }));
    }
    if let ["webhooks", thread_id, token] = segments.as_slice() {
        // Authenticated by the unguessable token in the URL, not by the API key: the caller
        // is the outside world a workflow is waiting for.
        return match webhook(&mut req, &env, method, thread_id, token).await {
            Ok(resp) => Ok(resp),
            Err(e) => error(&e),
        };
    }
    if segments.first() != Some(&"api") {
        return error(&ApiError::not_found("not found; the API lives under /api"));
    }

    let is_stream = method == Method::Get
        && segments.len() == 4
        && segments[1] == "threads"
        && segments[3] == "stream";
    if let Err(e) = authenticate(&req, &env, is_stream) {
        return error(&e);
    }

    let outcome = match (method.clone(), &segments[1..]) {
        (Method::Get, ["tools"]) => tools(&env).await,
        (Method::Post, ["threads"]) => create_thread(&mut req, &env).await,
        (Method::Put, ["config"]) => admin::put_config(&mut req, &env).await,
        (_, [plural, rest @ ..]) if Kind::from_plural(plural).is_some() => {
            match (Kind::from_plural(plural), method.clone(), rest) {
                (Some(kind), Method::Get, []) => admin::list(&env, kind).await,
                (Some(kind), Method::Get, [name]) => admin::get(&env, kind, name).await,
                (Some(kind), Method::Put, [name]) => admin::put(&mut req, &env, kind, name).await,
                (Some(kind), Method::Delete, [name]) => admin::delete(&env, kind, name).await,
                _ => Err(method_or_route(&segments)),
            }
        }
        (_, ["threads", id, rest @ ..]) => match (method.clone(), rest) {
            (Method::Get, ["stream"]) => stream(&req, &env, id).await,
            // Every other thread route goes to the object as it is: `ThreadOp::from_http`
            // is the one table of them (404 for anything else).
            _ => {
                let op = format!("{OP_PREFIX}/{}", rest.join("/"));
                forward(&mut req, &env, id, method, &op).await
            }
        },
        _ => Err(method_or_route(&segments)),
    };
    match outcome {
        Ok(resp) => Ok(resp),
        Err(e) => error(&e),
    }
}

fn method_or_route(segments: &[&str]) -> ApiError {
    ApiError::not_found(format!("no route for /{}", segments.join("/")))
}

fn authenticate(
    req: &Request,
    env: &Env,
    allow_query_token: bool,
) -> std::result::Result<(), ApiError> {
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
    let header = req.headers().get("authorization").ok().flatten();
    let token = if allow_query_token {
        req.url().ok().and_then(|u| {
            u.query_pairs()
                .find(|(k, _)| k == "token")
                .map(|(_, v)| v.into_owned())
        })
    } else {
        None
    };
    if authorized(&expected, header.as_deref(), token.as_deref()) {
        Ok(())
    } else {
        Err(ApiError::unauthorized())
    }
}

fn stub(env: &Env, thread_id: &str) -> std::result::Result<worker::Stub, ApiError> {
    env.durable_object("THREADS")
        .and_then(|ns| ns.id_from_name(thread_id)?.get_stub())
        .map_err(|e| logged("thread storage is unavailable", e))
}

async fn create_thread(req: &mut Request, env: &Env) -> std::result::Result<Response, ApiError> {
    let body = read_body(req).await?;
    let create = CreateThread::parse(&body)?;
    match agent_exists(env, &create.agent_id).await {
        Ok(true) => {}
        Ok(false) => {
            return Err(ApiError::not_found(format!(
                "agent {:?} does not exist",
                create.agent_id
            )))
        }
        Err(e) => return Err(logged("agent configuration is unavailable", e)),
    }
    let thread_id = new_id();
    let internal = internal_request(Method::Post, "/create", &thread_id, Some(body))?;
    if let Ok(url) = req.url() {
        let _ = internal
            .headers()
            .set("x-edgent-origin", &url.origin().ascii_serialization());
    }
    send_to(env, &thread_id, internal).await
}

/// `GET /api/tools`: every tool's schema, how it runs (timeout, retries, approval, limits)
/// and its deployment-wide status (`rate_limited` when a per-deployment window is full).
async fn tools(env: &Env) -> std::result::Result<Response, ApiError> {
    let registry = edgent::Catalog::installed()
        .registry()
        .map_err(|e| registry_error(&e))?;
    let mut out = Vec::new();
    for spec in registry.all_specs() {
        let var = |k: &str| env.var(k).ok().map(|v| v.to_string());
        let policy = edgent::tool::policy::policy_for(&registry, &spec.name, var);
        let mut status = "available";
        if let Some(limit) = policy
            .rate_limit
            .filter(|l| l.scope == edgent::tool::LimitScope::Deployment)
        {
            if let Ok(w) = super::rate_limiter::peek(env, &spec.name).await {
                if w.used >= limit.per_minute {
                    status = "rate_limited";
                }
            }
        }
        let mut v = serde_json::to_value(&spec).unwrap_or_default();
        if let Some(obj) = v.as_object_mut() {
            obj.insert("status".into(), json!(status));
            obj.insert("policy".into(), policy_json(&policy));
        }
        out.push(v);
    }
    json(200, &json!({ "tools": out })).map_err(|e| logged("could not answer", e))
}

fn policy_json(p: &edgent::tool::ToolPolicy) -> serde_json::Value {
    json!({
        "timeout_ms": p.timeout.as_millis() as u64,
        "max_attempts": p.retry.max_attempts,
        "needs_approval": p.needs_approval,
        "rate_limit": p.rate_limit.map(|l| json!({
            "per_minute": l.per_minute,
            "when_limited": match l.when_limited { edgent::tool::WhenLimited::Wait => "wait", edgent::tool::WhenLimited::Fail => "fail" },
            "scope": match l.scope { edgent::tool::LimitScope::Thread => "thread", edgent::tool::LimitScope::Deployment => "deployment" },
        })),
        "deadline_ms": p.deadline.map(|d| d.as_millis() as u64),
        "cache_ms": p.cache_for.map(|d| d.as_millis() as u64),
    })
}

/// `POST /api/threads/:id/tool-calls/:call/approve|reject` (optional body `{"reason"}`).
/// `POST /webhooks/:thread_id/:token`: a 64-hex-character token or 404, like any other
/// wrong token (the thread's object answers for the rest).
async fn webhook(
    req: &mut Request,
    env: &Env,
    method: Method,
    thread_id: &str,
    token: &str,
) -> std::result::Result<Response, ApiError> {
    let well_formed =
        is_uuid(thread_id) && token.len() == 64 && token.bytes().all(|b| b.is_ascii_hexdigit());
    if !well_formed {
        return Err(ApiError::not_found("no such webhook"));
    }
    if method != Method::Post {
        return Err(ApiError::new(
            405,
            "method_not_allowed",
            "webhooks accept POST only",
        ));
    }
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
) -> std::result::Result<Response, ApiError> {
    if !is_uuid(thread_id) {
        // Never address an object for an id we could not have issued.
        return Err(ApiError::not_found("thread not found"));
    }
    let body = if method == Method::Post {
        Some(read_body(req).await?)
    } else {
        None
    };
    let query = req.url().ok().and_then(|u| u.query().map(str::to_owned));
    let path = match query {
        Some(q) => format!("{op}?{q}"),
        None => op.to_owned(),
    };
    let internal = internal_request(method, &path, thread_id, body)?;
    send_to(env, thread_id, internal).await
}

async fn stream(
    req: &Request,
    env: &Env,
    thread_id: &str,
) -> std::result::Result<Response, ApiError> {
    if !is_uuid(thread_id) {
        return Err(ApiError::not_found("thread not found"));
    }
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
    let internal = internal_request(Method::Get, "/stream", thread_id, None)?;
    internal
        .headers()
        .set("upgrade", "websocket")
        .map_err(|e| logged("could not build the upgrade request", e))?;
    send_to(env, thread_id, internal).await
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
    Request::new_with_init(&format!("https://thread.internal{path}"), &init)
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
