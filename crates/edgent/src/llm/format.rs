//! The one trait every wire format implements, and the one every streamed answer's decoder
//! implements: the rest of edgent picks a format by provider (`llm::format`) and never names
//! one.

use serde_json::Value;

use super::request::ModelRequest;
use super::stream::{ProviderError, StreamEvent};

/// A provider's wire format: how a request is written and sent, and how its answer is read.
pub trait WireFormat: Sync {
    /// The request body.
    fn build_request(&self, req: &ModelRequest) -> Value;
    /// The request body as the JSON text that is sent (a format may write it without
    /// building [`WireFormat::build_request`]'s tree; it must be the same JSON).
    fn request_body(&self, req: &ModelRequest) -> String {
        self.build_request(req).to_string()
    }
    /// Where a streaming request goes, under the model's `base_url` (`None`: the format is
    /// not spoken over HTTP, as Workers AI's binding).
    fn endpoint(&self, base_url: &str) -> Option<String>;
    /// The headers carrying `key`; the key goes into exactly one header and nowhere else.
    fn auth_headers(&self, key: &str) -> Vec<(&'static str, String)>;
    /// Headers the format needs when the model names no key.
    fn keyless_headers(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }
    /// A decoder for one streamed answer (`None`: the format does not stream over HTTP).
    fn stream_decoder(&self) -> Option<Box<dyn StreamDecoder>>;
    /// The message in a parsed error body, where this format puts it.
    fn error_text<'v>(&self, body: &'v Value) -> Option<&'v str> {
        body["error"]["message"].as_str()
    }
}

/// Turns the bytes of one streamed answer into [`StreamEvent`]s, in whatever pieces they
/// arrive.
pub trait StreamDecoder: std::fmt::Debug {
    /// Feeds the next bytes; returns the events they complete.
    fn feed(&mut self, bytes: &[u8]) -> Result<Vec<StreamEvent>, ProviderError>;
    /// The body ended: the events still held, or an error if the answer was cut short.
    fn finish(&mut self) -> Result<Vec<StreamEvent>, ProviderError>;
}
