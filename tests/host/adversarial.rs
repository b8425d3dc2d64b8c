//! The adversarial layer's property tests: every body of `edgent::testing::adversarial` run
//! on random inputs, a fixed number of cases each, in every `cargo test` (the same bodies run
//! for longer under cargo-fuzz: `bash scripts/fuzz.sh`, see docs/testing.md).
//!
//! What this proves: on these cases, the invariants each body states (in its rustdoc and in
//! the table of `edgent::testing::adversarial`) hold: the SSE parser, the stream decoders and
//! the fold, the stored replies, client frames and HTTP requests, the configuration's round
//! trips and the API over a D1 of maps, templates, redaction, TOML workflows and every tool's
//! `validate`. What it does not: coverage beyond the cases drawn (random each run; a failure
//! prints its minimal input, which becomes a case below), or anything about the Worker's own
//! glue.

use edgent::build_support::definition::Workflow;
use edgent::testing::adversarial as body;
use proptest::prelude::*;

/// Bytes of up to `max` length.
fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..max)
}

/// Pieces SSE streams are made of, including bytes that are not UTF-8 alone.
const SSE_TOKENS: &[&[u8]] = &[
    b"data:",
    b"data: ",
    b"event: ",
    b"event:x",
    b":",
    b": ping",
    b"id: 1",
    b"retry: 5",
    b"\n",
    b"\r",
    b"\r\n",
    b"\n\n",
    b" ",
    b"x",
    b"{\"a\":1}",
    "\u{e9}".as_bytes(),
    b"\xff",
    b"\xc3",
    b"[DONE]",
];

/// A chunking seed, then SSE pieces.
fn sse_stream(pieces: usize) -> impl Strategy<Value = Vec<u8>> {
    (
        any::<u64>(),
        proptest::collection::vec(proptest::sample::select(SSE_TOKENS), 0..pieces),
    )
        .prop_map(|(seed, tokens)| {
            let mut out = seed.to_le_bytes().to_vec();
            tokens.iter().for_each(|t| out.extend_from_slice(t));
            out
        })
}

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn parse_toml(text: &str) -> Result<Workflow, String> {
    toml::from_str(text).map_err(|e| e.to_string())
}

proptest! {
    #![proptest_config(config(1024))]

    #[test]
    fn sse_any_chunking_gives_the_same_events(data in sse_stream(96)) {
        body::sse_chunking(&data);
    }

    #[test]
    fn a_model_reply_folds_within_its_limits(data in bytes(256)) {
        body::reply_fold(&data);
    }

    #[test]
    fn client_frames_parse_or_are_refused_cleanly(data in bytes(256)) {
        body::client_frame(&data);
    }

    #[test]
    fn http_requests_route_or_are_refused_cleanly(data in bytes(192)) {
        body::http_request(&data);
    }

    #[test]
    fn definitions_survive_the_api_json_and_the_d1_row(data in bytes(192)) {
        body::definition_round_trip(&data);
    }

    #[test]
    fn templates_render_without_panicking(data in bytes(128)) {
        body::template(&data);
    }

    #[test]
    fn a_secret_never_survives_redaction(data in bytes(256)) {
        body::redaction(&data);
    }

    #[test]
    fn workflow_references_resolve_or_fail_cleanly(data in bytes(128)) {
        body::workflow_references(&data);
    }

    #[test]
    fn every_tools_validate_answers_cleanly(data in bytes(192)) {
        let registry = crate::registry().expect("the example app's tools");
        body::tool_validate(&registry, &data);
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn openai_streams_decode_the_same_however_cut(data in bytes(384)) {
        body::openai_stream(&data);
    }

    #[test]
    fn anthropic_streams_decode_the_same_however_cut(data in bytes(384)) {
        body::anthropic_stream(&data);
    }

    #[test]
    fn workers_ai_answers_parse_or_are_refused_cleanly(data in bytes(256)) {
        body::workers_ai_answer(&data);
    }

    #[test]
    fn stored_replies_keep_call_ids_unique(data in bytes(384)) {
        body::stored_reply(&data);
    }

    #[test]
    fn the_configuration_api_keeps_d1_consistent(data in bytes(384)) {
        body::admin_api(&data);
    }

    #[test]
    fn toml_workflows_parse_check_build_and_run(data in bytes(256)) {
        body::workflow_toml(&data, &parse_toml, &edgent_build::check_workflow);
    }
}

proptest! {
    #![proptest_config(config(4))]

    #[test]
    fn the_sse_parser_holds_at_most_one_event(data in sse_stream(8)) {
        body::sse_bounded(&data);
    }
}

// ---- cases the properties found ----------------------------------------------------------

/// Found by `openai_streams_decode_the_same_however_cut`: a provider's error event, then a
/// line past the SSE event limit in the same network read. Fed whole, the parser's error
/// dropped the events before it, so the call failed as `Malformed` (not retried); cut after
/// the first frame, it failed as the provider's `Stream` error (retried). Both decoders now
/// handle each event as it completes (`SseParser::feed_each`): the first error in the stream
/// wins, however the body arrives.
#[test]
fn the_first_error_in_a_stream_wins_however_the_body_is_cut() {
    use edgent::llm::stream::ProviderError;
    use edgent::llm::{Provider, StreamParser};
    let long = "x".repeat(edgent::llm::sse::MAX_EVENT_BYTES + 1);
    for (provider, error) in [
        (Provider::OpenAi, "data: {\"error\":{\"message\":\"overloaded\"}}\n\n"),
        (
            Provider::Anthropic,
            "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"overloaded\"}}\n\n",
        ),
    ] {
        let body = format!("{error}data: {long}");
        let whole = StreamParser::new(provider).unwrap().feed(body.as_bytes());
        let mut cut = StreamParser::new(provider).unwrap();
        let (first, second) = body.as_bytes().split_at(error.len());
        let pieces = cut.feed(first).and_then(|_| cut.feed(second));
        assert_eq!(whole, Err(ProviderError::Stream("overloaded".into())), "{provider:?}");
        assert_eq!(pieces, whole, "{provider:?}");
    }
}

/// Found by `a_secret_never_survives_redaction` (once it gave a second secret inside or
/// around the first, and checked that their order does not matter): a secret inside another
/// was redacted first when listed first, leaving the rest of the longer one in the text
/// (`[/?=[redacted]`). `redact_secrets` now replaces the longest forms first.
#[test]
fn a_secret_inside_another_is_redacted_whole_in_either_order() {
    use edgent::values::redact::redact_secrets;
    let text = "GET /w?appid=k3y%2Fpart2-more&x=k3y/part2";
    for secrets in [
        ["k3y/part2", "k3y/part2-more"],
        ["k3y/part2-more", "k3y/part2"],
    ] {
        let secrets: Vec<String> = secrets.iter().map(|s| s.to_string()).collect();
        assert_eq!(
            redact_secrets(text, &secrets),
            "GET /w?appid=[redacted]&x=[redacted]"
        );
    }
}

/// Found by `toml_workflows_parse_check_build_and_run`: a TOML workflow whose step calls the
/// workflow itself passed the build check and recursed without bound when it ran (a stack
/// overflow: the test binary aborted, the Worker's instance trapped). Nested calls now stop at
/// `MAX_CALL_NESTING`.
#[test]
fn a_workflow_that_calls_itself_ends_with_an_error() {
    let text = "description = \"d\"\n[[steps]]\nname = \"a\"\ntool = \"wf\"\n";
    let workflow = parse_toml(text).unwrap();
    let is_tool = |name: &str| name == "wf";
    edgent_build::check_workflow(&workflow, &is_tool).unwrap();
    let json = serde_json::to_string(&workflow).unwrap();
    let tool = edgent::tool::Tool::from_workflow_json(&json).unwrap();
    let itself = edgent::tool::Tool::from_workflow_json(&json).unwrap();
    let registry = edgent::tool::Registry::build(vec![("wf", itself)]).unwrap();
    let host = edgent::testing::TestHost::new(registry, 1_800_000_000_000).into_rc();
    let result = host.run(tool.call(host.flow("call_1"), "{}"));
    assert!(result.is_error(), "{result:?}");
    assert!(
        result
            .to_model_text()
            .contains("calls deep inside other tools"),
        "{result:?}"
    );
}
