//! `ThreadObject`: one conversation thread per Durable Object (the app's `DurableThread` class,
//! defined by [`serve!`](crate::serve), wraps it).
//!
//! Requests come from the router (already authenticated and validated) or from a parent
//! thread. This module only decodes them and answers: the thread's runtime
//! ([`edgent::runtime::ThreadRuntime`], over this object as its [`ShellHost`] platform) carries
//! each one out and drives the thread, starting work in the invocation that stored it.

mod chat_answers;

use std::rc::Rc;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use worker::{
    Env, Error, Request, Response, Result, State, WebSocket, WebSocketIncomingMessage,
    WebSocketPair,
};

use super::chat::ChatStreams;
use super::clock::now;
use super::do_sql::DoSql;
use super::host::ShellHost;
use super::http::{
    boxed, error, json, logged, query_pairs, query_param, read_body, registry_error,
};
use super::mcp_calls::{self, McpCalls};
use super::router::PRINCIPAL_HEADER;
use chat_answers::is_chat_resume;
use edgent::api::access::{Access, Principal, SUBPROTOCOL};
use edgent::api::ops::{parse_after, ThreadOp, OP_PREFIX};
use edgent::api::{ApiError, CreateThread};
use edgent::engine::frame_log::Replay;
use edgent::engine::thread::ParentLink;
use edgent::runtime::ThreadRuntime;
use edgent::tool::RegistryError;
use edgent::values::limits::MAX_SOCKETS_PER_THREAD;
use edgent::values::protocol::{
    parse_client_frame, ClientFrame, ErrorBody, ServerFrame, PROTOCOL_VERSION,
};

/// What each socket remembers across hibernation.
#[derive(Serialize, Deserialize)]
struct Attachment {
    thread_id: String,
    connected_at: i64,
    /// Who opened it (sockets from before client tokens were the server's).
    #[serde(default = "server")]
    principal: Principal,
}

fn server() -> Principal {
    Principal::Server
}

/// The close code of a socket whose token was revoked or expired (4000-4999 are the
/// application's; 4401 echoes HTTP 401).
const CLOSE_UNAUTHORIZED: u16 = 4401;

/// The close code of the sockets of a thread that was deleted (4404 echoes HTTP 404).
const CLOSE_DELETED: u16 = 4404;

/// The tag of sockets opened with a client token.
const CLIENT_SOCKET_TAG: &str = "client";

/// Closes the client-token sockets whose token has expired (the host calls this at each
/// change of the thread's state, so an expired token stops receiving frames by the next turn
/// at the latest; an rpc or a ping finds it sooner).
pub(crate) fn close_expired_client_sockets(state: &State) {
    let now_s = now() / 1000;
    for ws in state.get_websockets_with_tag(CLIENT_SOCKET_TAG) {
        if let Principal::Client(token) = socket_principal(&ws) {
            if token.expires_at <= now_s {
                let _ = ws.close(Some(CLOSE_UNAUTHORIZED), Some("token expired"));
            }
        }
    }
}

/// Who sent an internal request: the router's `x-edgent-principal`, or the server (requests
/// without it come from the router for the server key, or from a parent thread: objects are
/// not reachable from outside).
pub(crate) fn principal_of(req: &Request) -> std::result::Result<Principal, ApiError> {
    match req.headers().get(PRINCIPAL_HEADER).ok().flatten() {
        None => Ok(Principal::Server),
        Some(text) => serde_json::from_str(&text).map_err(|_| ApiError::unauthorized()),
    }
}

/// The Durable Object hosting one thread: what the app's `DurableThread` class runs.
pub struct ThreadObject {
    state: State,
    /// The AI SDK answers streaming from this instance (shared with the platform, which
    /// feeds them).
    chats: Rc<ChatStreams>,
    /// The MCP calls waiting for their outcome (fed like `chats`).
    mcp: Rc<McpCalls>,
    /// The thread's runtime, or why this Worker's tools could not be registered (every
    /// request then answers with that error).
    runtime: std::result::Result<Rc<ThreadRuntime>, RegistryError>,
}

/// The Durable Object interface, called by the app's `DurableThread` (see [`serve!`](crate::serve)).
impl ThreadObject {
    /// A new instance for `state` (the object's storage) and the Worker's `env`.
    pub fn new(state: State, env: Env) -> Self {
        let chats = Rc::new(ChatStreams::default());
        let mcp = Rc::new(McpCalls::default());
        let runtime = edgent::Catalog::installed_registry().map(|registry| {
            ThreadRuntime::new(Rc::new(ShellHost {
                sql: DoSql::of(&state),
                state: state_handle(&state),
                env,
                registry,
                chats: chats.clone(),
                mcp: mcp.clone(),
                live_chunks: Default::default(),
            }))
        });
        ThreadObject {
            state,
            chats,
            mcp,
            runtime,
        }
    }

    fn runtime(&self) -> std::result::Result<&Rc<ThreadRuntime>, ApiError> {
        self.runtime.as_ref().map_err(registry_error)
    }

    /// A request from the router or a parent thread.
    pub async fn fetch(&self, mut req: Request) -> Result<Response> {
        if let Ok(rt) = &self.runtime {
            rt.on_contact();
        }
        let path = req.path();
        let result = match (req.method(), path.as_str()) {
            (worker::Method::Post, "/create") => boxed(self.create(&mut req)).await,
            (worker::Method::Post, "/webhook") => boxed(self.webhook(&mut req)).await,
            (worker::Method::Post, "/delete") => boxed(self.delete()).await,
            (worker::Method::Post, "/mcp/ask" | "/mcp/tool") => match self.runtime() {
                Ok(rt) => boxed(mcp_calls::handle(rt, &self.mcp, &mut req, &path)).await,
                Err(e) => Err(e),
            },
            (worker::Method::Post, "/run") => match self.runtime() {
                Ok(rt) => boxed(rt.run_to_end())
                    .await
                    .map(|s| (200, json!(s)))
                    .map_err(|e| ApiError::internal(e.to_string())),
                Err(e) => Err(e),
            },
            (worker::Method::Get, "/stream") => return boxed(self.accept_socket(&req)).await,
            (worker::Method::Post, "/op/chat") => return boxed(self.chat(&mut req)).await,
            (worker::Method::Get, op) if is_chat_resume(op) => return self.resume_chat(&req),
            (_, op) => match op.strip_prefix(OP_PREFIX) {
                Some(op) if op.is_empty() || op.starts_with('/') => {
                    boxed(self.http_op(&mut req, op)).await
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
        if let Ok(rt) = &self.runtime {
            rt.alarm().await;
        }
        Response::ok("")
    }

    /// A frame from a client socket.
    pub async fn websocket_message(
        &self,
        ws: WebSocket,
        message: WebSocketIncomingMessage,
    ) -> Result<()> {
        if let Ok(rt) = &self.runtime {
            rt.on_contact();
        }
        let WebSocketIncomingMessage::String(text) = message else {
            let why = "binary frames are not supported; send JSON text";
            send(&ws, &ServerFrame::error("bad_frame", why, None));
            return Ok(());
        };
        let (id, method, params) = match parse_client_frame(&text) {
            Ok(ClientFrame::Rpc { id, method, params }) => (id, method, params),
            Ok(ClientFrame::Ping) => {
                send(&ws, &ServerFrame::Pong);
                if let Principal::Client(token) = socket_principal(&ws) {
                    if token.expires_at <= now() / 1000 {
                        let _ = ws.close(Some(CLOSE_UNAUTHORIZED), Some("token expired"));
                    }
                }
                return Ok(());
            }
            Err(frame) => {
                send(&ws, &frame);
                return Ok(());
            }
        };
        let principal = socket_principal(&ws);
        let answer = match (self.runtime(), ThreadOp::from_rpc(&method, &params)) {
            (Ok(rt), Ok(ThreadOp::Resume { after })) => {
                let op = ThreadOp::Resume { after };
                match rt.authorize_op(&principal, &op) {
                    Ok(()) => resume(rt, &ws, after),
                    Err(e) => Err(e),
                }
            }
            (Ok(rt), Ok(op)) => rt.apply_as(&principal, op).await,
            (Err(e), _) | (_, Err(e)) => Err(e),
        };
        let revoked = matches!(&answer, Err(e) if e.status == 401);
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
        if revoked {
            let _ = ws.close(Some(CLOSE_UNAUTHORIZED), Some("token revoked or expired"));
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
    async fn create(&self, req: &mut Request) -> std::result::Result<(u16, Value), ApiError> {
        let body = read_body(req).await?;
        let create = CreateThread::parse(&body)?;
        let header = |name: &str| req.headers().get(name).ok().flatten();
        let thread_id =
            header("x-edgent-thread-id").ok_or_else(|| ApiError::invalid("missing thread id"))?;
        // Where clients reach us, for webhook URLs (set by the router from the request).
        let origin = header("x-edgent-origin");
        // Set only by a parent thread's agent tool (the router never forwards a query).
        let parent = query_param(req, "parent");
        let nesting = query_param(req, "nesting")
            .and_then(|n| n.parse::<u32>().ok())
            .unwrap_or(1);
        // A parent that sends no root (an older build mid-deploy) is its chain's root.
        let root = query_param(req, "root");
        let link = parent.as_deref().map(|thread_id| ParentLink {
            thread_id,
            root_thread_id: root.as_deref().unwrap_or(thread_id),
            nesting,
        });
        let summary = self
            .runtime()?
            .create(&thread_id, &create, link, origin.as_deref())
            .await?;
        Ok((201, summary))
    }

    /// A client operation over HTTP: decoded into the same [`ThreadOp`] as an rpc.
    async fn http_op(
        &self,
        req: &mut Request,
        path: &str,
    ) -> std::result::Result<(u16, Value), ApiError> {
        let method = req.method();
        let query = query_pairs(req);
        let body = if method == worker::Method::Post {
            read_body(req).await?
        } else {
            Vec::new()
        };
        let op = ThreadOp::from_http(method.as_ref(), path, &query, &body)?
            .ok_or_else(|| ApiError::not_found("no such thread operation"))?;
        let rt = self.runtime()?;
        let status = op.http_status();
        let revokes = matches!(op, ThreadOp::RevokeTokens);
        let answer = rt.apply_as(&principal_of(req)?, op).await?;
        if revokes {
            self.close_revoked_sockets();
        }
        Ok((status, answer))
    }

    /// Erases the thread (the router's `DELETE /api/threads/:id`; 404 when there is none):
    /// its sockets are closed with a reason, its alarm and storage deleted, and the runtime
    /// forgets it, so every later request finds no thread. The router removes its index row.
    async fn delete(&self) -> std::result::Result<(u16, Value), ApiError> {
        let rt = self.runtime()?;
        let thread_id = rt.forget_thread()?;
        for ws in self.state.get_websockets() {
            let _ = ws.close(Some(CLOSE_DELETED), Some("the thread was deleted"));
        }
        self.chats.end_all("the thread was deleted");
        self.mcp.end_all();
        let storage = self.state.storage();
        let erased = match storage.delete_alarm().await {
            Ok(()) => storage.delete_all().await,
            Err(e) => Err(e),
        };
        rt.thread_erased();
        erased.map_err(|e| logged("could not erase the thread", e))?;
        Ok((200, json!({ "deleted": thread_id })))
    }

    /// A POST to a webhook URL (the router has bounded the body; the runtime checks the token
    /// before anything else).
    async fn webhook(&self, req: &mut Request) -> std::result::Result<(u16, Value), ApiError> {
        let token = req
            .headers()
            .get("x-edgent-webhook-token")
            .ok()
            .flatten()
            .unwrap_or_default();
        let body = read_body(req).await?;
        let answer = self.runtime()?.webhook(&token, &body).await?;
        Ok((202, answer))
    }

    async fn create_for_socket(&self, req: &Request) -> std::result::Result<(), ApiError> {
        let header = |name: &str| req.headers().get(name).ok().flatten();
        let Some(create) = header("x-edgent-create") else {
            return Ok(());
        };
        let create = CreateThread::parse(create.as_bytes())?;
        let thread_id =
            header("x-edgent-thread-id").ok_or_else(|| ApiError::invalid("missing thread id"))?;
        let origin = header("x-edgent-origin");
        self.runtime()?
            .create(&thread_id, &create, None, origin.as_deref())
            .await
            .map(|_| ())
    }

    /// A client's socket; when the router asks (`x-edgent-create`), the thread is created
    /// first, so one request creates a thread and connects to it. With `x-edgent-after` (the
    /// router's copy of `?after=`) the socket is sent, after `hello` and `status`, every
    /// logged frame after that seq, or `reset` when the log no longer reaches back that far.
    async fn accept_socket(&self, req: &Request) -> Result<Response> {
        let after = match req.headers().get("x-edgent-after").ok().flatten() {
            Some(after) => match parse_after(&after) {
                Ok(after) => Some(after),
                Err(e) => return error(&e),
            },
            None => None,
        };
        if self.state.get_websockets().len() >= MAX_SOCKETS_PER_THREAD {
            return error(&ApiError::new(
                429,
                "too_many_sockets",
                format!(
                    "this thread has {MAX_SOCKETS_PER_THREAD} open sockets, the most it takes; \
                     close one and connect again"
                ),
            ));
        }
        if let Err(e) = self.create_for_socket(req).await {
            return error(&e);
        }
        let principal = match principal_of(req) {
            Ok(p) => p,
            Err(e) => return error(&e),
        };
        if let Err(e) = self
            .runtime()
            .and_then(|rt| rt.authorize(&principal, Access::Chat))
        {
            return error(&e);
        }
        // From here to the last replayed frame nothing awaits: no frame can be broadcast in
        // between, so the socket gets every logged frame after `after`, then live ones, with
        // no gap and no duplicate.
        let greeting = self
            .runtime()
            .and_then(|rt| Ok((rt.greeting()?, rt.replay(after)?)));
        let ((thread_id, status), replay) = match greeting {
            Ok(v) => v,
            Err(e) => return error(&e),
        };
        let pair = WebSocketPair::new()?;
        let server = pair.server;
        if principal == Principal::Server {
            self.state.accept_web_socket(&server);
        } else {
            // Tagged, so the thread finds token sockets without reading every attachment.
            self.state
                .accept_websocket_with_tags(&server, &[CLIENT_SOCKET_TAG]);
        }
        save_attachment(
            &server,
            &Attachment {
                thread_id: thread_id.clone(),
                connected_at: now(),
                principal,
            },
        )?;
        send(
            &server,
            &ServerFrame::Hello {
                thread_id,
                protocol: PROTOCOL_VERSION,
                seq: replay.newest,
            },
        );
        send(&server, &status);
        send_replay(&server, &replay);
        let response = Response::from_websocket(pair.client)?;
        if req
            .headers()
            .get("x-edgent-subprotocol")
            .ok()
            .flatten()
            .is_some()
        {
            // A browser that offered `edgent` (beside its token) requires it in the answer.
            let headers = worker::Headers::new();
            headers.set("sec-websocket-protocol", SUBPROTOCOL)?;
            return Ok(response.with_headers(headers));
        }
        Ok(response)
    }

    /// Closes the sockets (and ends the chat answers) opened with tokens a revocation just
    /// invalidated.
    fn close_revoked_sockets(&self) {
        self.chats.end_clients("the token was revoked");
        let Ok(rt) = self.runtime() else { return };
        for ws in self.state.get_websockets() {
            let principal = socket_principal(&ws);
            if principal != Principal::Server && rt.authorize(&principal, Access::Chat).is_err() {
                let _ = ws.close(Some(CLOSE_UNAUTHORIZED), Some("token revoked"));
            }
        }
    }
}

/// Who opened `ws` (a socket without a readable attachment is treated as a client with no
/// rights: it is refused, never promoted).
fn socket_principal(ws: &WebSocket) -> Principal {
    match read_attachment(ws) {
        Some(a) => a.principal,
        None => Principal::Client(edgent::api::access::ClientToken {
            thread_id: String::new(),
            scopes: Vec::new(),
            expires_at: 0,
            generation: -1,
        }),
    }
}

/// Keeps `attachment` with the socket across hibernation, as JSON text: serde_json is in the
/// Worker anyway, where the structured-clone path (`WebSocket::serialize_attachment`, through
/// serde-wasm-bindgen) would add a serializer and a deserializer of its own for this type.
fn save_attachment(ws: &WebSocket, attachment: &Attachment) -> Result<()> {
    use worker::worker_sys::ext::WebSocketExt;
    let json = serde_json::to_string(attachment).map_err(|e| Error::RustError(e.to_string()))?;
    ws.as_ref()
        .serialize_attachment(wasm_bindgen::JsValue::from_str(&json))
        .map_err(Error::from)
}

/// The attachment [`save_attachment`] kept, or one a Worker of before 2026-11-24 kept as a
/// structured object (read through `JSON.stringify`); `None` when there is none or it does not
/// parse.
fn read_attachment(ws: &WebSocket) -> Option<Attachment> {
    use worker::worker_sys::ext::WebSocketExt;
    let value = ws.as_ref().deserialize_attachment().ok()?;
    let text = match value.as_string() {
        Some(text) => text,
        None if value.is_object() => worker::js_sys::JSON::stringify(&value).ok()?.as_string()?,
        None => return None,
    };
    serde_json::from_str(&text).ok()
}

/// A second handle on the object's state (the same JS object) for the runtime's platform.
fn state_handle(state: &State) -> State {
    use wasm_bindgen::JsCast;
    let raw: &wasm_bindgen::JsValue = state.as_raw().as_ref();
    State::from(
        raw.clone()
            .unchecked_into::<worker::worker_sys::DurableObjectState>(),
    )
}

fn send(ws: &WebSocket, frame: &ServerFrame) {
    let _ = ws.send_with_str(frame.to_json());
}

/// Sends a replay to one socket: the logged frames as they were first sent, or `reset`.
fn send_replay(ws: &WebSocket, replay: &Replay) {
    if replay.reset {
        send(ws, &ServerFrame::Reset { seq: replay.newest });
        return;
    }
    for text in &replay.frames {
        let _ = ws.send_with_str(text);
    }
}

/// The rpc `resume`: the frames after `after` go to this socket (read and sent without an
/// await, like a socket opened with `?after=`), then the answer. Frames broadcast to this
/// socket since the client's last one are sent again: the client drops seqs it has seen.
fn resume(rt: &ThreadRuntime, ws: &WebSocket, after: i64) -> std::result::Result<Value, ApiError> {
    rt.greeting()?; // 404 for an object that holds no thread
    let replay = rt.replay(Some(after))?;
    send_replay(ws, &replay);
    let mut answer = json!({ "replayed": replay.frames.len(), "seq": replay.newest });
    if replay.reset {
        answer["reset"] = json!(true);
    }
    Ok(answer)
}
