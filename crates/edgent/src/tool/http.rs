//! Outbound HTTP for tools, independent of the platform: the Worker performs it with `fetch`
//! (see [`super::FlowHost::fetch`]); host tests can answer it themselves.

use serde::de::DeserializeOwned;

/// A request a tool sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRequest {
    /// `GET`, `POST`, ...
    pub method: String,
    /// Absolute URL.
    pub url: String,
    /// Header pairs.
    pub headers: Vec<(String, String)>,
    /// Request body, if any.
    pub body: Option<String>,
    /// Give up after this long (the whole exchange, headers and body).
    pub timeout_ms: u32,
}

impl HttpRequest {
    /// Default timeout: 10 s.
    pub const DEFAULT_TIMEOUT_MS: u32 = 10_000;

    /// A GET request.
    pub fn get(url: impl Into<String>) -> Self {
        HttpRequest {
            method: "GET".into(),
            url: url.into(),
            headers: Vec::new(),
            body: None,
            timeout_ms: Self::DEFAULT_TIMEOUT_MS,
        }
    }

    /// A POST request with a JSON body.
    pub fn post_json(url: impl Into<String>, body: &serde_json::Value) -> Self {
        HttpRequest {
            method: "POST".into(),
            body: Some(body.to_string()),
            ..Self::get(url)
        }
        .header("content-type", "application/json")
    }

    /// Adds a header.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Appends `name=value` to the URL's query string, percent-encoded.
    pub fn query(mut self, name: &str, value: &str) -> Self {
        let separator = if self.url.contains('?') { '&' } else { '?' };
        self.url = format!("{}{separator}{}={}", self.url, encode(name), encode(value));
        self
    }

    /// Sets the timeout.
    pub fn timeout_ms(mut self, ms: u32) -> Self {
        self.timeout_ms = ms;
        self
    }
}

/// The response a tool receives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    /// HTTP status.
    pub status: u16,
    /// The body as text (a body over [`HttpResponse::MAX_BODY`] bytes is refused with an error).
    pub body: String,
    /// Response headers, names in lowercase.
    pub headers: Vec<(String, String)>,
}

impl HttpResponse {
    /// Largest body accepted: 1 MiB.
    pub const MAX_BODY: usize = 1024 * 1024;

    /// A header's value (name matched case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// `Retry-After` in seconds, when the server sent it as a number.
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        self.header("retry-after")?
            .trim()
            .parse::<u64>()
            .ok()
            .map(std::time::Duration::from_secs)
    }

    /// Whether the status is 2xx.
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The body parsed as JSON.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_str(&self.body)
    }
}

/// Percent-encodes everything but RFC 3986 unreserved characters.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::HttpRequest;

    #[test]
    fn query_parameters_are_encoded() {
        let r = HttpRequest::get("https://x.test/w")
            .query("q", "São Paulo & co")
            .query("units", "metric");
        assert_eq!(
            r.url,
            "https://x.test/w?q=S%C3%A3o%20Paulo%20%26%20co&units=metric"
        );
    }
}
