//! Feature tables (`engine::schema::Feature`): a new thread has only the tables every thread
//! uses; each feature's tables appear with the thread's first write that needs them, and
//! until then every read, update and delete of them finds nothing, as in an empty table.

use edgent::engine::schema::{feature_exec, migrate, Feature};
use edgent::engine::store::Store;
use edgent::values::sql::Sql;
use edgent::values::{CallToolResult, StepStatus, WebhookStatus};
use serde_json::json;

use crate::sqlite::Sqlite;

const FEATURE_TABLES: [&str; 8] = [
    "context",
    "child_threads",
    "tool_steps",
    "webhooks",
    "tool_cache",
    "schedules",
    "mcp_servers",
    "summaries",
];

fn tables(db: &Sqlite) -> Vec<String> {
    db.exec(
        "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name",
        &[],
    )
    .unwrap()
    .iter()
    .map(|r| r.text(0).unwrap())
    .collect()
}

fn new_thread() -> Sqlite {
    let db = Sqlite::memory();
    migrate(&db).unwrap();
    db
}

#[test]
fn a_new_thread_has_none_of_the_feature_tables() {
    let db = new_thread();
    let have = tables(&db);
    for t in [
        "thread",
        "messages",
        "tool_calls",
        "tool_attempts",
        "frame_log",
        "model_requests",
    ] {
        assert!(have.contains(&t.to_owned()), "{t} missing from {have:?}");
    }
    for t in FEATURE_TABLES {
        assert!(
            !have.contains(&t.to_owned()),
            "{t} created with a new thread"
        );
    }
}

#[test]
fn every_feature_reads_as_empty_until_its_first_write() {
    let db = new_thread();
    let store = Store::new(&db);
    assert_eq!(store.context_get("k").unwrap(), None);
    assert!(store.context_all().unwrap().is_empty());
    store.context_remove("k").unwrap();
    assert_eq!(store.latest_summary().unwrap(), None);
    assert!(store.step("c1", "s").unwrap().is_none());
    assert!(store.steps("c1").unwrap().is_empty());
    assert!(!store.call_has_records("c1").unwrap());
    store
        .end_step("c1", "s", StepStatus::Done, None, 5)
        .unwrap();
    assert!(store.webhook_for("c1", "w").unwrap().is_none());
    assert!(store.webhook_by_token("tok").unwrap().is_none());
    assert!(!store.receive_webhook("tok", "{}", 5).unwrap());
    store.end_webhook("tok", WebhookStatus::Closed).unwrap();
    store.set_webhook_deadline("tok", 9).unwrap();
    assert!(store.cached_result("t", "{}", 0).unwrap().is_none());
    assert!(store.schedules(false).unwrap().is_empty());
    assert!(store.schedules(true).unwrap().is_empty());
    assert_eq!(store.active_schedules().unwrap(), 0);
    assert!(store.due_schedules(i64::MAX, 10).unwrap().is_empty());
    assert!(store.schedule("s1").unwrap().is_none());
    assert_eq!(store.schedule_status("s1").unwrap(), None);
    assert!(store.cancel_schedule(5, "s1").unwrap().is_none());
    assert!(store
        .mcp_server("m", "https://mcp.example")
        .unwrap()
        .is_none());
    assert!(store.mcp_servers().unwrap().is_empty());
    store.forget_mcp_session("m").unwrap();
    store.set_mcp_tools("m", &json!([]), 5).unwrap();
    store.mcp_tools_changed("m").unwrap();
    let have = tables(&db);
    for t in FEATURE_TABLES {
        assert!(!have.contains(&t.to_owned()), "a read created {t}");
    }
}

#[test]
fn a_first_write_creates_its_feature_and_no_other() {
    let db = new_thread();
    let store = Store::new(&db);
    store.context_set(5, "plan", &json!({"step": 1})).unwrap();
    assert_eq!(store.context_get("plan").unwrap(), Some(json!({"step": 1})));
    let have = tables(&db);
    assert!(have.contains(&"context".to_owned()));
    for t in FEATURE_TABLES.iter().filter(|t| **t != "context") {
        assert!(
            !have.contains(&t.to_string()),
            "writing context created {t}"
        );
    }
    // A durable step creates the steps and the webhooks (read together), with the race trigger.
    store.create_webhook("c1", "approval", "tok", 5).unwrap();
    assert!(store.webhook_by_token("tok").unwrap().is_some());
    assert!(store.call_has_records("c1").unwrap());
    let have = tables(&db);
    assert!(have.contains(&"tool_steps".to_owned()) && have.contains(&"webhooks".to_owned()));
    let race = db
        .exec("SELECT COUNT(*) FROM sqlite_master WHERE type = 'trigger' AND name = 'webhook_race_won'", &[])
        .unwrap();
    assert_eq!(race[0].int(0).unwrap(), 1);
    // The rest, each by its own first write.
    assert_eq!(store.child_thread(5, "c2", "child-1").unwrap(), "child-1");
    assert_eq!(
        store.child_thread(6, "c2", "child-2").unwrap(),
        "child-1",
        "recorded once"
    );
    let result = CallToolResult::text("12:00");
    store.cache_result("t", "{}", &result, 5).unwrap();
    assert_eq!(store.cached_result("t", "{}", 0).unwrap(), Some(result));
    store
        .set_mcp_session("m", "https://mcp.example", Some("s-1"), "2025-06-18")
        .unwrap();
    assert_eq!(store.mcp_servers().unwrap().len(), 1);
    for t in ["child_threads", "tool_cache", "mcp_servers"] {
        assert!(
            tables(&db).contains(&t.to_owned()),
            "{t} not created by its write"
        );
    }
}

#[test]
fn a_feature_script_completes_what_is_missing_and_leaves_the_rest() {
    let db = new_thread();
    // Half of the schedules feature (the table alone, say from an interrupted attempt).
    db.exec(Feature::Schedules.statements()[0], &[]).unwrap();
    db.exec(&Feature::Schedules.script(), &[]).unwrap();
    db.exec(&Feature::Schedules.script(), &[]).unwrap();
    let objects = db
        .exec(
            "SELECT COUNT(*) FROM sqlite_master WHERE tbl_name = 'schedules'",
            &[],
        )
        .unwrap();
    // The table, its primary key's automatic index, its index and its three triggers.
    assert_eq!(objects[0].int(0).unwrap(), 6);
}

#[test]
fn only_a_missing_table_reads_as_empty() {
    let db = new_thread();
    assert!(feature_exec(&db, "SELECT * FROM schedules", &[])
        .unwrap()
        .is_empty());
    let err = feature_exec(&db, "SELEC * FROM schedules", &[]).unwrap_err();
    assert!(err.0.contains("syntax error"), "{err:?}");
    let err = feature_exec(&db, "SELECT nope FROM thread", &[]).unwrap_err();
    assert!(err.0.contains("no such column"), "{err:?}");
}
