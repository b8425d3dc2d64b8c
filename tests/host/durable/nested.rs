//! Tools called inside another call (`flow.call_tool`, TOML workflow steps, a sub-prompt's
//! tools) run under the called tool's own policy: its rate limits and timeout apply, and each
//! run is an attempt in the enclosing call's execution history (`nested`). The enclosing call
//! keeps its own retries.

use super::*;

/// A workflow calling `tool` once in each of the steps `steps`, answering how many ran.
fn caller(tool: &'static str, steps: &'static [&'static str]) -> Tool {
    Tool::new("Calls another tool in each step.").handler(move |flow: FlowState| async move {
        for step in steps {
            flow.step(step, || flow.call_tool(tool, json!({}))).await?;
        }
        Ok::<_, ToolError>(format!("{} calls", steps.len()))
    })
}

/// The nested runs logged under `id`: (key, tool, outcome).
fn nested_of(h: &TestHost, id: &str) -> Vec<(String, String, Option<String>)> {
    h.record(id)
        .nested
        .into_iter()
        .map(|n| (n.key, n.tool, n.attempt.outcome))
        .collect()
}

#[test]
fn a_workflow_cannot_walk_past_the_called_tools_rate_limit() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let limited = ok_tool(&runs).rate_limit(RateLimit::per_minute(2).fail());
    let h = host(
        &clock,
        vec![
            ("limited", limited),
            ("thrice", caller("limited", &["a", "b", "c"])),
        ],
    );
    let id = h.queue("thrice", json!({}));
    drive_idle(&h);
    assert_eq!(
        runs.get(),
        2,
        "the third nested call is refused by the window"
    );
    assert_eq!(
        result_of(&h, &id),
        "Error: step \"c\" failed: rate limited: tool \"limited\" allows 2 calls per minute \
         per thread; try again in 60 s"
    );
    let success = Some("success".to_owned());
    assert_eq!(
        nested_of(&h, &id),
        vec![
            (format!("{id}/a/1"), "limited".to_owned(), success.clone()),
            (format!("{id}/b/1"), "limited".to_owned(), success),
        ]
    );
    // A top-level call of the tool now finds the window full too: nested runs count in it.
    let top = h.queue("limited", json!({}));
    drive_idle(&h);
    assert!(result_of(&h, &top).starts_with("Error: rate limited"));
    assert_eq!(runs.get(), 2);
}

#[test]
fn a_nested_call_that_waits_for_room_parks_the_enclosing_call_until_the_window_frees() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let limited = ok_tool(&runs).rate_limit(RateLimit::per_minute(1));
    let h = host(
        &clock,
        vec![
            ("limited", limited),
            ("twice", caller("limited", &["a", "b"])),
        ],
    );
    let id = h.queue("twice", json!({}));
    drive_idle(&h);
    let parked = h.call(&id);
    // It sleeps until the window frees, a minute after the first run: no attempt is spent.
    assert_eq!(parked.status, "sleeping");
    assert_eq!(parked.wake_at, Some(T0 + 60_000));
    assert_eq!(runs.get(), 1);
    assert_eq!(
        h.record(&id).waiting_for,
        Some(json!({
            "rate_limit": { "tool": "limited", "per_minute": 1, "scope": "thread" },
            "until": T0 + 60_000,
        }))
    );
    h.set_now(T0 + 60_000);
    drive_idle(&h);
    assert_eq!(result_of(&h, &id), "2 calls");
    assert_eq!(runs.get(), 2, "step a was recorded and not run again");
    assert_eq!(
        h.record(&id).attempts,
        1,
        "waiting for room is not an attempt"
    );
    let keys: Vec<String> = nested_of(&h, &id).into_iter().map(|n| n.0).collect();
    assert_eq!(keys, vec![format!("{id}/a/1"), format!("{id}/b/1")]);
}

/// Found by a review: a workflow calling a 1-a-minute tool in more steps than it has attempts
/// gave up ("gave up after 3 attempts"), though every call would succeed given the time.
#[test]
fn a_workflow_with_more_limited_calls_than_attempts_still_finishes() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let limited = ok_tool(&runs).rate_limit(RateLimit::per_minute(1));
    let h = host(
        &clock,
        vec![
            ("limited", limited),
            ("four", caller("limited", &["a", "b", "c", "d"])),
        ],
    );
    let id = h.queue("four", json!({}));
    for minute in 1..=4 {
        drive_idle(&h);
        h.set_now(T0 + minute * 60_000);
    }
    drive_idle(&h);
    assert_eq!(result_of(&h, &id), "4 calls");
    assert_eq!(runs.get(), 4);
    assert_eq!(h.record(&id).attempts, 1);
}

#[test]
fn a_nested_call_asks_the_deployment_counter_of_a_deployment_limit() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let limited = ok_tool(&runs).rate_limit(RateLimit::per_minute(3).per_deployment().fail());
    let h = host(
        &clock,
        vec![("limited", limited), ("once", caller("limited", &["a"]))],
    );
    h.set_limiter(Some(Window {
        used: 3,
        frees_at: T0 + 30_000,
    }));
    let id = h.queue("once", json!({}));
    drive_idle(&h);
    assert_eq!(h.limiter_asked(), 1);
    assert_eq!(runs.get(), 0);
    assert_eq!(
        result_of(&h, &id),
        "Error: step \"a\" failed: rate limited: tool \"limited\" allows 3 calls per minute \
         per deployment; try again in 30 s"
    );
    assert!(
        nested_of(&h, &id).is_empty(),
        "a refused call is not an attempt"
    );
}

#[test]
fn a_nested_call_runs_under_the_called_tools_timeout_and_the_log_says_so() {
    crate::install_app();
    let clock = clock();
    let slow =
        Tool::new("Slow.")
            .timeout(Duration::from_secs(2))
            .handler(|flow: FlowState| async move {
                flow.host().sleep(30_000).await;
                Ok::<_, ToolError>("late".to_owned())
            });
    let once = caller("slow", &["a"]).retry(RetryPolicy::none());
    let h = host(&clock, vec![("slow", slow), ("once", once)]);
    let id = h.queue("once", json!({}));
    drive_idle(&h);
    assert_eq!(
        result_of(&h, &id),
        "Error: step \"a\" failed: tool \"slow\" did not finish within its timeout of 2000 ms"
    );
    // The enclosing call's own timeout (the default) never fired: the nested one did.
    assert_eq!(h.now(), T0 + 2_000);
    let nested = h.record(&id).nested;
    assert_eq!(nested.len(), 1);
    assert_eq!(nested[0].attempt.outcome.as_deref(), Some("timeout"));
    assert_eq!(nested[0].attempt.finished_at, Some(T0 + 2_000));
}

#[test]
fn a_rerun_of_the_enclosing_call_logs_a_new_attempt_of_the_same_key() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let flaky = step_tool(&runs, |n| {
        if n == 1 {
            Err(ToolError::new("not yet"))
        } else {
            Ok("fine".to_owned())
        }
    });
    let once = caller("flaky", &["a"]).retry(RetryPolicy::attempts(2));
    let h = host(&clock, vec![("flaky", flaky), ("once", once)]);
    let id = h.queue("once", json!({}));
    drive_idle(&h);
    if let Some(w) = h.call(&id).wake_at {
        h.set_now(w);
    }
    drive_idle(&h);
    assert_eq!(result_of(&h, &id), "1 calls");
    let nested = h.record(&id).nested;
    let seen: Vec<(i64, Option<&str>, Option<&str>)> = nested
        .iter()
        .map(|n| {
            (
                n.attempt.attempt,
                n.attempt.outcome.as_deref(),
                n.attempt.error.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            (1, Some("error"), Some("not yet")),
            (2, Some("success"), None)
        ]
    );
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct KeyArgs {
    key: String,
}

/// Found by a review: a secret the enclosing workflow read and passed on reached the nested
/// attempt log (clients read it in the execution history) unredacted.
#[test]
fn a_secret_the_enclosing_run_read_is_redacted_from_the_nested_log() {
    crate::install_app();
    const KEY: &str = "sekrit-key-123";
    let clock = clock();
    let echo = Tool::new("Fails quoting its arguments.").handler(
        |_flow: FlowState, args: KeyArgs| async move {
            Err::<CallToolResult, _>(ToolError::fatal(format!("bad request {}", args.key)))
        },
    );
    let outer = Tool::new("Passes its key on.").handler(|flow: FlowState| async move {
        let key = flow.secret("K").unwrap_or_default();
        flow.step("a", || flow.call_tool("echo", json!({ "key": key })))
            .await?;
        Ok::<_, ToolError>("ok".to_owned())
    });
    let h = TestHost::with_clock(
        Registry::build(vec![("echo", echo), ("outer", outer)]).unwrap(),
        clock.clone(),
    )
    .secret("K", KEY)
    .into_rc();
    let id = h.queue("outer", json!({}));
    drive_idle(&h);
    let record = h.record(&id);
    assert!(!record.result.clone().unwrap_or_default().contains(KEY));
    let nested = serde_json::to_string(&record.nested).unwrap();
    assert!(nested.contains("bad request [redacted]"), "{nested}");
    assert!(!nested.contains(KEY), "{nested}");
}
