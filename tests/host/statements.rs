//! What a turn costs in SQLite statements, run the way the Worker's driver runs it
//! (`edgent-worker/src/thread_object/turn.rs`): the handler stores the message, then the loop
//! asks `step_wanted`, records the hook config (once per instance), takes `next_action`, streams the reply,
//! logs the request, and ends with `poll_timeout`. Counted on real SQLite.

use edgent::engine::request_log::ModelRequestLog;
use edgent::engine::thread::{Action, Thread, TurnRules};
use edgent::testing::{reply_events, TestHost};

use crate::flow_host::WithThread;

const T0: i64 = 1_795_300_162_000;

/// One turn as the driver performs it; `calls` are the model's tool calls in its first reply
/// (then it answers with text). Returns the statements run, in order.
fn turn(host: &std::rc::Rc<TestHost>, calls: &[(&str, &str, &str)], first: bool) -> Vec<String> {
    let config = edgent::testing::agent(&["get_current_time"]);
    host.db.record();
    // The handler (send_message).
    Thread::open_migrated(&host.db)
        .post_user_message(host.now(), "what time is it?")
        .unwrap();
    // The loop.
    let mut t = Thread::open_migrated(&host.db);
    let mut replies = 0;
    // The driver records the hook config once per instance, and loads the configuration
    // (yielding, so the row is read again) only when its cache is not fresh.
    let mut hooks_recorded = !first;
    while let Some(summary) = t.step_wanted(host.now()).unwrap() {
        // The first step loads the configuration (an await: the row is read again).
        let loaded = !hooks_recorded;
        if !hooks_recorded {
            t.set_hook_config(&config.prompt.name, config.hooks())
                .unwrap();
            hooks_recorded = true;
        }
        t.set_rules(TurnRules::from_config(&config));
        let action = if loaded {
            t.next_action(host.now(), config.max_steps())
        } else {
            t.next_action_for(host.now(), config.max_steps(), summary)
        };
        match action.unwrap() {
            Action::CallModel(mut call) => {
                let _system = t.system_text(&config.prompt);
                let (text, tool_calls) = if replies == 0 {
                    ("", calls)
                } else {
                    ("It is noon.", &[][..])
                };
                replies += 1;
                for ev in reply_events(text, tool_calls) {
                    t.on_model_event(&mut call, ev).unwrap();
                }
                let message_id = call.message_id.clone();
                t.finish_model_call(host.now(), call).unwrap();
                let log: ModelRequestLog = serde_json::from_value(serde_json::json!({
                    "message_id": message_id, "model": "m", "provider": "openai", "attempt": 1,
                    "status": "ok", "http_status": 200, "latency_ms": 5, "ttft_ms": 1,
                    "input_tokens": 10, "output_tokens": 5, "cost": 0.0, "error": null, "created_at": 0
                }))
                .unwrap();
                t.record_model_request(&log).unwrap();
            }
            Action::RunTool(call) => host.run_tools(&mut t, vec![call], 0.5),
            Action::RunTools(calls) => host.run_tools(&mut t, calls, 0.5),
            Action::Continue => {}
            Action::Idle | Action::Wait => break,
        }
    }
    t.poll_timeout().unwrap();
    host.db.recorded()
}

#[test]
fn statements_per_turn_stay_under_their_ceilings() {
    let host = TestHost::with_thread(T0);
    turn(&host, &[], true); // the first turn of an instance has its own one-time costs
    let text = turn(&host, &[], false);
    let tool = turn(&host, &[("c1", "get_current_time", "{}")], false);
    for (name, s) in [("text", &text), ("tool", &tool)] {
        eprintln!("{name} turn: {} statements", s.len());
        for st in s.iter() {
            eprintln!("   {}", &st[..st.len().min(150)]);
        }
    }
    // Ceilings, so a change that adds statements to every turn is noticed (the measured
    // counts on 2026-11-23; lower them as they fall).
    assert!(
        text.len() <= 25,
        "a text turn ran {} statements",
        text.len()
    );
    assert!(
        tool.len() <= 48,
        "a tool turn ran {} statements",
        tool.len()
    );
}
