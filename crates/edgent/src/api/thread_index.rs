//! The thread index: one D1 row per thread (agent, status, title, tags, parent, turn count,
//! last error, times), so a deployment can list its threads without waking every Durable
//! Object. The row is a best-effort copy the thread keeps current in the background; the
//! thread's own SQLite stays the truth.
//!
//! This module is the contract and the decisions, with no I/O: the D1 schema
//! (`migrations/0007_thread_index.sql` holds the same statements), what a thread's row is and
//! which of its frames change it ([`IndexRow::note`]), the statements that write and delete a
//! row, and `GET /api/threads` (query validation, the opaque cursor, the page's SQL and its
//! answer). The runtime (`runtime::thread_index`) performs the writes and queries.
//!
//! Threads are listed newest first by `created_at` (then `thread_id`): a key that never
//! changes, so paging with a cursor neither skips nor repeats a thread that is updated
//! meanwhile (ordering by `updated_at` would move it between pages).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde::Serialize;
use serde_json::{json, Value};

use super::ApiError;
use crate::engine::store::ThreadSummary;
use crate::values::ids::is_uuid;
use crate::values::limits::DEFAULT_PAGE;
use crate::values::message::Role;
use crate::values::page::parse_limit;
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

/// Where a page starts: after the thread with this creation time and id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    /// The last listed thread's `created_at`.
    pub created_at: i64,
    /// Its id (threads created in the same millisecond are ordered by it).
    pub thread_id: String,
}

impl Cursor {
    /// The opaque text clients send back: base64url (no padding) of `<created_at>.<id>`.
    pub fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(format!("{}.{}", self.created_at, self.thread_id))
    }

    /// Reads a cursor this API gave; anything else is a 400.
    pub fn decode(text: &str) -> Result<Self, ApiError> {
        let bad = || ApiError::invalid("\"cursor\" is not a cursor from a previous page");
        let bytes = URL_SAFE_NO_PAD.decode(text).map_err(|_| bad())?;
        let text = String::from_utf8(bytes).map_err(|_| bad())?;
        let (created_at, thread_id) = text.split_once('.').ok_or_else(bad)?;
        let created_at = created_at.parse::<i64>().map_err(|_| bad())?;
        let plain = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
        if created_at < 0
            || thread_id.is_empty()
            || thread_id.len() > 64
            || !thread_id.chars().all(plain)
        {
            return Err(bad());
        }
        Ok(Cursor {
            created_at,
            thread_id: thread_id.to_owned(),
        })
    }
}

/// `GET /api/threads?agent=&status=&tag=&parent=&limit=&cursor=`, validated.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ListQuery {
    /// Only threads of this agent.
    pub agent: Option<String>,
    /// Only threads in this status.
    pub status: Option<String>,
    /// Only threads with this tag.
    pub tag: Option<String>,
    /// Only child threads of this thread.
    pub parent: Option<String>,
    /// 1..=[`MAX_PAGE`].
    pub limit: u32,
    /// Continue after this thread.
    pub cursor: Option<Cursor>,
}

impl ListQuery {
    /// Validates query pairs; unknown keys are ignored and a repeated key's last value wins
    /// (as for the other listings).
    pub fn parse(pairs: &[(String, String)]) -> Result<Self, ApiError> {
        let mut q = ListQuery {
            limit: DEFAULT_PAGE,
            ..ListQuery::default()
        };
        for (key, value) in pairs {
            match key.as_str() {
                "agent" if value.is_empty() || value.len() > 128 => {
                    return Err(ApiError::invalid(
                        "\"agent\" must be a non-empty string (max 128 bytes)",
                    ))
                }
                "agent" => q.agent = Some(value.clone()),
                "status" => match value.as_str() {
                    "idle" | "running" | "stopped" => q.status = Some(value.clone()),
                    _ => {
                        return Err(ApiError::invalid(
                            "\"status\" must be \"idle\", \"running\" or \"stopped\"",
                        ))
                    }
                },
                "tag" if value.len() > 64 => {
                    return Err(ApiError::invalid("\"tag\" must be at most 64 bytes"))
                }
                "tag" => q.tag = Some(value.clone()),
                "parent" if !is_uuid(value) => {
                    return Err(ApiError::invalid("\"parent\" must be a thread id"))
                }
                "parent" => q.parent = Some(value.clone()),
                "limit" => q.limit = parse_limit(value)?,
                "cursor" => q.cursor = Some(Cursor::decode(value)?),
                _ => {}
            }
        }
        Ok(q)
    }

    /// The page's statement: one more row than the limit, so the answer knows whether another
    /// page follows. Every filter and the order run on an index (see [`SCHEMA`]); with a tag
    /// the walk starts from `thread_tags`.
    pub fn statement(&self) -> Statement {
        const COLUMNS: &str = "i.thread_id, i.agent_id, i.status, i.title, i.tags, i.parent,
            i.turn_count, i.last_error, i.created_at, i.updated_at";
        let (from, key) = match self.tag {
            Some(_) => (
                "thread_tags t JOIN thread_index i ON i.thread_id = t.thread_id",
                "t",
            ),
            None => ("thread_index i", "i"),
        };
        let mut conditions = Vec::new();
        let mut params: Vec<SqlValue> = Vec::new();
        let filters = [
            ("t.tag", &self.tag),
            ("i.agent_id", &self.agent),
            ("i.status", &self.status),
            ("i.parent", &self.parent),
        ];
        for (column, value) in filters {
            if let Some(value) = value {
                conditions.push(format!("{column} = ?"));
                params.push(value.as_str().into());
            }
        }
        if let Some(cursor) = &self.cursor {
            conditions.push(format!("({key}.created_at, {key}.thread_id) < (?, ?)"));
            params.push(cursor.created_at.into());
            params.push(cursor.thread_id.as_str().into());
        }
        let filter = if conditions.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", conditions.join(" AND "))
        };
        params.push(i64::from(self.limit).saturating_add(1).into());
        (
            format!(
                "SELECT {COLUMNS} FROM {from}{filter}
                 ORDER BY {key}.created_at DESC, {key}.thread_id DESC LIMIT ?"
            ),
            params,
        )
    }

    /// The answer for the rows `statement` returned: `{"threads": [...], "next_cursor"}`. A
    /// row that cannot be read is an error (the index holds only rows the framework wrote).
    pub fn answer(&self, rows: &[Value]) -> Result<Value, String> {
        let limit = usize::try_from(self.limit).unwrap_or(usize::MAX);
        let threads = rows
            .iter()
            .take(limit)
            .map(row_from_d1)
            .collect::<Result<Vec<_>, _>>()?;
        let next_cursor = match threads.last() {
            Some(last) if rows.len() > limit => Some(
                Cursor {
                    created_at: last.created_at,
                    thread_id: last.thread_id.clone(),
                }
                .encode(),
            ),
            _ => None,
        };
        Ok(json!({ "threads": threads, "next_cursor": next_cursor }))
    }
}

/// A row as D1 answers it (a JSON object per row; numbers may come as floats).
fn row_from_d1(row: &Value) -> Result<IndexRow, String> {
    let text = |k: &str| row.get(k).and_then(Value::as_str).map(str::to_owned);
    let int = |k: &str| {
        let v = row.get(k)?;
        v.as_i64().or_else(|| v.as_f64().map(|f| f as i64))
    };
    let bad = |k: &str| format!("thread index row without a valid {k:?}: {row}");
    let tags = text("tags")
        .and_then(|t| serde_json::from_str::<Vec<String>>(&t).ok())
        .ok_or_else(|| bad("tags"))?;
    Ok(IndexRow {
        thread_id: text("thread_id").ok_or_else(|| bad("thread_id"))?,
        agent_id: text("agent_id").ok_or_else(|| bad("agent_id"))?,
        status: text("status").ok_or_else(|| bad("status"))?,
        title: text("title"),
        tags,
        parent: text("parent"),
        turn_count: int("turn_count").ok_or_else(|| bad("turn_count"))?,
        last_error: text("last_error"),
        created_at: int("created_at").ok_or_else(|| bad("created_at"))?,
        updated_at: int("updated_at").ok_or_else(|| bad("updated_at"))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::message::Message;

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

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

    #[test]
    fn a_cursor_round_trips_and_anything_else_is_a_400() {
        let cursor = Cursor {
            created_at: 1_767_225_600_000,
            thread_id: "0b8f3c1e-6a2d-4f4b-9c1e-2d7a5e8f9b30".into(),
        };
        let text = cursor.encode();
        assert!(text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        assert_eq!(Cursor::decode(&text).unwrap(), cursor);
        let b64 = |s: &str| URL_SAFE_NO_PAD.encode(s);
        for bad in [
            String::new(),
            "not base64!".into(),
            format!("{text}="),
            b64("no-dot"),
            b64("x.t1"),
            b64("-5.t1"),
            b64("12."),
            b64("12.a'b"),
            b64(&format!("12.{}", "a".repeat(65))),
            URL_SAFE_NO_PAD.encode([0xff, 0xfe, b'.', b'a']),
        ] {
            let e = Cursor::decode(&bad).unwrap_err();
            assert_eq!((e.status, e.code), (400, "invalid_request"), "{bad:?}");
        }
    }

    #[test]
    fn the_query_is_validated_with_precise_messages() {
        let q = ListQuery::parse(&[]).unwrap();
        assert_eq!((q.limit, q.cursor.is_none()), (DEFAULT_PAGE, true));
        let parent = "0b8f3c1e-6a2d-4f4b-9c1e-2d7a5e8f9b30";
        let q = ListQuery::parse(&pairs(&[
            ("agent", "support"),
            ("status", "running"),
            ("tag", "vip"),
            ("parent", parent),
            ("limit", "200"),
            ("unknown", "ignored"),
        ]))
        .unwrap();
        assert_eq!(q.agent.as_deref(), Some("support"));
        assert_eq!(q.status.as_deref(), Some("running"));
        assert_eq!((q.tag.as_deref(), q.limit), (Some("vip"), 200));
        assert_eq!(q.parent.as_deref(), Some(parent));
        let long_agent = "a".repeat(129);
        let long_tag = "t".repeat(65);
        for (key, value, message) in [
            ("limit", "0", "\"limit\" must be an integer from 1 to 200"),
            ("limit", "201", "\"limit\" must be an integer from 1 to 200"),
            ("limit", "ten", "\"limit\" must be an integer from 1 to 200"),
            (
                "status",
                "done",
                "\"status\" must be \"idle\", \"running\" or \"stopped\"",
            ),
            (
                "agent",
                "",
                "\"agent\" must be a non-empty string (max 128 bytes)",
            ),
            (
                "agent",
                &long_agent,
                "\"agent\" must be a non-empty string (max 128 bytes)",
            ),
            ("tag", &long_tag, "\"tag\" must be at most 64 bytes"),
            ("parent", "thread-1", "\"parent\" must be a thread id"),
            (
                "cursor",
                "%%%",
                "\"cursor\" is not a cursor from a previous page",
            ),
        ] {
            let e = ListQuery::parse(&pairs(&[(key, value)])).unwrap_err();
            assert_eq!(
                (e.status, e.message.as_str()),
                (400, message),
                "{key}={value}"
            );
        }
    }

    #[test]
    fn the_statement_binds_every_filter_and_asks_one_row_more_than_the_page() {
        let q = ListQuery::parse(&pairs(&[("agent", "a'; DROP TABLE x"), ("limit", "3")])).unwrap();
        let (sql, params) = q.statement();
        assert!(!sql.contains("DROP"), "values are parameters: {sql}");
        assert_eq!(sql.matches('?').count(), params.len());
        assert_eq!(params.last(), Some(&SqlValue::Integer(4)));
        let rows: Vec<Value> = (0..4)
            .map(|i| {
                json!({"thread_id": format!("t{i}"), "agent_id": "a", "status": "idle",
                       "title": null, "tags": "[\"x\"]", "parent": null, "turn_count": 1.0,
                       "last_error": null, "created_at": 100.0 - f64::from(i), "updated_at": 100})
            })
            .collect();
        let page = q.answer(&rows).unwrap();
        assert_eq!(page["threads"].as_array().unwrap().len(), 3);
        assert_eq!(page["threads"][0]["tags"], json!(["x"]));
        assert_eq!(
            page["threads"][0]["turn_count"],
            json!(1),
            "D1's floats come back as integers"
        );
        let next = Cursor::decode(page["next_cursor"].as_str().unwrap()).unwrap();
        assert_eq!((next.created_at, next.thread_id.as_str()), (98, "t2"));
        let last = q.answer(&rows[..3]).unwrap();
        assert_eq!(last["next_cursor"], Value::Null);
        assert!(q.answer(&[json!({"thread_id": "t"})]).is_err());
    }
}
