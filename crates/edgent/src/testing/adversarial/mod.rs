//! Property bodies for the adversarial test layer, written once and run by two drivers: the
//! proptest module of the host tests (`tests/host/adversarial.rs`, a fixed number of cases in
//! every `cargo test`) and the cargo-fuzz targets (`fuzz/fuzz_targets/*.rs`, for as long as
//! they are given: `bash scripts/fuzz.sh [seconds]`).
//!
//! Each body takes arbitrary bytes and panics (`assert!`) when an invariant breaks. A body
//! reads its structured input through one decoder ([`Input`]): a few bytes choose among
//! meaningful pieces (reused ids, limit-sized text, reference syntax, route segments), so
//! random bytes reach deep paths, and a short input is a small case. Most bodies also have a
//! raw mode, where the rest of the input is the text itself.
//!
//! | body | code under test | invariant |
//! | --- | --- | --- |
//! | [`sse_chunking`] | `llm::sse` | any chunking gives the same events, partial tail and error |
//! | [`sse_bounded`] | `llm::sse` | what the parser holds stays within one event, however long a line or event |
//! | [`openai_stream`], [`anthropic_stream`] | the stream decoders and the fold | same events however cut; clean errors; the reply within its limits |
//! | [`workers_ai_answer`] | `llm::workers_ai::parse_response` and the fold | clean errors; ordered calls with ids; limits |
//! | [`reply_fold`] | `llm::stream::Completion` | no panic; at most 128 calls and 1 MiB; refused replies keep no calls |
//! | [`stored_reply`] | the engine storing replies | stored call ids unique in the thread; one result per call; limits |
//! | [`client_frame`] | `values::protocol`, `api::ops` (rpc) | clean `error` frames and 4xx; accepted ops keep their bounds |
//! | [`http_request`] | `api::routes`, `api::ops` (HTTP), bodies and queries | clean 404/405/4xx; key rules; bounds |
//! | [`definition_round_trip`] | `config::codec`, `config::admin` | API JSON and D1 row round trips |
//! | [`admin_api`] | `runtime::admin` over a D1 of maps | clean answers; writes read back; D1 always consistent |
//! | [`template`] | `config::render_template` | no panic; no context, no change |
//! | [`redaction`] | `values::redact` | a secret never survives, in any of its encoded forms |
//! | [`workflow_references`] | TOML workflow references | clean errors; references print back and resolve |
//! | [`workflow_toml`] | a workflow file from text to a run | clean errors; a checked workflow builds and runs |
//! | [`tool_validate`] | every tool's `validate` | no panic; a refusal has a message; the same answer twice |

// A property body's job is to panic when an invariant breaks: `expect` says which.
#![allow(clippy::expect_used)]

mod api;
mod config;
mod fold;
mod input;
mod providers;
mod sse;
mod text;
mod tools;
mod workflow;

pub use api::{client_frame, http_request};
pub use config::{admin_api, definition_round_trip};
pub use fold::{reply_fold, stored_reply};
pub use input::{chunks, Input};
pub use providers::{anthropic_stream, openai_stream, workers_ai_answer};
pub use sse::{sse_bounded, sse_chunking};
pub use text::{redaction, template};
pub use tools::tool_validate;
pub use workflow::{workflow_references, workflow_toml, CheckWorkflow, ParseToml};
