//! Running tool calls: the performing side of the engine's tool-call lifecycle
//! ([`crate::engine::tool_runs`]). Each due call goes to the engine, which answers run it, ask
//! the deployment's rate limiter first, or nothing; admitted calls of one reply run
//! concurrently under their timeout, and each outcome goes back to the engine to be settled.
//! Nothing here decides what a call's state becomes.

use std::rc::Rc;

use futures_util::stream::{FuturesUnordered, StreamExt};

use super::ThreadRuntime;
use crate::config::{AgentConfig, Delegate};
use crate::engine::durable::Ran;
use crate::engine::store::{StoredToolCall, ThreadSummary};
use crate::engine::thread::Thread;
use crate::engine::tool_runs::{Admission, ToolRun};
use crate::tool::nested::{millis, with_timeout};
use crate::tool::offer::{callee, Callee};
use crate::tool::policy::{mcp_policy, policy_for};
use crate::tool::{run_until_suspended, FlowState};
use crate::values::policy::{RetryPolicy, ToolPolicy};

impl ThreadRuntime {
    /// Runs calls of one reply (concurrently when there are several) and hands each outcome
    /// to the engine as soon as its run ends. Frames are flushed before every await; the
    /// last outcome's are left to the caller's next flush. (Public for the test harness,
    /// which steps the engine itself and runs tool calls through this.)
    pub async fn run_tool_calls(
        &self,
        thread: &mut Thread<'_>,
        config: &Rc<AgentConfig>,
        summary: &ThreadSummary,
        calls: Vec<StoredToolCall>,
    ) {
        let platform = &*self.platform;
        let mut runs: Vec<ToolRun> = Vec::new();
        for call in calls {
            let name = &call.call.name;
            let policy = match callee(platform.registry(), config, name, call.origin) {
                Callee::Mcp(server, tool) => {
                    mcp_policy(name, server.needs_approval(tool), |k| platform.var(k))
                }
                // Not a tool this prompt offers: it fails at once with the list of those it
                // does (no approval asked for a call that could never run, no limit counted).
                Callee::Unavailable(_) => ToolPolicy {
                    retry: RetryPolicy::none(),
                    ..ToolPolicy::default()
                },
                Callee::Tool(_) | Callee::Delegate(..) => {
                    policy_for(platform.registry(), name, |k| platform.var(k))
                }
            };
            let prompt_bindings = config.prompt.tool_bindings.get(&call.call.name);
            let mut admitted = thread.handle_due_call(
                self.now(),
                call,
                policy,
                prompt_bindings,
                platform.registry(),
            );
            if let Ok(Admission::AskLimiter {
                call,
                policy,
                per_minute,
            }) = admitted
            {
                // Frames never wait behind an await: the step's and the calls' so far.
                self.flush(thread);
                let window = platform
                    .acquire_limit(&call.call.name, per_minute)
                    .await
                    .map_err(|e| platform.log_error(&format!("rate limiter: {e}")))
                    .ok();
                admitted = thread.handle_limiter_answer(self.now(), call, policy, window);
            }
            match admitted {
                Ok(Admission::Run(run)) => runs.push(run),
                Ok(Admission::Settled | Admission::AskLimiter { .. }) => {}
                Err(e) => platform.log_error(&format!("could not start a tool call: {e}")),
            }
        }
        self.flush(thread);
        if runs.is_empty() {
            return;
        }
        // Each outcome is stored as its run ends, not when the whole batch has: a call that
        // finished must never run again because a sibling was still running at a crash. (The
        // model still reads the results in call order: the history pairs each call with its
        // result.)
        let mut ends: FuturesUnordered<_> = runs
            .iter()
            .map(|run| async move { (run, self.execute_tool(config, summary, run).await) })
            .collect();
        while let Some((run, ran)) = ends.next().await {
            if let Err(e) = thread.handle_tool_outcome(self.now(), run, ran, platform.jitter()) {
                platform.log_error(&format!("could not store a tool outcome: {e}"));
            }
            // The last outcome's frames go with the turn loop's next flush (it flushes
            // before anything it awaits): one logged insert with the next step's frames.
            if !ends.is_empty() {
                self.flush(thread);
            }
        }
    }

    /// Runs one call: a registered tool (with its timeout, parking on sleeps and webhooks),
    /// a prompt or agent the prompt delegates to, or an error result naming what the model
    /// may call.
    async fn execute_tool(
        &self,
        config: &Rc<AgentConfig>,
        summary: &ThreadSummary,
        run: &ToolRun,
    ) -> Ran {
        let (call, policy) = (&run.call, &run.policy);
        match callee(
            self.platform.registry(),
            config,
            &call.call.name,
            call.origin,
        ) {
            Callee::Tool(tool) => {
                // Fixed at the first start: every run sees the same context.
                let flow =
                    FlowState::top_level(self.tool_host.clone(), summary, config, &call.call.id)
                        .with_bindings(call.binding_map());
                let state = flow.run_state().clone();
                // On the code its runs started on (the gate fixed `version` when it started).
                let version = call.version.unwrap_or(tool.policy().version);
                let attempt = tool.attempt_on(version, flow, &call.call.arguments);
                let suspended = run_until_suspended(attempt, &state);
                with_timeout(suspended, self.platform.sleep(millis(policy.timeout)))
                    .await
                    .unwrap_or(Ran::TimedOut)
            }
            Callee::Delegate(Delegate::Prompt(prompt), models) => Ran::Done(Ok(self
                .run_sub_prompt(config, summary, call, prompt, models)
                .await)),
            Callee::Delegate(Delegate::Agent(agent), _) => {
                Ran::Done(Ok(self.run_agent_tool(summary, call, agent).await))
            }
            Callee::Mcp(server, tool) => {
                let called = self.call_mcp_tool(server, tool, &call.call.arguments);
                with_timeout(called, self.platform.sleep(millis(policy.timeout)))
                    .await
                    .map_or(Ran::TimedOut, Ran::Done)
            }
            Callee::Unavailable(result) => Ran::Done(Ok(result)),
        }
    }
}
