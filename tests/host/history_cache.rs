//! The object's cache (`edgent::engine::store::ThreadCache`): a thread read through it
//! sends the model exactly what a full read would, after appends, a budget cut, a message
//! inserted before others and a final message edited by hand; and a model call reads only
//! what was appended since the last one; and a stop is known without a read. A call whose
//! history is verbatim lets a wire format's memo stand for what it wrote before, and the body
//! is the same as one written afresh (`tests/host/openai_memo.rs` covers the memo alone).

use std::rc::Rc;

use edgent::engine::store::ThreadCache;
use edgent::engine::thread::{Action, InjectMessage, Thread, TurnRules};
use edgent::llm::memo::{HistoryMemo, MemoUse};
use edgent::llm::openai::request_body;
use edgent::llm::{ModelRequest, Provider, Target, ToolChoice};
use edgent::testing::{reply_events, Sqlite};
use edgent::values::message::Message;

const T0: i64 = 1_795_300_162_000;

/// Two threads fed the same way: one reads its history through a cache, one reads it whole.
struct Pair {
    cached: Sqlite,
    plain: Sqlite,
    cache: Rc<ThreadCache>,
    budget: u32,
    memo: HistoryMemo,
}

impl Pair {
    fn new(budget: u32) -> Self {
        let pair = Pair {
            cached: Sqlite::memory(),
            plain: Sqlite::memory(),
            cache: Rc::default(),
            budget,
            memo: HistoryMemo::default(),
        };
        for db in [&pair.cached, &pair.plain] {
            Thread::open(db)
                .unwrap()
                .create(T0, "t", "support", &[])
                .unwrap();
        }
        pair
    }

    fn views(&self) -> [Thread<'_>; 2] {
        let rules = TurnRules {
            max_history_tokens: self.budget,
            max_turns: 1_000,
            ..TurnRules::default()
        };
        let mut cached = Thread::open_migrated(&self.cached).with_cache(self.cache.clone());
        let mut plain = Thread::open_migrated(&self.plain);
        cached.set_rules(rules.clone());
        plain.set_rules(rules);
        [cached, plain]
    }

    /// A user message and a text reply; returns what the model was sent, by both threads.
    fn turn(&self, user: &str, reply: &str) -> [Vec<(String, String)>; 2] {
        let mut sent = [Vec::new(), Vec::new()];
        for (i, mut t) in self.views().into_iter().enumerate() {
            t.post_user_message(T0, user).unwrap();
            let Action::CallModel(mut call) = t.next_action(T0, 10).unwrap() else {
                panic!("expected a model call");
            };
            if i == 0 {
                let version = call.verbatim.expect("the stored messages, as stored");
                // Given to the call without a copy: the cache holds the same messages.
                assert_eq!(Rc::strong_count(&call.history), 2);
                self.same_body_with_memo(&call.history, version);
            } else {
                assert_eq!(call.verbatim, None, "no cache, no memo");
            }
            sent[i] = call
                .history
                .iter()
                .map(|m| (m.role.as_str().to_owned(), m.content.clone()))
                .collect();
            for ev in reply_events(reply, &[]) {
                t.on_model_event(&mut call, ev).unwrap();
            }
            t.finish_model_call(T0, call).unwrap();
            assert!(matches!(t.next_action(T0, 10).unwrap(), Action::Idle));
        }
        sent
    }

    /// The chat-completions body of `history` with the pair's memo at `version` is the body
    /// written afresh.
    fn same_body_with_memo(&self, history: &[Message], version: i64) {
        let request = |memo| ModelRequest {
            target: Target {
                provider: Provider::OpenAi,
                model: "m",
                base_url: "http://127.0.0.1:9",
                max_output_tokens: None,
            },
            system: "",
            history,
            tools: &[],
            tool_choice: ToolChoice::Auto,
            parallel_tool_calls: false,
            output: None,
            memo,
        };
        let memo = MemoUse {
            memo: &self.memo,
            version,
        };
        assert_eq!(
            request_body(&request(Some(memo))),
            request_body(&request(None))
        );
    }

    fn both(&self, f: impl Fn(&Sqlite)) {
        f(&self.cached);
        f(&self.plain);
    }
}

#[test]
fn the_cached_history_is_what_a_full_read_gives() {
    // A small budget, so the front is cut as the thread grows.
    let pair = Pair::new(60);
    for i in 0..12 {
        let [cached, plain] = pair.turn(
            &format!("question {i} {}", "x".repeat(i * 7)),
            &format!("answer {i}"),
        );
        assert_eq!(cached, plain, "turn {i}");
        assert!(
            cached.len() < 2 * (i + 1) || i < 2,
            "the budget cuts the front by turn {i}"
        );
    }
    // A message inserted before others.
    pair.both(|db| {
        let before: String =
            db.0.query_row(
                "SELECT id FROM messages WHERE role = 'user' ORDER BY position DESC LIMIT 1",
                [],
                |r| r.get(0),
            )
            .unwrap();
        let inject: InjectMessage = serde_json::from_value(serde_json::json!({
            "content": "an aside", "role": "user", "before_message_id": before
        }))
        .unwrap();
        Thread::open_migrated(db)
            .inject_message(T0, inject, 0)
            .unwrap();
    });
    let [cached, plain] = pair.turn("after the aside", "ok");
    assert_eq!(cached, plain);
    assert!(cached.iter().any(|(_, c)| c == "an aside"), "{cached:?}");

    // A final message edited by hand (as `wrangler d1 execute` or a tool's SQL could).
    pair.both(|db| {
        db.0.execute(
            "UPDATE messages SET content = 'edited answer' WHERE content = 'ok'",
            [],
        )
        .unwrap();
    });
    let [cached, plain] = pair.turn("and now?", "fine");
    assert_eq!(cached, plain);
    assert!(
        cached.iter().any(|(_, c)| c == "edited answer"),
        "{cached:?}"
    );
    // An edit of the same length, of a message the memo holds (it was sent in the call
    // before): only the history version tells the memo.
    pair.turn("still there?", "yes");
    pair.both(|db| {
        db.0.execute(
            "UPDATE messages SET content = 'FINE' WHERE content = 'fine'",
            [],
        )
        .unwrap();
    });
    let [cached, plain] = pair.turn("last one", "bye");
    assert_eq!(cached, plain);
    assert!(cached.iter().any(|(_, c)| c == "FINE"), "{cached:?}");
}

#[test]
fn a_model_call_reads_only_what_was_appended_since_the_last() {
    let pair = Pair::new(100_000);
    for i in 0..30 {
        pair.turn(&format!("question {i}"), &format!("answer {i}"));
    }
    pair.cached.record();
    pair.plain.record();
    pair.turn("one more", "done");
    let full_pages = |db: &Sqlite| {
        db.recorded()
            .iter()
            .filter(|s| s.contains("position < ?") && s.contains("ORDER BY position DESC"))
            .count()
    };
    assert_eq!(
        full_pages(&pair.cached),
        0,
        "the cached thread re-read its history"
    );
    assert!(
        full_pages(&pair.plain) >= 1,
        "the plain thread reads it whole"
    );
}

/// The object's cache also knows that it stopped the thread: a reply that was streaming when a
/// client stopped the thread (through another view of the same object, as the runtime's
/// operations do) keeps what was said and queues none of its tool calls, without a read.
#[test]
fn a_stop_while_the_model_streams_is_known_to_the_view_finishing_the_reply() {
    let db = Sqlite::memory();
    let cache: Rc<ThreadCache> = Rc::default();
    let view = || Thread::open_migrated(&db).with_cache(cache.clone());
    Thread::open(&db)
        .unwrap()
        .create(T0, "t", "support", &[])
        .unwrap();
    let mut streaming = view();
    streaming.post_user_message(T0, "go").unwrap();
    let Action::CallModel(mut call) = streaming.next_action(T0, 10).unwrap() else {
        panic!("the model is owed a call");
    };
    for ev in reply_events("Partial answer", &[("c1", "get_current_time", "{}")]) {
        streaming.on_model_event(&mut call, ev).unwrap();
    }
    // The stop arrives through the object's other view while the stream is still open.
    view().stop(T0 + 1, "user").unwrap();
    db.record();
    streaming.finish_model_call(T0 + 2, call).unwrap();
    let statements = db.recorded();
    assert!(
        !statements
            .iter()
            .any(|s| s.starts_with("SELECT id, agent_id")),
        "no read of the thread row: {statements:?}"
    );
    let page = view()
        .messages(10, 0, edgent::engine::store::Order::Asc, false)
        .unwrap();
    let reply = page.messages.last().unwrap();
    assert_eq!(
        (reply.content.as_str(), reply.status.as_str()),
        ("Partial answer", "completed")
    );
    let calls = view()
        .tool_call_page(10, 0, edgent::engine::store::Order::Asc)
        .unwrap();
    assert!(
        calls.tool_calls.is_empty(),
        "a stopped thread queues nothing"
    );
}

#[test]
fn a_message_appended_behind_the_caches_back_is_read_not_missed() {
    // The cache takes the messages its object appended without reading them back, but only
    // when the thread's count of visible messages says nothing else was appended: here a
    // view without the cache (as a tool's own store handle) appends between turns.
    let pair = Pair::new(10_000);
    let [cached, plain] = pair.turn("first", "one");
    assert_eq!(cached, plain);
    pair.both(|db| {
        let inject: InjectMessage = serde_json::from_value(serde_json::json!({
            "content": "appended elsewhere", "role": "user"
        }))
        .unwrap();
        Thread::open_migrated(db)
            .inject_message(T0, inject, 0)
            .unwrap();
    });
    let [cached, plain] = pair.turn("second", "two");
    assert_eq!(cached, plain);
    assert!(
        cached.iter().any(|(_, c)| c == "appended elsewhere"),
        "{cached:?}"
    );
    // The next turn has only the object's own appends: it matches, and reads no message.
    pair.cached.record();
    let [cached, plain] = pair.turn("third", "three");
    assert_eq!(cached, plain);
    assert_eq!(cached.len(), 6, "{cached:?}");
    let statements = pair.cached.recorded();
    let message_reads: Vec<&String> = statements
        .iter()
        .filter(|s| s.trim_start().starts_with("SELECT") && s.contains("FROM messages"))
        .collect();
    assert!(message_reads.is_empty(), "{message_reads:?}");
}
