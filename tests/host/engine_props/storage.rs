//! Storage that can crash: the host's SQLite behind the `Sql` seam, where every statement from
//! the n-th on fails, as if the process died there.

use super::*;

use edgent::values::sql::{Row, Sql, SqlError, SqlValue};

/// The thread object's storage: the host's SQLite, where a crash can be set to happen at the
/// n-th statement from now. That statement and every later one fail until the object
/// restarts, as if the process died there (a batch is one statement: it is atomic).
pub(super) struct Storage {
    pub(super) host: Rc<TestHost>,
    /// Set by a tool that kills the Worker: the next statement is the crash.
    pub(super) kills: Rc<Cell<bool>>,
    pub(super) crash_in: Cell<Option<u32>>,
    pub(super) crashed: Cell<bool>,
    /// Crashes `crash_in` caused.
    pub(super) hits: Cell<u32>,
    /// Statements SQLite refused as too big outside a batch: each is a limit breached without
    /// a clear error.
    pub(super) too_big: RefCell<Vec<String>>,
}

impl Storage {
    fn tick(&self) -> Result<(), SqlError> {
        if self.kills.replace(false) {
            self.crashed.set(true);
        }
        if self.crashed.get() {
            return Err(SqlError("the object crashed".into()));
        }
        match self.crash_in.get() {
            Some(0) => {
                self.hits.set(self.hits.get() + 1);
                self.crashed.set(true);
                self.crash_in.set(None);
                Err(SqlError("the object crashed".into()))
            }
            Some(n) => {
                self.crash_in.set(Some(n - 1));
                Ok(())
            }
            None => Ok(()),
        }
    }

    pub(super) fn faulting(&self) -> bool {
        self.crashed.get() || self.crash_in.get().is_some()
    }
}

impl Sql for Storage {
    fn exec(&self, statement: &str, params: &[SqlValue]) -> Result<Vec<Row>, SqlError> {
        self.tick()?;
        let out = self.host.db.exec(statement, params);
        if let Err(e) = &out {
            if e.0.to_ascii_lowercase().contains("too big") {
                let words: Vec<&str> = statement.split_whitespace().take(8).collect();
                self.too_big.borrow_mut().push(words.join(" "));
            }
        }
        out
    }

    fn batch(&self, statements: &[(&str, &[SqlValue])]) -> Result<Vec<Vec<Row>>, SqlError> {
        self.tick()?;
        let out = self.host.db.batch(statements);
        // `store_reply` turns a reply too big as stored into a failed model call (documented).
        let reply = statements
            .first()
            .is_some_and(|(s, _)| s.starts_with("UPDATE messages SET content"));
        if let Err(e) = &out {
            if !reply && e.0.to_ascii_lowercase().contains("too big") {
                let words: Vec<&str> = statements
                    .iter()
                    .flat_map(|(s, _)| s.split_whitespace().take(4))
                    .collect();
                self.too_big.borrow_mut().push(words.join(" "));
            }
        }
        out
    }
}
