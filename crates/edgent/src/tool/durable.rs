//! Workflow tools: recorded steps, durable sleeps and webhooks on [`FlowState`].
//!
//! A workflow is a handler that calls these. Each run starts the handler from the top; a step
//! recorded by an earlier run returns its stored value instead of running again, so completed
//! steps never repeat. When the handler reaches a sleep that has not elapsed (or a webhook
//! that has not arrived) the run ends there: the call is parked in SQLite with a wake time,
//! nothing stays in memory, and the thread's alarm runs it again later.
//!
//! The determinism rule: between steps, a workflow must make the same decisions on every run.
//! Anything that can change (the clock, random numbers, I/O, other tables) belongs inside a
//! step, whose recorded value is what later runs see. Step names must be unique within a call.

use std::cell::RefCell;
use std::collections::HashSet;
use std::future::Future;
use std::task::Poll;
use std::time::Duration;

use crate::values::limits::{
    truncated, MAX_CALL_NESTING, MAX_ERROR_TEXT_BYTES, MAX_SLEEP_MS, MAX_STEP_VALUE_BYTES,
    MAX_TOOL_RESULT_BYTES,
};
use crate::values::redact::redact_secrets;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

use super::{FlowState, ToolError};
use crate::engine::durable::{CallStatus, Ran, Suspension};
use crate::engine::store::Store;
use crate::values::ids::secret_token;
use crate::values::{StepKind, StepStatus, WebhookStatus};

/// What one run of a call has done that the runner must know: whether it parked, and the
/// step names it used (a name used twice in one run is a bug in the workflow).
#[derive(Debug, Default)]
pub struct RunState {
    suspension: RefCell<Option<Suspension>>,
    used: RefCell<HashSet<String>>,
    /// The step running now and how many tools it called through `call_tool`: a nested
    /// call's records are keyed by both, which replays identically on every run.
    step: RefCell<(String, u32)>,
    /// The values of the secrets this run read (`flow.secret`): removed from its result and
    /// error text before anything stores or sends them.
    secrets: RefCell<Vec<String>>,
    /// Schedules this run made (`flow.schedule`): the n-th gets the same id on every run of
    /// the call, so a call run again (after a crash, a workflow waking) makes none twice.
    schedules_made: std::cell::Cell<u32>,
    /// Output parts this run wrote (`flow.output()`): numbered from 0 on every run, so a part
    /// written again by a woken workflow has the number it had.
    output_parts: std::cell::Cell<u32>,
}

impl RunState {
    /// The number of the next output part this run writes.
    pub(crate) fn next_output_part(&self) -> u32 {
        let n = self.output_parts.get();
        self.output_parts.set(n + 1);
        n
    }

    /// The index of the next schedule this run makes.
    pub(crate) fn next_schedule(&self) -> u32 {
        let n = self.schedules_made.get();
        self.schedules_made.set(n + 1);
        n
    }

    pub(super) fn claim(&self, name: &str) -> Result<(), ToolError> {
        if name.trim().is_empty() {
            return Err(ToolError::fatal("a workflow step needs a name"));
        }
        if !self.used.borrow_mut().insert(name.to_owned()) {
            return Err(ToolError::fatal(format!(
                "the workflow used the step name {name:?} twice; give each step, sleep and webhook its own name (e.g. with a loop index)"
            )));
        }
        Ok(())
    }

    /// Remembers a secret's value read during this run.
    pub(crate) fn note_secret(&self, value: &str) {
        let mut secrets = self.secrets.borrow_mut();
        if !secrets.iter().any(|s| s == value) {
            secrets.push(value.to_owned());
        }
    }

    /// `text` without any secret this run read (see [`redact_secrets`]).
    fn redacted(&self, text: &str) -> String {
        redact_secrets(text, &self.secrets.borrow()).into_owned()
    }

    /// Parks the run. Two waits pending in one run (a hand-written `select` or `join` of
    /// sleeps and webhooks) park it until the earlier of them, and as `waiting` when either
    /// waits for a webhook (only a waiting call is woken by a delivery): neither wake-up is
    /// lost, and a wait reached again parks again. (`flow.race` also cancels the losers.)
    pub(crate) fn park(&self, suspension: Suspension) {
        let mut parked = self.suspension.borrow_mut();
        let merged = match parked.take() {
            None => suspension,
            Some(earlier) => either(earlier, suspension),
        };
        *parked = Some(merged);
    }

    fn take(&self) -> Option<Suspension> {
        self.suspension.borrow_mut().take()
    }
}

/// One suspension for two waits of a run: until the earlier wake time, `waiting` if either
/// waits for a webhook, with both details under `waits` (one when they wait for the same
/// thing: parallel steps of a TOML workflow parked by one rate limit).
fn either(a: Suspension, b: Suspension) -> Suspension {
    let wake_at = match (a.wake_at, b.wake_at) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    };
    if a.detail == b.detail && a.status == b.status {
        return Suspension { wake_at, ..a };
    }
    let status = if a.status == CallStatus::Waiting || b.status == CallStatus::Waiting {
        CallStatus::Waiting
    } else if a.wake_at == wake_at {
        a.status
    } else {
        b.status
    };
    let mut waits = match a.detail {
        // Already two or more waits (not a race's own list, which stays whole).
        Value::Object(mut o) if o.contains_key("waits") && !o.contains_key("race") => {
            match o.remove("waits") {
                Some(Value::Array(waits)) => waits,
                other => other.into_iter().collect(),
            }
        }
        detail => vec![detail],
    };
    waits.push(b.detail);
    Suspension {
        status,
        wake_at,
        detail: json!({ "waits": waits, "until": wake_at }),
    }
}

/// Polls a run until it finishes or parks. A parked run's future is dropped: everything it
/// needs to resume is in SQLite.
pub async fn run_until_suspended<F>(run: F, state: &RunState) -> Ran
where
    F: Future<Output = Result<super::CallToolResult, ToolError>>,
{
    let mut run = std::pin::pin!(run);
    std::future::poll_fn(|cx| match run.as_mut().poll(cx) {
        // A secret the run read never reaches the stored result, its error or a client; both
        // are bounded before anything stores them (a breach is the result, never a re-run).
        Poll::Ready(outcome) => Poll::Ready(Ran::Done(match outcome {
            Ok(result) => {
                let result = result.map_text(|t| state.redacted(t));
                if result.byte_len() > MAX_TOOL_RESULT_BYTES {
                    Ok(super::CallToolResult::error(format!(
                        "the tool's result was {} bytes, over the limit of \
                         {MAX_TOOL_RESULT_BYTES}; ask for less (a smaller page, fewer fields)",
                        result.byte_len()
                    )))
                } else {
                    Ok(result)
                }
            }
            Err(error) => Err(error
                .map_text(|t| truncated(&state.redacted(t), MAX_ERROR_TEXT_BYTES).into_owned())),
        })),
        Poll::Pending => match state.take() {
            Some(s) => Poll::Ready(Ran::Suspended(s)),
            None => Poll::Pending,
        },
    })
    .await
}

/// When a sleep of `duration` from `now` ends: no later than [`MAX_SLEEP_MS`] ahead (no
/// overflow, no wake in an unreachable future).
pub(super) fn wake_time(now: i64, duration: Duration) -> i64 {
    let ms = i64::try_from(duration.as_millis())
        .unwrap_or(i64::MAX)
        .min(MAX_SLEEP_MS);
    now.saturating_add(ms)
}

/// How a wait for a webhook ended.
#[derive(Debug, Clone, PartialEq)]
pub enum WebhookEvent {
    /// Someone POSTed this JSON body to the webhook's URL.
    Received(Value),
    /// The timeout passed first.
    TimedOut,
}

impl FlowState {
    pub(super) fn store(&self) -> Store<'_> {
        Store::new(self.host().sql())
    }

    pub(super) fn progress(&self, step: &str, kind: &str, status: &str, duration_ms: Option<i64>) {
        // Progress is a courtesy to clients; a failure to send it never fails the step.
        let _ = self.stream.emit(
            "tool_progress",
            &json!({
                "tool_call_id": self.tool_call_id,
                "step": step,
                "kind": kind,
                "status": status,
                "duration_ms": duration_ms,
            }),
        );
    }

    /// Runs `f` once for this call and records its value: a later run of the workflow (after
    /// a sleep, a webhook, a retry or a restart) gets the recorded value without running `f`.
    /// A failure is not recorded; the workflow fails with `step "name" failed: …` and its
    /// retry policy decides whether it runs again.
    pub async fn step<T, F, Fut>(&self, name: &str, f: F) -> Result<T, ToolError>
    where
        T: Serialize + DeserializeOwned,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, ToolError>>,
    {
        // Only the (de)serialisation and `f` depend on `T`: the bookkeeping lives in the plain
        // methods below, so each workflow's instance of `step` does not carry a copy of it.
        if let Some(recorded) = self.recorded_step(name)? {
            return serde_json::from_str(&recorded).map_err(|e| {
                ToolError::fatal(format!(
                    "step {name:?}: the recorded value no longer fits its type ({e}); did the workflow change?"
                ))
            });
        }
        let started = self.begin_recorded_step(name)?;
        match f().await {
            Ok(value) => {
                self.record_step(name, started, &serde_json::to_string(&value)?)?;
                Ok(value)
            }
            Err(e) => {
                self.record_failed_step(name, started)?;
                Err(e.context(format_args!("step {name:?} failed: ")))
            }
        }
    }

    /// [`FlowState::step`]: claims the name and returns the value an earlier run recorded.
    fn recorded_step(&self, name: &str) -> Result<Option<String>, ToolError> {
        self.run.claim(name)?;
        let done = self
            .store()
            .step(&self.tool_call_id, name)?
            .filter(|s| s.status == StepStatus::Done);
        Ok(done.map(|done| done.value.unwrap_or_else(|| "null".into())))
    }

    /// [`FlowState::step`]: records the step as running; returns when it started.
    fn begin_recorded_step(&self, name: &str) -> Result<i64, ToolError> {
        let started = self.host().now_ms();
        self.store().begin_step(
            &self.tool_call_id,
            name,
            StepKind::Step,
            StepStatus::Running,
            None,
            started,
        )?;
        self.progress(name, "step", "running", None);
        *self.run.step.borrow_mut() = (name.to_owned(), 0);
        Ok(started)
    }

    /// [`FlowState::step`]: records the value `f` returned (as JSON text).
    fn record_step(&self, name: &str, started: i64, json: &str) -> Result<(), ToolError> {
        let call = &self.tool_call_id;
        // Recorded without any secret this run read: a replay returns the value as
        // recorded, in a run that may never read the secret (so could not redact it).
        let text = self.run.redacted(json);
        let now = self.host().now_ms();
        if text.len() > MAX_STEP_VALUE_BYTES {
            // Not recordable: the workflow fails now instead of storing a row SQLite
            // refuses (and being re-run for it).
            self.store()
                .end_step(call, name, StepStatus::Failed, None, now)?;
            self.progress(name, "step", "failed", Some(now - started));
            return Err(ToolError::fatal(format!(
                "step {name:?} returned {} bytes, over the limit of {MAX_STEP_VALUE_BYTES} for a recorded value; return less (an id, a summary) and fetch the rest later",
                text.len()
            )));
        }
        self.store()
            .end_step(call, name, StepStatus::Done, Some(&text), now)?;
        self.progress(name, "step", "done", Some(now - started));
        Ok(())
    }

    /// [`FlowState::step`]: records that `f` failed.
    fn record_failed_step(&self, name: &str, started: i64) -> Result<(), ToolError> {
        let now = self.host().now_ms();
        self.store()
            .end_step(&self.tool_call_id, name, StepStatus::Failed, None, now)?;
        self.progress(name, "step", "failed", Some(now - started));
        Ok(())
    }

    /// Runs the registered tool `name` once with `args` (validated as if the model had sent
    /// them) and returns its result; a failure keeps its retry advice. The call counts against
    /// that tool's rate limits, runs under its timeout and appears as an attempt in the
    /// enclosing call's execution history (`nested`); the enclosing call owns retries. Meant for the inside
    /// of a [`FlowState::step`], which records the result so a later run does not repeat the
    /// call. The tool gets this call's flow and bindings; its own steps are recorded under
    /// `<call id>/<step name>/<n>` (the n-th call inside that step), apart from the caller's.
    pub async fn call_tool(
        &self,
        name: &str,
        args: Value,
    ) -> Result<super::CallToolResult, ToolError> {
        let registry = self.host().registry();
        let Some(tool) = registry.get(name) else {
            return Err(ToolError::fatal(format!(
                "no tool named {name:?} is registered"
            )));
        };
        if tool.policy().needs_approval {
            // Approval is given to a top-level call a client can see, never to a nested one.
            return Err(ToolError::fatal(format!(
                "tool {name:?} needs a person's approval, so a workflow cannot call it; let the model call it"
            )));
        }
        if self.call_nesting >= MAX_CALL_NESTING {
            // A workflow that calls itself (directly or through others) ends here instead of
            // recursing until the stack overflows (which would reset the whole instance).
            return Err(ToolError::fatal(format!(
                "tool {name:?} would run {} calls deep inside other tools (the limit is \
                 {MAX_CALL_NESTING}); does a workflow call itself?",
                self.call_nesting + 1
            )));
        }
        let mut flow = self.clone();
        flow.run = std::rc::Rc::default();
        flow.call_nesting = self.call_nesting + 1;
        // The secrets this run read may reach the nested call through its arguments: its
        // result, its error and the attempt log are cleaned of them too.
        for secret in self.run.secrets.borrow().iter() {
            flow.run.note_secret(secret);
        }
        // Its own record space: a nested workflow's step names cannot clash with ours. The
        // n-th nested call of a run gets the same id on every run (the determinism rule).
        let key = {
            let mut step = self.run.step.borrow_mut();
            step.1 += 1;
            format!("{}/{}/{}", self.tool_call_id, step.0, step.1)
        };
        flow.tool_call_id = key.clone();
        // Under the called tool's own rate limits and timeout, logged as an attempt.
        super::nested::run_nested(flow, tool, name, &args.to_string(), &key, Some(&self.run)).await
    }

    /// Sleeps durably: the first run records the wake time and parks the call; the thread's
    /// alarm runs the workflow again at that time, and this returns at once from then on.
    /// Costs nothing while it waits (no memory, no CPU; one alarm serves every sleeping call).
    pub async fn sleep(&self, name: &str, duration: Duration) -> Result<(), ToolError> {
        self.run.claim(name)?;
        let call = &self.tool_call_id;
        let now = self.host().now_ms();
        let wake_at = match self.store().step(call, name)? {
            Some(s) if s.status == StepStatus::Done => return Ok(()),
            Some(s) => s.wake_at.unwrap_or(now),
            None => {
                let wake_at = wake_time(now, duration);
                self.store().begin_step(
                    call,
                    name,
                    StepKind::Sleep,
                    StepStatus::Sleeping,
                    Some(wake_at),
                    now,
                )?;
                self.progress(name, "sleep", "sleeping", None);
                wake_at
            }
        };
        if now >= wake_at {
            self.store()
                .end_step(call, name, StepStatus::Done, None, now)?;
            self.progress(name, "sleep", "done", None);
            return Ok(());
        }
        self.run.park(Suspension {
            status: CallStatus::Sleeping,
            wake_at: Some(wake_at),
            detail: json!({ "sleep": name, "until": wake_at }),
        });
        // Never completes: the runner sees the parked run and drops this future.
        std::future::pending().await
    }

    /// The URL of webhook `name` of this call (created on first use; the same URL on every
    /// run). Hand it to the outside world, then [`FlowState::wait_for_webhook`] with the same
    /// name. `POST <url>` with a JSON body resumes the workflow; the URL carries a 256-bit
    /// random token and needs no API key.
    pub fn webhook_url(&self, name: &str) -> Result<String, ToolError> {
        let hook = self.webhook(name)?;
        Ok(self.webhook_address(&hook.token))
    }

    pub(super) fn webhook(
        &self,
        name: &str,
    ) -> Result<crate::engine::tool_records::WebhookRecord, ToolError> {
        if let Some(hook) = self.store().webhook_for(&self.tool_call_id, name)? {
            return Ok(hook);
        }
        let token = secret_token()
            .ok_or_else(|| ToolError::new("no secure random source for a webhook token"))?;
        Ok(self
            .store()
            .create_webhook(&self.tool_call_id, name, &token, self.host().now_ms())?)
    }

    pub(super) fn webhook_address(&self, token: &str) -> String {
        let base = self
            .var("PUBLIC_URL")
            .or_else(|| self.store().public_url().ok().flatten())
            .unwrap_or_default();
        format!(
            "{}/webhooks/{}/{token}",
            base.trim_end_matches('/'),
            self.thread_id
        )
    }

    /// Waits for a POST to webhook `name` (see [`FlowState::webhook_url`]) for at most
    /// `timeout` from the first time the workflow got here. The call parks (status
    /// `waiting`, its URL in the `tool` frame) until the body arrives or the time is up.
    pub async fn wait_for_webhook(
        &self,
        name: &str,
        timeout: Duration,
    ) -> Result<WebhookEvent, ToolError> {
        self.run.claim(name)?;
        let call = &self.tool_call_id;
        let now = self.host().now_ms();
        let hook = self.webhook(name)?;
        let deadline = match hook.deadline_at {
            Some(d) => d,
            None => {
                let ms = i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX / 2);
                let d = now.saturating_add(ms);
                self.store().set_webhook_deadline(&hook.token, d)?;
                self.store().begin_step(
                    call,
                    name,
                    StepKind::Webhook,
                    StepStatus::Waiting,
                    Some(d),
                    now,
                )?;
                self.progress(name, "webhook", "waiting", None);
                d
            }
        };
        match hook.status {
            WebhookStatus::Received => {
                let body = hook.body.as_deref().unwrap_or("null");
                let value = serde_json::from_str(body).unwrap_or(Value::Null);
                if self
                    .store()
                    .step(call, name)?
                    .is_some_and(|s| s.status != StepStatus::Done)
                {
                    self.store()
                        .end_step(call, name, StepStatus::Done, None, now)?;
                    self.progress(name, "webhook", "done", None);
                }
                return Ok(WebhookEvent::Received(value));
            }
            // Closed: a race that ended closed it (a workflow that changed from a race to a
            // plain wait under the same name): no body will come.
            WebhookStatus::TimedOut | WebhookStatus::Closed => {
                if self
                    .store()
                    .step(call, name)?
                    .is_some_and(|s| s.status == StepStatus::Waiting)
                {
                    self.store()
                        .end_step(call, name, StepStatus::TimedOut, None, now)?;
                }
                return Ok(WebhookEvent::TimedOut);
            }
            WebhookStatus::Open => {}
        }
        if now >= deadline {
            self.store()
                .end_webhook(&hook.token, WebhookStatus::TimedOut)?;
            self.store()
                .end_step(call, name, StepStatus::TimedOut, None, now)?;
            self.progress(name, "webhook", "timed_out", None);
            return Ok(WebhookEvent::TimedOut);
        }
        self.run.park(Suspension {
            status: CallStatus::Waiting,
            wake_at: Some(deadline),
            detail: json!({
                "webhook": name,
                "url": self.webhook_address(&hook.token),
                "until": deadline,
            }),
        });
        // Never completes: the runner sees the parked run and drops this future.
        std::future::pending().await
    }
}
