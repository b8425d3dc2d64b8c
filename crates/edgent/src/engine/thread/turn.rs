//! The turn: the rules a side runs under, the next action derived from what is stored (a
//! model call, tool calls), and how a turn and a conversation end.

use super::*;
use crate::values::limits::MAX_CONCURRENT_TOOL_RUNS;

/// The rules a side's turn runs under, from the agent's configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnRules {
    /// Who talks: a human and side A, or sides A and B.
    pub kind: AgentKind,
    /// Turns before the conversation ends.
    pub max_turns: u32,
    /// An answer without tool calls ends the side's turn.
    pub stop_on_response: bool,
    /// Calling this tool ends the turn (ai_human) or the conversation (dual_ai).
    pub stop_tool: Option<String>,
    /// Which property of the stop tool's result (or arguments) is the final answer.
    pub stop_tool_response_property: Option<String>,
    /// Several tool calls of one reply run concurrently.
    pub parallel_tool_calls: bool,
    /// Estimated tokens of history sent to the model.
    pub max_history_tokens: u32,
    /// How the other side is named when its words are shown as user messages.
    pub other_label: Option<String>,
    /// The side these rules are for, when known (from the loaded configuration): the side a
    /// tool result belongs to, without reading the thread row.
    pub side: Option<Side>,
    /// The agent's spending budget over the thread's life: tokens, US dollars.
    pub max_tokens: Option<u64>,
    /// See `max_tokens`.
    pub max_cost_usd: Option<f64>,
    /// The prompt summarises its older messages instead of leaving them out
    /// (`compaction_prompt`).
    pub compacts: bool,
}

impl Default for TurnRules {
    fn default() -> Self {
        TurnRules {
            kind: AgentKind::AiHuman,
            max_turns: DEFAULT_MAX_TURNS,
            stop_on_response: true,
            stop_tool: None,
            stop_tool_response_property: None,
            parallel_tool_calls: false,
            max_history_tokens: DEFAULT_MAX_HISTORY_TOKENS,
            other_label: None,
            side: None,
            max_tokens: None,
            max_cost_usd: None,
            compacts: false,
        }
    }
}

impl TurnRules {
    /// The rules of the side `config` runs.
    pub fn from_config(config: &AgentConfig) -> Self {
        let side = config.side_config();
        let other = match config.side {
            Side::A => config.agent.side_b.as_ref(),
            Side::B => Some(&config.agent.side_a),
        };
        TurnRules {
            kind: config.agent.kind,
            max_turns: config.agent.max_turns,
            stop_on_response: side.stop_on_response,
            stop_tool: side.stop_tool.clone(),
            stop_tool_response_property: side.stop_tool_response_property.clone(),
            parallel_tool_calls: config.prompt.parallel_tool_calls,
            max_history_tokens: config
                .model()
                .and_then(|m| m.max_history_tokens)
                .unwrap_or(DEFAULT_MAX_HISTORY_TOKENS),
            other_label: other.and_then(|o| o.label.clone()),
            side: Some(config.side),
            max_tokens: config.agent.max_tokens,
            max_cost_usd: config.agent.max_cost_usd,
            compacts: config.compaction.is_some(),
        }
    }

    /// Why a thread that has used `tokens` and `cost_usd` may not call the model again, if
    /// its budget is spent.
    pub fn over_budget(&self, tokens: i64, cost_usd: f64) -> Option<String> {
        let tokens = u64::try_from(tokens).unwrap_or(0);
        if let Some(max) = self.max_tokens.filter(|max| tokens >= *max) {
            return Some(format!(
                "the thread used {tokens} tokens, its agent's budget is {max} (max_tokens)"
            ));
        }
        if let Some(max) = self.max_cost_usd.filter(|max| cost_usd >= *max) {
            return Some(format!(
                "the thread spent ${cost_usd:.4}, its agent's budget is ${max:.4} (max_cost_usd)"
            ));
        }
        None
    }
}

/// What the driver must do next.
#[derive(Debug)]
pub enum Action {
    /// Nothing to do until new input arrives.
    Idle,
    /// The turn moved on (the other side's turn began): reload the configuration for the
    /// current side and ask again.
    Continue,
    /// Call the model with this history; stream the reply into [`Thread::on_model_event`].
    CallModel(ModelCall),
    /// Run this tool call, then report with [`Thread::finish_tool`].
    RunTool(StoredToolCall),
    /// Run these calls of one reply concurrently; report each with [`Thread::finish_tool`],
    /// in this order.
    RunTools(Vec<StoredToolCall>),
    /// Summarise these older messages first ([`Thread::handle_compaction`]), then ask again.
    Compact(super::CompactJob),
    /// The turn waits for parked tool calls (sleeping, waiting, retrying, rate limited):
    /// nothing to do before [`Store::next_wake`] or an outside event (webhook, approval).
    Wait,
}

/// An in-flight model call: the pending assistant message and the reply assembled so far.
///
/// Lives only in the driver's memory; if the process dies, the pending message is marked
/// failed on the next [`Thread::next_action`] and the call is made again.
#[derive(Debug)]
pub struct ModelCall {
    /// The pending assistant message receiving the reply.
    pub message_id: String,
    /// The model-ready history (repaired: every tool call has a result). Shared with the
    /// object's history cache when it is verbatim (no copy of the messages per call).
    pub history: Rc<Vec<Message>>,
    /// `Some(history version)` when `history` is the thread's stored messages exactly as
    /// stored at that version (no hook, side view, compaction summary or repair changed it):
    /// the driver may then let the wire format reuse what it wrote for them before
    /// ([`crate::llm::memo`]).
    pub verbatim: Option<i64>,
    /// The reply so far.
    pub completion: Completion,
    /// The final answer's value, when the prompt has a `response_format` and the reply is
    /// its answer, checked (the driver sets it from `engine::structured::judge`); stored with
    /// the reply.
    pub structured: Option<Value>,
    pub(super) created_at: i64,
    pub(super) side: Side,
}

impl<'a> Thread<'a> {
    /// Decides the next step from stored state. Recovers from an interrupted step first.
    ///
    /// Order: queued tool calls first (model calls, then calls queued by tools and clients,
    /// in queue order), then the model if it is owed a call, else the turn ends.
    pub fn next_action(&mut self, now: i64, max_steps: u32) -> Result<Action, ThreadError> {
        // A fresh read: what a reply's step knew of its calls may be stale by now.
        self.calls_hint.take();
        let Some((t, open_calls)) = self.store.thread_and_open_calls()? else {
            return Ok(Action::Idle);
        };
        self.note_open_calls(open_calls);
        self.next_action_for(now, max_steps, t)
    }

    /// Whether [`Thread::next_action_for`] with `t`, `rules` and `max_steps` can only ask for
    /// a model call (or a compaction before it): the thread runs, the model is owed a call, no
    /// tool call is open (none to run, none to wait for: known from the row the driver just
    /// read, else `false`), and the turn's steps and the budget `rules` allow one more. A
    /// driver may plan such a step with a configuration copy it is still confirming: nothing
    /// is run before the model request, which waits for the confirmation
    /// (`runtime::config_check`).
    pub fn only_a_model_step_next(
        &self,
        t: &ThreadSummary,
        rules: &TurnRules,
        max_steps: u32,
    ) -> bool {
        t.status == ThreadStatus::Running
            && t.needs_model
            && self.open_calls.get() == Some(0)
            && t.steps < i64::from(max_steps)
            && rules.over_budget(t.tokens_used, t.cost_usd).is_none()
    }

    /// Remembers the count of calls without a result read with the thread row, for the
    /// `next_action_for` that follows with that row.
    pub(crate) fn note_open_calls(&self, count: i64) {
        self.open_calls.set(Some(count));
    }

    /// The row a model step's last write returned, once.
    pub(crate) fn take_row_hint(&self) -> Option<(ThreadSummary, i64)> {
        self.row_hint.take()
    }

    /// The thread row (and its open-call count) as the write that stored a user message on
    /// this view returned it. A driver that knows nothing has written since may give it to
    /// the view that runs the turn ([`Thread::set_row_hint`]), whose first step then reads
    /// no row.
    pub fn take_work_row(&self) -> Option<(ThreadSummary, i64)> {
        self.work_row.take()
    }

    /// A row the driver knows to be current ([`Thread::take_work_row`] of a view with nothing
    /// written since), for the next `step_wanted`.
    pub fn set_row_hint(&self, row: (ThreadSummary, i64)) {
        self.row_hint.set(Some(row));
    }

    /// Drops the row the last model step returned: the driver calls it before it awaits
    /// anything other than that step, since another event may change the row meanwhile.
    pub fn forget_row_hint(&self) {
        self.row_hint.set(None);
        self.wake_hint.set(None);
        self.calls_hint.take();
    }

    /// What [`Thread::poll_timeout`] would answer, when the step that just returned
    /// [`Action::Idle`](crate::engine::thread::Action::Idle) or
    /// [`Action::Wait`](crate::engine::thread::Action::Wait) knows it from the calls it read
    /// (nothing written to them since). Ask right after that step, before anything awaits;
    /// `None` means read it with `poll_timeout`.
    pub fn take_wake_hint(&mut self) -> Option<Option<i64>> {
        self.wake_hint.take()
    }

    /// [`Thread::next_action`] from the thread row the driver has just read
    /// ([`Thread::step_wanted`]), when nothing can have changed it since (no await in
    /// between): one read of the row less per step.
    pub fn next_action_for(
        &mut self,
        now: i64,
        max_steps: u32,
        mut t: ThreadSummary,
    ) -> Result<Action, ThreadError> {
        self.pending_ids = None;
        let calls_hint = self.calls_hint.take();
        self.forget_row_hint();
        let open_calls = self.open_calls.take();
        let none_open = open_calls == Some(0);
        if t.status == ThreadStatus::Idle && !none_open && self.store.next_tool_call(now)?.is_some()
        {
            // A parked call (a queued workflow's sleep, a webhook) is due on an idle thread:
            // it runs in a turn of its own, as a freshly queued call would.
            self.store.begin_turn(now)?;
            self.push_status()?;
            t.status = ThreadStatus::Running;
        }
        if t.status == ThreadStatus::Stopped {
            self.settle_stopped(now, &t)?;
            return Ok(Action::Idle);
        }
        if t.status != ThreadStatus::Running {
            return Ok(Action::Idle);
        }
        // A model call cut short by eviction or a crash left its message pending: it is
        // marked failed and the call is owed again.
        let recovered = self.fail_interrupted_replies()?;
        if recovered {
            self.store.set_needs_model(true)?;
        }
        let tools = self.next_tools(now, none_open, calls_hint)?;
        // The wake time the calls gave, or the earliest schedule's when sooner.
        if let Some(wake) = self.wake_hint.get() {
            self.wake_hint.set(Some(earliest(wake, t.next_schedule_at)));
        }
        if let Some(action) = tools {
            return Ok(action);
        }
        if !(t.needs_model || recovered) {
            return self.end_turn(now, &t);
        }
        if t.steps >= i64::from(max_steps) {
            let why = format!("the turn used its {max_steps} model calls without finishing");
            self.frames
                .push_back(ServerFrame::error("max_steps", why.clone(), None));
            let action = self.end_turn(now, &t)?;
            if self.summary()?.status == ThreadStatus::Idle {
                self.store.set_status(now, ThreadStatus::Idle, Some(&why))?;
            }
            return Ok(action);
        }
        if let Some(why) = self.rules.over_budget(t.tokens_used, t.cost_usd) {
            // Spent: the conversation ends here, as it would at max_turns (parked calls get
            // their cancellation results; a client may read everything but no model is asked).
            self.frames
                .push_back(ServerFrame::error("budget", why.clone(), None));
            self.conclude(now, "budget")?;
            return Ok(Action::Idle);
        }
        let budget = self.history_budget();
        if self.rules.compacts {
            if let Some(job) = self.compaction_due(now, budget)? {
                return Ok(Action::Compact(job));
            }
        }
        // Also clears `needs_model`: set again by a reply with tool calls, a user message or a
        // forced turn arriving while the model streams.
        let (history_version, visible) = self.store.add_step(now)?;
        // Whether the history goes to the model as stored (see `ModelCall::verbatim`).
        let mut verbatim =
            self.cache.is_some() && !self.rules.compacts && self.rules.kind == AgentKind::AiHuman;
        let history = match &self.cache {
            // The summary and what follows it (read each call: the cache keeps no summary).
            _ if self.rules.compacts => Rc::new(self.compacted_history(budget)?),
            Some(cache) => self
                .store
                .model_cached(budget, history_version, visible, cache)?,
            None => Rc::new(self.store.model_history_within(budget)?),
        };
        // Calls still parked (queued workflows that sleep or wait) have no result yet: the
        // model does not see them until they finish.
        let parked = match self.pending_ids.take() {
            Some(ids) => ids,
            None => self.store.pending_tool_call_ids()?,
        };
        let hooks = self.hooks(0);
        verbatim &= parked.is_empty() && hooks.is_none() && well_paired(&history);
        // Otherwise a copy, shaped for the model.
        let history = if verbatim {
            history
        } else {
            let mut history = Rc::unwrap_or_clone(history);
            if self.rules.kind == AgentKind::DualAi {
                let other = self.rules.other_label.as_deref();
                history = view_for_side(history, t.current_side, other);
            }
            history = repair_history(without_calls(history, &parked));
            if let Some((hooks, ctx)) = hooks {
                let (filtered, failures) = hooks.prefilter_llm_history(&ctx, history);
                self.hook_failures.extend(failures);
                // A hook may drop a call or its result; the model still gets valid pairs.
                history = repair_history(filtered);
            }
            Rc::new(history)
        };
        let message = Message {
            status: MessageStatus::Pending,
            side: Some(t.current_side),
            ..Message::new(Role::Assistant, "", now)
        };
        self.note_replies_settled(false);
        self.append(&message)?;
        self.frames.push_back(ServerFrame::Message {
            message: message.clone(),
        });
        Ok(Action::CallModel(ModelCall {
            message_id: message.id,
            history,
            verbatim: verbatim.then_some(history_version),
            completion: Completion::default(),
            structured: None,
            created_at: now,
            side: t.current_side,
        }))
    }

    /// Marks failed the replies a crash or an eviction left `pending` (kept for clients, never
    /// sent to a model); whether there were any. An object that saw every reply it began
    /// stored as final knows there is none (see `ThreadCache`).
    pub(super) fn fail_interrupted_replies(&mut self) -> Result<bool, ThreadError> {
        let settled = self.cache.as_ref().is_some_and(|c| c.replies_settled());
        let interrupted = if settled {
            Vec::new()
        } else {
            self.store.pending_messages()?
        };
        let recovered = !interrupted.is_empty();
        for mut m in interrupted {
            m.status = MessageStatus::Failed;
            self.update(&m)?;
            self.frames.push_back(ServerFrame::Message { message: m });
        }
        self.note_replies_settled(true);
        Ok(recovered)
    }

    /// The next tool call(s) to run, abandoning calls that keep killing the Worker. With
    /// parallel tool calls, every due call of the same model reply runs together. A parked
    /// call holds nothing but its own reply: when the only calls left of a model reply are
    /// parked, the turn waits ([`Action::Wait`]) for the earliest wake time.
    /// `none_open`: the thread row's read just counted no call without a result; `known`:
    /// the calls without a result as the reply that returned that row stored them.
    fn next_tools(
        &mut self,
        now: i64,
        none_open: bool,
        known: Option<Vec<StoredToolCall>>,
    ) -> Result<Option<Action>, ThreadError> {
        let mut none_open = none_open;
        let mut known = known;
        loop {
            // One read of the calls without a result (few, through the status index) answers
            // everything below: the due call (queued or running without a wake time, or
            // parked with a past one; the oldest first), its batch, and which calls are parked.
            // None to read when the count said so, or when the step that stored them knew
            // them (only before this loop wrote any).
            let pending = if std::mem::take(&mut none_open) {
                Vec::new()
            } else if let Some(calls) = known.take() {
                calls
            } else {
                self.store.pending_tool_calls()?
            };
            let is_due = |c: &StoredToolCall| match c.wake_at {
                None => matches!(c.status, CallStatus::Queued | CallStatus::Running),
                Some(at) => at <= now,
            };
            let Some(call) = pending.iter().find(|c| is_due(c)).cloned() else {
                // The earliest wake among them is what `poll_timeout` would read, while
                // nothing changes them (`conclude` forgets it).
                self.wake_hint
                    .set(Some(pending.iter().filter_map(|c| c.wake_at).min()));
                if pending.iter().any(|c| c.origin == CallOrigin::Model) {
                    return Ok(Some(Action::Wait));
                }
                // Kept for the model call that may follow: parked calls are not shown to it.
                self.pending_ids = Some(pending.into_iter().map(|c| c.call.id).collect());
                return Ok(None);
            };
            let mut call = call;
            if call.status == CallStatus::Running {
                // It was running when the Worker stopped (a crash, an eviction, a deploy).
                self.store.count_interruption(&call.call.id)?;
                self.store
                    .end_attempt(now, &call.call.id, "interrupted", None)?;
                call.interruptions += 1;
                if worn_out(&call) {
                    // Cut short this often: the tool itself kills the Worker (a panic, an
                    // exceeded limit). Record that instead of crashing in a loop.
                    let why = format!(
                        "this tool call was interrupted {} times (the Worker stopped while it ran) and was abandoned",
                        call.interruptions
                    );
                    self.finish_tool(now, &call, &CallToolResult::error(why))?;
                    continue;
                }
            }
            if !(self.rules.parallel_tool_calls && call.origin == CallOrigin::Model) {
                return Ok(Some(Action::RunTool(call)));
            }
            let mut batch = vec![call.clone()];
            for other in pending {
                if batch.len() >= MAX_CONCURRENT_TOOL_RUNS {
                    // The rest run in the next batch, once these have their results.
                    break;
                }
                let due =
                    other.status == CallStatus::Queued || other.wake_at.is_some_and(|w| w <= now);
                if other.call.id != call.call.id
                    && other.message_id == call.message_id
                    && other.origin == CallOrigin::Model
                    && due
                {
                    batch.push(other);
                }
            }
            return Ok(Some(if batch.len() > 1 {
                Action::RunTools(batch)
            } else {
                Action::RunTool(call)
            }));
        }
    }

    /// Closes the running side's turn and applies the stop rules: a pending end (a stop
    /// tool) or `max_turns` ends the conversation; in a dual-AI thread the other side goes
    /// next; otherwise the thread waits for a message.
    fn end_turn(&mut self, now: i64, t: &ThreadSummary) -> Result<Action, ThreadError> {
        let (turns, side) = self.store.finish_turn(now)?;
        if let Some(reason) = &t.ending {
            self.conclude(now, reason)?;
            return Ok(Action::Idle);
        }
        if turns >= i64::from(self.rules.max_turns) {
            self.conclude(now, "max_turns")?;
            return Ok(Action::Idle);
        }
        if self.rules.kind == AgentKind::DualAi && t.steps > 0 {
            self.store.set_side(now, t.current_side.other())?;
            self.store.begin_turn(now)?;
            self.store.set_needs_model(true)?;
            self.push_status()?;
            return Ok(Action::Continue);
        }
        self.frames
            .push_back(ServerFrame::status(ThreadStatus::Idle, turns, side));
        Ok(Action::Idle)
    }

    /// Ends the conversation: the final answer is kept (the last assistant text unless a stop
    /// tool gave one) and the thread is stopped by `reason`.
    pub(super) fn conclude(&mut self, now: i64, reason: &str) -> Result<(), ThreadError> {
        if self.summary()?.result.is_none() {
            if let Some(text) = self.store.last_assistant_text()? {
                self.store.set_result(&text)?;
            }
        }
        self.store.set_stopped(now, reason)?;
        self.wake_hint.set(None);
        if let Some(cache) = &self.cache {
            cache.note_stopped();
        }
        // Parked and queued calls will not run on a stopped thread: each gets its error result
        // now, so the history stays whole and no alarm wakes them. A running call finishes
        // normally (and is not parked again: see `cancel_if_stopped`).
        for call in self.store.pending_tool_calls()? {
            if call.status != CallStatus::Running {
                let why = format!("cancelled: the thread was stopped (by {reason})");
                self.finish_tool(now, &call, &CallToolResult::error(why))?;
            }
        }
        self.push_status()
    }
}

/// The earlier of two optional instants (`None`: never).
pub(super) fn earliest(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
