//! The host side of the SQL seam: rusqlite running the exact statements the Durable Object runs.

use std::cell::RefCell;

use crate::values::limits::SQLITE_MAX_LENGTH;
use crate::values::sql::{Row, Sql, SqlError, SqlValue};
use rusqlite::types::{Value as RValue, ValueRef};

/// An in-memory (or file) SQLite database behind [`Sql`]: the Durable Object's statements on
/// rusqlite. It can record the statements it runs, to count what a step costs.
pub struct Sqlite(pub rusqlite::Connection, RefCell<Option<Vec<String>>>);

impl Sqlite {
    /// A fresh in-memory database. Panics if SQLite cannot open one.
    #[allow(clippy::expect_used)] // a test harness: no database is a failed test
    pub fn memory() -> Self {
        Self::over(rusqlite::Connection::open_in_memory().expect("open sqlite"))
    }

    /// `conn` behind [`Sql`], refusing strings and rows over the Durable Object's limit
    /// ([`SQLITE_MAX_LENGTH`]) as the Durable Object does (`SQLITE_TOOBIG`).
    pub fn over(conn: rusqlite::Connection) -> Self {
        let max = i32::try_from(SQLITE_MAX_LENGTH).unwrap_or(i32::MAX);
        conn.set_limit(rusqlite::limits::Limit::SQLITE_LIMIT_LENGTH, max);
        Sqlite(conn, RefCell::new(None))
    }

    /// Starts recording every statement run from now on (dropping what was recorded).
    pub fn record(&self) {
        *self.1.borrow_mut() = Some(Vec::new());
    }

    /// The statements run since [`Sqlite::record`], and stops recording.
    pub fn recorded(&self) -> Vec<String> {
        self.1.borrow_mut().take().unwrap_or_default()
    }
}

impl Sql for Sqlite {
    fn exec(&self, statement: &str, params: &[SqlValue]) -> Result<Vec<Row>, SqlError> {
        if let Some(log) = self.1.borrow_mut().as_mut() {
            log.push(statement.split_whitespace().collect::<Vec<_>>().join(" "));
        }
        let values: Vec<RValue> = params
            .iter()
            .map(|p| match p {
                SqlValue::Null => RValue::Null,
                SqlValue::Integer(i) => RValue::Integer(*i),
                SqlValue::Real(f) => RValue::Real(*f),
                SqlValue::Text(s) => RValue::Text(s.clone()),
            })
            .collect();
        if !values.is_empty() {
            let mut stmt = self
                .0
                .prepare(statement)
                .map_err(|e| SqlError(e.to_string()))?;
            return rows(&mut stmt, values);
        }
        // Without parameters, a script: every statement in order, the last one's rows (what
        // the Durable Object's `sql.exec` does with one).
        let mut script = rusqlite::Batch::new(&self.0, statement);
        let mut out = Vec::new();
        while let Some(mut stmt) = script.next().map_err(|e| SqlError(e.to_string()))? {
            out = rows(&mut stmt, Vec::new())?;
        }
        Ok(out)
    }
    fn batch(&self, statements: &[(&str, &[SqlValue])]) -> Result<Vec<Vec<Row>>, SqlError> {
        let sql = |s: &str| self.0.execute_batch(s).map_err(|e| SqlError(e.to_string()));
        // A savepoint, like the Durable Object's `transactionSync`: it nests.
        sql("SAVEPOINT edgent_batch")?;
        let mut out = Vec::with_capacity(statements.len());
        for (statement, params) in statements {
            match self.exec(statement, params) {
                Ok(rows) => out.push(rows),
                Err(e) => {
                    sql("ROLLBACK TO edgent_batch; RELEASE edgent_batch")?;
                    return Err(e);
                }
            }
        }
        sql("RELEASE edgent_batch")?;
        Ok(out)
    }
}

/// Every row `stmt` yields with `values` bound in order.
fn rows(stmt: &mut rusqlite::Statement<'_>, values: Vec<RValue>) -> Result<Vec<Row>, SqlError> {
    let n = stmt.column_count();
    let mut rows = stmt
        .query(rusqlite::params_from_iter(values))
        .map_err(|e| SqlError(e.to_string()))?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(|e| SqlError(e.to_string()))? {
        let mut cols = Vec::with_capacity(n);
        for i in 0..n {
            cols.push(match row.get_ref(i).map_err(|e| SqlError(e.to_string()))? {
                ValueRef::Null => SqlValue::Null,
                ValueRef::Integer(v) => SqlValue::Integer(v),
                ValueRef::Real(v) => SqlValue::Real(v),
                ValueRef::Text(t) => SqlValue::Text(String::from_utf8_lossy(t).into_owned()),
                ValueRef::Blob(_) => SqlValue::Null,
            });
        }
        out.push(Row(cols));
    }
    Ok(out)
}
