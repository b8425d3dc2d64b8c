use super::watch::{AskWatch, CallWatch};
use super::*;

fn one(body: &str) -> Incoming {
    let (mut messages, batch) = parse_body(body.as_bytes()).expect("parsed");
    assert!(!batch);
    messages.remove(0)
}

#[test]
fn requests_notifications_and_bad_messages_are_told_apart() {
    assert_eq!(
        one(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{}}}"#
        ),
        Incoming::Request {
            id: json!(1),
            call: Call::Initialize {
                protocol_version: "2025-06-18".into()
            }
        }
    );
    assert_eq!(
        one(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
        Incoming::Notification
    );
    assert_eq!(
        one(r#"{"jsonrpc":"2.0","id":"a","result":{}}"#),
        Incoming::Notification
    );
    assert_eq!(
        one(
            r#"{"jsonrpc":"2.0","id":"t","method":"tools/call","params":{"name":"get_weather","arguments":{"city":"Oslo"}}}"#
        ),
        Incoming::Request {
            id: json!("t"),
            call: Call::CallTool {
                name: "get_weather".into(),
                arguments: json!({"city": "Oslo"})
                    .as_object()
                    .cloned()
                    .unwrap_or_default()
            }
        }
    );
    let bad = |body: &str| match one(body) {
        Incoming::Invalid { message, .. } => message,
        Incoming::Request {
            call: Call::BadParams(message),
            ..
        } => message,
        other => panic!("{body} decoded as {other:?}"),
    };
    assert!(bad(r#"{"id":1,"method":"ping"}"#).contains("2.0"));
    assert!(bad(r#"{"jsonrpc":"2.0","id":1}"#).contains("method"));
    assert!(bad(r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#).contains("id"));
    assert!(bad("1").contains("object"));
    assert!(bad(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}"#).contains("name"));
    assert!(bad(
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":[1]}}"#
    )
    .contains("object"));
    assert!(
        bad(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#)
            .contains("protocolVersion")
    );
    assert_eq!(
        one(r#"{"jsonrpc":"2.0","id":2,"method":"resources/list"}"#),
        Incoming::Request {
            id: json!(2),
            call: Call::Unknown("resources/list".into())
        }
    );
}

#[test]
fn a_body_that_is_not_json_or_an_empty_batch_is_one_error() {
    let parse = parse_body(b"{nope").expect_err("not JSON");
    assert_eq!(parse["error"]["code"], code::PARSE_ERROR);
    assert_eq!(parse["id"], Value::Null);
    let empty = parse_body(b"[]").expect_err("empty batch");
    assert_eq!(empty["error"]["code"], code::INVALID_REQUEST);
    let (batch, is_batch) =
        parse_body(br#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"n"}]"#)
            .expect("a batch");
    assert!(is_batch);
    assert_eq!(batch.len(), 2);
}

#[test]
fn the_version_is_the_clients_when_spoken_else_the_newest() {
    assert_eq!(negotiate("2025-03-26"), "2025-03-26");
    assert_eq!(negotiate("1999-01-01"), PROTOCOL_VERSIONS[0]);
    assert!(supports_header(None));
    assert!(supports_header(Some("2025-06-18")));
    assert!(!supports_header(Some("2030-01-01")));
    let init = initialize_result("2024-11-05", "0.1.0", Some("support"));
    assert_eq!(init["protocolVersion"], "2024-11-05");
    assert_eq!(init["serverInfo"]["name"], "edgent");
    assert!(init["capabilities"]["tools"].is_object());
}

#[test]
fn ask_tools_take_a_message_and_on_the_shared_endpoint_a_thread() {
    assert_eq!(target("ask_support"), Target::Ask("support"));
    assert_eq!(target("ask_"), Target::Tool("ask_"));
    assert_eq!(target("get_weather"), Target::Tool("get_weather"));
    let shared = ask_descriptor("support", "Customer support.", false);
    assert_eq!(shared["name"], "ask_support");
    assert!(shared["inputSchema"]["properties"]["thread_id"].is_object());
    let session = ask_descriptor("support", "", true);
    assert!(session["inputSchema"]["properties"]
        .get("thread_id")
        .is_none());
    let args = |v: Value| v.as_object().cloned().unwrap_or_default();
    assert_eq!(
        ask_arguments(&args(json!({"message": "hi", "thread_id": "t"})), false),
        Ok(("hi".into(), Some("t".into())))
    );
    assert!(ask_arguments(&args(json!({"message": "hi", "thread_id": "t"})), true).is_err());
    assert!(ask_arguments(&args(json!({"message": "  "})), false).is_err());
    assert!(ask_arguments(&args(json!({"message": "hi", "extra": 1})), false).is_err());
    assert!(ask_arguments(&args(json!({"message": "hi", "thread_id": 3})), false).is_err());
}

#[test]
fn an_ask_ends_with_the_turn_and_answers_its_last_reply() {
    let mut watch = AskWatch::new();
    let reply = |id: &str, content: &str, status: &str| json!({"type":"message","message":{"id":id,"role":"assistant","content":content,"status":status,"depth":0}});
    assert!(!watch.on_frame(&json!({"type":"status","state":"running","turn":0,"side":"a"})));
    assert!(!watch.on_frame(&reply("m1", "", "pending")));
    assert!(!watch.on_frame(&reply("m1", "Let me check.", "completed")));
    // A sub-prompt's reply (depth 1) is not the answer.
    assert!(!watch.on_frame(&json!({"type":"message","message":{"id":"s","role":"assistant","content":"inner","status":"completed","depth":1}})));
    assert!(!watch.on_frame(&json!({"type":"error","code":"model_retry","message":"retrying"})));
    assert!(!watch.on_frame(&reply("m2", "It is noon.", "completed")));
    let running = watch.result("T");
    assert_eq!(running["structuredContent"]["status"], "running");
    assert!(running["content"][0]["text"]
        .as_str()
        .is_some_and(|t| t.contains("still working")));
    assert!(watch.on_frame(&json!({"type":"status","state":"idle","turn":1,"side":"a"})));
    let done = watch.result("T");
    assert_eq!(done["content"][0]["text"], "It is noon.");
    assert_eq!(done["structuredContent"]["message_id"], "m2");
    assert_eq!(done["structuredContent"]["status"], "idle");
    assert_eq!(done["isError"], false);
    assert!(
        done["structuredContent"].get("structured").is_none(),
        "only an answer to a response_format has one"
    );
}

#[test]
fn a_structured_answer_is_its_value_in_the_structured_content() {
    let mut watch = AskWatch::new();
    let value = json!({ "category": "billing", "urgency": 4 });
    let answer = |id: &str, structured: Option<&Value>| {
        let mut m =
            json!({"id":id,"role":"assistant","content":"{…}","status":"completed","depth":0});
        if let Some(v) = structured {
            m["structured"] = v.clone();
        }
        json!({"type":"message","message":m})
    };
    watch.on_frame(&answer("m1", Some(&json!({ "stale": true }))));
    watch.on_frame(&answer("m2", Some(&value)));
    assert!(watch.on_frame(&json!({"type":"status","state":"idle","turn":1,"side":"a"})));
    let result = watch.result("T");
    assert_eq!(result["structuredContent"]["structured"], value);
    assert_eq!(result["structuredContent"]["message_id"], "m2");

    // A later plain answer (another prompt of the agent) carries none.
    watch.on_frame(&answer("m3", None));
    assert!(watch.result("T")["structuredContent"]
        .get("structured")
        .is_none());

    // A turn that failed on an answer that never fit says so, with no value.
    let mut failed = AskWatch::new();
    failed.on_frame(
        &json!({"type":"error","code":"model_retry","message":"the answer does not fit"}),
    );
    failed.on_frame(&json!({"type":"error","code":"invalid_structured_output","message":"invalid structured output: …"}));
    assert!(failed.on_frame(&json!({"type":"status","state":"idle","turn":0,"side":"a"})));
    let result = failed.result("T");
    assert_eq!(result["isError"], true);
    assert!(result["structuredContent"].get("structured").is_none());
}

#[test]
fn a_failed_turn_or_a_parked_call_is_said() {
    let mut failed = AskWatch::new();
    failed.on_frame(&json!({"type":"error","code":"model_error","message":"the model is down"}));
    assert!(failed.on_frame(&json!({"type":"status","state":"idle","turn":0,"side":"a"})));
    let result = failed.result("T");
    assert_eq!(result["isError"], true);
    assert!(result["content"][0]["text"]
        .as_str()
        .is_some_and(|t| t.contains("the model is down")));

    let mut parked = AskWatch::new();
    parked.on_frame(
        &json!({"type":"tool","tool_call_id":"c1","name":"issue_refund","status":"waiting"}),
    );
    parked.on_frame(
        &json!({"type":"tool","tool_call_id":"c2","name":"get_weather","status":"retrying"}),
    );
    parked.on_frame(
        &json!({"type":"tool","tool_call_id":"c2","name":"get_weather","status":"success"}),
    );
    assert!(parked.on_frame(&json!({"type":"status","state":"idle","turn":0,"side":"a"})));
    let result = parked.result("T");
    assert_eq!(result["structuredContent"]["status"], "waiting");
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("c1 (waiting)") && !text.contains("c2"),
        "{text}"
    );
}

#[test]
fn a_call_answers_with_its_content_items() {
    let mut watch = CallWatch::new("q1");
    assert!(!watch.on_frame(&json!({"type":"tool","tool_call_id":"q0","status":"error"})));
    assert!(!watch.on_frame(&json!({"type":"tool","tool_call_id":"q1","status":"running"})));
    let pending = watch.result("T");
    assert_eq!(pending["isError"], true);
    assert!(pending["content"][0]["text"]
        .as_str()
        .is_some_and(|t| t.contains("running")));
    assert!(!watch.on_frame(&json!({"type":"tool","tool_call_id":"q1","status":"success"})));
    assert!(watch.on_frame(&json!({"type":"message","message":{"role":"tool","tool_call_id":"q1","content":"chart\n\n[image: image/png]","parts":[
        {"type":"text","text":"chart"},
        {"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},
        {"type":"image","source":{"type":"url","media_type":"image/png","data":"https://example.com/c.png"}},
        {"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0="}}
    ]}})));
    let result = watch.result("T");
    assert_eq!(result["isError"], false);
    let content = &result["content"];
    assert_eq!(content[0], json!({"type":"text","text":"chart"}));
    assert_eq!(
        content[1],
        json!({"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"})
    );
    assert_eq!(content[2]["type"], "resource_link");
    assert_eq!(content[2]["uri"], "https://example.com/c.png");
    assert_eq!(content[3]["resource"]["blob"], "JVBERi0=");
    assert_eq!(content[3]["resource"]["uri"], "edgent:document.pdf");

    let mut failed = CallWatch::new("q2");
    failed.on_frame(&json!({"type":"tool","tool_call_id":"q2","status":"error"}));
    failed.on_frame(&json!({"type":"message","message":{"role":"tool","tool_call_id":"q2","content":"Error: no such city"}}));
    let result = failed.result("T");
    assert_eq!(result["isError"], true);
    assert_eq!(result["content"][0]["text"], "Error: no such city");
}

#[test]
fn watches_opened_before_the_work_is_stored_miss_nothing_and_take_nothing_earlier() {
    // A call's frames can come before its id is known (another loop ran it during the store's
    // await): kept, then fed once the id is set.
    let mut call = CallWatch::before_its_id();
    assert!(!call.on_frame(&json!({"type":"tool","tool_call_id":"q9","status":"success"})));
    assert!(!call.on_frame(
        &json!({"type":"message","message":{"role":"tool","tool_call_id":"q9","content":"42"}})
    ));
    assert!(
        call.set_call_id("q9"),
        "its result was among the early frames"
    );
    assert_eq!(call.result("T")["content"][0]["text"], "42");
    let mut other = CallWatch::before_its_id();
    other.on_frame(
        &json!({"type":"message","message":{"role":"tool","tool_call_id":"q8","content":"no"}}),
    );
    assert!(!other.set_call_id("q9"));

    // An ask follows the turn only from its own message: an earlier turn's end is not its.
    let mut ask = AskWatch::after_message("Hi");
    assert!(!ask.on_frame(&json!({"type":"status","state":"idle","turn":3,"side":"a"})));
    assert!(!ask.on_frame(&json!({"type":"message","message":{"id":"u","role":"user","content":"Hi","status":"completed","depth":0}})));
    assert!(!ask.on_frame(&json!({"type":"message","message":{"id":"a","role":"assistant","content":"Hello","status":"completed","depth":0}})));
    assert!(ask.on_frame(&json!({"type":"status","state":"idle","turn":4,"side":"a"})));
    assert_eq!(ask.result("T")["content"][0]["text"], "Hello");
}

mod client_side {
    use super::super::client::*;
    use serde_json::json;

    #[test]
    fn an_answer_is_read_from_json_or_from_an_sse_stream_with_notifications() {
        let json_body = r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[]}}"#;
        let reply = read_reply(200, Some("application/json"), json_body, 7, true).expect("read");
        assert_eq!(reply.result, Ok(json!({"tools": []})));
        assert!(!reply.list_changed);
        let sse = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":8,\"error\":{\"code\":-32602,\"message\":\"Unknown tool\"}}";
        let reply = read_reply(200, Some("text/event-stream"), sse, 8, true).expect("read");
        assert_eq!(reply.result, Err((-32602, "Unknown tool".into())));
        assert!(reply.list_changed, "the notification in the same stream");
        assert_eq!(
            read_reply(404, None, "", 1, true),
            Err(WireError::SessionGone)
        );
        assert!(matches!(
            read_reply(404, None, "no", 1, false),
            Err(WireError::Status(404, _))
        ));
        assert!(matches!(
            read_reply(200, Some("application/json"), json_body, 9, true),
            Err(WireError::Malformed(_))
        ));
        assert!(matches!(
            read_reply(200, Some("application/json"), "<html>", 9, true),
            Err(WireError::Malformed(_))
        ));
    }

    #[test]
    fn outages_are_retried_and_refusals_and_redirects_are_not() {
        use crate::values::tool_error::Retry;
        let retry = |e: WireError| e.into_tool_error("kb").retry();
        let moved = read_reply(307, None, "", 1, true).unwrap_err();
        assert!(moved.to_string().contains("not followed"), "{moved}");
        assert_eq!(retry(moved), Retry::Never);
        assert_eq!(retry(WireError::Status(503, String::new())), Retry::Backoff);
        assert_eq!(retry(WireError::Status(429, String::new())), Retry::Backoff);
        assert_eq!(retry(WireError::Malformed("x".into())), Retry::Backoff);
        assert_eq!(retry(WireError::Status(403, String::new())), Retry::Never);
        let text = WireError::Status(401, "bad token".into())
            .into_tool_error("kb")
            .to_string();
        assert!(text.contains("\"kb\"") && text.contains("401"), "{text}");
    }

    #[test]
    fn tools_are_named_for_the_model_and_results_keep_their_items() {
        let listed = json!({"tools": [
            {"name": "search", "description": "Searches.", "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}},
            {"name": "hidden", "inputSchema": {"type": "object"}},
            {"name": "odd", "inputSchema": "not a schema"}
        ], "nextCursor": "p2"});
        let (tools, next) = tool_page(&listed, |t| (t != "hidden").then(|| format!("kb__{t}")));
        assert_eq!(next.as_deref(), Some("p2"));
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["kb__search", "kb__odd"]);
        assert_eq!(*tools[1].parameters, json!({"type": "object"}));

        let result = call_result(&json!({"content": [
            {"type": "text", "text": "chart"},
            {"type": "image", "data": "iVBO", "mimeType": "image/png"},
            {"type": "resource_link", "uri": "https://x/y", "name": "y"},
            {"type": "resource", "resource": {"uri": "file:///a", "text": "inline"}},
            {"type": "audio", "data": "AAA", "mimeType": "audio/wav"}
        ]}));
        assert!(!result.is_error());
        assert!(result.has_media());
        let text = result.to_model_text();
        assert!(
            text.contains("chart")
                && text.contains("https://x/y")
                && text.contains("inline")
                && text.contains("[audio content]"),
            "{text}"
        );
        let failed = call_result(
            &json!({"content": [{"type": "text", "text": "offline"}], "isError": true}),
        );
        assert!(failed.is_error());
        assert!(failed.to_model_text().contains("offline"));
        let structured = call_result(&json!({"content": [], "structuredContent": {"n": 1}}));
        assert!(structured.to_model_text().contains("\"n\":1"));
    }

    #[test]
    fn requests_carry_the_session_version_and_token() {
        let headers = headers(Some("s1"), Some("2025-06-18"), Some("tok"));
        let get = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("mcp-session-id"), Some("s1"));
        assert_eq!(get("mcp-protocol-version"), Some("2025-06-18"));
        assert_eq!(get("authorization"), Some("Bearer tok"));
        assert!(get("accept").is_some_and(|a| a.contains("text/event-stream")));
        assert!(super::super::client::headers(None, None, None).len() == 2);
        let body: serde_json::Value =
            serde_json::from_str(&request_body(3, "tools/list", json!({}))).expect("json");
        assert_eq!(body["id"], 3);
    }
}

#[test]
fn on_mcp_a_registered_tool_names_its_thread() {
    let spec = ToolSpec {
        name: "lookup_customer".into(),
        description: "Looks up a customer.".into(),
        parameters: json!({
            "type": "object",
            "properties": { "email": { "type": "string" } },
            "required": ["email"],
        })
        .into(),
        returns: None,
    };
    let listing = tool_descriptor_in_thread(&spec).unwrap();
    assert_eq!(
        listing["inputSchema"]["required"],
        json!(["email", "thread_id"])
    );
    assert_eq!(
        listing["inputSchema"]["properties"]["thread_id"]["type"],
        "string"
    );
    // No arguments of its own: the thread is the only one.
    let bare = ToolSpec {
        parameters: json!({ "type": "object" }).into(),
        ..spec.clone()
    };
    assert_eq!(
        tool_descriptor_in_thread(&bare).unwrap()["inputSchema"]["required"],
        json!(["thread_id"])
    );
    // A tool with a thread_id of its own is left to /mcp/:agent.
    let own = ToolSpec {
        parameters:
            json!({ "type": "object", "properties": { "thread_id": { "type": "string" } } }).into(),
        ..spec
    };
    assert!(tool_descriptor_in_thread(&own).is_none());

    let args = |v: Value| v.as_object().cloned().unwrap();
    let (thread, rest) =
        thread_of_call(args(json!({ "thread_id": "t-1", "email": "a@b.c" }))).unwrap();
    assert_eq!(
        (thread.as_str(), rest),
        ("t-1", args(json!({ "email": "a@b.c" })))
    );
    assert!(thread_of_call(args(json!({ "email": "a@b.c" })))
        .unwrap_err()
        .contains("is required"));
    assert!(thread_of_call(args(json!({ "thread_id": 7 }))).is_err());
}
