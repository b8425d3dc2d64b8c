//! The OpenAI chat-completions streaming response: server-sent `chat.completion.chunk`s
//! turned into [`StreamEvent`]s.

use std::collections::HashMap;

use serde_json::Value;

use crate::llm::sse::SseParser;
use crate::llm::stream::{FinishReason, ProviderError, StreamEvent};

/// Turns the bytes of a streaming chat-completions response into [`StreamEvent`]s.
#[derive(Debug, Default)]
pub struct OpenAiStream {
    sse: SseParser,
    /// Our index of the call currently streaming under each server index.
    by_server_index: HashMap<u64, usize>,
    /// Our index of each call id already seen (servers that reuse index 0 still send ids).
    by_id: HashMap<String, usize>,
    calls: usize,
    done: bool,
}

impl OpenAiStream {
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
        let fed = sse.feed_each(bytes, |ev| self.on_data(&ev.data, &mut out));
        self.sse = sse;
        fed?;
        Ok(out)
    }

    /// Call at end of body: a stream that stops without `[DONE]` is truncated.
    pub fn finish(&mut self) -> Result<Vec<StreamEvent>, ProviderError> {
        // A final frame missing only its blank line still counts; a half-written one means the
        // body was cut, which is a truncation rather than a format error.
        let fed = self.feed(b"\n\n");
        if !self.done {
            return Err(ProviderError::Truncated);
        }
        fed
    }

    fn on_data(&mut self, data: &str, out: &mut Vec<StreamEvent>) -> Result<(), ProviderError> {
        let data = data.trim();
        if data == "[DONE]" {
            self.done = true;
            out.push(StreamEvent::Done);
            return Ok(());
        }
        if self.done || data.is_empty() {
            return Ok(());
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|e| ProviderError::Malformed(format!("chunk is not JSON: {e}")))?;
        if let Some(err) = chunk.get("error").filter(|e| !e.is_null()) {
            let message = err["message"].as_str().unwrap_or("unknown error");
            return Err(ProviderError::Stream(message.to_owned()));
        }
        if let Some(choice) = chunk["choices"].as_array().and_then(|c| c.first()) {
            let delta = &choice["delta"];
            if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
                out.push(StreamEvent::TextDelta(text.to_owned()));
            }
            if let Some(calls) = delta["tool_calls"].as_array() {
                for (pos, call) in calls.iter().enumerate() {
                    self.on_tool_call(pos, call, out);
                }
            }
            if let Some(reason) = choice["finish_reason"].as_str() {
                out.push(StreamEvent::Finish(FinishReason::parse(reason)));
            }
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            out.push(StreamEvent::Usage {
                input_tokens: usage["prompt_tokens"].as_u64().unwrap_or(0),
                output_tokens: usage["completion_tokens"].as_u64().unwrap_or(0),
            });
        }
        Ok(())
    }

    fn on_tool_call(&mut self, pos: usize, call: &Value, out: &mut Vec<StreamEvent>) {
        let server_index = call["index"].as_u64().unwrap_or(pos as u64);
        let id = call["id"].as_str().filter(|s| !s.is_empty());
        let name = call["function"]["name"].as_str().unwrap_or_default();
        let ours = match id {
            Some(id) => match self.by_id.get(id) {
                Some(&i) => i,
                None => {
                    let i = self.new_call(id.to_owned(), name, out);
                    self.by_id.insert(id.to_owned(), i);
                    i
                }
            },
            None => match self.by_server_index.get(&server_index) {
                Some(&i) => i,
                // No id at all (some compatible servers): the call still needs one.
                None => self.new_call(String::new(), name, out),
            },
        };
        self.by_server_index.insert(server_index, ours);
        if let Some(args) = call["function"]["arguments"]
            .as_str()
            .filter(|a| !a.is_empty())
        {
            out.push(StreamEvent::ToolCallDelta {
                index: ours,
                arguments: args.to_owned(),
            });
        }
    }

    fn new_call(&mut self, id: String, name: &str, out: &mut Vec<StreamEvent>) -> usize {
        let index = self.calls;
        self.calls += 1;
        out.push(StreamEvent::ToolCallStart {
            index,
            id,
            name: name.to_owned(),
        });
        index
    }
}
