//! Workflows: replay of recorded steps after a sleep or a retry, step names, and webhooks
//! (delivery, wrong token, non-JSON, a second delivery, the timeout).

use super::*;

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
        .contains("which only a top-level call can do (not one inside another tool)"));
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

#[test]
fn a_sleep_longer_than_a_year_is_cut_to_a_year() {
    crate::install_app();
    let clock = clock();
    let tool = Tool::new("Sleeps forever.").handler(|flow: FlowState| async move {
        flow.sleep("forever", Duration::MAX).await?;
        Ok::<_, ToolError>(CallToolResult::text("woke"))
    });
    let h = host(&clock, vec![("sleeper", tool)]);
    let id = h.queue("sleeper", json!({}));
    drive_idle(&h);
    let call = h.call(&id);
    assert_eq!(call.status, "sleeping");
    assert_eq!(
        call.wake_at,
        Some(T0 + edgent::values::limits::MAX_SLEEP_MS),
        "no overflow, no wake in an unreachable future"
    );
}
