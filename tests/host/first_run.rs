//! The first run without a model key: a model whose key secret is missing or empty fails the
//! turn at once with `model_config`, saying which secret to set and where, with no request
//! made (a provider would only answer an opaque 401, or the network an opaque error), and
//! pointing at the demo model `npm run dev` starts when no key is set.

use std::rc::Rc;

use serde_json::json;

use edgent::api::ops::ThreadOp;
use edgent::engine::store::ThreadStatus;
use edgent::testing::{reply_events, TestHost};
use edgent::values::protocol::ServerFrame;

const T0: i64 = 1_700_000_000_000;

fn host(key: Option<&str>) -> Rc<TestHost> {
    let registry = edgent::tool::Registry::build(vec![]).unwrap();
    let mut agent = edgent::testing::agent(&[]);
    agent.models[0].api_key_secret = Some("OPENAI_API_KEY".into());
    let host = TestHost::new(registry, T0).with_agent(agent);
    match key {
        Some(value) => host.secret("OPENAI_API_KEY", value).into_rc(),
        None => host.into_rc(),
    }
}

fn turn(h: &Rc<TestHost>) {
    let rt = h.runtime();
    h.script(Ok(reply_events("Hello.", &[])));
    let send = ThreadOp::from_rpc(
        "send_message",
        &json!({ "content": "Hi, what time is it?" }),
    );
    h.run(rt.apply(send.unwrap())).unwrap();
    h.run_spawned();
}

#[test]
fn a_missing_or_empty_key_fails_at_once_saying_what_to_set() {
    for key in [None, Some(""), Some("  ")] {
        let h = host(key);
        turn(&h);
        assert!(h.model_requests().is_empty(), "{key:?}: a request was made");
        let summary = h.thread().summary().unwrap();
        assert_eq!(
            summary.status,
            ThreadStatus::Idle,
            "the thread stays usable"
        );
        let error = summary.last_error.unwrap_or_default();
        assert!(
            error.contains(
                "secret OPENAI_API_KEY is empty: set it in .dev.vars, or use the demo model"
            ) && error.contains(".dev.vars")
                && error.contains("wrangler secret put OPENAI_API_KEY")
                && error.contains("or use the demo model"),
            "{key:?}: {error}"
        );
        let code = h.frames().into_iter().find_map(|f| match f {
            ServerFrame::Error { code, .. } => Some(code),
            _ => None,
        });
        assert_eq!(code.as_deref(), Some("model_config"));
    }
}

#[test]
fn with_the_key_set_the_model_is_called() {
    let h = host(Some("sk-live"));
    turn(&h);
    assert_eq!(h.model_requests().len(), 1);
    assert_eq!(h.thread().summary().unwrap().last_error, None);
}
