//! Prompts and agents called as tools: a prompt runs as a sub-prompt in this thread, one level
//! deeper than its caller; a dual-AI agent runs to its end in a child thread (its own Durable Object); an
//! AI-human agent takes this thread over.

use std::rc::Rc;

use serde::Deserialize;
use serde_json::{json, Value};

use super::chain::{run_checked_chain, CollectSink, RequestParts};
use super::ThreadRuntime;
use crate::api::ops::OP_PREFIX;
use crate::config::{AgentConfig, AgentDef, AgentKind, Delegate, ModelConfig, PromptConfig};
use crate::engine::store::{StoredToolCall, ThreadStatus, ThreadSummary};
use crate::engine::thread::{
    SubCallRun, SubPrompt, SubPromptSpec, SubStep, Thread, ThreadError, TurnRules,
};
use crate::llm::stream::Completion;
use crate::tool::nested::run_nested;
use crate::tool::{BoxFuture, CallToolResult, FlowState};
use crate::values::ids::new_id;
use crate::values::limits::MAX_THREAD_NESTING;

/// How long an agent tool waits for its child conversation.
const CHILD_DEADLINE_MS: i64 = 10 * 60 * 1000;

/// Why a child conversation gave no answer: the parent's side of the round trip
/// (`run_child`) or the child's own run (`run_to_end`).
#[derive(Debug)]
#[non_exhaustive]
pub enum ChildError {
    /// This thread's store failed (recording the child, reading the summary).
    Thread(ThreadError),
    /// A request to the child's object could not be built or sent, or its answer could not
    /// be read (the platform's client-facing text; the cause was logged).
    Unreachable(String),
    /// The child refused to be created (its answer).
    NotCreated(Value),
    /// The child refused the first message (its answer).
    NotStarted(Value),
    /// The child's run ended in an error (its answer).
    NotFinished(Value),
    /// The child thread stopped working, with its last error if it gave one.
    Failed {
        /// The child thread's id.
        child: String,
        /// Its `last_error`.
        reason: Option<String>,
    },
    /// The conversation was still running after ten minutes.
    TimedOut,
    /// The child would be deeper than [`MAX_THREAD_NESTING`] (an agent calling itself).
    TooDeep,
}

impl std::fmt::Display for ChildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChildError::Thread(e) => write!(f, "{e}"),
            // The client-facing text only: the cause was logged where it happened.
            ChildError::Unreachable(e) => f.write_str(e),
            ChildError::NotCreated(body) => write!(f, "could not create the child thread: {body}"),
            ChildError::NotStarted(body) => write!(f, "could not start the child thread: {body}"),
            ChildError::NotFinished(body) => write!(f, "the child thread did not finish: {body}"),
            ChildError::Failed { child, reason } => write!(
                f,
                "the child thread {child} stopped working: {}",
                reason.as_deref().unwrap_or("no reason given")
            ),
            ChildError::TimedOut => f.write_str("the conversation did not end in time"),
            ChildError::TooDeep => write!(
                f,
                "its child thread would be more than {MAX_THREAD_NESTING} child threads deep; \
                 an agent that calls itself (directly or through other agents) must answer \
                 without calling again at that depth"
            ),
        }
    }
}

impl std::error::Error for ChildError {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DelegateInput {
    input: String,
}

/// A sub-prompt message that could not be stored: the call's error result.
fn stored_failure(e: ThreadError) -> CallToolResult {
    CallToolResult::error(format!("could not store a sub-prompt message: {e}"))
}

fn parse_input(arguments: &str) -> Result<String, CallToolResult> {
    serde_json::from_str::<DelegateInput>(arguments)
        .map(|a| a.input)
        .map_err(|e| {
            CallToolResult::error(format!(
                "invalid arguments: {e}. Call it with {{\"input\": \"<everything the callee needs>\"}}."
            ))
        })
}

/// One sub-prompt as the driver runs it: its prompt and model chain, and where it sits.
struct SubPromptRun<'s> {
    prompt: &'s PromptConfig,
    models: &'s [ModelConfig],
    /// The flow of the call it answers (its tools' flows are one level below).
    flow: FlowState,
    /// That call's execution-history key: its tools' runs are logged under it.
    key: String,
}

/// The prompts among the thread's configured delegates (the side's prompt's, and theirs).
fn configured_prompt<'c>(
    parent: &'c AgentConfig,
    name: &str,
) -> Option<(&'c PromptConfig, &'c [ModelConfig])> {
    parent.delegates.iter().find_map(|(d, models)| match d {
        Delegate::Prompt(p) if p.name == name => Some((p, models.as_slice())),
        _ => None,
    })
}

/// What the engine needs to know of a prompt to run it as a sub-prompt.
fn spec<'a>(
    prompt: &'a PromptConfig,
    models: &[ModelConfig],
    is_prompt: &'a dyn Fn(&str) -> bool,
) -> SubPromptSpec<'a> {
    SubPromptSpec {
        prompt,
        has_model: !models.is_empty(),
        history_budget: models
            .first()
            .and_then(|m| m.max_history_tokens)
            .unwrap_or(crate::config::DEFAULT_MAX_HISTORY_TOKENS),
        is_prompt,
    }
}

impl ThreadRuntime {
    /// Runs `prompt` as a sub-prompt answering the top-level `call`: the engine's
    /// [`SubPrompt`] says each step (call the model, run tools or prompts one level deeper,
    /// done) and stores every message at its depth; this only calls the model chain, the
    /// tools and the nested sub-prompts.
    pub(super) async fn run_sub_prompt(
        &self,
        parent: &Rc<AgentConfig>,
        summary: &ThreadSummary,
        call: &StoredToolCall,
        prompt: &PromptConfig,
        models: &[ModelConfig],
    ) -> CallToolResult {
        let is_prompt = |name: &str| configured_prompt(parent, name).is_some();
        let mut thread = Thread::open_migrated(self.platform.sql());
        let started = thread.start_sub_prompt(self.now(), call, spec(prompt, models, &is_prompt));
        drop(thread);
        let (sub, step) = match started {
            Ok(s) => s,
            Err(e) => return stored_failure(e),
        };
        let run = SubPromptRun {
            prompt,
            models,
            flow: FlowState::top_level(self.tool_host.clone(), summary, parent, &call.call.id),
            key: call.call.id.clone(),
        };
        self.drive_sub_prompt(parent, run, sub, step).await
    }

    /// Performs a sub-prompt's steps until it is done; a call of a prompt runs the nested
    /// sub-prompt the same way, one level deeper.
    fn drive_sub_prompt<'s>(
        &'s self,
        parent: &'s Rc<AgentConfig>,
        run: SubPromptRun<'s>,
        mut sub: SubPrompt,
        mut step: SubStep,
    ) -> BoxFuture<'s, CallToolResult> {
        Box::pin(async move {
            let SubPromptRun {
                prompt,
                models,
                flow,
                key,
            } = run;
            let callable = sub.callable_prompts();
            let config = Rc::new(AgentConfig {
                agent: parent.agent.clone(),
                side: parent.side,
                prompt: prompt.clone(),
                models: models.to_vec(),
                // The prompts it may call, while the depth allows (`delegate` checks `tools`).
                delegates: parent
                    .delegates
                    .iter()
                    .filter(|(d, _)| matches!(d, Delegate::Prompt(p) if callable.contains(&p.name)))
                    .cloned()
                    .collect(),
                // A sub-prompt's history is its own call's, within its budget: nothing to
                // compact.
                compaction: None,
                selection_models: parent.selection_models.clone(),
            });
            let is_prompt = |name: &str| configured_prompt(parent, name).is_some();
            let output = match self.output_format(prompt) {
                Ok(output) => output,
                Err(why) => {
                    return CallToolResult::error(format!(
                        "prompt {:?} cannot run: {why}",
                        prompt.name
                    ))
                }
            };
            let mut thread = Thread::open_migrated(self.platform.sql());
            let system = thread.system_text(prompt);
            loop {
                let next = match step {
                    SubStep::Done(result) => {
                        self.flush(&mut thread);
                        return result;
                    }
                    SubStep::CallModel { history } => {
                        // The thread's budget holds inside a sub-prompt too: a spent thread
                        // asks no model, here or at the top level (which then stops it).
                        let spent = thread.summary().ok().and_then(|t| {
                            TurnRules::from_config(parent).over_budget(t.tokens_used, t.cost_usd)
                        });
                        if let Some(why) = spent {
                            return CallToolResult::error(format!(
                                "prompt {:?} was not asked again: {why}",
                                prompt.name
                            ));
                        }
                        // Chosen again at each step: the sub-prompt's latest messages change.
                        // A sub-prompt runs its registered tools and prompts only: MCP
                        // servers' tools are the top-level prompt's (docs/mcp.md).
                        let offer = self.offer(None, &config, &history, Vec::new()).await;
                        let parts = RequestParts {
                            system: &system,
                            history: &history,
                            offer: &offer,
                            config: &config,
                            output,
                            memo: None,
                        };
                        let mut sink = CollectSink {
                            runtime: self,
                            thread: &thread,
                            completion: Completion::default(),
                            models,
                            sub_prompt_of: Some((sub.call_id(), sub.depth())),
                        };
                        // The answer's value is not kept: the call's result is its JSON text.
                        let outcome =
                            run_checked_chain(&*self.platform, models, &parts, &mut sink).await;
                        let reply = outcome.map(|_| sink.completion);
                        sub.handle_reply(&mut thread, self.now(), reply, self.platform.registry())
                    }
                    SubStep::RunTools(calls) => {
                        let mut stored = Ok(());
                        for c in calls {
                            // Under the flow of the call that runs this sub-prompt: its root,
                            // its flow id, one level deeper.
                            let call_flow = || flow.sub_flow(&c.call.id, &c.message_id, &config);
                            let call_key = format!("{key}/{}", c.call.id);
                            let result = match &c.run {
                                SubCallRun::Refused(refusal) => refusal.clone(),
                                SubCallRun::Tool => {
                                    match self.platform.registry().get(&c.call.name) {
                                        // Under the tool's own limits and timeout, logged under
                                        // the call that runs this sub-prompt.
                                        Some(tool) => run_nested(
                                            call_flow(),
                                            tool,
                                            &c.call.name,
                                            &c.call.arguments,
                                            &call_key,
                                            None,
                                        )
                                        .await
                                        .unwrap_or_else(|e| CallToolResult::error(e.text())),
                                        None => CallToolResult::error("the tool is gone"),
                                    }
                                }
                                SubCallRun::Prompt => {
                                    match configured_prompt(parent, &c.call.name) {
                                        Some((nested, nested_models)) => {
                                            let spec = spec(nested, nested_models, &is_prompt);
                                            match sub.start_nested(
                                                &mut thread,
                                                self.now(),
                                                &c,
                                                spec,
                                            ) {
                                                Ok((inner, first)) => {
                                                    self.flush(&mut thread);
                                                    let run = SubPromptRun {
                                                        prompt: nested,
                                                        models: nested_models,
                                                        flow: call_flow(),
                                                        key: call_key,
                                                    };
                                                    self.drive_sub_prompt(parent, run, inner, first)
                                                        .await
                                                }
                                                Err(e) => stored_failure(e),
                                            }
                                        }
                                        None => CallToolResult::error("the prompt is gone"),
                                    }
                                }
                            };
                            stored =
                                sub.handle_tool_result(&mut thread, self.now(), &c.call, result);
                            if stored.is_err() {
                                break;
                            }
                        }
                        stored.and_then(|()| sub.next(&thread))
                    }
                };
                self.flush(&mut thread);
                step = match next {
                    Ok(s) => s,
                    Err(e) => return stored_failure(e),
                };
            }
        })
    }

    /// An agent called as a tool: dual-AI agents run in a child thread; AI-human agents take
    /// over this thread (the next model call is theirs).
    pub(super) async fn run_agent_tool(
        &self,
        summary: &ThreadSummary,
        call: &StoredToolCall,
        agent: &AgentDef,
    ) -> CallToolResult {
        let input = match parse_input(&call.call.arguments) {
            Ok(i) => i,
            Err(e) => return e,
        };
        match agent.kind {
            AgentKind::AiHuman => {
                let thread = Thread::open_migrated(self.platform.sql());
                let handed = thread.hand_over(self.now(), &agent.id);
                if handed.is_ok() {
                    // The new agent shows in no frame: the index reads the row again.
                    self.index.changed_unseen();
                    self.schedule_index_write();
                }
                match handed {
                    Ok(()) => CallToolResult::text(format!(
                        "Handed over to agent {:?}, which answers from now on. Handover note: {input}",
                        agent.id
                    )),
                    Err(e) => CallToolResult::error(format!("could not hand over: {e}")),
                }
            }
            AgentKind::DualAi => match self.run_child(summary, call, agent, input).await {
                Ok(result) => result,
                Err(why) => CallToolResult::error(format!("agent {:?} failed: {why}", agent.id)),
            },
        }
    }

    async fn run_child(
        &self,
        summary: &ThreadSummary,
        call: &StoredToolCall,
        agent: &AgentDef,
        input: String,
    ) -> Result<CallToolResult, ChildError> {
        let thread = Thread::open_migrated(self.platform.sql());
        let nesting = thread.nesting().map_err(ChildError::Thread)? + 1;
        if nesting > MAX_THREAD_NESTING {
            return Err(ChildError::TooDeep);
        }
        let child = thread
            .child_thread(self.now(), &call.call.id, &new_id())
            .map_err(ChildError::Thread)?;
        let ask = |method: &'static str, path: String, body: Option<Value>| {
            self.platform.ask_thread(&child, method, &path, body)
        };
        let root = summary
            .root_thread_id
            .as_ref()
            .unwrap_or(&summary.thread_id);
        let create = format!(
            "/create?parent={}&root={root}&nesting={nesting}",
            summary.thread_id
        );
        let body = json!({ "agent_id": agent.id, "tags": ["child"] });
        let (status, body) = ask("POST", create, Some(body))
            .await
            .map_err(ChildError::Unreachable)?;
        if status != 201 && status != 409 {
            return Err(ChildError::NotCreated(body));
        }
        let (_, child_summary) = ask("GET", OP_PREFIX.to_owned(), None)
            .await
            .map_err(ChildError::Unreachable)?;
        if child_summary["message_count"].as_i64() == Some(0) {
            let messages = format!("{OP_PREFIX}/messages");
            let (status, body) = ask("POST", messages, Some(json!({ "content": input })))
                .await
                .map_err(ChildError::Unreachable)?;
            if status != 202 {
                return Err(ChildError::NotStarted(body));
            }
        }
        let (status, done) = ask("POST", "/run".to_owned(), None)
            .await
            .map_err(ChildError::Unreachable)?;
        if status != 200 {
            return Err(ChildError::NotFinished(done));
        }
        if done["status"] != "stopped" {
            return Err(ChildError::Failed {
                child,
                reason: done["last_error"].as_str().map(str::to_owned),
            });
        }
        let answer = done["result"].as_str().unwrap_or_default();
        Ok(CallToolResult::text(format!(
            "{answer}\n\n(child thread {child}, stopped by {})",
            done["stopped_by"].as_str().unwrap_or("?")
        )))
    }

    /// Drives this thread until its conversation is no longer running (for a parent waiting
    /// on it), then returns its summary.
    pub async fn run_to_end(&self) -> Result<ThreadSummary, ChildError> {
        let deadline = self.now() + CHILD_DEADLINE_MS;
        loop {
            self.drive().await;
            let summary = Thread::open_migrated(self.platform.sql())
                .summary()
                .map_err(ChildError::Thread)?;
            if summary.status != ThreadStatus::Running {
                return Ok(summary);
            }
            if self.now() > deadline {
                return Err(ChildError::TimedOut);
            }
            // Another invocation (the alarm) is driving it: wait for it.
            self.platform.sleep(200).await;
        }
    }
}
