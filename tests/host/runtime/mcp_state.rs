//! `GET /api/threads/:id/mcp` through the shipped runtime: what the thread keeps of its
//! prompt's MCP servers, shaped for the inspector. A server that cannot be reached (the host
//! tests have no network) shows its pause and no tools; a listed one its tools, its session
//! (open, without its id) and its list's times; a thread that does not exist is a 404.
//!
//! What it does not prove: the listing against a real server, the Worker's route and its
//! access rules (tests/e2e/mcp_inspect.test.mjs).

use super::*;
use edgent::api::mcp::client::TOOLS_TTL_MS;
use edgent::config::mcp_servers::McpServerConfig;

fn mcp_op() -> ThreadOp {
    ThreadOp::from_http("GET", "/mcp", &[], b"")
        .unwrap()
        .unwrap()
}

#[test]
fn an_unreachable_server_shows_its_pause_and_a_listed_one_its_tools() {
    let registry = edgent::tool::Registry::build(vec![]).unwrap();
    let mut agent = edgent::testing::agent(&[]);
    agent.prompt.mcp_servers = vec![McpServerConfig {
        name: "kb".into(),
        url: "https://kb.example.com/mcp?key=in-the-url".into(),
        token_secret: None,
        tools: vec![],
        approval: vec![],
    }];
    let h = TestHost::new(registry, T0).with_agent(agent).into_rc();
    let rt = h.runtime();
    assert_eq!(h.run(rt.apply(mcp_op())).unwrap(), json!({"servers": []}));

    h.script(Ok(reply_events("No knowledge base today.", &[])));
    h.run(rt.apply(send("Any articles?"))).unwrap();
    h.run_spawned();
    let answer = h.run(rt.apply(mcp_op())).unwrap();
    // Listed before the model call, failed (no network), not asked again for a minute.
    let paused = answer["servers"][0]["paused_until"].as_i64().unwrap();
    assert!(
        (T0 + 60_000..=h.now() + 60_000).contains(&paused),
        "a minute after the failure: {answer}"
    );
    assert_eq!(
        answer,
        json!({"servers": [{
            "name": "kb",
            "host": "kb.example.com",
            "session_open": false,
            "paused_until": paused,
            "tools": [],
        }]})
    );

    // As a listing that worked leaves it.
    let store = h.store();
    store
        .set_mcp_session(
            "kb",
            "https://kb.example.com/mcp?key=in-the-url",
            Some("session-id-secret"),
            "2025-06-18",
        )
        .unwrap();
    let tools = json!([{"name": "kb__search", "description": "Searches the knowledge base.",
                        "parameters": {"type": "object"}}]);
    store.set_mcp_tools("kb", &tools, T0 + 5_000).unwrap();
    let answer = h.run(rt.apply(mcp_op())).unwrap();
    assert_eq!(
        answer["servers"][0],
        json!({
            "name": "kb",
            "host": "kb.example.com",
            "session_open": true,
            "protocol_version": "2025-06-18",
            "listed_at": T0 + 5_000,
            "expires_at": T0 + 5_000 + TOOLS_TTL_MS,
            "tools": [{"name": "kb__search", "tool": "search",
                       "description": "Searches the knowledge base."}],
        })
    );
    let text = answer.to_string();
    assert!(!text.contains("session-id-secret") && !text.contains("in-the-url"));
}

#[test]
fn a_thread_that_does_not_exist_is_a_404_and_a_chat_token_may_read() {
    let registry = edgent::tool::Registry::build(vec![]).unwrap();
    let h = TestHost::without_thread(registry, T0).into_rc();
    let rt = h.runtime();
    let e = h.run(rt.apply(mcp_op())).unwrap_err();
    assert_eq!(e.status, 404);
    let registry = edgent::tool::Registry::build(vec![]).unwrap();
    assert_eq!(
        mcp_op().access(&registry),
        edgent::api::access::Access::Chat
    );
}
