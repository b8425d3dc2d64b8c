//! A D1-like database for host tests: SQLite answering each statement's rows as JSON objects,
//! one transaction per batch (as D1's `batch`), with every batch counted and a switch that
//! makes batches fail (D1 unreachable).

use std::cell::{Cell, RefCell};

use rusqlite::types::{Value as RValue, ValueRef};
use serde_json::{json, Map, Value};

use crate::runtime::ConfigDb;
use crate::tool::BoxFuture;
use crate::values::sql::SqlValue;

/// An in-memory D1 (see the module docs).
pub struct SqliteD1 {
    conn: RefCell<rusqlite::Connection>,
    failing: Cell<bool>,
    /// Batches still to fail before the switch decides again (a D1 that blips).
    fail_next: Cell<u32>,
    batches: Cell<u32>,
    errors: RefCell<Vec<String>>,
}

impl SqliteD1 {
    /// A database with `schema` applied. Panics if SQLite cannot open it (a failed test).
    #[allow(clippy::expect_used)] // a test harness: a broken schema is a failed test
    pub fn with_schema(schema: &[&str]) -> Self {
        let conn = rusqlite::Connection::open_in_memory().expect("open sqlite");
        for statement in schema {
            conn.execute_batch(statement).expect("apply the schema");
        }
        SqliteD1 {
            conn: RefCell::new(conn),
            failing: Cell::new(false),
            fail_next: Cell::new(0),
            batches: Cell::new(0),
            errors: RefCell::default(),
        }
    }

    /// The thread index's database (`migrations/0007_thread_index.sql`).
    pub fn thread_index() -> Self {
        Self::with_schema(crate::api::thread_index::SCHEMA)
    }

    /// From now on every batch fails (`true`) or runs (`false`).
    pub fn fail(&self, failing: bool) {
        self.failing.set(failing);
    }

    /// The next `n` batches fail, then the switch decides again.
    pub fn fail_next(&self, n: u32) {
        self.fail_next.set(n);
    }

    /// Batches asked for so far (failed ones included).
    pub fn batches(&self) -> u32 {
        self.batches.get()
    }

    /// What was logged through [`ConfigDb::log_error`].
    pub fn logged_errors(&self) -> Vec<String> {
        self.errors.borrow().clone()
    }

    /// Runs one statement outside the counters and the switch (for tests to look or set up).
    pub fn query(&self, sql: &str, params: Vec<SqlValue>) -> Result<Vec<Value>, String> {
        let conn = self.conn.borrow();
        run(&conn, sql, params)
    }

    fn run_batch(
        &self,
        statements: Vec<(String, Vec<SqlValue>)>,
    ) -> Result<Vec<Vec<Value>>, String> {
        self.batches.set(self.batches.get() + 1);
        let blip = self.fail_next.get();
        if blip > 0 {
            self.fail_next.set(blip - 1);
        }
        if self.failing.get() || blip > 0 {
            return Err("D1_ERROR: the test made D1 unreachable".into());
        }
        let mut conn = self.conn.borrow_mut();
        let tx = conn.transaction().map_err(|e| e.to_string())?;
        let out = statements
            .into_iter()
            .map(|(sql, params)| run(&tx, &sql, params))
            .collect::<Result<Vec<_>, _>>()?;
        tx.commit().map_err(|e| e.to_string())?;
        Ok(out)
    }
}

fn run(
    conn: &rusqlite::Connection,
    sql: &str,
    params: Vec<SqlValue>,
) -> Result<Vec<Value>, String> {
    let mut stmt = conn.prepare(sql).map_err(|e| e.to_string())?;
    let names: Vec<String> = stmt.column_names().iter().map(|s| s.to_string()).collect();
    let params: Vec<RValue> = params
        .into_iter()
        .map(|p| match p {
            SqlValue::Null => RValue::Null,
            SqlValue::Integer(i) => RValue::Integer(i),
            SqlValue::Real(f) => RValue::Real(f),
            SqlValue::Text(t) => RValue::Text(t),
        })
        .collect();
    let mut rows = stmt
        .query(rusqlite::params_from_iter(params))
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(|e| e.to_string())? {
        let mut obj = Map::new();
        for (i, name) in names.iter().enumerate() {
            let value = match row.get_ref(i).map_err(|e| e.to_string())? {
                ValueRef::Null | ValueRef::Blob(_) => Value::Null,
                ValueRef::Integer(n) => json!(n),
                ValueRef::Real(f) => json!(f),
                ValueRef::Text(t) => Value::String(String::from_utf8_lossy(t).into_owned()),
            };
            obj.insert(name.clone(), value);
        }
        out.push(Value::Object(obj));
    }
    Ok(out)
}

impl ConfigDb for SqliteD1 {
    fn batch(
        &self,
        statements: Vec<(String, Vec<SqlValue>)>,
    ) -> BoxFuture<'static, Result<Vec<Vec<Value>>, String>> {
        let out = self.run_batch(statements);
        Box::pin(async move { out })
    }

    fn log_error(&self, message: &str) {
        self.errors.borrow_mut().push(message.to_owned());
    }
}
