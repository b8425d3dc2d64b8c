//! Outbound HTTP for tools, independent of the platform: the Worker performs it with `fetch`
//! (see [`super::FlowHost::fetch`]); host tests can answer it themselves.

use serde::de::DeserializeOwned;

use super::ToolError;

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
    /// `false`: a redirect (3xx) is the response, with its `location` header, instead of
    /// being followed. For requests that carry a credential to a host someone checked: a
    /// followed redirect would send the request on to a host nobody checked.
    pub follow_redirects: bool,
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
            follow_redirects: true,
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

    /// Answers a redirect as the response instead of following it.
    pub fn no_redirects(mut self) -> Self {
        self.follow_redirects = false;
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

/// Why the host could not do what a tool asked; each variant keeps the platform's own message.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HostError {
    /// The request could not be built (a bad header or URL).
    BadRequest(String),
    /// The request got no answer, or its answer could not be read.
    Network(String),
    /// No answer within the request's time limit.
    Timeout {
        /// The limit, in milliseconds.
        after_ms: u32,
    },
    /// The response body is over [`HttpResponse::MAX_BODY`].
    TooLarge,
    /// No binding of that name.
    NoBinding(String),
    /// A D1 query could not be prepared, run or read.
    Query(String),
    /// This host cannot do it at all (host tests have no network and no D1).
    Unsupported(&'static str),
}

impl std::fmt::Display for HostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HostError::BadRequest(m) | HostError::Network(m) | HostError::Query(m) => {
                f.write_str(m)
            }
            HostError::Timeout { after_ms } => write!(f, "no response within {after_ms} ms"),
            HostError::TooLarge => write!(
                f,
                "the response is larger than {} bytes",
                HttpResponse::MAX_BODY
            ),
            HostError::NoBinding(name) => write!(f, "no D1 binding named {name:?}"),
            HostError::Unsupported(what) => f.write_str(what),
        }
    }
}

impl std::error::Error for HostError {}

impl From<HostError> for ToolError {
    /// A host failure may pass: it is retried under the tool's policy.
    fn from(e: HostError) -> Self {
        ToolError::new(e.to_string())
    }
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
