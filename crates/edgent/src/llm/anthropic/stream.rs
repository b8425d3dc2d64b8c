//! The Anthropic Messages streaming response: server-sent events (`message_start`,
//! `content_block_*`, `message_delta`, …) turned into [`StreamEvent`]s.

use std::collections::HashMap;

use serde_json::Value;

use crate::llm::sse::{SseEvent, SseParser};
use crate::llm::stream::{FinishReason, ProviderError, StreamEvent};

/// Turns the bytes of a streaming Messages response into [`StreamEvent`]s.
#[derive(Debug, Default)]
pub struct AnthropicStream {
    sse: SseParser,
    /// Our call index of each `tool_use` block, by content block index (text and thinking
    /// blocks take block indexes too, so the two numberings differ).
    call_by_block: HashMap<u64, usize>,
    /// Input given whole in `content_block_start` (proxies do this), by block index: sent at
    /// the block's end unless `input_json_delta`s arrived instead.
    start_input: HashMap<u64, String>,
    calls: usize,
    /// Prompt tokens from `message_start`, reported with the output tokens at the end.
    input_tokens: u64,
    done: bool,
}

impl AnthropicStream {
    /// A parser at the start of a response body.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds body bytes; returns the events they complete.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<StreamEvent>, ProviderError> {
        // Each event is handled as it completes, so the first error in the stream is the
        // one reported, however the body arrived (an oversized line after a provider's error
        // event in the same read used to hide that error).
        let mut sse = std::mem::take(&mut self.sse);
        let mut out = Vec::new();
        let fed = sse.feed_each(bytes, |ev| self.on_event(ev, &mut out));
        self.sse = sse;
        fed?;
        Ok(out)
    }

    /// Call at end of body: a stream that stops without `message_stop` is truncated.
    pub fn finish(&mut self) -> Result<Vec<StreamEvent>, ProviderError> {
        // A final frame missing only its blank line still counts; a half-written one means the
        // body was cut, which is a truncation rather than a format error. A whole `error` event
        // says more than "truncated", so it is reported as itself.
        match self.feed(b"\n\n") {
            Err(e @ ProviderError::Stream(_)) => Err(e),
            _ if !self.done => Err(ProviderError::Truncated),
            fed => fed,
        }
    }

    fn on_event(&mut self, ev: SseEvent, out: &mut Vec<StreamEvent>) -> Result<(), ProviderError> {
        let data = ev.data.trim();
        if self.done || data.is_empty() {
            return Ok(());
        }
        let v: Value = serde_json::from_str(data)
            .map_err(|e| ProviderError::Malformed(format!("event data is not JSON: {e}")))?;
        // The data's `type` repeats the SSE event name; either will do.
        let kind = v["type"]
            .as_str()
            .or(ev.event.as_deref())
            .unwrap_or_default();
        match kind {
            "message_start" => self.input_tokens = input_tokens(&v["message"]["usage"]),
            "content_block_start" => self.on_block_start(&v, out)?,
            "content_block_delta" => self.on_block_delta(&v, out),
            "content_block_stop" => {
                let block = v["index"].as_u64().unwrap_or(u64::MAX);
                if let (Some(&index), Some(arguments)) = (
                    self.call_by_block.get(&block),
                    self.start_input.remove(&block),
                ) {
                    out.push(StreamEvent::ToolCallDelta { index, arguments });
                }
            }
            "message_delta" => {
                if let Some(reason) = v["delta"]["stop_reason"].as_str() {
                    out.push(StreamEvent::Finish(FinishReason::parse(reason)));
                }
                let usage = &v["usage"];
                if usage.is_object() {
                    // Newer API versions repeat the (final) input count here; prefer it.
                    let input_tokens = if usage.get("input_tokens").is_some() {
                        input_tokens(usage)
                    } else {
                        self.input_tokens
                    };
                    out.push(StreamEvent::Usage {
                        input_tokens,
                        output_tokens: usage["output_tokens"].as_u64().unwrap_or(0),
                    });
                }
            }
            "message_stop" => {
                self.done = true;
                out.push(StreamEvent::Done);
            }
            "error" => {
                let err = &v["error"];
                let message = err["message"]
                    .as_str()
                    .or_else(|| err["type"].as_str())
                    .unwrap_or("unknown error");
                return Err(ProviderError::Stream(message.to_owned()));
            }
            // `ping` keeps the connection alive; new event types are allowed by the API's
            // versioning policy and carry nothing we act on.
            _ => {}
        }
        Ok(())
    }

    fn on_block_start(
        &mut self,
        v: &Value,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), ProviderError> {
        let block = &v["content_block"];
        match block["type"].as_str() {
            Some("text") => {
                if let Some(t) = block["text"].as_str().filter(|t| !t.is_empty()) {
                    out.push(StreamEvent::TextDelta(t.to_owned()));
                }
            }
            Some("tool_use") => {
                let block_index = v["index"].as_u64().ok_or_else(|| {
                    ProviderError::Malformed("tool_use block without an index".into())
                })?;
                let index = self.calls;
                self.calls += 1;
                self.call_by_block.insert(block_index, index);
                out.push(StreamEvent::ToolCallStart {
                    index,
                    id: block["id"].as_str().unwrap_or_default().to_owned(),
                    name: block["name"].as_str().unwrap_or_default().to_owned(),
                });
                if let Some(input) = block["input"].as_object().filter(|o| !o.is_empty()) {
                    self.start_input
                        .insert(block_index, Value::Object(input.clone()).to_string());
                }
            }
            // Thinking and server-tool blocks are the provider's business, not a reply or a
            // call for us to run.
            _ => {}
        }
        Ok(())
    }

    fn on_block_delta(&mut self, v: &Value, out: &mut Vec<StreamEvent>) {
        let delta = &v["delta"];
        match delta["type"].as_str() {
            Some("text_delta") => {
                if let Some(t) = delta["text"].as_str().filter(|t| !t.is_empty()) {
                    out.push(StreamEvent::TextDelta(t.to_owned()));
                }
            }
            Some("input_json_delta") => {
                let block = v["index"].as_u64().unwrap_or(u64::MAX);
                // Deltas for blocks that are not our tool calls (server tools) are dropped.
                let Some(&index) = self.call_by_block.get(&block) else {
                    return;
                };
                if let Some(part) = delta["partial_json"].as_str().filter(|p| !p.is_empty()) {
                    self.start_input.remove(&block);
                    out.push(StreamEvent::ToolCallDelta {
                        index,
                        arguments: part.to_owned(),
                    });
                }
            }
            // thinking_delta, signature_delta, citations_delta: nothing we keep.
            _ => {}
        }
    }
}

/// Prompt tokens of a `usage` object: cache writes and reads are prompt tokens too (the
/// API counts them apart from `input_tokens`).
fn input_tokens(usage: &Value) -> u64 {
    [
        "input_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
    ]
    .iter()
    .map(|k| usage[*k].as_u64().unwrap_or(0))
    .sum()
}
