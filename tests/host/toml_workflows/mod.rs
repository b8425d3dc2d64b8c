//! TOML workflows: the format's references and the build-time checks (the very code
//! `edgent-build` runs); their runs on the [`TestHost`] are in `runs.rs`.

use edgent::engine::store::Store;
use edgent::tool::{CallToolResult, Retry, Tool, ToolError};
use edgent::values::protocol::ServerFrame;
use serde_json::{json, Map, Value};

use crate::flow_host::{block_on, TestHost, WithThread};

use edgent::build_support::definition::{
    parse_reference, parse_text, resolve, Part, Reference, Text, Workflow,
};

const T0: i64 = 1_700_000_000_000;

mod runs;

fn reference(root: &str, path: &[&str]) -> Reference {
    Reference {
        root: root.to_owned(),
        path: path.iter().map(|s| (*s).to_owned()).collect(),
    }
}

// ---- references --------------------------------------------------------------------------

#[test]
fn a_whole_string_reference_and_interpolation_parse() {
    crate::install_app();
    assert_eq!(
        parse_text("$input.cities.0").unwrap(),
        Text::Whole(reference("input", &["cities", "0"]))
    );
    assert_eq!(parse_text("$a").unwrap(), Text::Whole(reference("a", &[])));
    assert_eq!(
        parse_text("It is ${a.temperature} in ${a.city}!").unwrap(),
        Text::Parts(vec![
            Part::Literal("It is ".into()),
            Part::Ref(reference("a", &["temperature"])),
            Part::Literal(" in ".into()),
            Part::Ref(reference("a", &["city"])),
            Part::Literal("!".into()),
        ])
    );
    // `${x}` alone interpolates (a string), `$$` is a dollar, a `$` before no name is literal.
    assert_eq!(
        parse_text("${a}").unwrap(),
        Text::Parts(vec![Part::Ref(reference("a", &[]))])
    );
    for (text, literal) in [
        ("costs $$5", "costs $5"),
        ("$5 off", "$5 off"),
        ("$$input.x", "$input.x"),
        ("100 $", "100 $"),
    ] {
        assert_eq!(
            parse_text(text).unwrap(),
            Text::Parts(vec![Part::Literal(literal.into())]),
            "{text}"
        );
    }
    assert_eq!(parse_text("").unwrap(), Text::Parts(vec![]));
}

#[test]
fn malformed_references_say_how_to_write_them() {
    crate::install_app();
    let err = parse_text("hello $input.name").unwrap_err().to_string();
    assert!(err.contains("write `${input.name}`"), "{err}");
    let err = parse_text("a ${b.c").unwrap_err().to_string();
    assert!(err.contains("no closing `}`"), "{err}");
    let err = parse_text("$input..x").unwrap_err().to_string();
    assert!(err.contains("path segment \"\""), "{err}");
    let err = parse_text("${1abc}").unwrap_err().to_string();
    assert!(err.contains("must start with a name"), "{err}");
    assert!(parse_reference("a b").is_err());
    assert_eq!(reference("a", &["b", "0"]).to_string(), "$a.b.0");
}

fn scope() -> Map<String, Value> {
    json!({
        "input": { "city": "Lisbon", "days": [1, 2, 3] },
        "bindings": {},
        "a": { "temperature": 21.5, "city": "Lisbon", "tags": ["sun"] },
        "t": "12:00",
    })
    .as_object()
    .unwrap()
    .clone()
}

#[test]
fn resolving_keeps_whole_values_and_interpolates_text() {
    crate::install_app();
    let value = json!({
        "city": "$input.city",
        "days": "$input.days",
        "second": "$input.days.1",
        "weather": "$a",
        "text": "${a.temperature}° in ${a.city} at ${t}, tags ${a.tags}",
        "list": ["$t", 7, null, { "deep": "$a.tags.0" }],
        "plain": "no refs",
    });
    assert_eq!(
        resolve(&value, &scope()).unwrap(),
        json!({
            "city": "Lisbon",
            "days": [1, 2, 3],
            "second": 2,
            "weather": { "temperature": 21.5, "city": "Lisbon", "tags": ["sun"] },
            "text": "21.5° in Lisbon at 12:00, tags [\"sun\"]",
            "list": ["12:00", 7, null, { "deep": "sun" }],
            "plain": "no refs",
        })
    );
}

#[test]
fn unresolved_references_say_where_the_path_ends() {
    crate::install_app();
    let cases = [
        (
            "$bindings.to",
            "`$bindings.to` does not resolve: `bindings` has no `to`",
        ),
        (
            "$a.wind.speed",
            "`$a.wind.speed` does not resolve: `a` has no `wind`",
        ),
        (
            "${input.days.9}",
            "`$input.days.9` does not resolve: `input.days` has no `9`",
        ),
        ("$t.x", "`t` is a string, which has no `x`"),
        ("$nope", "there is no value named `nope`"),
    ];
    for (text, expected) in cases {
        let err = resolve(&json!({ "x": [text] }), &scope())
            .unwrap_err()
            .to_string();
        assert!(err.contains(expected), "{text}: {err}");
    }
}

// ---- build-time checks ---------------------------------------------------------------------

fn known(tool: &str) -> bool {
    matches!(
        tool,
        "get_current_time" | "get_weather" | "send_notification" | "update_context"
    )
}

fn workflow(value: Value) -> Workflow {
    serde_json::from_value(value).unwrap()
}

fn good() -> Value {
    json!({
        "description": "Weather for two cities, then a notification.",
        "input": {
            "type": "object",
            "required": ["first", "second"],
            "properties": { "first": { "type": "string" }, "second": { "type": "string" } },
        },
        "output": { "notified": "$notify", "both": "$cities" },
        "steps": [
            { "name": "cities", "parallel": [
                { "name": "a", "tool": "get_weather", "args": { "city": "$input.first" } },
                { "name": "b", "tool": "get_weather", "args": { "city": "$input.second" } },
            ]},
            { "name": "notify", "tool": "send_notification", "args": {
                "channel": "$bindings.channel", "to": "$bindings.to",
                "message": "It is ${a.temperature} in ${a.city} and ${b.temperature} in ${b.city}",
            }},
        ],
    })
}

fn check_err(value: Value) -> String {
    edgent_build::check_workflow(&workflow(value), &known)
        .unwrap_err()
        .to_string()
}

#[test]
fn a_good_workflow_passes_the_checks() {
    crate::install_app();
    edgent_build::check_workflow(&workflow(good()), &known).unwrap();
    let minimal = json!({
        "description": "The time.",
        "steps": [{ "name": "now", "tool": "get_current_time" }],
    });
    edgent_build::check_workflow(&workflow(minimal), &known).unwrap();
}

#[test]
fn unknown_keys_are_refused_by_the_format() {
    crate::install_app();
    let mut top = good();
    top["colour"] = json!("red");
    let err = serde_json::from_value::<Workflow>(top)
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown field `colour`"), "{err}");
    let mut step = good();
    step["steps"][1]["arguments"] = json!({});
    let err = serde_json::from_value::<Workflow>(step)
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown field `arguments`"), "{err}");
    let mut member = good();
    member["steps"][0]["parallel"][0]["retry"] = json!(3);
    let err = serde_json::from_value::<Workflow>(member)
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown field `retry`"), "{err}");
}

#[test]
fn each_broken_workflow_gets_a_message_saying_what_to_fix() {
    crate::install_app();
    let edit = |f: &dyn Fn(&mut Value)| {
        let mut w = good();
        f(&mut w);
        check_err(w)
    };
    let cases: Vec<(String, &str)> = vec![
        (edit(&|w| w["description"] = json!("  ")), "missing `description`"),
        (edit(&|w| w["steps"] = json!([])), "no steps"),
        (edit(&|w| w["max_attempts"] = json!(0)), "`max_attempts` is 0"),
        (edit(&|w| w["input"]["type"] = json!("string")), "must be the JSON Schema of an object"),
        (
            edit(&|w| w["steps"][1]["name"] = json!("a")),
            "two steps are named `a`",
        ),
        (
            edit(&|w| w["steps"][0]["parallel"][1]["name"] = json!("cities")),
            "two steps are named `cities`",
        ),
        (edit(&|w| w["steps"][1]["name"] = json!("input")), "step name `input` is reserved"),
        (edit(&|w| w["steps"][1]["name"] = json!("send-it")), "is not valid"),
        (
            edit(&|w| w["steps"][1]["tool"] = json!("send_mail")),
            "step `notify` calls `send_mail`, which is neither a tool",
        ),
        (
            edit(&|w| w["steps"][0]["parallel"][0]["tool"] = json!("weather")),
            "step `cities`, member `a` calls `weather`",
        ),
        (
            edit(&|w| w["steps"][0]["parallel"][1]["args"]["city"] = json!("$a.city")),
            "step `cities`, member `b`: `$a.city` refers to `a`, which is not `input`, `bindings` or an earlier step",
        ),
        (
            edit(&|w| w["steps"][0]["parallel"][0]["args"]["city"] = json!("$notify")),
            "`$notify` refers to `notify`",
        ),
        (
            edit(&|w| w["steps"][1]["args"]["to"] = json!("${cities.a.city} and ${ghost}")),
            "`$ghost` refers to `ghost`",
        ),
        (
            edit(&|w| w["steps"][0]["parallel"][0]["args"]["city"] = json!("$input.third")),
            "the input has no property `third`",
        ),
        (edit(&|w| w["output"] = json!("$later")), "`output`: `$later` refers to `later`"),
        (
            edit(&|w| w["steps"][1]["args"]["message"] = json!("hi $a.city")),
            "write `${a.city}`",
        ),
        (edit(&|w| w["steps"][0]["parallel"] = json!([])), "`parallel` is empty"),
        (
            edit(&|w| w["steps"][0]["tool"] = json!("get_weather")),
            "has both `tool` and `parallel`",
        ),
        (
            edit(&|w| {
                w["steps"][1].as_object_mut().unwrap().remove("tool");
            }),
            "step `notify` needs `tool = \"...\"`",
        ),
        (
            edit(&|w| w["steps"][0]["args"] = json!({ "city": "x" })),
            "`args` belongs on each member",
        ),
        (edit(&|w| w["steps"][1]["args"] = json!("x")), "`args` must be a table"),
    ];
    for (err, expected) in cases {
        assert!(err.contains(expected), "expected {expected:?} in: {err}");
    }
}
