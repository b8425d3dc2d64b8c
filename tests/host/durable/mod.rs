//! Durable tool calls in virtual time: retries with backoff, timeouts, workflow replay with
//! sleeps and webhooks, approvals, rate limits, result caching and whole-run deadlines, and how
//! parked calls shape the turn. The host is the shipped harness (`edgent::testing::TestHost`):
//! it performs what the engine asks (runs tools, a run still pending with nothing left to wake
//! it has hit its timeout; answers the deployment counter) and hands the outcomes back; every
//! decision is the engine's, over real SQLite.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use edgent::engine::durable::{
    cache_key, deliver_webhook, deployment_gate, settle, tool_status, CallStatus, Gate, Ran,
    Settle, Suspension, WebhookRefusal, Window,
};
use edgent::engine::store::{Order, StoredToolCall, ThreadStatus};
use edgent::engine::thread::{Action, ModelCall, Thread, ThreadError};
use edgent::engine::tool_records::ToolCallRecord;
use edgent::engine::tool_runs::Admission;
use edgent::engine::wake::CONFIG_RETRY_MS;
use edgent::testing::TestHost;
use edgent::tool::{
    CallToolResult, FlowState, RateLimit, Registry, RetryPolicy, Tool, ToolError, ToolPolicy,
    WebhookEvent,
};
use edgent::values::message::Role;
use edgent::values::protocol::ServerFrame;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Map, Value};

const T0: i64 = 1_795_300_162_000;
const MAX_STEPS: u32 = 10;
const PUBLIC_URL: &str = "https://agents.example";

// ---- the host: the shipped harness (edgent::testing) with this file's helpers ------------

type Clock = Rc<Cell<i64>>;

fn clock() -> Clock {
    Rc::new(Cell::new(T0))
}

/// A host whose thread may run `tools`, on the shared virtual clock, with a public URL for
/// webhook links.
fn host(clock: &Clock, tools: Vec<(&'static str, Tool)>) -> Rc<TestHost> {
    TestHost::with_clock(Registry::build(tools).unwrap(), clock.clone())
        .var("PUBLIC_URL", PUBLIC_URL)
        .into_rc()
}

/// Reads of what the engine stored, for assertions.
trait Stored {
    fn policy(&self, name: &str) -> ToolPolicy;
    fn call(&self, id: &str) -> StoredToolCall;
    fn record(&self, id: &str) -> ToolCallRecord;
    fn next_wake(&self) -> Option<i64>;
    fn status(&self) -> ThreadStatus;
    fn queue(&self, name: &str, args: Value) -> String;
    fn tool_statuses(&self, id: &str) -> Vec<String>;
}

impl Stored for TestHost {
    fn policy(&self, name: &str) -> ToolPolicy {
        self.registry.get(name).unwrap().policy().clone()
    }

    fn call(&self, id: &str) -> StoredToolCall {
        self.store().tool_call(id).unwrap().unwrap()
    }

    fn record(&self, id: &str) -> ToolCallRecord {
        self.store()
            .tool_call_page(200, 0, Order::Asc)
            .unwrap()
            .tool_calls
            .into_iter()
            .find(|c| c.id == id)
            .unwrap()
    }

    fn next_wake(&self) -> Option<i64> {
        self.store().next_wake().unwrap()
    }

    fn status(&self) -> ThreadStatus {
        self.thread().summary().unwrap().status
    }

    /// Queues a call as a tool or a client would.
    fn queue(&self, name: &str, args: Value) -> String {
        let mut t = self.thread();
        let id = t
            .queue_tool(self.now(), &self.registry, name, args)
            .unwrap();
        self.keep_frames(&mut t);
        id
    }

    /// The statuses the `tool` frames announced for one call, in order.
    fn tool_statuses(&self, id: &str) -> Vec<String> {
        self.frames()
            .iter()
            .filter_map(|f| match f {
                ServerFrame::Tool {
                    tool_call_id,
                    status,
                    ..
                } if tool_call_id == id => Some(status.as_str().to_owned()),
                _ => None,
            })
            .collect()
    }
}

/// Drives the thread until it needs the model or has nothing to do.
fn drive(h: &Rc<TestHost>, jitter: f64) -> Action {
    h.drive(jitter)
}

fn drive_idle(h: &Rc<TestHost>) {
    drive_idle_with(h, 0.5);
}

fn drive_idle_with(h: &Rc<TestHost>, jitter: f64) {
    match drive(h, jitter) {
        Action::Idle => {}
        other => panic!("expected the thread to go idle, got {other:?}"),
    }
}

fn expect_model(h: &Rc<TestHost>) -> ModelCall {
    match drive(h, 0.5) {
        Action::CallModel(call) => call,
        other => panic!("expected a model call, got {other:?}"),
    }
}

/// Completes a model call with `text` and tool calls `(id, name, raw arguments)`.
fn reply(h: &TestHost, call: ModelCall, text: &str, calls: &[(&str, &str, &str)]) {
    h.reply(call, text, calls);
}

/// Posts a user message and answers the model call it causes with these tool calls.
fn model_calls(h: &Rc<TestHost>, calls: &[(&str, &str, &str)]) {
    let mut t = h.thread();
    t.post_user_message(h.now(), "please").unwrap();
    h.keep_frames(&mut t);
    let call = expect_model(h);
    reply(h, call, "", calls);
}

fn result_of(h: &TestHost, id: &str) -> String {
    h.record(id).result.unwrap_or_default()
}

// ---- tools ---------------------------------------------------------------------------------

fn counter() -> Rc<Cell<u32>> {
    Rc::new(Cell::new(0))
}

/// A step tool that counts its runs and answers `outcome(run number)`.
fn step_tool(
    runs: &Rc<Cell<u32>>,
    outcome: impl Fn(u32) -> Result<String, ToolError> + 'static,
) -> Tool {
    let runs = runs.clone();
    let outcome = Rc::new(outcome);
    Tool::new("A step tool.").handler(move |_flow: FlowState| {
        let runs = runs.clone();
        let outcome = outcome.clone();
        async move {
            runs.set(runs.get() + 1);
            outcome(runs.get())
        }
    })
}

/// A workflow that sleeps `secs` then answers `rested`, counting the runs that woke.
fn napper(secs: u64, woke: &Rc<Cell<u32>>) -> Tool {
    let woke = woke.clone();
    Tool::new("Naps.").handler(move |flow: FlowState| {
        let woke = woke.clone();
        async move {
            flow.sleep("nap", Duration::from_secs(secs)).await?;
            woke.set(woke.get() + 1);
            Ok::<_, ToolError>("rested".to_owned())
        }
    })
}

fn ok_tool(runs: &Rc<Cell<u32>>) -> Tool {
    step_tool(runs, |_| Ok("done".to_owned()))
}

// ---- 1. retries ------------------------------------------------------------------------------

#[test]
fn a_failing_step_is_retried_with_jittered_backoff_until_it_succeeds() {
    crate::install_app();
    for jitter in [0.0, 0.37, 1.0] {
        let clock = clock();
        let runs = counter();
        let tool = step_tool(&runs, |n| {
            if n < 3 {
                Err(ToolError::new("service unavailable"))
            } else {
                Ok(format!("ok on run {n}"))
            }
        });
        let h = host(&clock, vec![("flaky", tool)]);
        let id = h.queue("flaky", json!({}));

        drive_idle_with(&h, jitter);
        let first = h.call(&id);
        assert_eq!(first.status, "retrying");
        let wake1 = first.wake_at.unwrap();
        let d1 = wake1 - T0;
        assert!(
            (500..=1000).contains(&d1),
            "first delay {d1} (jitter {jitter})"
        );
        assert_eq!(d1, RetryPolicy::default().delay_ms(1, jitter));
        assert_eq!(h.next_wake(), Some(wake1));
        assert_eq!(
            h.record(&id).last_error.as_deref(),
            Some("service unavailable")
        );

        // Not due yet: nothing runs.
        h.set_now(wake1 - 1);
        drive_idle_with(&h, jitter);
        assert_eq!(runs.get(), 1);

        h.set_now(wake1);
        drive_idle_with(&h, jitter);
        let second = h.call(&id);
        assert_eq!(second.status, "retrying");
        let wake2 = second.wake_at.unwrap();
        let d2 = wake2 - wake1;
        assert!(
            (1000..=2000).contains(&d2),
            "second delay {d2} (jitter {jitter})"
        );
        assert_eq!(d2, RetryPolicy::default().delay_ms(2, jitter));

        h.set_now(wake2);
        drive_idle_with(&h, jitter);
        assert_eq!(runs.get(), 3);
        let record = h.record(&id);
        assert_eq!(record.status, "success");
        assert_eq!(record.result.as_deref(), Some("ok on run 3"));
        assert_eq!(record.attempts, 3);
        assert_eq!(h.next_wake(), None);
        assert_eq!(
            h.tool_statuses(&id),
            ["queued", "running", "retrying", "running", "retrying", "running", "success"]
        );
        let log = &record.attempt_log;
        assert_eq!(log.len(), 3);
        assert_eq!(log.iter().map(|a| a.attempt).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(
            log.iter().map(|a| a.started_at).collect::<Vec<_>>(),
            [T0, wake1, wake2]
        );
        assert_eq!(
            log.iter()
                .map(|a| a.outcome.as_deref().unwrap())
                .collect::<Vec<_>>(),
            ["failed", "failed", "success"]
        );
        assert_eq!(log[0].error.as_deref(), Some("service unavailable"));
        assert_eq!(log[2].error, None);
        assert!(log.iter().all(|a| a.finished_at.is_some()));
    }
}

// ---- 2. fatal, retry_after, exhausted, timed out --------------------------------------------

#[test]
fn a_fatal_error_is_the_result_after_one_attempt() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let tool = step_tool(&runs, |_| Err(ToolError::fatal("no such city")));
    let h = host(&clock, vec![("fatal", tool)]);
    let id = h.queue("fatal", json!({}));
    drive_idle(&h);
    let record = h.record(&id);
    assert_eq!(runs.get(), 1);
    assert_eq!(record.status, "error");
    assert_eq!(record.result.as_deref(), Some("Error: no such city"));
    assert_eq!(record.attempts, 1);
    assert_eq!(record.attempt_log.len(), 1);
    assert_eq!(record.attempt_log[0].outcome.as_deref(), Some("error"));
    assert_eq!(h.next_wake(), None);
    assert_eq!(h.tool_statuses(&id), ["queued", "running", "error"]);
}

#[test]
fn retry_after_wakes_exactly_when_the_service_said() {
    crate::install_app();
    for jitter in [0.0, 0.9] {
        let clock = clock();
        let runs = counter();
        let tool = step_tool(&runs, |n| match n {
            1 => Err(ToolError::retry_after(
                "quota exhausted",
                Duration::from_secs(5),
            )),
            _ => Ok("fine".to_owned()),
        });
        let h = host(&clock, vec![("quota", tool)]);
        let id = h.queue("quota", json!({}));
        drive_idle(&h);
        let call = h.call(&id);
        assert_eq!(call.status, "retrying");
        assert_eq!(
            call.wake_at,
            Some(T0 + 5000),
            "jitter {jitter} changes nothing"
        );
        h.set_now(T0 + 5000);
        drive_idle(&h);
        assert_eq!(result_of(&h, &id), "fine");
        assert_eq!(h.record(&id).attempts, 2);
    }
}

#[test]
fn exhausted_attempts_give_up_with_the_last_error() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let tool = step_tool(&runs, |n| Err(ToolError::new(format!("boom {n}"))));
    let h = host(&clock, vec![("doomed", tool)]);
    let id = h.queue("doomed", json!({}));
    for _ in 0..3 {
        drive_idle(&h);
        if let Some(w) = h.call(&id).wake_at {
            h.set_now(w);
        }
    }
    let record = h.record(&id);
    assert_eq!(runs.get(), 3);
    assert_eq!(record.status, "error");
    let result = record.result.unwrap();
    assert!(
        result.ends_with("(gave up after 3 attempts)"),
        "result: {result}"
    );
    assert_eq!(result, "Error: boom 3 (gave up after 3 attempts)");
    assert_eq!(
        record
            .attempt_log
            .iter()
            .map(|a| a.outcome.as_deref().unwrap())
            .collect::<Vec<_>>(),
        ["failed", "failed", "error"]
    );
    assert_eq!(h.next_wake(), None);
}

#[test]
fn a_tool_that_never_retries_fails_at_once_without_the_gave_up_note() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let tool =
        step_tool(&runs, |_| Err(ToolError::new("flaky upstream"))).retry(RetryPolicy::none());
    let h = host(&clock, vec![("once", tool)]);
    let id = h.queue("once", json!({}));
    drive_idle(&h);
    assert_eq!(runs.get(), 1);
    assert_eq!(result_of(&h, &id), "Error: flaky upstream");
}

#[test]
fn a_timed_out_attempt_is_retried_and_logged_as_timeout() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let counted = runs.clone();
    let tool = Tool::new("Hangs on its first run.")
        .handler(move |_flow: FlowState| {
            let runs = counted.clone();
            async move {
                runs.set(runs.get() + 1);
                if runs.get() == 1 {
                    std::future::pending::<()>().await;
                }
                Ok::<_, ToolError>("answered".to_owned())
            }
        })
        .timeout(Duration::from_millis(1500));
    let h = host(&clock, vec![("hangs", tool)]);
    let id = h.queue("hangs", json!({}));
    drive_idle(&h);
    let record = h.record(&id);
    assert_eq!(record.status, "retrying");
    assert_eq!(record.last_error.as_deref(), Some("timed out after 1.5 s"));
    assert_eq!(record.attempt_log[0].outcome.as_deref(), Some("timeout"));
    assert_eq!(record.attempt_log[0].finished_at, Some(T0 + 1500));
    let wake = record.wake_at.unwrap();
    assert!((T0 + 1500 + 500..=T0 + 1500 + 1000).contains(&wake));

    h.set_now(wake);
    drive_idle(&h);
    assert_eq!(runs.get(), 2);
    assert_eq!(result_of(&h, &id), "answered");

    // settle() on its own: the default timeout names its seconds.
    let call = h.call(&id);
    match settle(&ToolPolicy::default(), &call, 1, Ran::TimedOut, T0, 0.0) {
        Settle::Retry { wake_at, error } => {
            assert_eq!(error, "timed out after 30 s");
            assert_eq!(wake_at, T0 + 500);
        }
        other => panic!("expected a retry, got {other:?}"),
    }
    match settle(&ToolPolicy::default(), &call, 3, Ran::TimedOut, T0, 0.0) {
        Settle::Finish(r) => assert_eq!(
            r.to_model_text(),
            "Error: timed out after 30 s (gave up after 3 attempts)"
        ),
        other => panic!("expected the result, got {other:?}"),
    }
}

// ---- 3. invalid arguments --------------------------------------------------------------------

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct City {
    /// The city.
    city: String,
}

#[test]
fn invalid_arguments_are_an_error_result_and_never_retried() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let counted = runs.clone();
    let tool = Tool::new("Weather.").handler(move |_flow: FlowState, c: City| {
        let runs = counted.clone();
        async move {
            runs.set(runs.get() + 1);
            Ok::<_, ToolError>(format!("sunny in {}", c.city))
        }
    });
    let h = host(&clock, vec![("weather", tool)]);
    model_calls(
        &h,
        &[
            ("c1", "weather", r#"{"town": "Paris"}"#),
            ("c2", "weather", r#"{"city": "#),
        ],
    );
    let next = expect_model(&h);
    assert_eq!(runs.get(), 0, "the handler never ran");
    for id in ["c1", "c2"] {
        let record = h.record(id);
        assert_eq!(record.status, "error");
        assert_eq!(record.attempts, 1);
        let result = record.result.unwrap();
        assert!(
            result.starts_with("Error: invalid arguments:"),
            "result: {result}"
        );
        assert!(result.contains("Fix the arguments"));
    }
    assert_eq!(h.next_wake(), None);
    // The model sees both errors and can correct itself.
    let tool_results = next.history.iter().filter(|m| m.role == Role::Tool).count();
    assert_eq!(tool_results, 2);
}

// ---- 4. workflow replay ------------------------------------------------------------------------

#[test]
fn a_workflow_resumes_after_its_sleep_without_repeating_finished_steps() {
    crate::install_app();
    let clock = clock();
    let (a_runs, b_runs) = (counter(), counter());
    let (a, b, c) = (a_runs.clone(), b_runs.clone(), clock.clone());
    let tool = Tool::new("Two steps around a nap.").handler(move |flow: FlowState| {
        let (a_runs, b_runs, clock) = (a.clone(), b.clone(), c.clone());
        async move {
            let first: u32 = flow
                .step("a", || async {
                    a_runs.set(a_runs.get() + 1);
                    clock.set(clock.get() + 250);
                    Ok(7)
                })
                .await?;
            flow.sleep("nap", Duration::from_secs(60)).await?;
            let second: u32 = flow
                .step("b", || async {
                    b_runs.set(b_runs.get() + 1);
                    clock.set(clock.get() + 100);
                    Ok(first * 6)
                })
                .await?;
            Ok::<_, ToolError>(format!("a={first} b={second}"))
        }
    });
    let h = host(&clock, vec![("workflow", tool)]);
    model_calls(&h, &[("wf1", "workflow", "{}")]);
    assert!(matches!(drive(&h, 0.5), Action::Wait));

    let wake = T0 + 250 + 60_000;
    let call = h.call("wf1");
    assert_eq!(call.status, "sleeping");
    assert_eq!(call.wake_at, Some(wake));
    assert_eq!(h.next_wake(), Some(wake));
    assert_eq!(
        h.record("wf1").waiting_for,
        Some(json!({ "sleep": "nap", "until": wake }))
    );
    assert_eq!((a_runs.get(), b_runs.get()), (1, 0));

    // Before the wake time the model call waits and the workflow is not due.
    h.set_now(wake - 1);
    assert!(matches!(drive(&h, 0.5), Action::Wait));
    assert!(h.store().next_tool_call(h.now()).unwrap().is_none());
    assert_eq!((a_runs.get(), b_runs.get()), (1, 0));

    h.set_now(wake);
    let next = expect_model(&h);
    assert_eq!(
        (a_runs.get(), b_runs.get()),
        (1, 1),
        "a replayed, b ran once"
    );
    let record = h.record("wf1");
    assert_eq!(record.status, "success");
    assert_eq!(record.result.as_deref(), Some("a=7 b=42"));
    assert_eq!(record.attempts, 1, "a resumption is not a new attempt");
    assert_eq!(record.attempt_log.len(), 1);
    assert_eq!(record.attempt_log[0].outcome.as_deref(), Some("success"));
    assert_eq!(record.duration_ms, Some(250 + 60_000 + 100));
    let steps: Vec<(&str, &str, &str, Option<i64>)> = record
        .steps
        .iter()
        .map(|s| {
            (
                s.name.as_str(),
                s.kind.as_str(),
                s.status.as_str(),
                s.duration_ms,
            )
        })
        .collect();
    assert_eq!(
        steps,
        [
            ("a", "step", "done", Some(250)),
            ("nap", "sleep", "done", Some(60_000)),
            ("b", "step", "done", Some(100)),
        ]
    );
    assert_eq!(record.steps[1].wake_at, Some(wake));
    assert_eq!(
        h.tool_statuses("wf1"),
        ["queued", "running", "sleeping", "running", "success"]
    );
    assert!(next
        .history
        .iter()
        .any(|m| m.role == Role::Tool && m.content == "a=7 b=42"));
}

#[test]
fn a_retried_workflow_replays_done_steps_and_reruns_the_failed_one() {
    crate::install_app();
    let clock = clock();
    let (a_runs, b_runs) = (counter(), counter());
    let (a, b) = (a_runs.clone(), b_runs.clone());
    let tool = Tool::new("Fails in its second step once.").handler(move |flow: FlowState| {
        let (a_runs, b_runs) = (a.clone(), b.clone());
        async move {
            let x: u32 = flow
                .step("a", || async {
                    a_runs.set(a_runs.get() + 1);
                    Ok(5)
                })
                .await?;
            let y: u32 = flow
                .step("b", || async {
                    b_runs.set(b_runs.get() + 1);
                    if b_runs.get() == 1 {
                        Err(ToolError::new("upstream hiccup"))
                    } else {
                        Ok(x + 1)
                    }
                })
                .await?;
            Ok::<_, ToolError>(format!("{x} then {y}"))
        }
    });
    let h = host(&clock, vec![("wf", tool)]);
    let id = h.queue("wf", json!({}));
    drive_idle(&h);
    let record = h.record(&id);
    assert_eq!(record.status, "retrying");
    assert_eq!(
        record.last_error.as_deref(),
        Some("step \"b\" failed: upstream hiccup")
    );
    assert_eq!(record.steps[1].status, "failed");

    h.set_now(record.wake_at.unwrap());
    drive_idle(&h);
    assert_eq!((a_runs.get(), b_runs.get()), (1, 2));
    let record = h.record(&id);
    assert_eq!(record.result.as_deref(), Some("5 then 6"));
    assert_eq!(record.attempts, 2);
    assert!(record.steps.iter().all(|s| s.status == "done"));
}

#[test]
fn a_tool_called_from_a_step_cannot_sleep() {
    crate::install_app();
    let clock = clock();
    let woke = counter();
    let outer = Tool::new("Calls a sleeper from a step.").handler(|flow: FlowState| async move {
        let text: String = flow
            .step("inner", || async {
                Ok(flow.call_tool("nap", json!({})).await?.to_model_text())
            })
            .await?;
        Ok::<_, ToolError>(text)
    });
    let h = host(&clock, vec![("outer", outer), ("nap", napper(30, &woke))]);
    let id = h.queue("outer", json!({}));
    drive_idle(&h);
    let record = h.record(&id);
    assert_eq!(record.status, "error");
    assert_eq!(record.attempts, 1, "fatal: not retried");
    assert!(record
        .result
        .unwrap()
        .contains("cannot do inside another tool's step"),);
    assert_eq!(h.next_wake(), None, "the inner sleep parked nothing");
}

// ---- 5. step names ---------------------------------------------------------------------------

#[test]
fn a_step_name_used_twice_in_one_run_is_a_fatal_error_naming_it() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let counted = runs.clone();
    let tool = Tool::new("Reuses a step name.").handler(move |flow: FlowState| {
        let runs = counted.clone();
        async move {
            for _ in 0..2 {
                flow.step("fetch", || async {
                    runs.set(runs.get() + 1);
                    Ok(())
                })
                .await?;
            }
            Ok::<_, ToolError>("unreachable".to_owned())
        }
    });
    let h = host(&clock, vec![("twice", tool)]);
    let id = h.queue("twice", json!({}));
    drive_idle(&h);
    let record = h.record(&id);
    assert_eq!(record.status, "error");
    assert_eq!(record.attempts, 1, "not retried");
    let result = record.result.unwrap();
    assert!(result.contains("\"fetch\""), "result: {result}");
    assert!(result.contains("twice"), "result: {result}");
    assert_eq!(runs.get(), 1);
}

// ---- 6. webhooks -----------------------------------------------------------------------------

fn hook_tool() -> Tool {
    Tool::new("Waits for a callback.").handler(|flow: FlowState| async move {
        Ok::<_, ToolError>(
            match flow
                .wait_for_webhook("callback", Duration::from_secs(300))
                .await?
            {
                WebhookEvent::Received(body) => CallToolResult::json(&json!({ "received": body })),
                WebhookEvent::TimedOut => CallToolResult::text("timed out"),
            },
        )
    })
}

/// The token of the call's webhook, from the URL in its `waiting` detail.
fn waiting_token(h: &TestHost, id: &str) -> String {
    let detail = h.record(id).waiting_for.unwrap();
    let url = detail["url"].as_str().unwrap().to_owned();
    let prefix = format!("{PUBLIC_URL}/webhooks/thread-1/");
    let token = url
        .strip_prefix(&prefix)
        .unwrap_or_else(|| panic!("url {url}"));
    assert_eq!(token.len(), 64);
    assert!(token
        .chars()
        .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    token.to_owned()
}

#[test]
fn a_webhook_parks_the_call_until_one_json_body_arrives() {
    crate::install_app();
    let clock = clock();
    let h = host(&clock, vec![("hook", hook_tool())]);
    let id = h.queue("hook", json!({}));
    drive_idle(&h);
    let parked = h.call(&id);
    assert_eq!(parked.status, "waiting");
    assert_eq!(parked.wake_at, Some(T0 + 300_000));
    let token = waiting_token(&h, &id);
    assert_eq!(h.record(&id).waiting_for.unwrap()["webhook"], "callback");

    h.set_now(T0 + 1000);
    let store = h.store();
    assert_eq!(
        deliver_webhook(&store, &"0".repeat(64), b"{}", h.now()).unwrap(),
        Err(WebhookRefusal::Unknown)
    );
    assert_eq!(h.call(&id), parked, "a wrong token changes nothing");

    let refused = deliver_webhook(&store, &token, b"not json", h.now()).unwrap();
    assert!(
        matches!(refused, Err(WebhookRefusal::NotJson(_))),
        "{refused:?}"
    );
    let hook = store.webhook_by_token(&token).unwrap().unwrap();
    assert_eq!((hook.status.as_str(), hook.body), ("open", None));
    assert_eq!(h.call(&id), parked, "still waiting");

    assert_eq!(
        deliver_webhook(&store, &token, br#"{"paid": true}"#, h.now()).unwrap(),
        Ok(id.clone())
    );
    let due = h.call(&id);
    assert_eq!(due.wake_at, Some(T0 + 1000), "due at once");
    assert_eq!(
        store.next_tool_call(h.now()).unwrap().map(|c| c.call.id),
        Some(id.clone())
    );
    let again = deliver_webhook(&store, &token, br#"{"paid": false}"#, h.now()).unwrap();
    assert!(matches!(again, Err(WebhookRefusal::Closed(_))), "{again:?}");

    drive_idle(&h);
    let record = h.record(&id);
    assert_eq!(record.status, "success");
    assert_eq!(
        serde_json::from_str::<Value>(record.result.as_deref().unwrap()).unwrap(),
        json!({ "received": { "paid": true } })
    );
    assert_eq!(record.attempts, 1);
    assert_eq!(record.steps[0].kind, "webhook");
    assert_eq!(record.steps[0].status, "done");
    assert_eq!(h.next_wake(), None);
    let late = deliver_webhook(&store, &token, b"{}", h.now()).unwrap();
    assert!(matches!(late, Err(WebhookRefusal::Closed(_))), "{late:?}");
}

#[test]
fn a_webhook_wait_times_out_and_later_deliveries_are_refused() {
    crate::install_app();
    let clock = clock();
    let h = host(&clock, vec![("hook", hook_tool())]);
    let id = h.queue("hook", json!({}));
    drive_idle(&h);
    let token = waiting_token(&h, &id);
    assert_eq!(h.next_wake(), Some(T0 + 300_000));

    h.set_now(T0 + 300_000);
    drive_idle(&h);
    assert_eq!(result_of(&h, &id), "timed out");
    let store = h.store();
    let hook = store.webhook_by_token(&token).unwrap().unwrap();
    assert_eq!(hook.status, "timed_out");
    assert_eq!(h.record(&id).steps[0].status, "timed_out");
    match deliver_webhook(&store, &token, b"{}", h.now()).unwrap() {
        Err(WebhookRefusal::Closed(why)) => assert!(why.contains("timed out"), "{why}"),
        other => panic!("expected Closed, got {other:?}"),
    }
    assert_eq!(
        store.webhook_by_token(&token).unwrap().unwrap().body,
        None,
        "nothing stored"
    );
}

// ---- 7. approval -----------------------------------------------------------------------------

#[test]
fn a_call_needing_approval_waits_and_runs_once_approved() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let h = host(&clock, vec![("refund", ok_tool(&runs).needs_approval())]);
    model_calls(&h, &[("r1", "refund", "{}")]);
    assert!(matches!(drive(&h, 0.5), Action::Wait));
    let call = h.call("r1");
    assert_eq!(call.status, "waiting");
    assert_eq!(call.approval.map(|a| a.as_str()), Some("pending"));
    assert_eq!(call.wake_at, None);
    assert_eq!(
        h.record("r1").waiting_for,
        Some(json!({ "approval": "pending" }))
    );
    assert_eq!(h.next_wake(), None, "no alarm for an approval");
    assert_eq!(runs.get(), 0);

    let mut t = h.thread();
    assert!(matches!(
        t.decide_approval(h.now(), "nope", true, None),
        Err(ThreadError::Invalid(_))
    ));
    h.set_now(T0 + 5000);
    t.decide_approval(h.now(), "r1", true, None).unwrap();
    assert!(matches!(
        t.decide_approval(h.now(), "r1", false, None),
        Err(ThreadError::Conflict(_))
    ));
    drop(t);

    let next = expect_model(&h);
    assert_eq!(runs.get(), 1);
    let record = h.record("r1");
    assert_eq!(record.status, "success");
    assert_eq!(record.result.as_deref(), Some("done"));
    // The approved run is the call's first attempt, logged like any other.
    assert_eq!(record.attempts, 1);
    assert_eq!(record.attempt_log.len(), 1);
    assert_eq!(record.attempt_log[0].started_at, T0 + 5000);
    assert_eq!(record.attempt_log[0].outcome.as_deref(), Some("success"));
    assert!(next.history.iter().any(|m| m.content == "done"));
}

#[test]
fn an_approved_call_that_fails_gets_its_full_attempts() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let tool = step_tool(&runs, |n| Err(ToolError::new(format!("fail {n}")))).needs_approval();
    let h = host(&clock, vec![("refund", tool)]);
    let id = h.queue("refund", json!({}));
    drive_idle(&h);
    h.thread()
        .decide_approval(h.now(), &id, true, None)
        .unwrap();
    for _ in 0..4 {
        drive_idle(&h);
        if let Some(w) = h.call(&id).wake_at {
            h.set_now(w);
        }
    }
    let record = h.record(&id);
    assert_eq!(runs.get(), 3, "max_attempts counts the approved run");
    assert_eq!(
        record.result.as_deref(),
        Some("Error: fail 3 (gave up after 3 attempts)")
    );
    assert_eq!(record.attempt_log.len(), 3);
}

#[test]
fn a_rejected_call_gets_an_error_result_with_the_reason() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let h = host(&clock, vec![("refund", ok_tool(&runs).needs_approval())]);
    model_calls(&h, &[("r1", "refund", "{}")]);
    assert!(matches!(drive(&h, 0.5), Action::Wait));
    h.thread()
        .decide_approval(h.now(), "r1", false, Some("too expensive"))
        .unwrap();
    let next = expect_model(&h);
    assert_eq!(runs.get(), 0);
    let record = h.record("r1");
    assert_eq!(record.status, "error");
    let result = record.result.unwrap();
    assert!(result.contains("rejected"), "result: {result}");
    assert!(result.contains("too expensive"), "result: {result}");
    assert!(next.history.iter().any(|m| m.content == result));
    assert!(matches!(
        h.thread().decide_approval(h.now(), "r1", true, None),
        Err(ThreadError::Conflict(_))
    ));
}

// ---- 8. rate limits --------------------------------------------------------------------------

#[test]
fn a_call_over_the_rate_limit_waits_for_room_in_the_window() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let tool = ok_tool(&runs).rate_limit(RateLimit::per_minute(2));
    let h = host(&clock, vec![("limited", tool)]);
    let first = h.queue("limited", json!({}));
    drive_idle(&h);
    h.set_now(T0 + 1000);
    h.queue("limited", json!({}));
    drive_idle(&h);
    h.set_now(T0 + 2000);
    let third = h.queue("limited", json!({}));
    drive_idle(&h);
    assert_eq!(runs.get(), 2);
    let parked = h.call(&third);
    assert_eq!(parked.status, "rate_limited");
    assert_eq!(
        parked.wake_at,
        Some(h.record(&first).started_at.unwrap() + 60_000)
    );
    assert_eq!(parked.wake_at, Some(T0 + 60_000));
    assert_eq!(
        h.record(&third).waiting_for,
        Some(json!({ "rate_limit": { "per_minute": 2, "scope": "thread" } }))
    );
    assert_eq!(h.record(&third).attempts, 0, "waiting is not an attempt");

    h.set_now(T0 + 59_999);
    drive_idle(&h);
    assert_eq!(runs.get(), 2);
    h.set_now(T0 + 60_000);
    drive_idle(&h);
    assert_eq!(runs.get(), 3);
    let record = h.record(&third);
    assert_eq!(record.status, "success");
    assert_eq!(record.attempts, 1);
    assert_eq!(record.attempt_log[0].started_at, T0 + 60_000);
}

#[test]
fn a_failing_rate_limit_answers_with_an_error_saying_when_to_retry() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let tool = ok_tool(&runs).rate_limit(RateLimit::per_minute(2).fail());
    let h = host(&clock, vec![("limited", tool)]);
    model_calls(
        &h,
        &[
            ("l1", "limited", "{}"),
            ("l2", "limited", "{}"),
            ("l3", "limited", "{}"),
        ],
    );
    expect_model(&h);
    assert_eq!(runs.get(), 2);
    let record = h.record("l3");
    assert_eq!(record.status, "error");
    assert_eq!(
        record.result.as_deref(),
        Some("Error: rate limited: this tool allows 2 calls per minute per thread; try again in 60 s")
    );
    assert_eq!(record.attempts, 0);
}

#[test]
fn the_deployment_gate_follows_the_shared_window() {
    crate::install_app();
    let policy = ok_tool(&counter())
        .rate_limit(RateLimit::per_minute(3).per_deployment())
        .policy()
        .clone();
    let full = Window {
        used: 3,
        frees_at: T0 + 4000,
    };
    assert_eq!(
        deployment_gate(&policy, Some(full), T0),
        Some(Gate::Suspend(Suspension {
            status: CallStatus::RateLimited,
            wake_at: Some(T0 + 4000),
            detail: json!({ "rate_limit": { "per_minute": 3, "scope": "deployment" } }),
        }))
    );
    let room = Window { used: 2, ..full };
    assert_eq!(deployment_gate(&policy, Some(room), T0), None);
    assert_eq!(
        deployment_gate(&policy, None, T0),
        None,
        "no counter: no objection"
    );
    let thread_only = ok_tool(&counter())
        .rate_limit(RateLimit::per_minute(3))
        .policy()
        .clone();
    assert_eq!(deployment_gate(&thread_only, Some(full), T0), None);
}

#[test]
fn the_engine_asks_the_deployment_counter_and_follows_its_answer() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let tool = ok_tool(&runs).rate_limit(RateLimit::per_minute(3).per_deployment());
    let h = host(&clock, vec![("shared", tool)]);

    // The counter cannot be reached: the call runs (the thread's own window still applies).
    let first = h.queue("shared", json!({}));
    drive_idle(&h);
    assert_eq!((h.limiter_asked(), runs.get()), (1, 1));
    assert_eq!(h.record(&first).status, "success");

    // Room in the shared window: it runs.
    h.set_limiter(Some(Window {
        used: 2,
        frees_at: T0 + 4000,
    }));
    h.queue("shared", json!({}));
    drive_idle(&h);
    assert_eq!((h.limiter_asked(), runs.get()), (2, 2));

    // A full shared window: parked until it frees, not counted as an attempt, one alarm.
    h.set_limiter(Some(Window {
        used: 3,
        frees_at: T0 + 4000,
    }));
    let third = h.queue("shared", json!({}));
    drive_idle(&h);
    assert_eq!(runs.get(), 2);
    let parked = h.call(&third);
    assert_eq!(parked.status, "rate_limited");
    assert_eq!(parked.wake_at, Some(T0 + 4000));
    assert_eq!(h.next_wake(), Some(T0 + 4000));
    assert_eq!(h.record(&third).attempts, 0);
    assert_eq!(
        h.record(&third).waiting_for,
        Some(json!({ "rate_limit": { "per_minute": 3, "scope": "deployment" } }))
    );

    // At the wake time with room again, the parked call runs.
    h.set_limiter(Some(Window {
        used: 0,
        frees_at: T0 + 4000,
    }));
    h.set_now(T0 + 4000);
    drive_idle(&h);
    assert_eq!(runs.get(), 3);
    assert_eq!(h.record(&third).status, "success");
}

#[test]
fn a_call_cancelled_while_the_counter_answers_never_runs() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let tool = ok_tool(&runs).rate_limit(RateLimit::per_minute(3).per_deployment());
    let h = host(&clock, vec![("shared", tool)]);
    let id = h.queue("shared", json!({}));
    // A stop lands during the round trip to the shared counter.
    h.before_limiter_answer(Box::new(|t: &mut Thread<'_>| {
        t.stop(T0, "user").unwrap();
    }));
    assert!(matches!(drive(&h, 0.5), Action::Idle));
    assert_eq!(h.limiter_asked(), 1);
    assert_eq!(runs.get(), 0, "a cancelled call must not run");
    let record = h.record(&id);
    assert_eq!(record.status, "error");
    assert_eq!(record.attempts, 0);
    assert_eq!(
        record.result.as_deref(),
        Some("Error: cancelled: the thread was stopped (by user)")
    );
}

#[test]
fn prompt_bindings_are_merged_with_the_callers_and_fixed_at_the_first_start() {
    crate::install_app();
    let clock = clock();
    let tool = Tool::new("Echoes its bindings.")
        .handler(|flow: FlowState| async move { CallToolResult::json(&flow.bindings) });
    let h = host(&clock, vec![("echo", tool)]);
    let mut own = Map::new();
    own.insert("account".into(), json!("acme"));
    let id = h
        .thread()
        .queue_tool_with_bindings(h.now(), &h.registry, "echo", json!({}), Some(&own))
        .unwrap();
    let call = h.call(&id);
    let prompt = json!({ "account": "prompt-default", "region": "eu" });
    let mut t = h.thread();
    let Admission::Run(run) = t
        .handle_due_call(h.now(), call, h.policy("echo"), Some(&prompt))
        .unwrap()
    else {
        panic!("a plain call is admitted at once");
    };
    let fixed = json!({ "account": "acme", "region": "eu" });
    assert_eq!(
        serde_json::from_str::<Value>(run.call.bindings.as_deref().unwrap()).unwrap(),
        fixed
    );
    assert_eq!(
        serde_json::from_str::<Value>(h.call(&id).bindings.as_deref().unwrap()).unwrap(),
        fixed,
        "stored with the call, so later runs and the cache see the same"
    );
    // The start is stored; the run that follows (here the rerun of that start, as after a
    // crash) sees the stored bindings, whatever the prompt's are by then.
    drop(t);
    drive_idle(&h);
    assert_eq!(result_of(&h, &id), r#"{"account":"acme","region":"eu"}"#);
}

// ---- 9. cache --------------------------------------------------------------------------------

#[derive(Deserialize, JsonSchema)]
struct Pair {
    a: i64,
    b: i64,
}

#[test]
fn cached_results_answer_the_same_arguments_until_the_ttl_passes() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let counted = runs.clone();
    let tool = Tool::new("Adds.")
        .handler(move |_flow: FlowState, p: Pair| {
            let runs = counted.clone();
            async move {
                runs.set(runs.get() + 1);
                Ok::<_, ToolError>(format!("{} (run {})", p.a + p.b, runs.get()))
            }
        })
        .cache_results(Duration::from_secs(60));
    let h = host(&clock, vec![("add", tool)]);
    model_calls(&h, &[("k1", "add", r#"{"a":1,"b":2}"#)]);
    let call = expect_model(&h);
    assert_eq!(result_of(&h, "k1"), "3 (run 1)");

    h.set_now(T0 + 59_000);
    reply(&h, call, "", &[("k2", "add", r#"{ "b": 2, "a": 1 }"#)]);
    let call = expect_model(&h);
    assert_eq!(runs.get(), 1, "answered from the cache");
    assert_eq!(result_of(&h, "k2"), "3 (run 1)");
    assert_eq!(h.record("k2").status, "success");
    assert_eq!(h.record("k2").attempts, 0);

    reply(&h, call, "", &[("k3", "add", r#"{"a":1,"b":3}"#)]);
    let call = expect_model(&h);
    assert_eq!(result_of(&h, "k3"), "4 (run 2)", "other arguments run");

    h.set_now(T0 + 60_001);
    reply(&h, call, "", &[("k4", "add", r#"{"b":2,"a":1}"#)]);
    expect_model(&h);
    assert_eq!(result_of(&h, "k4"), "3 (run 3)", "expired: runs again");
    assert_eq!(runs.get(), 3);
}

#[test]
fn error_results_are_not_cached() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let tool =
        step_tool(&runs, |_| Err(ToolError::fatal("nope"))).cache_results(Duration::from_secs(60));
    let h = host(&clock, vec![("failing", tool)]);
    let first = h.queue("failing", json!({}));
    drive_idle(&h);
    let second = h.queue("failing", json!({}));
    drive_idle(&h);
    assert_eq!(runs.get(), 2);
    assert_eq!(result_of(&h, &first), result_of(&h, &second));
}

// ---- 10. deadline ----------------------------------------------------------------------------

#[test]
fn a_workflow_deadline_caps_its_sleep_and_stops_it_on_time() {
    crate::install_app();
    let clock = clock();
    let woke = counter();
    let tool = napper(60, &woke).deadline(Duration::from_secs(10));
    let h = host(&clock, vec![("slow", tool)]);
    let id = h.queue("slow", json!({}));
    drive_idle(&h);
    let call = h.call(&id);
    assert_eq!(call.status, "sleeping");
    assert_eq!(call.deadline_at, Some(T0 + 10_000));
    assert_eq!(call.wake_at, Some(T0 + 10_000), "woken at the deadline");
    assert_eq!(h.next_wake(), Some(T0 + 10_000));

    h.set_now(T0 + 10_000);
    drive_idle(&h);
    assert_eq!(woke.get(), 0, "never ran past its sleep");
    let record = h.record(&id);
    assert_eq!(record.status, "error");
    assert_eq!(
        record.result.as_deref(),
        Some("Error: the workflow did not finish within its time limit (10 s) and was stopped")
    );
    assert_eq!(h.next_wake(), None);
}

#[test]
fn a_retry_that_would_wake_after_the_deadline_ends_the_call() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let tool = step_tool(&runs, |_| {
        Err(ToolError::retry_after("later", Duration::from_secs(20)))
    })
    .deadline(Duration::from_secs(10));
    let h = host(&clock, vec![("late", tool)]);
    let id = h.queue("late", json!({}));
    drive_idle(&h);
    assert_eq!(runs.get(), 1);
    assert!(result_of(&h, &id).contains("time limit (10 s)"));
}

// ---- 11. the turn around parked calls -----------------------------------------------------------

#[test]
fn a_model_reply_waits_for_its_parked_call_and_then_calls_the_model() {
    crate::install_app();
    let clock = clock();
    let (woke, quick) = (counter(), counter());
    let h = host(
        &clock,
        vec![("nap", napper(30, &woke)), ("quick", ok_tool(&quick))],
    );
    model_calls(&h, &[("n1", "nap", "{}"), ("q1", "quick", "{}")]);
    assert!(matches!(drive(&h, 0.5), Action::Wait));
    assert_eq!(h.call("n1").status, "sleeping");
    assert_eq!(h.record("q1").status, "success");
    assert_eq!(quick.get(), 1);
    assert!(h.store().has_pending_model_calls().unwrap());
    assert_eq!(h.status(), ThreadStatus::Running);
    // Asking again changes nothing: no model call while a call of its reply is parked.
    assert!(matches!(
        h.thread().next_action(h.now(), MAX_STEPS).unwrap(),
        Action::Wait
    ));

    h.set_now(T0 + 30_000);
    let next = expect_model(&h);
    assert_eq!(woke.get(), 1);
    let results: Vec<(&str, &str)> = next
        .history
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| (m.tool_call_id.as_deref().unwrap(), m.content.as_str()))
        .collect();
    assert_eq!(results, [("n1", "rested"), ("q1", "done")]);
}

#[test]
fn a_parked_queued_workflow_does_not_hold_up_the_conversation() {
    crate::install_app();
    let clock = clock();
    let woke = counter();
    let h = host(&clock, vec![("nap", napper(30, &woke))]);
    let id = h.queue("nap", json!({}));
    drive_idle(&h);
    assert_eq!(h.status(), ThreadStatus::Idle);
    assert_eq!(h.call(&id).status, "sleeping");

    h.set_now(T0 + 1000);
    h.thread().post_user_message(h.now(), "hello").unwrap();
    let call = expect_model(&h);
    assert!(
        call.history
            .iter()
            .all(|m| m.tool_calls.iter().all(|c| c.id != id)
                && m.tool_call_id.as_deref() != Some(id.as_str())),
        "the parked call is hidden from the model"
    );
    assert_eq!(call.history.len(), 1);
    assert_eq!(call.history[0].content, "hello");
    reply(&h, call, "hi!", &[]);
    drive_idle(&h);

    // Due on an idle thread: it starts a turn of its own.
    h.set_now(T0 + 30_000);
    let mut t = h.thread();
    let Action::RunTool(due) = t.next_action(h.now(), MAX_STEPS).unwrap() else {
        panic!("expected the parked call to run")
    };
    assert_eq!(due.call.id, id);
    assert_eq!(t.summary().unwrap().status, ThreadStatus::Running);
    h.run_tools(&mut t, vec![due], 0.5);
    drop(t);
    drive_idle(&h);
    assert_eq!(woke.get(), 1);
    assert_eq!(result_of(&h, &id), "rested");

    h.thread().post_user_message(h.now(), "and now?").unwrap();
    let call = expect_model(&h);
    assert!(call
        .history
        .iter()
        .any(|m| m.tool_call_id.as_deref() == Some(id.as_str()) && m.content == "rested"));
}

#[test]
fn stopping_the_thread_cancels_parked_calls() {
    crate::install_app();
    let clock = clock();
    let (woke, approved) = (counter(), counter());
    let h = host(
        &clock,
        vec![
            ("nap", napper(30, &woke)),
            ("refund", ok_tool(&approved).needs_approval()),
        ],
    );
    let nap = h.queue("nap", json!({}));
    let refund = h.queue("refund", json!({}));
    drive_idle(&h);
    assert_eq!(h.call(&refund).status, "waiting");
    assert_eq!(h.next_wake(), Some(T0 + 30_000));

    h.thread().stop(h.now(), "user").unwrap();
    for id in [&nap, &refund] {
        let record = h.record(id);
        assert_eq!(record.status, "error");
        assert_eq!(
            record.result.as_deref(),
            Some("Error: cancelled: the thread was stopped (by user)")
        );
    }
    assert_eq!(h.next_wake(), None);
    assert!(h.store().pending_tool_call_ids().unwrap().is_empty());
    h.set_now(T0 + 30_000);
    assert!(matches!(drive(&h, 0.5), Action::Idle));
    assert_eq!((woke.get(), approved.get()), (0, 0));
}

#[test]
fn an_approval_cannot_be_decided_once_the_call_is_cancelled() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let h = host(&clock, vec![("refund", ok_tool(&runs).needs_approval())]);
    let id = h.queue("refund", json!({}));
    drive_idle(&h);
    assert_eq!(h.call(&id).approval.map(|a| a.as_str()), Some("pending"));
    h.thread().stop(h.now(), "user").unwrap();
    assert_eq!(h.call(&id).status, "error");
    assert!(matches!(
        h.thread().decide_approval(h.now(), &id, true, None),
        Err(ThreadError::Conflict(_))
    ));
    assert_eq!(runs.get(), 0);
}

#[test]
fn a_call_interrupted_three_times_is_abandoned() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let h = host(&clock, vec![("crashy", ok_tool(&runs))]);
    let id = h.queue("crashy", json!({}));
    for run in 0..3 {
        let mut t = h.thread();
        let Action::RunTool(call) = t.next_action(h.now(), MAX_STEPS).unwrap() else {
            panic!("run {run}: expected the call to run")
        };
        assert_eq!(h.call(&id).interruptions, run);
        // The Worker dies while the call runs.
        t.start_tool(h.now(), &call, true).unwrap();
    }
    assert!(matches!(
        h.thread().next_action(h.now(), MAX_STEPS).unwrap(),
        Action::Idle
    ));
    let record = h.record(&id);
    assert_eq!(record.status, "error");
    assert_eq!(record.interruptions, 3);
    let result = record.result.unwrap();
    assert!(result.contains("interrupted 3 times"), "result: {result}");
    assert_eq!(runs.get(), 0);
}

// ---- 12. tool status -------------------------------------------------------------------------

#[test]
fn tool_status_reports_busy_rate_limited_error_and_available() {
    crate::install_app();
    let clock = clock();
    let (woke, limited, failing) = (counter(), counter(), counter());
    let h = host(
        &clock,
        vec![
            ("nap", napper(30, &woke)),
            (
                "limited",
                ok_tool(&limited).rate_limit(RateLimit::per_minute(1)),
            ),
            (
                "failing",
                step_tool(&failing, |_| Err(ToolError::fatal("broken"))),
            ),
        ],
    );
    let status = |name: &str| tool_status(&h.store(), name, &h.policy(name), h.now()).unwrap();
    for name in ["nap", "limited", "failing"] {
        assert_eq!(status(name), "available", "{name} before any call");
    }

    h.queue("nap", json!({}));
    h.queue("limited", json!({}));
    h.queue("failing", json!({}));
    drive_idle(&h);
    assert_eq!(status("nap"), "busy");
    assert_eq!(status("limited"), "rate_limited");
    assert_eq!(status("failing"), "error");

    h.set_now(T0 + 60_000);
    assert_eq!(status("limited"), "available", "the window moved on");
    drive_idle(&h);
    assert_eq!(status("nap"), "available");
}

// ---- 13. bindings ----------------------------------------------------------------------------

#[test]
fn queued_bindings_are_stored_with_the_call_and_reach_the_tool() {
    crate::install_app();
    let clock = clock();
    let tool = Tool::new("Echoes its bindings.")
        .handler(|flow: FlowState| async move { CallToolResult::json(&flow.bindings) });
    let h = host(&clock, vec![("echo", tool)]);
    let mut bindings = Map::new();
    bindings.insert("account".into(), json!("acme"));
    let mut t = h.thread();
    let with = t
        .queue_tool_with_bindings(h.now(), &h.registry, "echo", json!({}), Some(&bindings))
        .unwrap();
    let empty = t
        .queue_tool_with_bindings(h.now(), &h.registry, "echo", json!({}), Some(&Map::new()))
        .unwrap();
    let without = t
        .queue_tool(h.now(), &h.registry, "echo", json!({}))
        .unwrap();
    drop(t);

    let stored = h.call(&with).bindings.unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&stored).unwrap(),
        json!({ "account": "acme" })
    );
    assert_eq!(h.call(&empty).bindings, None);
    assert_eq!(h.call(&without).bindings, None);
    assert!(h
        .store()
        .pending_tool_calls()
        .unwrap()
        .iter()
        .any(|c| c.call.id == with && c.bindings.as_deref() == Some(stored.as_str())));

    drive_idle(&h);
    assert_eq!(result_of(&h, &with), r#"{"account":"acme"}"#);
    assert_eq!(result_of(&h, &without), "{}");
}

#[test]
fn the_cache_key_is_the_canonical_arguments_plus_the_bindings() {
    crate::install_app();
    let call = |args: &str, bindings: Option<&str>| StoredToolCall {
        call: edgent::values::message::ToolCall {
            id: "c".into(),
            name: "t".into(),
            arguments: args.into(),
        },
        message_id: "m".into(),
        status: CallStatus::Queued,
        origin: edgent::engine::store::CallOrigin::Queue,
        attempts: 0,
        interruptions: 0,
        wake_at: None,
        approval: None,
        bindings: bindings.map(str::to_owned),
        deadline_at: None,
    };
    assert_eq!(
        cache_key(&call(r#"{ "b": 2, "a": 1 }"#, None)),
        cache_key(&call(r#"{"a":1,"b":2}"#, None))
    );
    assert_ne!(
        cache_key(&call(r#"{"a":1}"#, Some(r#"{"account":"acme"}"#))),
        cache_key(&call(r#"{"a":1}"#, Some(r#"{"account":"globex"}"#))),
        "two accounts never share a cached answer"
    );
    assert_ne!(
        cache_key(&call(r#"{"a":1}"#, None)),
        cache_key(&call(r#"{"a":1}"#, Some(r#"{"account":"acme"}"#)))
    );
}

// ---- the engine's timers and work checks (what the driver sets its one alarm to) ----------

#[test]
fn the_engine_wakes_the_thread_at_its_earliest_parked_call_and_never_when_stopped() {
    crate::install_app();
    let clock = clock();
    let woke = counter();
    let h = host(
        &clock,
        vec![("short", napper(10, &woke)), ("long", napper(90, &woke))],
    );
    let t = h.thread();
    assert_eq!(t.poll_timeout().unwrap(), None, "nothing parked: no alarm");
    assert!(
        !t.wants_step(h.now()).unwrap(),
        "an idle thread with nothing due"
    );
    assert!(!t.has_work(h.now()).unwrap());
    drop(t);

    h.queue("long", json!({}));
    h.queue("short", json!({}));
    assert!(
        h.thread().wants_step(h.now()).unwrap(),
        "queued calls are due at once"
    );
    drive_idle(&h);
    let t = h.thread();
    assert_eq!(t.poll_timeout().unwrap(), Some(T0 + 10_000));
    assert!(!t.wants_step(T0 + 9_999).unwrap());
    assert!(!t.has_work(T0 + 9_999).unwrap());
    assert!(
        t.wants_step(T0 + 10_000).unwrap(),
        "a due parked call starts a turn"
    );
    assert!(t.has_work(T0 + 10_000).unwrap());
    drop(t);

    h.set_now(T0 + 10_000);
    drive_idle(&h);
    assert_eq!(woke.get(), 1);
    assert_eq!(h.thread().poll_timeout().unwrap(), Some(T0 + 90_000));

    h.thread().stop(h.now(), "user").unwrap();
    let t = h.thread();
    assert_eq!(
        t.poll_timeout().unwrap(),
        None,
        "a stopped thread parks nothing"
    );
    assert!(!t.wants_step(T0 + 90_000).unwrap());
    assert!(!t.has_work(T0 + 90_000).unwrap());
}

#[test]
fn a_running_thread_has_work_unless_its_reply_waits_on_a_parked_call() {
    crate::install_app();
    let clock = clock();
    let woke = counter();
    let h = host(&clock, vec![("nap", napper(30, &woke))]);
    let mut t = h.thread();
    t.post_user_message(h.now(), "hi").unwrap();
    assert!(t.wants_step(h.now()).unwrap());
    assert!(t.has_work(h.now()).unwrap(), "the model is owed a call");
    drop(t);

    // The model's reply calls a workflow that parks: the turn waits, nothing to start.
    let call = expect_model(&h);
    reply(&h, call, "", &[("n1", "nap", "{}")]);
    assert!(matches!(drive(&h, 0.5), Action::Wait));
    let t = h.thread();
    assert_eq!(t.summary().unwrap().status, ThreadStatus::Running);
    assert!(
        !t.has_work(T0 + 29_999).unwrap(),
        "blocked on the parked call"
    );
    assert!(t.has_work(T0 + 30_000).unwrap(), "the parked call is due");
    assert_eq!(t.poll_timeout().unwrap(), Some(T0 + 30_000));
}

#[test]
fn a_configuration_failure_fails_the_turn_and_defers_due_parked_calls_a_minute() {
    crate::install_app();
    let clock = clock();
    let woke = counter();
    let h = host(&clock, vec![("nap", napper(10, &woke))]);
    let id = h.queue("nap", json!({}));
    drive_idle(&h);
    let due = T0 + 10_000;
    h.set_now(due);
    let mut t = h.thread();
    assert!(t.wants_step(due).unwrap());
    t.post_user_message(due, "hi").unwrap();
    t.handle_config_failure(due, "no agent named \"support\"".into())
        .unwrap();
    h.keep_frames(&mut t);
    let summary = t.summary().unwrap();
    assert_eq!(
        summary.status,
        ThreadStatus::Idle,
        "the thread stays usable"
    );
    assert!(summary
        .last_error
        .as_deref()
        .is_some_and(|e| e.contains("no agent named")));
    // The due call waits a minute, so an idle thread does not loop on a failing config.
    let later = due + CONFIG_RETRY_MS;
    assert_eq!(h.call(&id).wake_at, Some(later));
    assert_eq!(t.poll_timeout().unwrap(), Some(later));
    assert!(!t.wants_step(later - 1).unwrap());
    assert!(!t.has_work(later - 1).unwrap());
    assert!(t.wants_step(later).unwrap());
    assert_eq!(woke.get(), 0);
}

#[test]
fn a_configuration_failure_defers_queued_calls_too_so_the_thread_does_not_spin() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let h = host(&clock, vec![("ok", ok_tool(&runs))]);
    let id = h.queue("ok", json!({}));
    let mut t = h.thread();
    assert!(t.has_work(T0).unwrap(), "a queued call is due at once");
    t.handle_config_failure(T0, "no agent named \"support\"".into())
        .unwrap();
    // Without a wake time the queued call would be due again at once, and the driver would
    // reschedule the failing load immediately, forever.
    let later = T0 + CONFIG_RETRY_MS;
    assert!(!t.has_work(T0 + 1).unwrap());
    assert!(!t.wants_step(later - 1).unwrap());
    assert_eq!(t.poll_timeout().unwrap(), Some(later));
    assert!(t.wants_step(later).unwrap());
    drop(t);
    h.set_now(later);
    drive_idle(&h);
    assert_eq!(runs.get(), 1, "it runs once the configuration loads");
    assert_eq!(h.record(&id).status, "success");
    assert_eq!(h.next_wake(), None, "a started call keeps no wake time");
}
