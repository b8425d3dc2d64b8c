//! Creating a thread (`ThreadRuntime::create`): the thread's object checks the agent itself
//! (the router no longer reads the configuration first), before anything is written. Proves:
//! an unknown agent is a 404 that leaves the object's storage and the thread index untouched;
//! a configuration fault is a 500 whose cause goes to the log only; the agent that exists is
//! created in the same object afterwards; a parent re-sending its child's creation gets the
//! 409 it resumes from without a configuration read, so a D1 fault cannot fail it. How many
//! round trips the check costs: `tests/host/config_db`. Does not prove: the router's routes that reach it
//! (`tests/e2e/thread.test.mjs`, `tests/e2e/mcp_server.test.mjs`).

use edgent::api::CreateThread;
use edgent::engine::schema;
use edgent::engine::thread::ParentLink;
use edgent::testing::TestHost;

use super::T0;

const ID: &str = "7d0c2f54-33a9-4c1b-8f0e-5b2d9a6e4c17";

fn create(agent: &str) -> CreateThread {
    CreateThread::parse(format!(r#"{{"agent_id":"{agent}","tags":["a"]}}"#).as_bytes()).unwrap()
}

#[test]
fn an_unknown_agent_is_refused_before_anything_is_written() {
    let host = TestHost::without_thread(crate::registry().unwrap(), T0).into_rc();
    let rt = host.runtime();
    let refused = host
        .run(rt.create(ID, &create("ghost"), None, None))
        .unwrap_err();
    assert_eq!((refused.status, refused.code), (404, "not_found"));
    assert_eq!(refused.message, r#"agent "ghost" does not exist"#);
    host.run_spawned();
    assert!(!schema::exists(&host.db).unwrap(), "no schema, no thread");
    assert_eq!(host.index.batches(), 0, "nothing indexed");
    assert!(
        host.logged_errors().is_empty(),
        "a caller's mistake is not logged"
    );

    // The same object then creates a thread of the agent that exists.
    let made = host
        .run(rt.create(ID, &create("support"), None, None))
        .unwrap();
    assert_eq!(
        (made["thread_id"].as_str(), made["agent_id"].as_str()),
        (Some(ID), Some("support"))
    );
    host.run_spawned();
    assert_eq!(host.index.batches(), 1);
}

#[test]
fn a_configuration_fault_is_a_logged_500_and_nothing_is_written() {
    let host = TestHost::without_thread(crate::registry().unwrap(), T0).into_rc();
    let rt = host.runtime();
    host.config_fault
        .replace(Some("D1_ERROR: Network connection lost.".into()));
    let refused = host
        .run(rt.create(ID, &create("support"), None, None))
        .unwrap_err();
    assert_eq!(
        (refused.status, refused.message.as_str()),
        (500, "agent configuration is unavailable")
    );
    assert!(
        !refused.message.contains("D1_ERROR"),
        "the cause stays in the log"
    );
    assert_eq!(
        host.logged_errors(),
        ["agent configuration is unavailable: D1_ERROR: Network connection lost."]
    );
    assert!(!schema::exists(&host.db).unwrap());

    // Once the configuration reads again, the same request creates the thread.
    host.config_fault.replace(None);
    host.run(rt.create(ID, &create("support"), None, None))
        .unwrap();
    assert!(schema::exists(&host.db).unwrap());
}

#[test]
fn a_parent_resending_its_childs_creation_gets_409_without_reading_the_configuration() {
    let host = TestHost::without_thread(crate::registry().unwrap(), T0).into_rc();
    let rt = host.runtime();
    let parent = || ParentLink {
        thread_id: "0b8f3c1e-6a2d-4f4b-9c1e-2d7a5e8f9b30",
        root_thread_id: "0b8f3c1e-6a2d-4f4b-9c1e-2d7a5e8f9b30",
        nesting: 1,
    };
    host.run(rt.create(ID, &create("support"), Some(parent()), None))
        .unwrap();
    // The parent's call was retried while D1 fails: the child is there, so it is resumed.
    host.config_fault
        .replace(Some("D1_ERROR: overloaded".into()));
    let again = host
        .run(rt.create(ID, &create("support"), Some(parent()), None))
        .unwrap_err();
    assert_eq!((again.status, again.code), (409, "conflict"));
    assert!(
        host.logged_errors().is_empty(),
        "no configuration read failed"
    );
}
