//! What clients send: WebSocket frames (and the rpc operations in them), HTTP methods, paths,
//! queries and bodies. Nothing panics; every refusal is a clean value (a 4xx with a stable
//! code and a message, or an `error` frame); what is accepted keeps its documented bounds.

use serde_json::{Map, Value};

use super::input::{any_value, Input};
use crate::api::access::{self, Principal};
use crate::api::ops::{ThreadOp, OP_PREFIX, RPC_METHODS};
use crate::api::routes::{route, Route};
use crate::api::{ApiError, CreateThread, PageQuery, PostMessage};
use crate::config::admin::{ConfigSet, Definition};
use crate::values::ids::is_uuid;
use crate::values::limits::{MAX_BODY_BYTES, MAX_CONTENT_BYTES, MAX_PAGE};
use crate::values::protocol::{parse_client_frame, ClientFrame, ServerFrame};

/// A client error: a 4xx the API documents, a code of `a-z` and `_`, and a message.
pub(super) fn check_api_error(e: &ApiError) {
    assert!(
        matches!(e.status, 400 | 404 | 405 | 409 | 413),
        "status {} for {e}",
        e.status
    );
    assert!(
        !e.code.is_empty() && e.code.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
        "code {:?}",
        e.code
    );
    assert!(!e.message.trim().is_empty(), "an error without a message");
}

/// An accepted operation keeps the contract's bounds.
fn check_op(op: &ThreadOp) {
    match op {
        ThreadOp::SendMessage(m) => check_message(m),
        ThreadOp::GetMessages(q) | ThreadOp::GetToolCalls(q) | ThreadOp::GetLogs(q) => {
            check_page(q)
        }
        _ => {}
    }
}

fn check_message(m: &PostMessage) {
    assert!(
        !m.content.trim().is_empty(),
        "an empty message was accepted"
    );
    assert!(m.content.len() <= MAX_CONTENT_BYTES, "an oversized message");
}

fn check_page(q: &PageQuery) {
    assert!((1..=MAX_PAGE).contains(&q.limit), "limit {}", q.limit);
    assert!(q.depth <= 8, "depth {}", q.depth);
}

/// Keys a frame's params might carry (every rpc's, and some none has).
const PARAM_KEYS: &[&str] = &[
    "content",
    "role",
    "name",
    "args",
    "bindings",
    "limit",
    "offset",
    "order",
    "include_silent",
    "depth",
    "side",
    "tool_call_id",
    "approved",
    "reason",
    "silent",
    "position",
    "extra",
    "agent",
    "status",
    "tag",
    "parent",
    "cursor",
];

/// Values worth trying for them.
const PARAM_VALUES: &[&str] = &[
    "",
    " ",
    "user",
    "system",
    "tool",
    "assistant",
    "a",
    "b",
    "c",
    "0",
    "1",
    "200",
    "201",
    "-1",
    "4294967295",
    "4294967296",
    "asc",
    "desc",
    "true",
    "yes",
    "get_weather",
    "idle",
    "stopped",
    // base64url of `123.abc`: a cursor's shape.
    "MTIzLmFiYw",
];

fn param_value(input: &mut Input<'_>) -> Value {
    match input.below(6) {
        0 => any_value(input, 1),
        1 => Value::from(input.text(40)),
        2 => Value::from(i64::from(input.u16()) - 1000),
        3 => Value::from(input.bool()),
        _ => Value::from(input.pick(PARAM_VALUES).unwrap_or_default()),
    }
}

fn params(input: &mut Input<'_>) -> Value {
    let mut map = Map::new();
    for _ in 0..input.below(5) {
        let key = input.pick(PARAM_KEYS).unwrap_or("content");
        map.insert(key.to_owned(), param_value(input));
    }
    Value::Object(map)
}

/// A frame's text read from the input: raw text, or a JSON object with a type, an id, a
/// method and params of any shape (sometimes padded past the frame limit).
fn frame_text(input: &mut Input<'_>) -> String {
    if input.one_in(4) {
        return String::from_utf8_lossy(input.rest()).into_owned();
    }
    let mut frame = Map::new();
    let kind = match input.below(6) {
        0 => Value::from("ping"),
        1 => any_value(input, 2),
        2 => Value::from(input.text(6)),
        _ => Value::from("rpc"),
    };
    frame.insert("type".into(), kind);
    match input.below(5) {
        0 => {}
        1 => {
            frame.insert("id".into(), any_value(input, 2));
        }
        2 => {
            frame.insert("id".into(), Value::from(input.text(8)));
        }
        _ => {
            frame.insert("id".into(), Value::from(input.u16()));
        }
    }
    match input.below(6) {
        0 => {}
        1 => {
            frame.insert("method".into(), any_value(input, 2));
        }
        _ => {
            let method = input.pick(RPC_METHODS).unwrap_or("stop");
            frame.insert("method".into(), Value::from(method));
        }
    }
    match input.below(6) {
        0 => {}
        1 => {
            frame.insert("params".into(), any_value(input, 1));
        }
        _ => {
            frame.insert("params".into(), params(input));
        }
    }
    if input.one_in(16) {
        let pad = MAX_BODY_BYTES - 64 + input.below(128);
        frame.insert("pad".into(), Value::from("x".repeat(pad)));
    }
    Value::Object(frame).to_string()
}

/// Input: a mode byte, then the raw frame text or the ops that build a frame.
///
/// A frame parses into a ping or an rpc, or is refused with an `error` frame whose code is
/// `frame_too_large`, `bad_frame` or `unknown_frame` (echoing the frame's own id, if any). An rpc
/// decodes into the same [`ThreadOp`] HTTP would give, or a clean 4xx; an accepted message or
/// page keeps its bounds.
pub fn client_frame(data: &[u8]) {
    let mut input = Input::new(data);
    let text = frame_text(&mut input);
    match parse_client_frame(&text) {
        Ok(ClientFrame::Ping) => {}
        Ok(ClientFrame::Rpc { id, method, params }) => {
            assert!(id.is_string() || id.is_number(), "rpc id {id:?}");
            assert!(params.is_object(), "rpc params {params:?}");
            match ThreadOp::from_rpc(&method, &params) {
                Ok(op) => check_op(&op),
                Err(e) => check_api_error(&e),
            }
        }
        Err(frame) => match *frame {
            ServerFrame::Error { code, message, id } => {
                assert!(
                    matches!(
                        code.as_str(),
                        "frame_too_large" | "bad_frame" | "unknown_frame"
                    ),
                    "frame error code {code:?}"
                );
                assert!(!message.is_empty(), "an error frame without a message");
                // The frame's own id, whatever its type (an unknown frame type echoes any).
                if let Some(id) = id {
                    let sent = serde_json::from_str::<Value>(&text).ok();
                    assert_eq!(
                        sent.as_ref().and_then(|f| f.get("id")),
                        Some(&id),
                        "echoed id"
                    );
                }
            }
            other => panic!("a refused frame answered {other:?}"),
        },
    }
}

/// Path segments worth trying.
const SEGMENTS: &[&str] = &[
    "api",
    "threads",
    "new",
    "stream",
    "webhooks",
    "models",
    "prompts",
    "agents",
    "config",
    "health",
    "tools",
    "messages",
    "stop",
    "logs",
    "tool-calls",
    "approve",
    "reject",
    "0b7c3f0e-6a1d-4c2e-9f5a-2d8e4b6a1c3f",
    "0B7C3F0E-6A1D-4C2E-9F5A-2D8E4B6A1C3F",
    "abababababababababababababababababababababababababababababababab",
    "",
    "..",
    "%2F",
    "op",
];

const QUERY_KEYS: &[&str] = &[
    "limit",
    "offset",
    "order",
    "include_silent",
    "depth",
    "agent_id",
    "tag",
    "token",
];

/// Input: the method, the path's segments, query pairs and a body, each read from the input
/// (segments, keys and values mostly from lists of meaningful ones).
///
/// The router decodes any method and path into a route or a clean refusal (404 or 405;
/// `under_api` exactly when the path starts with `/api`, and then the key is needed); a
/// thread's operation is forwarded under [`OP_PREFIX`] for a UUID only, and decodes into a
/// [`ThreadOp`], no operation (404) or a clean 4xx; the bodies of `POST /api/threads`,
/// `PUT /api/config` and `PUT /api/{kind}/:name` and the query of the new-thread socket parse
/// or are refused cleanly; an accepted body keeps its bounds.
pub fn http_request(data: &[u8]) {
    let mut input = Input::new(data);
    let method = input
        .pick(&["GET", "POST", "PUT", "DELETE", "PATCH", "get", ""])
        .unwrap_or("GET");
    let mut path = String::new();
    for _ in 0..input.below(7) {
        path.push('/');
        if input.one_in(8) {
            path.push('/');
        }
        if input.one_in(8) {
            path.push_str(&input.text(12));
        } else {
            path.push_str(input.pick(SEGMENTS).unwrap_or_default());
        }
    }
    if input.bool() {
        path.push('/');
    }
    let query: Vec<(String, String)> = (0..input.below(4))
        .map(|_| {
            let key = input.pick(QUERY_KEYS).unwrap_or("limit").to_owned();
            let value = if input.bool() {
                input.text(12)
            } else {
                input.pick(PARAM_VALUES).unwrap_or_default().to_owned()
            };
            (key, value)
        })
        .collect();
    let body: Vec<u8> = if input.bool() {
        params(&mut input).to_string().into_bytes()
    } else {
        input.rest().to_vec()
    };

    let decoded = route(method, &path);
    let under_api = path.trim_matches('/').split('/').next() == Some("api");
    match &decoded {
        Route::Refused {
            error,
            under_api: u,
        } => {
            check_api_error(error);
            assert!(matches!(error.status, 404 | 405), "router answered {error}");
            assert_eq!(*u, under_api, "under_api for {path:?}");
            assert_eq!(decoded.needs_key(), under_api, "needs_key for {path:?}");
        }
        Route::Health | Route::Webhook { .. } => assert!(!decoded.needs_key()),
        _ => assert!(decoded.needs_key(), "{decoded:?} without the key"),
    }
    match decoded {
        Route::ThreadOp { thread_id, op } => {
            assert!(is_uuid(thread_id), "forwarded thread id {thread_id:?}");
            let rest = op.strip_prefix(OP_PREFIX);
            assert!(rest.is_some(), "forwarded op {op:?}");
            match ThreadOp::from_http(method, rest.unwrap_or_default(), &query, &body) {
                Ok(Some(op)) => check_op(&op),
                Ok(None) => {}
                Err(e) => check_api_error(&e),
            }
        }
        Route::ThreadStream(id) | Route::DeleteThread(id) => assert!(is_uuid(id)),
        Route::ListThreads => match crate::api::thread_index::ListQuery::parse(&query) {
            Ok(q) => {
                assert!((1..=crate::api::MAX_PAGE).contains(&q.limit), "limit {q:?}");
                let (sql, params) = q.statement();
                assert_eq!(sql.matches('?').count(), params.len(), "{sql}");
            }
            Err(e) => check_api_error(&e),
        },
        Route::Webhook { thread_id, token } => {
            assert!(
                is_uuid(thread_id) && token.len() == 64,
                "webhook {thread_id} {token}"
            )
        }
        Route::CreateThread => check_create(CreateThread::parse(&body)),
        Route::NewThreadStream => check_create(CreateThread::from_query(&query)),
        Route::PutConfig => {
            if let Err(e) = ConfigSet::parse(&body) {
                check_api_error(&e);
            }
        }
        Route::PutDefinition(kind, name) => match Definition::parse_put(kind, &body, name) {
            Ok(def) => assert_eq!(def.name(), name, "a definition under another name"),
            Err(e) => check_api_error(&e),
        },
        _ => {}
    }
    let pairs = query.iter().map(|(k, v)| (k.as_str(), v.as_str()));
    match PageQuery::parse(pairs) {
        Ok(q) => check_page(&q),
        Err(e) => check_api_error(&e),
    }
    let key = String::from_utf8_lossy(&body).into_owned();
    let header = format!("Bearer {key}");
    let trimmed = key.trim();
    let who = |credential: Option<&str>, api_key: &str| {
        access::authenticate(api_key, Some(TOKEN_TEST_SECRET), credential, 0)
    };
    if !trimmed.is_empty() && trimmed == key && !access::is_client_token(&key) {
        let from_header = access::presented(Some(&header), None, None);
        assert_eq!(
            who(from_header, &key),
            Ok(Principal::Server),
            "the right key refused"
        );
        let from_query = access::presented(None, None, Some(&key));
        assert_eq!(
            who(from_query, &key),
            Ok(Principal::Server),
            "the right token refused"
        );
    }
    assert!(
        who(Some(&key), "").is_err() || access::is_client_token(&key),
        "an empty key accepted"
    );
    if let Some((_, value)) = query.first() {
        if value != &key {
            assert!(
                who(Some(value), &key).is_err(),
                "a wrong credential accepted"
            );
        }
    }
    // Whatever the bytes, they are not a token signed with the secret (forging one would
    // need the secret).
    if let Ok(Principal::Client(t)) = who(Some(&key), "unused") {
        panic!("forged bytes accepted as a token for {:?}", t.thread_id);
    }
}

/// The signing secret the adversarial bodies check tokens against.
const TOKEN_TEST_SECRET: &str = "adversarial-secret";

fn check_create(parsed: Result<CreateThread, ApiError>) {
    match parsed {
        Ok(c) => {
            assert!(
                !c.agent_id.is_empty() && c.agent_id.len() <= 128,
                "agent id"
            );
            assert!(
                c.tags.len() <= 32 && c.tags.iter().all(|t| t.len() <= 64),
                "tags"
            );
        }
        Err(e) => check_api_error(&e),
    }
}
