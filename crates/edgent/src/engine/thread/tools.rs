//! Tool calls in a thread: starting, parking and finishing them (hooks over results
//! included), and cancelling what a stopped thread would park.

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

    /// Parks a call (retrying, sleeping, waiting or rate limited) until its wake time.
    /// `failure` is why the attempt that just ran failed (for `retrying`).
    pub fn suspend_tool(
        &mut self,
        call: &StoredToolCall,
        suspension: &Suspension,
        failure: Option<(i64, &str, &str)>,
    ) -> Result<(), ThreadError> {
        let detail = (!suspension.detail.is_null()).then_some(&suspension.detail);
        let error = failure.map(|(_, _, e)| e);
        self.store.suspend_tool_call(
            &call.call.id,
            suspension.status.as_str(),
            suspension.wake_at,
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
            waiting_for: detail.cloned(),
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
        self.append(&message)?;
        self.after_create(&message);
        let status = if result.is_error() {
            CallStatus::Error
        } else {
            CallStatus::Success
        };
        // Also closes the running attempt with this outcome (trigger `attempt_finished`).
        self.store
            .finish_tool_call(now, &call.call.id, status.as_str(), &message.id)?;
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
        Ok(message)
    }
}
