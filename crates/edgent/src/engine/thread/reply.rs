//! A model reply as it arrives and ends: stream events become `message_chunk` frames, a whole
//! reply is stored with its tool calls (ending the turn in the same statement when nothing
//! else is owed), a failed or cut-short one is kept as `failed`.

use super::turn::ModelCall;
use super::*;

impl Thread<'_> {
    /// Feeds one stream event; text becomes a `message_chunk` frame. Text that arrives before
    /// the driver drains the frames (the events of one network read) is appended to the chunk
    /// still queued, so a reply goes out in as few frames as it arrived in reads.
    pub fn on_model_event(
        &mut self,
        call: &mut ModelCall,
        event: StreamEvent,
    ) -> Result<(), ProviderError> {
        call.completion.apply(&event)?;
        if let StreamEvent::TextDelta(delta) = event {
            match self.frames.back_mut() {
                Some(ServerFrame::MessageChunk {
                    message_id,
                    delta: queued,
                }) if *message_id == call.message_id => queued.push_str(&delta),
                _ => self.frames.push_back(ServerFrame::MessageChunk {
                    message_id: call.message_id.clone(),
                    delta,
                }),
            }
        }
        Ok(())
    }

    /// Tells clients a model attempt failed and what happens next (a retry or a fallback);
    /// the turn goes on.
    pub fn report_retry(&mut self, error: &ProviderError, model: &str, plan: &str) {
        self.frames.push_back(ServerFrame::error(
            "model_retry",
            format!("model {model:?}: {error}; {plan}"),
            None,
        ));
    }

    /// Tells clients the model's answer does not fit the prompt's `response_format` and that
    /// it is asked again with what is wrong (a `model_retry` frame: the turn goes on, and
    /// the pending reply is emptied next, as before any other new attempt).
    pub fn report_correction(&mut self, format_name: &str, why: &str) {
        self.frames.push_back(ServerFrame::error(
            "model_retry",
            format!(
                "the answer does not fit response_format {format_name:?}: {why}; asking the \
                 model again with what is wrong"
            ),
            None,
        ));
    }

    /// Forgets the partial reply of a failed attempt before the next one, and tells clients
    /// (a `message` frame with the pending message emptied) so streamed text is not doubled.
    pub fn reset_model_call(&mut self, call: &mut ModelCall) {
        call.completion = Completion::default();
        let message = self.reply_message(call, MessageStatus::Pending, false);
        self.frames.push_back(ServerFrame::Message { message });
    }

    /// Completes a model call: stores the reply and queues its tool calls. An incomplete
    /// reply (no finish, no end marker) is handled as [`Thread::fail_model_call`].
    pub fn finish_model_call(&mut self, now: i64, mut call: ModelCall) -> Result<(), ThreadError> {
        if self.stopped_since_call()? {
            // Stopped while streaming: keep what was said (clients saw it), run nothing.
            let status = if call.completion.text.is_empty() {
                MessageStatus::Failed
            } else {
                MessageStatus::Completed
            };
            let message = self.reply_message(&call, status, false);
            self.update(&message)?;
            self.note_replies_settled(true);
            self.frames.push_back(ServerFrame::Message { message });
            return Ok(());
        }
        if let Err(e) = call.completion.validate() {
            return self.fail_model_call(now, call, &e);
        }
        if let Some(why) = unfit_call_name(&call.completion.tool_calls) {
            return self.fail_model_call(now, call, &why);
        }
        let message = self.reply_message(&call, MessageStatus::Completed, true);
        let mut message = self.before_create(message);
        // Provider ids name calls in this thread only when they are unique in it and every
        // wire format takes them as they are: an empty, repeated or unfit one gets an id of
        // ours at once, and one the thread already holds (a provider reusing `call_1`) fails
        // the atomic store, which changed nothing, and the reply's calls are stored under ids
        // of ours.
        let mut seen = std::collections::HashSet::new();
        for c in &mut message.tool_calls {
            if !fits_every_wire(&c.id) || !seen.insert(c.id.clone()) {
                c.id = internal_call_id();
            }
        }
        let mut stored = self.store.store_reply(now, &message, CallOrigin::Model);
        if stored.as_ref().is_err_and(|e| e.0.contains("UNIQUE")) {
            for c in &mut message.tool_calls {
                c.id = internal_call_id();
            }
            stored = self.store.store_reply(now, &message, CallOrigin::Model);
        }
        let row_after = match stored {
            Ok(row) => row,
            Err(e) if !e.0.to_ascii_lowercase().contains("too big") => return Err(e.into()),
            Err(e) => {
                // Under the reply cap in raw bytes, but not as stored (escaped arguments): the call
                // fails once, kept without its calls (which never run), and is not asked again.
                call.completion.tool_calls.clear();
                let why = ProviderError::TooLarge(format!("the reply could not be stored: {e}"));
                return self.fail_model_call(now, call, &why);
            }
        };
        if let Some(cache) = &self.cache {
            cache.note_updated(&message);
        }
        self.note_replies_settled(true);
        self.after_create(&message);
        let mut ended = None;
        if !message.tool_calls.is_empty() || !self.rules.stop_on_response {
            // The model reacts to the results (or, without stop_on_response, keeps going
            // until its stop tool or max_steps). Nothing writes the row after this in the
            // step: the driver's next `step_wanted` takes the row from here. Calls owed it
            // in the statement that queued them, which read the row.
            let row = match row_after {
                Some(row) if !message.tool_calls.is_empty() => Some(row),
                _ => self.store.owe_model_again()?,
            };
            // Open calls are only this reply's (a count the row holds): the next step needs
            // not read them back.
            let calls = message.tool_calls.len();
            if row
                .as_ref()
                .is_some_and(|(_, open)| usize::try_from(*open) == Ok(calls))
            {
                self.calls_hint
                    .set(Some(stored_reply_calls(&message, CallOrigin::Model)));
            }
            self.row_hint.set(row);
        } else if self.rules.kind == AgentKind::AiHuman {
            // An answer that ends the turn, when nothing else is owed: the turn ends here,
            // in the statement that checks it (what `end_turn` would do at the next step,
            // which then reads no row). Otherwise the next step decides as usual.
            ended = self
                .store
                .finish_turn_if_settled(now, self.rules.max_turns)?;
        }
        // The message first, so clients know a call before they hear about its status.
        let queued: Vec<ServerFrame> = message
            .tool_calls
            .iter()
            .map(|c| ServerFrame::tool(&c.id, &c.name, CallStatus::Queued))
            .collect();
        self.frames.push_back(ServerFrame::Message { message });
        self.frames.extend(queued);
        if let Some((row, open_calls)) = ended {
            self.push_status_of(Some(&row))?;
            // Idle with no call left: the next `step_wanted` takes no step (unless a schedule
            // is due), and only a schedule can need the alarm.
            self.wake_hint.set(Some(row.next_schedule_at));
            self.row_hint.set(Some((row, open_calls)));
        }
        Ok(())
    }

    /// Abandons a model call: the message is kept as `failed`, the thread goes idle with the
    /// error recorded and reported, and stays usable for the next message.
    pub fn fail_model_call(
        &mut self,
        now: i64,
        call: ModelCall,
        error: &ProviderError,
    ) -> Result<(), ThreadError> {
        let message = self.reply_message(&call, MessageStatus::Failed, false);
        self.update(&message)?;
        self.note_replies_settled(true);
        self.frames.push_back(ServerFrame::Message { message });
        if self.stopped_since_call()? {
            // Cut short by a stop: that is what the user asked for, not an error.
            return Ok(());
        }
        self.fail_turn(now, error)
    }

    /// Ends the running turn with an error (reported to clients, kept as `last_error`); the
    /// thread goes idle and the next message starts a new turn.
    pub fn fail_turn(&mut self, now: i64, error: &ProviderError) -> Result<(), ThreadError> {
        let text = error.to_string();
        if self.summary()?.status == ThreadStatus::Running {
            self.store
                .set_status(now, ThreadStatus::Idle, Some(&text))?;
        }
        self.frames
            .push_back(ServerFrame::error(error.code(), text, None));
        self.push_status()?;
        Ok(())
    }

    /// Tells the object's cache whether a top-level reply may be pending.
    pub(super) fn note_replies_settled(&self, settled: bool) {
        if let Some(cache) = &self.cache {
            cache.set_replies_settled(settled);
        }
    }

    /// Whether the thread was stopped while a model call streamed: the object's cache knows
    /// (only an object stops its thread); a view without it reads the row.
    fn stopped_since_call(&self) -> Result<bool, ThreadError> {
        match &self.cache {
            Some(cache) => Ok(cache.stopped_here()),
            None => Ok(self.summary()?.status == ThreadStatus::Stopped),
        }
    }
}
