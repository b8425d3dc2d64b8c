//! A sub-prompt: a prompt called as a tool runs inline in this thread at depth 1, with the
//! same machinery as a turn (stored messages, hooks with `depth = 1`, repaired histories), and
//! its final answer becomes the calling tool's result.
//!
//! The driver performs, the engine decides: [`Thread::start_sub_prompt`] and
//! [`SubPrompt::next`] say what to do ([`SubStep`]); the driver calls the model through the
//! chain and hands the reply to [`SubPrompt::handle_reply`], runs the tools it is told to and
//! hands each result to [`SubPrompt::handle_tool_result`]. Every message is stored before the
//! next step, so a call re-run after a restart continues from what is stored, and an answer
//! already stored is not asked for again.

use super::*;
use crate::config::PromptConfig;

/// Model calls a sub-prompt may make for one call.
pub const SUB_PROMPT_MAX_STEPS: u32 = 10;

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
    /// `None`: run the registered tool (once, without retries or parking). `Some`: the
    /// engine refused it and this is its result.
    pub refused: Option<CallToolResult>,
}

/// The state of one sub-prompt run (lives in the driver's memory for one call; everything it
/// needs again is stored).
#[derive(Debug)]
pub struct SubPrompt {
    call: StoredToolCall,
    prompt: String,
    tools: Vec<String>,
    chat: Vec<Message>,
    side: Side,
    steps: u32,
}

/// The prompt's input: the one `input` argument a delegate takes.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DelegateInput {
    input: String,
}

impl Thread<'_> {
    /// Starts (or resumes) `prompt` answering `call`. `history_budget` is the prompt's model's
    /// history budget, for the parent chat it may include. `Done` at once for bad arguments,
    /// a prompt without a model, or an answer already stored by an earlier run.
    pub fn start_sub_prompt(
        &mut self,
        now: i64,
        call: &StoredToolCall,
        prompt: &PromptConfig,
        has_model: bool,
        history_budget: u32,
    ) -> Result<(SubPrompt, SubStep), ThreadError> {
        let side = self.summary()?.current_side;
        let mut sub = SubPrompt {
            call: call.clone(),
            prompt: prompt.name.clone(),
            tools: prompt.tools.clone(),
            chat: Vec::new(),
            side,
            steps: 0,
        };
        let input = match serde_json::from_str::<DelegateInput>(&call.call.arguments) {
            Ok(a) => a.input,
            Err(e) => {
                let text = format!(
                    "invalid arguments: {e}. Call it with {{\"input\": \"<everything the callee needs>\"}}."
                );
                return Ok((sub, SubStep::Done(CallToolResult::error(text))));
            }
        };
        if !has_model {
            let text = format!(
                "prompt {:?} cannot run: its model {:?} is missing from D1",
                prompt.name, prompt.model
            );
            return Ok((sub, SubStep::Done(CallToolResult::error(text))));
        }
        let existing = self.store.sub_messages(&call.call.id)?;
        // A re-run after a restart that came between the answer and storing the call's
        // result: the answer stands, the model is not asked again.
        if let Some(done) = existing.last().filter(|m| {
            m.role == Role::Assistant
                && m.tool_calls.is_empty()
                && m.status == MessageStatus::Completed
        }) {
            let answer = CallToolResult::text(done.content.clone());
            return Ok((sub, SubStep::Done(answer)));
        }
        if existing.is_empty() {
            let user = sub.at_depth_1(Message::new(Role::User, input, now));
            self.store_at_depth_1(user)?;
        }
        if prompt.include_chat {
            // The parent conversation up to (not including) the message holding this call.
            let history = self.store.model_history_within(u64::from(history_budget))?;
            let cut = history
                .iter()
                .position(|m| m.id == call.message_id)
                .unwrap_or(history.len());
            sub.chat = repair_history(history.into_iter().take(cut).collect());
        }
        let step = sub.next(self)?;
        Ok((sub, step))
    }

    /// Stores a sub-prompt message with the hooks a message at depth 1 gets.
    fn store_at_depth_1(&mut self, message: Message) -> Result<Message, ThreadError> {
        let message = self.before_create(message);
        self.store.append_message(&message)?;
        self.after_create(&message);
        Ok(message)
    }
}

impl SubPrompt {
    /// The next step: the model, unless the thread stopped or the prompt used its steps.
    pub fn next(&mut self, thread: &Thread<'_>) -> Result<SubStep, ThreadError> {
        if thread.summary()?.status == ThreadStatus::Stopped {
            return Ok(SubStep::Done(CallToolResult::error(
                "the thread was stopped",
            )));
        }
        if self.steps >= SUB_PROMPT_MAX_STEPS {
            return Ok(SubStep::Done(CallToolResult::error(format!(
                "prompt {:?} used its {SUB_PROMPT_MAX_STEPS} model calls without answering",
                self.prompt
            ))));
        }
        self.steps += 1;
        let own: Vec<Message> = thread
            .store()
            .sub_messages(&self.call.call.id)?
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
        let reply = self.at_depth_1(Message {
            tool_calls: completion.tool_calls.clone(),
            side: Some(self.side),
            ..Message::new(Role::Assistant, completion.text.clone(), now)
        });
        let reply = thread.store_at_depth_1(reply)?;
        if reply.tool_calls.is_empty() {
            return Ok(SubStep::Done(CallToolResult::text(completion.text)));
        }
        let calls = reply
            .tool_calls
            .iter()
            .map(|tc| SubToolCall {
                call: tc.clone(),
                message_id: reply.id.clone(),
                refused: self.refusal(tc, tools),
            })
            .collect();
        Ok(SubStep::RunTools(calls))
    }

    /// A call's result, stored at depth 1 (after the tool-result hooks).
    pub fn handle_tool_result(
        &mut self,
        thread: &mut Thread<'_>,
        now: i64,
        call: &ToolCall,
        result: CallToolResult,
    ) -> Result<(), ThreadError> {
        let result = match thread.hooks(1) {
            Some((hooks, ctx)) => {
                let (r, failures) = hooks.after_tool_call(&ctx, call, result);
                thread.hook_failures.extend(failures);
                r
            }
            None => result,
        };
        let message = self.at_depth_1(Message {
            side: Some(self.side),
            ..Message::tool_result(call, result.to_model_text(), now)
        });
        thread.store_at_depth_1(message).map(drop)
    }

    fn failed(&self, error: &ProviderError) -> SubStep {
        SubStep::Done(CallToolResult::error(format!(
            "prompt {:?} failed: {error}",
            self.prompt
        )))
    }

    fn refusal(&self, tc: &ToolCall, tools: &dyn ToolIndex) -> Option<CallToolResult> {
        let listed = self.tools.contains(&tc.name);
        match tools.tool_policy(&tc.name) {
            Some(policy) if listed && policy.needs_approval => {
                Some(CallToolResult::error(format!(
                    "{:?} needs a person's approval, which a sub-prompt cannot wait for; ask the user in the main conversation",
                    tc.name
                )))
            }
            Some(_) if listed => None,
            _ => {
                let available: Vec<&str> = self
                    .tools
                    .iter()
                    .map(String::as_str)
                    .filter(|t| tools.tool_policy(t).is_some())
                    .collect();
                Some(CallToolResult::error(format!(
                    "unknown tool {:?}; a sub-prompt may call its registered tools: {}",
                    tc.name,
                    available.join(", ")
                )))
            }
        }
    }

    /// Every message of the sub-prompt sits at depth 1, linked to the call it answers.
    fn at_depth_1(&self, m: Message) -> Message {
        Message {
            depth: 1,
            parent_message_id: Some(self.call.message_id.clone()),
            parent_tool_call_id: Some(self.call.call.id.clone()),
            ..m
        }
    }
}
