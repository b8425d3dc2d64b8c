//! Tool calls in a thread: starting, parking and finishing them (hooks over results
//! included), cancelling what a stopped thread would park, and settling what a crash left on
//! a stopped thread.

use super::*;

impl<'a> Thread<'a> {
    /// The result for a call whose run ended after the thread stopped and would otherwise be
    /// parked (retry, sleep, wait): a stopped thread parks nothing.
    pub fn cancel_if_stopped(&self) -> Result<Option<CallToolResult>, ThreadError> {
        let t = self.summary()?;
        Ok((t.status == ThreadStatus::Stopped).then(|| {
            CallToolResult::error(format!(
                "cancelled: the thread was stopped (by {})",
                t.stopped_by.as_deref().unwrap_or("user")
            ))
        }))
    }

    /// Marks a tool call running; `new_attempt` is false when a parked workflow resumes.
    pub fn start_tool(
        &mut self,
        now: i64,
        call: &StoredToolCall,
        new_attempt: bool,
    ) -> Result<(), ThreadError> {
        self.store.start_tool_call(now, call, new_attempt)?;
        let attempt = call.attempts + i64::from(new_attempt);
        self.frames.push_back(ServerFrame::Tool {
            tool_call_id: call.call.id.clone(),
            name: call.call.name.clone(),
            status: CallStatus::Running,
            wake_at: None,
            waiting_for: None,
            attempt: Some(attempt.max(1)),
            error: None,
        });
        Ok(())
    }

    /// Parks a call after a run (retrying, sleeping, waiting or rate limited) until its wake
    /// time. `failure` is why the attempt that just ran failed (for `retrying`).
    pub fn suspend_tool(
        &mut self,
        call: &StoredToolCall,
        suspension: &Suspension,
        failure: Option<(i64, &str, &str)>,
    ) -> Result<(), ThreadError> {
        self.park(call, suspension, failure, true)
    }

    /// Parks a due call the gate did not start (approval, a rate limit still full): the wake
    /// time that made it due is spent, and the new one replaces it. (Kept, it would leave the
    /// call due at once again: a driver stepping it without end until the window frees.)
    pub(crate) fn park_unstarted(
        &mut self,
        call: &StoredToolCall,
        suspension: &Suspension,
    ) -> Result<(), ThreadError> {
        self.park(call, suspension, None, false)
    }

    /// `after_run`: an earlier wake time the call holds came from a webhook delivered while
    /// the run went on, and wins.
    fn park(
        &mut self,
        call: &StoredToolCall,
        suspension: &Suspension,
        failure: Option<(i64, &str, &str)>,
        after_run: bool,
    ) -> Result<(), ThreadError> {
        let detail = (!suspension.detail.is_null()).then_some(&suspension.detail);
        let error = failure.map(|(_, _, e)| e);
        self.store.suspend_tool_call(
            &call.call.id,
            suspension.status.as_str(),
            suspension.wake_at,
            after_run,
            detail,
            error,
        )?;
        if let Some((now, outcome, error)) = failure {
            self.store
                .end_attempt(now, &call.call.id, outcome, Some(error))?;
        }
        self.frames.push_back(ServerFrame::Tool {
            tool_call_id: call.call.id.clone(),
            name: call.call.name.clone(),
            status: suspension.status,
            wake_at: suspension.wake_at,
            // Frames reach every watcher (client tokens included) and the frame log: the
            // webhook URL, a capability for the outside system, stays in the call's record,
            // which only the server key reads whole.
            waiting_for: detail.map(crate::values::redact::without_capabilities),
            attempt: Some(call.attempts),
            error: error.map(str::to_owned),
        });
        Ok(())
    }

    /// Stores a tool result as a `tool` message and closes the call, atomically.
    pub fn finish_tool(
        &mut self,
        now: i64,
        call: &StoredToolCall,
        result: &CallToolResult,
    ) -> Result<Message, ThreadError> {
        self.close_call(now, call, result)
            .map(|(message, _)| message)
    }

    /// [`Thread::finish_tool`], also answering the thread row and its open-call count as the
    /// closing statement read them, when nothing written after it changed the row and no call
    /// is left open: what the next step reads, for a run's outcome to hand it on.
    pub(crate) fn close_call(
        &mut self,
        now: i64,
        call: &StoredToolCall,
        result: &CallToolResult,
    ) -> Result<(Message, Option<(ThreadSummary, i64)>), ThreadError> {
        let hooked;
        let result = match self.hooks(0) {
            Some((hooks, ctx)) => {
                let (r, failures) = hooks.after_tool_call(&ctx, &call.call, result.clone());
                self.hook_failures.extend(failures);
                hooked = r;
                &hooked
            }
            None => result,
        };
        let message = Message {
            parts: if result.has_media() {
                result.content.clone()
            } else {
                Vec::new()
            },
            // The side whose model called the tool: known from the running configuration,
            // else read (a result settled outside the turn loop: webhooks, cancellations). A
            // queued call's result has no side, like the call: both sides see them.
            side: match (call.origin, self.rules.side) {
                (CallOrigin::Model, Some(side)) => Some(side),
                (CallOrigin::Model, None) => Some(self.summary()?.current_side),
                _ => None,
            },
            ..Message::tool_result(&call.call, result.to_model_text(), now)
        };
        let message = self.before_create(message);
        let status = if result.is_error() {
            CallStatus::Error
        } else {
            CallStatus::Success
        };
        // The result and the call's closing in one transaction (a call never has a result it
        // does not point at). Closing also ends the running attempt with this outcome (trigger
        // `attempt_finished`).
        let (position, row) =
            self.store
                .append_result(now, &message, &call.call.id, status.as_str())?;
        self.note_appended(position, &message);
        self.after_create(&message);
        let is_stop_tool = call.origin == CallOrigin::Model
            && self.rules.stop_tool.as_deref() == Some(call.call.name.as_str());

        if is_stop_tool && !result.is_error() {
            let answer = stop_answer(
                &message.content,
                &call.call.arguments,
                self.rules.stop_tool_response_property.as_deref(),
            );
            match self.rules.kind {
                AgentKind::DualAi => self.store.set_ending("stop_tool", Some(&answer))?,
                AgentKind::AiHuman => self.store.set_result(&answer)?,
            }
            // No model call after this; the reply's other calls still run.
            self.store.set_needs_model(false)?;
        }
        self.frames
            .push_back(ServerFrame::tool(&call.call.id, &call.call.name, status));
        self.frames.push_back(ServerFrame::Message {
            message: message.clone(),
        });
        // The stop tool's writes came after the row was read.
        let row = row.filter(|(_, open)| *open == 0 && !is_stop_tool);
        Ok((message, row))
    }

    /// What a crash left behind on a stopped thread, which takes no step of its own: a reply
    /// still `pending` is failed, and a call without a result (one that was running when the
    /// Worker stopped, or one a stop cut short before it cancelled it) gets the stop's
    /// cancellation as its result. The driver steps a stopped thread only for these
    /// ([`Thread::step_wanted`]), never while a step of its own runs.
    pub(super) fn settle_stopped(
        &mut self,
        now: i64,
        t: &ThreadSummary,
    ) -> Result<(), ThreadError> {
        self.fail_interrupted_replies()?;
        let by = t.stopped_by.as_deref().unwrap_or("user");
        for call in self.store.pending_tool_calls()? {
            let why = format!("cancelled: the thread was stopped (by {by})");
            self.finish_tool(now, &call, &CallToolResult::error(why))?;
        }
        Ok(())
    }

    /// Whether a stopped thread holds what [`Thread::settle_stopped`] settles (`open_calls`:
    /// the calls without a result, counted with the thread row).
    pub(crate) fn stopped_with_leftovers(&self, open_calls: i64) -> Result<bool, ThreadError> {
        let settled = self.cache.as_ref().is_some_and(|c| c.replies_settled());
        Ok(open_calls > 0 || (!settled && !self.store.pending_messages()?.is_empty()))
    }
}
