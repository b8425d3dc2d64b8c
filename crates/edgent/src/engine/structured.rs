//! A reply against its prompt's `response_format`: whether it is the final answer, and whether
//! the answer fits the schema. Pure, like the model chain's policy: the runtime performs what
//! this says (`runtime::chain::run_checked_chain`), whichever wire format the model speaks.
//!
//! The answer is the reply's text when it calls no tool (OpenAI and Workers AI formats), or the
//! input of its call of the answer tool (the Anthropic format offers the format as a tool; a
//! fallback model of another format answers in text, and either is read). An answer that does
//! not fit goes back to the model once, with what is wrong ([`correction`]); a second one
//! fails the call ([`ProviderError::InvalidOutput`]).

use serde_json::Value;

use crate::llm::request::OutputFormat;
use crate::llm::stream::{Completion, ProviderError};
use crate::values::json_schema::validate;
use crate::values::message::{Message, Role};

/// Answers that do not fit and are sent back to the model within one model call.
pub const MAX_CORRECTIONS: u32 = 1;

/// What a whole reply is, for a prompt with a response format.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Not the final answer: the reply calls tools, which run, and the model answers later (or
    /// the reply is broken, which storing it reports).
    NotTheAnswer,
    /// The answer fits: its value. The reply's text now holds it as JSON text, and an answer
    /// tool's call is gone from it.
    Fits(Value),
    /// The answer does not fit: what is wrong, as the model and the error frame read it.
    Misfits(String),
}

/// Judges `completion` (a whole reply) against `format`. The answer tool's call becomes the
/// reply's text, so the stored reply looks the same from every wire format. A reply that calls
/// the answer tool beside other tools is not the answer yet: the answer call is dropped, the
/// others run, and the model answers after their results.
pub fn judge(completion: &mut Completion, format: &OutputFormat<'_>) -> Verdict {
    if completion.validate().is_err() {
        return Verdict::NotTheAnswer;
    }
    let is_answer = |name: &str| name == format.name;
    let answers = completion
        .tool_calls
        .iter()
        .filter(|c| is_answer(&c.name))
        .count();
    if answers > 0 && answers < completion.tool_calls.len() {
        completion.tool_calls.retain(|c| !is_answer(&c.name));
        return Verdict::NotTheAnswer;
    }
    if answers > 0 {
        // Only answer calls (several when parallel calls are allowed): the first is the answer.
        let calls = std::mem::take(&mut completion.tool_calls);
        if let Some(call) = calls.into_iter().next() {
            completion.text = call.arguments;
        }
    } else if !completion.tool_calls.is_empty() {
        return Verdict::NotTheAnswer;
    }
    let text = completion.text.trim();
    if text.is_empty() {
        return Verdict::Misfits("it is empty; the answer is a JSON value".into());
    }
    let value = match serde_json::from_str::<Value>(text) {
        Ok(value) => value,
        Err(e) => {
            return Verdict::Misfits(format!(
                "it is not JSON ({e}); answer with the JSON value only, no other text"
            ))
        }
    };
    let errors = validate(format.schema, &value);
    if errors.is_empty() {
        Verdict::Fits(value)
    } else {
        Verdict::Misfits(errors.join("; "))
    }
}

/// The messages that send an answer that does not fit back to the model, after the history
/// of the call: its answer as it gave it, then what is wrong with it. They are not stored:
/// only the call's final reply is.
pub fn correction(answer: String, format: &OutputFormat<'_>, why: &str, now: i64) -> [Message; 2] {
    [
        Message::new(Role::Assistant, answer, now),
        Message::new(
            Role::User,
            format!(
                "Your answer does not fit the required format `{}`: {why}. Give the whole \
                 answer again, corrected, as JSON matching that schema.",
                format.name
            ),
            now,
        ),
    ]
}

/// The failure of a call whose corrected answer does not fit either.
pub fn give_up(format: &OutputFormat<'_>, why: &str) -> ProviderError {
    ProviderError::InvalidOutput(format!(
        "the answer does not fit response_format {:?}, also after {MAX_CORRECTIONS} correction: {why}",
        format.name
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::stream::FinishReason;
    use crate::values::message::ToolCall;
    use serde_json::json;

    fn reply(text: &str, calls: &[(&str, &str)]) -> Completion {
        Completion {
            text: text.into(),
            tool_calls: calls
                .iter()
                .enumerate()
                .map(|(i, (name, args))| ToolCall {
                    id: format!("c{i}"),
                    name: (*name).into(),
                    arguments: (*args).into(),
                })
                .collect(),
            finish: Some(FinishReason::Stop),
            done: true,
            ..Completion::default()
        }
    }

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": { "city": { "type": "string" } },
            "required": ["city"],
            "additionalProperties": false
        })
    }

    #[test]
    fn text_and_the_answer_tool_are_both_answers() {
        let schema = schema();
        let format = OutputFormat {
            name: "place",
            schema: &schema,
        };
        let mut text = reply(" {\"city\": \"Porto\"}\n", &[]);
        assert_eq!(
            judge(&mut text, &format),
            Verdict::Fits(json!({ "city": "Porto" }))
        );

        let mut tool = reply("", &[("place", r#"{"city":"Lima"}"#)]);
        assert_eq!(
            judge(&mut tool, &format),
            Verdict::Fits(json!({ "city": "Lima" }))
        );
        assert!(
            tool.tool_calls.is_empty(),
            "the answer is not a call to run"
        );
        assert_eq!(tool.text, r#"{"city":"Lima"}"#);
    }

    #[test]
    fn tool_calls_are_not_the_answer_and_an_answer_beside_them_waits() {
        let schema = schema();
        let format = OutputFormat {
            name: "place",
            schema: &schema,
        };
        let mut calls = reply("Let me look.", &[("lookup", "{}")]);
        assert_eq!(judge(&mut calls, &format), Verdict::NotTheAnswer);
        assert_eq!(calls.tool_calls.len(), 1);

        let mut both = reply("", &[("lookup", "{}"), ("place", r#"{"city":"Oslo"}"#)]);
        assert_eq!(judge(&mut both, &format), Verdict::NotTheAnswer);
        let names: Vec<&str> = both.tool_calls.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            ["lookup"],
            "the answer call is dropped, the others run"
        );
    }

    #[test]
    fn answers_that_do_not_fit_say_why() {
        let schema = schema();
        let format = OutputFormat {
            name: "place",
            schema: &schema,
        };
        let misfit = |text: &str| match judge(&mut reply(text, &[]), &format) {
            Verdict::Misfits(why) => why,
            other => panic!("{other:?}"),
        };
        assert!(misfit("It is Porto.").starts_with("it is not JSON (expected value"));
        assert!(misfit("   ").starts_with("it is empty"));
        assert_eq!(
            misfit(r#"{"city": 5, "country": "PT"}"#),
            "at `city`: should be a string, not an integer; at `country`: this property is not allowed"
        );
        let [answer, why] = correction(
            "{}".into(),
            &format,
            "the answer is missing the required property `city`",
            7,
        );
        assert_eq!(
            (answer.role, answer.content.as_str()),
            (Role::Assistant, "{}")
        );
        assert_eq!(why.role, Role::User);
        assert!(why
            .content
            .contains("format `place`: the answer is missing the required property `city`"));
        let failed = give_up(&format, "it is empty");
        assert_eq!(failed.code(), "invalid_structured_output");
        assert!(!failed.is_retryable());
    }

    #[test]
    fn a_broken_reply_is_left_for_storing_to_report() {
        let schema = schema();
        let format = OutputFormat {
            name: "place",
            schema: &schema,
        };
        let mut cut = Completion {
            text: "{\"ci".into(),
            ..Completion::default()
        };
        assert_eq!(judge(&mut cut, &format), Verdict::NotTheAnswer);
    }
}
