//! Schema creation, migration and message paging.

use edgent::engine::schema::{migrate, Feature, MIGRATIONS, SCHEMA_VERSION};
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
        structured: None,
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
fn paging_and_compaction_use_an_index_not_a_scan() {
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
        // The `frame_log_compacted` trigger's delete, run for every settled message.
        (
            "DELETE FROM frame_log WHERE message_id = 'm1' AND seq < 9",
            "frame_log_by_message",
        ),
    ] {
        let plan = plan(&db, query);
        assert!(plan.contains(index), "{query}: {plan}");
        assert!(!plan.contains("TEMP B-TREE"), "must not sort: {plan}");
        assert!(!plan.starts_with("SCAN "), "must not scan: {plan}");
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

/// Each table's columns (name, type, not null, default, primary key) and each index's
/// definition, whitespace-normalised: what two ways of building a schema must agree on.
fn schema_of(db: &Sqlite) -> Vec<String> {
    let mut out = Vec::new();
    let objects = db
        .exec(
            "SELECT type, name, COALESCE(sql, '') FROM sqlite_master
             WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name",
            &[],
        )
        .unwrap();
    for o in objects {
        let (kind, name, sql) = (o.text(0).unwrap(), o.text(1).unwrap(), o.text(2).unwrap());
        if kind == "table" {
            for c in db.exec(&format!("PRAGMA table_info({name})"), &[]).unwrap() {
                out.push(format!("{name}: {:?}", c.0));
            }
        } else {
            out.push(sql.split_whitespace().collect::<Vec<_>>().join(" "));
        }
    }
    out
}

/// A new database with every feature's tables created (what an old thread's migrations made).
fn with_every_feature() -> Sqlite {
    let db = Sqlite::memory();
    migrate(&db).unwrap();
    for feature in Feature::ALL {
        db.exec(&feature.script(), &[]).unwrap();
    }
    db
}

#[test]
fn a_new_database_gets_the_same_schema_as_every_migration_replayed() {
    // CURRENT and every feature's statements together: a feature created later has the
    // shape the migrations give an old thread.
    let created = with_every_feature();
    let replayed = Sqlite::memory();
    replayed
        .exec(
            "CREATE TABLE edgent_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)",
            &[],
        )
        .unwrap();
    edgent::engine::schema::replay(&replayed, 0).unwrap();
    let (a, b) = (schema_of(&created), schema_of(&replayed));
    assert!(a.len() > 40, "the comparison sees the schema: {a:?}");
    let only_created: Vec<_> = a.iter().filter(|x| !b.contains(x)).collect();
    let only_replayed: Vec<_> = b.iter().filter(|x| !a.contains(x)).collect();
    assert!(
        only_created.is_empty() && only_replayed.is_empty(),
        "CURRENT differs from the migrations: only in CURRENT {only_created:?}, only in the migrations {only_replayed:?}"
    );
    assert_eq!(a, b, "same objects, different order");
    assert_eq!(migrate(&replayed).unwrap(), SCHEMA_VERSION);
}

#[test]
fn an_old_thread_is_migrated_step_by_step() {
    let db = Sqlite::memory();
    db.exec(
        "CREATE TABLE edgent_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)",
        &[],
    )
    .unwrap();
    for statement in edgent::engine::schema::MIGRATIONS[0] {
        db.exec(statement, &[]).unwrap();
    }
    db.exec(
        "INSERT INTO edgent_meta (key, value) VALUES ('schema_version', 1)",
        &[],
    )
    .unwrap();
    db.exec(
        "INSERT INTO thread (id, agent_id, created_at, updated_at, status) VALUES ('t', 'a', 1, 1, 'running')",
        &[],
    )
    .unwrap();
    assert_eq!(migrate(&db).unwrap(), 1);
    let fresh = with_every_feature();
    assert!(
        schema_of(&db) == schema_of(&fresh),
        "an upgraded thread differs from a new one"
    );
    // v2's backfill ran on the old row.
    let row = db.exec("SELECT needs_model FROM thread", &[]).unwrap();
    assert_eq!(row[0].int(0).unwrap(), 1);
}

/// A database as a build of schema `version` left it: its migrations run one by one, and the
/// version stamped.
fn database_at(version: i64) -> Sqlite {
    let db = Sqlite::memory();
    db.exec(
        "CREATE TABLE edgent_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)",
        &[],
    )
    .unwrap();
    for statements in &MIGRATIONS[..usize::try_from(version).unwrap()] {
        for statement in *statements {
            db.exec(statement, &[]).unwrap();
        }
    }
    db.exec(
        "INSERT INTO edgent_meta (key, value) VALUES ('schema_version', ?)",
        &[version.into()],
    )
    .unwrap();
    db
}

#[test]
fn calls_started_before_workflow_versions_read_as_version_1_and_queued_ones_as_not_started() {
    // A v15 thread (before versions) with a call that ran and parked, and one still queued.
    let before = 15;
    let db = database_at(before);
    for (id, started) in [("parked", Some(5_i64)), ("queued", None)] {
        db.exec(
            "INSERT INTO tool_calls (id, message_id, seq, name, arguments, created_at,
                 status, first_started_at)
             VALUES (?, 'm', 1, 'flow', '{}', 1, ?, ?)",
            &[
                id.into(),
                if started.is_some() {
                    "sleeping"
                } else {
                    "queued"
                }
                .into(),
                started.into(),
            ],
        )
        .unwrap();
    }
    assert_eq!(migrate(&db).unwrap(), before);
    let store = Store::new(&db);
    assert_eq!(store.tool_call("parked").unwrap().unwrap().version, Some(1));
    assert_eq!(store.tool_call("queued").unwrap().unwrap().version, None);
}

#[test]
fn a_migration_that_fails_part_way_leaves_the_thread_on_its_old_version() {
    use edgent::engine::schema::replay;
    // v6 creates the triggers `attempt_started`, then `attempt_finished`. A v5 database
    // (migrations 1-5 as an old build left it), with an object in the way of v6's second
    // statement: its first succeeds, then it fails.
    let before = 5;
    let db = database_at(before);
    db.exec(MIGRATIONS[5][1], &[]).unwrap(); // the obstacle: v6's own trigger, already there
    let version = || {
        db.exec(
            "SELECT value FROM edgent_meta WHERE key = 'schema_version'",
            &[],
        )
        .unwrap()[0]
            .int(0)
            .unwrap()
    };
    let trigger = |name: &str| {
        !db.exec(
            "SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = ?",
            &[name.into()],
        )
        .unwrap()
        .is_empty()
    };
    assert!(trigger("attempt_finished"), "in the way");
    assert!(replay(&db, before).is_err());
    assert_eq!(version(), before, "still on the old version");
    assert!(
        !trigger("attempt_started"),
        "the statement before the failure is rolled back"
    );

    // Once the obstacle is gone, the next open migrates.
    db.exec("DROP TRIGGER attempt_finished", &[]).unwrap();
    assert_eq!(migrate(&db).unwrap(), before);
    assert_eq!(version(), SCHEMA_VERSION);
    assert!(trigger("attempt_started") && trigger("attempt_finished"));
}

#[test]
fn a_page_of_large_messages_stops_at_the_byte_budget_and_paging_goes_on() {
    use edgent::values::limits::MAX_PAGE_BYTES;
    let db = Sqlite::memory();
    migrate(&db).unwrap();
    let store = Store::new(&db);
    store.create_thread(0, "t", "a", &[]).unwrap();
    let big = usize::try_from(MAX_PAGE_BYTES / 4).unwrap() - 10; // four fit, a fifth does not
    for i in 0..6 {
        let mut m = msg(i, 0);
        m.content = "x".repeat(big);
        store.append_message(&m).unwrap();
    }
    store.append_message(&msg(6, 0)).unwrap();
    let ids = |p: &edgent::engine::store::MessagePage| {
        p.messages.iter().map(|m| m.id.clone()).collect::<Vec<_>>()
    };

    let p = store.messages_page(50, 0, Order::Asc, false).unwrap();
    assert_eq!(ids(&p), ["m0", "m1", "m2", "m3"]);
    assert!(p.has_more, "a cut page says there is more");
    assert_eq!(p.total, 7);
    let p = store.messages_page(50, 4, Order::Asc, false).unwrap();
    assert_eq!(ids(&p), ["m4", "m5", "m6"]);
    assert!(!p.has_more);
    let p = store.messages_page(50, 0, Order::Desc, false).unwrap();
    assert_eq!(
        ids(&p),
        ["m6", "m5", "m4", "m3", "m2"],
        "the small one costs little"
    );
    // Small pages are not affected; the depth listing obeys the same budget.
    assert_eq!(
        store
            .messages_page(2, 1, Order::Asc, false)
            .unwrap()
            .messages
            .len(),
        2
    );
    for i in 0..5 {
        let mut m = msg(10 + i, 1);
        m.content = "y".repeat(big);
        store.append_message(&m).unwrap();
    }
    let p = store.messages_at_depth(1, 50, 0, Order::Asc).unwrap();
    assert_eq!(p.messages.len(), 4);
    assert!(p.has_more);
}

#[test]
fn a_replys_calls_as_known_when_stored_are_what_a_read_gives_back() {
    use edgent::engine::store::{stored_reply_calls, CallOrigin};
    use edgent::values::message::ToolCall;
    // The turn loop's next step takes these instead of reading the calls back (one
    // statement less per tool turn): they must be the rows the read would give.
    let db = Sqlite::memory();
    migrate(&db).unwrap();
    let store = Store::new(&db);
    store.create_thread(1000, "t1", "support", &[]).unwrap();
    let mut reply = Message {
        status: MessageStatus::Pending,
        ..msg(1, 0)
    };
    store.append_message(&reply).unwrap();
    reply.status = MessageStatus::Completed;
    reply.tool_calls = ["b_call", "a_call"]
        .iter()
        .map(|id| ToolCall {
            id: (*id).to_owned(),
            name: "get_current_time".to_owned(),
            arguments: r#"{"zone": "UTC"}"#.to_owned(),
        })
        .collect();
    let row = store.store_reply(1001, &reply, CallOrigin::Model).unwrap();
    assert_eq!(
        stored_reply_calls(&reply, CallOrigin::Model),
        store.pending_tool_calls().unwrap()
    );
    // The row the last insert returned is the row a read gives: the model owed a call
    // (trigger `model_call_owes_model`), both calls open.
    let read = store.thread_and_open_calls().unwrap();
    assert_eq!(row, read);
    let (summary, open) = row.unwrap();
    assert!(summary.needs_model);
    assert_eq!(open, 2);

    // Closing a call reads the row the same way, after the close: one open call, then none.
    let first = store.pending_tool_calls().unwrap()[0].clone();
    let result = Message::tool_result(&first.call, "done", 1002);
    let (_, after) = store
        .append_result(1002, &result, &first.call.id, "success")
        .unwrap();
    assert_eq!(after, store.thread_and_open_calls().unwrap());
    assert_eq!(after.map(|(_, open)| open), Some(1));
    let second = store.pending_tool_calls().unwrap()[0].clone();
    let result = Message::tool_result(&second.call, "done", 1003);
    let (_, after) = store
        .append_result(1003, &result, &second.call.id, "error")
        .unwrap();
    assert_eq!(after, store.thread_and_open_calls().unwrap());
    assert_eq!(after.map(|(_, open)| open), Some(0));
}
