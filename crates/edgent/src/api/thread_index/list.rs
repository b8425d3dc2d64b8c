//! `GET /api/threads`: query validation, the opaque cursor, the page's SQL and its answer
//! (the index's rows and what changes them are the parent module's).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::{json, Value};

use super::{IndexRow, Statement};
use crate::api::ApiError;
use crate::values::ids::is_uuid;
use crate::values::limits::DEFAULT_PAGE;
use crate::values::page::parse_limit;
use crate::values::sql::SqlValue;

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

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
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
