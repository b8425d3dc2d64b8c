//! [`ToolError`]: what a failing tool returns, and whether trying again can help.

use std::time::Duration;

use crate::values::sql::SqlError;

/// Whether a failed attempt is worth another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Try again after the policy's backoff (the default for failures).
    Backoff,
    /// Try again no sooner than this many milliseconds from now (a service said so).
    After(u64),
    /// Do not try again: this text is the result the model sees.
    Never,
}

/// An error a tool returns with `?`.
///
/// A failure is retried under the tool's [`super::RetryPolicy`] (3 attempts by default); its
/// text becomes the `error` result the model reads once attempts run out. Use
/// [`ToolError::fatal`] for answers retrying cannot change (an unknown city, a refused
/// request) and [`ToolError::retry_after`] when a service says when to come back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    text: String,
    retry: Retry,
}

impl ToolError {
    /// A failure worth retrying, with this text (shown to the model: say what to do about it).
    pub fn new(text: impl Into<String>) -> Self {
        ToolError {
            text: text.into(),
            retry: Retry::Backoff,
        }
    }

    /// A failure that retrying cannot fix: no further attempt; this is the result.
    pub fn fatal(text: impl Into<String>) -> Self {
        ToolError {
            text: text.into(),
            retry: Retry::Never,
        }
    }

    /// A failure to retry no sooner than `after` (a `Retry-After` header, a quota reset).
    pub fn retry_after(text: impl Into<String>, after: Duration) -> Self {
        ToolError {
            text: text.into(),
            retry: Retry::After(after.as_millis().min(u128::from(u64::MAX)) as u64),
        }
    }

    /// The text the model sees.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The same error with its text passed through `f` (redaction).
    pub(crate) fn map_text(mut self, f: impl FnOnce(&str) -> String) -> Self {
        self.text = f(&self.text);
        self
    }

    /// Whether and when to retry.
    pub fn retry(&self) -> Retry {
        self.retry
    }

    /// The same error with `prefix` in front of its text (for instance the failing step).
    pub fn context(mut self, prefix: impl std::fmt::Display) -> Self {
        self.text = format!("{prefix}{}", self.text);
        self
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for ToolError {}

impl From<String> for ToolError {
    fn from(s: String) -> Self {
        ToolError::new(s)
    }
}
impl From<&str> for ToolError {
    fn from(s: &str) -> Self {
        ToolError::new(s)
    }
}
impl From<SqlError> for ToolError {
    /// Storage hiccups are worth another attempt.
    fn from(e: SqlError) -> Self {
        ToolError::new(format!("storage error: {e}"))
    }
}
impl From<serde_json::Error> for ToolError {
    /// Bad JSON stays bad.
    fn from(e: serde_json::Error) -> Self {
        ToolError::fatal(format!("JSON error: {e}"))
    }
}
