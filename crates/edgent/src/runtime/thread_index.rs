//! Keeps the thread's row in the thread index (D1) current, and answers the index's routes.
//!
//! The row is a copy: the runtime follows the frames it flushes ([`IndexRow::note`]) and
//! writes the row in the background ([`Platform::spawn`]) after a change, one write at a time
//! (a later change waits for the write in flight, then the newest row is written), so a turn
//! never waits for D1 and the index never goes back to an older state. A failed write sets the
//! thread's dirty flag (in its SQLite) and is retried at the next change, or when the next
//! instance of the object is first contacted. A new instance reads the row from the thread
//! once, at its first write; after that the frames carry every change, so a turn costs the
//! thread no statement for its index.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use serde_json::Value;

use super::{ConfigDb, ThreadRuntime};
use crate::api::thread_index::{delete_row, IndexRow, ListQuery};
use crate::api::ApiError;
use crate::engine::store::ThreadSummary;
use crate::engine::thread::ParentLink;
use crate::values::protocol::ServerFrame;

/// What one runtime instance knows of its thread's index row.
#[derive(Default)]
pub(super) struct IndexMirror {
    /// The row the index should hold, as far as this instance knows (`None`: read it from the
    /// thread before writing).
    row: RefCell<Option<IndexRow>>,
    /// The row changed since the last write that succeeded.
    due: Cell<bool>,
    /// Something changed that frames do not show (a failed turn's error, a handoff): read
    /// the summary again before the next write.
    resync: Cell<bool>,
    /// A write is in flight (it writes again if the row changes meanwhile).
    writing: Cell<bool>,
    /// The dirty flag as stored in the thread, when known.
    dirty_stored: Cell<Option<bool>>,
    /// The thread was deleted: nothing more is written (a write in flight removes its row
    /// again once it lands).
    erased: Cell<bool>,
    /// When this instance last started a write (ms), for [`INDEX_WRITE_GAP_MS`].
    last_write_at: Cell<Option<i64>>,
}

impl IndexMirror {
    /// Follows one flushed frame; whether the row is now owed a write.
    pub(super) fn note(&self, frame: &ServerFrame, now: i64) -> bool {
        let noted = match self.row.borrow_mut().as_mut() {
            Some(row) => row.note(frame, now),
            // Not known yet: the read before the write sees what the frame reports.
            None => IndexRow::default().note(frame, now),
        };
        if noted.resync {
            self.resync.set(true);
        }
        if noted.changed {
            self.due.set(true);
        }
        noted.changed
    }

    /// The thread was just created: its first row, known without a read.
    pub(super) fn created(&self, summary: &ThreadSummary, parent: Option<ParentLink<'_>>) {
        let mut row = IndexRow::from_summary(summary, None);
        row.parent = parent.map(|p| p.thread_id.to_owned());
        *self.row.borrow_mut() = Some(row);
        self.dirty_stored.set(Some(false));
        self.resync.set(false);
        self.erased.set(false);
        self.due.set(true);
    }

    /// A change the frames do not show (a handoff): the next write reads the row first.
    pub(super) fn changed_unseen(&self) {
        self.resync.set(true);
        self.due.set(true);
    }
}

/// Retries of a failed index write before the dirty flag waits for the next change or
/// contact, and the first delay (×4 each time: 1 s, 4 s, 16 s, 64 s).
const INDEX_RETRIES: u32 = 4;
const INDEX_RETRY_MS: u64 = 1_000;
/// How long a write of a running thread's row waits for the turn to end: most turns end
/// sooner, and then one write carries both the start and the end (a D1 write per turn less).
/// A longer turn is written as running, then again when it ends.
const INDEX_SETTLE_MS: u64 = 500;
/// The least time between the starts of two writes of one thread's row. A thread whose turns
/// follow each other quickly (a client or a schedule driving it, tool turns back to back)
/// would otherwise write its row at every turn: a D1 write (five b-trees with the listing's
/// indexes) per turn, for a copy nobody reads that often. Changes within the gap are
/// written together, the newest row, when it has passed.
const INDEX_WRITE_GAP_MS: i64 = 1_000;

impl ThreadRuntime {
    /// Starts a background write of the index row if one is owed and none is in flight.
    pub(super) fn schedule_index_write(&self) {
        let index = &self.index;
        if !index.due.get() || index.writing.get() || index.erased.get() {
            return;
        }
        let Some(this) = self.this.upgrade() else {
            return;
        };
        index.writing.set(true);
        self.platform
            .spawn(Box::pin(async move { this.write_index().await }));
    }

    /// Writes the row until it is current (a change during a write is written next), or
    /// until a write fails (then the thread is marked dirty).
    async fn write_index(&self) {
        let index = &self.index;
        let mut failures = 0u32;
        let mut settled = false;
        while index.due.get() && !index.erased.get() {
            let Some(row) = self.current_index_row() else {
                break;
            };
            if row.status == "running" && !std::mem::replace(&mut settled, true) {
                // A turn in progress: give it a moment to end (the row is read again after).
                self.platform.sleep(INDEX_SETTLE_MS).await;
                continue;
            }
            let now = self.platform.now_ms();
            let gap_left = index.last_write_at.get().map_or(0, |at| {
                at.saturating_add(INDEX_WRITE_GAP_MS).saturating_sub(now)
            });
            if gap_left > 0 {
                // Written moments ago: what changes meanwhile goes in the next write.
                self.platform
                    .sleep(u64::try_from(gap_left).unwrap_or(0))
                    .await;
                continue;
            }
            index.last_write_at.set(Some(now));
            index.due.set(false);
            let db = self.platform.index_db();
            let written = db.batch(row.upsert()).await;
            if index.erased.get() {
                // Deleted while the write was on its way: take the row out again.
                if let Err(e) = db.batch(delete_row(&row.thread_id)).await {
                    self.platform.log_error(&format!(
                        "could not remove a deleted thread's index row: {e}"
                    ));
                }
                break;
            }
            match written {
                Ok(_) => self.store_index_dirty(false),
                Err(e) => {
                    self.platform
                        .log_error(&format!("could not write the thread index: {e}"));
                    index.due.set(true);
                    self.store_index_dirty(true);
                    // A thread that goes quiet after a failed write would otherwise keep a
                    // stale row until its next change: retry a few times with backoff (an
                    // evicted instance leaves the dirty flag to the next contact).
                    failures += 1;
                    if failures > INDEX_RETRIES {
                        break;
                    }
                    self.platform
                        .sleep(INDEX_RETRY_MS << (2 * (failures - 1)))
                        .await;
                }
            }
        }
        index.writing.set(false);
    }

    /// The row to write: the one followed from frames, or read from the thread when this
    /// instance does not know it (or something changed that frames do not show).
    fn current_index_row(&self) -> Option<IndexRow> {
        let index = &self.index;
        let known = index.row.borrow().clone();
        if let Some(row) = known.filter(|_| !index.resync.get()) {
            return Some(row);
        }
        let read = self.open(self.platform.sql(), false).and_then(|t| {
            let summary = t.summary()?;
            let (first_message, dirty) = t.index_facts()?;
            Ok((summary, first_message, dirty))
        });
        match read {
            Ok((summary, first_message, dirty)) => {
                let title = first_message.map(|m| crate::api::thread_index::title_of(&m));
                let mut row = IndexRow::from_summary(&summary, title);
                // Never older than a row this instance wrote from frames (their times are the
                // flushes', a little after the thread's): D1 ignores a write that goes back.
                if let Some(known) = index.row.borrow().as_ref() {
                    row.updated_at = row.updated_at.max(known.updated_at);
                }
                *index.row.borrow_mut() = Some(row.clone());
                index.resync.set(false);
                index.dirty_stored.set(Some(dirty));
                Some(row)
            }
            Err(e) => {
                // No thread here (deleted, never created), or storage fails: nothing to copy.
                if !matches!(e, crate::engine::thread::ThreadError::NotFound) {
                    self.platform
                        .log_error(&format!("could not read the thread for its index row: {e}"));
                }
                index.due.set(false);
                None
            }
        }
    }

    /// Stores the dirty flag when it differs from what the thread holds (so a write that
    /// succeeds costs the thread no statement).
    fn store_index_dirty(&self, dirty: bool) {
        if self.index.dirty_stored.get() == Some(dirty) {
            return;
        }
        let stored = self
            .open(self.platform.sql(), false)
            .and_then(|t| t.set_index_dirty(dirty));
        match stored {
            Ok(()) => self.index.dirty_stored.set(Some(dirty)),
            Err(e) => self
                .platform
                .log_error(&format!("could not record the index's dirty flag: {e}")),
        }
    }

    /// A new instance's first contact: a write a previous instance could not make is
    /// retried now (one read of the flag per instance).
    pub(super) fn retry_dirty_index(&self) {
        let dirty = self
            .open(self.platform.sql(), false)
            .and_then(|t| t.index_facts());
        if let Ok((_, true)) = dirty {
            self.index.dirty_stored.set(Some(true));
            self.index.changed_unseen();
            self.schedule_index_write();
        }
    }

    /// The thread is about to be deleted (`DELETE /api/threads/:id`): its id (404 when this
    /// object holds none). From now on this instance writes nothing to the index and cuts a
    /// streaming model call short.
    pub fn forget_thread(&self) -> Result<String, ApiError> {
        let thread_id = self.with_thread(|t| Ok(t.summary()?.thread_id))?;
        self.index.erased.set(true);
        self.stop_requested.set(true);
        Ok(thread_id)
    }

    /// The host erased the thread's storage: nothing this instance remembers of it survives,
    /// so every later request finds no thread (404).
    pub fn thread_erased(&self) {
        self.schema_ready.set(false);
        // The host deleted the alarm with the storage.
        self.alarm_changes();
        *self.cache.borrow_mut() = Rc::default();
        *self.hooks_recorded.borrow_mut() = None;
        *self.index.row.borrow_mut() = None;
        self.index.dirty_stored.set(None);
        self.tool_host.live_chunks().clear();
    }
}

/// `GET /api/threads`: one page of the index, newest first.
pub async fn list_threads(
    db: &dyn ConfigDb,
    query: &[(String, String)],
) -> Result<Value, ApiError> {
    let query = ListQuery::parse(query)?;
    let rows = db
        .batch(vec![query.statement()])
        .await
        .map_err(|e| unavailable(db, e))?;
    let rows = rows.into_iter().next().unwrap_or_default();
    query.answer(&rows).map_err(|e| unavailable(db, e))
}

/// Removes a thread's row from the index (after its object erased it).
pub async fn delete_from_index(db: &dyn ConfigDb, thread_id: &str) -> Result<(), ApiError> {
    db.batch(delete_row(thread_id))
        .await
        .map(|_| ())
        .map_err(|e| unavailable(db, e))
}

/// A 500 whose cause goes to the operator's log only.
fn unavailable(db: &dyn ConfigDb, cause: impl std::fmt::Display) -> ApiError {
    db.log_error(&format!("the thread index is unavailable: {cause}"));
    ApiError::internal("the thread index is unavailable")
}
