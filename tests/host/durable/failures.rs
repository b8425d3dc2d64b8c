//! Failing calls: retries with jittered backoff, fatal errors, `retry_after`, exhausted attempts,
//! timeouts, and arguments that do not fit the tool.

use super::*;
use edgent::values::limits::{MAX_ERROR_TEXT_BYTES, MAX_STEP_VALUE_BYTES, MAX_TOOL_RESULT_BYTES};

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

// ---- redaction ---------------------------------------------------------------------------------

#[test]
fn a_secret_the_tool_read_never_reaches_its_stored_error_or_result() {
    crate::install_app();
    const KEY: &str = "w3ather/k+y=1";
    let clock = clock();
    // Like get_weather: the key travels in the URL, and the error quotes the URL (encoded).
    let leaky_error = Tool::new("Fails quoting its URL.").handler(|flow: FlowState| async move {
        let key = flow.secret("WEATHER_API_KEY").unwrap_or_default();
        let encoded: String = key
            .bytes()
            .map(|b| match b {
                b'a'..=b'z' | b'0'..=b'9' => char::from(b).to_string(),
                _ => format!("%{b:02X}"),
            })
            .collect();
        Err::<CallToolResult, _>(ToolError::fatal(format!(
            "GET https://w.example/weather?appid={encoded} failed; key {key} rejected"
        )))
    });
    let leaky_result = Tool::new("Echoes its key.").handler(|flow: FlowState| async move {
        CallToolResult::text(format!(
            "used {}",
            flow.secret("WEATHER_API_KEY").unwrap_or_default()
        ))
    });
    let h = TestHost::with_clock(
        Registry::build(vec![
            ("leaky_error", leaky_error),
            ("leaky_result", leaky_result),
        ])
        .unwrap(),
        clock.clone(),
    )
    .secret("WEATHER_API_KEY", KEY)
    .into_rc();
    let failed = h.queue("leaky_error", json!({}));
    let echoed = h.queue("leaky_result", json!({}));
    drive_idle(&h);
    let error = result_of(&h, &failed);
    assert_eq!(
        error,
        "Error: GET https://w.example/weather?appid=[redacted] failed; key [redacted] rejected"
    );
    assert_eq!(result_of(&h, &echoed), "used [redacted]");
    let frames = serde_json::to_string(&h.frames()).unwrap();
    assert!(
        !frames.contains(KEY) && !frames.contains("w3ather%2F"),
        "{frames}"
    );
    let attempts = serde_json::to_string(&h.record(&failed).attempt_log).unwrap();
    assert!(!attempts.contains("w3ather"), "{attempts}");
}

// ---- limits ------------------------------------------------------------------------------------

#[test]
fn the_harness_refuses_a_row_over_the_durable_objects_limit() {
    let db = edgent::testing::Sqlite::memory();
    use edgent::values::sql::Sql;
    db.exec("CREATE TABLE t (v TEXT)", &[]).unwrap();
    let big = "x".repeat(edgent::values::limits::SQLITE_MAX_LENGTH + 1);
    let e = db
        .exec("INSERT INTO t (v) VALUES (?)", &[big.as_str().into()])
        .unwrap_err();
    assert!(e.to_string().to_lowercase().contains("too big"), "{e}");
}

#[test]
fn an_oversized_result_is_an_error_result_once_and_never_a_rerun() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    // Past SQLite's limit too: storing it as it is would fail (and, before the cap, re-run).
    let tool = step_tool(&runs, |_| {
        Ok("y".repeat(edgent::values::limits::SQLITE_MAX_LENGTH + 1))
    });
    let h = host(&clock, vec![("huge", tool)]);
    let id = h.queue("huge", json!({}));
    drive_idle(&h);
    assert_eq!(runs.get(), 1, "a result over the limit is not retried");
    let record = h.record(&id);
    assert_eq!(record.status, "error");
    assert_eq!(record.attempts, 1);
    assert!(
        result_of(&h, &id).contains(&format!("over the limit of {MAX_TOOL_RESULT_BYTES}")),
        "{}",
        result_of(&h, &id)
    );
    assert_eq!(record.interruptions, 0);
}

#[test]
fn an_oversized_step_value_fails_the_workflow_once() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let counted = runs.clone();
    let tool = Tool::new("Records too much.").handler(move |flow: FlowState| {
        let counted = counted.clone();
        async move {
            counted.set(counted.get() + 1);
            let big: String = flow
                .step("fetch", || async {
                    Ok("z".repeat(MAX_STEP_VALUE_BYTES + 1))
                })
                .await?;
            Ok::<_, ToolError>(CallToolResult::text(big.len().to_string()))
        }
    });
    let h = host(&clock, vec![("hoarder", tool)]);
    let id = h.queue("hoarder", json!({}));
    drive_idle(&h);
    assert_eq!(runs.get(), 1, "fatal: not retried");
    let result = result_of(&h, &id);
    assert!(result.contains("step \"fetch\" returned"), "{result}");
    assert_eq!(h.record(&id).status, "error");
}

#[test]
fn a_long_error_text_is_cut() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let tool = step_tool(&runs, |_| {
        Err(ToolError::fatal("é".repeat(MAX_ERROR_TEXT_BYTES)))
    });
    let h = host(&clock, vec![("wordy", tool)]);
    let id = h.queue("wordy", json!({}));
    drive_idle(&h);
    let result = result_of(&h, &id);
    assert!(
        result.len() < MAX_ERROR_TEXT_BYTES + 100,
        "{}",
        result.len()
    );
    assert!(result.ends_with(&format!("… (cut at {MAX_ERROR_TEXT_BYTES} bytes)")));
}

#[test]
fn a_secret_in_a_recorded_step_or_a_media_url_is_redacted_even_after_a_replay() {
    crate::install_app();
    const KEY: &str = "w3atherKEY123";
    let clock = clock();
    // The step reads the key and returns a URL holding it; the workflow sleeps (so the next
    // run replays the step from its record, without reading the key) and returns the value.
    let workflow = Tool::new("Records a keyed URL.").handler(|flow: FlowState| async move {
        let url: String = flow
            .step("fetch", || async {
                Ok(format!(
                    "https://w.example/?appid={}",
                    flow.secret("WEATHER_API_KEY").unwrap_or_default()
                ))
            })
            .await?;
        flow.sleep("pause", Duration::from_secs(1)).await?;
        Ok::<_, ToolError>(CallToolResult::text(format!("fetched {url}")))
    });
    let chart = Tool::new("A keyed image URL.").handler(|flow: FlowState| async move {
        let key = flow.secret("WEATHER_API_KEY").unwrap_or_default();
        CallToolResult::success(vec![edgent::values::tool_result::Content::Image {
            source: edgent::values::tool_result::Source::url(
                "image/png",
                format!("https://maps.example/?key={key}"),
            ),
        }])
    });
    let h = TestHost::with_clock(
        Registry::build(vec![("keyed", workflow), ("chart", chart)]).unwrap(),
        clock.clone(),
    )
    .secret("WEATHER_API_KEY", KEY)
    .into_rc();
    let id = h.queue("keyed", json!({}));
    let image = h.queue("chart", json!({}));
    drive_idle(&h);
    h.set_now(h.call(&id).wake_at.unwrap());
    drive_idle(&h);
    assert_eq!(
        result_of(&h, &id),
        "fetched https://w.example/?appid=[redacted]"
    );
    let record = serde_json::to_string(&h.record(&id)).unwrap();
    assert!(
        !record.contains(KEY),
        "steps and results of the record: {record}"
    );
    let stored = serde_json::to_string(
        &h.thread()
            .messages(20, 0, Order::Asc, true)
            .unwrap()
            .messages,
    )
    .unwrap();
    assert!(!stored.contains(KEY), "{stored}");
    assert!(
        stored.contains("https://maps.example/?key=[redacted]"),
        "{image}: {stored}"
    );
}
