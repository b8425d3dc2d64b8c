//! The wire types' JSON Schema, checked in for the TypeScript client.
//!
//! `clients/js/client/schema/protocol.schema.json` is rendered from the Rust types the server
//! serialises (`ServerFrame`, `Message`, `ErrorBody` and the enums they hold) with schemars;
//! `npm run gen` in `clients/js` turns it into `@edgent/client`'s generated types, and the
//! client's own tests check that the .ts matches the schema. This test checks that the schema
//! matches the Rust types: it fails when a wire type changed and the file was not regenerated.
//! `EDGENT_UPDATE_SCHEMA=1 cargo test --test host protocol_schema` rewrites the file instead.
//!
//! What it does not prove: that the server sends what the types say (the e2e tests do), nor
//! the fields the driver adds while serialising (`seq`), which the client declares by hand.

use std::path::PathBuf;

use edgent::values::protocol::{ErrorBody, ServerFrame};
use edgent::values::{CallStatus, Message, MessageStatus, Role, Side, ThreadStatus, ToolCall};
use schemars::generate::SchemaSettings;
use serde_json::{json, Value};

const SCHEMA_PATH: &str = "clients/js/client/schema/protocol.schema.json";

/// One draft-07 document: every wire type under `definitions`, the root the server's frame.
fn render() -> String {
    let mut generator = SchemaSettings::draft07().for_serialize().into_generator();
    generator.subschema_for::<ServerFrame>();
    generator.subschema_for::<ErrorBody>();
    generator.subschema_for::<Message>();
    generator.subschema_for::<ToolCall>();
    generator.subschema_for::<Role>();
    generator.subschema_for::<MessageStatus>();
    generator.subschema_for::<CallStatus>();
    generator.subschema_for::<ThreadStatus>();
    generator.subschema_for::<Side>();
    // A request, not a frame: what `create_schedule` and `POST …/schedules` take.
    generator.subschema_for::<edgent::values::schedule::ScheduleSpec>();
    // An answer, not a frame: what `GET …/mcp` answers (the inspector's MCP tab).
    generator.subschema_for::<edgent::api::mcp::inspect::McpServerList>();
    let definitions: serde_json::Map<String, Value> =
        generator.take_definitions(true).into_iter().collect();
    let doc = json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "ServerFrame",
        "description": "A frame an edgent thread sends on its WebSocket (the definitions hold the values in them). Rendered from the Rust types by tests/host/protocol_schema.rs; do not edit.",
        "$ref": "#/definitions/ServerFrame",
        "definitions": Value::Object(definitions),
    });
    // serde_json's map is sorted, so the rendering is stable.
    let mut text = serde_json::to_string_pretty(&doc).expect("a JSON value renders");
    text.push('\n');
    text
}

#[test]
fn checked_in_schema_matches_the_rust_types() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(SCHEMA_PATH);
    let fresh = render();
    if std::env::var_os("EDGENT_UPDATE_SCHEMA").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().expect("the path has a folder"))
            .expect("create the schema folder");
        std::fs::write(&path, &fresh).expect("write the schema");
        return;
    }
    let stored = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        stored == fresh,
        "{SCHEMA_PATH} is stale: the wire types in crates/edgent/src/values changed.\n\
         Regenerate it and the TypeScript types:\n  \
         EDGENT_UPDATE_SCHEMA=1 cargo test --test host protocol_schema\n  \
         npm run gen --prefix clients/js\n\
         and commit both files."
    );
}

#[test]
fn schema_names_every_frame_type() {
    let doc: Value = serde_json::from_str(&render()).expect("the schema is JSON");
    let variants = doc["definitions"]["ServerFrame"]["oneOf"]
        .as_array()
        .expect("ServerFrame is a oneOf of its variants");
    let types: Vec<&str> = variants
        .iter()
        .filter_map(|v| v["properties"]["type"]["const"].as_str())
        .collect();
    for t in [
        "hello",
        "message",
        "message_chunk",
        "event",
        "tool",
        "status",
        "result",
        "error",
        "pong",
    ] {
        assert!(types.contains(&t), "no `{t}` variant in {types:?}");
    }
}
