//! An incremental Server-Sent Events parser (the WHATWG event-stream format).
//!
//! Bytes arrive in arbitrary pieces: a frame, a line or even a UTF-8 character may be split
//! across network chunks. The parser buffers only the unfinished line and the event being
//! built, so memory stays bounded by one event.

use crate::llm::stream::ProviderError;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field, if any (Anthropic uses it; OpenAI does not).
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// The stream broke the format in a way we refuse to guess about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseError {
    /// One event grew beyond the limit.
    EventTooLarge(usize),
    /// A line was not valid UTF-8.
    InvalidUtf8,
}

impl std::fmt::Display for SseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SseError::EventTooLarge(n) => write!(f, "SSE event larger than {n} bytes"),
            SseError::InvalidUtf8 => f.write_str("SSE stream is not valid UTF-8"),
        }
    }
}

impl std::error::Error for SseError {}

/// A stream that breaks the SSE format is a malformed answer.
impl From<SseError> for ProviderError {
    fn from(e: SseError) -> Self {
        ProviderError::Malformed(e.to_string())
    }
}

/// Largest event we accept (a tool call's arguments arrive in many small events, so 1 MiB is
/// far more than any provider sends in one).
pub const MAX_EVENT_BYTES: usize = 1 << 20;

/// Incremental parser state.
#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    event: Option<String>,
    data: String,
    has_data: bool,
    last_was_cr: bool,
}

impl SseParser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds the next bytes and returns every event completed by them. On an error the
    /// events completed earlier in the same call are dropped; a consumer that must see them
    /// (to report the first error in the stream, whatever the network's pieces) uses
    /// [`SseParser::feed_each`].
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<SseEvent>, SseError> {
        let mut out = Vec::new();
        self.feed_each(bytes, |ev| {
            out.push(ev);
            Ok::<(), SseError>(())
        })?;
        Ok(out)
    }

    /// Feeds the next bytes, handing each event to `on_event` as soon as it is complete, in
    /// stream order, and stopping at the first error (the parser's or `on_event`'s): so the
    /// events seen and the error met are the same however the stream was cut.
    pub fn feed_each<E: From<SseError>>(
        &mut self,
        bytes: &[u8],
        mut on_event: impl FnMut(SseEvent) -> Result<(), E>,
    ) -> Result<(), E> {
        for &b in bytes {
            // A "\r\n" pair is one line end; the "\n" after a "\r" was already handled.
            if self.last_was_cr && b == b'\n' {
                self.last_was_cr = false;
                continue;
            }
            self.last_was_cr = b == b'\r';
            if b == b'\n' || b == b'\r' {
                let line = std::mem::take(&mut self.line);
                if let Some(ev) = self.process_line(&line)? {
                    on_event(ev)?;
                }
            } else {
                self.line.push(b);
                if self.line.len() + self.data.len() > MAX_EVENT_BYTES {
                    return Err(SseError::EventTooLarge(MAX_EVENT_BYTES).into());
                }
            }
        }
        Ok(())
    }

    /// Whether bytes of an unfinished event are buffered (a stream ending now was cut short).
    pub fn has_partial(&self) -> bool {
        !self.line.is_empty() || self.has_data
    }

    fn process_line(&mut self, line: &[u8]) -> Result<Option<SseEvent>, SseError> {
        if line.is_empty() {
            if !self.has_data {
                self.event = None;
                return Ok(None);
            }
            self.has_data = false;
            return Ok(Some(SseEvent {
                event: self.event.take(),
                data: std::mem::take(&mut self.data),
            }));
        }
        let line = std::str::from_utf8(line).map_err(|_| SseError::InvalidUtf8)?;
        if line.starts_with(':') {
            return Ok(None); // comment / keep-alive
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
                if self.data.len() > MAX_EVENT_BYTES {
                    return Err(SseError::EventTooLarge(MAX_EVENT_BYTES));
                }
            }
            "event" => self.event = Some(value.to_owned()),
            _ => {} // id, retry and unknown fields do not matter for model streams
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut p = SseParser::new();
        chunks.iter().flat_map(|c| p.feed(c).unwrap()).collect()
    }

    fn data(s: &str) -> SseEvent {
        SseEvent {
            event: None,
            data: s.into(),
        }
    }

    #[test]
    fn whole_frames() {
        assert_eq!(
            all(&[b"data: a\n\ndata: b\n\n"]),
            vec![data("a"), data("b")]
        );
    }

    #[test]
    fn split_anywhere_gives_the_same_events() {
        let stream =
            "event: x\ndata: {\"k\":\"h\u{e9}llo\"}\r\n\r\n: keep-alive\n\ndata: [DONE]\n\n";
        let expected = all(&[stream.as_bytes()]);
        assert_eq!(expected.len(), 2);
        let bytes = stream.as_bytes();
        for cut in 0..bytes.len() {
            assert_eq!(
                all(&[&bytes[..cut], &bytes[cut..]]),
                expected,
                "cut at {cut}"
            );
        }
        let singles: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(all(&singles), expected);
    }

    #[test]
    fn multi_line_data_and_fields() {
        let evs = all(&[b"event: ping\ndata:a\ndata: b\nid: 7\nretry: 10\n\n"]);
        assert_eq!(
            evs,
            vec![SseEvent {
                event: Some("ping".into()),
                data: "a\nb".into()
            }]
        );
    }

    #[test]
    fn partial_tail_is_reported() {
        let mut p = SseParser::new();
        assert!(p.feed(b"data: {\"a\":").unwrap().is_empty());
        assert!(p.has_partial());
        let mut q = SseParser::new();
        q.feed(b"data: x\n\n").unwrap();
        assert!(!q.has_partial());
    }

    #[test]
    fn oversized_event_is_an_error() {
        let mut p = SseParser::new();
        let big = vec![b'a'; MAX_EVENT_BYTES + 10];
        assert!(matches!(p.feed(&big), Err(SseError::EventTooLarge(_))));
    }

    #[test]
    fn feed_each_hands_over_the_events_before_an_error() {
        let mut stream = b"data: a\n\ndata: b\n\n".to_vec();
        stream.extend(vec![b'x'; MAX_EVENT_BYTES + 1]);
        let mut seen = Vec::new();
        let fed = SseParser::new().feed_each(&stream, |ev| {
            seen.push(ev.data);
            Ok::<(), SseError>(())
        });
        assert_eq!(fed, Err(SseError::EventTooLarge(MAX_EVENT_BYTES)));
        assert_eq!(seen, ["a", "b"]);
        // `feed` drops them with the error; a consumer's own error stops the feed at once.
        assert!(SseParser::new().feed(&stream).is_err());
        let mut calls = 0;
        let stopped = SseParser::new().feed_each(&stream, |_| {
            calls += 1;
            Err(SseError::InvalidUtf8)
        });
        assert_eq!((stopped, calls), (Err(SseError::InvalidUtf8), 1));
    }

    #[test]
    fn invalid_utf8_is_an_error() {
        let mut p = SseParser::new();
        assert_eq!(p.feed(b"data: \xff\xfe\n\n"), Err(SseError::InvalidUtf8));
    }
}
