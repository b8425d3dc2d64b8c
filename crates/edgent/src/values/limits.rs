//! Limits on what clients may send, and on what the engine stores.
//!
//! A Durable Object's SQLite refuses a string or row over 2 MB (`SQLITE_TOOBIG`). Everything a
//! model, a tool or a workflow step produces is capped well below that before it is stored,
//! and the cap is a clear, final error: a breach is never retried and never leaves a call
//! half-finished.

/// Largest request body (and WebSocket frame) accepted: 64 KiB.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// Largest body of `POST /api/threads/:id/chat`: the AI SDK posts the whole conversation it
/// holds on every send (only its newest user message is taken), so a long chat outgrows
/// [`MAX_BODY_BYTES`] long before it means anything.
pub const MAX_CHAT_BODY_BYTES: usize = 4 * 1024 * 1024;
/// Largest message content accepted, in bytes.
pub const MAX_CONTENT_BYTES: usize = 32 * 1024;
/// Largest page of messages.
pub const MAX_PAGE: u32 = 200;
/// Page size when none is asked for.
pub const DEFAULT_PAGE: u32 = 50;

/// The Durable Object's limit on one string or row (SQLite's `SQLITE_LIMIT_LENGTH` there; the
/// host harness sets the same).
pub const SQLITE_MAX_LENGTH: usize = 2_000_000;
/// Largest model reply: its text and its tool calls' arguments together, held in memory while
/// it streams. A reply that grows past it fails the model call (`model_reply_too_large`).
pub const MAX_REPLY_BYTES: usize = 1024 * 1024;
/// Largest tool result (its text and media): a bigger one is stored as an error result.
pub const MAX_TOOL_RESULT_BYTES: usize = 1024 * 1024;
/// Largest recorded workflow step value (JSON): a bigger one fails the workflow.
pub const MAX_STEP_VALUE_BYTES: usize = 1024 * 1024;
/// Most tool calls in one model reply: a reply with more fails the model call
/// (`model_reply_too_large`) instead of fanning out without bound.
pub const MAX_TOOL_CALLS_PER_REPLY: usize = 128;
/// Most bytes of message content, tool calls and parts in one page of messages: a page of
/// large messages holds fewer than its `limit` (and says `has_more`), so a page of 200 replies
/// of 1 MiB is never built in memory.
pub const MAX_PAGE_BYTES: i64 = 4 * 1024 * 1024;
/// Most tool calls of one reply run at once: a reply with more (up to
/// [`MAX_TOOL_CALLS_PER_REPLY`]) runs them in batches of this many, in call order, so one
/// reply cannot open a hundred fetches and timers together.
pub const MAX_CONCURRENT_TOOL_RUNS: usize = 16;
/// Most sockets open on one thread at once: one more is refused (429 `too_many_sockets`)
/// before it is accepted, so a client looping on connect cannot grow a thread's fan-out (every
/// frame goes to every socket) without bound.
pub const MAX_SOCKETS_PER_THREAD: usize = 64;
/// Deepest chain of tools calling tools (`flow.call_tool`, TOML workflow steps): a workflow
/// that calls itself fails at this depth instead of overflowing the stack.
pub const MAX_CALL_NESTING: u32 = 8;
/// Deepest chain of child threads (an agent tool's conversation is one level below its
/// caller's): an agent that calls itself, directly or through others, gets an error result
/// at this depth instead of recursing without bound.
pub const MAX_THREAD_NESTING: u32 = 4;
/// Deepest sub-prompt: a prompt called from a top-level reply runs at depth 1, a prompt that
/// sub-prompt calls at depth 2, and so on to this depth, where calling a prompt is an error
/// result (each level may make up to 10 model calls, so the bound keeps a call's cost sane).
pub const MAX_SUB_PROMPT_DEPTH: u32 = 3;
/// Longest workflow sleep: a longer one is cut to it (the alarm that wakes it must stay in a
/// sane range; a workflow that needs longer sleeps again).
pub const MAX_SLEEP_MS: i64 = 365 * 24 * 60 * 60 * 1000;
/// Longest model timeout (`first_chunk_timeout_ms`, `stall_timeout_ms`): one hour, well inside
/// a timer's range (a value past 2^31 ms would wrap and fire at once).
pub const MAX_MODEL_TIMEOUT_MS: u32 = 60 * 60 * 1000;
/// Longest timer the runtime arms (JavaScript timers wrap past 2^31 - 1 ms).
pub const MAX_TIMER_MS: u64 = i32::MAX as u64;
/// Longest tool error text kept: a longer one is cut (on a character boundary).
pub const MAX_ERROR_TEXT_BYTES: usize = 16 * 1024;

/// Most frames a thread's frame log keeps for resuming sockets (`?after=`): older ones are
/// pruned (a socket asking for them gets `reset`). Checked every 256 frames, so the log may
/// briefly hold up to 255 more.
pub const FRAME_LOG_MAX_FRAMES: i64 = 2_000;
/// Most bytes of frame text a thread's frame log keeps: the oldest frames past it are pruned,
/// like those past [`FRAME_LOG_MAX_FRAMES`].
pub const FRAME_LOG_MAX_BYTES: i64 = 4 * 1024 * 1024;

/// `text` cut to at most `max` bytes on a character boundary, marked when cut.
pub fn truncated(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if text.len() <= max {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    std::borrow::Cow::Owned(format!("{}… (cut at {max} bytes)", &text[..end]))
}
