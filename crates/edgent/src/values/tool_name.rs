//! Rules for tool and hook file names. Shared with `edgent-build` (through `build_support`), so
//! discovery and the runtime agree on what a tool or hook name is.

use crate::values::invalid::Invalid;

/// Longest tool name: providers cap function names at 64 characters.
pub const MAX_TOOL_NAME: usize = 64;

/// Rust keywords that cannot be module names.
const KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern",
    "false", "fn", "for", "gen", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut",
    "pub", "ref", "return", "self", "static", "struct", "super", "trait", "true", "type", "unsafe",
    "use", "where", "while", "abstract", "become", "box", "do", "final", "macro", "override",
    "priv", "try", "typeof", "unsized", "virtual", "yield",
];

/// Checks a tool file stem: lowercase snake_case (`[a-z][a-z0-9]*(_[a-z0-9]+)*`), at most
/// [`MAX_TOOL_NAME`] characters, not a Rust keyword. The error says how to fix it.
pub fn validate_tool_name(stem: &str) -> Result<(), Invalid> {
    validate_file_stem("tool", "get_weather", stem)
}

/// Checks a hook file stem (`agents/hooks/<name>.rs`) with the same rules as a tool's: hooks
/// become modules too, and config rows cap names at 64 characters.
pub fn validate_hook_name(stem: &str) -> Result<(), Invalid> {
    validate_file_stem("hook", "redact_emails", stem)
}

/// The shared rules; `kind` and `example` only shape the error text.
fn validate_file_stem(kind: &str, example: &str, stem: &str) -> Result<(), Invalid> {
    let snake = !stem.is_empty()
        && stem.as_bytes()[0].is_ascii_lowercase()
        && stem
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !stem.ends_with('_')
        && !stem.contains("__");
    if !snake {
        return Err(format!(
            "{kind} file names must be snake_case (lowercase letters, digits and single underscores, \
             starting with a letter), e.g. `{example}.rs`; `{stem}` is not"
        )
        .into());
    }
    if stem.len() > MAX_TOOL_NAME {
        return Err(
            format!("{kind} name `{stem}` is longer than {MAX_TOOL_NAME} characters").into(),
        );
    }
    if KEYWORDS.contains(&stem) {
        return Err(format!(
            "`{stem}` is a Rust keyword and cannot name a {kind} file; pick another name"
        )
        .into());
    }
    Ok(())
}
