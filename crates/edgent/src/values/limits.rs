//! Limits on what clients may send.

/// Largest request body (and WebSocket frame) accepted: 64 KiB.
pub const MAX_BODY_BYTES: usize = 64 * 1024;
/// Largest message content accepted, in bytes.
pub const MAX_CONTENT_BYTES: usize = 32 * 1024;
/// Largest page of messages.
pub const MAX_PAGE: u32 = 200;
/// Page size when none is asked for.
pub const DEFAULT_PAGE: u32 = 50;
