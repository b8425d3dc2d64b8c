//! The one seam between the core and a SQLite database.
//!
//! The Durable Object implements [`Sql`] over `ctx.storage.sql`; host tests implement it over
//! rusqlite. Both run exactly the statements in [`crate::engine::schema`] and
//! [`crate::engine::store`], always with `?` placeholders and bound values.

use std::fmt;

/// A value bound to a placeholder or read from a column.
#[derive(Debug, Clone, PartialEq)]
pub enum SqlValue {
    /// NULL.
    Null,
    /// INTEGER.
    Integer(i64),
    /// REAL.
    Real(f64),
    /// TEXT.
    Text(String),
}

impl From<i64> for SqlValue {
    fn from(v: i64) -> Self {
        SqlValue::Integer(v)
    }
}
impl From<u32> for SqlValue {
    fn from(v: u32) -> Self {
        SqlValue::Integer(i64::from(v))
    }
}
impl From<bool> for SqlValue {
    fn from(v: bool) -> Self {
        SqlValue::Integer(i64::from(v))
    }
}
impl From<f64> for SqlValue {
    fn from(v: f64) -> Self {
        SqlValue::Real(v)
    }
}
impl From<&str> for SqlValue {
    fn from(v: &str) -> Self {
        SqlValue::Text(v.to_owned())
    }
}
impl From<String> for SqlValue {
    fn from(v: String) -> Self {
        SqlValue::Text(v)
    }
}
impl<T: Into<SqlValue>> From<Option<T>> for SqlValue {
    fn from(v: Option<T>) -> Self {
        v.map_or(SqlValue::Null, Into::into)
    }
}

/// One result row, columns in `SELECT` order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Row(pub Vec<SqlValue>);

impl Row {
    /// Column `i` as an integer (a REAL is truncated; NULL, text or a missing column is an error).
    pub fn int(&self, i: usize) -> Result<i64, SqlError> {
        match self.0.get(i) {
            Some(SqlValue::Integer(v)) => Ok(*v),
            Some(SqlValue::Real(v)) => Ok(*v as i64),
            other => Err(SqlError::column(i, "integer", other)),
        }
    }

    /// Column `i` as an optional integer (NULL → `None`).
    pub fn opt_int(&self, i: usize) -> Result<Option<i64>, SqlError> {
        match self.0.get(i) {
            Some(SqlValue::Null) => Ok(None),
            _ => self.int(i).map(Some),
        }
    }

    /// Column `i` as a float.
    pub fn real(&self, i: usize) -> Result<f64, SqlError> {
        match self.0.get(i) {
            Some(SqlValue::Integer(v)) => Ok(*v as f64),
            Some(SqlValue::Real(v)) => Ok(*v),
            other => Err(SqlError::column(i, "real", other)),
        }
    }

    /// Column `i` as an optional float (NULL → `None`).
    pub fn opt_real(&self, i: usize) -> Result<Option<f64>, SqlError> {
        match self.0.get(i) {
            Some(SqlValue::Null) => Ok(None),
            _ => self.real(i).map(Some),
        }
    }

    /// Column `i` as text.
    pub fn text(&self, i: usize) -> Result<String, SqlError> {
        match self.0.get(i) {
            Some(SqlValue::Text(v)) => Ok(v.clone()),
            other => Err(SqlError::column(i, "text", other)),
        }
    }

    /// Column `i` as optional text (NULL → `None`).
    pub fn opt_text(&self, i: usize) -> Result<Option<String>, SqlError> {
        match self.0.get(i) {
            Some(SqlValue::Null) => Ok(None),
            Some(SqlValue::Text(v)) => Ok(Some(v.clone())),
            other => Err(SqlError::column(i, "text or null", other)),
        }
    }
}

/// A failed statement or an unexpected column type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqlError(pub String);

impl SqlError {
    fn column(i: usize, want: &str, got: Option<&SqlValue>) -> Self {
        SqlError(format!("column {i}: expected {want}, found {got:?}"))
    }
}

impl fmt::Display for SqlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sql: {}", self.0)
    }
}

impl std::error::Error for SqlError {}

/// Runs one statement with positional `?` parameters and returns every row it yields.
///
/// Implementations must be synchronous: Durable Object SQL is, and that is what makes a
/// group of writes inside one event atomic.
pub trait Sql {
    /// Executes `statement` with `params` bound in order. A `statement` without parameters
    /// may be a script, several statements separated by `;` (as the Durable Object's
    /// `sql.exec` allows): they run in order, and the rows are the last one's.
    fn exec(&self, statement: &str, params: &[SqlValue]) -> Result<Vec<Row>, SqlError>;

    /// Executes `statements` in order as one transaction: all of their changes or none (a
    /// statement that fails rolls back the ones before it). The rows of each, in order.
    ///
    /// Writes in one event are not enough for this: a statement that fails part-way through
    /// leaves the ones before it applied.
    fn batch(&self, statements: &[(&str, &[SqlValue])]) -> Result<Vec<Vec<Row>>, SqlError>;
}
