//! When a thread needs its driver: the engine's timers and work checks. The driver keeps one
//! alarm per thread and sets it only to what these say, so the policy (a watchdog while a turn
//! runs, the earliest parked call afterwards, nothing for a stopped thread) is engine code with
//! host tests, not driver code.
//!
//! The order of calls in the driver's loop:
//! 1. [`Thread::step_wanted`]: whether to take a step now, with the thread's summary
//!    (otherwise the loop ends);
//! 2. keep the alarm at most [`WATCHDOG_MS`] ahead while steps run (a crash mid-step resumes
//!    there): when [`watchdog_due`] says so, arm it and read the row again (step 1), since
//!    arming awaits. Checked after step 1, so a watchdog that fires on an idle thread arms
//!    nothing (one that fires on a running thread that waits arms it, and the loop deletes
//!    it again when it stops: see [`alarm_after_loop`]);
//!    When a schedule has fallen due ([`Thread::schedules_due`]), fire it
//!    ([`Thread::fire_due_schedules`]: a message posted or a call queued) and step again;
//! 3. load configuration if the engine's side or agent changed; on failure
//!    [`Thread::handle_config_failure`] and end the loop. A cached copy past its freshness
//!    may plan the step instead while it is confirmed, when
//!    [`Thread::only_a_model_step_next`] says the step is a model request; a copy that
//!    cannot be confirmed fails that call ([`Thread::fail_unconfirmed_call`]);
//! 4. [`Thread::next_action_for`] with that summary when nothing yielded since (else
//!    [`Thread::next_action`]) and perform it;
//! 5. after the loop: change the alarm as [`alarm_after_loop`] says for
//!    [`Thread::poll_timeout`] and how the loop stopped ([`LoopEnd`]), then start again if
//!    work arrived meanwhile. A step that ended in `Idle` or `Wait` usually knows
//!    the answer from the calls it read ([`Thread::take_wake_hint`], taken before anything
//!    awaits), which saves the query. [`Thread::has_work`] answers that from storage; the
//!    Worker, which sees every request that stores work, keeps a flag instead of reading.

use crate::engine::store::{ThreadStatus, ThreadSummary};
use crate::engine::thread::{ModelCall, Thread, ThreadError};
use crate::llm::stream::ProviderError;

/// How long a turn may go without progress before the watchdog alarm resumes it. Short, so a
/// turn an eviction or a crash cut short resumes within seconds even when no request touches
/// the thread (a request resumes it at once: `ThreadRuntime::on_contact`). While a long step
/// runs (a long model stream, a slow tool), the alarm fires in the instance that runs it,
/// which only arms it again: a heartbeat every few seconds.
pub const WATCHDOG_MS: i64 = 5_000;

/// What the driver knows of the thread's one alarm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KnownAlarm {
    /// Not known: an earlier instance's, a parked call's or a schedule's, or a write failed.
    Unknown,
    /// None is set: it fired (the platform removes an alarm that fired) and nothing set it
    /// since.
    Unset,
    /// The watchdog this instance armed, until this time.
    Watchdog(i64),
}

/// Whether the watchdog must be armed before work goes on: less than half of it is left, or
/// it is not known to be armed. A handler that stores work asks this too, so turns that
/// follow each other within half the watchdog arm it once between them.
pub fn watchdog_due(alarm: KnownAlarm, now: i64) -> bool {
    match alarm {
        KnownAlarm::Watchdog(until) => now > until.saturating_sub(WATCHDOG_MS / 2),
        KnownAlarm::Unknown | KnownAlarm::Unset => true,
    }
}

/// What the driver does with the thread's one alarm when its loop has stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlarmChange {
    /// Set it to this time (a parked call or a schedule wakes the thread).
    Set(i64),
    /// Delete it: nothing will need the thread.
    Delete,
    /// Leave it as it is: an idle thread's watchdog that has not run out, or none is set.
    Keep,
}

/// How the driver's loop stopped: what decides whether a watchdog may be left behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoopEnd {
    /// The thread takes no step until something is stored or falls due: it is idle or
    /// stopped ([`Thread::step_wanted`] said no, or the step ended in
    /// [`Action::Idle`](crate::engine::thread::Action::Idle)).
    Idle,
    /// Anything else: a running thread that waits (for an approval, a webhook, a parked
    /// call, a child thread), or a loop that stopped on an error.
    Other,
}

/// The alarm after the loop, for `wake` ([`Thread::poll_timeout`]), how the loop stopped and
/// what the driver knows of the alarm. An idle thread with nothing to wake for leaves a
/// watchdog still ahead to run out rather than delete it: when it fires, the thread wants no
/// step, so the loop arms nothing (see step 2 above); and a thread whose next message arrives
/// before then (an agent's loop, a client that answers at once) writes no alarm for that
/// turn. An idle thread holds no alarm once that watchdog has fired: [`WATCHDOG_MS`] at most
/// after its last work. A running thread that waits deletes it: fired, it would step (and arm
/// it again) every [`WATCHDOG_MS`] while it waits.
pub fn alarm_after_loop(
    wake: Option<i64>,
    end: LoopEnd,
    alarm: KnownAlarm,
    now: i64,
) -> AlarmChange {
    match (wake, end, alarm) {
        (Some(at), _, _) => AlarmChange::Set(at),
        // None is set: there is nothing to delete.
        (None, _, KnownAlarm::Unset) => AlarmChange::Keep,
        (None, LoopEnd::Idle, KnownAlarm::Watchdog(until)) if until > now => AlarmChange::Keep,
        (None, _, _) => AlarmChange::Delete,
    }
}

/// How long due parked calls wait when the agent's configuration cannot be loaded, so an idle
/// thread does not loop (and alarm) on a configuration that fails.
pub const CONFIG_RETRY_MS: i64 = 60_000;

impl Thread<'_> {
    /// Whether the driver should take a step now: the thread is running, or it is idle with a
    /// parked call that has fallen due (which starts a turn). `false` for an object without a
    /// thread, and for a stopped thread unless a crash left it something to settle (a reply
    /// still pending, a call without a result: see `Thread::next_action`).
    pub fn wants_step(&self, now: i64) -> Result<bool, ThreadError> {
        Ok(self.step_wanted(now)?.is_some())
    }

    /// [`wants_step`](Self::wants_step), answered with the thread's summary when a step is
    /// wanted (the driver needs it for the step, and reads the thread row once). The same
    /// read counts the calls without a result, which the [`Thread::next_action_for`] that
    /// follows with this summary trusts: nothing may await or write calls in between.
    pub fn step_wanted(&self, now: i64) -> Result<Option<ThreadSummary>, ThreadError> {
        let read = match self.take_row_hint() {
            Some(row) => Some(row),
            None => self.store().thread_and_open_calls()?,
        };
        let Some((summary, open_calls)) = read else {
            return Ok(None);
        };
        self.note_open_calls(open_calls);
        let wanted = match summary.status {
            ThreadStatus::Running => true,
            ThreadStatus::Idle => {
                schedule_due(&summary, now)
                    || (open_calls > 0 && self.store().next_tool_call(now)?.is_some())
            }
            // Only to settle what a crash left (a pending reply, a call without a result).
            ThreadStatus::Stopped => self.stopped_with_leftovers(open_calls)?,
        };
        Ok(wanted.then_some(summary))
    }

    /// The agent's configuration could not be loaded (`why` says what failed): the turn
    /// fails with a `model_config` error, and due parked calls wait [`CONFIG_RETRY_MS`].
    pub fn handle_config_failure(&mut self, now: i64, why: String) -> Result<(), ThreadError> {
        self.fail_turn(now, &ProviderError::Config(why))?;
        self.store()
            .defer_due_calls(now, now.saturating_add(CONFIG_RETRY_MS))?;
        Ok(())
    }

    /// The model call `call` was planned with a configuration copy that could not be
    /// confirmed (`why`): it fails as [`Thread::handle_config_failure`] fails a turn.
    pub fn fail_unconfirmed_call(
        &mut self,
        now: i64,
        call: ModelCall,
        why: String,
    ) -> Result<(), ThreadError> {
        self.fail_model_call(now, call, &ProviderError::Config(why))?;
        self.store()
            .defer_due_calls(now, now.saturating_add(CONFIG_RETRY_MS))?;
        Ok(())
    }

    /// When the thread must be woken next, once the driver's loop has stopped: the earliest
    /// wake time of a parked call (retrying, sleeping, waiting for a webhook's timeout, rate
    /// limited) or the earliest schedule's due time, or `None` when there is neither. A stopped thread (or an object without a
    /// thread) parks nothing.
    pub fn poll_timeout(&self) -> Result<Option<i64>, ThreadError> {
        Ok(self.store().next_wake_unless_stopped()?)
    }

    /// Whether a schedule fell due on this (running or idle) thread: the driver then calls
    /// [`Thread::fire_due_schedules`] before the step, and steps again.
    pub fn schedules_due(&self, summary: &ThreadSummary, now: i64) -> bool {
        summary.status != ThreadStatus::Stopped && schedule_due(summary, now)
    }

    /// Whether work is waiting that nobody will start unless the driver does now: a running
    /// thread whose model call is owed (not one blocked on a parked call of its reply), a
    /// parked call that has fallen due, or what a crash left on a stopped thread.
    pub fn has_work(&self, now: i64) -> Result<bool, ThreadError> {
        let status = self.summary()?.status;
        let due = self.store().next_tool_call(now)?.is_some();
        Ok(match status {
            ThreadStatus::Running => !self.store().has_pending_model_calls()? || due,
            ThreadStatus::Idle => due || schedule_due(&self.summary()?, now),
            ThreadStatus::Stopped => {
                let open = self.store().thread_and_open_calls()?.map_or(0, |(_, n)| n);
                self.stopped_with_leftovers(open)?
            }
        })
    }
}

/// Whether the row's earliest schedule has fallen due.
fn schedule_due(summary: &ThreadSummary, now: i64) -> bool {
    summary.next_schedule_at.is_some_and(|at| at <= now)
}
