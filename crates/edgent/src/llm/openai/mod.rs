//! The OpenAI chat-completions wire format: request bodies (`request`) and the streamed
//! response (`stream`). Works with any OpenAI-compatible server (OpenAI, OpenRouter, Groq,
//! vLLM, llama.cpp, ...).

mod body;
mod request;
mod stream;

use serde_json::Value;

use super::format::{StreamDecoder, WireFormat};
use super::request::ModelRequest;
use super::stream::{ProviderError, StreamEvent};

pub use body::{build_request, build_request_for, function_tools, request_body};
pub use request::error_message;
pub use stream::OpenAiStream;

/// The chat-completions format.
#[derive(Debug, Clone, Copy)]
pub struct OpenAi;

impl WireFormat for OpenAi {
    /// The sent text, parsed: the same JSON as [`build_request_for`]. A Worker only sends
    /// the text, and this keeps the body's serialisation into a `Value` tree (a second copy
    /// of it, reached through this vtable) out of its wasm.
    fn build_request(&self, req: &ModelRequest) -> Value {
        serde_json::from_str(&request_body(req)).unwrap_or_default()
    }

    fn request_body(&self, req: &ModelRequest) -> String {
        request_body(req)
    }

    fn endpoint(&self, base_url: &str) -> Option<String> {
        Some(format!("{base_url}/chat/completions"))
    }

    fn auth_headers(&self, key: &str) -> Vec<(&'static str, String)> {
        vec![("authorization", format!("Bearer {key}"))]
    }

    fn stream_decoder(&self) -> Option<Box<dyn StreamDecoder>> {
        Some(Box::new(OpenAiStream::new()))
    }
}

impl StreamDecoder for OpenAiStream {
    fn feed(&mut self, bytes: &[u8]) -> Result<Vec<StreamEvent>, ProviderError> {
        OpenAiStream::feed(self, bytes)
    }

    fn finish(&mut self) -> Result<Vec<StreamEvent>, ProviderError> {
        OpenAiStream::finish(self)
    }
}
