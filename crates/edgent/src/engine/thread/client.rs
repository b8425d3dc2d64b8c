//! Client operations on a thread: user and injected messages, queued tool calls, forced
//! turns, stop and approval decisions.

use super::*;

/// A message stored by `inject_message` (from a tool or a client).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InjectMessage {
    /// The text.
    pub content: String,
    /// Author; `user` unless given.
    #[serde(default = "user_role")]
    pub role: Role,
    /// Your own id for the message (1-128 of `A-Z a-z 0-9 _ - . :`); a fresh UUID if absent.
    #[serde(default)]
    pub id: Option<String>,
    /// Insert just before this message instead of at the end.
    #[serde(default)]
    pub before_message_id: Option<String>,
    /// For `tool` messages: the call this answers.
    #[serde(default)]
    pub tool_call_id: Option<String>,
    /// Participant or tool name.
    #[serde(default)]
    pub name: Option<String>,
    /// Kept and shown to clients that ask, never sent to a model.
    #[serde(default)]
    pub silent: bool,
    /// Store at depth 0 even when injected from a sub-flow.
    #[serde(default)]
    pub force_top_level: bool,
}

fn user_role() -> Role {
    Role::User
}

impl InjectMessage {
    /// A message with this role and text and every option at its default.
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        InjectMessage {
            content: content.into(),
            role,
            id: None,
            before_message_id: None,
            tool_call_id: None,
            name: None,
            silent: false,
            force_top_level: false,
        }
    }

    /// Marks the message silent (builder style).
    pub fn silent(mut self) -> Self {
        self.silent = true;
        self
    }

    fn check(&self) -> Result<(), ThreadError> {
        let invalid = |why: String| Err(ThreadError::Invalid(why));
        if self.content.is_empty() && self.role != Role::Tool {
            return invalid("content must not be empty".into());
        }
        if self.content.len() > crate::values::limits::MAX_CONTENT_BYTES {
            return invalid(format!(
                "content is {} bytes; the limit is {}",
                self.content.len(),
                crate::values::limits::MAX_CONTENT_BYTES
            ));
        }
        if let Some(id) = &self.id {
            let ok_char = |c: char| c.is_ascii_alphanumeric() || "_-.:".contains(c);
            if id.is_empty() || id.len() > 128 || !id.chars().all(ok_char) {
                return invalid(format!(
                    "id {id:?} must be 1-128 characters of A-Z a-z 0-9 _ - . :"
                ));
            }
        }
        match (self.role, &self.tool_call_id) {
            (Role::Tool, None) => return invalid("a tool message needs tool_call_id".into()),
            (Role::Tool, Some(_)) | (_, None) => {}
            (_, Some(_)) => return invalid("tool_call_id is only for role \"tool\"".into()),
        }
        if self
            .name
            .as_ref()
            .is_some_and(|n| n.is_empty() || n.len() > 64)
        {
            return invalid("name must be 1-64 characters".into());
        }
        Ok(())
    }
}

impl<'a> Thread<'a> {
    /// Stores a user message and starts a turn if none is running. The driver should then
    /// schedule work (an alarm) and loop on [`Thread::next_action`].
    pub fn post_user_message(&mut self, now: i64, content: &str) -> Result<Message, ThreadError> {
        let message = self.before_create(Message::new(Role::User, content, now));
        // Stored only while the thread is open, checked by the insert itself (no read of the
        // row first); the row is read only to say why not.
        let Some(position) = self.store.append_message_if_open(&message)? else {
            self.summary()?; // NotFound when there is no thread
            return Err(ThreadError::Stopped);
        };
        if let Some(cache) = &self.cache {
            cache.note_appended(position, &message);
        }
        self.after_create(&message);
        let row = self.store.owe_model(now)?;
        self.frames.push_back(ServerFrame::Message {
            message: message.clone(),
        });
        self.push_status_of(row.as_ref().map(|(t, _)| t))?;
        // The row as this write left it: the driver may hand it to the turn it starts, if
        // nothing writes in between (see `take_work_row`).
        self.work_row.set(row);
        Ok(message)
    }

    /// Stops the thread: no further model calls or tools; new messages are refused.
    pub fn stop(&mut self, now: i64, by: &str) -> Result<(), ThreadError> {
        let t = self.summary()?;
        if t.status != ThreadStatus::Stopped {
            self.conclude(now, by)?;
        }
        Ok(())
    }

    /// Queues a call of `name` (from a tool or a client, not the model): it runs after the
    /// calls already queued and before the next model call. An idle thread starts a turn that
    /// runs the queue (and calls the model only if something else asks for it, such as
    /// [`Thread::force_turn`]). Stored as an assistant message holding the call, so the
    /// history stays valid for every provider. Returns the call id.
    pub fn queue_tool(
        &mut self,
        now: i64,
        registry: &dyn ToolIndex,
        name: &str,
        arguments: Value,
    ) -> Result<String, ThreadError> {
        self.queue_tool_with_bindings(now, registry, name, arguments, None)
    }

    /// [`Thread::queue_tool`] with runtime bindings for the call (`flow.bindings`), kept
    /// apart from the arguments.
    pub fn queue_tool_with_bindings(
        &mut self,
        now: i64,
        registry: &dyn ToolIndex,
        name: &str,
        arguments: Value,
        bindings: Option<&serde_json::Map<String, Value>>,
    ) -> Result<String, ThreadError> {
        let t = self.summary()?;
        if t.status == ThreadStatus::Stopped {
            return Err(ThreadError::Stopped);
        }
        let Some(checked) = registry.check_arguments(name, arguments.clone()) else {
            return Err(ThreadError::UnknownTool(format!(
                "unknown tool {name:?}; registered tools: {}",
                registry.tool_names().join(", ")
            )));
        };
        checked.map_err(|why| {
            ThreadError::InvalidArguments(format!("invalid arguments for `{name}`: {why}"))
        })?;
        let call = ToolCall {
            id: format!("queued_{}", crate::values::ids::new_id().replace('-', "")),
            name: name.to_owned(),
            arguments: arguments.to_string(),
        };
        let message = Message {
            tool_calls: vec![call.clone()],
            // No side: a queued call (and its result) is the conversation's, not a model's, so
            // in a `dual_ai` thread both sides see it (`view_for_side`).
            side: None,
            ..Message::new(Role::Assistant, "", now)
        };
        let bindings = bindings
            .filter(|b| !b.is_empty())
            .map(|b| Value::Object(b.clone()));
        let position = self
            .store
            .append_queued_calls(now, &message, bindings.as_ref())?;
        self.note_appended(position, &message);
        self.frames.push_back(ServerFrame::Message { message });
        self.frames
            .push_back(ServerFrame::tool(&call.id, &call.name, CallStatus::Queued));
        if t.status == ThreadStatus::Idle {
            self.store.begin_turn(now)?;
            self.push_status()?;
        }
        Ok(call.id)
    }

    /// Stores a message without starting any work. Silent messages are kept for clients that
    /// ask for them and never shown to a model; `before_message_id` puts the message just
    /// before that one in history order.
    pub fn inject_message(
        &mut self,
        now: i64,
        inject: InjectMessage,
        depth: u32,
    ) -> Result<Message, ThreadError> {
        self.inject_message_under(now, inject, depth, None)
    }

    /// [`Thread::inject_message`] from a tool running inside a sub-prompt: `under` is the
    /// sub-prompt's reply that called the tool. The message joins that sub-prompt's
    /// conversation (its next model call reads it), as the tool's own result does; without
    /// this it would be stored at depth 1 where no model reads.
    pub fn inject_message_under(
        &mut self,
        now: i64,
        inject: InjectMessage,
        depth: u32,
        under: Option<&str>,
    ) -> Result<Message, ThreadError> {
        let (parent_message_id, parent_tool_call_id) = match under.filter(|_| depth > 0) {
            Some(id) => match self.store.message(id)? {
                Some(reply) => (Some(id.to_owned()), reply.parent_tool_call_id),
                None => (None, None),
            },
            None => (None, None),
        };
        self.summary()?;
        inject.check()?;
        let id = match inject.id {
            Some(id) if self.store.message_exists(&id)? => {
                return Err(ThreadError::Conflict(format!(
                    "a message with id {id:?} already exists"
                )))
            }
            Some(id) => id,
            None => crate::values::ids::new_id(),
        };
        let message = self.before_create(Message {
            name: inject.name,
            tool_call_id: inject.tool_call_id,
            silent: inject.silent,
            depth,
            parent_message_id,
            parent_tool_call_id,
            ..Message::with_id(id, inject.role, inject.content, now)
        });
        match &inject.before_message_id {
            Some(before) => {
                if !self.store.insert_message_before(&message, before)? {
                    return Err(ThreadError::Invalid(format!(
                        "before_message_id {before:?} is not a message of this thread"
                    )));
                }
            }
            None => self.append(&message)?,
        }
        self.after_create(&message);
        if !message.silent {
            self.frames.push_back(ServerFrame::Message {
                message: message.clone(),
            });
        }
        Ok(message)
    }

    /// Makes `side` take the next turn once queued tools have run: its model is called even
    /// without a new message. Starts a turn on an idle thread.
    pub fn force_turn(&mut self, now: i64, side: Side) -> Result<(), ThreadError> {
        let t = self.summary()?;
        if t.status == ThreadStatus::Stopped {
            return Err(ThreadError::Stopped);
        }
        self.store.set_side(now, side)?;
        let row = self.store.owe_model(now)?;
        self.push_status_of(row.as_ref().map(|(t, _)| t))
    }

    /// Answers the last user message again (the AI SDK's `regenerate-message`): the previous
    /// answer is kept for clients but marked failed, so the model never sees it, and the
    /// thread owes the model a call. Only an idle thread regenerates (409 while an answer is
    /// being written or a call is open).
    pub fn regenerate(&mut self, now: i64) -> Result<(), ThreadError> {
        let t = self.summary()?;
        match t.status {
            ThreadStatus::Stopped => return Err(ThreadError::Stopped),
            ThreadStatus::Running => {
                return Err(ThreadError::Conflict(
                    "an answer is being written; stop it or wait before regenerating".into(),
                ))
            }
            ThreadStatus::Idle => {}
        }
        if !self.store.pending_tool_calls()?.is_empty() {
            return Err(ThreadError::Conflict(
                "a tool call of the last answer is still open; decide or wait for it first".into(),
            ));
        }
        if self.store.foreign_messages_in_last_answer()? > 0 {
            return Err(ThreadError::Conflict(
                "the last answer holds messages the server added (injected, or queued tool \
                 calls); regenerating would hide them"
                    .into(),
            ));
        }
        for message in self.store.retract_last_answer()? {
            if let Some(cache) = &self.cache {
                cache.note_updated(&message);
            }
            self.frames.push_back(ServerFrame::Message { message });
        }
        let row = self.store.owe_model(now)?;
        self.push_status_of(row.as_ref().map(|(t, _)| t))
    }

    /// A client's decision on a call waiting for approval: approved calls run, rejected ones
    /// get an error result (with `reason`) the model sees. Both happen on the next drive.
    pub fn decide_approval(
        &mut self,
        now: i64,
        call_id: &str,
        approved: bool,
        reason: Option<&str>,
    ) -> Result<(), ThreadError> {
        self.summary()?;
        let Some(call) = self.store.tool_call(call_id)? else {
            return Err(ThreadError::Invalid(format!(
                "no tool call {call_id:?} in this thread"
            )));
        };
        // A pending approval of a finished call (cancelled by a stop) is no longer open.
        let finished = matches!(call.status, CallStatus::Success | CallStatus::Error);
        if finished || call.approval != Some(Approval::Pending) {
            return Err(ThreadError::Conflict(format!(
                "tool call {call_id:?} is not waiting for approval (status {})",
                call.status.as_str()
            )));
        }
        let decision = if approved {
            Approval::Approved
        } else {
            Approval::Rejected
        };
        let reason = reason.filter(|r| !approved && !r.trim().is_empty());
        self.store
            .decide_approval(now, call_id, decision.as_str(), reason)?;
        Ok(())
    }
}
