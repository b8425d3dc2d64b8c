//! `hide_system_messages`: drops `system` messages from the pages clients read, so context
//! notes injected for the model (`update_context` writes one) stay out of the chat UI.
//!
//! The messages are still stored and still sent to the model. A filtered page can hold fewer
//! messages than its `limit`; its `total` and `has_more` still count the stored messages.

use edgent::prelude::*;

/// Registered as `hide_system_messages` (the file stem).
pub fn hook() -> Hook {
    Hook::filter_messages(|_ctx, mut messages: Vec<Message>| {
        messages.retain(|m| m.role != Role::System);
        Ok(messages)
    })
}
