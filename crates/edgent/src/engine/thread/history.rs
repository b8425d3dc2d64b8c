//! Shaping a history for a model: repairing tool-call pairs, the `dual_ai` side views, and
//! the calls of a reply every provider can take back.

use super::*;
use crate::values::tool_name::MAX_TOOL_NAME;

/// Makes a history valid for every provider: each assistant tool call is followed by exactly
/// its result (a missing one becomes an error result saying so), and results whose call is
/// not in the history are dropped.
pub fn repair_history(history: Vec<Message>) -> Vec<Message> {
    if well_paired(&history) {
        return history;
    }
    repair_pairs(history)
}

/// Whether [`repair_history`] would give `history` back unchanged: every assistant message's
/// calls are followed at once by exactly their results, in the calls' order, no other result
/// appears, and no call id repeats (the repair pairs a repeated id once). The common case, and
/// one pass with no allocation but the ids' sort.
pub(crate) fn well_paired(history: &[Message]) -> bool {
    let mut owed: &[ToolCall] = &[];
    let mut ids: Vec<&str> = Vec::new();
    for m in history {
        match (&m.role, &m.tool_call_id) {
            (Role::Tool, Some(id)) => match owed.split_first() {
                Some((call, rest)) if call.id == *id => owed = rest,
                _ => return false,
            },
            (Role::Tool, None) => return false,
            _ if !owed.is_empty() => return false,
            _ => {
                owed = &m.tool_calls;
                ids.extend(owed.iter().map(|c| c.id.as_str()));
            }
        }
    }
    ids.sort_unstable();
    owed.is_empty() && ids.windows(2).all(|w| w[0] != w[1])
}

fn repair_pairs(history: Vec<Message>) -> Vec<Message> {
    let mut results: HashMap<String, Message> = HashMap::new();
    let mut rest = Vec::with_capacity(history.len());
    for m in history {
        match (&m.role, &m.tool_call_id) {
            (Role::Tool, Some(id)) => {
                results.insert(id.clone(), m);
            }
            (Role::Tool, None) => {}
            _ => rest.push(m),
        }
    }
    let mut out = Vec::with_capacity(rest.len() + results.len());
    for m in rest {
        let calls: Vec<ToolCall> = m.tool_calls.clone();
        let created_at = m.created_at;
        out.push(m);
        for c in calls {
            out.push(results.remove(&c.id).unwrap_or_else(|| {
                Message::tool_result(
                    &c,
                    "Error: this tool call was interrupted and has no result.",
                    created_at,
                )
            }));
        }
    }
    out
}

/// The history without the tool calls in `ids` (and without assistant messages left empty).
pub(super) fn without_calls(history: Vec<Message>, ids: &[String]) -> Vec<Message> {
    if ids.is_empty() {
        return history;
    }
    history
        .into_iter()
        .filter_map(|mut m| {
            if m.tool_calls.is_empty() {
                return Some(m);
            }
            m.tool_calls.retain(|c| !ids.contains(&c.id));
            (m.role != Role::Assistant || !m.tool_calls.is_empty() || !m.content.is_empty())
                .then_some(m)
        })
        .collect()
}

/// A call cut short [`MAX_TOOL_INTERRUPTIONS`] times: it is abandoned, not run again.
pub(super) fn worn_out(call: &StoredToolCall) -> bool {
    call.interruptions >= MAX_TOOL_INTERRUPTIONS
}

/// The final answer of a stop tool: `property` of its result (when the result is a JSON
/// object holding it), else of its arguments, else the whole result text.
pub(super) fn stop_answer(result_text: &str, arguments: &str, property: Option<&str>) -> String {
    let pick = |json: &str| -> Option<String> {
        let value = serde_json::from_str::<Value>(json).ok()?;
        match value.get(property?)? {
            Value::String(s) => Some(s.clone()),
            other => Some(other.to_string()),
        }
    };
    pick(result_text)
        .or_else(|| pick(arguments))
        .unwrap_or_else(|| result_text.to_owned())
}

/// Shows a dual-AI history from `side`'s seat: its own messages stay `assistant`; the other
/// side's words become `user` messages (named by its label), and the other side's tool calls
/// and results are its own business and are left out.
pub fn view_for_side(history: Vec<Message>, side: Side, other_label: Option<&str>) -> Vec<Message> {
    history
        .into_iter()
        .filter_map(|m| {
            let theirs = m.side.is_some_and(|s| s != side);
            match m.role {
                Role::Assistant if theirs => (!m.content.is_empty()).then(|| Message {
                    role: Role::User,
                    tool_calls: Vec::new(),
                    name: other_label.map(str::to_owned),
                    ..m
                }),
                Role::Tool if theirs => None,
                _ => Some(m),
            }
        })
        .collect()
}

/// Why a reply's calls cannot be stored, if one names a tool longer than any tool's name: no
/// tool or delegate is named like that, providers refuse such a name in the history, and its
/// result would repeat it (name and error text) past the row limit.
pub(super) fn unfit_call_name(calls: &[ToolCall]) -> Option<ProviderError> {
    let long = calls.iter().find(|c| c.name.len() > MAX_TOOL_NAME)?;
    Some(ProviderError::Malformed(format!(
        "a tool call names a tool of {} bytes; tool names have at most {MAX_TOOL_NAME}",
        long.name.len()
    )))
}

/// Whether a provider's call id can go back to any provider as it is (a fallback model may
/// get the history): 1-40 of `A-Z a-z 0-9 _ -`. The Messages API allows no other characters
/// (it would get two ids that differ only there as one, and refuse the request), and chat
/// completions refuses ids over 40 characters. Ours fit (`call_` and 32 hex digits).
pub(super) fn fits_every_wire(id: &str) -> bool {
    (1..=40).contains(&id.len())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// A tool call id of ours, for a call whose provider id cannot name it in this thread.
pub(super) fn internal_call_id() -> String {
    format!("call_{}", crate::values::ids::new_id().replace('-', ""))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "lookup".into(),
            arguments: "{}".into(),
        }
    }

    fn asking(ids: &[&str]) -> Message {
        let mut m = Message::new(Role::Assistant, "", 1);
        m.tool_calls = ids.iter().map(|id| call(id)).collect();
        m
    }

    fn result(id: &str) -> Message {
        Message::tool_result(&call(id), "done", 2)
    }

    /// Histories from a small alphabet (users, replies calling up to two of four ids, results
    /// of any id or none), many of them malformed: whenever the check lets one through
    /// untouched, the repair would have given it back unchanged too.
    #[test]
    fn a_history_passed_through_is_one_the_repair_leaves_as_it_is() {
        let ids = ["a", "b", "c", "d"];
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |n: u64| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) % n
        };
        let (mut passed, mut repaired) = (0, 0);
        for _ in 0..20_000 {
            let len = next(7);
            let mut history = Vec::new();
            for _ in 0..len {
                history.push(match next(5) {
                    0 => Message::new(Role::User, "hi", 0),
                    1 => asking(&[]),
                    2 => {
                        let n = next(3) as usize;
                        let picked: Vec<&str> = (0..n).map(|_| ids[next(4) as usize]).collect();
                        asking(&picked)
                    }
                    3 => result(ids[next(4) as usize]),
                    _ => Message {
                        tool_call_id: None,
                        ..result("a")
                    },
                });
            }
            if well_paired(&history) {
                passed += 1;
                assert_eq!(repair_pairs(history.clone()), history, "{history:?}");
            } else {
                repaired += 1;
            }
        }
        assert!(passed > 1_000 && repaired > 1_000, "{passed} / {repaired}");
    }

    #[test]
    fn paired_calls_pass_and_every_flaw_goes_to_the_repair() {
        let ok = vec![
            Message::new(Role::User, "hi", 0),
            asking(&["a", "b"]),
            result("a"),
            result("b"),
            asking(&[]),
        ];
        assert!(well_paired(&ok));
        let flawed = [
            // a result out of the calls' order
            vec![asking(&["a", "b"]), result("b"), result("a")],
            // a missing result, at the end and before the next message
            vec![asking(&["a"])],
            vec![asking(&["a"]), Message::new(Role::User, "hi", 0)],
            // a result without its call, and one without an id
            vec![result("a")],
            vec![Message {
                tool_call_id: None,
                ..result("a")
            }],
            // an id called twice (the repair pairs it once)
            vec![asking(&["a"]), result("a"), asking(&["a"]), result("a")],
        ];
        for history in flawed {
            assert!(!well_paired(&history), "{history:?}");
        }
    }
}
