//! Running tool calls: the driver side of the engine's tool-call lifecycle
//! ([`edgent::engine::tool_runs`]). Each due call goes to the engine, which answers run it, ask
//! the deployment's rate limiter first, or nothing; admitted calls of one reply run
//! concurrently under their timeout, and each outcome goes back to the engine to be settled.
//! Nothing here decides what a call's state becomes.

use std::rc::Rc;

use futures_util::future::join_all;

use super::ThreadObject;
use crate::clock::now;
use crate::clock::with_timeout;
use crate::host::ShellHost;
use crate::policy::policy_for;
use edgent::config::{AgentConfig, Delegate};
use edgent::engine::durable::Ran;
use edgent::engine::store::{StoredToolCall, ThreadSummary};
use edgent::engine::thread::Thread;
use edgent::engine::tool_runs::{Admission, ToolRun};
use edgent::tool::offer::{callee, Callee};
use edgent::tool::{run_until_suspended, FlowState};
use edgent::values::ids::random_unit;

impl ThreadObject {
    /// Runs calls of one reply (concurrently when there are several) and hands their
    /// outcomes to the engine in call order.
    pub(super) async fn run_tools(
        &self,
        thread: &mut Thread<'_>,
        host: &Rc<ShellHost>,
        config: &Rc<AgentConfig>,
        summary: &ThreadSummary,
        calls: Vec<StoredToolCall>,
    ) {
        let mut runs: Vec<ToolRun> = Vec::new();
        for call in calls {
            let policy = policy_for(&host.env, &host.registry, &call.call.name);
            let prompt_bindings = config.prompt.tool_bindings.get(&call.call.name);
            let mut admitted = thread.handle_due_call(now(), call, policy, prompt_bindings);
            if let Ok(Admission::AskLimiter {
                call,
                policy,
                per_minute,
            }) = admitted
            {
                let window = crate::rate_limiter::acquire(&self.env, &call.call.name, per_minute)
                    .await
                    .map_err(|e| worker::console_error!("rate limiter: {e}"))
                    .ok();
                admitted = thread.handle_limiter_answer(now(), call, policy, window);
            }
            match admitted {
                Ok(Admission::Run(run)) => runs.push(run),
                Ok(Admission::Settled | Admission::AskLimiter { .. }) => {}
                Err(e) => worker::console_error!("could not start a tool call: {e}"),
            }
        }
        self.flush(thread);
        if runs.is_empty() {
            return;
        }
        let ends = join_all(
            runs.iter()
                .map(|run| self.execute_tool(host, config, summary, run)),
        )
        .await;
        for (run, ran) in runs.iter().zip(ends) {
            if let Err(e) = thread.handle_tool_outcome(now(), run, ran, random_unit()) {
                worker::console_error!("could not store a tool outcome: {e}");
            }
        }
        self.flush(thread);
    }

    /// Runs one call: a registered tool (with its timeout, parking on sleeps and webhooks),
    /// a prompt or agent the prompt delegates to, or an error result naming what the model
    /// may call.
    async fn execute_tool(
        &self,
        host: &Rc<ShellHost>,
        config: &Rc<AgentConfig>,
        summary: &ThreadSummary,
        run: &ToolRun,
    ) -> Ran {
        let (call, policy) = (&run.call, &run.policy);
        match callee(&host.registry, config, &call.call.name, call.origin) {
            Callee::Tool(tool) => {
                // Fixed at the first start (see `run_tools`): every run sees the same context.
                let flow = FlowState::top_level(host.clone(), summary, config, &call.call.id)
                    .with_bindings(call.binding_map());
                let state = flow.run_state().clone();
                let attempt = tool.attempt(flow, &call.call.arguments);
                with_timeout(run_until_suspended(attempt, &state), policy.timeout)
                    .await
                    .unwrap_or(Ran::TimedOut)
            }
            Callee::Delegate(Delegate::Prompt(prompt), models) => Ran::Done(Ok(self
                .run_sub_prompt(host, config, summary, call, prompt, models)
                .await)),
            Callee::Delegate(Delegate::Agent(agent), _) => {
                Ran::Done(Ok(self.run_agent_tool(summary, call, agent).await))
            }
            Callee::Unavailable(result) => Ran::Done(Ok(result)),
        }
    }
}
