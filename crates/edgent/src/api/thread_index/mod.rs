//! The thread index: one D1 row per thread (agent, status, title, tags, parent, turn count,
//! last error, times), so a deployment can list its threads without waking every Durable
//! Object. The row is a best-effort copy the thread keeps current in the background; the
//! thread's own SQLite stays the truth.
//!
//! This module is the contract and the decisions, with no I/O: the D1 schema
//! (`migrations/0007_thread_index.sql` holds the same statements), what a thread's row is and
//! which of its frames change it ([`IndexRow::note`]), the statements that write and delete a
//! row, and `GET /api/threads` (`list`: query validation, the opaque cursor, the page's SQL
//! and its answer). The runtime (`runtime::thread_index`) performs the writes and queries.
//!
//! Threads are listed newest first by `created_at` (then `thread_id`): a key that never
//! changes, so paging with a cursor neither skips nor repeats a thread that is updated
//! meanwhile (ordering by `updated_at` would move it between pages).

mod list;

pub use list::{Cursor, ListQuery};

use serde::Serialize;

use crate::engine::store::ThreadSummary;
use crate::values::message::Role;
use crate::values::protocol::{error_ends_turn, ServerFrame};
use crate::values::sql::SqlValue;

/// The D1 schema of the index, statement by statement (what migration 0007 runs; a host test
/// keeps the two equal). `thread_tags` is a side table so a tag filter walks an index in the
/// listing's order instead of scanning JSON.
pub const SCHEMA: &[&str] = &[
    "CREATE TABLE thread_index (
    thread_id TEXT PRIMARY KEY,
    agent_id TEXT NOT NULL,
    status TEXT NOT NULL,
    title TEXT,
    tags TEXT NOT NULL DEFAULT '[]',
    parent TEXT,
    turn_count INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
)",
    "CREATE INDEX thread_index_newest ON thread_index (created_at, thread_id)",
    "CREATE INDEX thread_index_by_agent ON thread_index (agent_id, created_at, thread_id)",
    "CREATE INDEX thread_index_by_status ON thread_index (status, created_at, thread_id)",
    "CREATE INDEX thread_index_by_parent ON thread_index (parent, created_at, thread_id)",
    "CREATE TABLE thread_tags (
    tag TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    thread_id TEXT NOT NULL,
    PRIMARY KEY (tag, created_at, thread_id)
) WITHOUT ROWID",
    "CREATE INDEX thread_tags_by_thread ON thread_tags (thread_id)",
];

/// The longest title, in characters (the first user message is cut there).
pub const TITLE_CHARS: usize = 80;

/// A D1 statement: SQL and its parameters.
pub type Statement = (String, Vec<SqlValue>);

/// The title of a thread whose first user message is `content`: its words on one line (runs
/// of whitespace become one space), cut to [`TITLE_CHARS`] characters on a character
/// boundary.
pub fn title_of(content: &str) -> String {
    let one_line = content.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.char_indices().nth(TITLE_CHARS) {
        Some((cut, _)) => one_line[..cut].to_owned(),
        None => one_line,
    }
}

/// One thread's row in the index, as listed by `GET /api/threads`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct IndexRow {
    /// The thread.
    pub thread_id: String,
    /// The agent that runs it now (a handoff changes it).
    pub agent_id: String,
    /// `idle`, `running` or `stopped`.
    pub status: String,
    /// The first user message, cut (see [`title_of`]); `None` until there is one.
    pub title: Option<String>,
    /// The tags given at creation.
    pub tags: Vec<String>,
    /// The thread that created this one (a child thread), if any.
    pub parent: Option<String>,
    /// Completed turns.
    pub turn_count: i64,
    /// The error of the last failed turn, as the thread's summary shows it.
    pub last_error: Option<String>,
    /// Creation time, ms since the epoch.
    pub created_at: i64,
    /// When the index last saw a change, ms since the epoch.
    pub updated_at: i64,
}

/// What a frame did to a row (see [`IndexRow::note`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Noted {
    /// A field changed: the row is owed a write.
    pub changed: bool,
    /// The frame says something the row cannot follow from frames alone (a failed turn's
    /// error): read the thread's summary again before the next write.
    pub resync: bool,
}

impl IndexRow {
    /// The row of a thread as its summary and its first user message's `title` show it.
    pub fn from_summary(summary: &ThreadSummary, title: Option<String>) -> Self {
        IndexRow {
            thread_id: summary.thread_id.clone(),
            agent_id: summary.agent_id.clone(),
            status: summary.status.as_str().to_owned(),
            title,
            tags: summary.tags.clone(),
            parent: summary.parent_thread_id.clone(),
            turn_count: summary.turn_count,
            last_error: summary.last_error.clone(),
            created_at: summary.created_at,
            updated_at: summary.updated_at,
        }
    }

    /// Follows one frame the thread broadcast at `now`: a `status` frame carries the status
    /// and turn count (a turn that starts clears the last error, as the thread does); the
    /// first top-level user `message` gives the title; an `error` frame that ends a turn
    /// (anything but a `model_retry` notice) asks for a resync, since only the thread knows
    /// whether it became the last error. Other frames change nothing.
    pub fn note(&mut self, frame: &ServerFrame, now: i64) -> Noted {
        let changed = match frame {
            ServerFrame::Status { state, turn, .. } => {
                let clears_error = state == "running" && self.last_error.is_some();
                let moved = *state != self.status || *turn != self.turn_count;
                if moved || clears_error {
                    self.status.clone_from(state);
                    self.turn_count = *turn;
                    if state == "running" {
                        self.last_error = None;
                    }
                }
                moved || clears_error
            }
            ServerFrame::Message { message }
                if self.title.is_none()
                    && message.role == Role::User
                    && message.depth == 0
                    && !message.silent =>
            {
                self.title = Some(title_of(&message.content));
                true
            }
            ServerFrame::Error { code, .. } if error_ends_turn(code) => {
                return Noted {
                    changed: true,
                    resync: true,
                }
            }
            _ => false,
        };
        if changed {
            self.updated_at = self.updated_at.max(now);
        }
        Noted {
            changed,
            resync: false,
        }
    }

    /// The statements that write this row (one D1 batch). A write never moves a row back to an
    /// older state (`updated_at` only grows), and the tags, set once at creation, are written
    /// without duplicates however often the row is.
    pub fn upsert(&self) -> Vec<Statement> {
        let tags = serde_json::to_string(&self.tags).unwrap_or_else(|_| "[]".into());
        let mut statements = vec![(
            "INSERT INTO thread_index (thread_id, agent_id, status, title, tags, parent,
                turn_count, last_error, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
             ON CONFLICT (thread_id) DO UPDATE SET agent_id = excluded.agent_id,
                status = excluded.status, title = excluded.title,
                turn_count = excluded.turn_count, last_error = excluded.last_error,
                updated_at = excluded.updated_at
             WHERE excluded.updated_at >= thread_index.updated_at"
                .to_owned(),
            vec![
                self.thread_id.as_str().into(),
                self.agent_id.as_str().into(),
                self.status.as_str().into(),
                self.title.as_deref().into(),
                tags.as_str().into(),
                self.parent.as_deref().into(),
                self.turn_count.into(),
                self.last_error.as_deref().into(),
                self.created_at.into(),
                self.updated_at.into(),
            ],
        )];
        if !self.tags.is_empty() {
            statements.push((
                "INSERT OR IGNORE INTO thread_tags (tag, created_at, thread_id)
                 SELECT DISTINCT value, ?1, ?2 FROM json_each(?3)"
                    .to_owned(),
                vec![
                    self.created_at.into(),
                    self.thread_id.as_str().into(),
                    tags.into(),
                ],
            ));
        }
        statements
    }
}

/// The statements that remove a thread from the index (one D1 batch).
pub fn delete_row(thread_id: &str) -> Vec<Statement> {
    ["thread_tags", "thread_index"]
        .iter()
        .map(|table| {
            (
                format!("DELETE FROM {table} WHERE thread_id = ?"),
                vec![thread_id.into()],
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::message::Message;

    fn row() -> IndexRow {
        IndexRow {
            thread_id: "t1".into(),
            agent_id: "support".into(),
            status: "idle".into(),
            created_at: 10,
            updated_at: 10,
            ..IndexRow::default()
        }
    }

    #[test]
    fn a_title_is_one_line_of_at_most_80_characters_cut_on_a_char_boundary() {
        assert_eq!(title_of("  Hello,\n\tworld  "), "Hello, world");
        let accents = "é".repeat(100);
        let title = title_of(&accents);
        assert_eq!(title.chars().count(), TITLE_CHARS);
        assert_eq!(
            title.len(),
            2 * TITLE_CHARS,
            "cut between characters, not bytes"
        );
        let exact = "x".repeat(TITLE_CHARS);
        assert_eq!(title_of(&exact), exact);
        assert_eq!(title_of("🦀".repeat(81).as_str()).chars().count(), 80);
    }

    #[test]
    fn frames_move_the_row_only_when_what_it_shows_changes() {
        let mut r = row();
        let status = |state: &str, turn| ServerFrame::Status {
            state: state.into(),
            turn,
            side: "a".into(),
        };
        assert_eq!(r.note(&status("idle", 0), 20), Noted::default());
        assert_eq!(r.updated_at, 10, "nothing changed, nothing moved");
        assert!(r.note(&status("running", 0), 20).changed);
        assert_eq!((r.status.as_str(), r.updated_at), ("running", 20));
        assert!(r.note(&status("idle", 1), 30).changed);
        assert_eq!((r.status.as_str(), r.turn_count), ("idle", 1));

        let user = |text: &str| ServerFrame::Message {
            message: Message::new(Role::User, text, 0),
        };
        assert!(r.note(&user("First question"), 40).changed);
        assert!(!r.note(&user("Second"), 50).changed, "only the first");
        assert_eq!(r.title.as_deref(), Some("First question"));
        let reply = ServerFrame::Message {
            message: Message::new(Role::Assistant, "An answer", 0),
        };
        assert!(!r.note(&reply, 60).changed);

        let retry = ServerFrame::error("model_retry", "trying again", None);
        assert_eq!(r.note(&retry, 70), Noted::default());
        let failed = ServerFrame::error("model_http", "model server answered 500", None);
        assert_eq!(
            r.note(&failed, 70),
            Noted {
                changed: true,
                resync: true
            }
        );
        r.last_error = Some("boom".into());
        assert!(
            r.note(&status("running", 1), 80).changed,
            "a new turn clears it"
        );
        assert_eq!(r.last_error, None);
        assert!(!r.note(&ServerFrame::Pong, 90).changed);
    }
}
