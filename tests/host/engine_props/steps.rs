//! The object's loop taken one step at a time: the engine's next action performed (a model call
//! kept in flight, tool calls run), the model's reply streamed and finished, and settling until
//! the thread rests.

use super::*;

use edgent::testing::reply_events;

impl World {
    /// One step of the object's loop: the engine's next action, performed (a model call is
    /// kept in flight for the operations that follow). Returns the action's kind.
    pub(super) fn step(&mut self, settling: bool) -> Option<&'static str> {
        if self.model.is_some() {
            return None; // the object is busy with the model: the loop waits for it
        }
        let config = self.config();
        let now = self.now();
        let storage = self.storage.clone();
        let mut t = Thread::open_migrated(&*storage).with_cache(self.cache.clone());
        t.set_rules(TurnRules::from_config(&config));
        let action = t.next_action(now, config.max_steps());
        let action = answered(self, "next_action", action)?;
        let kind = match action {
            Action::Idle => "idle",
            Action::Continue => "continue",
            Action::Wait => {
                self.check_wait(&t);
                tally("call waits (Wait)");
                "wait"
            }
            Action::CallModel(call) => {
                check_history(&call.history, &format!("model call at {}", self.now()));
                tally("model call");
                self.model = Some(call);
                "model"
            }
            Action::RunTool(call) => {
                self.run_tools(&mut t, &config, vec![call]);
                "tool"
            }
            Action::RunTools(calls) => {
                self.run_tools(&mut t, &config, calls);
                "tool"
            }
            // These agents name no compaction prompt.
            Action::Compact(_) => panic!("a compaction without a compaction prompt"),
        };
        self.keep(&mut t);
        drop(t);
        if settling {
            if let Some(call) = self.model.take() {
                self.finish(call, &reply_events("done.", &[]));
            }
        }
        Some(kind)
    }

    fn run_tools(
        &self,
        t: &mut Thread<'_>,
        config: &Rc<AgentConfig>,
        calls: Vec<edgent::engine::store::StoredToolCall>,
    ) {
        let Some(summary) = answered(self, "summary", t.summary()) else {
            return;
        };
        let runtime = self.host.runtime();
        let before = self.host.logged_errors().len();
        self.host
            .run(runtime.run_tool_calls(t, config, &summary, calls));
        if !self.storage.faulting() {
            let logged = self.host.logged_errors().split_off(before);
            assert!(
                logged.iter().all(|e| !e.contains("could not")),
                "the runtime could not store a tool call's state with no crash injected: {logged:?}"
            );
        }
    }

    pub(super) fn reply(&mut self, spec: &ReplySpec) {
        let Some(call) = self.model.take() else {
            return;
        };
        let known = self.call_ids();
        let mut calls: Vec<(String, String, String)> = Vec::new();
        for c in &spec.calls {
            self.fresh += 1;
            let id = match c.id {
                IdKind::Fresh => format!("call_{}", self.fresh),
                IdKind::Empty => String::new(),
                IdKind::SameAsPrevious => calls
                    .last()
                    .map(|(id, _, _)| id.clone())
                    .unwrap_or_else(|| format!("call_{}", self.fresh)),
                IdKind::Reused(k) if !known.is_empty() => {
                    known[usize::from(k) % known.len()].clone()
                }
                IdKind::Reused(_) => "call_1".into(),
                IdKind::Long(n) => {
                    let n = usize::try_from(n).unwrap();
                    format!("call_{}_{}", self.fresh, "L".repeat(n))[..n].to_owned()
                }
                IdKind::Odd(k) => ["a.b", "a_b", "a b", "a/b", "é", "a-b", "a:b", "a+b"]
                    [usize::from(k) % 8]
                    .to_owned(),
            };
            let name = match usize::from(c.tool) {
                i if i >= TOOLS.len() => "n".repeat(LONG_NAME),
                _ => TOOLS[usize::from(self.setup.tool(c.tool))].to_owned(),
            };
            calls.push((id, name, c.args.raw()));
        }
        if let Some(extra) = spec.fan_out {
            let n = MAX_TOOL_CALLS_PER_REPLY - 8 + usize::from(extra);
            for k in 0..n {
                calls.push((
                    format!("fan_{}_{k}", self.fresh),
                    "echo".into(),
                    "{\"n\":1}".into(),
                ));
            }
        }
        let refs: Vec<(&str, &str, &str)> = calls
            .iter()
            .map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str()))
            .collect();
        let mut events = reply_events(&text(spec.text, 'r'), &refs);
        match spec.end {
            End::Whole => {}
            End::Cut => events.truncate(events.len() - 2),
            End::FinishOnly => {
                events.pop();
            }
        }
        self.finish(call, &events);
    }

    /// Streams `events` into the call and completes it as the runtime does: an event the
    /// reply refuses (too large, malformed) fails the call; otherwise it is finished.
    fn finish(&mut self, mut call: ModelCall, events: &[StreamEvent]) {
        let now = self.now();
        let config = self.config();
        let storage = self.storage.clone();
        let mut t = Thread::open_migrated(&*storage).with_cache(self.cache.clone());
        t.set_rules(TurnRules::from_config(&config));
        let mut refused = None;
        for ev in events {
            if let Err(e) = t.on_model_event(&mut call, ev.clone()) {
                refused = Some(e);
                break;
            }
        }
        let message_id = call.message_id.clone();
        let r = match refused {
            Some(e) => {
                tally("reply refused while streaming");
                t.fail_model_call(now, call, &e)
            }
            None => t.finish_model_call(now, call),
        };
        self.keep(&mut t);
        drop(t);
        if answered(self, "finish_model_call", r).is_some() && !self.storage.faulting() {
            let stored = self.strings(&format!(
                "SELECT status || ' ' || IFNULL(tool_calls, '') FROM messages WHERE id = '{message_id}'"
            ));
            match stored.first().map(String::as_str) {
                Some(s) if s.starts_with("failed") => tally("reply failed at its end"),
                Some(s) if s.starts_with("completed [") => tally("reply with calls"),
                _ => {}
            }
        }
    }

    /// Answers everything, as the world eventually does: the model replies with text,
    /// approvals are granted, and the clock moves to each wake time (the alarm the runtime
    /// sets from `poll_timeout`); a step is taken only when `step_wanted` says so. The thread
    /// must come to rest within the bound.
    pub(super) fn settle(&mut self) {
        if let Some(call) = self.model.take() {
            self.finish(call, &reply_events("done.", &[]));
        }
        let open = self
            .strings("SELECT id FROM tool_calls WHERE status NOT IN ('success', 'error')")
            .len();
        let bound = SETTLE_STEPS + STEPS_PER_OPEN_CALL * open;
        for _ in 0..bound {
            for id in self.strings(
                "SELECT id FROM tool_calls WHERE approval = 'pending' AND status NOT IN ('success', 'error')",
            ) {
                let now = self.now();
                let mut t = self.client();
                t.decide_approval(now, &id, true, None).unwrap();
                self.keep(&mut t);
            }
            let wanted = self.client().step_wanted(self.now()).unwrap();
            if wanted.is_some() {
                let kind = self.step(true);
                if self.storage.crashed.get() {
                    self.crash(); // a tool killed the Worker: the alarm resumes the turn
                    continue;
                }
                match kind {
                    Some("wait") => {}
                    Some(_) => continue,
                    None => unreachable!("no model call is in flight while settling"),
                }
            }
            match self.client().poll_timeout().unwrap() {
                Some(at) => self.clock.set(at.max(self.now())),
                None if wanted.is_some() => {}
                None => {
                    self.check_rest();
                    return;
                }
            }
        }
        panic!(
            "the thread did not come to rest in {bound} steps: {}",
            self.describe()
        );
    }

    fn describe(&self) -> String {
        let summary = self.host.thread().summary().unwrap();
        let calls = self.strings(
            "SELECT substr(id, 1, 40) || ' ' || substr(name, 1, 20) || ' ' || status || ' wake ' || IFNULL(wake_at, '-') FROM tool_calls WHERE status NOT IN ('success', 'error')",
        );
        format!(
            "status {:?}, needs_model {}, steps {}, now {}, open calls {calls:?}",
            summary.status,
            summary.needs_model,
            summary.steps,
            self.now()
        )
    }
}
