//! The thread object's side of MCP: a call the router forwards (`/mcp/ask`, `/mcp/tool`) is
//! stored as a user message or a queued tool call, like any client's, and its answer waits
//! on the frames the thread broadcasts ([`edgent::api::mcp::watch`]) until the outcome or
//! [`CALL_WAIT_MS`].

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use futures_channel::oneshot;
use futures_util::future::{select, Either};
use serde::Deserialize;
use serde_json::{Map, Value};

use edgent::api::access::Principal;
use edgent::api::mcp::watch::{AskWatch, CallWatch};
use edgent::api::mcp::CALL_WAIT_MS;
use edgent::api::ops::ThreadOp;
use edgent::api::{ApiError, PostMessage, QueueToolParams};
use edgent::runtime::ThreadRuntime;

use super::http::read_body;
use super::thread_object::principal_of;

/// What a call waits for.
enum Watch {
    Ask(AskWatch),
    Call(CallWatch),
}

impl Watch {
    fn on_frame(&mut self, frame: &Value) -> bool {
        match self {
            Watch::Ask(w) => w.on_frame(frame),
            Watch::Call(w) => w.on_frame(frame),
        }
    }

    fn result(&self, thread_id: &str) -> Value {
        match self {
            Watch::Ask(w) => w.result(thread_id),
            Watch::Call(w) => w.result(thread_id),
        }
    }
}

struct Open {
    watch: Rc<RefCell<Watch>>,
    done: oneshot::Sender<()>,
}

/// The MCP calls waiting in this object instance (fed by the platform with every broadcast
/// frame, like the AI SDK's answers).
#[derive(Default)]
pub(crate) struct McpCalls(RefCell<Vec<Open>>);

impl McpCalls {
    /// Feeds a broadcast frame (its JSON text); a call whose outcome arrived is woken.
    pub(crate) fn push(&self, text: &str) {
        let mut open = self.0.borrow_mut();
        if open.is_empty() {
            return;
        }
        let Ok(frame) = serde_json::from_str::<Value>(text) else {
            return;
        };
        // A call whose outcome arrived is dropped from the list: dropping its sender wakes
        // its waiter. One whose waiter is gone (the request was cancelled) goes too.
        open.retain(|call| !call.done.is_canceled() && !call.watch.borrow_mut().on_frame(&frame));
    }

    /// Wakes every waiting call (the thread was deleted): each answers with what it saw.
    pub(crate) fn end_all(&self) {
        self.0.borrow_mut().clear();
    }

    /// Starts watching: the receiver is woken (cancelled) when the outcome arrived or the
    /// calls were ended.
    fn watch(&self, watch: Watch) -> (Rc<RefCell<Watch>>, oneshot::Receiver<()>) {
        let watch = Rc::new(RefCell::new(watch));
        let (done, rx) = oneshot::channel();
        self.0.borrow_mut().push(Open {
            watch: watch.clone(),
            done,
        });
        (watch, rx)
    }
}

/// The body of `/mcp/ask`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AskBody {
    agent: String,
    message: String,
}

/// The body of `/mcp/tool`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolBody {
    name: String,
    #[serde(default)]
    arguments: Map<String, Value>,
}

fn parse<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| ApiError::invalid(format!("bad MCP call: {e}")))
}

/// A call over MCP the router forwards (internal routes: clients cannot reach them):
/// `/mcp/ask` or `/mcp/tool`; the answer is the MCP tool result.
pub(crate) async fn handle(
    rt: &Rc<ThreadRuntime>,
    calls: &McpCalls,
    req: &mut worker::Request,
    path: &str,
) -> Result<(u16, Value), ApiError> {
    let principal = principal_of(req)?;
    let body = read_body(req).await?;
    let result = if path == "/mcp/ask" {
        ask(rt, calls, &principal, &body).await?
    } else {
        let thread_id = req
            .headers()
            .get("x-edgent-thread-id")
            .ok()
            .flatten()
            .unwrap_or_default();
        call_tool(rt, calls, &principal, &thread_id, &body).await?
    };
    Ok((200, result))
}

/// `ask_<agent>` in this thread: the thread must be the agent's; the message is stored as the
/// caller's (its token's scope is checked), and the answer is the turn's last reply.
async fn ask(
    rt: &Rc<ThreadRuntime>,
    calls: &McpCalls,
    principal: &Principal,
    body: &[u8],
) -> Result<Value, ApiError> {
    let ask: AskBody = parse(body)?;
    let summary = rt.apply_as(principal, ThreadOp::Summary).await?;
    let thread_id = summary["thread_id"].as_str().unwrap_or_default().to_owned();
    if summary["agent_id"].as_str() != Some(ask.agent.as_str()) {
        return Err(ApiError::not_found(format!(
            "thread {thread_id} is not a conversation with the agent {:?}",
            ask.agent
        )));
    }
    let mut post = Map::new();
    post.insert("content".into(), Value::String(ask.message.clone()));
    let op = ThreadOp::SendMessage(PostMessage::from_object(&post)?);
    // Opened before the message is stored (storing it awaits the alarm, and a loop already
    // driving this thread may run meanwhile): it follows the turn from the message's frame.
    // A refused message drops the receiver, and the watch goes at the next frame.
    let watching = calls.watch(Watch::Ask(AskWatch::after_message(&ask.message)));
    rt.apply_as(principal, op).await?;
    Ok(wait(watching, &thread_id).await)
}

/// A registered tool's call, queued in this thread like `queue_tool` (the caller checked that
/// the tool is offered over MCP; a token's scope is checked here).
async fn call_tool(
    rt: &Rc<ThreadRuntime>,
    calls: &McpCalls,
    principal: &Principal,
    thread_id: &str,
    body: &[u8],
) -> Result<Value, ApiError> {
    let call: ToolBody = parse(body)?;
    let op = ThreadOp::QueueTool(QueueToolParams {
        name: call.name,
        args: Value::Object(call.arguments),
        bindings: None,
    });
    // Opened before the call is stored, for the same reason; it keeps the frames it sees until
    // it knows the call's id.
    let watching = calls.watch(Watch::Call(CallWatch::before_its_id()));
    let queued = rt.apply_as(principal, op).await?;
    let call_id = queued["tool_call_id"].as_str().unwrap_or_default();
    let done = match &mut *watching.0.borrow_mut() {
        Watch::Call(w) => w.set_call_id(call_id),
        Watch::Ask(_) => false,
    };
    if done {
        let result = watching.0.borrow().result(thread_id);
        return Ok(result);
    }
    Ok(wait(watching, thread_id).await)
}

async fn wait(
    (watch, done): (Rc<RefCell<Watch>>, oneshot::Receiver<()>),
    thread_id: &str,
) -> Value {
    let timeout = worker::Delay::from(Duration::from_millis(CALL_WAIT_MS.unsigned_abs()));
    // Either way the watch holds what the thread did so far.
    let (Either::Left(_) | Either::Right(_)) = select(done, timeout).await;
    let result = watch.borrow().result(thread_id);
    result
}
