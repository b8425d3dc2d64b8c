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
