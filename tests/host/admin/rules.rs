//! The configuration API's rules over a set of definitions: a set plans creates, updates and
//! unchanged rows; references must resolve in the set as it will be; each definition's own
//! rules; changes that would break a stored definition and deletes that have referrers are
//! refused; hooks and output types must be registered.

use super::*;

fn base() -> ConfigSet {
    set(&[small_model(), full_model(), full_prompt(), full_agent()])
}

/// The message of the 400 `plan` gives for `incoming` against `stored`.
fn refused(incoming: Vec<Definition>, stored: &ConfigSet) -> String {
    let e = err(plan(incoming, stored, &tool_names()));
    assert_eq!((e.status, e.code), (400, "invalid_definition"), "{e}");
    e.message
}

#[test]
fn a_valid_set_plans_creates_updates_and_unchanged_rows() {
    crate::install_app();
    let tools = tool_names();
    let p = plan(
        vec![full_agent(), full_prompt(), small_model(), full_model()],
        &ConfigSet::default(),
        &tools,
    )
    .unwrap();
    // Write order is models, prompts, agents whatever the request order.
    let order: Vec<Kind> = p.changes.iter().map(|(d, _)| d.kind()).collect();
    assert_eq!(order, [Kind::Model, Kind::Model, Kind::Prompt, Kind::Agent]);
    assert!(p.changes.iter().all(|(_, c)| *c == Change::Created));

    let mut changed = full_prompt();
    if let Definition::Prompt(pr) = &mut changed {
        pr.system = "New text".into();
    }
    let p = plan(vec![small_model(), changed], &base(), &tools).unwrap();
    assert_eq!(p.changes[0].1, Change::Unchanged);
    assert_eq!(p.changes[1].1, Change::Updated);
    assert_eq!(p.writes().count(), 1);
    assert_eq!(
        p.summary()["prompts"],
        json!({ "created": [], "updated": ["helper"], "unchanged": [] })
    );
    assert_eq!(p.summary()["models"]["unchanged"], json!(["small"]));
}

#[test]
fn references_must_resolve_in_the_set_as_it_will_be() {
    crate::install_app();
    let empty = ConfigSet::default();
    let m = refused(vec![full_prompt()], &empty);
    assert!(
        m.contains("prompt \"helper\"") && m.contains("\"model\" is \"big\""),
        "{m}"
    );

    let m = refused(vec![full_model()], &empty);
    assert!(m.contains("\"fallbacks\" lists \"small\""), "{m}");

    let p = prompt(json!({ "name": "p", "model": "small", "tools": ["no_such_tool"] }));
    let m = refused(vec![p], &base());
    assert!(m.contains("\"tools\" lists \"no_such_tool\""), "{m}");

    // A registered tool, a prompt and an exposed agent are all valid tool names.
    let p =
        prompt(json!({ "name": "p", "model": "small", "tools": ["get_weather", "helper", "duo"] }));
    plan(vec![p], &base(), &tool_names()).unwrap();

    let solo = agent(json!({ "id": "solo", "side_a": { "prompt": "helper" } }));
    let p = prompt(json!({ "name": "p", "model": "small", "tools": ["solo"] }));
    let m = refused(vec![solo.clone(), p], &base());
    assert!(m.contains("expose_as_tool"), "{m}");

    let a = agent(json!({ "id": "x", "side_a": { "prompt": "ghost" } }));
    let m = refused(vec![a], &base());
    assert!(m.contains("\"side_a.prompt\" is \"ghost\""), "{m}");

    let a =
        agent(json!({ "id": "x", "side_a": { "prompt": "helper", "stop_tool": "get_weather" } }));
    let m = refused(vec![a], &base());
    assert!(m.contains("\"side_a.stop_tool\" is \"get_weather\""), "{m}");

    // Definitions in the same request resolve each other, in any order.
    plan(
        vec![
            agent(json!({ "id": "x", "side_a": { "prompt": "q" } })),
            prompt(json!({ "name": "q", "model": "n" })),
            model(json!({ "name": "n", "provider": "workers_ai", "model": "@cf/x" })),
        ],
        &empty,
        &tool_names(),
    )
    .unwrap();
}

#[test]
fn single_definition_rules_are_reported_with_the_definition() {
    crate::install_app();
    let m = refused(
        vec![model(
            json!({ "name": "k", "provider": "openai", "model": "x", "base_url": "https://x", "api_key_secret": "sk-live-123" }),
        )],
        &ConfigSet::default(),
    );
    assert!(m.starts_with("model \"k\": \"api_key_secret\""), "{m}");
    let m = refused(
        vec![agent(
            json!({ "id": "d", "kind": "dual_ai", "side_a": { "prompt": "helper" } }),
        )],
        &base(),
    );
    assert!(m.contains("side_b"), "{m}");
    let m = refused(
        vec![model(
            json!({ "name": "o", "provider": "openai", "model": "x" }),
        )],
        &ConfigSet::default(),
    );
    assert!(m.contains("base_url"), "{m}");
    let m = refused(vec![small_model(), small_model()], &ConfigSet::default());
    assert!(m.contains("appears twice"), "{m}");
    let m = refused(
        vec![prompt(
            json!({ "name": "p", "model": "small", "response_format": { "schema": { "type": "object", "properties": { "a": { "pattern": "x" } } } } }),
        )],
        &base(),
    );
    assert!(
        m.starts_with("prompt \"p\": response_format: schema: at `a`: `pattern` is not supported"),
        "{m}"
    );
}

#[test]
fn tool_selection_fields_are_checked_with_the_prompt_named() {
    crate::install_app();
    let picker = |extra: Value| {
        let mut p = json!({ "name": "picker", "model": "big", "tools": ["get_current_time", "get_weather"] });
        p.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        prompt(p)
    };
    let m = refused(vec![picker(json!({ "max_offered_tools": 0 }))], &base());
    assert_eq!(
        m,
        "prompt \"picker\": max_offered_tools must be at least 1 (leave it out to offer every tool)"
    );
    let m = refused(
        vec![picker(json!({ "pinned_tools": ["send_notification"] }))],
        &base(),
    );
    assert_eq!(
        m,
        "prompt \"picker\": pinned_tools names \"send_notification\", which is not in this prompt's tools"
    );
    let m = refused(
        vec![picker(
            json!({ "pinned_tools": ["get_weather", "get_weather"] }),
        )],
        &base(),
    );
    assert!(
        m.ends_with("pinned_tools names \"get_weather\" twice"),
        "{m}"
    );
    let m = refused(
        vec![picker(
            json!({ "max_offered_tools": 1, "pinned_tools": ["get_weather", "get_current_time"] }),
        )],
        &base(),
    );
    assert!(
        m.contains("pinned_tools names 2 tools but max_offered_tools is 1"),
        "{m}"
    );
    let e = err(Definition::parse_put(
        Kind::Prompt,
        br#"{"model":"big","max_offered_tools":-1}"#,
        "picker",
    ));
    assert_eq!(e.code, "invalid_definition");
    assert!(e.message.contains("max_offered_tools"), "{}", e.message);
    // The embedding model is a models row of a provider that has embeddings.
    let m = refused(
        vec![picker(json!({ "tool_selection_model": "ghost" }))],
        &base(),
    );
    assert_eq!(
        m,
        "prompt \"picker\": \"tool_selection_model\" is \"ghost\", which is not a model"
    );
    let m = refused(
        vec![picker(json!({ "tool_selection_model": "big" }))],
        &base(),
    );
    assert!(
        m.ends_with("is \"big\", a model of provider \"anthropic\", which has no embeddings (use an openai or workers_ai model)"),
        "{m}"
    );
    let m = refused(
        vec![picker(json!({ "tool_selection_model": "a b" }))],
        &base(),
    );
    assert!(
        m.contains("tool selection model \"a b\" must be 1-64"),
        "{m}"
    );
    let embedding = plan(
        vec![picker(json!({ "tool_selection_model": "small" }))],
        &base(),
        &tool_names(),
    );
    assert!(embedding.is_ok(), "{embedding:?}");
    let stored = set(&[
        small_model(),
        full_model(),
        prompt(json!({ "name": "picker", "model": "big", "tool_selection_model": "small" })),
    ]);
    assert_eq!(
        stored.referrer(Kind::Model, "small").unwrap(),
        "prompt \"picker\" (its \"tool_selection_model\")"
    );
    // Pins without a maximum are allowed (every tool is offered anyway), and so is a maximum
    // at least as large as the list.
    let ok = plan(
        vec![
            picker(json!({ "pinned_tools": ["get_weather"] })),
            picker(
                json!({ "name": "other", "max_offered_tools": 5, "pinned_tools": ["get_weather"] }),
            ),
        ],
        &base(),
        &tool_names(),
    );
    assert!(ok.is_ok(), "{ok:?}");
}

#[test]
fn a_change_that_breaks_a_stored_definition_is_refused() {
    crate::install_app();
    // helper loses the stop tool the stored agent `duo` relies on.
    let mut p = full_prompt();
    if let Definition::Prompt(pr) = &mut p {
        pr.tools = vec!["get_current_time".into()];
        pr.pinned_tools.clear();
    }
    let m = refused(vec![p], &base());
    assert!(
        m.starts_with("agent \"duo\"") && m.contains("after this change"),
        "{m}"
    );

    // duo stops being offered as a tool while a stored prompt lists it.
    let stored = set(&[
        small_model(),
        full_model(),
        full_prompt(),
        full_agent(),
        prompt(json!({ "name": "boss", "model": "small", "tools": ["duo"] })),
    ]);
    let mut a = full_agent();
    if let Definition::Agent(ag) = &mut a {
        ag.expose_as_tool = false;
    }
    let m = refused(vec![a], &stored);
    assert!(m.starts_with("prompt \"boss\""), "{m}");
}

#[test]
fn referrers_block_deletes() {
    crate::install_app();
    let stored = set(&[
        small_model(),
        full_model(),
        full_prompt(),
        full_agent(),
        prompt(json!({ "name": "boss", "model": "small", "tools": ["duo", "plain"] })),
        prompt(json!({ "name": "plain", "model": "small" })),
    ]);
    let r = |k, n| stored.referrer(k, n);
    assert_eq!(
        r(Kind::Model, "big").unwrap(),
        "prompt \"helper\" (its \"model\")"
    );
    let only_fallback = set(&[small_model(), full_model()]);
    assert_eq!(
        only_fallback.referrer(Kind::Model, "small").unwrap(),
        "model \"big\" (its \"fallbacks\")"
    );
    assert_eq!(
        r(Kind::Prompt, "helper").unwrap(),
        "agent \"duo\" (its \"side_a.prompt\")"
    );
    assert_eq!(
        r(Kind::Prompt, "plain").unwrap(),
        "prompt \"boss\" (its \"tools\")"
    );
    assert_eq!(
        r(Kind::Agent, "duo").unwrap(),
        "prompt \"boss\" (its \"tools\")"
    );
    assert_eq!(r(Kind::Prompt, "boss"), None);
    let e = edgent::config::admin::in_use(Kind::Model, "big", "prompt \"helper\" (its \"model\")");
    assert_eq!((e.status, e.code), (409, "in_use"));
}

#[test]
fn hook_names_must_be_hook_files() {
    crate::install_app();
    let mut p = serde_json::json!({ "name": "p2", "model": "m" });
    p["hooks"] = serde_json::json!(["not_a_hook"]);
    let def = edgent::config::admin::Definition::from_json(edgent::config::admin::Kind::Prompt, p)
        .unwrap();
    let stored = edgent::config::admin::ConfigSet::parse(
        br#"{"models":[{"name":"m","provider":"workers_ai","model":"@cf/x"}]}"#,
    )
    .unwrap();
    let err = edgent::config::admin::plan(vec![def], &stored, &[]).unwrap_err();
    assert!(
        err.message.contains("\"not_a_hook\", which is not a hook"),
        "{}",
        err.message
    );
}

#[test]
fn the_example_apps_output_type_is_registered_with_a_strict_schema() {
    let registry = crate::registry().unwrap();
    assert_eq!(
        registry.output_types().collect::<Vec<_>>(),
        ["ticket_triage"]
    );
    let schema = registry.output_schema("ticket_triage").unwrap();
    assert!(
        edgent::values::json_schema::strict_compatible(schema),
        "{schema}"
    );
    assert_eq!(
        schema["properties"]["category"]["enum"],
        json!(["billing", "shipping", "account", "other"])
    );
}
