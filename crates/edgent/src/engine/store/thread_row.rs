//! The thread row: status, turn and step counters, side, agent, hooks, ending.

use super::*;

impl Store<'_> {
    /// Inserts the thread row. Errors if the thread already exists.
    pub fn create_thread(
        &self,
        now: i64,
        thread_id: &str,
        agent_id: &str,
        tags: &[String],
    ) -> Result<(), SqlError> {
        let tags = serde_json::to_string(tags).map_err(|e| SqlError(e.to_string()))?;
        self.sql.exec(
            "INSERT INTO thread (id, agent_id, tags, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
            &[thread_id.into(), agent_id.into(), tags.into(), now.into(), now.into()],
        )?;
        Ok(())
    }

    /// The thread row, or `None` if this object never had a thread created in it.
    pub fn thread(&self) -> Result<Option<ThreadSummary>, SqlError> {
        let rows = self
            .sql
            .exec(&format!("SELECT {THREAD_COLUMNS} FROM thread LIMIT 1"), &[])?;
        rows.first().map(summary_from_row).transpose()
    }

    /// [`Store::thread`] and the number of tool calls without a result, in one statement
    /// (the count runs on the status index): a step that sees none reads no calls.
    pub fn thread_and_open_calls(&self) -> Result<Option<(ThreadSummary, i64)>, SqlError> {
        let rows = self.sql.exec(
            &format!(
                "SELECT {THREAD_COLUMNS},
                        (SELECT COUNT(*) FROM tool_calls WHERE status IN ({PENDING}))
                 FROM thread LIMIT 1"
            ),
            &[],
        )?;
        row_and_open_calls(&rows)
    }

    /// Sets the status (and clears or records the last error).
    pub fn set_status(
        &self,
        now: i64,
        status: ThreadStatus,
        last_error: Option<&str>,
    ) -> Result<(), SqlError> {
        self.sql.exec(
            "UPDATE thread SET status = ?1, last_error = ?2, updated_at = ?3,
                needs_model = CASE WHEN ?1 = 'running' THEN needs_model ELSE 0 END",
            &[status.as_str().into(), last_error.into(), now.into()],
        )?;
        Ok(())
    }

    /// Marks the thread stopped by `by`.
    pub fn set_stopped(&self, now: i64, by: &str) -> Result<(), SqlError> {
        self.sql.exec(
            "UPDATE thread SET status = 'stopped', stopped_by = ?, updated_at = ?",
            &[by.into(), now.into()],
        )?;
        Ok(())
    }

    /// Starts a new turn: zero steps, running.
    pub fn begin_turn(&self, now: i64) -> Result<(), SqlError> {
        self.sql.exec(
            "UPDATE thread SET status = 'running', steps = 0, last_error = NULL, updated_at = ?",
            &[now.into()],
        )?;
        Ok(())
    }

    /// Counts one more model call in the current turn. The model is no longer owed a call (a
    /// reply with tool calls, a user message or a forced turn arriving while it streams owes
    /// it again). Returns the history version and the count of top-level visible messages
    /// as of now, for reading the history next.
    pub fn add_step(&self, now: i64) -> Result<(i64, i64), SqlError> {
        let rows = self.sql.exec(
            "UPDATE thread SET steps = steps + 1, needs_model = 0, updated_at = ?
             RETURNING history_version, visible_count",
            &[now.into()],
        )?;
        rows.first()
            .map_or(Ok((0, 0)), |r| Ok((r.int(0)?, r.int(1)?)))
    }

    /// Closes the current turn: idle; it counts as a turn if a model was called. Returns the
    /// turn count after it and the side that acted (for the status frame, without a read).
    pub fn finish_turn(&self, now: i64) -> Result<(i64, Side), SqlError> {
        let rows = self.sql.exec(
            "UPDATE thread SET status = 'idle', needs_model = 0,
                turn_count = turn_count + (steps > 0), updated_at = ?
             RETURNING turn_count, current_side",
            &[now.into()],
        )?;
        match rows.first() {
            Some(r) => Ok((r.int(0)?, Side::parse(&r.text(1)?).unwrap_or_default())),
            None => Ok((0, Side::default())),
        }
    }

    /// [`Store::finish_turn`] for a reply that needs nothing after it, in the same statement
    /// that checks so: only while the thread is running, owes the model no call, is not
    /// ending, has no call without a result, and stays under `max_turns` with this turn.
    /// Returns the row as written (with no open calls), or `None` when a check failed and
    /// nothing changed (the turn loop's next step decides, reading the row).
    pub fn finish_turn_if_settled(
        &self,
        now: i64,
        max_turns: u32,
    ) -> Result<Option<(ThreadSummary, i64)>, SqlError> {
        let rows = self.sql.exec(
            &format!(
                "UPDATE thread SET status = 'idle', needs_model = 0,
                    turn_count = turn_count + (steps > 0), updated_at = ?1
                 WHERE status = 'running' AND needs_model = 0 AND ending IS NULL
                    AND turn_count + (steps > 0) < ?2
                    AND NOT EXISTS (SELECT 1 FROM tool_calls WHERE status IN ({PENDING}))
                 RETURNING {THREAD_COLUMNS}, 0"
            ),
            &[now.into(), i64::from(max_turns).into()],
        )?;
        row_and_open_calls(&rows)
    }

    /// Marks the conversation to end (with `result`) once the running turn's tools are done.
    pub fn set_ending(&self, reason: &str, result: Option<&str>) -> Result<(), SqlError> {
        self.sql.exec(
            "UPDATE thread SET ending = ?, result = COALESCE(?, result)",
            &[reason.into(), result.into()],
        )?;
        Ok(())
    }

    /// Stores the final answer.
    pub fn set_result(&self, result: &str) -> Result<(), SqlError> {
        self.sql
            .exec("UPDATE thread SET result = ?", &[result.into()])?;
        Ok(())
    }

    /// The public origin clients reach this Worker at (`https://host`), for webhook URLs.
    pub fn public_url(&self) -> Result<Option<String>, SqlError> {
        let rows = self.sql.exec("SELECT public_url FROM thread", &[])?;
        Ok(rows.first().map(|r| r.opt_text(0)).transpose()?.flatten())
    }

    /// Records the public origin (from the request that created the thread).
    pub fn set_public_url(&self, url: &str) -> Result<(), SqlError> {
        self.sql
            .exec("UPDATE thread SET public_url = ?", &[url.into()])?;
        Ok(())
    }

    /// Links a child thread to the thread that created it, `nesting` levels below
    /// `root_thread_id`, the thread a client created.
    pub fn set_parent(
        &self,
        parent_thread_id: &str,
        root_thread_id: &str,
        nesting: u32,
    ) -> Result<(), SqlError> {
        self.sql.exec(
            "UPDATE thread SET parent_thread_id = ?, root_thread_id = ?, nesting = ?",
            &[
                parent_thread_id.into(),
                root_thread_id.into(),
                nesting.into(),
            ],
        )?;
        Ok(())
    }

    /// How many child threads deep this thread is (0: a client created it).
    pub fn nesting(&self) -> Result<u32, SqlError> {
        let rows = self.sql.exec("SELECT nesting FROM thread", &[])?;
        let n = rows.first().map(|r| r.int(0)).transpose()?.unwrap_or(0);
        Ok(u32::try_from(n).unwrap_or(0))
    }

    /// The thread's client-token generation: tokens minted in an older one are revoked. Kept
    /// in `edgent_meta` (every schema has it), 0 until the first revocation.
    pub fn token_generation(&self) -> Result<i64, SqlError> {
        let rows = self.sql.exec(
            "SELECT value FROM edgent_meta WHERE key = 'token_generation'",
            &[],
        )?;
        Ok(rows.first().map(|r| r.int(0)).transpose()?.unwrap_or(0))
    }

    /// Revokes every token minted so far: the new generation.
    pub fn next_token_generation(&self) -> Result<i64, SqlError> {
        let rows = self.sql.exec(
            "INSERT INTO edgent_meta (key, value) VALUES ('token_generation', 1) \
             ON CONFLICT (key) DO UPDATE SET value = value + 1 RETURNING value",
            &[],
        )?;
        Ok(rows.first().map(|r| r.int(0)).transpose()?.unwrap_or(1))
    }

    /// The first top-level user message's text and the index's dirty flag (kept in
    /// `edgent_meta`, which every schema has, so it needs no schema version).
    pub fn index_facts(&self) -> Result<(Option<String>, bool), SqlError> {
        let rows = self.sql.exec(
            "SELECT (SELECT content FROM messages WHERE depth = 0 AND role = 'user'
                     ORDER BY position LIMIT 1),
                    (SELECT value FROM edgent_meta WHERE key = 'index_dirty')",
            &[],
        )?;
        let Some(row) = rows.first() else {
            return Ok((None, false));
        };
        Ok((row.opt_text(0)?, row.opt_int(1)?.unwrap_or(0) != 0))
    }

    /// Sets or clears the index's dirty flag.
    pub fn set_index_dirty(&self, dirty: bool) -> Result<(), SqlError> {
        self.sql.exec(
            "INSERT INTO edgent_meta (key, value) VALUES ('index_dirty', ?)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            &[dirty.into()],
        )?;
        Ok(())
    }

    /// Hands the thread to another agent (an ai_human agent called as a tool).
    pub fn set_agent(&self, now: i64, agent_id: &str) -> Result<(), SqlError> {
        self.sql.exec(
            "UPDATE thread SET agent_id = ?, current_side = 'a', updated_at = ?",
            &[agent_id.into(), now.into()],
        )?;
        Ok(())
    }

    /// The text of the newest completed top-level assistant message that has text: its
    /// structured answer as JSON text when it has one.
    pub fn last_assistant_text(&self) -> Result<Option<String>, SqlError> {
        self.sql
            .exec(
                "SELECT COALESCE(structured, content) FROM messages
                 WHERE depth = 0 AND role = 'assistant' AND status = 'completed' AND content != ''
                 ORDER BY position DESC LIMIT 1",
                &[],
            )?
            .first()
            .map(|r| r.text(0))
            .transpose()
    }

    /// The running prompt's name and hook names, as last recorded.
    pub fn hook_config(&self) -> Result<Option<(String, Vec<String>)>, SqlError> {
        let Some(row) = self
            .sql
            .exec("SELECT hook_config FROM thread LIMIT 1", &[])?
            .into_iter()
            .next()
        else {
            return Ok(None);
        };
        Ok(row.opt_text(0)?.and_then(|json| {
            let v: Value = serde_json::from_str(&json).ok()?;
            let prompt = v.get("prompt")?.as_str()?.to_owned();
            let names = v
                .get("names")?
                .as_array()?
                .iter()
                .filter_map(|n| n.as_str().map(str::to_owned))
                .collect();
            Some((prompt, names))
        }))
    }

    /// Records the running prompt's name and hook names.
    pub fn set_hook_config(&self, prompt: &str, names: &[String]) -> Result<(), SqlError> {
        let json = serde_json::json!({ "prompt": prompt, "names": names }).to_string();
        self.sql.exec(
            "UPDATE thread SET hook_config = ?1 WHERE hook_config IS NOT ?1",
            &[json.into()],
        )?;
        Ok(())
    }

    /// The model is owed a call: starts a turn on an idle thread (zero steps, running, no last
    /// error), else only records the debt. One statement (SET sees the row before it); it
    /// returns the row as written and its count of calls without a result, as
    /// [`Store::thread_and_open_calls`] would read them right after.
    pub fn owe_model(&self, now: i64) -> Result<Option<(ThreadSummary, i64)>, SqlError> {
        let rows = self.sql.exec(
            &format!(
                "UPDATE thread SET needs_model = 1,
                    steps = CASE WHEN status = 'idle' THEN 0 ELSE steps END,
                    last_error = CASE WHEN status = 'idle' THEN NULL ELSE last_error END,
                    updated_at = CASE WHEN status = 'idle' THEN ?1 ELSE updated_at END,
                    status = CASE WHEN status = 'idle' THEN 'running' ELSE status END
                 RETURNING {THREAD_COLUMNS},
                     (SELECT COUNT(*) FROM tool_calls WHERE status IN ({PENDING}))"
            ),
            &[now.into()],
        )?;
        row_and_open_calls(&rows)
    }

    /// Records that the model is owed another call in the running turn, returning the row and
    /// its count of calls without a result as [`Store::thread_and_open_calls`] would read them
    /// right after (one statement for both).
    pub fn owe_model_again(&self) -> Result<Option<(ThreadSummary, i64)>, SqlError> {
        let rows = self.sql.exec(
            &format!(
                "UPDATE thread SET needs_model = 1
                 RETURNING {THREAD_COLUMNS},
                     (SELECT COUNT(*) FROM tool_calls WHERE status IN ({PENDING}))"
            ),
            &[],
        )?;
        row_and_open_calls(&rows)
    }

    /// Records whether the model is owed a call.
    pub fn set_needs_model(&self, needs: bool) -> Result<(), SqlError> {
        self.sql
            .exec("UPDATE thread SET needs_model = ?", &[needs.into()])?;
        Ok(())
    }

    /// Sets the side that acts next.
    pub fn set_side(&self, now: i64, side: Side) -> Result<(), SqlError> {
        self.sql.exec(
            "UPDATE thread SET current_side = ?, updated_at = ?",
            &[side.as_str().into(), now.into()],
        )?;
        Ok(())
    }
}

/// The thread row's columns as [`summary_from_row`] reads them.
const THREAD_COLUMNS: &str = "id, agent_id, tags, created_at, updated_at, turn_count, status,
    current_side, steps, stopped_by, last_error, message_count, needs_model, ending, result,
    parent_thread_id, tokens_used, cost_usd, next_schedule_at, root_thread_id";
const THREAD_COLUMN_COUNT: usize = 20;

fn summary_from_row(row: &Row) -> Result<ThreadSummary, SqlError> {
    Ok(ThreadSummary {
        thread_id: row.text(0)?,
        agent_id: row.text(1)?,
        tags: serde_json::from_str(&row.text(2)?).unwrap_or_default(),
        created_at: row.int(3)?,
        updated_at: row.int(4)?,
        turn_count: row.int(5)?,
        status: ThreadStatus::parse(&row.text(6)?),
        current_side: Side::parse(&row.text(7)?).unwrap_or_default(),
        steps: row.int(8)?,
        stopped_by: row.opt_text(9)?,
        last_error: row.opt_text(10)?,
        message_count: row.int(11)?,
        needs_model: row.int(12)? != 0,
        ending: row.opt_text(13)?,
        result: row.opt_text(14)?,
        parent_thread_id: row.opt_text(15)?,
        tokens_used: row.int(16)?,
        cost_usd: row.real(17)?,
        next_schedule_at: row.opt_int(18)?,
        root_thread_id: row.opt_text(19)?,
    })
}

/// The thread row and, after its columns, the count of calls without a result.
/// A `RETURNING` clause for a write on another table that also reads the thread row and its
/// count of calls without a result, as they are after the write (and its `BEFORE` triggers):
/// the row as a JSON array of [`THREAD_COLUMNS`], then the count. Read by
/// [`row_from_returning`].
pub(super) fn returning_thread_row() -> String {
    format!(
        "RETURNING (SELECT json_array({THREAD_COLUMNS}) FROM thread),
             (SELECT COUNT(*) FROM tool_calls WHERE status IN ({PENDING}))"
    )
}

/// The row and count a [`returning_thread_row`] clause returned (`None` without a thread).
pub(super) fn row_from_returning(rows: &[Row]) -> Result<Option<(ThreadSummary, i64)>, SqlError> {
    let Some(row) = rows.first() else {
        return Ok(None);
    };
    let Some(json) = row.opt_text(0)? else {
        return Ok(None);
    };
    let values: Vec<Value> = serde_json::from_str(&json).map_err(|e| SqlError(e.to_string()))?;
    let columns = Row(values
        .into_iter()
        .map(|v| match v {
            Value::Null => SqlValue::Null,
            Value::Bool(b) => SqlValue::Integer(b.into()),
            Value::Number(n) => n.as_i64().map_or_else(
                || SqlValue::Real(n.as_f64().unwrap_or(0.0)),
                SqlValue::Integer,
            ),
            Value::String(s) => SqlValue::Text(s),
            other => SqlValue::Text(other.to_string()),
        })
        .collect());
    Ok(Some((summary_from_row(&columns)?, row.int(1)?)))
}

fn row_and_open_calls(rows: &[Row]) -> Result<Option<(ThreadSummary, i64)>, SqlError> {
    let Some(row) = rows.first() else {
        return Ok(None);
    };
    Ok(Some((
        summary_from_row(row)?,
        row.int(THREAD_COLUMN_COUNT)?,
    )))
}
