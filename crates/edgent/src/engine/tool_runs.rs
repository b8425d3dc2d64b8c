//! The tool-call lifecycle as engine inputs and outputs: a due call goes in
//! ([`Thread::handle_due_call`]), the engine answers with what the driver must do
//! ([`Admission`]): run it, ask the deployment's shared rate limiter first, or nothing (the
//! engine parked or finished it). The limiter's answer goes back in
//! ([`Thread::handle_limiter_answer`]), and so does a run's outcome
//! ([`Thread::handle_tool_outcome`]), which the engine settles under the tool's policy into a
//! result, a retry at a wake time or a parked workflow.
//!
//! The driver only performs: it looks the policy up, runs the tool under `policy.timeout`,
//! talks to the shared counter, and passes `now` and a random `jitter` in. Every decision and
//! every state change is here, stored before the next input, so a crash between any two calls
//! resumes from what SQLite says (`next_action` finds the call again).

use serde_json::{json, Map, Value};

use crate::engine::durable::{self, CallStatus, Gate, Ran, Settle, Suspension, Window};
use crate::engine::store::StoredToolCall;
use crate::engine::thread::{Thread, ThreadError, ToolIndex};
use crate::values::tool_result::CallToolResult;
use crate::values::{LimitScope, ToolPolicy};

/// A call the engine cleared to run: the driver runs the tool named by `call` (with its stored
/// bindings) under `policy.timeout` and hands the outcome to [`Thread::handle_tool_outcome`].
#[derive(Debug, Clone)]
pub struct ToolRun {
    /// The call as started (attempts and deadline updated).
    pub call: StoredToolCall,
    /// The policy it runs under (the tool's, with the operator's overrides).
    pub policy: ToolPolicy,
}

/// What the driver must do with a due call.
#[derive(Debug, Clone)]
pub enum Admission {
    /// Run it now.
    Run(ToolRun),
    /// Ask the deployment-wide counter for the tool first (a new attempt of a tool limited
    /// `per_deployment`), then call [`Thread::handle_limiter_answer`].
    AskLimiter {
        /// The call waiting for the answer.
        call: StoredToolCall,
        /// Its policy.
        policy: ToolPolicy,
        /// The limit to ask for.
        per_minute: u32,
    },
    /// Nothing to run: the engine parked the call or stored its result (its frames are
    /// queued), or the call is no longer pending.
    Settled,
}

impl Thread<'_> {
    /// A call that [`next_action`](Thread::next_action) found due. `prompt_bindings` are the
    /// running prompt's `tool_bindings` for this tool: on the call's first start they are
    /// merged with the caller's (the prompt's win key by key: a caller adds keys, never
    /// replaces the operator's) and fixed on the call, so every run and the result cache see
    /// the same runtime context. A call that needs a person's approval is checked against the
    /// tool's arguments first (`tools`): one that could never run ends with the same
    /// `invalid arguments` result its run would give, and nobody is asked to approve it.
    pub fn handle_due_call(
        &mut self,
        now: i64,
        mut call: StoredToolCall,
        policy: ToolPolicy,
        prompt_bindings: Option<&Value>,
        tools: &dyn ToolIndex,
    ) -> Result<Admission, ThreadError> {
        if policy.needs_approval && call.approval.is_none() {
            if let Some(refusal) = invalid_arguments(tools, &call) {
                self.finish_tool(now, &call, &refusal)?;
                return Ok(Admission::Settled);
            }
        }
        if call.attempts == 0 {
            let effective = merged_bindings(&call, prompt_bindings);
            if !effective.is_empty() {
                let value = Value::Object(effective);
                // A failure here only loses the prompt's defaults for this call's runs.
                let _ = self.store().set_tool_call_bindings(&call.call.id, &value);
                call.bindings = Some(value.to_string());
            }
        }
        let gate = durable::gate(self.store(), &call, &policy, now)?;
        if let Gate::Run { version, .. } = gate {
            // Fixed on the call when it starts; the limiter's round trip keeps it.
            call.version = Some(version);
        }
        if let (
            Gate::Run {
                new_attempt: true, ..
            },
            Some(limit),
        ) = (&gate, policy.rate_limit)
        {
            if limit.scope == LimitScope::Deployment {
                return Ok(Admission::AskLimiter {
                    call,
                    policy,
                    per_minute: limit.per_minute,
                });
            }
        }
        self.apply_gate(now, call, policy, gate)
    }

    /// The deployment counter's answer for a call that [`Admission::AskLimiter`] asked about;
    /// `None` when the counter could not be reached (the thread's own window still applies).
    /// The answer is a round trip: a stop may have cancelled the call meanwhile, and a
    /// finished call must never run again.
    pub fn handle_limiter_answer(
        &mut self,
        now: i64,
        call: StoredToolCall,
        policy: ToolPolicy,
        window: Option<Window>,
    ) -> Result<Admission, ThreadError> {
        let still_pending = self
            .store()
            .tool_call(&call.call.id)?
            .is_some_and(|c| c.status == call.status);
        if !still_pending {
            return Ok(Admission::Settled);
        }
        let gate = durable::deployment_gate(&policy, window, now).unwrap_or(Gate::Run {
            new_attempt: true,
            version: call.version.unwrap_or(policy.version),
        });
        self.apply_gate(now, call, policy, gate)
    }

    /// How one run ended. The engine settles it under the policy (`jitter` is a random number
    /// in 0..1 for the retry backoff): a result (cached when the tool caches results), a
    /// retry at a wake time, or a parked workflow; a stopped thread parks nothing, so a run
    /// that ends after a stop is cancelled instead.
    pub fn handle_tool_outcome(
        &mut self,
        now: i64,
        run: &ToolRun,
        ran: Ran,
        jitter: f64,
    ) -> Result<(), ThreadError> {
        let (call, policy) = (&run.call, &run.policy);
        let outcome = match &ran {
            Ran::TimedOut => "timeout",
            _ => "failed",
        };
        let mut settled = durable::settle(policy, call, call.attempts, ran, now, jitter);
        if !matches!(settled, Settle::Finish(_)) {
            if let Some(cancelled) = self.cancel_if_stopped()? {
                settled = Settle::Finish(cancelled);
            }
        }
        match settled {
            Settle::Finish(result) => {
                if policy.cache_for.is_some() && !result.is_error() {
                    // A cache that cannot be written costs a re-run later, nothing more.
                    let _ = self.store().cache_result(
                        &call.call.name,
                        &durable::cache_key(call),
                        &result,
                        now,
                    );
                }
                // The last open call closed, and nothing writes the row after it in this step:
                // the driver's next `step_wanted` takes the row the closing statement read.
                let (_, row) = self.close_call(now, call, &result)?;
                if let Some(row) = row {
                    self.set_row_hint(row);
                }
                Ok(())
            }
            Settle::Retry { wake_at, error } => {
                let parked = Suspension {
                    status: CallStatus::Retrying,
                    wake_at: Some(wake_at),
                    detail: json!({ "retry": call.attempts + 1, "of": policy.retry.max_attempts }),
                };
                self.suspend_tool(call, &parked, Some((now, outcome, &error)))
            }
            Settle::Suspend(s) => self.suspend_tool(call, &s, None),
        }
    }

    /// Carries out a gate's decision: start the call (fixing its deadline at the first start),
    /// park it, or store its result.
    fn apply_gate(
        &mut self,
        now: i64,
        mut call: StoredToolCall,
        policy: ToolPolicy,
        gate: Gate,
    ) -> Result<Admission, ThreadError> {
        match gate {
            Gate::Run {
                new_attempt,
                version,
            } => {
                call.version = Some(version);
                if let (Some(limit), None) = (policy.deadline, call.deadline_at) {
                    let at =
                        now.saturating_add(i64::try_from(limit.as_millis()).unwrap_or(i64::MAX));
                    self.store().set_deadline(&call.call.id, at)?;
                    call.deadline_at = Some(at);
                }
                self.start_tool(now, &call, new_attempt)?;
                call.attempts += i64::from(new_attempt);
                Ok(Admission::Run(ToolRun { call, policy }))
            }
            Gate::Suspend(s) => {
                self.park_unstarted(&call, &s)?;
                Ok(Admission::Settled)
            }
            Gate::Finish(result) => {
                self.finish_tool(now, &call, &result)?;
                Ok(Admission::Settled)
            }
        }
    }
}

/// The result a call's run would give for arguments its tool refuses (the same text as
/// `Tool::attempt`'s), or `None` when they pass or the tool is not a registered one (an MCP
/// server checks its own).
fn invalid_arguments(tools: &dyn ToolIndex, call: &StoredToolCall) -> Option<CallToolResult> {
    let parsed = crate::values::validate::parse_json(&call.call.arguments);
    let why = match parsed {
        Ok(value) => tools.check_arguments(&call.call.name, value)?.err()?,
        Err(why) => why,
    };
    Some(CallToolResult::invalid_arguments(why))
}

/// A call's runtime bindings: the prompt's for this tool, overridden key by key by the
/// caller's (`queue_tool` with `bindings`).
fn merged_bindings(call: &StoredToolCall, prompt: Option<&Value>) -> Map<String, Value> {
    // The operator's keys win: a caller (a client's `queue_tool`, another tool) may add keys,
    // never replace the account or tenant the prompt fixed.
    let mut out = call.binding_map();
    if let Some(fixed) = prompt.and_then(Value::as_object) {
        out.extend(fixed.clone());
    }
    out
}
