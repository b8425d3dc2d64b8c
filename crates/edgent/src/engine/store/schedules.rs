//! Schedules: stored, listed, found when due, advanced once per due time, cancelled. The
//! thread row's `next_schedule_at` follows them (triggers), so the turn loop and the alarm
//! read the earliest due time with the row they already read.

use super::*;
use crate::values::schedule::Schedule;

const SCHEDULE_COLUMNS: &str = "id, name, kind, spec, next_at, action, status, created_by, \
     created_at, fired_count, last_fired_at";

fn schedule_from_row(row: &Row) -> Result<Schedule, SqlError> {
    let action = row.text(5)?;
    Ok(Schedule {
        id: row.text(0)?,
        name: row.opt_text(1)?,
        kind: row.text(2)?,
        spec: row.text(3)?,
        next_at: row.opt_int(4)?,
        action: serde_json::from_str(&action).map_err(|e| SqlError(e.to_string()))?,
        status: row.text(6)?,
        created_by: row.text(7)?,
        created_at: row.int(8)?,
        fired_count: row.int(9)?,
        last_fired_at: row.opt_int(10)?,
    })
}

impl Store<'_> {
    /// Stores a new schedule (active).
    pub fn insert_schedule(&self, s: &Schedule) -> Result<(), SqlError> {
        self.feature_insert(
            Feature::Schedules,
            "INSERT INTO schedules (id, name, kind, spec, next_at, action, created_by, created_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            &[
                s.id.as_str().into(),
                s.name.as_deref().into(),
                s.kind.as_str().into(),
                s.spec.as_str().into(),
                s.next_at.into(),
                s.action.to_string().into(),
                s.created_by.as_str().into(),
                s.created_at.into(),
            ],
        )?;
        Ok(())
    }

    /// The thread's schedules, oldest first (in the order made): the active ones, and with `ended` also the done
    /// and cancelled ones.
    pub fn schedules(&self, ended: bool) -> Result<Vec<Schedule>, SqlError> {
        let filter = if ended { "" } else { "WHERE status = 'active'" };
        let rows = self.feature_exec(
            &format!(
                "SELECT {SCHEDULE_COLUMNS} FROM schedules {filter} ORDER BY created_at, rowid"
            ),
            &[],
        )?;
        rows.iter().map(schedule_from_row).collect()
    }

    /// How many schedules are active.
    pub fn active_schedules(&self) -> Result<i64, SqlError> {
        let rows = self.feature_exec(
            "SELECT COUNT(*) FROM schedules WHERE status = 'active'",
            &[],
        )?;
        Ok(rows.first().map(|r| r.int(0)).transpose()?.unwrap_or(0))
    }

    /// Active schedules due at `now`, earliest first (at most `limit`).
    pub fn due_schedules(&self, now: i64, limit: i64) -> Result<Vec<Schedule>, SqlError> {
        let rows = self.feature_exec(
            &format!(
                "SELECT {SCHEDULE_COLUMNS} FROM schedules
                 WHERE status = 'active' AND next_at <= ? ORDER BY next_at, rowid LIMIT ?"
            ),
            &[now.into(), limit.into()],
        )?;
        rows.iter().map(schedule_from_row).collect()
    }

    /// Records that the schedule fired for its due time `due`: its next due time, or `done`
    /// when it has none. Only while it is still due at `due` (the same due time never fires
    /// twice); the schedule as now stored, or `None` when that check failed.
    pub fn advance_schedule(
        &self,
        id: &str,
        due: i64,
        next: Option<i64>,
        now: i64,
    ) -> Result<Option<Schedule>, SqlError> {
        let rows = self.feature_exec(
            &format!(
                "UPDATE schedules SET next_at = ?1,
                    status = CASE WHEN ?1 IS NULL THEN 'done' ELSE status END,
                    ended_at = CASE WHEN ?1 IS NULL THEN ?2 ELSE ended_at END,
                    fired_count = fired_count + 1, last_fired_at = ?2
                 WHERE id = ?3 AND status = 'active' AND next_at = ?4
                 RETURNING {SCHEDULE_COLUMNS}"
            ),
            &[next.into(), now.into(), id.into(), due.into()],
        )?;
        rows.first().map(schedule_from_row).transpose()
    }

    /// The schedule `id`, if there is one.
    pub fn schedule(&self, id: &str) -> Result<Option<Schedule>, SqlError> {
        let rows = self.feature_exec(
            &format!("SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE id = ?"),
            &[id.into()],
        )?;
        rows.first().map(schedule_from_row).transpose()
    }

    /// The status of the schedule `id` (`None`: no such schedule).
    pub fn schedule_status(&self, id: &str) -> Result<Option<String>, SqlError> {
        let rows = self.feature_exec("SELECT status FROM schedules WHERE id = ?", &[id.into()])?;
        rows.first().map(|r| r.text(0)).transpose()
    }

    /// Cancels an active schedule; the schedule as now stored, or `None` when there is no
    /// active schedule with that id.
    pub fn cancel_schedule(&self, now: i64, id: &str) -> Result<Option<Schedule>, SqlError> {
        let rows = self.feature_exec(
            &format!(
                "UPDATE schedules SET status = 'cancelled', next_at = NULL, ended_at = ?
                 WHERE id = ? AND status = 'active' RETURNING {SCHEDULE_COLUMNS}"
            ),
            &[now.into(), id.into()],
        )?;
        rows.first().map(schedule_from_row).transpose()
    }
}
