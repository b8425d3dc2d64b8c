//! `tag_tool_errors`: prefixes the text of a failed tool call's result with the tool's name
//! (`get_weather failed: city not found`), so that when several calls of one reply fail the
//! model knows which is which. The result stays an error.

use edgent::prelude::*;

/// Registered as `tag_tool_errors` (the file stem).
pub fn hook() -> Hook {
    Hook::after_tool_call_failure(|_ctx, call: &ToolCall, mut result: CallToolResult| {
        let first_text = result.content.iter_mut().find_map(|c| match c {
            Content::Text { text } => Some(text),
            _ => None,
        });
        match first_text {
            Some(text) => text.insert_str(0, &format!("{} failed: ", call.name)),
            // Only images or documents: the tag becomes the first item.
            None => result
                .content
                .insert(0, Content::text(format!("{} failed", call.name))),
        }
        Ok(result)
    })
}
