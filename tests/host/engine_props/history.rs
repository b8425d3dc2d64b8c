//! History validity: the history a model is sent must be valid for every provider, as is and
//! as the OpenAI, Anthropic and Workers AI bodies built from it.

use super::*;

use std::collections::HashSet;

use edgent::llm::{build_request, ModelRequest, Provider, Target, ToolChoice};
use edgent::values::message::{Message, MessageStatus};

/// The history a model is sent must be valid for every provider.
pub(super) fn check_history(history: &[Message], context: &str) {
    let fail = |why: String| -> ! {
        let shape: Vec<String> = history
            .iter()
            .map(|m| {
                let calls: Vec<&str> = m
                    .tool_calls
                    .iter()
                    .map(|c| &c.id[..c.id.len().min(20)])
                    .collect();
                format!(
                    "{}{}{}",
                    m.role.as_str(),
                    if calls.is_empty() {
                        String::new()
                    } else {
                        format!("{calls:?}")
                    },
                    m.tool_call_id
                        .as_deref()
                        .map(|i| format!("<{}>", &i[..i.len().min(20)]))
                        .unwrap_or_default()
                )
            })
            .collect();
        panic!("invalid model history ({context}): {why}\n{shape:?}")
    };
    // Provider-neutral: each call followed by exactly its results, nothing else is a result.
    let mut ids = HashSet::new();
    let mut i = 0;
    while i < history.len() {
        let m = &history[i];
        if m.status != MessageStatus::Completed || m.silent || m.depth != 0 {
            fail(format!(
                "message {i} is {:?}, silent {}, depth {}",
                m.status, m.silent, m.depth
            ));
        }
        match m.role {
            Role::Tool => fail(format!("message {i} is a result without its call")),
            Role::Assistant if !m.tool_calls.is_empty() => {
                let want: Vec<&str> = m.tool_calls.iter().map(|c| c.id.as_str()).collect();
                for id in &want {
                    if !ids.insert(*id) {
                        fail(format!(
                            "call id {:?} appears twice",
                            &id[..id.len().min(40)]
                        ));
                    }
                }
                let mut got = Vec::new();
                while history.get(i + 1).is_some_and(|r| r.role == Role::Tool) {
                    i += 1;
                    got.push(history[i].tool_call_id.as_deref().unwrap_or(""));
                }
                let (mut a, mut b) = (want.clone(), got.clone());
                a.sort_unstable();
                b.sort_unstable();
                if a != b {
                    fail(format!(
                        "message {i}: calls {} answered by {} results",
                        want.len(),
                        got.len()
                    ));
                }
            }
            _ => {}
        }
        i += 1;
    }
    for provider in [Provider::OpenAi, Provider::Anthropic, Provider::WorkersAi] {
        let body = build_request(&ModelRequest {
            target: Target {
                provider,
                model: "m",
                base_url: "https://model.invalid/v1",
                max_output_tokens: None,
            },
            system: "be helpful",
            history,
            tools: &[],
            tool_choice: ToolChoice::Auto,
            parallel_tool_calls: false,
            output: None,
            memo: None,
        });
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let why = match provider {
            Provider::Anthropic => anthropic_problem(&messages),
            _ => chat_problem(&messages),
        };
        if let Some(why) = why {
            fail(format!("{} body: {why}", provider.as_str()));
        }
    }
}

/// Chat completions: an assistant message's `tool_calls` are answered by the `tool` messages
/// right after it, each once; no `tool` message elsewhere.
fn chat_problem(messages: &[Value]) -> Option<String> {
    let mut open: Vec<String> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let role = m["role"].as_str().unwrap_or("");
        if role == "tool" {
            let id = m["tool_call_id"].as_str().unwrap_or("").to_owned();
            match open.iter().position(|o| *o == id) {
                Some(k) => {
                    open.remove(k);
                }
                None => return Some(format!("message {i}: a tool message answers no open call")),
            }
            continue;
        }
        if !open.is_empty() {
            return Some(format!(
                "message {i}: {} calls unanswered before it",
                open.len()
            ));
        }
        if let Some(calls) = m["tool_calls"].as_array() {
            open = calls
                .iter()
                .map(|c| c["id"].as_str().unwrap_or("").to_owned())
                .collect();
        }
    }
    (!open.is_empty()).then(|| format!("{} calls unanswered at the end", open.len()))
}

/// Messages API: turns alternate from a user turn, no empty content or blank text, every
/// `tool_use` answered at the start of the next user turn and nowhere else, ids unique and of
/// the allowed characters.
fn anthropic_problem(messages: &[Value]) -> Option<String> {
    let mut ids = HashSet::new();
    let mut open: Vec<String> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let role = m["role"].as_str().unwrap_or("");
        let want = if i % 2 == 0 { "user" } else { "assistant" };
        if role != want {
            return Some(format!("turn {i} is {role}, not {want}"));
        }
        let blocks = m["content"].as_array().cloned().unwrap_or_default();
        if blocks.is_empty() {
            return Some(format!("turn {i} is empty"));
        }
        let mut answered: Vec<String> = Vec::new();
        let mut past_results = false;
        for b in &blocks {
            match b["type"].as_str().unwrap_or("") {
                "text" => {
                    if b["text"].as_str().unwrap_or("").trim().is_empty() {
                        return Some(format!("turn {i} has a blank text block"));
                    }
                    past_results = true;
                }
                "tool_use" => {
                    let id = b["id"].as_str().unwrap_or("").to_owned();
                    let ok = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
                    if id.is_empty() || !id.chars().all(ok) {
                        return Some(format!("turn {i}: tool_use id of characters not allowed"));
                    }
                    if !ids.insert(id.clone()) {
                        return Some(format!(
                            "turn {i}: tool_use id {:?} is not unique",
                            &id[..id.len().min(40)]
                        ));
                    }
                    if role != "assistant" {
                        return Some(format!("turn {i}: tool_use in a user turn"));
                    }
                }
                "tool_result" => {
                    if past_results {
                        return Some(format!("turn {i}: a tool_result after other content"));
                    }
                    answered.push(b["tool_use_id"].as_str().unwrap_or("").to_owned());
                }
                _ => past_results = true,
            }
        }
        if role == "user" {
            let (mut a, mut b) = (open.clone(), answered.clone());
            a.sort_unstable();
            b.sort_unstable();
            if a != b {
                return Some(format!(
                    "turn {i} answers {} of {} tool_use blocks (or others)",
                    answered.len(),
                    open.len()
                ));
            }
            open.clear();
        } else {
            open = blocks
                .iter()
                .filter(|b| b["type"] == "tool_use")
                .map(|b| b["id"].as_str().unwrap_or("").to_owned())
                .collect();
        }
    }
    (!open.is_empty()).then(|| format!("{} tool_use blocks unanswered at the end", open.len()))
}
