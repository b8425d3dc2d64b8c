//! The tool API on the host: schemas of every supported argument shape, the depth limit,
//! validation messages, refine rules, the three handler forms and result conversion.

use std::collections::{BTreeMap, HashMap};

use edgent::prelude::*;
use edgent::tool::schema::{check_arguments, schema_for, SchemaProblem, MAX_DEPTH};
use edgent::tool::{Registry, SourceKind};
use serde_json::{json, Value};

use crate::flow_host::{block_on, TestHost, WithThread};

const T0: i64 = 1_795_300_162_000;

/// Every supported shape in one argument type.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Shapes {
    /// A string.
    text: String,
    /// An integer.
    count: i64,
    /// A float.
    ratio: f64,
    /// A boolean.
    flag: bool,
    /// Only null.
    nothing: (),
    /// A plain enum.
    size: Size,
    /// A literal (a one-variant enum).
    version: Version,
    /// An array.
    tags: Vec<String>,
    /// An object.
    point: Point,
    /// A map / record.
    labels: HashMap<String, u32>,
    /// An untagged union.
    id: StringOrNumber,
    /// A tagged union.
    shape: Shape,
    /// Optional (may be absent).
    #[serde(default)]
    note: Option<String>,
    /// Nullable (serde also accepts it absent).
    parent: Option<u32>,
    /// With a default.
    #[serde(default = "ten")]
    limit: u32,
}

fn ten() -> u32 {
    10
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Size {
    Small,
    Large,
}

#[derive(Debug, Deserialize, JsonSchema)]
enum Version {
    #[serde(rename = "v1")]
    V1,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Point {
    x: f64,
    y: f64,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum StringOrNumber {
    S(String),
    N(i64),
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "lowercase")]
#[allow(dead_code)]
enum Shape {
    Circle { radius: f64 },
    Square { side: f64 },
}

fn types(schema: &Value) -> Vec<String> {
    match &schema["type"] {
        Value::String(t) => vec![t.clone()],
        Value::Array(ts) => ts.iter().map(|t| t.as_str().unwrap().to_owned()).collect(),
        _ => vec![],
    }
}

#[test]
fn every_supported_shape_has_an_inlined_schema() {
    crate::install_app();
    let s = schema_for::<Shapes>();
    let p = &s["properties"];
    assert_eq!(s["type"], "object");
    assert!(s.get("$schema").is_none() && s.get("title").is_none());
    assert!(
        !s.to_string().contains("$ref"),
        "subschemas are inlined: {s}"
    );
    assert_eq!(s["additionalProperties"], false);

    assert_eq!(types(&p["text"]), ["string"]);
    assert_eq!(p["text"]["description"], "A string.");
    assert_eq!(types(&p["count"]), ["integer"]);
    assert_eq!(types(&p["ratio"]), ["number"]);
    assert_eq!(types(&p["flag"]), ["boolean"]);
    assert_eq!(types(&p["nothing"]), ["null"]);
    assert_eq!(p["size"]["enum"], json!(["small", "large"]));
    let literal = &p["version"];
    assert!(
        literal["const"] == "v1" || literal["enum"] == json!(["v1"]),
        "{literal}"
    );
    assert_eq!(types(&p["tags"]), ["array"]);
    assert_eq!(types(&p["tags"]["items"]), ["string"]);
    assert_eq!(types(&p["point"]), ["object"]);
    assert_eq!(p["point"]["required"], json!(["x", "y"]));
    assert_eq!(types(&p["labels"]), ["object"]);
    assert_eq!(types(&p["labels"]["additionalProperties"]), ["integer"]);
    let untagged = p["id"]["anyOf"]
        .as_array()
        .expect("untagged union is anyOf");
    assert_eq!(untagged.len(), 2);
    let tagged = p["shape"]["oneOf"]
        .as_array()
        .expect("tagged union is oneOf");
    assert_eq!(tagged.len(), 2);
    assert!(tagged[0]["properties"]["kind"]
        .to_string()
        .contains("circle"));
    assert_eq!(types(&p["note"]), ["string", "null"]);
    assert_eq!(types(&p["parent"]), ["integer", "null"]);
    assert_eq!(p["limit"]["default"], 10);

    let required: Vec<&str> = s["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(required.contains(&"text") && required.contains(&"labels"));
    assert!(!required.contains(&"note") && !required.contains(&"limit"));
    assert!(check_arguments(&s).is_ok());
}

#[test]
fn any_json_value_is_an_empty_schema_not_true() {
    crate::install_app();
    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Anything {
        value: Value,
        list: Vec<Value>,
    }
    let s = schema_for::<Anything>();
    assert!(s["properties"]["value"].is_object(), "{s}");
    assert!(s["properties"]["list"]["items"].is_object(), "{s}");
}

// Depth: the arguments object is level 1; each nested object or array adds one.
#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct L7 {
    leaf: String,
}
#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct L6 {
    l7: L7,
}
#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct L5 {
    l6: Vec<L6>,
}
#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct L4 {
    l5: L5,
}
#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct L3 {
    l4: L4,
}
#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Seven {
    l3: L3,
}
#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Eight {
    deeper: Vec<Seven>,
}

#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Tree {
    children: Vec<Tree>,
}

#[test]
fn seven_levels_pass_eight_are_refused_with_the_path() {
    crate::install_app();
    // Seven: args(1) > l3(2) > l4(3) > l5(4) > l6[](5) > item(6) > l7(7).
    // Eight: args(1) > deeper[](2) > item(3) > l3(4) > l4(5) > l5(6) > l6[](7) > item(8).
    assert_eq!(check_arguments(&schema_for::<Seven>()), Ok(()));
    match check_arguments(&schema_for::<Eight>()) {
        Err(SchemaProblem::TooDeep { path, depth }) => {
            assert_eq!(depth, MAX_DEPTH + 1);
            assert_eq!(path, "deeper[].l3.l4.l5.l6[]");
        }
        other => panic!("expected TooDeep, got {other:?}"),
    }
    assert!(matches!(
        check_arguments(&schema_for::<Tree>()),
        Err(SchemaProblem::Recursive { .. })
    ));
    assert_eq!(
        check_arguments(&schema_for::<Vec<String>>()),
        Err(SchemaProblem::NotAnObject)
    );
}

async fn deep(_flow: FlowState, _args: Eight) -> CallToolResult {
    CallToolResult::text("unreachable")
}
async fn greet(_flow: FlowState, args: Shapes) -> CallToolResult {
    CallToolResult::text(args.text)
}

#[test]
fn the_registry_refuses_broken_tools_naming_tool_and_path() {
    crate::install_app();
    let err = Registry::build(vec![
        ("deep_tool", Tool::new("too deep").handler(deep)),
        ("no_handler", Tool::new("missing")),
        (
            "wrong_refine",
            Tool::new("mismatch")
                .handler(greet)
                .refine(|_: &Point| Ok(())),
        ),
    ])
    .unwrap_err();
    let text = err.to_string();
    assert_eq!(err.problems.len(), 3, "{text}");
    assert!(
        text.contains("tool `deep_tool`") && text.contains("`deeper[].l3.l4.l5.l6[]`"),
        "{text}"
    );
    assert!(
        text.contains("tool `no_handler`") && text.contains(".handler("),
        "{text}"
    );
    assert!(
        text.contains("tool `wrong_refine`") && text.contains("Point"),
        "{text}"
    );
}

#[test]
fn the_discovered_registry_is_valid_and_lists_return_schemas() {
    crate::install_app();
    let registry = crate::registry().expect("every tool in agents/tools/ is valid");
    let names: Vec<&str> = registry.names().collect();
    for tool in [
        "conversation_stats",
        "get_current_time",
        "get_weather",
        "lookup_customer",
        "process_order",
        "send_notification",
        "update_context",
    ] {
        assert!(names.contains(&tool), "{tool} missing from {names:?}");
    }
    let specs = registry.all_specs();
    let spec = |n: &str| specs.iter().find(|s| s.name == n).unwrap();
    assert!(spec("get_current_time").returns.is_none());
    assert_eq!(
        spec("get_current_time").parameters["additionalProperties"],
        false
    );
    let returns = spec("process_order").returns.clone().expect("typed return");
    assert!(returns["properties"]["order_id"].is_object(), "{returns}");
    assert!(
        spec("lookup_customer").parameters["properties"]["email"]["description"]
            .as_str()
            .unwrap()
            .contains("email")
    );
}

fn run(tool: &Tool, raw: &str) -> CallToolResult {
    let host = TestHost::with_thread(T0);
    block_on(tool.call(host.flow("call_1"), raw))
}

fn error_text(r: &CallToolResult) -> String {
    assert!(r.is_error(), "expected an error result, got {r:?}");
    r.to_model_text()
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Order {
    /// Items.
    items: Vec<Item>,
    /// Size.
    size: Size,
    #[serde(default)]
    email: Option<String>,
    #[serde(default)]
    customer_id: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Item {
    quantity: u32,
}

async fn order(_flow: FlowState, o: Order) -> CallToolResult {
    CallToolResult::text(format!("{} items, {:?}", o.items.len(), o.size))
}

fn order_tool() -> Tool {
    Tool::new("orders").handler(order).refine(|o: &Order| {
        if o.email.is_none() && o.customer_id.is_none() {
            Err("either customer_id or email is required".into())
        } else {
            Ok(())
        }
    })
}

#[test]
fn bad_arguments_become_error_results_that_say_what_to_fix() {
    crate::install_app();
    let tool = order_tool();
    let cases = [
        ("{\"items\": [", "not valid JSON"),
        ("[1, 2]", "must be a JSON object, not an array"),
        (
            "{\"size\": \"small\", \"email\": \"a@b\"}",
            "missing field `items`",
        ),
        (
            "{\"items\": [{\"quantity\": \"two\"}], \"size\": \"small\", \"email\": \"a@b\"}",
            "at `items[0].quantity`: invalid type: string \"two\"",
        ),
        (
            "{\"items\": [], \"size\": \"huge\", \"email\": \"a@b\"}",
            "unknown variant `huge`, expected `small` or `large`",
        ),
        (
            "{\"items\": [], \"size\": \"small\", \"email\": \"a@b\", \"extra\": 1}",
            "unknown field `extra`",
        ),
        (
            "{\"items\": [], \"size\": \"small\"}",
            "either customer_id or email is required",
        ),
    ];
    for (raw, expected) in cases {
        let text = error_text(&run(&tool, raw));
        assert!(text.contains(expected), "{raw}: {text}");
        assert!(text.starts_with("Error: invalid arguments"), "{text}");
    }
    let ok = run(
        &tool,
        "{\"items\": [{\"quantity\": 2}], \"size\": \"large\", \"customer_id\": \"c1\"}",
    );
    assert_eq!(ok, CallToolResult::text("1 items, Large"));
}

async fn no_args(flow: FlowState) -> String {
    format!("depth {}", flow.depth)
}

#[derive(Deserialize, JsonSchema)]
struct Num {
    n: i64,
}

#[derive(Serialize, JsonSchema)]
struct Doubled {
    /// Twice n.
    doubled: i64,
}

async fn typed_return(_flow: FlowState, a: Num) -> Result<Json<Doubled>, ToolError> {
    if a.n < 0 {
        return Err(ToolError::new("n must not be negative"));
    }
    Ok(Json(Doubled { doubled: a.n * 2 }))
}

#[test]
fn the_three_handler_forms() {
    crate::install_app();
    let t = Tool::new("no args").handler(no_args);
    assert_eq!(run(&t, ""), CallToolResult::text("depth 0"));
    assert_eq!(run(&t, "{}"), CallToolResult::text("depth 0"));
    assert!(error_text(&run(&t, "{\"x\": 1}")).contains("unknown field `x`"));
    assert!(t.returns().is_none());

    let t = Tool::new("typed").handler(typed_return);
    assert_eq!(t.parameters()["required"], json!(["n"]));
    assert_eq!(
        t.returns().unwrap()["properties"]["doubled"]["description"],
        "Twice n."
    );
    assert_eq!(
        run(&t, "{\"n\": 21}"),
        CallToolResult::text("{\"doubled\":42}")
    );
    assert_eq!(
        error_text(&run(&t, "{\"n\": -1}")),
        "Error: n must not be negative"
    );
}

#[test]
fn results_convert_to_model_text_and_keep_their_parts() {
    crate::install_app();
    let r = CallToolResult::text("chart attached")
        .with(Content::Image {
            source: Source::base64("image/png", "iVBORw0KGgo="),
        })
        .with(Content::Document {
            source: Source::url("application/pdf", "https://example.com/r.pdf"),
        });
    assert!(r.has_media());
    assert_eq!(
        r.to_model_text(),
        "chart attached\n\n[image: image/png]\n\n[document: application/pdf]"
    );
    let wire = serde_json::to_value(&r).unwrap();
    assert_eq!(wire["status"], "success");
    assert_eq!(wire["content"][1]["type"], "image");
    assert_eq!(wire["content"][1]["source"]["type"], "base64");
    assert_eq!(wire["content"][2]["source"]["type"], "url");
    assert_eq!(
        serde_json::from_value::<CallToolResult>(wire).unwrap(),
        r,
        "round trip"
    );
    assert_eq!(
        Source::base64("image/png", "AAA").to_url(),
        "data:image/png;base64,AAA"
    );
    assert_eq!(
        Source::url("image/png", "https://x/y.png").kind,
        SourceKind::Url
    );

    assert_eq!(
        CallToolResult::json(&json!({"a": 1})),
        CallToolResult::text("{\"a\":1}")
    );
    let e = CallToolResult::error("no such city");
    assert!(e.is_error() && !e.has_media());
    assert_eq!(e.to_model_text(), "Error: no such city");
    let labels: BTreeMap<&str, u32> = BTreeMap::from([("a", 1)]);
    assert_eq!(CallToolResult::json(&labels).to_model_text(), "{\"a\":1}");
}
