//! Every tool's argument check ([`Tool::validate`], what `queue_tool` runs before storing a
//! call, and what a run checks before its handler) on arbitrary arguments.

use serde_json::{Map, Value};

use super::input::{any_value, Input};
use crate::tool::Registry;
use crate::values::validate::parse_json;

/// Strings worth giving any argument: empty, blank, huge numbers as text, ids, emails, dates,
/// JSON in a string, control and non-ASCII characters.
const STRINGS: &[&str] = &[
    "",
    " ",
    "0",
    "-1",
    "1e999",
    "18446744073709551616",
    "cus_1001",
    "a@b.c",
    "2026-11-24T10:00:00Z",
    "{}",
    "[]",
    "null",
    "\u{0}",
    "é\u{1F600}",
    "Porto",
];

/// Input: a tool (by position in the registry), a mode byte, then the raw argument text, or
/// the ops that build an object over the tool's own property names with strings (or any
/// values) in them.
///
/// [`Tool::validate`] never panics: it accepts the arguments or refuses them with a message
/// a model can act on, the same way every time it is asked.
pub fn tool_validate(registry: &Registry, data: &[u8]) {
    let mut input = Input::new(data);
    let names: Vec<&str> = registry.names().collect();
    let Some(name) = input.pick(&names) else {
        return;
    };
    let Some(tool) = registry.get(name) else {
        return;
    };
    let value = if input.one_in(4) {
        let raw = String::from_utf8_lossy(input.rest()).into_owned();
        match parse_json(&raw) {
            Ok(v) => v,
            Err(e) => return assert!(!e.message().is_empty(), "a JSON error without a message"),
        }
    } else {
        let properties: Vec<String> = tool.parameters()["properties"]
            .as_object()
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default();
        let mut args = Map::new();
        for key in &properties {
            match input.below(6) {
                3 => {}
                4 => {
                    args.insert(key.clone(), any_value(&mut input, 1));
                }
                5 => {
                    args.insert(key.clone(), Value::from(input.text(24)));
                }
                _ => {
                    let s = input.pick(STRINGS).unwrap_or_default();
                    args.insert(key.clone(), Value::from(s));
                }
            }
        }
        if input.one_in(8) {
            args.insert(input.text(6), any_value(&mut input, 1));
        }
        Value::Object(args)
    };
    let first = tool.validate(value.clone());
    if let Err(e) = &first {
        assert!(
            !e.message().trim().is_empty(),
            "{name}: a refusal without a message"
        );
    }
    assert_eq!(
        tool.validate(value),
        first,
        "{name}: asked twice, answered differently"
    );
}
