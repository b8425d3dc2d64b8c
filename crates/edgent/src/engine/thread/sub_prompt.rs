//! A sub-prompt: a prompt called as a tool runs inline in this thread one level deeper than
//! its caller (depth 1 under a top-level call, then 2, 3 for prompts that sub-prompts call, to
//! [`MAX_SUB_PROMPT_DEPTH`]), with the same machinery as a turn (stored messages, hooks with
//! its `depth`, repaired histories), and its final answer becomes the calling tool's result.
//!
//! The driver performs, the engine decides: [`Thread::start_sub_prompt`] and
//! [`SubPrompt::next`] say what to do ([`SubStep`]); the driver calls the model through the
//! chain and hands the reply to [`SubPrompt::handle_reply`], runs the tools it is told to and
//! hands each result to [`SubPrompt::handle_tool_result`]; a call of a prompt starts one level
//! deeper with [`SubPrompt::start_nested`]. Every message is stored before the next step, so a call re-run after a restart continues from what is stored, and an answer
//! already stored is not asked for again.

use std::cell::Cell;
use std::rc::Rc;

use super::*;
use crate::config::PromptConfig;
use crate::engine::store::newest_within;
use crate::values::limits::MAX_SUB_PROMPT_DEPTH;

/// Model calls a sub-prompt may make for one call.
pub const SUB_PROMPT_MAX_STEPS: u32 = 10;
/// Model calls every sub-prompt under one top-level call may make together, at every depth:
/// the bound on what one call costs whatever its prompts do (a reply may hold many calls of
/// prompts, each starting a sub-prompt of its own).
pub const SUB_PROMPT_MAX_CALLS_PER_CALL: u32 = 30;

/// What the driver does next for a sub-prompt.
#[derive(Debug)]
pub enum SubStep {
    /// Call the prompt's model chain with this history and hand the reply to
    /// [`SubPrompt::handle_reply`].
    CallModel {
        /// The parent's chat (when the prompt includes it), then the sub-prompt's own
        /// messages, repaired.
        history: Vec<Message>,
    },
    /// Run these calls of the sub-prompt's reply, in order, and hand each result to
    /// [`SubPrompt::handle_tool_result`]; then ask [`SubPrompt::next`].
    RunTools(Vec<SubToolCall>),
    /// The sub-prompt is over: this is the calling tool's result.
    Done(CallToolResult),
}

/// One call of a sub-prompt's reply and what to do with it.
#[derive(Debug, Clone)]
pub struct SubToolCall {
    /// The call as the model made it.
    pub call: ToolCall,
    /// The stored reply holding it (the running tool's `parent_message_id`).
    pub message_id: String,
    /// What runs for it.
    pub run: SubCallRun,
}

/// What a sub-prompt's call runs.
#[derive(Debug, Clone)]
pub enum SubCallRun {
    /// The registered tool, once, without retries or parking.
    Tool,
    /// The prompt of that name, as a sub-prompt one level deeper
    /// ([`SubPrompt::start_nested`]).
    Prompt,
    /// Nothing: the engine refused the call and this is its result.
    Refused(CallToolResult),
}

/// What a sub-prompt runs: its prompt, and what it may call besides registered tools.
#[derive(Clone, Copy)]
pub struct SubPromptSpec<'a> {
    /// The prompt.
    pub prompt: &'a PromptConfig,
    /// Whether its model chain resolved (without one the call answers with an error).
    pub has_model: bool,
    /// Its model's history budget, for the caller's chat it may include.
    pub history_budget: u32,
    /// Which names in its `tools` are prompts (the driver's configuration knows them).
    pub is_prompt: &'a dyn Fn(&str) -> bool,
}

/// The state of one sub-prompt run (lives in the driver's memory for one call; everything it
/// needs again is stored).
#[derive(Debug)]
pub struct SubPrompt {
    /// The call it answers.
    call: ToolCall,
    /// The message holding that call.
    message_id: String,
    /// 1 under a top-level call, one more under each sub-prompt.
    depth: u32,
    prompt: String,
    tools: Vec<String>,
    /// The prompts among `tools` (callable one level deeper while the depth allows).
    prompts: Vec<String>,
    chat: Vec<Message>,
    side: Side,
    steps: u32,
    /// Model calls made under the top-level call, shared by every level of it.
    calls_under_top: Rc<Cell<u32>>,
}

/// The prompt's input: the one `input` argument a delegate takes.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DelegateInput {
    input: String,
}

impl Thread<'_> {
    /// Starts (or resumes) `spec`'s prompt at depth 1, answering the top-level `call`. `Done`
    /// at once for bad arguments, a prompt without a model, or an answer already stored by an
    /// earlier run.
    pub fn start_sub_prompt(
        &mut self,
        now: i64,
        call: &StoredToolCall,
        spec: SubPromptSpec<'_>,
    ) -> Result<(SubPrompt, SubStep), ThreadError> {
        let side = self.summary()?.current_side;
        let sub = SubPrompt::new(&call.call, &call.message_id, 1, spec, side);
        let chat = if spec.prompt.include_chat {
            // The conversation up to (not including) the message holding this call.
            let history = self
                .store
                .model_history_within(u64::from(spec.history_budget))?;
            let cut = history
                .iter()
                .position(|m| m.id == call.message_id)
                .unwrap_or(history.len());
            repair_history(history.into_iter().take(cut).collect())
        } else {
            Vec::new()
        };
        sub.start(self, now, spec, chat)
    }

    /// Stores a sub-prompt message with the hooks a message at its depth gets.
    fn store_sub(&mut self, message: Message) -> Result<Message, ThreadError> {
        let message = self.before_create(message);
        self.store.append_message(&message)?;
        self.after_create(&message);
        Ok(message)
    }
}

impl SubPrompt {
    fn new(
        call: &ToolCall,
        message_id: &str,
        depth: u32,
        spec: SubPromptSpec<'_>,
        side: Side,
    ) -> Self {
        let prompts = spec
            .prompt
            .tools
            .iter()
            .filter(|t| (spec.is_prompt)(t))
            .cloned()
            .collect();
        SubPrompt {
            call: call.clone(),
            message_id: message_id.to_owned(),
            depth,
            prompt: spec.prompt.name.clone(),
            tools: spec.prompt.tools.clone(),
            prompts,
            chat: Vec::new(),
            side,
            steps: 0,
            calls_under_top: Rc::default(),
        }
    }

    /// The id of the call it answers.
    pub fn call_id(&self) -> &str {
        &self.call.id
    }

    /// Its depth: 1 under a top-level call, one more under each sub-prompt.
    pub fn depth(&self) -> u32 {
        self.depth
    }

    /// The prompts it may call (each one level deeper): none at [`MAX_SUB_PROMPT_DEPTH`].
    pub fn callable_prompts(&self) -> &[String] {
        if self.depth >= MAX_SUB_PROMPT_DEPTH {
            return &[];
        }
        &self.prompts
    }

    /// Starts (or resumes) `spec`'s prompt one level below this sub-prompt, answering
    /// `call` of its reply (a [`SubCallRun::Prompt`]). With `include_chat` it sees this
    /// sub-prompt's conversation up to the reply holding the call.
    pub fn start_nested(
        &self,
        thread: &mut Thread<'_>,
        now: i64,
        call: &SubToolCall,
        spec: SubPromptSpec<'_>,
    ) -> Result<(SubPrompt, SubStep), ThreadError> {
        let mut nested = SubPrompt::new(
            &call.call,
            &call.message_id,
            self.depth + 1,
            spec,
            self.side,
        );
        nested.calls_under_top = self.calls_under_top.clone();
        let chat = if spec.prompt.include_chat {
            // What this sub-prompt was sent of its own caller (nothing without its
            // `include_chat`), then its own messages.
            let mut chat = self.chat.clone();
            let own: Vec<Message> = thread
                .store
                .sub_messages(&self.call.id)?
                .into_iter()
                .filter(|m| m.status == MessageStatus::Completed)
                .take_while(|m| m.id != call.message_id)
                .collect();
            chat.extend(repair_history(own));
            // Cut to the callee's own budget, as a top-level call's chat is.
            repair_history(newest_within(chat, u64::from(spec.history_budget)))
        } else {
            Vec::new()
        };
        nested.start(thread, now, spec, chat)
    }

    /// Stores the input (unless an earlier run did) and says the first step.
    fn start(
        mut self,
        thread: &mut Thread<'_>,
        now: i64,
        spec: SubPromptSpec<'_>,
        chat: Vec<Message>,
    ) -> Result<(SubPrompt, SubStep), ThreadError> {
        let input = match serde_json::from_str::<DelegateInput>(&self.call.arguments) {
            Ok(a) => a.input,
            Err(e) => {
                let text = format!(
                    "invalid arguments: {e}. Call it with {{\"input\": \"<everything the callee needs>\"}}."
                );
                return Ok((self, SubStep::Done(CallToolResult::error(text))));
            }
        };
        if !spec.has_model {
            let text = format!(
                "prompt {:?} cannot run: its model {:?} is missing from D1",
                self.prompt, spec.prompt.model
            );
            return Ok((self, SubStep::Done(CallToolResult::error(text))));
        }
        let existing = thread.store.sub_messages(&self.call.id)?;
        // A re-run after a restart that came between the answer and storing the call's
        // result: the answer stands, the model is not asked again.
        if let Some(done) = existing.last().filter(|m| {
            m.role == Role::Assistant
                && m.tool_calls.is_empty()
                && m.status == MessageStatus::Completed
        }) {
            let answer = CallToolResult::text(done.content.clone());
            return Ok((self, SubStep::Done(answer)));
        }
        if existing.is_empty() {
            let user = self.at_own_depth(Message::new(Role::User, input, now));
            thread.store_sub(user)?;
        }
        self.recover_nested_answers(thread, now, &existing)?;
        self.chat = chat;
        let step = self.next(thread)?;
        Ok((self, step))
    }

    /// A re-run after a restart: a prompt this sub-prompt called may have stored its answer
    /// before the restart cut the call short of its result. That answer becomes the call's
    /// result now, so the level that gave it is not asked again (a level cut short before it
    /// answered is answered as interrupted, like any call without a result).
    fn recover_nested_answers(
        &mut self,
        thread: &mut Thread<'_>,
        now: i64,
        existing: &[Message],
    ) -> Result<(), ThreadError> {
        let Some(reply) = existing
            .iter()
            .rev()
            .find(|m| m.role == Role::Assistant && !m.tool_calls.is_empty())
        else {
            return Ok(());
        };
        let answered = |id: &str| {
            existing
                .iter()
                .any(|m| m.role == Role::Tool && m.tool_call_id.as_deref() == Some(id))
        };
        let unanswered: Vec<ToolCall> = reply
            .tool_calls
            .iter()
            .filter(|c| self.prompts.contains(&c.name) && !answered(&c.id))
            .cloned()
            .collect();
        for call in unanswered {
            let nested = thread.store.sub_messages(&call.id)?;
            let done = nested.last().filter(|m| {
                m.role == Role::Assistant
                    && m.tool_calls.is_empty()
                    && m.status == MessageStatus::Completed
            });
            if let Some(answer) = done.map(|m| CallToolResult::text(m.content.clone())) {
                self.handle_tool_result(thread, now, &call, answer)?;
            }
        }
        Ok(())
    }

    /// The next step: the model, unless the thread stopped or the prompt used its steps.
    pub fn next(&mut self, thread: &Thread<'_>) -> Result<SubStep, ThreadError> {
        if thread.summary()?.status == ThreadStatus::Stopped {
            return Ok(SubStep::Done(CallToolResult::error(
                "the thread was stopped",
            )));
        }
        if self.calls_under_top.get() >= SUB_PROMPT_MAX_CALLS_PER_CALL {
            return Ok(SubStep::Done(CallToolResult::error(format!(
                "prompt {:?} was not asked: the prompts under this call used their \
                 {SUB_PROMPT_MAX_CALLS_PER_CALL} model calls; answer with what you have",
                self.prompt
            ))));
        }
        if self.steps >= SUB_PROMPT_MAX_STEPS {
            return Ok(SubStep::Done(CallToolResult::error(format!(
                "prompt {:?} used its {SUB_PROMPT_MAX_STEPS} model calls without answering",
                self.prompt
            ))));
        }
        self.steps += 1;
        self.calls_under_top.set(self.calls_under_top.get() + 1);
        let own: Vec<Message> = thread
            .store()
            .sub_messages(&self.call.id)?
            .into_iter()
            .filter(|m| m.status == MessageStatus::Completed)
            .collect();
        let mut history = self.chat.clone();
        history.extend(repair_history(own));
        Ok(SubStep::CallModel { history })
    }

    /// The model's reply (or why the chain gave up). A reply without tool calls is the
    /// answer; calls are run next, each checked against the prompt's tools: only registered
    /// tools it lists, and none that needs a person's approval (a sub-prompt cannot wait for
    /// one).
    pub fn handle_reply(
        &mut self,
        thread: &mut Thread<'_>,
        now: i64,
        reply: Result<Completion, ProviderError>,
        tools: &dyn ToolIndex,
    ) -> Result<SubStep, ThreadError> {
        let mut completion = match reply {
            Ok(c) => c,
            Err(e) => return Ok(self.failed(&e)),
        };
        if let Err(e) = completion.validate() {
            return Ok(self.failed(&e));
        }
        if let Some(e) = super::history::unfit_call_name(&completion.tool_calls) {
            return Ok(self.failed(&e));
        }
        // A sub-prompt's calls always get ids of ours: a provider's may repeat within a reply,
        // reuse one of the thread's (workflow steps are recorded per call id, thread-wide) or
        // not fit another provider's wire; the model only needs each call paired with its
        // result, which ours do.
        for call in &mut completion.tool_calls {
            call.id = super::history::internal_call_id();
        }
        let reply = self.at_own_depth(Message {
            tool_calls: completion.tool_calls.clone(),
            side: Some(self.side),
            ..Message::new(Role::Assistant, completion.text.clone(), now)
        });
        let reply = thread.store_sub(reply)?;
        if reply.tool_calls.is_empty() {
            return Ok(SubStep::Done(CallToolResult::text(completion.text)));
        }
        let calls = reply
            .tool_calls
            .iter()
            .map(|tc| SubToolCall {
                call: tc.clone(),
                message_id: reply.id.clone(),
                run: self.run_for(tc, tools),
            })
            .collect();
        Ok(SubStep::RunTools(calls))
    }

    /// A call's result, stored at the sub-prompt's depth (after the tool-result hooks).
    pub fn handle_tool_result(
        &mut self,
        thread: &mut Thread<'_>,
        now: i64,
        call: &ToolCall,
        result: CallToolResult,
    ) -> Result<(), ThreadError> {
        let result = match thread.hooks(self.depth) {
            Some((hooks, ctx)) => {
                let (r, failures) = hooks.after_tool_call(&ctx, call, result);
                thread.hook_failures.extend(failures);
                r
            }
            None => result,
        };
        let message = self.at_own_depth(Message {
            side: Some(self.side),
            ..Message::tool_result(call, result.to_model_text(), now)
        });
        thread.store_sub(message).map(drop)
    }

    fn failed(&self, error: &ProviderError) -> SubStep {
        SubStep::Done(CallToolResult::error(format!(
            "prompt {:?} failed: {error}",
            self.prompt
        )))
    }

    /// What runs for `tc`: a registered tool the prompt lists (one that needs a person's
    /// approval is refused: a sub-prompt cannot wait), a prompt it lists (above
    /// [`MAX_SUB_PROMPT_DEPTH`] only), or nothing, with the reason.
    fn run_for(&self, tc: &ToolCall, tools: &dyn ToolIndex) -> SubCallRun {
        let listed = self.tools.contains(&tc.name);
        match tools.tool_policy(&tc.name) {
            Some(policy) if listed && policy.needs_approval => {
                return SubCallRun::Refused(CallToolResult::error(format!(
                    "{:?} needs a person's approval, which a sub-prompt cannot wait for; ask the user in the main conversation",
                    tc.name
                )));
            }
            Some(_) if listed => return SubCallRun::Tool,
            _ => {}
        }
        if self.prompts.contains(&tc.name) {
            if self.depth < MAX_SUB_PROMPT_DEPTH {
                return SubCallRun::Prompt;
            }
            return SubCallRun::Refused(CallToolResult::error(format!(
                "prompt {:?} would run more than {MAX_SUB_PROMPT_DEPTH} sub-prompts deep; answer without calling prompts at this depth",
                tc.name
            )));
        }
        let available: Vec<&str> = self
            .tools
            .iter()
            .map(String::as_str)
            .filter(|t| {
                tools.tool_policy(t).is_some() || self.callable_prompts().iter().any(|p| p == t)
            })
            .collect();
        SubCallRun::Refused(CallToolResult::error(format!(
            "unknown tool {:?}; a sub-prompt may call its registered tools and prompts: {}",
            tc.name,
            available.join(", ")
        )))
    }

    /// Every message of the sub-prompt sits at its depth, linked to the call it answers.
    fn at_own_depth(&self, m: Message) -> Message {
        Message {
            depth: self.depth,
            parent_message_id: Some(self.message_id.clone()),
            parent_tool_call_id: Some(self.call.id.clone()),
            ..m
        }
    }
}
