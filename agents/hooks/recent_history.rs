//! `recent_history`: sends the model only the last [`KEEP`] messages of a long conversation,
//! to bound the cost and the context window of every call. Stored messages are unchanged.
//!
//! A history must not open with a tool result whose call was cut off (providers refuse it), so
//! leading `tool` messages of the slice are dropped as well: the slice may be a little shorter.

use edgent::prelude::*;

/// How many messages the model sees at most.
pub const KEEP: usize = 40;

/// Registered as `recent_history` (the file stem).
pub fn hook() -> Hook {
    Hook::prefilter_llm_history(|_ctx, history: Vec<Message>| Ok(recent(history, KEEP)))
}

/// The last `keep` messages of `history`, without leading `tool` messages.
pub fn recent(mut history: Vec<Message>, keep: usize) -> Vec<Message> {
    let mut start = history.len().saturating_sub(keep);
    while history.get(start).is_some_and(|m| m.role == Role::Tool) {
        start += 1;
    }
    history.drain(..start);
    history
}
