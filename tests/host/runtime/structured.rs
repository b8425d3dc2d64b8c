//! Structured output (a prompt's `response_format`) through the shipped runtime: what each
//! wire format's request carries, the answer checked and stored as `structured`, one
//! correction sent back with what is wrong, the turn failing after a second answer that does
//! not fit, tools still called first, and a conversation's `result` being the answer.
//!
//! Proves: the request bodies the runtime builds (OpenAI `response_format`, the Anthropic
//! answer tool and its `tool_choice`, Workers AI's JSON mode), the retry-once rule on the
//! virtual clock, the stored message and its frames. Does not prove: that real providers honour
//! the format (tests/e2e/structured_output.test.mjs runs the built Worker against the scripted
//! model server in both wire formats).

use edgent::config::response_format::ResponseFormat;
use edgent::config::{AgentConfig, Provider, ToolChoice};
use edgent::llm::{build_request, ModelRequest, OutputFormat, Target, ToolSpec};
use edgent::values::message::MessageStatus;

use super::*;

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "city": { "type": "string" },
            "days": { "type": "integer", "minimum": 1 }
        },
        "required": ["city", "days"],
        "additionalProperties": false
    })
}

/// The `support` agent whose prompt answers in `schema()` as `trip`, on `provider`.
fn answering(tools: &[&str], provider: Provider) -> AgentConfig {
    let mut config = edgent::testing::agent(tools);
    config.prompt.response_format = Some(ResponseFormat {
        name: Some("trip".into()),
        schema: Some(schema()),
        type_name: None,
    });
    config.models[0].provider = provider;
    config
}

fn host_with(config: AgentConfig, tools: Vec<(&'static str, Tool)>) -> Rc<TestHost> {
    let registry = edgent::tool::Registry::build(tools).unwrap();
    TestHost::new(registry, T0).with_agent(config).into_rc()
}

fn last_assistant(h: &TestHost) -> Message {
    let page = h.thread().messages(100, 0, Order::Desc, true).unwrap();
    page.messages
        .into_iter()
        .find(|m| m.role == Role::Assistant)
        .unwrap()
}

fn request(provider: Provider, tools: &[ToolSpec], choice: ToolChoice, parallel: bool) -> Value {
    let schema = schema();
    build_request(&ModelRequest {
        target: Target {
            provider,
            model: "m",
            base_url: "https://model.invalid/v1",
            max_output_tokens: None,
        },
        system: "",
        history: &[Message::new(Role::User, "Plan a trip.", T0)],
        tools,
        tool_choice: choice,
        parallel_tool_calls: parallel,
        output: Some(OutputFormat {
            name: "trip",
            schema: &schema,
        }),
        memo: None,
    })
}

fn lookup() -> ToolSpec {
    ToolSpec {
        name: "lookup".into(),
        description: "Looks up.".into(),
        parameters: json!({ "type": "object", "properties": {} }).into(),
        returns: None,
    }
}

#[test]
fn openai_requests_carry_the_json_schema_strict_only_when_openai_takes_it() {
    let body = request(Provider::OpenAi, &[lookup()], ToolChoice::Auto, true);
    assert_eq!(
        body["response_format"],
        json!({ "type": "json_schema", "json_schema": { "name": "trip", "schema": schema(), "strict": true } })
    );
    assert_eq!(body["tool_choice"], "auto", "tools are still called first");
    assert_eq!(body["tools"].as_array().unwrap().len(), 1, "no answer tool");

    let loose = json!({ "type": "object", "properties": { "city": { "type": "string" } } });
    let body = build_request(&ModelRequest {
        target: Target {
            provider: Provider::OpenAi,
            model: "m",
            base_url: "https://model.invalid/v1",
            max_output_tokens: None,
        },
        system: "",
        history: &[],
        tools: &[],
        tool_choice: ToolChoice::Auto,
        parallel_tool_calls: true,
        output: Some(OutputFormat {
            name: "trip",
            schema: &loose,
        }),
        memo: None,
    });
    assert_eq!(body["response_format"]["json_schema"]["strict"], false);
    assert!(body.get("tools").is_none());
}

#[test]
fn anthropic_requests_offer_the_answer_as_a_tool_and_never_allow_plain_text() {
    let alone = request(Provider::Anthropic, &[], ToolChoice::Auto, true);
    assert_eq!(alone["tools"][0]["name"], "trip");
    assert_eq!(alone["tools"][0]["input_schema"], schema());
    assert_eq!(
        alone["tool_choice"],
        json!({ "type": "tool", "name": "trip" })
    );

    let with_tools = request(Provider::Anthropic, &[lookup()], ToolChoice::Auto, false);
    let names: Vec<&str> = with_tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["lookup", "trip"]);
    assert_eq!(
        with_tools["tool_choice"],
        json!({ "type": "any", "disable_parallel_tool_use": true }),
        "a tool or the answer"
    );

    let no_tools_now = request(Provider::Anthropic, &[lookup()], ToolChoice::None, true);
    assert_eq!(
        no_tools_now["tool_choice"],
        json!({ "type": "tool", "name": "trip" })
    );
}

#[test]
fn workers_ai_requests_use_its_json_mode() {
    let body = request(Provider::WorkersAi, &[], ToolChoice::Auto, true);
    assert_eq!(
        body["response_format"],
        json!({ "type": "json_schema", "json_schema": schema() })
    );
}

#[test]
fn a_fitting_answer_is_stored_with_its_value_and_sent_to_sockets() {
    let h = host_with(answering(&[], Provider::OpenAi), vec![]);
    let rt = h.runtime();
    h.script(Ok(reply_events(
        "{\n  \"city\": \"Porto\",\n  \"days\": 3\n}",
        &[],
    )));
    h.run(rt.apply(send("Plan a trip."))).unwrap();
    h.run_spawned();

    let requests = h.model_requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        requests[0]["response_format"]["json_schema"]["name"],
        "trip"
    );
    let answer = last_assistant(&h);
    assert_eq!(
        answer.structured,
        Some(json!({ "city": "Porto", "days": 3 }))
    );
    assert!(
        answer.content.contains("\"Porto\""),
        "the text stays as written"
    );
    let sent = h.frames().into_iter().any(|f| {
        matches!(f, ServerFrame::Message { message } if message.structured == answer.structured)
    });
    assert!(sent, "the message frame carries the value");
    let json = serde_json::to_value(&answer).unwrap();
    assert_eq!(json["structured"]["city"], "Porto");
    assert_eq!(h.thread().summary().unwrap().status, ThreadStatus::Idle);
    assert!(errors(&h).is_empty(), "{:?}", errors(&h));
}

#[test]
fn an_answer_that_does_not_fit_goes_back_once_with_what_is_wrong() {
    let h = host_with(answering(&[], Provider::OpenAi), vec![]);
    let rt = h.runtime();
    h.script(Ok(reply_events(r#"{"city": "Porto", "days": 0}"#, &[])));
    h.script(Ok(reply_events(r#"{"city": "Porto", "days": 2}"#, &[])));
    h.run(rt.apply(send("Plan a trip."))).unwrap();
    h.run_spawned();

    let requests = h.model_requests();
    assert_eq!(requests.len(), 2);
    let messages = requests[1]["messages"].as_array().unwrap();
    let n = messages.len();
    assert_eq!(messages[n - 2]["role"], "assistant");
    assert_eq!(
        messages[n - 2]["content"],
        r#"{"city": "Porto", "days": 0}"#
    );
    assert_eq!(messages[n - 1]["role"], "user");
    let correction = messages[n - 1]["content"].as_str().unwrap();
    assert!(
        correction.contains("format `trip`: at `days`: should be at least 1"),
        "{correction}"
    );

    // One reply is kept: the corrected one, under the pending message's id.
    assert_eq!(
        transcript(&h),
        [
            ("user".to_owned(), "Plan a trip.".to_owned()),
            (
                "assistant".to_owned(),
                r#"{"city": "Porto", "days": 2}"#.to_owned()
            )
        ]
    );
    assert_eq!(
        last_assistant(&h).structured,
        Some(json!({ "city": "Porto", "days": 2 }))
    );
    let retries = errors(&h);
    assert_eq!(retries.len(), 1, "{retries:?}");
    assert_eq!(retries[0].0, "model_retry");
    assert!(retries[0]
        .1
        .contains("does not fit response_format \"trip\""));
    let log = h.thread().request_log_page(10, 0, Order::Asc).unwrap();
    assert_eq!(log.logs.len(), 2, "both calls are in the request log");
    assert_eq!(
        h.thread().summary().unwrap().steps,
        1,
        "one step of the turn"
    );
}

#[test]
fn a_second_answer_that_does_not_fit_fails_the_turn_with_its_code() {
    let h = host_with(answering(&[], Provider::OpenAi), vec![]);
    let rt = h.runtime();
    h.script(Ok(reply_events("Porto, for three days.", &[])));
    h.script(Ok(reply_events(r#"{"city": "Porto"}"#, &[])));
    h.script(Ok(reply_events("never asked", &[])));
    h.run(rt.apply(send("Plan a trip."))).unwrap();
    h.run_spawned();

    let requests = h.model_requests();
    assert_eq!(requests.len(), 2, "one correction, no more");
    let correction = requests[1]["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(correction.contains("it is not JSON"), "{correction}");
    let (code, message) = errors(&h).pop().unwrap();
    assert_eq!(code, "invalid_structured_output");
    assert!(
        message.contains("is missing the required property `days`"),
        "{message}"
    );
    let summary = h.thread().summary().unwrap();
    assert_eq!(summary.status, ThreadStatus::Idle);
    assert!(summary
        .last_error
        .unwrap()
        .contains("invalid structured output"));
    let reply = last_assistant(&h);
    assert_eq!(
        reply.status,
        MessageStatus::Failed,
        "never sent to a model again"
    );
    assert_eq!(reply.structured, None);
}

#[test]
fn the_anthropic_answer_tool_is_the_answer_and_tools_run_before_it() {
    let h = host_with(
        answering(&["echo"], Provider::Anthropic),
        vec![("echo", echo())],
    );
    let rt = h.runtime();
    // A tool first, then the answer as a call of the answer tool beside another call (which
    // is not an answer yet: the other call runs), then the answer alone.
    h.script(Ok(reply_events("", &[("toolu_1", "echo", "{}")])));
    h.script(Ok(reply_events(
        "",
        &[
            ("toolu_2", "echo", "{}"),
            ("toolu_3", "trip", r#"{"city":"Lima","days":9}"#),
        ],
    )));
    h.script(Ok(reply_events(
        "",
        &[("toolu_4", "trip", r#"{"city":"Lima","days":4}"#)],
    )));
    h.run(rt.apply(send("Plan a trip."))).unwrap();
    h.run_spawned();

    let requests = h.model_requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[0]["tool_choice"], json!({ "type": "any" }));
    assert_eq!(record(&h, "toolu_1").status, "success");
    assert_eq!(record(&h, "toolu_2").status, "success");
    let calls = h
        .store()
        .tool_call_page(100, 0, Order::Asc)
        .unwrap()
        .tool_calls;
    assert_eq!(
        calls.len(),
        2,
        "the answer is never a call to run: {calls:?}"
    );

    let answer = last_assistant(&h);
    assert!(answer.tool_calls.is_empty());
    assert_eq!(answer.content, r#"{"city":"Lima","days":4}"#);
    assert_eq!(
        answer.structured,
        Some(json!({ "city": "Lima", "days": 4 }))
    );
    assert_eq!(h.thread().summary().unwrap().status, ThreadStatus::Idle);
}

#[test]
fn an_anthropic_answer_that_does_not_fit_is_corrected_as_text() {
    let h = host_with(answering(&[], Provider::Anthropic), vec![]);
    let rt = h.runtime();
    h.script(Ok(reply_events(
        "",
        &[("toolu_1", "trip", r#"{"city":"Lima"}"#)],
    )));
    h.script(Ok(reply_events(
        "",
        &[("toolu_2", "trip", r#"{"city":"Lima","days":1}"#)],
    )));
    h.run(rt.apply(send("Plan a trip."))).unwrap();
    h.run_spawned();

    let second = &h.model_requests()[1];
    assert_eq!(
        second["tool_choice"],
        json!({ "type": "tool", "name": "trip" })
    );
    let messages = second["messages"].as_array().unwrap();
    assert_eq!(
        messages[1],
        json!({ "role": "assistant", "content": [{ "type": "text", "text": r#"{"city":"Lima"}"# }] })
    );
    assert!(messages[2]
        .to_string()
        .contains("missing the required property `days`"));
    assert_eq!(
        last_assistant(&h).structured,
        Some(json!({ "city": "Lima", "days": 1 }))
    );
}

#[test]
fn a_registered_output_type_is_sent_and_an_unregistered_one_fails_the_turn() {
    let mut config = edgent::testing::agent(&[]);
    config.prompt.response_format = Some(ResponseFormat {
        name: None,
        schema: None,
        type_name: Some("trip_plan".into()),
    });
    fn trip_schema() -> Value {
        schema()
    }
    let registry = edgent::tool::Registry::build(vec![])
        .unwrap()
        .with_schemas(&[("trip_plan", trip_schema)])
        .unwrap();
    let h = TestHost::new(registry, T0)
        .with_agent(config.clone())
        .into_rc();
    let rt = h.runtime();
    h.script(Ok(reply_events(r#"{"city":"Oslo","days":2}"#, &[])));
    h.run(rt.apply(send("Plan a trip."))).unwrap();
    h.run_spawned();
    let format = &h.model_requests()[0]["response_format"]["json_schema"];
    assert_eq!(
        (&format["name"], &format["schema"]),
        (&json!("trip_plan"), &schema())
    );
    assert_eq!(
        last_assistant(&h).structured,
        Some(json!({ "city": "Oslo", "days": 2 }))
    );

    // A type the Worker no longer registers (a deploy removed it) fails before any request.
    let h = host_with(config, vec![]);
    let rt = h.runtime();
    h.run(rt.apply(send("Plan a trip."))).unwrap();
    h.run_spawned();
    assert!(h.model_requests().is_empty());
    let (code, message) = errors(&h).pop().unwrap();
    assert_eq!(code, "model_config");
    assert!(
        message.contains("\"trip_plan\", which this Worker does not register"),
        "{message}"
    );
}

#[test]
fn a_broken_output_type_is_refused_when_the_registry_is_built() {
    fn not_an_object() -> Value {
        json!({ "type": "string" })
    }
    let refused = edgent::tool::Registry::build(vec![])
        .unwrap()
        .with_schemas(&[("word", not_an_object)])
        .unwrap_err()
        .to_string();
    assert!(
        refused.starts_with(
            "output type `word` (Catalog::schemas): the schema must describe a JSON object"
        ),
        "{refused}"
    );
}

#[test]
fn a_conversations_result_is_its_last_answer_as_json() {
    let mut config = answering(&[], Provider::OpenAi);
    config.agent = serde_json::from_value(json!({
        "id": "support", "kind": "dual_ai", "max_turns": 1,
        "side_a": { "prompt": "support" }, "side_b": { "prompt": "support" }
    }))
    .unwrap();
    let h = host_with(config, vec![]);
    let rt = h.runtime();
    h.script(Ok(reply_events("{ \"city\": \"Rome\", \"days\": 5 }", &[])));
    h.run(rt.apply(send("Plan a trip."))).unwrap();
    h.run_spawned();
    let summary = h.thread().summary().unwrap();
    assert_eq!(summary.status, ThreadStatus::Stopped);
    assert_eq!(
        summary.result.as_deref(),
        Some(r#"{"city":"Rome","days":5}"#),
        "the value, not the text as written"
    );
}

#[test]
fn a_sub_prompts_answer_is_checked_and_corrected_too() {
    use edgent::config::{Delegate, PromptConfig};
    let mut config = edgent::testing::agent(&["plan"]);
    let sub: PromptConfig = serde_json::from_value(json!({
        "name": "plan", "model": "default", "system": "Plan.",
        "response_format": { "name": "trip", "schema": schema() },
    }))
    .unwrap();
    let models = config.models.clone();
    config.delegates = vec![(Delegate::Prompt(sub), models)];
    let h = host_with(config, vec![]);
    let rt = h.runtime();
    h.script(Ok(reply_events(
        "",
        &[("c1", "plan", r#"{"input":"Rome"}"#)],
    )));
    h.script(Ok(reply_events(r#"{"city":"Rome"}"#, &[])));
    h.script(Ok(reply_events(r#"{"city":"Rome","days":2}"#, &[])));
    h.script(Ok(reply_events("Two days in Rome.", &[])));
    h.run(rt.apply(send("Plan Rome."))).unwrap();
    h.run_spawned();

    let requests = h.model_requests();
    assert_eq!(requests.len(), 4);
    assert!(
        requests[0].get("response_format").is_none(),
        "the caller's prompt has none"
    );
    assert_eq!(
        requests[1]["response_format"]["json_schema"]["name"],
        "trip"
    );
    assert!(requests[2]["messages"]
        .to_string()
        .contains("missing the required property `days`"));
    let result = h
        .store()
        .model_history()
        .unwrap()
        .into_iter()
        .find(|m| m.role == Role::Tool)
        .unwrap();
    assert_eq!(result.content, r#"{"city":"Rome","days":2}"#);
    assert_eq!(transcript(&h).last().unwrap().1, "Two days in Rome.");
    assert!(
        errors(&h).is_empty(),
        "a sub-prompt's correction reaches no client"
    );
}
