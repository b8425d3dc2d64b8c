//! The history the model sees: the newest top-level, visible, completed messages within a
//! token budget; and a per-object cache of it, so a long thread does not re-read its history
//! for every model call.
//!
//! The cache holds the last result and the position up to which it has read. A later call
//! reads only the rows appended since (one indexed query) and trims the front to the budget.
//! Anything else that changes the history (a message updated after it was final, a message
//! inserted before others) bumps the thread row's `history_version` by trigger (schema v5),
//! which the step's own write returns just before the read (`Store::add_step`): a different
//! version means a full read. Writes through any view, or by hand, are seen, since the
//! triggers are in SQLite.
//!
//! Messages the object appends itself are remembered by the cache as they are stored (and
//! their final text when a pending reply completes), so the next call need not read them
//! back: it takes them when the thread's count of visible messages (kept by trigger,
//! returned by the same `add_step`) says that nothing else was appended meanwhile. Messages
//! are never deleted, so an equal count means the same rows.

use std::cell::RefCell;
use std::rc::Rc;

use super::*;
use crate::llm::memo::HistoryMemo;

/// Walks messages newest first and keeps those that fit the budget. The newest message is
/// always kept, and a tool result pulls in its call even past the budget; older results
/// whose call was cut are dropped by [`crate::engine::thread::repair_history`], so a call
/// and its results stay together or go together.
pub(super) struct BudgetWalk {
    budget: u64,
    used: u64,
    /// Results taken whose call is not taken yet: the cut waits for the call.
    open: Vec<String>,
    /// How many messages were taken.
    taken: usize,
    /// How many were taken past the budget while looking for open calls.
    over: usize,
}

/// How many messages past the budget a walk takes while looking for the calls of results it
/// took. A result whose call is further back (or nowhere: an injected `tool` message naming an
/// unknown call) does not make the walk read the whole history; it is dropped with its call
/// (`repair_history`).
const MAX_OVER_BUDGET: usize = 128;

impl BudgetWalk {
    pub(super) fn new(budget: u64) -> Self {
        BudgetWalk {
            budget,
            used: 0,
            open: Vec::new(),
            taken: 0,
            over: 0,
        }
    }

    /// Offers the next older completed message; `false` when the walk stops before it (the
    /// caller keeps the messages it took).
    pub(super) fn offer(&mut self, m: &Message) -> bool {
        self.used += estimate_tokens(m);
        if self.used > self.budget && self.taken > 0 {
            if self.open.is_empty() || self.over >= MAX_OVER_BUDGET {
                return false;
            }
            self.over += 1;
        }
        if let (Role::Tool, Some(id)) = (m.role, &m.tool_call_id) {
            self.open.push(id.clone());
        }
        self.open
            .retain(|id| !m.tool_calls.iter().any(|c| &c.id == id));
        self.taken += 1;
        true
    }
}

/// The newest of `messages` (oldest first) that fit `budget`, by the same walk a history read
/// makes: the newest is always kept, and a result keeps its call (for messages already in
/// memory, such as the conversation a sub-prompt inherits from its caller).
pub fn newest_within(messages: Vec<Message>, budget: u64) -> Vec<Message> {
    let mut walk = BudgetWalk::new(budget);
    let kept = messages.iter().rev().take_while(|m| walk.offer(m)).count();
    let skip = messages.len() - kept;
    messages.into_iter().skip(skip).collect()
}

/// A full read: the history, whether the walk read every row without stopping, and the
/// position up to which it is final (`None` when a pending message was in the way, so the
/// result must not be extended from it).
struct FullRead {
    history: Vec<Message>,
    exhausted: bool,
    final_up_to: Option<f64>,
}

/// What a thread object remembers between its views: the last history read (see the module
/// docs) and the recorded hook config. Held by the driver for the object's life and handed to
/// each [`crate::engine::thread::Thread`] view.
///
/// The hook config is written only through [`crate::engine::thread::Thread::set_hook_config`],
/// which updates this cache when its view holds it; one object is the thread's only writer, so
/// after the first read a view needs no statement to know its hooks.
#[derive(Debug, Default)]
pub struct ThreadCache {
    history: RefCell<Option<Cached>>,
    /// `None`: not known yet; `Some(None)`: none recorded.
    hook_config: RefCell<Option<Option<HookConfig>>>,
    /// No model reply is left `pending` by this object: it checked since it started, and
    /// every reply it began since was stored as final (a crash leaves a pending reply only
    /// in an object that is gone; the next instance starts with this `false` and checks).
    replies_settled: std::cell::Cell<bool>,
    /// This object stopped the thread. Only an object stops its thread (a client's `stop`,
    /// a stop tool or `max_turns` at the end of a turn, all through its cached views), so a
    /// model call that started on a running thread was stopped since iff this is set.
    stopped: std::cell::Cell<bool>,
    /// Until when (ms) this object does not try compaction again, after one failed.
    compaction_paused_until: std::cell::Cell<i64>,
    /// The history budget a provider's context-overflow error taught (smaller than the
    /// model's configured one), and the turn in which it was learnt (one retry per turn).
    overflow: std::cell::Cell<Option<(i64, u64)>>,
    /// The JSON the model calls' wire format wrote for the stored messages they sent.
    wire: HistoryMemo,
}

/// The running prompt's name and its hook names.
pub(crate) type HookConfig = (String, Vec<String>);

impl ThreadCache {
    /// The hook config, when this object has read or written it.
    pub(crate) fn known_hook_config(&self) -> Option<Option<HookConfig>> {
        self.hook_config.borrow().clone()
    }

    /// Whether no model reply can be pending (see the field).
    pub(crate) fn replies_settled(&self) -> bool {
        self.replies_settled.get()
    }

    /// Records that a reply began (`false`) or that none is pending any more (`true`).
    pub(crate) fn set_replies_settled(&self, settled: bool) {
        self.replies_settled.set(settled);
    }

    /// Whether this object stopped the thread (see the field).
    pub(crate) fn stopped_here(&self) -> bool {
        self.stopped.get()
    }

    /// Records that this object stopped the thread.
    pub(crate) fn note_stopped(&self) {
        self.stopped.set(true);
    }

    /// Whether compaction waits, after a failed one, at `now`.
    pub(crate) fn compaction_paused(&self, now: i64) -> bool {
        now < self.compaction_paused_until.get()
    }

    /// No compaction before `until` (ms).
    pub(crate) fn pause_compaction(&self, until: i64) {
        self.compaction_paused_until.set(until);
    }

    /// The budget a context overflow taught, if any, and the turn it happened in.
    pub(crate) fn overflow(&self) -> Option<(i64, u64)> {
        self.overflow.get()
    }

    /// A context overflow in `turn`: histories are held to `budget` from now on.
    pub(crate) fn note_overflow(&self, turn: i64, budget: u64) {
        self.overflow.set(Some((turn, budget)));
    }

    /// What the wire format wrote for this thread's stored messages (see
    /// [`crate::llm::memo`]): for model calls whose history is verbatim.
    pub(crate) fn wire_memo(&self) -> &HistoryMemo {
        &self.wire
    }

    /// Remembers the hook config as stored (`None` after a failed write: read it again).
    pub(crate) fn remember_hook_config(&self, config: Option<Option<HookConfig>>) {
        *self.hook_config.borrow_mut() = config;
    }
}

#[derive(Debug)]
struct Cached {
    version: i64,
    budget: u64,
    /// Rows up to this position have been read (and are final).
    read_up_to: f64,
    /// The last result, oldest first; shared with the model call it was given to (and copied
    /// on write only if that call still holds it).
    history: Rc<Vec<Message>>,
    /// It holds every qualifying message of the thread (the budget never cut it).
    whole: bool,
    /// Top-level visible rows (any status) at positions up to `read_up_to`.
    rows_upto: i64,
    /// Visible messages this object appended since, in order, with their positions.
    appended: Vec<(f64, Message)>,
    /// More were appended than `appended` keeps: read them instead.
    appended_lost: bool,
}

impl Cached {
    /// The next visible row after `read_up_to`, final (read, or appended by this object):
    /// counted, and kept when the model sees it.
    fn take_row(&mut self, position: f64, m: Message) {
        self.read_up_to = position;
        self.rows_upto += 1;
        if m.status == MessageStatus::Completed {
            Rc::make_mut(&mut self.history).push(m);
        }
    }
}

/// Appended messages a cache remembers between model calls; past this, it reads them.
const MAX_APPENDED: usize = 32;

impl ThreadCache {
    /// This object stored `m` at `position` (see the module docs).
    pub(crate) fn note_appended(&self, position: f64, m: &Message) {
        if m.depth != 0 || m.silent {
            return;
        }
        if let Some(c) = self.history.borrow_mut().as_mut() {
            if c.appended.len() >= MAX_APPENDED {
                c.appended.clear();
                c.appended_lost = true;
            }
            if !c.appended_lost {
                c.appended.push((position, m.clone()));
            }
        }
    }

    /// This object rewrote `m` (a pending reply completed or failed). Only what
    /// `Store::update_message` stores is taken (content, tool calls, status): the rest of `m`
    /// may differ from the row (a hook's changes to other fields are not written).
    pub(crate) fn note_updated(&self, m: &Message) {
        if let Some(c) = self.history.borrow_mut().as_mut() {
            if let Some((_, noted)) = c.appended.iter_mut().find(|(_, a)| a.id == m.id) {
                noted.content.clone_from(&m.content);
                noted.tool_calls.clone_from(&m.tool_calls);
                noted.status = m.status;
            }
        }
    }
}

impl Store<'_> {
    /// The newest top-level, non-silent, completed messages whose estimated tokens fit in
    /// `budget`, oldest first. Read newest-first in pages through the `(depth, silent,
    /// position)` index, so a long thread costs only what is sent.
    pub fn model_history_within(&self, budget: u64) -> Result<Vec<Message>, SqlError> {
        Ok(self.read_history(budget)?.history)
    }

    /// [`Store::model_history_within`] through `cache`: only rows appended since the cached
    /// read are read (none when the object appended them all itself: `visible` is the
    /// thread's count of top-level visible messages now), unless the thread's
    /// `history_version` moved or the budget changed.
    pub fn model_cached(
        &self,
        budget: u64,
        version: i64,
        visible: i64,
        cache: &ThreadCache,
    ) -> Result<Rc<Vec<Message>>, SqlError> {
        let cached = cache.history.borrow_mut().take();
        if let Some(mut c) = cached.filter(|c| c.version == version && c.budget == budget) {
            let appended = std::mem::take(&mut c.appended);
            let lost = std::mem::replace(&mut c.appended_lost, false);
            let all_ours = !lost
                && c.rows_upto + appended.len() as i64 == visible
                && appended
                    .iter()
                    .all(|(_, m)| m.status != MessageStatus::Pending);
            if all_ours {
                for (position, m) in appended {
                    c.take_row(position, m);
                }
            } else {
                let rows = self.sql.exec(
                    &format!(
                        "SELECT {MESSAGE_COLUMNS}, position FROM messages
                         WHERE depth = 0 AND silent = 0 AND position > ?
                         ORDER BY position ASC"
                    ),
                    &[c.read_up_to.into()],
                )?;
                for r in &rows {
                    let m = message_from_row(r)?;
                    if m.status == MessageStatus::Pending {
                        break; // read again once it is final
                    }
                    c.take_row(r.real(MESSAGE_COLUMN_COUNT)?, m);
                }
            }
            let mut walk = BudgetWalk::new(budget);
            let taken = c.history.iter().rev().take_while(|m| walk.offer(m)).count();
            let cut = taken < c.history.len();
            // A walk that ran out of cached messages would have read older rows: only a
            // cache holding the whole history can answer it.
            if cut || c.whole {
                if cut {
                    let history = Rc::make_mut(&mut c.history);
                    history.drain(..history.len() - taken);
                }
                c.whole &= !cut;
                let history = Rc::clone(&c.history);
                *cache.history.borrow_mut() = Some(c);
                return Ok(history);
            }
        }
        let read = self.read_history(budget)?;
        let history = Rc::new(read.history);
        if let Some(read_up_to) = read.final_up_to {
            *cache.history.borrow_mut() = Some(Cached {
                version,
                budget,
                read_up_to,
                history: Rc::clone(&history),
                whole: read.exhausted,
                // Every visible row is at or before the newest one read.
                rows_upto: visible,
                appended: Vec::new(),
                appended_lost: false,
            });
        }
        Ok(history)
    }

    fn read_history(&self, budget: u64) -> Result<FullRead, SqlError> {
        const PAGE: u32 = 64;
        let mut walk = BudgetWalk::new(budget);
        let mut kept: Vec<Message> = Vec::new(); // newest first
        let mut before = f64::MAX;
        let mut newest: Option<f64> = None;
        let mut pending = false;
        let mut exhausted = true;
        'pages: loop {
            let rows = self.sql.exec(
                &format!(
                    "SELECT {MESSAGE_COLUMNS}, position FROM messages
                     WHERE depth = 0 AND silent = 0 AND position < ?
                     ORDER BY position DESC LIMIT ?"
                ),
                &[before.into(), PAGE.into()],
            )?;
            for r in &rows {
                before = r.real(MESSAGE_COLUMN_COUNT)?;
                newest.get_or_insert(before);
                let m = message_from_row(r)?;
                pending |= m.status == MessageStatus::Pending;
                if m.status != MessageStatus::Completed {
                    continue;
                }
                if !walk.offer(&m) {
                    exhausted = false;
                    break 'pages;
                }
                kept.push(m);
            }
            if rows.len() < PAGE as usize {
                break;
            }
        }
        kept.reverse();
        Ok(FullRead {
            history: kept,
            exhausted,
            final_up_to: (!pending).then_some(newest.unwrap_or(0.0)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_update_is_noted_as_stored() {
        let cache = ThreadCache::default();
        *cache.history.borrow_mut() = Some(Cached {
            version: 0,
            budget: 1_000,
            read_up_to: 0.0,
            history: Rc::default(),
            whole: true,
            rows_upto: 0,
            appended: Vec::new(),
            appended_lost: false,
        });
        let pending = Message {
            status: MessageStatus::Pending,
            ..Message::new(Role::Assistant, "", 1)
        };
        cache.note_appended(1.0, &pending);
        // As a hook may hand it back: the three stored fields changed, and others too.
        let mut done = pending.clone();
        done.content = "the answer".into();
        done.status = MessageStatus::Completed;
        done.name = Some("renamed by a hook".into());
        cache.note_updated(&done);
        let history = cache.history.borrow();
        let (_, noted) = &history.as_ref().unwrap().appended[0];
        assert_eq!(noted.content, "the answer");
        assert_eq!(noted.status, MessageStatus::Completed);
        assert_eq!(
            noted.name, None,
            "not stored by update_message, so not noted"
        );
    }
}
