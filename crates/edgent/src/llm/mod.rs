//! Provider dispatch: one entry point per step of a model call (request body, endpoint,
//! headers, stream parsing, error bodies), whatever wire format the model row names.
//!
//! The shell owns the connection; everything here is pure so the host tests can drive each
//! format with raw bytes.

pub mod anthropic;
pub mod openai;
pub mod request;
pub mod sse;
pub mod stream;
pub mod workers_ai;

use serde_json::Value;

use self::anthropic::AnthropicStream;
use self::openai::OpenAiStream;
use self::stream::{ProviderError, StreamEvent};

pub use self::request::{ModelRequest, Provider, Target, ToolChoice, ToolSpec};

/// The request body for the model's provider.
///
/// For `workers_ai` this is the `input` object of `env.AI.run(model, input)`; the model id
/// travels separately.
pub fn build_request(req: &ModelRequest) -> Value {
    match req.target.provider {
        Provider::OpenAi => openai::build_request_for(req),
        Provider::Anthropic => anthropic::build_request(req),
        Provider::WorkersAi => workers_ai::build_request(req),
    }
}

/// The URL to POST the request to; `None` for `workers_ai`, which goes through the `AI`
/// binding instead of `fetch`.
pub fn endpoint(target: &Target<'_>) -> Option<String> {
    let base = target.base_url.trim_end_matches('/');
    match target.provider {
        Provider::OpenAi => Some(format!("{base}/chat/completions")),
        // `base_url` is e.g. `https://api.anthropic.com/v1`.
        Provider::Anthropic => Some(format!("{base}/messages")),
        Provider::WorkersAi => None,
    }
}

/// The Messages API version this crate speaks (request and stream shapes are pinned to it).
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The headers carrying `key` for the model's provider (none for `workers_ai`, whose binding
/// needs no key). The key goes into exactly one header and nowhere else.
pub fn auth_headers(provider: Provider, key: &str) -> Vec<(&'static str, String)> {
    match provider {
        Provider::OpenAi => vec![("authorization", format!("Bearer {key}"))],
        Provider::Anthropic => vec![
            ("x-api-key", key.to_owned()),
            ("anthropic-version", ANTHROPIC_VERSION.to_owned()),
        ],
        Provider::WorkersAi => Vec::new(),
    }
}

/// Every header of a streaming request to `provider`: JSON in, server-sent events out, and
/// the key's headers when the model names a secret (`key`), else what the format needs
/// without one.
pub fn request_headers(provider: Provider, key: Option<&str>) -> Vec<(&'static str, String)> {
    let mut headers = vec![
        ("content-type", "application/json".to_owned()),
        ("accept", "text/event-stream".to_owned()),
    ];
    match key {
        Some(key) => headers.extend(auth_headers(provider, key)),
        None if provider == Provider::Anthropic => {
            headers.push(("anthropic-version", ANTHROPIC_VERSION.to_owned()));
        }
        None => {}
    }
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
pub enum StreamParser {
    /// OpenAI chat-completions chunks.
    OpenAi(OpenAiStream),
    /// Anthropic Messages events.
    Anthropic(AnthropicStream),
}

impl StreamParser {
    /// A parser at the start of a response body; `None` for `workers_ai`, which answers in one
    /// JSON value (see [`workers_ai::parse_response`]).
    pub fn new(provider: Provider) -> Option<Self> {
        match provider {
            Provider::OpenAi => Some(StreamParser::OpenAi(OpenAiStream::new())),
            Provider::Anthropic => Some(StreamParser::Anthropic(AnthropicStream::new())),
            Provider::WorkersAi => None,
        }
    }

    /// Feeds body bytes; returns the events they complete.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<StreamEvent>, ProviderError> {
        match self {
            StreamParser::OpenAi(p) => p.feed(bytes),
            StreamParser::Anthropic(p) => p.feed(bytes),
        }
    }

    /// Call at end of body: a stream that stops before its end marker is truncated.
    pub fn finish(&mut self) -> Result<Vec<StreamEvent>, ProviderError> {
        match self {
            StreamParser::OpenAi(p) => p.finish(),
            StreamParser::Anthropic(p) => p.finish(),
        }
    }
}

/// Longest raw body quoted when an error body has no message we recognise.
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
        let nested = v["error"]["message"].as_str();
        let found = match provider {
            // Anthropic's `error.type` (e.g. `overloaded_error`) says more than an empty message.
            Provider::Anthropic => nested
                .filter(|m| !m.trim().is_empty())
                .or_else(|| v["error"]["type"].as_str()),
            Provider::OpenAi | Provider::WorkersAi => nested,
        };
        found
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
