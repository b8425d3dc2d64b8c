//! The SSE parser ([`crate::llm::sse`]): the same bytes give the same events however they are
//! cut, and what it buffers stays bounded by one event.

use super::input::{chunks, Input};
use crate::llm::sse::{SseError, SseEvent, SseParser, MAX_EVENT_BYTES};

/// What feeding a stream gave: the events, the first error (feeding stops there) and whether
/// a partial event was left.
#[derive(Debug, PartialEq)]
struct Fed {
    events: Vec<SseEvent>,
    error: Option<SseError>,
    partial: bool,
}

fn feed<'a>(pieces: impl IntoIterator<Item = &'a [u8]>) -> Fed {
    let mut parser = SseParser::new();
    let mut events = Vec::new();
    for piece in pieces {
        match parser.feed(piece) {
            Ok(evs) => events.extend(evs),
            Err(e) => {
                return Fed {
                    events,
                    error: Some(e),
                    partial: parser.has_partial(),
                }
            }
        }
    }
    Fed {
        events,
        error: None,
        partial: parser.has_partial(),
    }
}

/// Input: 8 bytes of chunking seed, then the stream.
///
/// Fed whole, one byte at a time and in seeded pieces, the stream gives the same events, the
/// same partial tail and the same error. When there is an error, feeding stops at it, and a
/// call that fails returns none of the events completed earlier in the same call: so the
/// events before it are a prefix of what byte-by-byte feeding returned (which loses none).
/// Every event is within [`MAX_EVENT_BYTES`].
pub fn sse_chunking(data: &[u8]) {
    let mut input = Input::new(data);
    let seed = input.u64();
    let stream = input.rest();
    let whole = feed([stream]);
    let singles = feed(stream.chunks(1));
    let pieces = feed(chunks(stream, seed));
    assert_eq!(whole.error, singles.error, "whole vs byte by byte");
    assert_eq!(pieces.error, singles.error, "pieces vs byte by byte");
    if singles.error.is_none() {
        assert_eq!(whole, singles, "whole vs byte by byte");
        assert_eq!(pieces, singles, "pieces vs byte by byte");
    } else {
        for fed in [&whole, &pieces] {
            assert!(
                singles.events.starts_with(&fed.events),
                "events before the error are a prefix: {:?} vs {:?}",
                fed.events,
                singles.events
            );
        }
    }
    for ev in &singles.events {
        assert!(
            ev.data.len() <= MAX_EVENT_BYTES,
            "event data over the limit"
        );
        let name = ev.event.as_deref().unwrap_or_default();
        assert!(name.len() <= MAX_EVENT_BYTES, "event name over the limit");
    }
}

/// Bytes the parser may hold between two calls: the unfinished line, the event's data and its
/// name (each refused past [`MAX_EVENT_BYTES`]). Measured through `Debug`, the only view of
/// its buffers: a byte of the line prints as at most 5 characters (`255, `) and a character
/// of a string as at most 10 (`\u{10ffff}` for 4 bytes, `\u{1b}` for 1).
const MAX_DEBUG_CHARS: usize = 3 * 10 * MAX_EVENT_BYTES + 1024;

/// Input: 8 bytes of chunking seed, then a pattern (`x` when empty).
///
/// The pattern is repeated to three times [`MAX_EVENT_BYTES`] and fed in pieces of up to
/// 1 MiB: a pattern without a line end is one endless line, one with only `data:` lines an
/// endless event, one of comments an endless keep-alive. After every piece the parser's
/// buffers are within their bound (or it has refused the stream with an error).
pub fn sse_bounded(data: &[u8]) {
    let mut input = Input::new(data);
    let seed = input.u64();
    let pattern = input.rest();
    let pattern: &[u8] = if pattern.is_empty() { b"x" } else { pattern };
    let total = 3 * MAX_EVENT_BYTES;
    let stream: Vec<u8> = pattern.iter().copied().cycle().take(total).collect();
    let mut parser = SseParser::new();
    let mut since_dispatch = 0usize;
    let piece = 1024 * 1024;
    let mut state = seed | 1;
    let mut rest = stream.as_slice();
    while !rest.is_empty() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let size = (usize::try_from(state % piece as u64).unwrap_or(1) + 1).min(rest.len());
        let (now, tail) = rest.split_at(size);
        rest = tail;
        match parser.feed(now) {
            Ok(events) => {
                if events.is_empty() {
                    since_dispatch += size;
                } else {
                    since_dispatch = 0;
                }
                for ev in events {
                    assert!(
                        ev.data.len() <= MAX_EVENT_BYTES,
                        "event data over the limit"
                    );
                }
            }
            Err(SseError::EventTooLarge(_)) => return,
            // A pattern that is not UTF-8 fails at its first line end: fine, and bounded.
            Err(SseError::InvalidUtf8) => return,
        }
        let held = format!("{parser:?}").len();
        assert!(
            held <= MAX_DEBUG_CHARS,
            "the parser holds {held} debug characters after {since_dispatch} bytes without an event"
        );
    }
}
