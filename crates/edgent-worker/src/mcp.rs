//! `POST /mcp` and `POST /mcp/:agent`: edgent over MCP's Streamable HTTP transport, answered
//! with JSON ([`edgent::api::mcp`] decodes the messages and builds the answers).
//!
//! - `/mcp/:agent` keeps a session per client: `initialize` with the server key creates a
//!   thread of the agent, and its id is the `Mcp-Session-Id`; with a client token the session
//!   is the token's thread. `ask_<agent>` talks in that thread, and the registered tools marked
//!   `mcp` run in it (its storage, the agent's bindings, the durable path).
//! - `/mcp` is stateless: `ask_<agent>` for every agent, each call in a new thread or in the
//!   `thread_id` it names (server key only).

use serde_json::{json, Value};
use worker::{Env, Headers, Method, Request, Response};

use super::d1::D1;
use super::http::{logged, origin, read_body, registry_error};
use super::router::{internal_request, send_to, set_principal};
use edgent::api::access::Principal;
use edgent::api::mcp::{self, code, Call, Incoming, Target, SESSION_HEADER};
use edgent::api::{ApiError, CreateThread};
use edgent::config::admin::Kind;
use edgent::runtime::admin;
use edgent::tool::policy::policy_for;
use edgent::values::ids::{is_uuid, new_id};

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Where one request's calls go.
struct Endpoint<'a> {
    env: &'a Env,
    principal: &'a Principal,
    /// `/mcp/:agent`'s agent.
    agent: Option<&'a str>,
    /// The session's thread (`/mcp/:agent` after `initialize`).
    session: Option<String>,
    /// The Worker's origin, for the webhook URLs of threads created here.
    origin: Option<String>,
}

/// Answers one MCP request.
pub(crate) async fn handle(
    req: &mut Request,
    env: &Env,
    agent: Option<&str>,
    principal: &Principal,
) -> Result<Response, ApiError> {
    let method = req.method();
    if method != Method::Post {
        // No server-to-client stream (GET) and no session teardown (DELETE): the session is
        // a conversation, which outlives a client.
        // An empty body: clients read the status alone (the SDK drops the GET without reading).
        let response = Response::empty()
            .map_err(|e| logged("could not answer", e))?
            .with_status(405);
        let headers = Headers::new();
        let _ = headers.set("allow", "POST");
        return Ok(response.with_headers(headers));
    }
    let header = |name: &str| req.headers().get(name).ok().flatten();
    if !mcp::supports_header(header(mcp::PROTOCOL_HEADER).as_deref()) {
        return Err(ApiError::invalid(format!(
            "unsupported MCP-Protocol-Version; this server speaks {}",
            mcp::PROTOCOL_VERSIONS.join(", ")
        )));
    }
    let session = match (agent, principal) {
        (None, Principal::Client(_)) => {
            return Err(ApiError::new(
                403,
                "forbidden",
                "a client token reaches one thread: use /mcp/<its agent>",
            ))
        }
        (None, Principal::Server) => None,
        (Some(_), Principal::Client(token)) => match header(SESSION_HEADER) {
            Some(s) if s != token.thread_id => {
                return Err(ApiError::not_found("no such MCP session"))
            }
            _ => Some(token.thread_id.clone()),
        },
        (Some(_), Principal::Server) => match header(SESSION_HEADER) {
            Some(s) if is_uuid(&s) => Some(s),
            Some(_) => return Err(ApiError::not_found("no such MCP session")),
            None => None,
        },
    };
    let body = read_body(req).await?;
    let (messages, batch) = match mcp::parse_body(&body) {
        Ok(parsed) => parsed,
        Err(answer) => return http_json(400, &answer),
    };
    let mut endpoint = Endpoint {
        env,
        principal,
        agent,
        session,
        origin: origin(req),
    };
    let mut answers = Vec::new();
    let mut created = None;
    for message in messages {
        match message {
            Incoming::Notification => {}
            Incoming::Invalid { id, message } => {
                answers.push(mcp::error_response(id, code::INVALID_REQUEST, &message))
            }
            Incoming::Request { id, call } => {
                if endpoint.agent.is_some()
                    && endpoint.session.is_none()
                    && !matches!(call, Call::Initialize { .. } | Call::Ping)
                {
                    // The transport's rule: a stateful server refuses calls outside a session.
                    return Err(ApiError::invalid(
                        "no Mcp-Session-Id: send initialize first, then its session id",
                    ));
                }
                let answer = endpoint.answer(id, call).await?;
                if let Some(thread) = answer.1 {
                    created = Some(thread);
                }
                answers.push(answer.0);
            }
        }
    }
    if answers.is_empty() {
        return Ok(Response::empty()
            .map_err(|e| logged("could not answer", e))?
            .with_status(202));
    }
    let body = if batch {
        Value::Array(answers)
    } else {
        answers.swap_remove(0)
    };
    let response = http_json(200, &body)?;
    match created {
        Some(session) => {
            let headers = Headers::new();
            let _ = headers.set("content-type", "application/json");
            let _ = headers.set(SESSION_HEADER, &session);
            Ok(response.with_headers(headers))
        }
        None => Ok(response),
    }
}

fn http_json(status: u16, body: &Value) -> Result<Response, ApiError> {
    Ok(Response::from_json(body)
        .map_err(|e| logged("could not answer", e))?
        .with_status(status))
}

impl Endpoint<'_> {
    /// One request's answer, and the session it created (`initialize` on `/mcp/:agent`).
    async fn answer(&mut self, id: Value, call: Call) -> Result<(Value, Option<String>), ApiError> {
        let ok = |result: Value| Ok((mcp::result_response(id.clone(), result), None));
        let fail =
            |code: i64, message: &str| Ok((mcp::error_response(id.clone(), code, message), None));
        match call {
            Call::Initialize { protocol_version } => {
                let result = mcp::initialize_result(&protocol_version, VERSION, self.agent);
                let created = match (self.agent, &self.session) {
                    (Some(agent), None) => {
                        let thread = self.new_thread(agent).await?;
                        self.session = Some(thread.clone());
                        Some(thread)
                    }
                    // A token's session is its thread: it must be a conversation with this
                    // agent, and the token must still be good (the thread checks both).
                    (Some(agent), Some(thread)) if *self.principal != Principal::Server => {
                        self.check_token_thread(agent, thread).await?;
                        None
                    }
                    _ => None,
                };
                Ok((mcp::result_response(id, result), created))
            }
            Call::Ping => ok(json!({})),
            Call::ListTools => ok(json!({ "tools": self.tools().await? })),
            Call::CallTool { name, arguments } => match self.call(&name, arguments).await {
                Ok(result) => ok(result),
                Err(CallError::Unknown) => {
                    fail(code::INVALID_PARAMS, &format!("Unknown tool: {name}"))
                }
                Err(CallError::Params(why)) => fail(code::INVALID_PARAMS, &why),
                // A token revoked or expired since: the transport's status, as for any request.
                Err(CallError::Api(e)) if matches!(e.status, 401 | 403) => Err(e),
                Err(CallError::Api(e)) if e.status == 404 && self.session.is_some() => {
                    // The session's thread is gone (deleted): the transport's 404 makes the
                    // client start a new session.
                    Err(e)
                }
                Err(CallError::Api(e)) => ok(mcp::error_result(&e.message)),
            },
            Call::Unknown(method) => fail(
                code::METHOD_NOT_FOUND,
                &format!("no method {method:?} on this server (tools only)"),
            ),
            Call::BadParams(why) => fail(code::INVALID_PARAMS, &why),
        }
    }

    /// The token's thread must be a conversation with `agent` (404 otherwise, at
    /// `initialize`, before any call could loop on a session that is not there).
    async fn check_token_thread(&self, agent: &str, thread: &str) -> Result<(), ApiError> {
        let internal = internal_request(Method::Get, "/op/", thread, None)?;
        set_principal(&internal, self.principal)?;
        let mut answer = send_to(self.env, thread, internal).await?;
        let status = answer.status_code();
        let summary: Value = answer
            .json()
            .await
            .map_err(|e| logged("the thread's answer did not read", e))?;
        if status != 200 {
            let message = summary["error"]["message"].as_str().unwrap_or("refused");
            return Err(ApiError::new(status, "thread_error", message));
        }
        if summary["agent_id"].as_str() != Some(agent) {
            return Err(ApiError::not_found(format!(
                "this token's thread is not a conversation with the agent {agent:?}"
            )));
        }
        Ok(())
    }

    async fn new_thread(&self, agent: &str) -> Result<String, ApiError> {
        let thread_id = new_id();
        let create = CreateThread {
            agent_id: agent.to_owned(),
            tags: vec!["mcp".into()],
            token: None,
        };
        let body = serde_json::to_vec(&create).map_err(|e| logged("bad create", e))?;
        let internal = internal_request(Method::Post, "/create", &thread_id, Some(body))?;
        if let Some(origin) = &self.origin {
            let _ = internal.headers().set("x-edgent-origin", origin);
        }
        let mut created = send_to(self.env, &thread_id, internal).await?;
        let status = created.status_code();
        if status == 201 {
            return Ok(thread_id);
        }
        // The object checks the agent: its refusal (404 for an agent that does not exist, 500
        // when the configuration cannot be read) is the caller's answer.
        let answer: Value = created.json().await.unwrap_or_default();
        let message = answer["error"]["message"].as_str();
        Err(match status {
            404 => ApiError::not_found(message.unwrap_or("no such agent")),
            _ => ApiError::new(
                status,
                if status >= 500 {
                    "internal"
                } else {
                    "thread_error"
                },
                message.unwrap_or("could not create the thread"),
            ),
        })
    }

    /// Every tool this endpoint offers the caller.
    async fn tools(&self) -> Result<Vec<Value>, ApiError> {
        let db = D1(self.env.clone());
        let mut tools = Vec::new();
        let agents: Vec<Value> = match self.agent {
            Some(agent) => match admin::get(&db, Kind::Agent, agent).await {
                Ok((_, def)) => vec![def],
                Err(e) if e.status == 404 => Vec::new(),
                Err(e) => return Err(e),
            },
            None => admin::list(&db, Kind::Agent).await?.1["agents"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
        };
        for def in &agents {
            let name = def["id"].as_str().unwrap_or_default();
            let description = def["description"].as_str().unwrap_or_default();
            tools.push(mcp::ask_descriptor(name, description, self.agent.is_some()));
        }
        let registry = edgent::Catalog::installed_registry().map_err(|e| registry_error(&e))?;
        for spec in registry.all_specs() {
            if !self.offers(&spec.name) {
                continue;
            }
            // On `/mcp` a call names its thread (there is no session thread).
            let listing = match self.agent {
                Some(_) => Some(mcp::tool_descriptor(&spec)),
                None => mcp::tool_descriptor_in_thread(&spec),
            };
            tools.extend(listing);
        }
        Ok(tools)
    }

    /// Whether the registered tool `name` is offered to this caller: marked `mcp`, and
    /// `client_callable` too for a client token (the rule `queue_tool` applies).
    fn offers(&self, name: &str) -> bool {
        let Ok(registry) = edgent::Catalog::installed_registry() else {
            return false;
        };
        if registry.get(name).is_none() {
            return false;
        }
        let policy = policy_for(&registry, name, |k| {
            self.env.var(k).ok().map(|v| v.to_string())
        });
        policy.mcp && (*self.principal == Principal::Server || policy.client_callable)
    }

    async fn call(
        &self,
        name: &str,
        arguments: serde_json::Map<String, Value>,
    ) -> Result<Value, CallError> {
        match mcp::target(name) {
            Target::Ask(agent) => {
                if self.agent.is_some_and(|own| own != agent) {
                    return Err(CallError::Unknown);
                }
                let (message, thread) = mcp::ask_arguments(&arguments, self.agent.is_some())
                    .map_err(CallError::Params)?;
                let thread = match (self.agent, &self.session) {
                    (Some(_), Some(session)) => session.clone(),
                    (Some(_), None) => return Err(CallError::Unknown),
                    (None, _) => match thread {
                        Some(thread) if is_uuid(&thread) => thread,
                        Some(_) => {
                            return Err(CallError::Api(ApiError::not_found("thread not found")))
                        }
                        None => self.new_thread(agent).await.map_err(|e| {
                            if e.status == 404 {
                                CallError::Unknown
                            } else {
                                CallError::Api(e)
                            }
                        })?,
                    },
                };
                let body = json!({ "agent": agent, "message": message });
                self.forward("/mcp/ask", &thread, &body).await
            }
            Target::Tool(tool) if !self.offers(tool) => Err(CallError::Unknown),
            Target::Tool(tool) => {
                let (thread, arguments) = match (self.agent, self.session.as_deref()) {
                    (Some(_), Some(session)) => (session.to_owned(), arguments),
                    (Some(_), None) => return Err(CallError::Unknown),
                    // On `/mcp` the call names the thread it runs in.
                    (None, _) => {
                        let (thread, own) =
                            mcp::thread_of_call(arguments).map_err(CallError::Params)?;
                        if !is_uuid(&thread) {
                            return Err(CallError::Api(ApiError::not_found("thread not found")));
                        }
                        (thread, own)
                    }
                };
                let body = json!({ "name": tool, "arguments": arguments });
                self.forward("/mcp/tool", &thread, &body).await
            }
        }
    }

    async fn forward(&self, path: &str, thread: &str, body: &Value) -> Result<Value, CallError> {
        let bytes = serde_json::to_vec(body).map_err(|e| CallError::Api(logged("bad call", e)))?;
        let internal = internal_request(Method::Post, path, thread, Some(bytes))?;
        set_principal(&internal, self.principal)?;
        let mut answer = send_to(self.env, thread, internal).await?;
        let status = answer.status_code();
        let value: Value = answer
            .json()
            .await
            .map_err(|e| CallError::Api(logged("the thread's answer did not read", e)))?;
        if status == 200 {
            return Ok(value);
        }
        let message = value["error"]["message"]
            .as_str()
            .unwrap_or("the call failed")
            .to_owned();
        Err(CallError::Api(ApiError::new(
            status,
            "thread_error",
            message,
        )))
    }
}

/// Why a `tools/call` got no tool result.
enum CallError {
    /// No such tool here (a JSON-RPC error, as MCP asks).
    Unknown,
    /// Arguments of the wrong shape.
    Params(String),
    /// The thread refused or failed: a tool result with `isError` (a 404 session: HTTP 404).
    Api(ApiError),
}

impl From<ApiError> for CallError {
    fn from(e: ApiError) -> Self {
        CallError::Api(e)
    }
}
