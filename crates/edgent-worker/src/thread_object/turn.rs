//! The turn loop of a [`ThreadObject`]: loads the running side's configuration, performs the
//! core's actions (model calls through the retry/fallback chain, tool calls, delegates) and
//! broadcasts what they produce.

use std::rc::Rc;

use super::ThreadObject;
use crate::clock::now;
use crate::config::{fresh_agent, load_agent};
use crate::host::ShellHost;
use crate::model::{run_chain, ChainSink};
use edgent::config::{AgentConfig, ModelConfig, ToolSpec};
use edgent::engine::request_log::ModelRequestLog;
use edgent::engine::thread::{Action, ModelCall, Thread, ThreadError, TurnRules};
use edgent::engine::wake::WATCHDOG_MS;
use edgent::llm::stream::{ProviderError, StreamEvent};
use edgent::llm::{build_request, ModelRequest};
use edgent::tool::offer::offered;
use edgent::values::message::Message;

/// The request body for `model`, from what every provider needs.
pub(super) struct RequestParts<'a> {
    pub(super) system: &'a str,
    pub(super) history: &'a [Message],
    pub(super) tools: &'a [ToolSpec],
    pub(super) config: &'a AgentConfig,
}

impl RequestParts<'_> {
    pub(super) fn body(&self, model: &ModelConfig) -> serde_json::Value {
        build_request(&ModelRequest {
            target: model.target(),
            system: self.system,
            history: self.history,
            tools: self.tools,
            tool_choice: self.config.prompt.tool_choice,
            parallel_tool_calls: self.config.prompt.parallel_tool_calls,
        })
    }
}

/// Receives one top-level model call's stream: chunks go to clients as they arrive.
struct MainSink<'t, 'a> {
    object: &'t ThreadObject,
    thread: &'t mut Thread<'a>,
    call: &'t mut ModelCall,
    models: &'t [ModelConfig],
}

impl ChainSink for MainSink<'_, '_> {
    fn events(&mut self, events: Vec<StreamEvent>) -> Result<(), ProviderError> {
        for ev in events {
            self.thread.on_model_event(self.call, ev)?;
        }
        self.object.flush(self.thread);
        Ok(())
    }

    fn reset(&mut self) {
        self.thread.reset_model_call(self.call);
        self.object.flush(self.thread);
    }

    fn attempt_done(
        &mut self,
        mut log: ModelRequestLog,
        ok: bool,
        retry: Option<(&ProviderError, &str)>,
    ) {
        log.message_id = Some(self.call.message_id.clone());
        if ok {
            log.add_usage(&self.call.completion, self.models);
        }
        record(self.thread, &log);
        if let Some((error, plan)) = retry {
            self.thread.report_retry(error, &log.model, plan);
            self.object.flush(self.thread);
        }
    }

    fn stopped(&self) -> bool {
        self.object.stop_requested.get()
    }
}

/// Appends to the request log; a failure to log never fails the turn.
pub(super) fn record(thread: &Thread<'_>, log: &ModelRequestLog) {
    if let Err(e) = thread.record_model_request(log) {
        worker::console_error!("could not log a model request: {e}");
    }
}

impl ThreadObject {
    /// The turn loop: performs actions until the thread has nothing to do, then sets the
    /// alarm where the engine says (the earliest parked call, or nowhere).
    pub(super) async fn drive(&self) {
        if self.driving.replace(true) {
            // The watchdog fired while a long step runs in this instance: keep one armed, or
            // a crash after this point would leave nothing to resume the turn.
            if self.state.storage().set_alarm(WATCHDOG_MS).await.is_ok() {
                self.armed_until.set(now() + WATCHDOG_MS);
            }
            return;
        }
        self.stop_requested.set(false);
        let sql = self.sql();
        loop {
            self.work_arrived.set(false);
            self.drive_steps(&sql).await;
            let wake = self
                .open(&sql, false)
                .and_then(|t| t.poll_timeout())
                .ok()
                .flatten();
            let _ = match wake {
                Some(at) => self.state.storage().set_alarm((at - now()).max(0)).await,
                None => self.state.storage().delete_alarm().await,
            };
            // After the change has landed (storage operations complete in order): a watchdog
            // that `start_work` armed meanwhile keeps its `armed_until`, one we replaced not.
            self.armed_until.set(0);
            // Work stored while we drove or changed the alarm is ours: `start_work` saw us
            // driving and left it. Checked with no await before `driving` is cleared.
            if !self.work_arrived.get() {
                break;
            }
        }
        self.driving.set(false);
    }

    /// Performs the engine's actions until it has no step to take now.
    async fn drive_steps(&self, sql: &crate::do_sql::DoSql) {
        let host = self.host();
        let mut agent: Option<Rc<AgentConfig>> = None;
        let mut thread = match self.open(sql, false) {
            Ok(t) => t,
            Err(ThreadError::NotFound) => return,
            Err(e) => {
                worker::console_error!("cannot open thread: {e}");
                return;
            }
        };
        // The order of calls is the engine's (see `edgent::engine::wake`).
        loop {
            // The watchdog is re-armed once half of it has run out, not at every step (and not
            // right after `start_work` armed it): if we die, it resumes the turn in time.
            if now() > self.armed_until.get() - WATCHDOG_MS / 2 {
                let _ = self.state.storage().set_alarm(WATCHDOG_MS).await;
                self.armed_until.set(now() + WATCHDOG_MS);
            }
            let Ok(Some(summary)) = thread.step_wanted(now()) else {
                break;
            };
            let mut stale = agent
                .as_ref()
                .is_none_or(|a| a.agent_id() != summary.agent_id || a.side != summary.current_side);
            if stale {
                // From the isolate's cache without yielding, when it is fresh.
                if let Some(a) = fresh_agent(&summary.agent_id, summary.current_side) {
                    self.record_hooks(&mut thread, &a);
                    agent = Some(a);
                    stale = false;
                }
            }
            // Loading from D1 yields, and the row may change meanwhile: then it is read again.
            let fresh = (!stale).then_some(summary.clone());
            if stale {
                let loaded = match &host {
                    Err(e) => Err(e.message.clone()),
                    Ok(_) => load_agent(&self.env, &summary.agent_id, summary.current_side)
                        .await
                        .map_err(|e| format!("could not read agent configuration: {e}"))
                        .and_then(|r| r.map_err(|e| e.to_string())),
                };
                match loaded {
                    Ok(a) => {
                        self.record_hooks(&mut thread, &a);
                        agent = Some(a);
                    }
                    Err(why) => {
                        if let Err(e) = thread.handle_config_failure(now(), why) {
                            worker::console_error!("could not record a configuration failure: {e}");
                        }
                        self.flush(&mut thread);
                        break;
                    }
                }
            }
            let (Some(config), Ok(host)) = (agent.clone(), host.as_ref()) else {
                break;
            };
            thread.set_rules(TurnRules::from_config(&config));
            let action = match fresh {
                Some(summary) => thread.next_action_for(now(), config.max_steps(), summary),
                None => thread.next_action(now(), config.max_steps()),
            };
            self.flush(&mut thread);
            match action {
                Ok(Action::Idle | Action::Wait) => break,
                Ok(Action::Continue) => {}
                Err(e) => {
                    worker::console_error!("turn loop error: {e}");
                    break;
                }
                Ok(Action::CallModel(call)) => {
                    self.call_model(&mut thread, host, &config, call).await
                }
                Ok(Action::RunTool(call)) => {
                    self.run_tools(&mut thread, host, &config, &summary, vec![call])
                        .await;
                }
                Ok(Action::RunTools(calls)) => {
                    self.run_tools(&mut thread, host, &config, &summary, calls)
                        .await;
                }
            }
        }
    }

    /// Records the running prompt's hooks in the thread row, unless this instance already
    /// recorded the same ones.
    fn record_hooks(&self, thread: &mut Thread<'_>, config: &AgentConfig) {
        let hooks: Vec<String> = config.hooks().map(str::to_owned).collect();
        let wanted = (config.prompt.name.clone(), hooks);
        if self.hooks_recorded.borrow().as_ref() == Some(&wanted) {
            return;
        }
        match thread.set_hook_config(&wanted.0, wanted.1.iter().map(String::as_str)) {
            Ok(()) => *self.hooks_recorded.borrow_mut() = Some(wanted),
            Err(e) => worker::console_error!("could not record the hook config: {e}"),
        }
    }

    async fn call_model(
        &self,
        thread: &mut Thread<'_>,
        host: &ShellHost,
        config: &AgentConfig,
        mut call: ModelCall,
    ) {
        let tools = offered(&host.registry, config);
        let system = thread.system_text(&config.prompt);
        let history = std::mem::take(&mut call.history);
        let parts = RequestParts {
            system: &system,
            history: &history,
            tools: &tools,
            config,
        };
        let outcome = {
            let mut sink = MainSink {
                object: self,
                thread,
                call: &mut call,
                models: &config.models,
            };
            run_chain(&self.env, &config.models, &|m| parts.body(m), &mut sink).await
        };
        let stored = match outcome {
            // Also after a stop: it keeps what was streamed so far (see `finish_model_call`).
            Ok(()) => thread.finish_model_call(now(), call),
            Err(e) => thread.fail_model_call(now(), call, &e),
        };
        if let Err(e) = stored {
            worker::console_error!("could not store the model reply: {e}");
        }
        self.flush(thread);
    }
}
