//! The D1 migrations keep a configuration version stamp (migrations/0005_config_version.sql):
//! every change to models, prompts or agents moves it, which is what lets a Worker reuse a
//! resolved configuration and reload only when it moved (`edgent::config::cache`). Run on
//! real SQLite with the migration files themselves.

use rusqlite::Connection;

fn migrated() -> Connection {
    let db = Connection::open_in_memory().unwrap();
    let mut files: Vec<_> = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for file in files {
        db.execute_batch(&std::fs::read_to_string(&file).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    }
    db
}

fn version(db: &Connection) -> i64 {
    db.query_row(edgent::config::cache::VERSION_SQL, [], |r| r.get(0))
        .unwrap()
}

#[test]
fn every_change_to_the_configuration_moves_the_version() {
    let db = migrated();
    let mut last = version(&db);
    let mut moved = |db: &Connection, sql: &str| {
        db.execute_batch(sql).unwrap();
        let now = version(db);
        assert!(
            now > last,
            "{sql} did not move the version ({last} -> {now})"
        );
        last = now;
    };
    moved(
        &db,
        "INSERT INTO models (name, model, base_url) VALUES ('m', 'gpt', 'https://x')",
    );
    moved(&db, "INSERT INTO prompts (name, model) VALUES ('p', 'm')");
    moved(
        &db,
        r#"INSERT INTO agents (id, side_a) VALUES ('a', '{"prompt":"p"}')"#,
    );
    moved(&db, "UPDATE models SET model = 'gpt-2' WHERE name = 'm'");
    moved(
        &db,
        "UPDATE prompts SET system = 'Be brief.' WHERE name = 'p'",
    );
    moved(&db, "UPDATE agents SET max_turns = 3 WHERE id = 'a'");
    moved(&db, "DELETE FROM agents WHERE id = 'a'");
    moved(&db, "DELETE FROM prompts WHERE name = 'p'");
    moved(&db, "DELETE FROM models WHERE name = 'm'");
}

#[test]
fn other_tables_leave_the_version_alone() {
    let db = migrated();
    let before = version(&db);
    db.execute_batch("SELECT * FROM customers LIMIT 1").unwrap();
    db.execute_batch("UPDATE customers SET plan = plan")
        .unwrap();
    assert_eq!(version(&db), before);
    // One row, always.
    let err = db.execute_batch("INSERT INTO config_version (id, version) VALUES (2, 0)");
    assert!(err.is_err(), "a second version row was accepted");
}
