//! What a wire format may keep of the messages it wrote, between one thread's model calls.
//!
//! A thread sends its whole history (within the budget) on every model call, and the history
//! only grows between calls: the same messages are written into JSON again and again. On a
//! 200-turn thread that writing was a seventh of the Worker's CPU (`perf`, tool turns; the
//! string escaping alone 5.5%). A [`HistoryMemo`] keeps each message's JSON as the format
//! wrote it, in history order, so the next call writes only the messages that are new.
//!
//! Reuse is by message id, which is sound only for messages exactly as stored: the caller
//! hands a memo to a request only when its history is the thread's stored messages, nothing
//! rewritten on the way (no hook, no other side's view, no repaired pair), and names the
//! history version they were read at (a rewrite of stored messages moves it). Each entry also
//! keeps a fingerprint of the message (role, lengths, call count) as a second guard.

use std::cell::RefCell;

use crate::values::message::{Message, Role};

/// The JSON each message of a thread's last request was written as, by one wire format.
/// Held for the thread object's life; see the module docs for when a request may use it.
#[derive(Debug, Default)]
pub struct HistoryMemo {
    state: RefCell<MemoState>,
}

#[derive(Debug, Default)]
struct MemoState {
    /// Which format wrote the entries, and at which history version.
    key: Option<(&'static str, i64)>,
    /// The last request's messages that had a memo, in history order.
    entries: Vec<Entry>,
}

#[derive(Debug)]
struct Entry {
    id: String,
    fingerprint: Fingerprint,
    json: Box<str>,
}

/// What must not differ between a message and the one an entry was written from, beyond its
/// id: a second guard against a caller that passed a rewritten message.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
struct Fingerprint {
    role: Role,
    content: usize,
    calls: usize,
    call_bytes: usize,
    name: Option<usize>,
    tool_call_id: Option<usize>,
    parts: usize,
}

impl Fingerprint {
    fn of(m: &Message) -> Self {
        Fingerprint {
            role: m.role,
            content: m.content.len(),
            calls: m.tool_calls.len(),
            call_bytes: m
                .tool_calls
                .iter()
                .map(|c| c.id.len() + c.name.len() + c.arguments.len())
                .sum(),
            name: m.name.as_ref().map(String::len),
            tool_call_id: m.tool_call_id.as_ref().map(String::len),
            parts: m.parts.len(),
        }
    }
}

/// A request's permission to use a memo: the memo and the history version its messages were
/// read at.
#[derive(Debug, Clone, Copy)]
pub struct MemoUse<'a> {
    pub memo: &'a HistoryMemo,
    pub version: i64,
}

impl HistoryMemo {
    /// Writes the request body with `write`, which gets each message's JSON where the memo
    /// has it (`None`: write it afresh), after the memo took in `history`: an entry for every
    /// message `memoable` accepts, written by `one` when it had none. Entries of messages not
    /// in `history` are dropped. `format` names the wire format (entries of another are
    /// dropped).
    pub(crate) fn write_with<T>(
        &self,
        format: &'static str,
        version: i64,
        history: &[Message],
        memoable: impl Fn(&Message) -> bool,
        one: impl Fn(&Message) -> String,
        write: impl FnOnce(&[Option<&str>]) -> T,
    ) -> T {
        let mut state = self.state.borrow_mut();
        if state.key != Some((format, version)) {
            state.entries.clear();
            state.key = Some((format, version));
        }
        // The history is a window onto the thread's messages: newer ones appended since, older
        // ones cut by the budget. The old entries line up from the first message's own.
        let old = std::mem::take(&mut state.entries);
        let start = history
            .first()
            .and_then(|first| old.iter().position(|e| e.id == first.id))
            .unwrap_or(old.len());
        let mut old = old.into_iter().skip(start).peekable();
        let mut entries = Vec::with_capacity(history.len());
        let mut slots: Vec<Option<usize>> = Vec::with_capacity(history.len());
        for m in history {
            if !memoable(m) {
                slots.push(None);
                continue;
            }
            let fingerprint = Fingerprint::of(m);
            let kept = match old.peek() {
                Some(e) if e.id == m.id => old.next().filter(|e| e.fingerprint == fingerprint),
                _ => None,
            };
            let entry = kept.unwrap_or_else(|| Entry {
                id: m.id.clone(),
                fingerprint,
                json: one(m).into_boxed_str(),
            });
            slots.push(Some(entries.len()));
            entries.push(entry);
        }
        let written: Vec<Option<&str>> =
            slots.iter().map(|s| s.map(|i| &*entries[i].json)).collect();
        let out = write(&written);
        drop(written);
        state.entries = entries;
        out
    }

    /// How many messages the memo holds (for tests).
    pub fn len(&self) -> usize {
        self.state.borrow().entries.len()
    }

    /// Whether the memo holds no message.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
