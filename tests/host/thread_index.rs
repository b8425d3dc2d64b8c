//! The thread index (`edgent::api::thread_index`, `edgent::runtime::thread_index`) over the test
//! host, whose D1 is SQLite with the index's schema (`TestHost::index`, which can be made to
//! fail). Proves: the row a thread keeps (created with its tags and parent; status, turn count
//! and title after a turn; a failed turn's error and its clearing) written in the background
//! by the shipped runtime without a thread statement per turn; no write when nothing changed;
//! a failed write marks the thread dirty and is retried at the next change or the next
//! instance's first contact; the listing's paging, filters, bad queries and D1 failing, each
//! filter on an index (in `listing`); a deleted thread is forgotten. Does not prove: D1
//! itself, or the Worker's routes and sockets (`tests/e2e/thread_index.test.mjs`).

use std::rc::Rc;

use serde_json::{json, Value};

use edgent::api::ops::ThreadOp;
use edgent::api::thread_index::{IndexRow, SCHEMA};
use edgent::api::CreateThread;
use edgent::engine::thread::ParentLink;
use edgent::llm::stream::ProviderError;
use edgent::runtime::thread_index::delete_from_index;
use edgent::runtime::ThreadRuntime;
use edgent::testing::{block_on, reply_events, SqliteD1, TestHost};

use crate::flow_host::WithThread;

const T0: i64 = 1_795_300_162_000;
const PARENT: &str = "0b8f3c1e-6a2d-4f4b-9c1e-2d7a5e8f9b30";

mod listing;

use listing::list;

fn send(text: &str) -> ThreadOp {
    ThreadOp::from_rpc("send_message", &json!({ "content": text })).unwrap()
}

/// One text turn started by `text`; the statements the thread ran for it.
fn turn(host: &Rc<TestHost>, rt: &Rc<ThreadRuntime>, text: &str) -> Vec<String> {
    host.script(Ok(reply_events("Noted.", &[])));
    host.db.record();
    host.run(rt.apply(send(text))).unwrap();
    host.run_spawned();
    host.db.recorded()
}

/// The index's rows, newest first.
fn rows(index: &SqliteD1) -> Vec<Value> {
    index
        .query(
            "SELECT * FROM thread_index ORDER BY created_at DESC, thread_id DESC",
            vec![],
        )
        .unwrap()
}

fn dirty(host: &TestHost) -> bool {
    host.thread().index_facts().unwrap().1
}

#[test]
fn the_migration_runs_the_crate_schema() {
    let file = include_str!("../../migrations/0007_thread_index.sql");
    let normal = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let code: String = file
        .lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n");
    let statements: Vec<String> = code
        .split(';')
        .map(normal)
        .filter(|s| !s.is_empty())
        .collect();
    let schema: Vec<String> = SCHEMA.iter().map(|s| normal(s)).collect();
    assert_eq!(statements, schema);
}

#[test]
fn a_turn_keeps_the_row_current_with_no_thread_statement_for_it() {
    let host = TestHost::with_thread(T0);
    let rt = host.runtime();
    // An instance's first write reads the row once (the thread was not created by it).
    turn(&host, &rt, "What time is it in Lisbon?");
    let row = &rows(&host.index)[0];
    assert_eq!(row["thread_id"], "thread-1");
    assert_eq!(row["agent_id"], "support");
    assert_eq!(
        (row["status"].as_str(), row["turn_count"].as_i64()),
        (Some("idle"), Some(1))
    );
    assert_eq!(row["title"], "What time is it in Lisbon?");
    assert_eq!(row["last_error"], Value::Null);

    let before = host.index.batches();
    let statements = turn(&host, &rt, "And in Tokyo?");
    // Running, then idle: two background writes, both from the frames alone. (Here the host
    // runs the first write before the turn, so waiting `INDEX_SETTLE_MS` for the turn to end
    // still finds it running; under a real clock a short turn is written once, idle.)
    assert_eq!(host.index.batches() - before, 2);
    for s in &statements {
        assert!(
            !s.contains("edgent_meta"),
            "an index statement in a turn: {s}"
        );
    }
    // The statements test's text turn (its frame-log inserts included), none for the index.
    assert_eq!(
        statements.len(),
        10,
        "the statements test's text turn: {statements:#?}"
    );
    let row = &rows(&host.index)[0];
    assert_eq!(row["turn_count"], 2);
    assert_eq!(
        row["title"], "What time is it in Lisbon?",
        "the first message stays the title"
    );
    assert!(row["updated_at"].as_i64().unwrap() >= T0);
    assert!(
        host.logged_errors().is_empty(),
        "{:?}",
        host.logged_errors()
    );
}

#[test]
fn the_title_is_the_first_user_message_cut_to_80_characters() {
    let host = TestHost::with_thread(T0);
    let rt = host.runtime();
    turn(
        &host,
        &rt,
        &format!("Ça {}\n\nsecond paragraph", "é".repeat(100)),
    );
    let title = rows(&host.index)[0]["title"].as_str().unwrap().to_owned();
    assert_eq!(title.chars().count(), 80);
    assert!(title.starts_with("Ça éé") && !title.contains('\n'));
}

#[test]
fn nothing_is_written_when_nothing_the_row_shows_changed() {
    let host = TestHost::with_thread(T0);
    let rt = host.runtime();
    turn(&host, &rt, "Hi");
    let before = host.index.batches();
    for op in [
        ThreadOp::Summary,
        ThreadOp::from_http("GET", "/messages", &[], b"")
            .unwrap()
            .unwrap(),
        // A stored message that is not the thread's first user message.
        ThreadOp::from_rpc(
            "inject_message",
            &json!({ "content": "note for the model", "role": "system" }),
        )
        .unwrap(),
    ] {
        host.run(rt.apply(op)).unwrap();
        host.run_spawned();
    }
    assert_eq!(host.index.batches(), before);
}

#[test]
fn a_failed_turn_shows_its_error_until_the_next_turn_starts() {
    let host = TestHost::with_thread(T0);
    let rt = host.runtime();
    turn(&host, &rt, "Hi");
    host.script(Err(ProviderError::Http {
        status: 400,
        message: "bad tools".into(),
        retry_after_ms: None,
    }));
    host.run(rt.apply(send("Again"))).unwrap();
    host.run_spawned();
    let summary = host.thread().summary().unwrap();
    let row = &rows(&host.index)[0];
    assert_eq!(row["status"], "idle");
    assert_eq!(row["last_error"].as_str(), summary.last_error.as_deref());
    assert!(row["last_error"].as_str().unwrap().contains("bad tools"));

    turn(&host, &rt, "Third time");
    assert_eq!(rows(&host.index)[0]["last_error"], Value::Null);
}

#[test]
fn a_failed_write_marks_the_thread_dirty_and_the_next_change_writes_it() {
    let host = TestHost::with_thread(T0);
    let rt = host.runtime();
    turn(&host, &rt, "Hi");
    host.index.fail(true);
    turn(&host, &rt, "While D1 is down");
    assert!(dirty(&host), "the thread knows its row is behind");
    assert_eq!(rows(&host.index)[0]["turn_count"], 1, "the row is behind");
    assert!(host
        .logged_errors()
        .iter()
        .any(|e| e.contains("could not write the thread index")));

    host.index.fail(false);
    turn(&host, &rt, "D1 is back");
    assert_eq!(rows(&host.index)[0]["turn_count"], 3);
    assert!(!dirty(&host), "caught up: the flag is cleared");
}

#[test]
fn a_failed_write_is_retried_with_backoff_without_waiting_for_a_change() {
    let host = TestHost::with_thread(T0);
    let rt = host.runtime();
    turn(&host, &rt, "Hi");
    // The last write of a turn fails twice (D1 blips), and the thread then goes quiet.
    host.index.fail_next(2);
    let before = host.now();
    turn(&host, &rt, "The last message for a while");
    assert_eq!(
        rows(&host.index)[0]["turn_count"],
        2,
        "caught up by the retries"
    );
    assert_eq!(rows(&host.index)[0]["status"], "idle");
    assert!(!dirty(&host), "the flag is cleared once written");
    // Two backoff delays passed on the virtual clock (1 s, then 4 s).
    assert!(host.now() - before >= 5_000, "{}", host.now() - before);
}

#[test]
fn a_new_instance_retries_a_dirty_row_on_first_contact() {
    let host = TestHost::with_thread(T0);
    let rt = host.runtime();
    host.index.fail(true);
    turn(&host, &rt, "Hi");
    assert!(dirty(&host) && rows(&host.index).is_empty());
    host.index.fail(false);

    // Evicted; the next request reaches a new instance, with no change to the thread.
    let next = host.runtime();
    next.on_contact();
    host.run_spawned();
    let row = &rows(&host.index)[0];
    assert_eq!(
        (row["turn_count"].as_i64(), row["title"].as_str()),
        (Some(1), Some("Hi"))
    );
    assert!(!dirty(&host));

    // A clean thread costs a new instance one read of the flag and no write.
    let before = host.index.batches();
    host.runtime().on_contact();
    host.run_spawned();
    assert_eq!(host.index.batches(), before);
}

#[test]
fn a_created_thread_gets_its_row_with_tags_and_parent() {
    let registry = crate::registry().unwrap();
    let host = TestHost::without_thread(registry, T0).into_rc();
    let rt = host.runtime();
    let id = "5b6e08e5-7166-4fc7-8314-9694ee25ac11";
    let create =
        CreateThread::parse(br#"{"agent_id":"support","tags":["vip","eu","vip"]}"#).unwrap();
    let parent = ParentLink {
        thread_id: PARENT,
        root_thread_id: PARENT,
        nesting: 1,
    };
    host.run(rt.create(id, &create, Some(parent), None))
        .unwrap();
    host.run_spawned();
    let row = &rows(&host.index)[0];
    assert_eq!(row["thread_id"], id);
    assert_eq!(
        (row["status"].as_str(), row["turn_count"].as_i64()),
        (Some("idle"), Some(0))
    );
    assert_eq!(
        (row["parent"].as_str(), row["title"].clone()),
        (Some(PARENT), Value::Null)
    );
    assert_eq!(row["created_at"], T0);
    let tags = host
        .index
        .query("SELECT tag FROM thread_tags ORDER BY tag", vec![])
        .unwrap();
    assert_eq!(tags, vec![json!({"tag": "eu"}), json!({"tag": "vip"})]);

    let page = list(&host.index, &[("parent", PARENT)]).unwrap();
    assert_eq!(page["threads"][0]["thread_id"], id);
    assert_eq!(page["threads"][0]["tags"], json!(["vip", "eu", "vip"]));
}

#[test]
fn a_deleted_thread_is_forgotten_and_leaves_no_row() {
    let host = TestHost::with_thread(T0);
    let rt = host.runtime();
    turn(&host, &rt, "Hi");
    assert_eq!(rows(&host.index).len(), 1);

    let id = rt.forget_thread().unwrap();
    assert_eq!(id, "thread-1");
    // A change that races the delete is not written.
    host.script(Ok(reply_events("late", &[])));
    let before = host.index.batches();
    host.run(rt.apply(send("late message"))).unwrap();
    host.run_spawned();
    assert_eq!(
        host.index.batches(),
        before,
        "no write after the delete began"
    );

    // The host erases the storage (the Worker: `deleteAll`), then the runtime forgets it.
    let tables = host
        .db
        .0
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
        .unwrap()
        .query_map([], |r| r.get::<_, String>(0))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    // SQLite's own tables (AUTOINCREMENT's counters) cannot be dropped; deleteAll clears them.
    for table in tables.into_iter().filter(|t| !t.starts_with("sqlite_")) {
        host.db
            .0
            .execute_batch(&format!("DROP TABLE {table}"))
            .unwrap();
    }
    rt.thread_erased();
    let e = host.run(rt.apply(ThreadOp::Summary)).unwrap_err();
    assert_eq!(e.status, 404);
    assert_eq!(rt.forget_thread().unwrap_err().status, 404);

    block_on(delete_from_index(&*host.index, &id)).unwrap();
    assert!(rows(&host.index).is_empty());
}

#[test]
fn a_write_never_takes_a_row_back_to_an_older_state() {
    let index = SqliteD1::thread_index();
    let newer = IndexRow {
        thread_id: PARENT.into(),
        agent_id: "support".into(),
        status: "idle".into(),
        turn_count: 2,
        tags: vec!["vip".into()],
        created_at: T0,
        updated_at: T0 + 20,
        ..IndexRow::default()
    };
    let older = IndexRow {
        status: "running".into(),
        turn_count: 1,
        updated_at: T0 + 10,
        ..newer.clone()
    };
    for row in [&newer, &older, &newer] {
        block_on(edgent::runtime::ConfigDb::batch(&index, row.upsert())).unwrap();
    }
    let stored = &rows(&index)[0];
    assert_eq!(
        (stored["status"].as_str(), stored["turn_count"].as_i64()),
        (Some("idle"), Some(2))
    );
    let tags = index.query("SELECT tag FROM thread_tags", vec![]).unwrap();
    assert_eq!(tags.len(), 1, "tags written once however often the row is");
}

/// A running thread's row waits `INDEX_SETTLE_MS` (500 ms) for its turn to end: a turn that
/// ends sooner is written once, idle.
#[test]
fn a_short_turn_is_written_to_the_index_once_idle() {
    let host = TestHost::with_thread(T0);
    let rt = host.runtime();
    turn(&host, &rt, "First");
    host.run_spawned();
    let before = host.index.batches();
    // The write of the running row starts first and waits; the turn then runs and ends.
    host.script(Ok(reply_events("Noted.", &[])));
    host.run(rt.apply(send("Second"))).unwrap();
    host.run_spawned_together();
    assert_eq!(
        host.index.batches() - before,
        1,
        "one write for the whole turn"
    );
    let row = &rows(&host.index)[0];
    assert_eq!(row["status"], "idle");
    assert_eq!(row["turn_count"], 2);
}

/// Two writes of one thread's row start at least `INDEX_WRITE_GAP_MS` (1 s) apart: a turn
/// that ends right after a write is written once the gap has passed (not at the 500 ms
/// settle), with the newest row. Without the gap, turns back to back write the row at every
/// turn.
#[test]
fn a_row_written_moments_ago_waits_out_the_gap_before_the_next_write() {
    let host = TestHost::with_thread(T0);
    let rt = host.runtime();
    turn(&host, &rt, "First");
    host.run_spawned();
    for (n, text) in ["Second", "Third"].into_iter().enumerate() {
        let (before, from) = (host.index.batches(), host.now());
        host.script(Ok(reply_events("Noted.", &[])));
        host.run(rt.apply(send(text))).unwrap();
        host.run_spawned_together();
        assert_eq!(
            host.index.batches() - before,
            1,
            "one write for turn {text}"
        );
        // The host's writes take no time, so the last one started when the previous turn's
        // work ended: this write started a whole gap after it, not at the settle's 500 ms.
        assert!(
            host.now() - from >= 1_000,
            "turn {text}'s row written {} ms after the last write",
            host.now() - from
        );
        let row = &rows(&host.index)[0];
        assert_eq!(
            (row["status"].as_str(), row["turn_count"].as_i64()),
            (Some("idle"), i64::try_from(n + 2).ok())
        );
    }
}
