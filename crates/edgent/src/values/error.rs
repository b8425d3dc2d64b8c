//! The error clients see: a status, a stable code and a message.

use serde_json::{json, Value};

use super::limits::MAX_BODY_BYTES;

/// An error as the API reports it: a status and `{"error":{"code","message"}}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status.
    pub status: u16,
    /// Stable machine-readable code.
    pub code: &'static str,
    /// Human-readable explanation.
    pub message: String,
}

impl ApiError {
    /// Builds an error.
    pub fn new(status: u16, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }
    /// 400 for a body or query that does not fit the contract.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(400, "invalid_request", message)
    }
    /// 401 for a missing or wrong key.
    pub fn unauthorized() -> Self {
        Self::new(
            401,
            "unauthorized",
            "missing or invalid API key: send Authorization: Bearer <EDGENT_API_KEY>",
        )
    }
    /// 404 for anything that does not exist.
    pub fn not_found(what: impl Into<String>) -> Self {
        Self::new(404, "not_found", what)
    }
    /// 413 for an oversized body.
    pub fn too_large() -> Self {
        Self::new(
            413,
            "payload_too_large",
            format!("request bodies are limited to {MAX_BODY_BYTES} bytes"),
        )
    }
    /// 500 for our own failures (details go to the log, not the client).
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "internal", message)
    }

    /// The JSON body.
    pub fn body(&self) -> Value {
        json!({ "error": { "code": self.code, "message": self.message } })
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.status, self.code, self.message)
    }
}

impl std::error::Error for ApiError {}
