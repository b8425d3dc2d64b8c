//! [`Invalid`]: input that breaks a rule (a tool or hook name, a definition, a tool call's
//! arguments, a TOML workflow, a configuration row, an event frame).

use std::fmt;

/// Input that breaks a rule; the message says which rule and how to fix it, and is shown to
/// the caller as is (a model, an operator, a `cargo build` log).
///
/// It carries only that message: whoever reports it adds the context (`invalid arguments:
/// …`, `prompt "support": …`) and picks the channel (an error result, a 400, a build error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    message: String,
}

impl Invalid {
    /// The rule broken and how to fix it, as the caller will read it.
    pub fn new(message: impl Into<String>) -> Self {
        Invalid {
            message: message.into(),
        }
    }

    /// The message, exactly as given.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Invalid {}

/// `Err(format!(..).into())`, and `?` on the `String` error of a `refine` rule.
impl From<String> for Invalid {
    fn from(message: String) -> Self {
        Invalid::new(message)
    }
}

impl From<&str> for Invalid {
    fn from(message: &str) -> Self {
        Invalid::new(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shows_the_message_exactly() {
        let e = Invalid::from("`x` is not a tool; check the name");
        assert_eq!(e.to_string(), "`x` is not a tool; check the name");
        assert_eq!(e.message(), e.to_string());
        assert_eq!(e, Invalid::new(String::from(e.message())));
    }
}
