//! The Anthropic Messages API wire format (`POST /v1/messages`, `anthropic-version:
//! 2023-06-01`): request bodies (`request`) and the streamed response (`stream`).

mod request;
mod stream;

use serde_json::Value;

use super::format::{StreamDecoder, WireFormat};
use super::request::ModelRequest;
use super::stream::{ProviderError, StreamEvent};

pub use request::{build_request, request_body, DEFAULT_MAX_TOKENS, LEADING_USER_PLACEHOLDER};
pub use stream::AnthropicStream;

/// The `anthropic-version` header value edgent speaks.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The Messages format.
#[derive(Debug, Clone, Copy)]
pub struct Anthropic;

impl WireFormat for Anthropic {
    fn build_request(&self, req: &ModelRequest) -> Value {
        build_request(req)
    }

    fn request_body(&self, req: &ModelRequest) -> String {
        request::request_body(req)
    }

    fn endpoint(&self, base_url: &str) -> Option<String> {
        Some(format!("{base_url}/messages"))
    }

    fn auth_headers(&self, key: &str) -> Vec<(&'static str, String)> {
        vec![
            ("x-api-key", key.to_owned()),
            ("anthropic-version", ANTHROPIC_VERSION.to_owned()),
        ]
    }

    fn keyless_headers(&self) -> Vec<(&'static str, String)> {
        vec![("anthropic-version", ANTHROPIC_VERSION.to_owned())]
    }

    fn stream_decoder(&self) -> Option<Box<dyn StreamDecoder>> {
        Some(Box::new(AnthropicStream::new()))
    }

    /// Its errors carry a message, or at least a type (`overloaded_error`).
    fn error_text<'v>(&self, body: &'v Value) -> Option<&'v str> {
        body["error"]["message"]
            .as_str()
            .filter(|m| !m.trim().is_empty())
            .or_else(|| body["error"]["type"].as_str())
    }
}

impl StreamDecoder for AnthropicStream {
    fn feed(&mut self, bytes: &[u8]) -> Result<Vec<StreamEvent>, ProviderError> {
        AnthropicStream::feed(self, bytes)
    }

    fn finish(&mut self) -> Result<Vec<StreamEvent>, ProviderError> {
        AnthropicStream::finish(self)
    }
}
