//! What a prompt offers the model and what a call may run (`edgent::tool::offer`): registered
//! tools, then delegates with their descriptions; the model may run only what its prompt
//! lists, the application may queue any registered tool, and anything else is an error result
//! naming what is available.

use edgent::config::{AgentDef, Delegate, PromptConfig};
use edgent::engine::store::CallOrigin;
use edgent::testing::agent;
use edgent::tool::offer::{callee, offered, Callee};
use serde_json::json;

fn config() -> edgent::config::AgentConfig {
    let mut c = agent(&["get_current_time", "summarize", "review", "missing"]);
    let summarize: PromptConfig = serde_json::from_value(json!({
        "name": "summarize", "model": "default", "system": "s", "description": "",
    }))
    .unwrap();
    let review: AgentDef = serde_json::from_value(json!({
        "id": "review", "kind": "dual_ai", "description": "A writer and a reviewer.",
        "side_a": { "prompt": "writer" }, "side_b": { "prompt": "reviewer" },
    }))
    .unwrap();
    c.delegates = vec![
        (Delegate::Prompt(summarize), Vec::new()),
        (Delegate::Agent(review), Vec::new()),
    ];
    c
}

#[test]
fn a_prompt_offers_its_registered_tools_then_its_delegates() {
    crate::install_app();
    let registry = crate::registry().unwrap();
    let specs = offered(&registry, &config());
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        ["get_current_time", "summarize", "review"],
        "unknown names are left out"
    );
    assert_eq!(
        specs[1].description,
        "Asks the \"summarize\" assistant; give it everything it needs in `input`."
    );
    assert_eq!(specs[2].description, "A writer and a reviewer.");
    assert_eq!(specs[1].parameters["required"], json!(["input"]));
}

#[test]
fn the_model_runs_only_what_its_prompt_lists_and_the_application_any_tool() {
    crate::install_app();
    let registry = crate::registry().unwrap();
    let config = config();
    assert!(matches!(
        callee(&registry, &config, "get_current_time", CallOrigin::Model),
        Callee::Tool(_)
    ));
    assert!(matches!(
        callee(&registry, &config, "summarize", CallOrigin::Model),
        Callee::Delegate(Delegate::Prompt(_), _)
    ));
    // Registered but not offered by this prompt: the model may not, the application may.
    let Callee::Unavailable(refused) = callee(&registry, &config, "get_weather", CallOrigin::Model)
    else {
        panic!("an unlisted tool is refused to the model");
    };
    assert_eq!(
        refused.to_model_text(),
        "Error: unknown tool \"get_weather\"; available tools: get_current_time, summarize, review"
    );
    assert!(matches!(
        callee(&registry, &config, "get_weather", CallOrigin::Queue),
        Callee::Tool(_)
    ));
    assert!(matches!(
        callee(&registry, &config, "launch_rockets", CallOrigin::Queue),
        Callee::Unavailable(_)
    ));
}
