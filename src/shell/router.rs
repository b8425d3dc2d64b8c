//! The public HTTP API: authentication, validation, and forwarding to the thread's object.

use serde_json::json;
use worker::{Env, Headers, Method, Request, RequestInit, Response, Result};

use super::admin;
use super::config::agent_exists;
use super::http::{error, json, logged, read_body, registry_error};
use crate::core::admin::Kind;
use crate::core::api::{authorized, ApiError, CreateThread};
use crate::core::ids::{is_uuid, new_id};
use crate::tool::Registry;

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Routes one request.
pub(crate) async fn handle(mut req: Request, env: Env) -> Result<Response> {
    let path = req.path();
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let method = req.method();

    if method == Method::Get && segments == ["api", "health"] {
        return json(200, &json!({ "ok": true, "version": VERSION }));
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
        (Method::Get, ["tools"]) => {
            return match Registry::discovered() {
                Ok(registry) => json(200, &json!({ "tools": registry.all_specs() })),
                Err(e) => error(&registry_error(&e)),
            };
        }
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
        (_, ["threads", id, rest @ ..]) => {
            let op = match (method.clone(), rest) {
                (Method::Get, []) => Some("/summary"),
                (Method::Get, ["messages"]) => Some("/messages"),
                (Method::Get, ["logs"]) => Some("/logs"),
                (Method::Post, ["messages"]) => Some("/messages"),
                (Method::Post, ["stop"]) => Some("/stop"),
                (Method::Get, ["stream"]) => Some("/stream"),
                _ => None,
            };
            match op {
                None => Err(method_or_route(&segments)),
                Some("/stream") => stream(&req, &env, id).await,
                Some(op) => forward(&mut req, &env, id, method, op).await,
            }
        }
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
    send_to(env, &thread_id, internal).await
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
