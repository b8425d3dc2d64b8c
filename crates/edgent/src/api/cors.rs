//! Cross-origin access for browsers: which origins may call the API (`EDGENT_ALLOWED_ORIGINS`,
//! comma-separated origins or `*`), the preflight answer and the headers of a real response.
//! Without the variable no CORS header is sent, so only same-origin pages reach the API.

use super::ApiError;

/// The variable listing the allowed origins.
pub const ALLOWED_ORIGINS_VAR: &str = "EDGENT_ALLOWED_ORIGINS";

const ALLOWED_METHODS: &str = "GET, POST, PUT, DELETE, OPTIONS";
const ALLOWED_HEADERS: &str = "authorization, content-type";
/// Headers a browser script may read (the UI message stream marks itself with one).
const EXPOSED_HEADERS: &str = "x-vercel-ai-ui-message-stream";
/// How long a browser may reuse a preflight answer, in seconds.
const PREFLIGHT_MAX_AGE: &str = "600";

/// The origins allowed to call the API from a browser.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AllowedOrigins {
    any: bool,
    origins: Vec<String>,
}

impl AllowedOrigins {
    /// From the variable's value (`None` or blank: no origin is allowed). Trailing slashes
    /// are ignored; origins compare without regard to case.
    pub fn parse(var: Option<&str>) -> Self {
        let mut allowed = AllowedOrigins::default();
        for item in var.unwrap_or_default().split(',').map(str::trim) {
            match item {
                "" => {}
                "*" => allowed.any = true,
                origin => allowed
                    .origins
                    .push(origin.trim_end_matches('/').to_ascii_lowercase()),
            }
        }
        allowed
    }

    /// Whether any origin is configured at all.
    pub fn is_configured(&self) -> bool {
        self.any || !self.origins.is_empty()
    }

    /// Whether a request from `origin` may be answered with CORS headers.
    pub fn allows(&self, origin: &str) -> bool {
        if origin.is_empty() || origin == "null" {
            return false;
        }
        self.any || self.origins.contains(&origin.to_ascii_lowercase())
    }

    /// The headers for a response to a request from `origin` (none when it is not allowed).
    pub fn response_headers(&self, origin: Option<&str>) -> Vec<(&'static str, String)> {
        match origin {
            Some(origin) if self.allows(origin) => vec![
                ("access-control-allow-origin", origin.to_owned()),
                ("access-control-expose-headers", EXPOSED_HEADERS.to_owned()),
                ("vary", "Origin".to_owned()),
            ],
            _ => Vec::new(),
        }
    }

    /// The answer to an `OPTIONS` preflight from `origin`: the headers of a 204, or 403.
    pub fn preflight(&self, origin: Option<&str>) -> Result<Vec<(&'static str, String)>, ApiError> {
        let Some(origin) = origin.filter(|o| self.allows(o)) else {
            return Err(ApiError::new(
                403,
                "forbidden",
                format!("this origin may not call the API; list it in {ALLOWED_ORIGINS_VAR}"),
            ));
        };
        let mut headers = self.response_headers(Some(origin));
        headers.push(("access-control-allow-methods", ALLOWED_METHODS.to_owned()));
        headers.push(("access-control-allow-headers", ALLOWED_HEADERS.to_owned()));
        headers.push(("access-control-max-age", PREFLIGHT_MAX_AGE.to_owned()));
        Ok(headers)
    }

    /// Whether a WebSocket upgrade from `origin` may proceed: any request without a browser
    /// origin, any origin when no list is configured (tokens, not cookies, authenticate it),
    /// and listed origins when one is.
    pub fn admits_socket(&self, origin: Option<&str>) -> bool {
        match origin {
            None => true,
            Some(origin) => !self.is_configured() || self.allows(origin),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn only_listed_origins_get_cors_headers() {
        let allowed = AllowedOrigins::parse(Some(" https://app.example , http://localhost:5173/"));
        assert!(allowed.allows("https://APP.example"));
        assert!(allowed.allows("http://localhost:5173"));
        assert!(!allowed.allows("https://evil.example"));
        assert!(!allowed.allows("null"));
        let h = allowed.response_headers(Some("https://app.example"));
        assert!(h.contains(&("access-control-allow-origin", "https://app.example".into())));
        assert!(allowed
            .response_headers(Some("https://evil.example"))
            .is_empty());
        assert!(allowed.response_headers(None).is_empty());
        assert_eq!(
            allowed
                .preflight(Some("https://evil.example"))
                .unwrap_err()
                .status,
            403
        );
        let pre = allowed.preflight(Some("http://localhost:5173")).unwrap();
        assert!(pre
            .iter()
            .any(|(k, v)| *k == "access-control-allow-headers" && v.contains("authorization")));
    }

    #[test]
    fn no_variable_means_same_origin_only_and_star_means_any() {
        let none = AllowedOrigins::parse(None);
        assert!(!none.is_configured() && !none.allows("https://a.example"));
        assert!(none.admits_socket(Some("https://a.example")));
        let any = AllowedOrigins::parse(Some("*"));
        assert!(any.allows("https://a.example"));
        let listed = AllowedOrigins::parse(Some("https://a.example"));
        assert!(!listed.admits_socket(Some("https://b.example")));
        assert!(listed.admits_socket(Some("https://a.example")));
        assert!(listed.admits_socket(None));
    }
}
