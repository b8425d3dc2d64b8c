//! The turn loop: loads the running side's configuration, performs the engine's actions
//! (model calls through the retry/fallback chain, tool calls, delegates) and broadcasts what
//! they produce, then sets the alarm where the engine says.

use std::rc::Rc;

use serde_json::Value;

use super::chain::{run_checked_chain, superseded, RequestParts};
use super::config_check::{ConfigCheck, Verdict};
use super::stream_sink::MainSink;
use super::ThreadRuntime;
use crate::config::{AgentConfig, PromptConfig};
use crate::engine::request_log::ModelRequestLog;
use crate::engine::store::{estimate_tokens, ThreadStatus};
use crate::engine::thread::{Action, ModelCall, Thread, ThreadError, TurnRules};
use crate::engine::wake::{
    alarm_after_loop, watchdog_due, AlarmChange, KnownAlarm, LoopEnd, WATCHDOG_MS,
};
use crate::llm::memo::MemoUse;
use crate::llm::stream::{Completion, ProviderError};
use crate::llm::OutputFormat;
use crate::values::message::Message;
use crate::values::sql::Sql;

impl ThreadRuntime {
    /// Appends to the request log; a failure to log never fails the turn.
    pub(super) fn record(&self, thread: &Thread<'_>, log: &ModelRequestLog) {
        if let Err(e) = thread.record_model_request(log) {
            self.platform
                .log_error(&format!("could not log a model request: {e}"));
        }
    }

    /// (Re-)arms the watchdog. Returns the error a failed write gave. The watchdog is known
    /// to be armed only if no other change of the alarm was issued while this one was on its
    /// way: that one lands after it.
    pub(super) async fn arm_watchdog(&self) -> Result<(), String> {
        let change = self.alarm_changes();
        // When it fires counts from now, not from when the write answers.
        let until = self.now() + WATCHDOG_MS;
        self.platform.set_alarm(WATCHDOG_MS).await?;
        if self.alarm_change.get() == change {
            self.alarm.set(KnownAlarm::Watchdog(until));
        }
        Ok(())
    }

    /// A change of the alarm is about to be issued (or the alarm changed by itself): what this
    /// instance knew of it no longer holds. Returns the change's number.
    pub(super) fn alarm_changes(&self) -> u64 {
        let change = self.alarm_change.get() + 1;
        self.alarm_change.set(change);
        self.alarm.set(KnownAlarm::Unknown);
        change
    }

    /// The turn loop: performs actions until the thread has nothing to do, then sets the
    /// alarm where the engine says (the earliest parked call, or nowhere).
    pub(super) async fn drive(&self) {
        if self.driving.replace(true) {
            // The watchdog fired while a long step runs in this instance: keep one armed, or
            // a crash after this point would leave nothing to resume the turn.
            let _ = self.arm_watchdog().await;
            return;
        }
        self.stop_requested.set(false);
        let sql = self.platform.sql();
        loop {
            self.work_arrived.set(false);
            // Boxed: `drive` is awaited from three places (the alarm, `start_work`'s spawned
            // task, a parent waiting on a child), and unboxed its steps were inlined into two
            // of them, ~10 KB of wasm twice.
            let (known, end) = Box::pin(self.drive_steps(sql)).await;
            let wake = match known {
                Some(wake) => wake,
                None => self
                    .open(sql, false)
                    .and_then(|t| t.poll_timeout())
                    .ok()
                    .flatten(),
            };
            let change = alarm_after_loop(wake, end, self.alarm.get(), self.now());
            if change != AlarmChange::Keep {
                // Forgotten before the change is issued, and not learnt after it: a handler
                // storing work meanwhile arms the watchdog again, and its `set_alarm` lands
                // after ours (storage operations complete in order); an arming still on its
                // way learns nothing either (see `arm_watchdog`).
                self.alarm_changes();
            }
            let _ = match change {
                AlarmChange::Set(at) => self.platform.set_alarm((at - self.now()).max(0)).await,
                AlarmChange::Delete => self.platform.delete_alarm().await,
                AlarmChange::Keep => Ok(()),
            };
            // Work stored while we drove or changed the alarm is ours: `start_work` saw us
            // driving and left it. Checked with no await before `driving` is cleared.
            if !self.work_arrived.get() {
                break;
            }
        }
        self.driving.set(false);
    }

    /// Performs the engine's actions until it has no step to take now. Returns when the
    /// thread must wake next if the last step knew it (else the caller asks `poll_timeout`),
    /// and how the loop stopped.
    async fn drive_steps(&self, sql: &dyn Sql) -> (Option<Option<i64>>, LoopEnd) {
        let mut agent: Option<Rc<AgentConfig>> = None;
        // The check of a copy older than its bound, until a step waited for it.
        let mut check: Option<ConfigCheck> = None;
        let handed = self.handed_row.take();
        let mut thread = match self.open(sql, false) {
            Ok(t) => {
                if let Some(row) = handed {
                    t.set_row_hint(row);
                }
                t
            }
            Err(ThreadError::NotFound) => return (None, LoopEnd::Other),
            Err(e) => {
                self.platform.log_error(&format!("cannot open thread: {e}"));
                return (None, LoopEnd::Other);
            }
        };
        // Whether the last pass armed the watchdog: a failed arming is not tried again at once.
        let mut just_armed = false;
        // The order of calls is the engine's (see `crate::engine::wake`).
        loop {
            let summary = match thread.step_wanted(self.now()) {
                Ok(Some(summary)) => summary,
                wanted => {
                    // A reply that ended the turn in its own step knows the alarm (nothing
                    // parked).
                    let wake = thread.take_wake_hint();
                    self.flush(&mut thread);
                    let end = match wanted {
                        Ok(_) => LoopEnd::Idle,
                        Err(_) => LoopEnd::Other,
                    };
                    break (wake, end);
                }
            };
            // The watchdog is re-armed once half of it has run out, not at every step (and not
            // right after `start_work` armed it): if we die, it resumes the turn in time. After
            // `step_wanted`, so a watchdog that fires on an idle thread arms nothing.
            if !just_armed && watchdog_due(self.alarm.get(), self.now()) {
                thread.forget_row_hint();
                // Frames never wait behind an await (see the end of `call_model`).
                self.flush(&mut thread);
                let _ = self.arm_watchdog().await;
                just_armed = true;
                // Arming awaited: the row is read again.
                continue;
            }
            just_armed = false;
            if thread.schedules_due(&summary, self.now()) {
                // What fell due is stored as a client's would be (a message, a queued call);
                // the next step reads the row it changed.
                let registry = self.platform.registry();
                match thread.fire_due_schedules(self.now(), registry) {
                    Ok(fired) if fired > 0 => {
                        thread.forget_row_hint();
                        continue;
                    }
                    // Due by the row but none found: never loop on it (the step goes on).
                    Ok(_) => {}
                    Err(e) => {
                        self.platform
                            .log_error(&format!("could not fire a schedule: {e}"));
                        self.flush(&mut thread);
                        break (None, LoopEnd::Other);
                    }
                }
            }
            if summary.status == ThreadStatus::Stopped {
                // What a crash left on a stopped thread (a pending reply, calls without a
                // result) is settled without the agent's configuration, which may be gone.
                let end = match thread.next_action_for(self.now(), 0, summary) {
                    Ok(_) => LoopEnd::Idle,
                    Err(e) => {
                        self.platform.log_error(&format!("turn loop error: {e}"));
                        LoopEnd::Other
                    }
                };
                let wake = thread.take_wake_hint();
                self.flush(&mut thread);
                return (wake, end);
            }
            let (agent_id, side) = (&summary.agent_id, summary.current_side);
            let mut stale = agent
                .as_ref()
                .is_none_or(|a| a.agent_id() != agent_id || a.side != side);
            if stale {
                // A check still pending was the previous agent's or side's.
                check = None;
                // From the host's cache without yielding: the copy itself when it is fresh;
                // else, when the next step can only be a model request, the copy to plan it
                // with while it is confirmed (see `config_check`).
                let cached = match self.platform.fresh_agent(agent_id, side) {
                    Some(a) => {
                        self.keep_copy(&thread, &a);
                        Some(a)
                    }
                    None => self
                        .platform
                        .cached_agent(agent_id, side)
                        .or_else(|| self.adopt_kept_copy(&thread, agent_id, side))
                        .filter(|a| {
                            let rules = TurnRules::from_config(a);
                            thread.only_a_model_step_next(&summary, &rules, a.max_steps())
                        })
                        .inspect(|a| {
                            let confirm = self.platform.load_agent(agent_id, side);
                            check = Some(ConfigCheck::new(a.clone(), confirm));
                        }),
                };
                if let Some(a) = cached {
                    self.record_hooks(&mut thread, &a);
                    agent = Some(a);
                    stale = false;
                }
            }
            // Loading yields, and the row may change meanwhile: then it is read again.
            let fresh = (!stale).then_some(summary.clone());
            if stale {
                self.flush(&mut thread);
                let loaded = match self.platform.load_agent(agent_id, side).await {
                    Ok(Ok(a)) => Ok(a),
                    Ok(Err(why)) => Err(why),
                    Err(e) => Err(format!("could not read agent configuration: {e}")),
                };
                match loaded {
                    Ok(a) => {
                        self.record_hooks(&mut thread, &a);
                        self.keep_copy(&thread, &a);
                        agent = Some(a);
                    }
                    Err(why) => {
                        if let Err(e) = thread.handle_config_failure(self.now(), why) {
                            self.platform.log_error(&format!(
                                "could not record a configuration failure: {e}"
                            ));
                        }
                        self.flush(&mut thread);
                        break (None, LoopEnd::Other);
                    }
                }
            }
            let Some(config) = agent.clone() else {
                break (None, LoopEnd::Other);
            };
            thread.set_rules(TurnRules::from_config(&config));
            let action = match fresh {
                Some(summary) => thread.next_action_for(self.now(), config.max_steps(), summary),
                None => thread.next_action(self.now(), config.max_steps()),
            };
            // Taken before anything awaits: it holds only until then.
            let wake = thread.take_wake_hint();
            // Tool runs flush once their calls have started (before they await), which sends
            // this step's frames with theirs in one logged insert.
            if !matches!(action, Ok(Action::RunTool(_) | Action::RunTools(_))) {
                self.flush(&mut thread);
            }
            if let (Some(c), Ok(Action::Compact(_) | Action::RunTool(_) | Action::RunTools(_))) =
                (check.as_mut(), &action)
            {
                // No model request to overlap the check with (a compaction comes first): wait
                // for its answer, then plan the step again from a fresh read.
                thread.forget_row_hint();
                self.flush(&mut thread);
                let verdict = c.settle().await;
                check = None;
                match verdict {
                    Verdict::Held => {
                        if let Some(a) = &agent {
                            self.keep_copy(&thread, a);
                        }
                    }
                    Verdict::Moved(new) => {
                        self.record_hooks(&mut thread, &new);
                        self.keep_copy(&thread, &new);
                        agent = Some(new);
                    }
                    Verdict::Failed(why) => {
                        if let Err(e) = thread.handle_config_failure(self.now(), why) {
                            self.platform.log_error(&format!(
                                "could not record a configuration failure: {e}"
                            ));
                        }
                        self.flush(&mut thread);
                        break (None, LoopEnd::Other);
                    }
                }
                continue;
            }
            match action {
                Ok(Action::Idle) => return (wake, LoopEnd::Idle),
                Ok(Action::Wait) => return (wake, LoopEnd::Other),
                Ok(Action::Continue) => {}
                Err(e) => {
                    self.platform.log_error(&format!("turn loop error: {e}"));
                    break (None, LoopEnd::Other);
                }
                Ok(Action::CallModel(call)) => {
                    // A copy fresh or loaded was kept when it was taken: only one confirmed
                    // meanwhile is kept here.
                    let checked = check.is_some();
                    match self
                        .call_model(&mut thread, &config, call, check.take())
                        .await
                    {
                        Verdict::Held if checked => self.keep_copy(&thread, &config),
                        Verdict::Held => {}
                        Verdict::Moved(new) => {
                            self.record_hooks(&mut thread, &new);
                            self.keep_copy(&thread, &new);
                            agent = Some(new);
                        }
                        Verdict::Failed(_) => {
                            self.flush(&mut thread);
                            break (None, LoopEnd::Other);
                        }
                    }
                }
                Ok(Action::Compact(job)) => self.compact(&mut thread, &config, job).await,
                Ok(Action::RunTool(call)) => {
                    self.run_tool_calls(&mut thread, &config, &summary, vec![call])
                        .await;
                }
                Ok(Action::RunTools(calls)) => {
                    self.run_tool_calls(&mut thread, &config, &summary, calls)
                        .await;
                }
            }
        }
    }

    /// The shape `prompt`'s final answer must take, if it has a `response_format`: its own
    /// schema, or the app's registered output type's. `Err` says why there is none (a type
    /// this Worker no longer registers).
    pub(super) fn output_format<'p>(
        &'p self,
        prompt: &'p PromptConfig,
    ) -> Result<Option<OutputFormat<'p>>, String> {
        let registry = self.platform.registry();
        prompt
            .response_format
            .as_ref()
            .map(|format| {
                format
                    .resolve(|name| registry.output_schema(name))
                    .map_err(|why| format!("prompt {:?}: {why}", prompt.name))
            })
            .transpose()
    }

    /// Records the running prompt's hooks in the thread row, unless this instance already
    /// recorded the same ones.
    pub(super) fn record_hooks(&self, thread: &mut Thread<'_>, config: &AgentConfig) {
        let hooks: Vec<String> = config.hooks().map(str::to_owned).collect();
        let wanted = (config.prompt.name.clone(), hooks);
        if self.hooks_recorded.borrow().as_ref() == Some(&wanted) {
            return;
        }
        match thread.set_hook_config(&wanted.0, wanted.1.iter().map(String::as_str)) {
            Ok(()) => *self.hooks_recorded.borrow_mut() = Some(wanted),
            Err(e) => self
                .platform
                .log_error(&format!("could not record the hook config: {e}")),
        }
    }

    /// Performs a model call and stores its outcome. With `check`, the call was planned with
    /// a copy of the configuration that is being confirmed: when it moved, the request goes
    /// out again with the new copy, which is returned for the steps that follow.
    async fn call_model(
        &self,
        thread: &mut Thread<'_>,
        planned: &Rc<AgentConfig>,
        mut call: ModelCall,
        mut check: Option<ConfigCheck>,
    ) -> Verdict {
        let history = std::mem::take(&mut call.history);
        let mut config = planned.clone();
        let mut verdict = Verdict::Held;
        let outcome = loop {
            let outcome = self
                .request_reply(thread, &config, &mut call, &history, check.as_mut())
                .await;
            // Settled already, unless the call failed before its request went out.
            let Some(mut pending) = check.take() else {
                break outcome;
            };
            match pending.settle().await {
                Verdict::Held => break outcome,
                // Stopped meanwhile: nothing is sent again (the call ends as stopped).
                Verdict::Moved(new) if self.stop_requested.get() => {
                    verdict = Verdict::Moved(new);
                    break outcome;
                }
                Verdict::Moved(new) => {
                    // Nothing of the cancelled request was read. The reply to come is stored
                    // under the new copy's rules and hooks.
                    call.completion = Completion::default();
                    thread.set_rules(TurnRules::from_config(&new));
                    self.record_hooks(thread, &new);
                    config = new.clone();
                    verdict = Verdict::Moved(new);
                }
                Verdict::Failed(why) => {
                    if let Err(e) = thread.fail_unconfirmed_call(self.now(), call, why.clone()) {
                        self.platform
                            .log_error(&format!("could not store the model reply: {e}"));
                    }
                    return Verdict::Failed(why);
                }
            }
        };
        let stored = match outcome {
            // Also after a stop: it keeps what was streamed so far (see `finish_model_call`).
            Ok(structured) => {
                call.structured = structured;
                thread.finish_model_call(self.now(), call)
            }
            // A history too long for the model: compacted and asked again, once a turn.
            Err(e) if e.is_context_overflow() => {
                let sent = history.iter().map(estimate_tokens).sum();
                thread.handle_context_overflow(self.now(), call, &e, sent)
            }
            Err(e) => thread.fail_model_call(self.now(), call, &e),
        };
        if let Err(e) = stored {
            self.platform
                .log_error(&format!("could not store the model reply: {e}"));
        }
        // Not flushed here: the loop's next step runs at once without awaiting (a reply ends
        // the turn, or its calls start), and its flush sends the stored reply with that step's
        // frames in one logged insert. The loop flushes before anything it awaits, and when it
        // ends.
        verdict
    }

    /// One model call's request and reply, streamed to clients: the answer's value when the
    /// prompt has a `response_format`.
    async fn request_reply(
        &self,
        thread: &mut Thread<'_>,
        config: &AgentConfig,
        call: &mut ModelCall,
        history: &[Message],
        check: Option<&mut ConfigCheck>,
    ) -> Result<Option<Value>, ProviderError> {
        let output = self
            .output_format(&config.prompt)
            .map_err(ProviderError::Config)?;
        let mut check = check;
        let prepares =
            !config.prompt.mcp_servers.is_empty() || config.prompt.tool_selection_model.is_some();
        if let Some(c) = check.as_deref_mut().filter(|_| prepares) {
            // Listing MCP servers' tools and choosing tools by embeddings contact what the
            // configuration names: only once it is confirmed.
            self.flush(thread);
            c.settle().await;
            if c.overruled() {
                return Err(superseded());
            }
        }
        let mcp_tools = if config.prompt.mcp_servers.is_empty() {
            Vec::new()
        } else {
            // Frames never wait behind an await.
            self.flush(thread);
            self.mcp_tool_specs(&config.prompt).await
        };
        let system = thread.system_text(&config.prompt);
        // Chosen from the history this call sends: no message is read for it.
        let offer = self
            .offer(Some(&mut *thread), config, history, mcp_tools)
            .await;
        // The memo lives in the object's cache, which a view may replace meanwhile: held here.
        let cache = self.cache.borrow().clone();
        let parts = RequestParts {
            system: &system,
            history,
            offer: &offer,
            config,
            output,
            memo: call.verbatim.map(|version| MemoUse {
                memo: cache.wire_memo(),
                version,
            }),
        };
        let mut sink = MainSink {
            runtime: self,
            thread,
            call,
            models: &config.models,
            ended: false,
            check,
            chunk_sent_at: None,
            holding: false,
        };
        run_checked_chain(&*self.platform, &config.models, &parts, &mut sink).await
    }
}
