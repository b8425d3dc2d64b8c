//! TOML workflows run on the [`TestHost`] with real tools: values, parallel groups, failures,
//! unresolved references, replay of recorded steps and argument checks.

use super::*;

fn tool(value: Value) -> Tool {
    Tool::from_workflow_json(&value.to_string()).unwrap()
}

fn bindings(value: Value) -> Map<String, Value> {
    value.as_object().unwrap().clone()
}

/// One attempt of `tool` as call `call_id` on `host`, with `bindings`.
fn attempt(
    host: &std::rc::Rc<TestHost>,
    tool: &Tool,
    call_id: &str,
    bindings: Map<String, Value>,
    args: Value,
) -> Result<CallToolResult, ToolError> {
    let flow = host.flow(call_id).with_bindings(bindings);
    block_on(tool.attempt(flow, &args.to_string()))
}

fn json_result(result: &CallToolResult) -> Value {
    assert!(!result.is_error(), "{result:?}");
    serde_json::from_str(&result.to_model_text()).unwrap()
}

fn notifications(host: &TestHost) -> Vec<Value> {
    host.take_frames()
        .into_iter()
        .filter_map(|f| match f {
            ServerFrame::Event { event, data, .. } if event == "notification" => Some(data),
            _ => None,
        })
        .collect()
}

fn steps(host: &TestHost, call_id: &str) -> Vec<(String, String)> {
    Store::new(&host.db)
        .steps(call_id)
        .unwrap()
        .into_iter()
        .map(|s| (s.name, s.status.as_str().to_owned()))
        .collect()
}

/// The time, a context update and a notification: tools that need no network.
fn remember_and_notify() -> Tool {
    tool(json!({
        "description": "Remembers a city and tells someone.",
        "input": {
            "type": "object",
            "required": ["city"],
            "additionalProperties": false,
            "properties": {
                "city": { "type": "string" },
                "note": { "type": "string", "default": "no note" },
            },
        },
        "output": { "time": "$now", "context": "$remember", "sent": "$notify" },
        "steps": [
            { "name": "now", "tool": "get_current_time" },
            { "name": "remember", "tool": "update_context",
              "args": { "set": { "last_city": "$input.city", "asked_at": "$now" } } },
            { "name": "notify", "tool": "send_notification", "args": {
                "channel": "$bindings.channel", "to": "$bindings.to",
                "message": "${input.city} noted at ${now} (${input.note}); context: ${remember}",
            }},
        ],
    }))
}

#[test]
fn a_workflow_runs_its_steps_in_order_with_real_tools() {
    crate::install_app();
    let host = TestHost::with_thread(T0);
    let out = attempt(
        &host,
        &remember_and_notify(),
        "call_1",
        bindings(json!({ "channel": "sms", "to": "+351900000000" })),
        json!({ "city": "Porto" }),
    )
    .unwrap();
    let out = json_result(&out);
    let now = out["time"].as_str().unwrap().to_owned();
    assert!(now.starts_with("2023-11-14T"), "{now}");
    assert_eq!(
        out["context"],
        json!({ "last_city": "Porto", "asked_at": now }),
        "a JSON result is a JSON value"
    );
    assert_eq!(out["sent"], "notification sent by sms to +351900000000");
    let sent = notifications(&host);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["to"], "+351900000000");
    let message = sent[0]["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!("Porto noted at {now} (no note); context: {{")),
        "defaults fill missing inputs; objects interpolate as JSON: {message}"
    );
    assert_eq!(
        steps(&host, "call_1"),
        [("now", "done"), ("remember", "done"), ("notify", "done")]
            .map(|(n, s)| (n.to_owned(), s.to_owned()))
    );
}

#[test]
fn without_an_output_the_last_step_is_the_result() {
    crate::install_app();
    let host = TestHost::with_thread(T0);
    let t = tool(json!({
        "description": "The time.",
        "steps": [{ "name": "now", "tool": "get_current_time" }],
    }));
    let out = attempt(&host, &t, "call_1", Map::new(), json!({})).unwrap();
    assert_eq!(out, CallToolResult::text("2023-11-14T22:13:20.000Z"));
}

#[test]
fn parallel_members_are_steps_and_the_group_is_an_object_of_them() {
    crate::install_app();
    let host = TestHost::with_thread(T0);
    let t = tool(json!({
        "description": "Two readings at once.",
        "output": { "group": "$g", "after": "$after" },
        "steps": [
            { "name": "g", "parallel": [
                { "name": "time", "tool": "get_current_time" },
                { "name": "stats", "tool": "conversation_stats", "args": { "last": 10 } },
            ]},
            { "name": "after", "tool": "update_context",
              "args": { "set": { "seen": "${g.time} / ${stats.messages} messages" } } },
        ],
    }));
    let out = json_result(&attempt(&host, &t, "call_1", Map::new(), json!({})).unwrap());
    assert_eq!(
        out["group"],
        json!({
            "time": "2023-11-14T22:13:20.000Z",
            "stats": { "messages": 0, "by_role": {} },
        })
    );
    assert_eq!(
        out["after"]["seen"],
        "2023-11-14T22:13:20.000Z / 0 messages"
    );
    let names: Vec<String> = steps(&host, "call_1").into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        ["time", "stats", "after"],
        "the group itself is not a step"
    );
}

#[test]
fn a_failing_step_fails_the_workflow_naming_step_and_tool() {
    crate::install_app();
    let host = TestHost::with_thread(T0);
    let brief = crate::registry().unwrap();
    let brief = brief.get("weather_brief").unwrap();
    // No WEATHER_API_KEY on the test host: get_weather fails, and says retrying is useless.
    let err = attempt(
        &host,
        brief,
        "call_1",
        Map::new(),
        json!({ "first": "Lisbon", "second": "Porto", "to": "a@b.c" }),
    )
    .unwrap_err();
    assert!(
        err.text()
            .starts_with("step \"a\" (get_weather) failed: the weather service is not configured"),
        "{err}"
    );
    assert_eq!(err.retry(), Retry::Never);
    assert!(notifications(&host).is_empty());
    assert_eq!(
        steps(&host, "call_1"),
        [("a", "failed"), ("b", "failed")].map(|(n, s)| (n.to_owned(), s.to_owned())),
        "both members ran"
    );

    // A retryable failure stays retryable (no D1 on the test host).
    let t = tool(json!({
        "description": "Looks someone up.",
        "steps": [{ "name": "who", "tool": "lookup_customer", "args": { "customer_id": "c1" } }],
    }));
    let err = attempt(&host, &t, "call_2", Map::new(), json!({})).unwrap_err();
    assert!(
        err.text()
            .starts_with("step \"who\" (lookup_customer) failed: no D1"),
        "{err}"
    );
    assert_eq!(err.retry(), Retry::Backoff);

    // An error result (here: arguments the tool refuses) is the tool's answer: fatal.
    let t = tool(json!({
        "description": "Sends by fax.",
        "steps": [{ "name": "notify", "tool": "send_notification",
                    "args": { "channel": "fax", "to": "x", "message": "hi" } }],
    }));
    let err = attempt(&host, &t, "call_3", Map::new(), json!({})).unwrap_err();
    assert!(
        err.text()
            .starts_with("step \"notify\" (send_notification) failed: invalid arguments: "),
        "{err}"
    );
    assert!(err.text().contains("unknown variant `fax`"), "{err}");
    assert_eq!(err.retry(), Retry::Never);
}

#[test]
fn an_unresolved_reference_fails_before_its_step_runs() {
    crate::install_app();
    let host = TestHost::with_thread(T0);
    let err = attempt(
        &host,
        &remember_and_notify(),
        "call_1",
        Map::new(), // no bindings: `$bindings.channel` has nothing to name
        json!({ "city": "Porto" }),
    )
    .unwrap_err();
    assert_eq!(
        err.text(),
        "step \"notify\": `$bindings.channel` does not resolve: `bindings` has no `channel`"
    );
    assert_eq!(err.retry(), Retry::Never);
    assert!(notifications(&host).is_empty());
    assert_eq!(
        steps(&host, "call_1"),
        [("now", "done"), ("remember", "done")].map(|(n, s)| (n.to_owned(), s.to_owned()))
    );

    let t = tool(json!({
        "description": "Bad output.",
        "output": "${now.missing}",
        "steps": [{ "name": "now", "tool": "get_current_time" }],
    }));
    let err = attempt(&host, &t, "call_2", Map::new(), json!({})).unwrap_err();
    assert!(err.text().starts_with("the workflow's output: "), "{err}");
}

#[test]
fn a_second_run_of_the_same_call_replays_recorded_steps() {
    crate::install_app();
    let host = TestHost::with_thread(T0);
    let t = remember_and_notify();
    let channel = bindings(json!({ "channel": "email", "to": "ana@example.com" }));

    // The first run stops at the notification (no bindings); running the same call again an
    // hour later (as a retry or a restart would, here with the bindings it lacked) does not
    // run the earlier steps again: their recorded values come back.
    attempt(&host, &t, "call_1", Map::new(), json!({ "city": "Porto" })).unwrap_err();
    let recorded = Store::new(&host.db).steps("call_1").unwrap().len();
    let messages = |frames: &[ServerFrame]| {
        frames
            .iter()
            .filter(|f| matches!(f, ServerFrame::Message { .. }))
            .count()
    };
    assert_eq!(messages(&host.take_frames()), 1, "update_context ran once");
    host.set_now(T0 + 3_600_000);
    let first = attempt(
        &host,
        &t,
        "call_1",
        channel.clone(),
        json!({ "city": "Porto" }),
    )
    .unwrap();
    let first = json_result(&first);
    assert_eq!(
        first["time"], "2023-11-14T22:13:20.000Z",
        "the recorded time, not the clock"
    );
    assert_eq!(recorded, 2);
    let frames = host.take_frames();
    assert_eq!(messages(&frames), 0, "update_context did not run again");
    assert_eq!(
        frames
            .iter()
            .filter(|f| matches!(f, ServerFrame::Event { event, .. } if event == "notification"))
            .count(),
        1
    );

    // A finished call run again answers from the record: no tool runs at all.
    host.set_now(T0 + 7_200_000);
    let again = attempt(&host, &t, "call_1", channel, json!({ "city": "Porto" })).unwrap();
    assert_eq!(json_result(&again), first);
    assert!(
        host.take_frames().is_empty(),
        "nothing ran, nothing was sent"
    );
}

#[test]
fn arguments_are_checked_against_the_input_schema() {
    crate::install_app();
    let host = TestHost::with_thread(T0);
    let t = remember_and_notify();
    let error = |args: &str| {
        let out = block_on(t.call(host.flow("call_1"), args));
        assert!(out.is_error(), "{args}: {out:?}");
        out.to_model_text()
    };
    let cases = [
        ("[1]", "the arguments must be a JSON object, not an array"),
        ("{}", "missing field `city`"),
        (
            "{\"city\": 5}",
            "at `city`: invalid type: integer `5`, expected a string",
        ),
        (
            "{\"city\": \"Porto\", \"note\": null}",
            "at `note`: invalid type: null, expected a string",
        ),
        (
            "{\"city\": \"Porto\", \"town\": \"x\"}",
            "unknown field `town`, expected one of `city`, `note`",
        ),
        ("{\"city\": ", "not valid JSON"),
    ];
    for (args, expected) in cases {
        let text = error(args);
        assert!(text.starts_with("Error: invalid arguments: "), "{text}");
        assert!(text.contains(expected), "{args}: {text}");
    }
    assert!(steps(&host, "call_1").is_empty(), "no step ran");

    let brief = crate::registry().unwrap();
    let brief = brief.get("weather_brief").unwrap();
    let err = brief
        .validate(json!({ "first": "a", "second": "b", "to": "c", "channel": "fax" }))
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "at `channel`: unknown variant `fax`, expected one of `email`, `sms`, `push`"
    );
    let typed = tool(json!({
        "description": "Types.",
        "input": { "type": "object", "properties": {
            "n": { "type": "integer" }, "x": { "type": ["number", "null"] },
            "b": { "type": "boolean" }, "o": { "type": "object" }, "l": { "type": "array" },
        }},
        "steps": [{ "name": "now", "tool": "get_current_time" }],
    }));
    typed
        .validate(json!({ "n": 2.0, "x": null, "b": true, "o": {}, "l": [], "other": 1 }))
        .unwrap();
    for (args, expected) in [
        (
            json!({ "n": 1.5 }),
            "at `n`: invalid type: floating point `1.5`, expected an integer",
        ),
        (json!({ "x": "1" }), "expected a number or null"),
        (json!({ "b": "yes" }), "expected a boolean"),
        (
            json!({ "o": [] }),
            "invalid type: sequence, expected an object",
        ),
        (json!({ "l": {} }), "invalid type: map, expected an array"),
    ] {
        let err = typed.validate(args.clone()).unwrap_err().to_string();
        assert!(err.contains(expected), "{args}: {err}");
    }
}

#[test]
fn the_example_is_registered_with_its_schema_and_policy() {
    crate::install_app();
    let registry = crate::registry().unwrap();
    assert!(registry.names().any(|n| n == "weather_brief"));
    let names: Vec<&str> = registry.names().collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(
        names, sorted,
        "one alphabetical list of tools and workflows"
    );
    let spec = &registry.specs(["weather_brief"])[0];
    assert!(
        spec.description.contains("two cities"),
        "{}",
        spec.description
    );
    assert_eq!(
        spec.parameters["required"],
        json!(["first", "second", "to"])
    );
    assert!(spec.returns.is_none());
    let brief = registry.get("weather_brief").unwrap();
    assert_eq!(brief.policy().retry.max_attempts, 3);
    assert_eq!(brief.policy().timeout, std::time::Duration::from_secs(30));
    assert!(brief.check().is_ok());
    assert!(Tool::from_workflow_json("{\"steps\": 1}")
        .unwrap_err()
        .message()
        .contains("does not parse"));
}

#[test]
fn a_workflow_step_counts_against_the_called_tools_deployment_limit() {
    use edgent::engine::durable::{CallStatus, Ran};
    crate::install_app();
    let host = TestHost::with_thread(T0);
    host.set_limiter(Some(edgent::engine::durable::Window {
        used: 60,
        frees_at: T0 + 20_000,
    }));
    let registry = crate::registry().unwrap();
    let brief = registry.get("weather_brief").unwrap();
    // get_weather allows 60 calls a minute per deployment (it guards the API key's quota):
    // the workflow's steps ask the same counter a top-level call asks, and the workflow
    // sleeps until the window frees (no attempt spent).
    let flow = host.flow("call_1");
    let state = flow.run_state().clone();
    let args = json!({ "first": "Lisbon", "second": "Porto", "to": "a@b.c" }).to_string();
    let ran = block_on(edgent::tool::run_until_suspended(
        brief.attempt(flow, &args),
        &state,
    ));
    let Ran::Suspended(parked) = ran else {
        panic!("expected the workflow to park, got {ran:?}");
    };
    assert_eq!(parked.status, CallStatus::Sleeping);
    assert_eq!(parked.wake_at, Some(T0 + 20_000));
    assert_eq!(
        parked.detail["rate_limit"],
        json!({ "tool": "get_weather", "per_minute": 60, "scope": "deployment" })
    );
    assert_eq!(
        host.limiter_asked(),
        2,
        "both parallel members asked before the run parked"
    );
    assert!(notifications(&host).is_empty());
}
