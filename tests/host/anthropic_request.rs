//! The shape of the Anthropic Messages request bodies built from edgent history: roles,
//! tool calls and results, images, the system text, tool choice and output limits.

use edgent::config::{ModelConfig, ToolChoice, ToolSpec};
use edgent::llm::anthropic::{build_request, LEADING_USER_PLACEHOLDER};
use edgent::llm::ModelRequest;
use edgent::tool::{Content, Source};
use edgent::values::message::{Message, Role, ToolCall};
use serde_json::{json, Value};

fn model(max_output_tokens: Option<u32>) -> ModelConfig {
    let mut m: ModelConfig = serde_json::from_value(json!({
        "name": "claude",
        "provider": "anthropic",
        "model": "claude-x",
        "base_url": "https://api.anthropic.com/v1",
    }))
    .unwrap();
    m.max_output_tokens = max_output_tokens;
    m
}

fn msg(role: Role, content: &str) -> Message {
    Message::with_id("i".into(), role, content, 0)
}

fn assistant_calling(content: &str, calls: &[(&str, &str, &str)]) -> Message {
    let mut m = msg(Role::Assistant, content);
    m.tool_calls = calls
        .iter()
        .map(|(id, name, args)| ToolCall {
            id: (*id).into(),
            name: (*name).into(),
            arguments: (*args).into(),
        })
        .collect();
    m
}

fn result(id: &str, content: &str) -> Message {
    let mut m = msg(Role::Tool, content);
    m.tool_call_id = Some(id.into());
    m.name = Some("t".into());
    m
}

fn tool(name: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: format!("{name} does things"),
        parameters: json!({"type":"object","properties":{"x":{"type":"string"}}}).into(),
        returns: None,
    }
}

fn body_with(
    model: &ModelConfig,
    history: &[Message],
    tools: &[ToolSpec],
    tool_choice: ToolChoice,
    parallel_tool_calls: bool,
) -> Value {
    build_request(&ModelRequest {
        target: model.target(),
        system: "be brief",
        history,
        tools,
        tool_choice,
        parallel_tool_calls,
        output: None,
        memo: None,
    })
}

fn body(history: &[Message]) -> Value {
    body_with(&model(None), history, &[], ToolChoice::Auto, true)
}

#[test]
fn request_has_model_system_stream_and_a_default_output_limit() {
    let b = body(&[msg(Role::User, "hi")]);
    assert_eq!(b["model"], "claude-x");
    assert_eq!(b["system"], "be brief");
    assert_eq!(b["stream"], true);
    assert_eq!(b["max_tokens"], 4096);
    assert_eq!(
        b["messages"],
        json!([{"role":"user","content":[{"type":"text","text":"hi"}]}])
    );
    assert!(b.get("tools").is_none());
    assert!(b.get("tool_choice").is_none());
    let b = body_with(
        &model(Some(1000)),
        &[msg(Role::User, "hi")],
        &[],
        ToolChoice::Auto,
        true,
    );
    assert_eq!(b["max_tokens"], 1000);
    // An empty system text is left out.
    let m = model(None);
    let b = build_request(&ModelRequest {
        target: m.target(),
        system: "",
        history: &[msg(Role::User, "hi")],
        tools: &[],
        tool_choice: ToolChoice::Auto,
        parallel_tool_calls: true,
        output: None,
        memo: None,
    });
    assert!(b.get("system").is_none());
}

#[test]
fn history_alternates_with_results_and_notes_merged_into_the_next_user_turn() {
    let history = [
        msg(Role::User, "weather in Paris and Oslo?"),
        assistant_calling(
            "Checking.",
            &[
                ("c1", "get_weather", "{\"city\":\"Paris\"}"),
                ("c2", "get_weather", "{\"city\": Oslo"),
            ],
        ),
        result("c1", "18C"),
        result(
            "c2",
            "Error: invalid arguments: the arguments are not valid JSON",
        ),
        msg(Role::System, "The user is in a hurry."),
        msg(Role::User, "thanks"),
        msg(Role::Assistant, "You're welcome."),
    ];
    let b = body(&history);
    assert_eq!(
        b["messages"],
        json!([
            {"role":"user","content":[{"type":"text","text":"weather in Paris and Oslo?"}]},
            {"role":"assistant","content":[
                {"type":"text","text":"Checking."},
                {"type":"tool_use","id":"c1","name":"get_weather","input":{"city":"Paris"}},
                // Arguments that are not a JSON object go as an empty object.
                {"type":"tool_use","id":"c2","name":"get_weather","input":{}},
            ]},
            {"role":"user","content":[
                {"type":"tool_result","tool_use_id":"c1","content":"18C"},
                {"type":"tool_result","tool_use_id":"c2",
                 "content":"Error: invalid arguments: the arguments are not valid JSON","is_error":true},
                {"type":"text","text":"<system>\nThe user is in a hurry.\n</system>"},
                {"type":"text","text":"thanks"},
            ]},
            {"role":"assistant","content":[{"type":"text","text":"You're welcome."}]},
        ])
    );
}

#[test]
fn roles_strictly_alternate_whatever_the_history() {
    let history = [
        msg(Role::User, "a"),
        msg(Role::Assistant, ""),
        msg(Role::User, "b"),
        msg(Role::System, " \n"),
        msg(Role::User, "c"),
        assistant_calling("", &[("c1", "t", "[1]")]),
        result("c1", ""),
        msg(Role::Assistant, "x"),
        msg(Role::Assistant, "\n"),
        msg(Role::Assistant, "y"),
    ];
    let b = body(&history);
    let messages = b["messages"].as_array().unwrap();
    let roles: Vec<_> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant"]);
    assert_eq!(
        messages[0]["content"],
        json!([{"type":"text","text":"a"},{"type":"text","text":"b"},{"type":"text","text":"c"}])
    );
    assert_eq!(
        messages[1]["content"],
        json!([{"type":"tool_use","id":"c1","name":"t","input":{}}])
    );
    // An empty result leaves `content` out rather than sending an empty text.
    assert_eq!(
        messages[2]["content"],
        json!([{"type":"tool_result","tool_use_id":"c1"}])
    );
    assert_eq!(
        messages[3]["content"],
        json!([{"type":"text","text":"x"},{"type":"text","text":"y"}])
    );
    for m in messages {
        assert!(!m["content"].as_array().unwrap().is_empty());
    }
}

#[test]
fn a_history_starting_with_the_model_gets_a_user_turn_first() {
    let b = body(&[
        msg(Role::Assistant, "Hello! How can I help?"),
        msg(Role::User, "hi"),
    ]);
    assert_eq!(
        b["messages"][0],
        json!({"role":"user","content":[{"type":"text","text":LEADING_USER_PLACEHOLDER}]})
    );
    assert_eq!(b["messages"][1]["role"], "assistant");
    assert_eq!(b["messages"][2]["role"], "user");
    // An empty history still sends one user turn (the API rejects an empty list).
    let b = body(&[]);
    assert_eq!(b["messages"].as_array().unwrap().len(), 1);
    assert_eq!(b["messages"][0]["role"], "user");
}

#[test]
fn tool_result_media_become_image_and_document_blocks() {
    let mut r = result("c1", "chart:\n\n[image: image/png]");
    r.parts = vec![
        Content::text("chart:"),
        Content::Image {
            source: Source::base64("image/png", "iVBORw0KGgo="),
        },
        Content::Image {
            source: Source::url("image/jpeg", "https://example.com/a.jpg"),
        },
        Content::Document {
            source: Source::base64("application/pdf", "JVBERi0x"),
        },
        Content::Document {
            source: Source::url("application/pdf", "https://example.com/a.pdf"),
        },
        Content::Document {
            source: Source::base64("text/csv", "YSxiCjEsMg=="),
        },
        Content::Document {
            source: Source::base64("application/zip", "UEsDBA=="),
        },
    ];
    let history = [
        msg(Role::User, "plot it"),
        assistant_calling("", &[("c1", "t", "{}")]),
        r,
    ];
    let b = body(&history);
    assert_eq!(
        b["messages"][2]["content"][0],
        json!({"type":"tool_result","tool_use_id":"c1","content":[
            {"type":"text","text":"chart:"},
            {"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},
            {"type":"image","source":{"type":"url","url":"https://example.com/a.jpg"}},
            {"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0x"}},
            {"type":"document","source":{"type":"url","url":"https://example.com/a.pdf"}},
            {"type":"document","source":{"type":"text","media_type":"text/plain","data":"a,b\n1,2"}},
            {"type":"text","text":"[document: application/zip (this format cannot be shown to the model)]"},
        ]})
    );
}

#[test]
fn tool_choice_and_parallel_calls_map_onto_the_messages_api() {
    let m = model(None);
    let h = [msg(Role::User, "hi")];
    let tools = [tool("a"), tool("b")];
    let cases = [
        (ToolChoice::Auto, true, json!({"type":"auto"})),
        (
            ToolChoice::Auto,
            false,
            json!({"type":"auto","disable_parallel_tool_use":true}),
        ),
        (ToolChoice::Required, true, json!({"type":"any"})),
        (
            ToolChoice::Required,
            false,
            json!({"type":"any","disable_parallel_tool_use":true}),
        ),
        (ToolChoice::None, true, json!({"type":"none"})),
        (ToolChoice::None, false, json!({"type":"none"})),
    ];
    for (choice, parallel, expected) in cases {
        let b = body_with(&m, &h, &tools, choice, parallel);
        assert_eq!(b["tool_choice"], expected, "{choice:?} parallel={parallel}");
    }
    let b = body_with(&m, &h, &tools, ToolChoice::Auto, true);
    assert_eq!(
        b["tools"][0],
        json!({"name":"a","description":"a does things",
               "input_schema":{"type":"object","properties":{"x":{"type":"string"}}}})
    );
    assert_eq!(b["tools"].as_array().unwrap().len(), 2);
    // Without tools, no tool settings at all.
    let b = body_with(&m, &h, &[], ToolChoice::Required, false);
    assert!(b.get("tools").is_none());
    assert!(b.get("tool_choice").is_none());
}

#[test]
fn call_ids_from_other_providers_are_made_valid_on_both_sides() {
    let history = [
        msg(Role::User, "go"),
        assistant_calling("", &[("call:1.a", "t", "{}")]),
        result("call:1.a", "ok"),
    ];
    let b = body(&history);
    assert_eq!(b["messages"][1]["content"][0]["id"], "call_1_a");
    assert_eq!(b["messages"][2]["content"][0]["tool_use_id"], "call_1_a");
}

/// The exact text sent for the requests below, as the `json!`-built head wrote it before the
/// head borrowed its tools' schemas: keys in `Value`'s (sorted) order, `messages` last.
#[test]
fn request_text_is_byte_for_byte_what_it_was() {
    use edgent::llm::anthropic::request_body;
    use edgent::llm::OutputFormat;
    const EXPECTED: [&str; 5] = [
        r#"{"max_tokens":512,"model":"claude-x","stream":true,"system":"be brief","tool_choice":{"type":"auto"},"tools":[{"description":"a does things","input_schema":{"properties":{"x":{"type":"string"}},"type":"object"},"name":"a"},{"description":"b does things","input_schema":{"properties":{"x":{"type":"string"}},"type":"object"},"name":"b"}],"messages":[{"content":[{"text":"hi","type":"text"}],"role":"user"},{"content":[{"id":"c1","input":{},"name":"a","type":"tool_use"}],"role":"assistant"},{"content":[{"content":"ok","tool_use_id":"c1","type":"tool_result"}],"role":"user"}]}"#,
        r#"{"max_tokens":512,"model":"claude-x","stream":true,"tool_choice":{"disable_parallel_tool_use":true,"type":"any"},"tools":[{"description":"a does things","input_schema":{"properties":{"x":{"type":"string"}},"type":"object"},"name":"a"}],"messages":[{"content":[{"text":"hi","type":"text"}],"role":"user"},{"content":[{"id":"c1","input":{},"name":"a","type":"tool_use"}],"role":"assistant"},{"content":[{"content":"ok","tool_use_id":"c1","type":"tool_result"}],"role":"user"}]}"#,
        r#"{"max_tokens":512,"model":"claude-x","stream":true,"system":"be brief","messages":[{"content":[{"text":"hi","type":"text"}],"role":"user"},{"content":[{"id":"c1","input":{},"name":"a","type":"tool_use"}],"role":"assistant"},{"content":[{"content":"ok","tool_use_id":"c1","type":"tool_result"}],"role":"user"}]}"#,
        r#"{"max_tokens":512,"model":"claude-x","stream":true,"system":"x","tool_choice":{"disable_parallel_tool_use":true,"type":"any"},"tools":[{"description":"a does things","input_schema":{"properties":{"x":{"type":"string"}},"type":"object"},"name":"a"},{"description":"b does things","input_schema":{"properties":{"x":{"type":"string"}},"type":"object"},"name":"b"},{"description":"Gives your final answer. Call it once you have everything you need, with the whole answer as its input; it ends your turn.","input_schema":{"properties":{"n":{"type":"number"}},"required":["n"],"type":"object"},"name":"answer"}],"messages":[{"content":[{"text":"hi","type":"text"}],"role":"user"},{"content":[{"id":"c1","input":{},"name":"a","type":"tool_use"}],"role":"assistant"},{"content":[{"content":"ok","tool_use_id":"c1","type":"tool_result"}],"role":"user"}]}"#,
        r#"{"max_tokens":512,"model":"claude-x","stream":true,"system":"x","tool_choice":{"name":"answer","type":"tool"},"tools":[{"description":"Gives your final answer. Call it once you have everything you need, with the whole answer as its input; it ends your turn.","input_schema":{"properties":{"n":{"type":"number"}},"required":["n"],"type":"object"},"name":"answer"}],"messages":[{"content":[{"text":"hi","type":"text"}],"role":"user"},{"content":[{"id":"c1","input":{},"name":"a","type":"tool_use"}],"role":"assistant"},{"content":[{"content":"ok","tool_use_id":"c1","type":"tool_result"}],"role":"user"}]}"#,
    ];
    let m = model(Some(512));
    let h = [
        msg(Role::User, "hi"),
        assistant_calling("", &[("c1", "a", "{}")]),
        result("c1", "ok"),
    ];
    let tools = [tool("a"), tool("b")];
    let answer = json!({"type":"object","properties":{"n":{"type":"number"}},"required":["n"]});
    let output = Some(OutputFormat {
        name: "answer",
        schema: &answer,
    });
    let cases = [
        ("be brief", &tools[..], ToolChoice::Auto, true, None),
        ("", &tools[..1], ToolChoice::Required, false, None),
        ("be brief", &[][..], ToolChoice::None, true, None),
        ("x", &tools[..], ToolChoice::Auto, false, output),
        ("x", &[][..], ToolChoice::Auto, true, output),
    ];
    for (expected, (system, tools, tool_choice, parallel_tool_calls, output)) in
        EXPECTED.iter().zip(cases)
    {
        let text = request_body(&ModelRequest {
            target: m.target(),
            system,
            history: &h,
            tools,
            tool_choice,
            parallel_tool_calls,
            output,
            memo: None,
        });
        assert_eq!(&text, expected);
    }
}
