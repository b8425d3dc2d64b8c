//! Schedules on a thread: made by the server, a client or a tool, listed, cancelled, and fired
//! by the turn loop when due ([`Thread::fire_due_schedules`]). Firing is the same work a client
//! does (a user message, a queued call), stored in the same synchronous step as the schedule's
//! advance, so a due time fires once: a crash before the step's writes land leaves it due, one
//! after leaves it advanced.

use super::*;
use crate::values::ids::new_id;
use crate::values::schedule::{
    Schedule, ScheduleAction, ScheduleSpec, When, MAX_SCHEDULES_PER_THREAD,
};

/// Due schedules fired per step at most (the loop steps again while more are due).
const FIRED_PER_STEP: i64 = 16;

impl Thread<'_> {
    /// Stores a schedule from `spec`, made by `created_by` (`server` or `tool`). A
    /// tool call's name and arguments are checked now, as `queue_tool` checks them.
    pub fn create_schedule(
        &mut self,
        now: i64,
        spec: &ScheduleSpec,
        registry: &dyn ToolIndex,
        created_by: &str,
    ) -> Result<Schedule, ThreadError> {
        self.create_schedule_with_id(now, spec, registry, created_by, None)
    }

    /// [`Thread::create_schedule`] under a given id: when a schedule with that id exists, it
    /// is returned as it is and nothing is made (a tool call run again).
    pub fn create_schedule_with_id(
        &mut self,
        now: i64,
        spec: &ScheduleSpec,
        registry: &dyn ToolIndex,
        created_by: &str,
        id: Option<&str>,
    ) -> Result<Schedule, ThreadError> {
        if let Some(existing) = id.map(|id| self.store.schedule(id)).transpose()?.flatten() {
            return Ok(existing);
        }
        if self.summary()?.status == ThreadStatus::Stopped {
            return Err(ThreadError::Stopped);
        }
        let (when, first, action) = spec
            .read(now)
            .map_err(|why| ThreadError::Invalid(why.to_string()))?;
        if let ScheduleAction::Tool { name, arguments } = &action {
            let Some(checked) = registry.check_arguments(name, arguments.clone()) else {
                return Err(ThreadError::UnknownTool(format!(
                    "unknown tool {name:?}; registered tools: {}",
                    registry.tool_names().join(", ")
                )));
            };
            checked.map_err(|why| ThreadError::InvalidArguments(format!("arguments: {why}")))?;
        }
        if self.store.active_schedules()? >= MAX_SCHEDULES_PER_THREAD as i64 {
            return Err(ThreadError::Conflict(format!(
                "this thread already has {MAX_SCHEDULES_PER_THREAD} active schedules; cancel one first"
            )));
        }
        let (kind, stored_spec) = when.stored();
        let schedule = Schedule {
            id: id.map_or_else(new_id, str::to_owned),
            name: spec.name.clone(),
            kind: kind.to_owned(),
            spec: stored_spec,
            next_at: Some(first),
            action: action.to_value(),
            status: "active".to_owned(),
            created_by: created_by.to_owned(),
            created_at: now,
            fired_count: 0,
            last_fired_at: None,
        };
        self.store.insert_schedule(&schedule)?;
        self.frames.push_back(ServerFrame::Schedule {
            schedule: schedule.clone(),
        });
        Ok(schedule)
    }

    /// Cancels an active schedule.
    pub fn cancel_schedule(&mut self, now: i64, id: &str) -> Result<Schedule, ThreadError> {
        self.summary()?;
        let Some(schedule) = self.store.cancel_schedule(now, id)? else {
            return Err(match self.store.schedule_status(id)? {
                Some(status) => ThreadError::Conflict(format!(
                    "schedule {id:?} is {status} already; only an active one can be cancelled"
                )),
                None => ThreadError::Missing(format!("no schedule {id:?} on this thread")),
            });
        };
        self.frames.push_back(ServerFrame::Schedule {
            schedule: schedule.clone(),
        });
        Ok(schedule)
    }

    /// The thread's schedules, oldest first; with `ended`, done and cancelled ones too.
    pub fn schedules(&self, ended: bool) -> Result<Vec<Schedule>, ThreadError> {
        self.summary()?;
        Ok(self.store.schedules(ended)?)
    }

    /// Fires the schedules due at `now` (the driver calls it when the row's
    /// `next_schedule_at` has passed, on a thread that is not stopped): each posts its message
    /// or queues its call and moves to its next due time. One that fell due several times
    /// while the thread slept fires once (see [`When::next_due`]). Returns how many fired.
    pub fn fire_due_schedules(
        &mut self,
        now: i64,
        registry: &dyn ToolIndex,
    ) -> Result<usize, ThreadError> {
        let due = self.store.due_schedules(now, FIRED_PER_STEP)?;
        let mut fired = 0;
        for schedule in due {
            let Some(due_at) = schedule.next_at else {
                continue;
            };
            let when = When::from_stored(&schedule.kind, &schedule.spec);
            let next = match &when {
                Some(w) => w.next_due(due_at, now).unwrap_or(None),
                None => None,
            };
            // Advanced first, in the same synchronous step as the work: the write that makes
            // this due time fire is the one that also moves it on.
            let Some(advanced) = self
                .store
                .advance_schedule(&schedule.id, due_at, next, now)?
            else {
                continue;
            };
            let outcome = match ScheduleAction::from_value(&schedule.action) {
                Some(ScheduleAction::Message(text)) => {
                    self.post_user_message(now, &text).map(|_| ())
                }
                Some(ScheduleAction::Tool { name, arguments }) => {
                    self.queue_tool(now, registry, &name, arguments).map(|_| ())
                }
                None => Err(ThreadError::Invalid("an unreadable stored action".into())),
            };
            if let Err(ThreadError::Sql(e)) = outcome {
                return Err(ThreadError::Sql(e));
            }
            if let Err(why) = outcome {
                // The schedule still moved on (it would fail the same way again at once); the
                // reason reaches clients.
                self.frames.push_back(ServerFrame::error(
                    "schedule_failed",
                    format!("schedule {}: {why}", schedule.id),
                    None,
                ));
            }
            self.frames
                .push_back(ServerFrame::Schedule { schedule: advanced });
            fired += 1;
        }
        Ok(fired)
    }
}
