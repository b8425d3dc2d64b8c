//! The model wire formats: one folder per format (`openai`, `anthropic`, `workers_ai`), each
//! a [`WireFormat`] (request body, endpoint, key headers, stream decoder, error bodies), and
//! the provider-neutral [`StreamEvent`] they all decode into. The functions here are the
//! entry points the rest of edgent uses, whatever format the model row names.
//!
//! The driver owns the connection; everything here is pure so the host tests can drive each
//! format with raw bytes (one conformance suite for all: `tests/host/llm_conformance.rs`).

pub mod anthropic;
pub mod embeddings;
pub mod format;
pub mod memo;
pub mod openai;
pub mod request;
pub mod sse;
pub mod stream;
pub mod workers_ai;

use serde_json::Value;

use self::stream::{ProviderError, StreamEvent};

pub use self::anthropic::ANTHROPIC_VERSION;
pub use self::format::{StreamDecoder, WireFormat};
pub use self::request::{ModelRequest, OutputFormat, Provider, Target, ToolChoice, ToolSpec};

/// The wire format `provider` speaks.
pub fn format(provider: Provider) -> &'static dyn WireFormat {
    match provider {
        Provider::OpenAi => &openai::OpenAi,
        Provider::Anthropic => &anthropic::Anthropic,
        Provider::WorkersAi => &workers_ai::WorkersAi,
    }
}

/// The request body for the model's provider.
///
/// For `workers_ai` this is the `input` object of `env.AI.run(model, input)`; the model id
/// travels separately.
pub fn build_request(req: &ModelRequest) -> Value {
    format(req.target.provider).build_request(req)
}

/// [`build_request`] as the JSON text that is sent.
pub fn request_body(req: &ModelRequest) -> String {
    format(req.target.provider).request_body(req)
}

/// The URL a streaming request goes to (`None` for `workers_ai`, reached through its binding).
pub fn endpoint(target: &Target<'_>) -> Option<String> {
    format(target.provider).endpoint(target.base_url.trim_end_matches('/'))
}

/// The headers carrying `key` for the model's provider (none for `workers_ai`, whose binding
/// needs no key). The key goes into exactly one header and nowhere else.
pub fn auth_headers(provider: Provider, key: &str) -> Vec<(&'static str, String)> {
    format(provider).auth_headers(key)
}

/// Every header of a streaming request to `provider`: JSON in, server-sent events out, and
/// the key's headers when the model names a secret (`key`), else what the format needs
/// without one.
pub fn request_headers(provider: Provider, key: Option<&str>) -> Vec<(&'static str, String)> {
    let mut headers = vec![
        ("content-type", "application/json".to_owned()),
        ("accept", "text/event-stream".to_owned()),
    ];
    headers.extend(match key {
        Some(key) => auth_headers(provider, key),
        None => format(provider).keyless_headers(),
    });
    headers
}

/// A `retry-after` header's delay in ms (seconds, possibly fractional; an HTTP date is not
/// honoured).
pub fn retry_after_ms(header: Option<&str>) -> Option<u64> {
    let seconds = header?.trim().parse::<f64>().ok()?;
    (seconds.is_finite() && seconds >= 0.0).then_some((seconds * 1000.0) as u64)
}

/// A streaming response parser for whichever format the model speaks.
#[derive(Debug)]
pub struct StreamParser(Box<dyn StreamDecoder>);

impl StreamParser {
    /// A parser for `provider`'s streamed answer (`None` for `workers_ai`, which does not
    /// stream).
    pub fn new(provider: Provider) -> Option<Self> {
        format(provider).stream_decoder().map(StreamParser)
    }

    /// Feeds the next bytes of the body.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<StreamEvent>, ProviderError> {
        self.0.feed(bytes)
    }

    /// The body ended.
    pub fn finish(&mut self) -> Result<Vec<StreamEvent>, ProviderError> {
        self.0.finish()
    }
}

const MAX_RAW_ERROR_CHARS: usize = 300;

/// The human-readable message of an HTTP error body, or the start of the body when it has
/// none we recognise.
///
/// OpenAI-compatible servers answer `{"error": {"message": ...}}` (some just
/// `{"error": "..."}` or `{"message": ...}`); Anthropic answers
/// `{"type": "error", "error": {"type": ..., "message": ...}}`; Cloudflare's REST API (what a
/// Workers AI failure looks like through a gateway) answers `{"errors": [{"message": ...}]}`.
/// The shapes do not collide, so every provider tries them all: a proxy in front of a model
/// can answer in another format than the model would.
pub fn error_message(provider: Provider, body: &str) -> String {
    let parsed = serde_json::from_str::<Value>(body).ok();
    let found = parsed.as_ref().and_then(|v| {
        format(provider)
            .error_text(v)
            .or_else(|| v["error"].as_str())
            .or_else(|| v["message"].as_str())
            .or_else(|| v["errors"][0]["message"].as_str())
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .map(str::to_owned)
    });
    found.unwrap_or_else(|| {
        body.trim()
            .chars()
            .take(MAX_RAW_ERROR_CHARS)
            .collect::<String>()
            .trim()
            .to_owned()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_carries_the_key_in_its_providers_headers_only() {
        let names = |h: &[(&'static str, String)]| -> Vec<&'static str> {
            h.iter().map(|(n, _)| *n).collect()
        };
        let openai = request_headers(Provider::OpenAi, Some("sk-1"));
        assert_eq!(names(&openai), ["content-type", "accept", "authorization"]);
        assert_eq!(openai[2].1, "Bearer sk-1");
        let anthropic = request_headers(Provider::Anthropic, Some("sk-2"));
        assert_eq!(
            names(&anthropic),
            ["content-type", "accept", "x-api-key", "anthropic-version"]
        );
        let keyless = request_headers(Provider::Anthropic, None);
        assert_eq!(
            names(&keyless),
            ["content-type", "accept", "anthropic-version"]
        );
        assert_eq!(names(&request_headers(Provider::OpenAi, None)).len(), 2);
    }

    #[test]
    fn retry_after_is_read_in_seconds() {
        assert_eq!(retry_after_ms(Some(" 2 ")), Some(2000));
        assert_eq!(retry_after_ms(Some("0.25")), Some(250));
        assert_eq!(retry_after_ms(Some("-1")), None);
        assert_eq!(retry_after_ms(Some("Wed, 21 Oct 2026 07:28:00 GMT")), None);
        assert_eq!(retry_after_ms(None), None);
    }
}
