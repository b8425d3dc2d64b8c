//! [`Sql`] over the Durable Object's `ctx.storage.sql`.

use worker::{SqlStorage, SqlStorageValue};

use edgent::values::sql::{Row, Sql, SqlError, SqlValue};

/// The thread's SQLite as the core sees it.
pub(crate) struct DoSql(pub(crate) SqlStorage);

impl Sql for DoSql {
    fn exec(&self, statement: &str, params: &[SqlValue]) -> Result<Vec<Row>, SqlError> {
        let bindings = params
            .iter()
            .map(|p| match p {
                SqlValue::Null => SqlStorageValue::Null,
                SqlValue::Integer(i) => SqlStorageValue::Integer(*i),
                SqlValue::Real(f) => SqlStorageValue::Float(*f),
                SqlValue::Text(s) => SqlStorageValue::String(s.clone()),
            })
            .collect::<Vec<_>>();
        let cursor = self
            .0
            .exec(statement, bindings)
            .map_err(|e| SqlError(e.to_string()))?;
        cursor
            .raw()
            .map(|row| {
                let row = row.map_err(|e| SqlError(e.to_string()))?;
                Ok(Row(row
                    .into_iter()
                    .map(|v| match v {
                        SqlStorageValue::Null | SqlStorageValue::Blob(_) => SqlValue::Null,
                        SqlStorageValue::Boolean(b) => SqlValue::Integer(i64::from(b)),
                        SqlStorageValue::Integer(i) => SqlValue::Integer(i),
                        SqlStorageValue::Float(f) => SqlValue::Real(f),
                        SqlStorageValue::String(s) => SqlValue::Text(s),
                    })
                    .collect()))
            })
            .collect()
    }
}
