//! Tool calls: the queue, starting, parking, waking and finishing calls, and child threads of
//! agent-tool calls.

use super::*;

impl Store<'_> {
    /// Queues the tool calls of an assistant message, in call order.
    pub fn queue_tool_calls(
        &self,
        now: i64,
        message_id: &str,
        calls: &[ToolCall],
        origin: CallOrigin,
    ) -> Result<(), SqlError> {
        for call in calls {
            self.sql.exec(
                INSERT_TOOL_CALL,
                &[
                    call.id.as_str().into(),
                    message_id.into(),
                    call.name.as_str().into(),
                    call.arguments.as_str().into(),
                    now.into(),
                    origin.as_str().into(),
                ],
            )?;
        }
        Ok(())
    }

    /// The next tool call that can run at `now`: queued, running when a crash interrupted it,
    /// or parked with its wake time passed; the lowest queue position among the queued ones
    /// and the earliest-due parked ones.
    pub fn next_tool_call(&self, now: i64) -> Result<Option<StoredToolCall>, SqlError> {
        // Two indexed lookups (by status, by wake time) rather than one OR, whose plan SQLite
        // may turn into a scan of every call ever made; in one statement (each subquery keeps
        // its own index). A queued or running call with a wake time was deferred (its agent's
        // configuration failed to load): the second lookup finds it when it is due.
        let rows = self.sql.exec(
            &format!(
                "SELECT * FROM (SELECT {TOOL_CALL_COLUMNS}, seq FROM tool_calls
                     WHERE status IN ('queued', 'running') AND wake_at IS NULL
                     ORDER BY seq ASC LIMIT 1)
                 UNION ALL
                 SELECT * FROM (SELECT {TOOL_CALL_COLUMNS}, seq FROM tool_calls
                     INDEXED BY tool_calls_waking
                     WHERE wake_at IS NOT NULL AND wake_at <= ? AND status IN ({PENDING})
                     ORDER BY wake_at ASC LIMIT 16)"
            ),
            &[now.into()],
        )?;
        let seq = |r: &Row| r.int(TOOL_CALL_COLUMN_COUNT).unwrap_or(i64::MAX);
        let first = rows.iter().min_by_key(|r| seq(r));
        first.map(tool_call_from_row).transpose()
    }

    /// Pushes every call that is due (parked with a past wake time, or queued or running
    /// with none) back to `later`; starting a call clears its wake time again.
    pub fn defer_due_calls(&self, now: i64, later: i64) -> Result<(), SqlError> {
        self.sql.exec(
            &format!(
                "UPDATE tool_calls SET wake_at = ? WHERE status IN ({PENDING})
                 AND (wake_at <= ? OR (wake_at IS NULL AND status IN ('queued', 'running')))"
            ),
            &[later.into(), now.into()],
        )?;
        Ok(())
    }

    /// Calls without a result (queued, running or suspended), in run order.
    pub fn pending_tool_calls(&self) -> Result<Vec<StoredToolCall>, SqlError> {
        let rows = self.sql.exec(
            &format!(
                "SELECT {TOOL_CALL_COLUMNS} FROM tool_calls WHERE status IN ({PENDING}) ORDER BY seq ASC"
            ),
            &[],
        )?;
        rows.iter().map(tool_call_from_row).collect()
    }

    /// Stores a call's runtime bindings.
    pub fn set_tool_call_bindings(&self, call_id: &str, bindings: &Value) -> Result<(), SqlError> {
        self.sql.exec(
            "UPDATE tool_calls SET bindings = ? WHERE id = ?",
            &[bindings.to_string().into(), call_id.into()],
        )?;
        Ok(())
    }

    /// Ids of the calls without a result.
    pub fn pending_tool_call_ids(&self) -> Result<Vec<String>, SqlError> {
        let rows = self.sql.exec(
            &format!("SELECT id FROM tool_calls WHERE status IN ({PENDING})"),
            &[],
        )?;
        rows.iter().map(|r| r.text(0)).collect()
    }

    /// Calls without a result, with where each came from (one read for both questions the
    /// turn asks: does the model wait, and which calls does it not see yet).
    pub fn pending_call_origins(&self) -> Result<Vec<(String, CallOrigin)>, SqlError> {
        let rows = self.sql.exec(
            &format!("SELECT id, origin FROM tool_calls WHERE status IN ({PENDING})"),
            &[],
        )?;
        rows.iter()
            .map(|r| Ok((r.text(0)?, CallOrigin::parse(&r.text(1)?))))
            .collect()
    }

    /// Whether a call of a model reply has no result yet (the model waits for it).
    pub fn has_pending_model_calls(&self) -> Result<bool, SqlError> {
        let rows = self.sql.exec(
            &format!(
                "SELECT 1 FROM tool_calls WHERE status IN ({PENDING}) AND origin = 'model' LIMIT 1"
            ),
            &[],
        )?;
        Ok(!rows.is_empty())
    }

    /// One call by id.
    pub fn tool_call(&self, call_id: &str) -> Result<Option<StoredToolCall>, SqlError> {
        let rows = self.sql.exec(
            &format!("SELECT {TOOL_CALL_COLUMNS} FROM tool_calls WHERE id = ?"),
            &[call_id.into()],
        )?;
        rows.first().map(tool_call_from_row).transpose()
    }

    /// Marks a tool call as running; `new_attempt` counts a first start or a retry (not the
    /// resumption of a suspended workflow), which the `attempt_started` trigger records in
    /// `tool_attempts`. The call's `version`, when set, is the one its runs are on from now.
    pub fn start_tool_call(
        &self,
        now: i64,
        call: &StoredToolCall,
        new_attempt: bool,
    ) -> Result<(), SqlError> {
        self.sql.exec(
            "UPDATE tool_calls SET status = 'running', started_at = ?, wake_at = NULL,
                 first_started_at = COALESCE(first_started_at, ?), attempts = attempts + ?,
                 version = COALESCE(?, version)
             WHERE id = ?",
            &[
                now.into(),
                now.into(),
                i64::from(new_attempt).into(),
                call.version.map(i64::from).into(),
                call.call.id.as_str().into(),
            ],
        )?;
        Ok(())
    }

    /// Closes the latest attempt of a call with its outcome (`failed`, `timeout`,
    /// `interrupted`) when no result closes it (see `finish_tool_call`).
    pub fn end_attempt(
        &self,
        now: i64,
        call_id: &str,
        outcome: &str,
        error: Option<&str>,
    ) -> Result<(), SqlError> {
        self.sql.exec(
            "UPDATE tool_attempts SET finished_at = ?, outcome = ?, error = ?
             WHERE seq = (SELECT MAX(seq) FROM tool_attempts WHERE call_id = ?)
               AND finished_at IS NULL",
            &[now.into(), outcome.into(), error.into(), call_id.into()],
        )?;
        Ok(())
    }

    /// Counts a run that a crash or an eviction cut short.
    pub fn count_interruption(&self, call_id: &str) -> Result<(), SqlError> {
        self.sql.exec(
            "UPDATE tool_calls SET interruptions = interruptions + 1 WHERE id = ?",
            &[call_id.into()],
        )?;
        Ok(())
    }

    /// Suspends a call: `status` until `wake_at` (none: until something outside wakes it),
    /// with `detail` saying why. `after_run`: the call ran since it was due, so a wake time
    /// it holds is not the one that made it due.
    pub fn suspend_tool_call(
        &self,
        call_id: &str,
        status: &str,
        wake_at: Option<i64>,
        after_run: bool,
        detail: Option<&Value>,
        last_error: Option<&str>,
    ) -> Result<(), SqlError> {
        self.sql.exec(
            // After a run, a wake time already set came from a webhook delivered while the run
            // was going (`start_tool_call` clears it): the earlier one wins, or the body would
            // wait. Without a run it is the spent one that made the call due: replaced.
            "UPDATE tool_calls SET status = ?,
                 wake_at = CASE WHEN ? AND wake_at IS NOT NULL AND (? IS NULL OR wake_at < ?)
                           THEN wake_at ELSE ? END,
                 detail = ?, last_error = COALESCE(?, last_error)
             WHERE id = ?",
            &[
                status.into(),
                after_run.into(),
                wake_at.into(),
                wake_at.into(),
                wake_at.into(),
                detail.map(Value::to_string).into(),
                last_error.into(),
                call_id.into(),
            ],
        )?;
        Ok(())
    }

    /// Makes a suspended call due now (a webhook arrived, a client approved it).
    pub fn wake_tool_call(&self, now: i64, call_id: &str) -> Result<(), SqlError> {
        self.sql.exec(
            &format!("UPDATE tool_calls SET wake_at = ? WHERE id = ? AND status IN ({PENDING})"),
            &[now.into(), call_id.into()],
        )?;
        Ok(())
    }

    /// Records a client's decision on a call waiting for approval and makes it due now, in
    /// one statement: a decision is never stored without the wake-up that acts on it (the
    /// call would wait for good, and a second decision is refused). `reason` (a rejection's)
    /// becomes the call's last error.
    pub fn decide_approval(
        &self,
        now: i64,
        call_id: &str,
        approval: &str,
        reason: Option<&str>,
    ) -> Result<(), SqlError> {
        self.sql.exec(
            &format!(
                "UPDATE tool_calls SET approval = ?, last_error = COALESCE(?, last_error),
                     wake_at = CASE WHEN status IN ({PENDING}) THEN ? ELSE wake_at END
                 WHERE id = ?"
            ),
            &[approval.into(), reason.into(), now.into(), call_id.into()],
        )?;
        Ok(())
    }

    /// Records a client's decision on a call that needs approval.
    pub fn set_approval(&self, call_id: &str, approval: &str) -> Result<(), SqlError> {
        self.sql.exec(
            "UPDATE tool_calls SET approval = ? WHERE id = ?",
            &[approval.into(), call_id.into()],
        )?;
        Ok(())
    }

    /// Sets a workflow's whole-run deadline, once.
    pub fn set_deadline(&self, call_id: &str, deadline_at: i64) -> Result<(), SqlError> {
        self.sql.exec(
            "UPDATE tool_calls SET deadline_at = COALESCE(deadline_at, ?) WHERE id = ?",
            &[deadline_at.into(), call_id.into()],
        )?;
        Ok(())
    }

    /// The earliest wake time of a suspended call, for the thread's alarm.
    pub fn next_wake(&self) -> Result<Option<i64>, SqlError> {
        self.instant(&format!(
            "SELECT MIN(wake_at) FROM tool_calls WHERE wake_at IS NOT NULL AND status IN ({PENDING})"
        ))
    }

    /// The earlier of [`Store::next_wake`] and the earliest schedule's due time, unless the
    /// thread is stopped (or there is none), in one statement.
    pub fn next_wake_unless_stopped(&self) -> Result<Option<i64>, SqlError> {
        // A schedule's due time counts too (the row keeps the earliest): a stopped thread's
        // schedules do not fire.
        self.instant(&format!(
            "SELECT MIN(at) FROM (
                SELECT MIN(wake_at) AS at FROM tool_calls
                    WHERE wake_at IS NOT NULL AND status IN ({PENDING})
                UNION ALL SELECT next_schedule_at FROM thread
             ) WHERE EXISTS (SELECT 1 FROM thread WHERE status != 'stopped')"
        ))
    }

    /// The one optional instant a query selects (none when it selects no row or NULL).
    fn instant(&self, query: &str) -> Result<Option<i64>, SqlError> {
        let rows = self.sql.exec(query, &[])?;
        rows.first()
            .map(|r| r.opt_int(0))
            .transpose()
            .map(Option::flatten)
    }

    /// Closes a tool call with its result (`success` or `error`) and links the message; the
    /// `attempt_finished` trigger closes its open attempt with the same outcome.
    pub fn finish_tool_call(
        &self,
        now: i64,
        call_id: &str,
        status: &str,
        result_message_id: &str,
    ) -> Result<(), SqlError> {
        self.sql.exec(
            FINISH_TOOL_CALL,
            &[
                status.into(),
                now.into(),
                result_message_id.into(),
                call_id.into(),
            ],
        )?;
        Ok(())
    }

    // ---- child threads ------------------------------------------------------------------

    /// The child thread of an agent-tool call: the one recorded, else `fresh` (recorded now).
    pub fn child_thread(
        &self,
        now: i64,
        tool_call_id: &str,
        fresh: &str,
    ) -> Result<String, SqlError> {
        self.feature_insert(
            Feature::ChildThreads,
            "INSERT INTO child_threads (tool_call_id, thread_id, created_at) VALUES (?, ?, ?)
             ON CONFLICT (tool_call_id) DO NOTHING",
            &[tool_call_id.into(), fresh.into(), now.into()],
        )?;
        self.feature_exec(
            "SELECT thread_id FROM child_threads WHERE tool_call_id = ?",
            &[tool_call_id.into()],
        )?
        .first()
        .map_or(Ok(fresh.to_owned()), |r| r.text(0))
    }
}
