//! Running tool calls durably: each due call passes its gate (approval, deadline, cache, rate
//! limits), runs with its timeout (several at once for a parallel reply), and its outcome is
//! settled under the tool's policy into a result, a retry or a parked workflow. Every state
//! change is stored before anything else happens, so a kill at any point resumes correctly.

use std::rc::Rc;

use futures_util::future::join_all;
use serde_json::{json, Map, Value};

use super::ThreadObject;
use crate::host::{now, ShellHost};
use crate::model::with_timeout;
use crate::policy::policy_for;
use edgent::core::config::{AgentConfig, Delegate};
use edgent::core::durable::{self, CallStatus, Gate, Ran, Settle, Suspension};
use edgent::core::ids::random_unit;
use edgent::core::store::{CallOrigin, StoredToolCall, ThreadSummary};
use edgent::core::thread::Thread;
use edgent::tool::{run_until_suspended, CallToolResult, FlowState, LimitScope, ToolPolicy};

impl ThreadObject {
    /// Runs calls of one reply (concurrently when there are several) and settles them in
    /// call order.
    pub(super) async fn run_tools(
        &self,
        thread: &mut Thread<'_>,
        host: &Rc<ShellHost>,
        config: &Rc<AgentConfig>,
        summary: &ThreadSummary,
        calls: Vec<StoredToolCall>,
    ) {
        let mut runs: Vec<(StoredToolCall, ToolPolicy)> = Vec::new();
        for mut call in calls {
            let policy = policy_for(&host.env, &host.registry, &call.call.name);
            if call.attempts == 0 {
                // Fixed at the first start: the prompt's bindings merged with the caller's, so
                // every run (and the result cache) sees the same runtime context.
                let effective = bindings(&call, config);
                if !effective.is_empty() {
                    let value = Value::Object(effective);
                    let _ = thread.store().set_tool_call_bindings(&call.call.id, &value);
                    call.bindings = Some(value.to_string());
                }
            }
            let gate = match durable::gate(thread.store(), &call, &policy, now()) {
                Ok(Gate::Run { new_attempt }) => {
                    let gate = self
                        .deployment_gate(&call, &policy, new_attempt)
                        .await
                        .unwrap_or(Gate::Run { new_attempt });
                    // The shared counter is a round trip: a stop may have cancelled the call
                    // meanwhile, and a finished call must not run (or get a second result).
                    let still_pending = thread
                        .store()
                        .tool_call(&call.call.id)
                        .ok()
                        .flatten()
                        .is_some_and(|c| c.status == call.status);
                    if !still_pending {
                        continue;
                    }
                    gate
                }
                Ok(other) => other,
                Err(e) => {
                    worker::console_error!("tool gate: {e}");
                    continue;
                }
            };
            let stored = match gate {
                Gate::Run { new_attempt } => {
                    if let (Some(limit), None) = (policy.deadline, call.deadline_at) {
                        let at = now().saturating_add(limit.as_millis() as i64);
                        let _ = thread.store().set_deadline(&call.call.id, at);
                        call.deadline_at = Some(at);
                    }
                    let started = thread.start_tool(now(), &call, new_attempt);
                    call.attempts += i64::from(new_attempt);
                    runs.push((call, policy));
                    started
                }
                Gate::Suspend(s) => thread.suspend_tool(&call, &s, None),
                Gate::Finish(result) => thread.finish_tool(now(), &call, &result).map(drop),
            };
            if let Err(e) = stored {
                worker::console_error!("could not store a tool call's state: {e}");
            }
        }
        self.flush(thread);
        if runs.is_empty() {
            return;
        }
        let ends = join_all(
            runs.iter()
                .map(|(call, policy)| self.execute_tool(host, config, summary, call, policy)),
        )
        .await;
        for ((call, policy), ran) in runs.iter().zip(ends) {
            let outcome = match &ran {
                Ran::TimedOut => "timeout",
                _ => "failed",
            };
            let mut settled =
                durable::settle(policy, call, call.attempts, ran, now(), random_unit());
            if !matches!(settled, Settle::Finish(_)) {
                if let Ok(Some(cancelled)) = thread.cancel_if_stopped() {
                    settled = Settle::Finish(cancelled);
                }
            }
            let stored = match settled {
                Settle::Finish(result) => {
                    if policy.cache_for.is_some() && !result.is_error() {
                        let _ = thread.store().cache_result(
                            &call.call.name,
                            &durable::cache_key(call),
                            &result,
                            now(),
                        );
                    }
                    thread.finish_tool(now(), call, &result).map(drop)
                }
                Settle::Retry { wake_at, error } => {
                    let parked = Suspension {
                        status: CallStatus::Retrying,
                        wake_at: Some(wake_at),
                        detail: json!({ "retry": call.attempts + 1, "of": policy.retry.max_attempts }),
                    };
                    thread.suspend_tool(call, &parked, Some((now(), outcome, &error)))
                }
                Settle::Suspend(s) => thread.suspend_tool(call, &s, None),
            };
            if let Err(e) = stored {
                worker::console_error!("could not store a tool outcome: {e}");
            }
        }
        self.flush(thread);
    }

    /// Asks the deployment-wide counter when the tool's limit is per deployment; `None`
    /// means no objection (or no counter reachable: the thread's own window still applies).
    async fn deployment_gate(
        &self,
        call: &StoredToolCall,
        policy: &ToolPolicy,
        new_attempt: bool,
    ) -> Option<Gate> {
        let limit = policy.rate_limit?;
        if !new_attempt || limit.scope != LimitScope::Deployment {
            return None;
        }
        let window = crate::rate_limiter::acquire(&self.env, &call.call.name, limit.per_minute)
            .await
            .map_err(|e| worker::console_error!("rate limiter: {e}"))
            .ok()?;
        durable::deployment_gate(policy, Some(window), now())
    }

    /// Runs one call: a registered tool (with its timeout, parking on sleeps and webhooks),
    /// a prompt or agent the prompt delegates to, or an error result naming what the model
    /// may call.
    async fn execute_tool(
        &self,
        host: &Rc<ShellHost>,
        config: &Rc<AgentConfig>,
        summary: &ThreadSummary,
        call: &StoredToolCall,
        policy: &ToolPolicy,
    ) -> Ran {
        // The model may call only its prompt's tools; the application (queue_tool) may run
        // any registered tool.
        let name = call.call.name.as_str();
        let allowed = call.origin == CallOrigin::Queue || config.tools().iter().any(|t| t == name);
        if allowed {
            if let Some(tool) = host.registry.get(name) {
                // Fixed at the first start (see `run_tools`): every run sees the same context.
                let stored = call
                    .bindings
                    .as_deref()
                    .and_then(|b| serde_json::from_str::<Map<String, Value>>(b).ok())
                    .unwrap_or_default();
                let flow =
                    FlowState::top_level(host.clone(), summary, config.clone(), &call.call.id)
                        .with_bindings(stored);
                let state = flow.run_state().clone();
                let attempt = tool.attempt(flow, &call.call.arguments);
                return with_timeout(run_until_suspended(attempt, &state), policy.timeout)
                    .await
                    .unwrap_or(Ran::TimedOut);
            }
            if let Some((delegate, models)) = config.delegate(name) {
                let result = match delegate {
                    Delegate::Prompt(prompt) => {
                        self.run_sub_prompt(host, config, summary, call, prompt, models)
                            .await
                    }
                    Delegate::Agent(agent) => self.run_agent_tool(summary, call, agent).await,
                };
                return Ran::Done(Ok(result));
            }
        }
        let available: Vec<&str> = config
            .tools()
            .iter()
            .map(String::as_str)
            .filter(|n| host.registry.get(n).is_some() || config.delegate(n).is_some())
            .collect();
        Ran::Done(Ok(CallToolResult::error(format!(
            "unknown tool {name:?}; available tools: {}",
            available.join(", ")
        ))))
    }
}

/// A call's runtime bindings: the prompt's `tool_bindings` for this tool, overridden key by
/// key by the caller's (`queue_tool` with `bindings`).
fn bindings(call: &StoredToolCall, config: &AgentConfig) -> Map<String, Value> {
    let mut out = config
        .prompt
        .tool_bindings
        .get(&call.call.name)
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    if let Some(Value::Object(own)) = call
        .bindings
        .as_deref()
        .and_then(|b| serde_json::from_str(b).ok())
    {
        out.extend(own);
    }
    out
}
