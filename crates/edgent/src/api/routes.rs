//! The public HTTP routes: which request is which, and what it needs before it is served. The
//! routes of one thread are decoded by its object ([`ThreadOp::from_http`](super::ops::ThreadOp::from_http));
//! here they are only forwarded.

use super::ops::OP_PREFIX;
use super::ApiError;
use crate::config::admin::Kind;
use crate::values::ids::is_uuid;

/// One public route, decoded from a method and a path.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Route<'a> {
    /// `GET /api/health` (no key).
    Health,
    /// `POST /webhooks/:thread_id/:token`: authenticated by its unguessable token, not by the
    /// key (the caller is the outside world a workflow waits for).
    Webhook {
        /// The thread (a UUID).
        thread_id: &'a str,
        /// 64 hex characters.
        token: &'a str,
    },
    /// `GET /api/tools`.
    Tools,
    /// `GET /api/tools/recommend?task=&limit=&prompt=`: tools ranked for a task, with scores
    /// (server key only).
    RecommendTools,
    /// `/mcp` (every agent) or `/mcp/:agent` (one agent, its conversation per session): the
    /// MCP server ([`super::mcp`]). The key or a client token, checked like the API's; a
    /// token's thread is checked by the MCP handler.
    Mcp {
        /// The agent of `/mcp/:agent`.
        agent: Option<&'a str>,
    },
    /// `POST /api/threads`.
    CreateThread,
    /// `PUT /api/config`.
    PutConfig,
    /// `GET /api/{kind}`.
    ListDefinitions(Kind),
    /// `GET /api/{kind}/:name`.
    GetDefinition(Kind, &'a str),
    /// `PUT /api/{kind}/:name`.
    PutDefinition(Kind, &'a str),
    /// `DELETE /api/{kind}/:name`.
    DeleteDefinition(Kind, &'a str),
    /// `GET /api/threads?agent=&status=&tag=&parent=&limit=&cursor=`: a page of the thread
    /// index (server key only).
    ListThreads,
    /// `DELETE /api/threads/:id`: erases the thread and its index row (server key only).
    DeleteThread(&'a str),
    /// `GET /api/threads/:id/stream` (a WebSocket upgrade; the key may come as `?token=`).
    ThreadStream(&'a str),
    /// `GET /api/threads/new/stream?agent_id=…`: creates a thread and opens its socket in one
    /// request (the `hello` frame names the new thread).
    NewThreadStream,
    /// Any other `/api/threads/:id/…` request: forwarded to the thread's object at `op`
    /// (`OP_PREFIX` + the rest of the path), which decodes it.
    ThreadOp {
        /// The thread (a UUID).
        thread_id: &'a str,
        /// The path in the object's namespace.
        op: String,
    },
    /// Not a route: answer `error` as is, after checking the key when the path is under
    /// `/api` (so an unauthenticated caller learns nothing about what exists).
    Refused {
        /// 404 for unknown routes, webhooks of the wrong shape and thread ids we could not
        /// have issued (no object is addressed for them); 405 for a webhook that is not a
        /// POST.
        error: ApiError,
        /// Whether the path is under `/api`.
        under_api: bool,
    },
}

impl Route<'_> {
    /// Whether the route needs the API key (everything under `/api` but health).
    pub fn needs_key(&self) -> bool {
        match self {
            Route::Health | Route::Webhook { .. } => false,
            Route::Refused { under_api, .. } => *under_api,
            _ => true,
        }
    }

    /// Whether the key may come in the query string (browsers cannot set headers on a
    /// WebSocket).
    pub fn key_in_query(&self) -> bool {
        matches!(self, Route::ThreadStream(_) | Route::NewThreadStream)
    }

    /// The one thread the route reaches, if any: the only routes a client token may use are
    /// those of its own thread (the thread then checks the operation's scope).
    pub fn thread_id(&self) -> Option<&str> {
        match self {
            Route::ThreadStream(id) | Route::ThreadOp { thread_id: id, .. } => Some(id),
            _ => None,
        }
    }
}

/// Decodes a request's method and path.
pub fn route<'a>(method: &str, path: &'a str) -> Route<'a> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let under_api = segments.first() == Some(&"api");
    decode(method, &segments).unwrap_or_else(|error| Route::Refused { error, under_api })
}

fn decode<'a>(method: &str, segments: &[&'a str]) -> Result<Route<'a>, ApiError> {
    let no_route = || ApiError::not_found(format!("no route for /{}", segments.join("/")));
    let thread = |id: &'a str| {
        if is_uuid(id) {
            Ok(id)
        } else {
            Err(ApiError::not_found("thread not found"))
        }
    };
    match (method, segments) {
        ("GET", ["api", "health"]) => Ok(Route::Health),
        (_, ["webhooks", thread_id, token]) => {
            let well_formed = is_uuid(thread_id)
                && token.len() == 64
                && token.bytes().all(|b| b.is_ascii_hexdigit());
            if !well_formed {
                Err(ApiError::not_found("no such webhook"))
            } else if method != "POST" {
                Err(ApiError::new(
                    405,
                    "method_not_allowed",
                    "webhooks accept POST only",
                ))
            } else {
                Ok(Route::Webhook { thread_id, token })
            }
        }
        (_, ["mcp"]) => Ok(Route::Mcp { agent: None }),
        (_, ["mcp", agent]) if !agent.is_empty() => Ok(Route::Mcp { agent: Some(agent) }),
        (_, [first, ..]) if *first != "api" => {
            Err(ApiError::not_found("not found; the API lives under /api"))
        }
        ("GET", ["api", "tools"]) => Ok(Route::Tools),
        ("GET", ["api", "tools", "recommend"]) => Ok(Route::RecommendTools),
        ("POST", ["api", "threads"]) => Ok(Route::CreateThread),
        ("GET", ["api", "threads"]) => Ok(Route::ListThreads),
        ("DELETE", ["api", "threads", id]) => Ok(Route::DeleteThread(thread(id)?)),
        ("PUT", ["api", "config"]) => Ok(Route::PutConfig),
        (_, ["api", plural, rest @ ..]) if Kind::from_plural(plural).is_some() => {
            let Some(kind) = Kind::from_plural(plural) else {
                return Err(no_route());
            };
            match (method, rest) {
                ("GET", []) => Ok(Route::ListDefinitions(kind)),
                ("GET", [name]) => Ok(Route::GetDefinition(kind, name)),
                ("PUT", [name]) => Ok(Route::PutDefinition(kind, name)),
                ("DELETE", [name]) => Ok(Route::DeleteDefinition(kind, name)),
                _ => Err(no_route()),
            }
        }
        ("GET", ["api", "threads", "new", "stream"]) => Ok(Route::NewThreadStream),
        ("GET", ["api", "threads", id, "stream"]) => Ok(Route::ThreadStream(thread(id)?)),
        (_, ["api", "threads", id, rest @ ..]) => Ok(Route::ThreadOp {
            thread_id: thread(id)?,
            op: format!("{OP_PREFIX}/{}", rest.join("/")),
        }),
        _ => Err(no_route()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "0b7c3f0e-6a1d-4c2e-9f5a-2d8e4b6a1c3f";

    fn error(method: &str, path: &str) -> (u16, bool) {
        match route(method, path) {
            Route::Refused { error, under_api } => (error.status, under_api),
            other => panic!("{method} {path} decoded as {other:?}"),
        }
    }

    #[test]
    fn each_public_route_decodes_with_what_it_needs() {
        assert_eq!(route("GET", "/api/health"), Route::Health);
        assert!(!Route::Health.needs_key());
        assert_eq!(route("POST", "/api/threads/"), Route::CreateThread);
        assert_eq!(
            route("DELETE", "/api/models/fast"),
            Route::DeleteDefinition(Kind::Model, "fast")
        );
        assert_eq!(
            route("GET", "/api/agents"),
            Route::ListDefinitions(Kind::Agent)
        );
        let path = format!("/api/threads/{ID}/stream");
        let stream = route("GET", &path);
        assert_eq!(stream, Route::ThreadStream(ID));
        assert!(stream.needs_key() && stream.key_in_query());
        let new = route("GET", "/api/threads/new/stream");
        assert_eq!(new, Route::NewThreadStream);
        assert!(new.needs_key() && new.key_in_query());
        assert!(matches!(
            route("POST", "/api/threads/new/stream"),
            Route::Refused { .. }
        ));
        let path = format!("/api/threads/{ID}/tool-calls/c1/approve");
        let op = route("POST", &path);
        assert_eq!(
            op,
            Route::ThreadOp {
                thread_id: ID,
                op: "/op/tool-calls/c1/approve".into()
            }
        );
        assert!(op.needs_key() && !op.key_in_query());
        let summary = format!("/api/threads/{ID}");
        assert!(matches!(route("GET", &summary), Route::ThreadOp { op, .. } if op == "/op/"));
        let list = route("GET", "/api/threads");
        assert_eq!(list, Route::ListThreads);
        assert!(list.needs_key() && !list.key_in_query() && list.thread_id().is_none());
        let delete = route("DELETE", &summary);
        assert_eq!(delete, Route::DeleteThread(ID));
        // Not a route a client token of that thread may use: the server's alone.
        assert!(delete.needs_key() && !delete.key_in_query() && delete.thread_id().is_none());
        assert_eq!(route("GET", "/api/threads/"), Route::ListThreads);
        let recommend = route("GET", "/api/tools/recommend");
        assert_eq!(recommend, Route::RecommendTools);
        // The server's alone, like the tool listing.
        assert!(
            recommend.needs_key() && !recommend.key_in_query() && recommend.thread_id().is_none()
        );
        assert_eq!(route("GET", "/api/tools/"), Route::Tools);
        let mcp = route("POST", "/mcp");
        assert_eq!(mcp, Route::Mcp { agent: None });
        // Outside /api, yet never open: the key or a token, checked before anything else.
        assert!(mcp.needs_key() && !mcp.key_in_query() && mcp.thread_id().is_none());
        assert_eq!(
            route("POST", "/mcp/support"),
            Route::Mcp {
                agent: Some("support")
            }
        );
        assert!(matches!(route("POST", "/mcp/a/b"), Route::Refused { .. }));
    }

    #[test]
    fn webhooks_need_the_right_shape_and_post_but_no_key() {
        let token = "ab".repeat(32);
        let path = format!("/webhooks/{ID}/{token}");
        assert!(!route("POST", &path).needs_key());
        assert_eq!(error("GET", &path), (405, false));
        for bad in [
            format!("/webhooks/{ID}/{}", "zz".repeat(32)),
            format!("/webhooks/{ID}/abc"),
            format!("/webhooks/not-a-uuid/{token}"),
        ] {
            assert_eq!(error("POST", &bad), (404, false), "{bad}");
        }
    }

    #[test]
    fn unknown_routes_and_foreign_thread_ids_are_404_before_any_object() {
        assert_eq!(error("GET", "/"), (404, false));
        assert_eq!(error("GET", "/favicon.ico"), (404, false));
        // Under /api the key is checked first: a caller without it learns nothing.
        for (method, path) in [
            ("GET", "/api"),
            ("GET", "/api/nothing"),
            ("POST", "/api/health"),
            ("PATCH", "/api/models/fast"),
            ("GET", "/api/models/a/b"),
            ("GET", "/api/threads/not-a-uuid"),
            ("GET", "/api/threads/not-a-uuid/stream"),
            ("DELETE", "/api/threads/not-a-uuid"),
            ("DELETE", "/api/threads"),
            ("PUT", "/api/threads"),
            ("POST", "/api/tools/recommend"),
            ("GET", "/api/tools/recommend/more"),
            ("GET", "/api/tools/get_weather"),
        ] {
            assert_eq!(error(method, path), (404, true), "{method} {path}");
            assert!(route(method, path).needs_key());
        }
    }
}
