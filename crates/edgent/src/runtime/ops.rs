//! What a thread object is asked to do: create the thread, apply a client operation (whichever
//! transport it came by), deliver a webhook. Each starts the work it stored.

use std::rc::Rc;

use serde_json::{json, Value};

use super::ThreadRuntime;
use crate::api::mcp::inspect::McpServerList;
use crate::api::ops::ThreadOp;
use crate::api::{ApiError, CreateThread};
use crate::engine::durable::WebhookRefusal;
use crate::engine::store::Side;
use crate::engine::thread::{ParentLink, ThreadError};
use crate::tool::policy::policy_for;

impl ThreadRuntime {
    /// Creates the thread `thread_id` (201 with its summary). `parent` is set only by a
    /// parent thread's agent tool (with the child's nesting); `origin` is where clients reach
    /// the host (webhook URLs).
    pub async fn create(
        &self,
        thread_id: &str,
        create: &CreateThread,
        parent: Option<ParentLink<'_>>,
        origin: Option<&str>,
    ) -> Result<Value, ApiError> {
        // A parent re-sends its child's creation to resume it (the call was retried): the
        // child's 409 needs no configuration read, and must not fail while D1 does.
        if parent.is_some() && self.with_thread(|_| Ok(())).is_ok() {
            return Err(self.thread_error(&ThreadError::AlreadyExists));
        }
        // The agent is checked here and nowhere before: in production the router and this
        // object usually run in different isolates, so a check in the router was a second
        // configuration read (a D1 round trip) on the way to a new thread's first frame.
        // Nothing is written for an agent that does not exist.
        let exists = self
            .platform
            .agent_exists(&create.agent_id)
            .await
            .map_err(|e| self.logged("agent configuration is unavailable", e))?;
        if !exists {
            return Err(ApiError::not_found(format!(
                "agent {:?} does not exist",
                create.agent_id
            )));
        }
        if create.token.is_some() {
            let secret = self.platform.secret(crate::api::access::TOKEN_SECRET);
            crate::api::access::signing_ready(secret.as_deref())?;
        }
        // The first message may need the agent's hooks before any turn has loaded them (the
        // check above left a configuration that resolves in the cache).
        let config = self
            .platform
            .load_agent(&create.agent_id, Side::A)
            .await
            .ok()
            .and_then(Result::ok);
        let summary = self.with_opened(true, |t| {
            let summary = t.create(self.now(), thread_id, &create.agent_id, &create.tags)?;
            t.link(parent, origin)?;
            if let Some(c) = &config {
                t.set_hook_config(&c.prompt.name, c.hooks())?;
            }
            Ok(summary)
        })?;
        self.index.created(&summary, parent);
        self.schedule_index_write();
        let mut answer = json!({
            "thread_id": summary.thread_id,
            "agent_id": summary.agent_id,
            "created_at": summary.created_at,
            "tags": summary.tags,
        });
        if let Some(request) = &create.token {
            answer["token"] = self.mint_token(request)?;
        }
        Ok(answer)
    }

    /// Applies one client operation, whichever transport it came by: the one place each
    /// operation is carried out, so HTTP and rpc answer alike.
    pub async fn apply(self: &Rc<Self>, op: ThreadOp) -> Result<Value, ApiError> {
        if let Some(side) = op.forced_side() {
            self.check_side(side).await?;
        }
        let starts_work = op.starts_work();
        let answer = self.carry_out(op)?;
        if starts_work {
            self.start_work().await;
        }
        Ok(answer)
    }

    /// The synchronous part of [`ThreadRuntime::apply`]: the operation itself. Kept out of the
    /// async function (and not inlined into it) so its state machine holds only the awaits:
    /// every arm inlined there was Worker code size for nothing. A message, the operation of
    /// nearly every turn, is carried out apart from the others: the wasm engine compiles a
    /// function when it first runs, and the others together are most of this code.
    #[inline(never)]
    fn carry_out(&self, op: ThreadOp) -> Result<Value, ApiError> {
        match op {
            ThreadOp::SendMessage(post) => self.send_message(&post.content),
            op => self.carry_out_other(op),
        }
    }

    /// `send_message`: the message is stored and handed to the turn that follows. Not inlined:
    /// one copy, whichever of the two callers reaches it.
    #[inline(never)]
    fn send_message(&self, content: &str) -> Result<Value, ApiError> {
        let now = self.now();
        let message = self.with_thread(|t| {
            let message = t.post_user_message(now, content)?;
            self.hand_row_to_turn(t);
            Ok(message)
        })?;
        Ok(json!({ "message_id": message.id }))
    }

    /// Every operation but a message (see [`ThreadRuntime::carry_out`]).
    #[inline(never)]
    fn carry_out_other(&self, op: ThreadOp) -> Result<Value, ApiError> {
        let now = self.now();
        Ok(match op {
            ThreadOp::Summary => self.with_thread(|t| Ok(json!(t.summary()?)))?,
            ThreadOp::SendMessage(post) => return self.send_message(&post.content),
            ThreadOp::InjectMessage(inject) => {
                let message = self.with_thread(|t| t.inject_message(now, inject, 0))?;
                json!({ "message": message })
            }
            ThreadOp::QueueTool(p) => {
                let registry = self.platform.registry();
                let call_id = self.with_thread(|t| {
                    t.queue_tool_with_bindings(now, registry, &p.name, p.args, p.bindings.as_ref())
                })?;
                json!({ "tool_call_id": call_id })
            }
            ThreadOp::GetMessages(q) => json!(self.with_thread(|t| t.messages_query(&q))?),
            ThreadOp::GetToolCalls(q) => json!(self.with_thread(|t| {
                t.summary()?;
                t.tool_call_page(q.limit, q.offset, q.order)
            })?),
            ThreadOp::GetLogs(q) => json!(self.with_thread(|t| {
                t.summary()?;
                t.request_log_page(q.limit, q.offset, q.order)
            })?),
            ThreadOp::ToolStatuses => self.tool_statuses()?,
            ThreadOp::McpServers => {
                json!(McpServerList::from_rows(
                    self.with_thread(|t| t.mcp_servers())?
                ))
            }
            ThreadOp::DecideApproval(p) => {
                self.with_thread(|t| {
                    t.decide_approval(now, &p.tool_call_id, p.approved, p.reason.as_deref())
                })?;
                json!({ "tool_call_id": p.tool_call_id, "approved": p.approved })
            }
            ThreadOp::ForceTurn(p) => {
                self.with_thread(|t| t.force_turn(now, p.side))?;
                json!({ "side": p.side })
            }
            ThreadOp::Stop => {
                self.stop_requested.set(true);
                self.with_thread(|t| t.stop(now, "user"))?;
                json!({ "ok": true })
            }
            ThreadOp::Regenerate => {
                self.with_thread(|t| t.regenerate(now))?;
                json!({ "ok": true })
            }
            ThreadOp::ListSchedules { ended } => {
                json!({ "schedules": self.with_thread(|t| t.schedules(ended))? })
            }
            ThreadOp::CreateSchedule(spec) => {
                let registry = self.platform.registry();
                let schedule =
                    self.with_thread(|t| t.create_schedule(now, &spec, registry, "server"))?;
                json!({ "schedule": schedule })
            }
            ThreadOp::CancelSchedule { schedule_id } => {
                json!({ "schedule": self.with_thread(|t| t.cancel_schedule(now, &schedule_id))? })
            }
            ThreadOp::MintToken(request) => self.mint_token(&request)?,
            ThreadOp::RevokeTokens => self.revoke_tokens()?,
            // Only a socket's driver can answer it (it sends the frames to that socket).
            ThreadOp::Resume { .. } => {
                return Err(ApiError::invalid(
                    "resume is answered on a socket: send it as an rpc, or open the stream \
                     with ?after=<seq>",
                ))
            }
        })
    }

    /// A `force_turn` may only name a side the thread's agent has.
    async fn check_side(&self, side: Side) -> Result<(), ApiError> {
        let agent_id = self.with_thread(|t| Ok(t.summary()?.agent_id))?;
        let has_side = self
            .platform
            .agent_has_side(&agent_id, side)
            .await
            .map_err(|e| self.logged("could not read the agent", e))?;
        if has_side {
            Ok(())
        } else {
            Err(ApiError::invalid(format!(
                "agent {agent_id:?} has no side {} configured",
                side.as_str()
            )))
        }
    }

    /// Each tool's status in this thread: `busy` (a call is running or parked), `rate_limited`
    /// (its window is full), `error` (its last call failed) or `available`.
    fn tool_statuses(&self) -> Result<Value, ApiError> {
        let platform = &*self.platform;
        let registry = platform.registry();
        let statuses = self.with_thread(|t| {
            let mut out = Vec::new();
            for name in registry.names() {
                let policy = policy_for(registry, name, |k| platform.var(k));
                let status = t.tool_status(name, &policy, self.now())?;
                out.push(json!({ "name": name, "status": status }));
            }
            Ok(out)
        })?;
        Ok(json!({ "tools": statuses }))
    }

    /// A POST to a webhook URL: wrong tokens get 404, a second delivery or a finished wait
    /// 409, a body that is not JSON 400 (after the token check); nothing changes on refusal.
    pub async fn webhook(self: &Rc<Self>, token: &str, body: &[u8]) -> Result<Value, ApiError> {
        let not_found = || ApiError::not_found("no such webhook");
        let thread = self
            .open(self.platform.sql(), false)
            .map_err(|_| not_found())?;
        let outcome = thread
            .deliver_webhook(token, body, self.now())
            .map_err(|e| self.logged("webhook storage error", e))?;
        match outcome {
            Ok(call_id) => {
                self.start_work().await;
                Ok(json!({ "ok": true, "tool_call_id": call_id }))
            }
            Err(WebhookRefusal::Unknown) => Err(not_found()),
            Err(WebhookRefusal::Closed(why)) => Err(ApiError::new(409, "webhook_closed", why)),
            Err(WebhookRefusal::NotJson(why)) => Err(ApiError::new(400, "invalid_json", why)),
        }
    }
}
