//! Schema creation, migration and message paging.

use edgent::engine::schema::{migrate, SCHEMA_VERSION};
use edgent::engine::store::{Order, Store};
use edgent::values::message::{Message, MessageStatus, Role};
use edgent::values::sql::Sql;

use crate::sqlite::Sqlite;

fn msg(i: i64, depth: u32) -> Message {
    Message {
        id: format!("m{i}"),
        role: if i % 2 == 0 {
            Role::User
        } else {
            Role::Assistant
        },
        content: format!("message {i}"),
        name: None,
        tool_calls: vec![],
        tool_call_id: None,
        created_at: 1000 + i,
        silent: false,
        depth,
        status: MessageStatus::Completed,
        parts: vec![],
        side: None,
        parent_message_id: None,
        parent_tool_call_id: None,
    }
}

#[test]
fn schema_is_created_then_left_alone() {
    let db = Sqlite::memory();
    assert_eq!(migrate(&db).unwrap(), 0, "a new database starts at v0");
    assert_eq!(
        migrate(&db).unwrap(),
        SCHEMA_VERSION,
        "second open migrates nothing"
    );
    let tables: Vec<String> = db
        .exec(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.text(0).unwrap())
        .collect();
    for t in ["edgent_meta", "messages", "thread", "tool_calls"] {
        assert!(
            tables.contains(&t.to_string()),
            "{t} missing from {tables:?}"
        );
    }
}

#[test]
fn a_newer_schema_is_refused() {
    let db = Sqlite::memory();
    migrate(&db).unwrap();
    db.exec(
        "UPDATE edgent_meta SET value = 999 WHERE key = 'schema_version'",
        &[],
    )
    .unwrap();
    let err = migrate(&db).unwrap_err();
    assert!(err.0.contains("newer"), "{err}");
}

#[test]
fn messages_page_in_both_orders() {
    let db = Sqlite::memory();
    migrate(&db).unwrap();
    let store = Store::new(&db);
    store.create_thread(0, "t", "a", &[]).unwrap();
    for i in 0..25 {
        store.append_message(&msg(i, 0)).unwrap();
    }
    store.append_message(&msg(100, 1)).unwrap(); // deeper messages are not top-level pages

    let p = store.messages_page(10, 0, Order::Asc, false).unwrap();
    assert_eq!(p.total, 25);
    assert!(p.has_more);
    assert_eq!(p.messages.first().unwrap().id, "m0");
    assert_eq!(p.messages.last().unwrap().id, "m9");

    let p = store.messages_page(10, 20, Order::Asc, false).unwrap();
    assert_eq!(p.messages.len(), 5);
    assert!(!p.has_more);

    let p = store.messages_page(3, 0, Order::Desc, false).unwrap();
    let ids: Vec<_> = p.messages.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["m24", "m23", "m22"]);

    let p = store.messages_page(10, 500, Order::Asc, false).unwrap();
    assert!(p.messages.is_empty() && !p.has_more);
}

fn plan(db: &Sqlite, query: &str) -> String {
    db.exec(&format!("EXPLAIN QUERY PLAN {query}"), &[])
        .unwrap()
        .iter()
        .map(|r| r.text(3).unwrap())
        .collect::<Vec<_>>()
        .join(" | ")
}

#[test]
fn paging_uses_the_index_not_a_scan() {
    let db = Sqlite::memory();
    migrate(&db).unwrap();
    for (query, index) in [
        (
            "SELECT id FROM messages WHERE depth = 0 ORDER BY position DESC LIMIT 50 OFFSET 0",
            "messages_by_depth_position",
        ),
        (
            "SELECT id FROM messages WHERE depth = 0 AND silent = 0 ORDER BY position ASC LIMIT 50 OFFSET 0",
            "messages_visible",
        ),
        ("SELECT MAX(position) FROM messages", "messages_by_position"),
        (
            "SELECT MAX(position) FROM messages WHERE position < 5",
            "messages_by_position",
        ),
        ("SELECT MAX(seq) FROM tool_calls", "tool_calls_by_seq"),
        (
            "SELECT id FROM messages WHERE status = 'pending'",
            "messages_pending",
        ),
    ] {
        let plan = plan(&db, query);
        assert!(plan.contains(index), "{query}: {plan}");
        assert!(!plan.contains("TEMP B-TREE"), "must not sort: {plan}");
        assert!(!plan.starts_with("SCAN messages"), "must not scan: {plan}");
    }
}

#[test]
fn messages_round_trip_every_field() {
    let db = Sqlite::memory();
    migrate(&db).unwrap();
    let store = Store::new(&db);
    let mut m = msg(1, 0);
    m.tool_calls = vec![edgent::values::message::ToolCall {
        id: "call_1".into(),
        name: "get_current_time".into(),
        arguments: "{}".into(),
    }];
    m.silent = true;
    m.name = Some("n".into());
    store.append_message(&m).unwrap();
    assert_eq!(store.message("m1").unwrap(), Some(m));
    assert_eq!(store.message("nope").unwrap(), None);
}
