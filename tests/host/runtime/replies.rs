//! Replies the runtime cannot take as they came: over the reply or row limit once stored (failed
//! once, never asked again), and call ids a provider reuses or repeats.

use super::*;

/// The turn's reply was refused as too large, and the model was not asked a second time.
fn assert_refused_once(h: &TestHost) {
    assert_eq!(h.model_requests().len(), 1, "not asked again");
    assert!(
        errors(h)
            .iter()
            .any(|(code, _)| code == "model_reply_too_large"),
        "{:?}",
        errors(h)
    );
}

#[test]
fn a_reply_over_the_limit_fails_once_and_keeps_what_fits() {
    let h = host(vec![]);
    let rt = h.runtime();
    // Past SQLite's 2 MB too: stored as it is, the reply would fail and be asked again.
    let huge = "w".repeat(edgent::values::limits::SQLITE_MAX_LENGTH + 1);
    h.script(Ok(reply_events(&huge, &[])));
    h.run(rt.apply(send("Tell me everything"))).unwrap();
    h.run_spawned();

    assert_refused_once(&h);
    let summary = h.thread().summary().unwrap();
    assert_eq!(summary.status, ThreadStatus::Idle);
    let page = h.thread().messages(10, 0, Order::Asc, false).unwrap();
    let reply = page.messages.last().unwrap();
    assert_eq!(reply.status.as_str(), "failed");
    assert!(reply.content.len() <= edgent::values::limits::MAX_REPLY_BYTES);
    assert!(h.logged_errors().is_empty(), "{:?}", h.logged_errors());

    h.script(Ok(reply_events("Short now.", &[])));
    h.run(rt.apply(send("Briefly?"))).unwrap();
    h.run_spawned();
    assert_eq!(transcript(&h).last().unwrap().1, "Short now.");
}

#[test]
fn a_provider_that_reuses_or_repeats_a_call_id_gets_every_call_run_once() {
    let h = host(vec![("echo", echo())]);
    let rt = h.runtime();
    // Turn 1: `call_1`. Turn 2: the same id again, and twice in one reply.
    h.script(Ok(reply_events("", &[("call_1", "echo", "{}")])));
    h.script(Ok(reply_events("First done.", &[])));
    h.run(rt.apply(send("one"))).unwrap();
    h.run_spawned();
    h.script(Ok(reply_events(
        "",
        &[("call_1", "echo", "{}"), ("call_1", "echo", "{}")],
    )));
    h.script(Ok(reply_events("Second done.", &[])));
    h.run(rt.apply(send("two"))).unwrap();
    h.run_spawned();

    assert!(h.logged_errors().is_empty(), "{:?}", h.logged_errors());
    assert_eq!(transcript(&h).last().unwrap().1, "Second done.");
    let calls = h
        .store()
        .tool_call_page(10, 0, Order::Asc)
        .unwrap()
        .tool_calls;
    assert_eq!(calls.len(), 3, "every call stored: {calls:?}");
    let ids: std::collections::HashSet<&str> = calls.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids.len(), 3, "each under its own id");
    assert!(calls.iter().all(|c| c.status == "success"), "{calls:?}");
    // Every call in the history has exactly one result.
    let history = h.store().model_history_within(u64::MAX).unwrap();
    for c in history.iter().flat_map(|m| m.tool_calls.iter()) {
        let results = history
            .iter()
            .filter(|m| m.tool_call_id.as_deref() == Some(c.id.as_str()))
            .count();
        assert_eq!(results, 1, "call {}", c.id);
    }
}

#[test]
fn a_reply_whose_stored_form_passes_the_row_limit_fails_once() {
    let h = host(vec![("echo", echo())]);
    let rt = h.runtime();
    // 1,000,000 quote marks: under the 1 MiB reply cap as streamed, twice that escaped as stored.
    let args = "\"".repeat(1_000_000);
    h.script(Ok(reply_events("", &[("c1", "echo", args.as_str())])));
    h.run(rt.apply(send("Quote me"))).unwrap();
    h.run_spawned();
    assert_refused_once(&h);
    assert_eq!(h.thread().summary().unwrap().status, ThreadStatus::Idle);
    assert!(h.logged_errors().is_empty(), "{:?}", h.logged_errors());
    assert!(h
        .store()
        .tool_call_page(10, 0, Order::Asc)
        .unwrap()
        .tool_calls
        .is_empty());
}
