//! The provider-neutral stream contract: every provider's parser emits [`StreamEvent`]s and
//! [`Completion`] folds them into one assistant reply.

use crate::values::limits::{MAX_REPLY_BYTES, MAX_TOOL_CALLS_PER_REPLY};
use crate::values::message::ToolCall;

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinishReason {
    /// A natural end of the answer.
    Stop,
    /// The model wants tools to run.
    ToolCalls,
    /// The output token limit was reached.
    Length,
    /// The provider filtered the output.
    ContentFilter,
    /// Anything else the provider said.
    Other(String),
}

impl FinishReason {
    /// Maps a provider's finish/stop reason string.
    pub fn parse(s: &str) -> Self {
        match s {
            "stop" | "end_turn" | "stop_sequence" => FinishReason::Stop,
            "tool_calls" | "tool_use" | "function_call" => FinishReason::ToolCalls,
            "length" | "max_tokens" => FinishReason::Length,
            "content_filter" | "refusal" => FinishReason::ContentFilter,
            other => FinishReason::Other(other.to_owned()),
        }
    }
}

/// One thing a model stream told us.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamEvent {
    /// More assistant text.
    TextDelta(String),
    /// A tool call begins at `index` (its position in this reply).
    ToolCallStart {
        /// Position of the call in the reply.
        index: usize,
        /// Call id (provider's, or generated when the provider gives none).
        id: String,
        /// Tool name.
        name: String,
    },
    /// More argument JSON for the call at `index`.
    ToolCallDelta {
        /// Position of the call in the reply.
        index: usize,
        /// A piece of the arguments' JSON text.
        arguments: String,
    },
    /// Token counts.
    Usage {
        /// Prompt tokens.
        input_tokens: u64,
        /// Completion tokens.
        output_tokens: u64,
    },
    /// The model finished this reply.
    Finish(FinishReason),
    /// The body ended properly (`[DONE]` or its equivalent).
    Done,
}

/// Why a model call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderError {
    /// The server answered with a non-success status.
    Http {
        /// HTTP status.
        status: u16,
        /// The provider's error message, if it gave one.
        message: String,
        /// `Retry-After` in milliseconds, if present.
        retry_after_ms: Option<u64>,
    },
    /// The request never got an answer (DNS, connection refused, reset).
    Network(String),
    /// No byte or no progress within the allowed time.
    Timeout(String),
    /// The stream ended before the model finished.
    Truncated,
    /// The provider reported an error inside the stream.
    Stream(String),
    /// The bytes did not follow the wire format.
    Malformed(String),
    /// Our side cannot make the call (missing secret, unknown provider).
    Config(String),
    /// The reply grew past [`MAX_REPLY_BYTES`](crate::values::limits::MAX_REPLY_BYTES): the
    /// call fails once (asking again would most likely stream the same).
    TooLarge(String),
    /// The final answer does not fit the prompt's `response_format`, also after it was sent
    /// back once with what is wrong.
    InvalidOutput(String),
}

/// How providers say the request did not fit the model's context window (lowercase).
const CONTEXT_OVERFLOW: &[&str] = &[
    "context_length_exceeded",
    "context length",
    "context window",
    "maximum context",
    "prompt is too long",
    "input is too long",
    "too many tokens",
];

impl ProviderError {
    /// Whether the provider refused the request because it did not fit the model's context
    /// window (OpenAI's `context_length_exceeded`, Anthropic's "prompt is too long", …).
    pub fn is_context_overflow(&self) -> bool {
        let text = match self {
            ProviderError::Http {
                status: 400 | 413 | 422,
                message,
                ..
            } => message,
            ProviderError::Stream(message) => message,
            _ => return false,
        };
        let text = text.to_ascii_lowercase();
        CONTEXT_OVERFLOW.iter().any(|p| text.contains(p))
    }

    /// Whether trying again (or a fallback) could help.
    pub fn is_retryable(&self) -> bool {
        match self {
            ProviderError::Http { status, .. } => {
                matches!(status, 408 | 409 | 429) || *status >= 500
            }
            ProviderError::Network(_)
            | ProviderError::Timeout(_)
            | ProviderError::Truncated
            | ProviderError::Stream(_) => true,
            ProviderError::Malformed(_)
            | ProviderError::Config(_)
            | ProviderError::TooLarge(_)
            | ProviderError::InvalidOutput(_) => false,
        }
    }

    /// The same error with `f` applied to its text (to redact secrets before it is shown).
    pub fn map_text(self, f: impl Fn(&str) -> String) -> Self {
        match self {
            ProviderError::Http {
                status,
                message,
                retry_after_ms,
            } => ProviderError::Http {
                status,
                message: f(&message),
                retry_after_ms,
            },
            ProviderError::Network(m) => ProviderError::Network(f(&m)),
            ProviderError::Timeout(m) => ProviderError::Timeout(f(&m)),
            ProviderError::Truncated => ProviderError::Truncated,
            ProviderError::Stream(m) => ProviderError::Stream(f(&m)),
            ProviderError::Malformed(m) => ProviderError::Malformed(f(&m)),
            ProviderError::Config(m) => ProviderError::Config(f(&m)),
            ProviderError::TooLarge(m) => ProviderError::TooLarge(f(&m)),
            ProviderError::InvalidOutput(m) => ProviderError::InvalidOutput(f(&m)),
        }
    }

    /// A stable machine-readable code for `error` frames.
    pub fn code(&self) -> &'static str {
        match self {
            ProviderError::Http { status: 429, .. } => "model_rate_limited",
            ProviderError::Http { .. } => "model_http_error",
            ProviderError::Network(_) => "model_unreachable",
            ProviderError::Timeout(_) => "model_timeout",
            ProviderError::Truncated => "model_stream_truncated",
            ProviderError::Stream(_) => "model_stream_error",
            ProviderError::Malformed(_) => "model_bad_response",
            ProviderError::Config(_) => "model_config",
            ProviderError::TooLarge(_) => "model_reply_too_large",
            ProviderError::InvalidOutput(_) => "invalid_structured_output",
        }
    }
}

impl std::fmt::Display for ProviderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProviderError::Http {
                status, message, ..
            } => write!(f, "model server answered {status}: {message}"),
            ProviderError::Network(m) => write!(f, "model server unreachable: {m}"),
            ProviderError::Timeout(m) => write!(f, "model timed out: {m}"),
            ProviderError::Truncated => f.write_str("model stream ended before the reply finished"),
            ProviderError::Stream(m) => write!(f, "model stream error: {m}"),
            ProviderError::Malformed(m) => write!(f, "malformed model response: {m}"),
            ProviderError::Config(m) => write!(f, "model configuration: {m}"),
            ProviderError::TooLarge(m) => write!(f, "model reply too large: {m}"),
            ProviderError::InvalidOutput(m) => write!(f, "invalid structured output: {m}"),
        }
    }
}

impl std::error::Error for ProviderError {}

/// An assistant reply assembled from stream events.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Completion {
    /// All text deltas, joined.
    pub text: String,
    /// Tool calls in index order.
    pub tool_calls: Vec<ToolCall>,
    /// Why the model stopped, once known.
    pub finish: Option<FinishReason>,
    /// Prompt tokens, if reported.
    pub input_tokens: u64,
    /// Completion tokens, if reported.
    pub output_tokens: u64,
    /// Whether the end-of-stream marker arrived.
    pub done: bool,
}

impl Completion {
    /// Folds one event in.
    pub fn apply(&mut self, ev: &StreamEvent) -> Result<(), ProviderError> {
        match ev {
            StreamEvent::TextDelta(t) => self.text.push_str(t),
            StreamEvent::ToolCallStart { index, id, name } => {
                if *index > self.tool_calls.len() + 64 {
                    return Err(ProviderError::Malformed(format!(
                        "tool call index {index} out of range"
                    )));
                }
                if *index >= MAX_TOOL_CALLS_PER_REPLY {
                    self.tool_calls.clear();
                    return Err(ProviderError::TooLarge(format!(
                        "the reply has more than {MAX_TOOL_CALLS_PER_REPLY} tool calls"
                    )));
                }
                while self.tool_calls.len() <= *index {
                    self.tool_calls.push(ToolCall {
                        id: String::new(),
                        name: String::new(),
                        arguments: String::new(),
                    });
                }
                let call = &mut self.tool_calls[*index];
                call.id.clone_from(id);
                call.name.clone_from(name);
            }
            StreamEvent::ToolCallDelta { index, arguments } => {
                let call = self.tool_calls.get_mut(*index).ok_or_else(|| {
                    ProviderError::Malformed(format!("arguments for unknown tool call {index}"))
                })?;
                call.arguments.push_str(arguments);
            }
            StreamEvent::Usage {
                input_tokens,
                output_tokens,
            } => {
                self.input_tokens = *input_tokens;
                self.output_tokens = *output_tokens;
            }
            StreamEvent::Finish(r) => self.finish = Some(r.clone()),
            StreamEvent::Done => self.done = true,
        }
        if matches!(
            ev,
            StreamEvent::TextDelta(_)
                | StreamEvent::ToolCallDelta { .. }
                | StreamEvent::ToolCallStart { .. }
        ) {
            // Ids and names count too: a provider may send a huge one in a call's start. (At
            // most 128 calls: the sum is bounded work.)
            let size = self.text.len()
                + self
                    .tool_calls
                    .iter()
                    .map(|c| c.arguments.len() + c.id.len() + c.name.len())
                    .sum::<usize>();
            if size > MAX_REPLY_BYTES {
                // What is kept of it (the failed message clients saw streaming) stays within
                // the limit too; its calls never run.
                let mut end = self.text.len().min(MAX_REPLY_BYTES);
                while !self.text.is_char_boundary(end) {
                    end -= 1;
                }
                self.text.truncate(end);
                self.tool_calls.clear();
                return Err(ProviderError::TooLarge(format!(
                    "the reply passed {MAX_REPLY_BYTES} bytes of text and tool arguments"
                )));
            }
        }
        Ok(())
    }

    /// Checks the reply is whole: it finished, and every tool call has a name.
    pub fn validate(&mut self) -> Result<(), ProviderError> {
        if self.finish.is_none() && !self.done {
            return Err(ProviderError::Truncated);
        }
        if self.finish.is_none() && self.text.is_empty() && self.tool_calls.is_empty() {
            return Err(ProviderError::Truncated);
        }
        for call in &mut self.tool_calls {
            if call.name.is_empty() {
                return Err(ProviderError::Malformed("tool call without a name".into()));
            }
            if call.id.is_empty() {
                call.id = format!("call_{}", crate::values::ids::new_id().replace('-', ""));
            }
            if call.arguments.trim().is_empty() {
                call.arguments = "{}".into();
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod limits_tests {
    use super::*;
    use crate::values::limits::{MAX_REPLY_BYTES, MAX_TOOL_CALLS_PER_REPLY};

    #[test]
    fn a_reply_with_too_many_tool_calls_or_bytes_is_refused_and_kept_small() {
        let mut c = Completion::default();
        for index in 0..MAX_TOOL_CALLS_PER_REPLY {
            c.apply(&StreamEvent::ToolCallStart {
                index,
                id: format!("c{index}"),
                name: "t".into(),
            })
            .unwrap();
        }
        let e = c
            .apply(&StreamEvent::ToolCallStart {
                index: MAX_TOOL_CALLS_PER_REPLY,
                id: "one too many".into(),
                name: "t".into(),
            })
            .unwrap_err();
        assert_eq!(e.code(), "model_reply_too_large");
        assert!(!e.is_retryable());
        assert!(c.tool_calls.is_empty(), "its calls never run");

        let mut c = Completion::default();
        c.apply(&StreamEvent::TextDelta("x".repeat(MAX_REPLY_BYTES)))
            .unwrap();
        let e = c
            .apply(&StreamEvent::TextDelta("é".repeat(10)))
            .unwrap_err();
        assert_eq!(e.code(), "model_reply_too_large");
        assert!(c.text.len() <= MAX_REPLY_BYTES);

        // A call's name counts: one huge name in its start is refused like huge arguments.
        let mut c = Completion::default();
        let e = c
            .apply(&StreamEvent::ToolCallStart {
                index: 0,
                id: "call_1".into(),
                name: "n".repeat(MAX_REPLY_BYTES + 1),
            })
            .unwrap_err();
        assert_eq!(e.code(), "model_reply_too_large");
        assert!(c.tool_calls.is_empty());
    }
}
