//! Durable races (`flow.race`) through the engine in virtual time: a webhook first, a sleep
//! first, a webhook's own timeout first, two webhooks, deliveries after the race was decided
//! (refused with the race's reason, before and after the workflow ran), a restart between the
//! park and the wake-up, and the recorded winner replayed after a restart without waiting.
//! Each run of a workflow is counted, so a lost or a doubled wake-up fails a test. A
//! hand-written select of two waits (no `flow.race`) keeps both wake-ups too.
//! Not here: the Worker's HTTP answer to a refused delivery (409 `webhook_closed`, in
//! tests/e2e/races.test.mjs).

use super::*;
use edgent::tool::{Wait, Winner};
use edgent::values::sql::Sql;
use std::future::Future;

const REPLY_TIMEOUT: Duration = Duration::from_secs(3600);
const SLEEP: Duration = Duration::from_secs(60);

/// A workflow that races `waits`, counting its runs, and answers with the winner as JSON.
fn racer(runs: &Rc<Cell<u32>>, waits: Vec<Wait>) -> Tool {
    let runs = runs.clone();
    Tool::new("Races its waits.").handler(move |flow: FlowState| {
        let (runs, waits) = (runs.clone(), waits.clone());
        async move {
            runs.set(runs.get() + 1);
            let winner = flow.race("first", waits).await?;
            Ok::<_, ToolError>(CallToolResult::json(&winner))
        }
    })
}

/// Webhook `reply` (1 h) against sleep `timeout` (60 s).
fn reply_or_timeout() -> Vec<Wait> {
    vec![
        Wait::webhook("reply", REPLY_TIMEOUT),
        Wait::sleep("timeout", SLEEP),
    ]
}

/// The token of webhook `name` of a racing call, from the URL in its `waiting` detail.
fn race_token(h: &TestHost, id: &str, name: &str) -> String {
    let detail = h.record(id).waiting_for.unwrap();
    let wait = detail["waits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["webhook"] == name)
        .unwrap_or_else(|| panic!("no webhook {name} in {detail}"));
    let url = wait["url"].as_str().unwrap();
    let token = url
        .strip_prefix(&format!("{PUBLIC_URL}/webhooks/thread-1/"))
        .unwrap_or_else(|| panic!("url {url}"));
    assert_eq!(token.len(), 64);
    token.to_owned()
}

fn winner_of(h: &TestHost, id: &str) -> Winner {
    serde_json::from_str(&result_of(h, id)).unwrap()
}

/// Checks each recorded step of a call, in order, as `(name, kind, status)`.
#[track_caller]
fn assert_steps(h: &TestHost, id: &str, expected: &[(&str, &str, &str)]) {
    let record = h.record(id);
    let steps: Vec<(&str, &str, &str)> = record
        .steps
        .iter()
        .map(|s| (s.name.as_str(), s.kind.as_str(), s.status.as_str()))
        .collect();
    assert_eq!(steps, expected, "the steps of {id}");
}

fn deliver(h: &TestHost, token: &str, body: &str) -> Result<String, WebhookRefusal> {
    deliver_webhook(&h.store(), token, body.as_bytes(), h.now()).unwrap()
}

fn closed_because(refusal: Result<String, WebhookRefusal>) -> String {
    match refusal {
        Err(WebhookRefusal::Closed(why)) => why,
        other => panic!("expected the webhook to be closed, got {other:?}"),
    }
}

/// The `tool_progress` events of `kind` for one call: `(step, status)`.
fn progress(h: &TestHost, id: &str, kind: &str) -> Vec<(String, String)> {
    h.frames()
        .iter()
        .filter_map(|f| match f {
            ServerFrame::Event { event, data, .. }
                if event == "tool_progress"
                    && data["tool_call_id"] == id
                    && data["kind"] == kind =>
            {
                Some((
                    data["step"].as_str().unwrap_or_default().to_owned(),
                    data["status"].as_str().unwrap_or_default().to_owned(),
                ))
            }
            _ => None,
        })
        .collect()
}

/// A host with one call racing `waits`, queued and parked: the host, the counter of the
/// call's runs, and its id.
fn parked_race(waits: Vec<Wait>) -> (Rc<TestHost>, Rc<Cell<u32>>, String) {
    let runs = counter();
    let h = host(&clock(), vec![("race", racer(&runs, waits))]);
    let id = h.queue("race", json!({}));
    drive_idle(&h);
    (h, runs, id)
}

#[test]
fn a_race_parks_until_its_earliest_wait_and_shows_no_url_in_frames() {
    crate::install_app();
    let (h, runs, id) = parked_race(reply_or_timeout());
    let call = h.call(&id);
    assert_eq!(call.status, "waiting", "a webhook is among the waits");
    assert_eq!(call.wake_at, Some(T0 + 60_000), "the sleep ends first");
    let token = race_token(&h, &id, "reply");
    assert_eq!(
        h.record(&id).waiting_for.unwrap()["waits"][1],
        json!({ "sleep": "timeout", "until": T0 + 60_000 })
    );
    assert_steps(
        &h,
        &id,
        &[
            ("reply", "webhook", "waiting"),
            ("timeout", "sleep", "sleeping"),
            ("first", "race", "waiting"),
        ],
    );
    let hook = h.store().webhook_by_token(&token).unwrap().unwrap();
    assert_eq!(hook.race.as_deref(), Some("first"));
    assert_eq!(
        hook.deadline_at,
        Some(T0 + 60_000),
        "a body is taken only before the race's earliest end"
    );
    let sent = h.take_sent().join("\n");
    assert!(sent.contains("\"race\":\"first\""), "{sent}");
    assert!(
        !sent.contains("/webhooks/"),
        "no capability in frames: {sent}"
    );
    assert_eq!(runs.get(), 1);
}

#[test]
fn a_webhook_first_wins_with_its_body_and_the_sleep_never_wakes_the_call() {
    crate::install_app();
    let (h, runs, id) = parked_race(reply_or_timeout());
    let token = race_token(&h, &id, "reply");

    h.set_now(T0 + 5_000);
    assert_eq!(deliver(&h, &token, r#"{"approved": true}"#), Ok(id.clone()));
    assert_eq!(h.call(&id).wake_at, Some(T0 + 5_000), "due at once");
    drive_idle(&h);
    assert_eq!(
        winner_of(&h, &id),
        Winner::Received {
            name: "reply".into(),
            body: json!({ "approved": true })
        }
    );
    assert_steps(
        &h,
        &id,
        &[
            ("reply", "webhook", "done"),
            ("timeout", "sleep", "cancelled"),
            ("first", "race", "done"),
        ],
    );
    assert_eq!(runs.get(), 2, "parked once, resumed once");
    assert_eq!(h.next_wake(), None, "the losing sleep holds no wake-up");

    // The sleep's time comes: nothing runs again.
    h.set_now(T0 + 60_000);
    drive_idle(&h);
    assert_eq!(runs.get(), 2);
    assert_eq!(h.record(&id).attempt_log.len(), 1);
    let again = closed_because(deliver(&h, &token, "{}"));
    assert!(again.contains("already delivered"), "{again}");
    assert_eq!(
        progress(&h, &id, "race"),
        [
            ("first".to_owned(), "waiting".to_owned()),
            ("first".to_owned(), "done".to_owned())
        ]
    );
}

#[test]
fn a_sleep_first_wins_and_closes_the_webhook_to_later_posts() {
    crate::install_app();
    let (h, runs, id) = parked_race(reply_or_timeout());
    let token = race_token(&h, &id, "reply");

    h.set_now(T0 + 59_999);
    drive_idle(&h);
    assert_eq!(runs.get(), 1, "not due before the sleep ends");
    h.set_now(T0 + 60_000);
    drive_idle(&h);
    assert_eq!(
        winner_of(&h, &id),
        Winner::Slept {
            name: "timeout".into()
        }
    );
    assert_eq!(runs.get(), 2);
    assert_steps(
        &h,
        &id,
        &[
            ("reply", "webhook", "cancelled"),
            ("timeout", "sleep", "done"),
            ("first", "race", "done"),
        ],
    );
    let hook = h.store().webhook_by_token(&token).unwrap().unwrap();
    assert_eq!(hook.status, "closed");

    h.set_now(T0 + 61_000);
    let why = closed_because(deliver(&h, &token, r#"{"approved": true}"#));
    assert!(why.contains("race \"first\""), "{why}");
    assert_eq!(
        h.store().webhook_by_token(&token).unwrap().unwrap().body,
        None
    );
    assert_eq!(h.next_wake(), None);
    drive_idle(&h);
    assert_eq!(runs.get(), 2, "the refused body woke nothing");
}

#[test]
fn a_body_that_comes_after_the_sleep_fell_due_loses_even_before_the_workflow_runs() {
    crate::install_app();
    let (h, runs, id) = parked_race(reply_or_timeout());
    let token = race_token(&h, &id, "reply");

    // The alarm is late: the sleep ended, the workflow has not run yet, and a body comes.
    h.set_now(T0 + 90_000);
    let why = closed_because(deliver(&h, &token, r#"{"approved": true}"#));
    assert!(why.contains("ended before this body came"), "{why}");
    drive_idle(&h);
    assert_eq!(
        winner_of(&h, &id),
        Winner::Slept {
            name: "timeout".into()
        }
    );
    assert_eq!(runs.get(), 2);
}

#[test]
fn a_webhooks_own_timeout_can_win_and_a_race_of_sleeps_only_sleeps() {
    crate::install_app();
    let clock = clock();
    let (timeout_runs, sleep_runs) = (counter(), counter());
    let h = host(
        &clock,
        vec![
            (
                "quick_timeout",
                racer(
                    &timeout_runs,
                    vec![
                        Wait::sleep("long", Duration::from_secs(30)),
                        Wait::webhook("reply", Duration::from_secs(10)),
                    ],
                ),
            ),
            (
                "naps",
                racer(
                    &sleep_runs,
                    vec![
                        Wait::sleep("long", Duration::from_secs(30)),
                        Wait::sleep("short", Duration::from_secs(20)),
                    ],
                ),
            ),
        ],
    );
    let timed = h.queue("quick_timeout", json!({}));
    let naps = h.queue("naps", json!({}));
    drive_idle(&h);
    let token = race_token(&h, &timed, "reply");
    assert_eq!(h.call(&naps).status, "sleeping", "no webhook: sleeping");
    assert_eq!(h.call(&naps).wake_at, Some(T0 + 20_000));

    h.set_now(T0 + 10_000);
    drive_idle(&h);
    assert_eq!(
        winner_of(&h, &timed),
        Winner::TimedOut {
            name: "reply".into()
        }
    );
    assert_eq!(
        h.store().webhook_by_token(&token).unwrap().unwrap().status,
        "timed_out"
    );
    assert!(closed_because(deliver(&h, &token, "{}")).contains("timed out"));
    h.set_now(T0 + 20_000);
    drive_idle(&h);
    assert_eq!(
        winner_of(&h, &naps),
        Winner::Slept {
            name: "short".into()
        }
    );
    assert_eq!((timeout_runs.get(), sleep_runs.get()), (2, 2));
}

#[test]
fn the_first_of_two_webhooks_wins_and_closes_the_other_at_once() {
    crate::install_app();
    let (h, runs, id) = parked_race(vec![
        Wait::webhook("yes", REPLY_TIMEOUT),
        Wait::webhook("no", REPLY_TIMEOUT),
        Wait::sleep("timeout", SLEEP),
    ]);
    let (yes, no) = (race_token(&h, &id, "yes"), race_token(&h, &id, "no"));

    h.set_now(T0 + 1_000);
    assert_eq!(deliver(&h, &no, r#"{"by": "no"}"#), Ok(id.clone()));
    // The workflow has not run yet, and the other webhook is already closed.
    let why = closed_because(deliver(&h, &yes, r#"{"by": "yes"}"#));
    assert!(why.contains("another wait of race \"first\""), "{why}");
    drive_idle(&h);
    assert_eq!(
        winner_of(&h, &id),
        Winner::Received {
            name: "no".into(),
            body: json!({ "by": "no" })
        }
    );
    assert_steps(
        &h,
        &id,
        &[
            ("yes", "webhook", "cancelled"),
            ("no", "webhook", "done"),
            ("timeout", "sleep", "cancelled"),
            ("first", "race", "done"),
        ],
    );
    assert_eq!(runs.get(), 2);
}

/// The racing workflow's tools, built again for each deploy of the same code.
fn race_tools(runs: &Rc<Cell<u32>>) -> Registry {
    Registry::build(vec![("race", racer(runs, reply_or_timeout()))]).unwrap()
}

#[test]
fn a_race_parked_before_a_restart_is_won_after_it_by_a_body_or_by_the_sleep() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let h = host(&clock, vec![("race", racer(&runs, reply_or_timeout()))]);
    let by_body = h.queue("race", json!({}));
    let by_sleep = h.queue("race", json!({}));
    drive_idle(&h);
    let token = race_token(&h, &by_body, "reply");

    let h = h.restarted(race_tools(&runs));
    assert_eq!(
        h.call(&by_body).status,
        "waiting",
        "parked across the restart"
    );
    h.set_now(T0 + 30_000);
    assert_eq!(deliver(&h, &token, r#"{"n": 1}"#), Ok(by_body.clone()));
    let h = h.restarted(race_tools(&runs));
    drive_idle(&h);
    assert_eq!(
        winner_of(&h, &by_body),
        Winner::Received {
            name: "reply".into(),
            body: json!({ "n": 1 })
        }
    );
    assert_eq!(
        h.call(&by_sleep).status,
        "waiting",
        "the other race goes on"
    );
    assert_eq!(h.next_wake(), Some(T0 + 60_000));

    h.set_now(T0 + 60_000);
    drive_idle(&h);
    assert_eq!(
        winner_of(&h, &by_sleep),
        Winner::Slept {
            name: "timeout".into()
        }
    );
    assert_eq!(runs.get(), 4, "each call parked once and resumed once");
}

/// Races, then sleeps 10 s, then answers with the winner: the race replays after the sleep.
fn race_then_nap(races: &Rc<Cell<u32>>) -> Tool {
    let races = races.clone();
    Tool::new("Races, then naps.").handler(move |flow: FlowState| {
        let races = races.clone();
        async move {
            races.set(races.get() + 1);
            let winner = flow.race("first", reply_or_timeout()).await?;
            flow.sleep("nap", Duration::from_secs(10)).await?;
            Ok::<_, ToolError>(CallToolResult::json(&winner))
        }
    })
}

#[test]
fn a_decided_race_replays_its_recorded_winner_after_a_restart_without_waiting() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let tools = |runs: &Rc<Cell<u32>>| {
        Registry::build(vec![("race_then_nap", race_then_nap(runs))]).unwrap()
    };
    let h = host(&clock, vec![("race_then_nap", race_then_nap(&runs))]);
    let id = h.queue("race_then_nap", json!({}));
    drive_idle(&h);
    let token = race_token(&h, &id, "reply");
    h.set_now(T0 + 1_000);
    deliver(&h, &token, r#"{"answer": "yes"}"#).unwrap();
    drive_idle(&h);
    assert_eq!(
        h.call(&id).status,
        "sleeping",
        "the race is over; the nap goes on"
    );
    assert_eq!(h.call(&id).wake_at, Some(T0 + 11_000));
    // What the webhook row holds changes after the race was decided: a replay that looked
    // at the waits again, instead of at the recorded winner, would answer with this.
    h.db.exec(
        "UPDATE webhooks SET body = '{\"answer\":\"tampered\"}' WHERE token = ?",
        &[token.as_str().into()],
    )
    .unwrap();

    let h = h.restarted(tools(&runs));
    h.set_now(T0 + 11_000);
    drive_idle(&h);
    assert_eq!(
        winner_of(&h, &id),
        Winner::Received {
            name: "reply".into(),
            body: json!({ "answer": "yes" })
        }
    );
    assert_eq!(
        runs.get(),
        3,
        "parked on the race, then on the nap, then done"
    );
    assert_eq!(
        progress(&h, &id, "race"),
        [],
        "the replay settled nothing again (no progress after the restart)"
    );
    assert_eq!(
        h.next_wake(),
        None,
        "the race's sleep (at 60 s) never wakes the call"
    );
}

#[test]
fn a_race_without_waits_or_with_a_name_used_twice_fails_the_call() {
    crate::install_app();
    let clock = clock();
    let (empty_runs, twice_runs) = (counter(), counter());
    let h = host(
        &clock,
        vec![
            ("empty", racer(&empty_runs, Vec::new())),
            (
                "twice",
                racer(
                    &twice_runs,
                    vec![
                        Wait::sleep("same", SLEEP),
                        Wait::webhook("same", REPLY_TIMEOUT),
                    ],
                ),
            ),
        ],
    );
    let empty = h.queue("empty", json!({}));
    let twice = h.queue("twice", json!({}));
    drive_idle(&h);
    let empty = h.record(&empty);
    assert_eq!(empty.status, "error");
    assert!(
        empty
            .result
            .unwrap()
            .contains("race \"first\" has no waits"),
        "fatal, not retried"
    );
    let twice = h.record(&twice);
    assert_eq!(twice.status, "error");
    assert!(twice.result.unwrap().contains("\"same\" twice"));
    assert_eq!(h.next_wake(), None, "nothing parked");
}

/// The output of whichever of `a` and `b` completes first, `a` polled first (a hand-written
/// `select`).
async fn first_of<T>(a: impl Future<Output = T>, b: impl Future<Output = T>) -> T {
    let (mut a, mut b) = (std::pin::pin!(a), std::pin::pin!(b));
    std::future::poll_fn(|cx| match a.as_mut().poll(cx) {
        std::task::Poll::Pending => b.as_mut().poll(cx),
        ready => ready,
    })
    .await
}

/// A hand-written select of sleep `timeout` and webhook `reply` (no `flow.race`), polling the
/// sleep first or the webhook first.
fn hand_select(sleep_first: bool) -> Tool {
    Tool::new("Selects by hand.").handler(move |flow: FlowState| async move {
        let sleep = async {
            flow.sleep("timeout", SLEEP).await?;
            Ok::<_, ToolError>("slept".to_owned())
        };
        let hook = async {
            let event = flow.wait_for_webhook("reply", REPLY_TIMEOUT).await?;
            Ok::<_, ToolError>(format!("{event:?}"))
        };
        if sleep_first {
            first_of(sleep, hook).await
        } else {
            first_of(hook, sleep).await
        }
    })
}

#[test]
fn a_hand_written_select_of_two_waits_loses_neither_wake_up() {
    crate::install_app();
    let clock = clock();
    let h = host(
        &clock,
        vec![
            ("sleep_first", hand_select(true)),
            ("hook_first", hand_select(false)),
        ],
    );
    let by_sleep = [
        h.queue("sleep_first", json!({})),
        h.queue("hook_first", json!({})),
    ];
    let by_body = [
        h.queue("sleep_first", json!({})),
        h.queue("hook_first", json!({})),
    ];
    drive_idle(&h);
    for id in by_sleep.iter().chain(&by_body) {
        let call = h.call(id);
        assert_eq!(call.status, "waiting", "{id}: a delivery must wake it");
        assert_eq!(
            call.wake_at,
            Some(T0 + 60_000),
            "{id}: the sleep's wake-up is kept"
        );
        let waits = h.record(id).waiting_for.unwrap()["waits"].clone();
        assert_eq!(waits.as_array().map(Vec::len), Some(2), "{waits}");
    }

    h.set_now(T0 + 1_000);
    for id in &by_body {
        let detail = h.record(id).waiting_for.unwrap();
        let url = detail["waits"]
            .as_array()
            .unwrap()
            .iter()
            .find_map(|w| w["url"].as_str())
            .unwrap()
            .to_owned();
        let token = url.rsplit('/').next().unwrap();
        assert_eq!(deliver(&h, token, r#"{"ok": true}"#), Ok(id.clone()));
    }
    drive_idle(&h);
    for id in &by_body {
        assert!(
            result_of(&h, id).starts_with("Received"),
            "{id}: {}",
            result_of(&h, id)
        );
    }
    h.set_now(T0 + 60_000);
    drive_idle(&h);
    for id in &by_sleep {
        assert_eq!(result_of(&h, id), "slept", "{id}");
    }
}
