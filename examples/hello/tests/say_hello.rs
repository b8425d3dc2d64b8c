// examples/hello/tests/say_hello.rs
use edgent::testing::{Action, TestHost};

#[test]
fn say_hello_answers_in_a_turn() {
    hello_agent::CATALOG.install();
    let host = TestHost::new(hello_agent::CATALOG.registry().unwrap(), 1_700_000_000_000).into_rc();
    host.thread()
        .post_user_message(host.now(), "greet Ada")
        .unwrap();
    let Action::CallModel(call) = host.drive(0.5) else {
        panic!()
    };
    host.reply(call, "", &[("c1", "say_hello", r#"{"name":"Ada"}"#)]);
    let Action::CallModel(call) = host.drive(0.5) else {
        panic!()
    };
    assert!(call.history.iter().any(|m| m.content == "Hello, Ada!"));
}
