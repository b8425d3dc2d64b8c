//! Workflow versions through the engine in virtual time: a call parked on one version of a
//! workflow, then a deploy (`TestHost::restarted` with new code over the same storage) that
//! keeps the old handler, drops it, keeps the version, or rolls back to a version the call
//! never ran on; a call that recorded nothing (a retry, an approval) takes the deployed
//! version. Each version's code counts its runs, so a replay into the wrong code fails a test.
//! Not here: the `version` column's migration (tests/host/store.rs), the listing of a tool's
//! versions in `GET /api/tools` (unit test in `api::tools`).

use std::future::Future;
use std::pin::Pin;

use super::*;

type Run = Pin<Box<dyn Future<Output = Result<String, ToolError>>>>;

/// One version's code of a workflow: step `a` (counted in `steps`), a 60 s nap, then
/// `"<label>: a=7"`.
fn code(label: &'static str, steps: &Rc<Cell<u32>>) -> impl Fn(FlowState) -> Run + 'static {
    let steps = steps.clone();
    move |flow: FlowState| {
        let steps = steps.clone();
        Box::pin(async move {
            let a: u32 = flow
                .step("a", || async {
                    steps.set(steps.get() + 1);
                    Ok(7)
                })
                .await?;
            flow.sleep("nap", Duration::from_secs(60)).await?;
            Ok(format!("{label}: a={a}"))
        })
    }
}

fn deploy(tools: Vec<(&'static str, Tool)>) -> Registry {
    Registry::build(tools).unwrap()
}

/// A host running `tool` as `flow`, with one call of it queued and parked: the host and the
/// call's id.
fn parked_on(tool: Tool) -> (Rc<TestHost>, String) {
    let h = host(&clock(), vec![("flow", tool)]);
    let id = h.queue("flow", json!({}));
    drive_idle(&h);
    (h, id)
}

/// Deploys `tool` as `flow` over the same storage and drives the thread once the 60 s nap of
/// the parked call has passed.
fn woken_after_deploy(h: Rc<TestHost>, tool: Tool) -> Rc<TestHost> {
    let h = h.restarted(deploy(vec![("flow", tool)]));
    h.set_now(T0 + 60_000);
    drive_idle(&h);
    h
}

#[test]
fn a_parked_run_resumes_on_the_handler_kept_for_its_version_and_new_calls_on_the_new_one() {
    crate::install_app();
    let (v1_steps, v2_steps) = (counter(), counter());
    let (h, old) = parked_on(Tool::new("Naps.").handler(code("v1", &v1_steps)));
    assert_eq!(h.call(&old).status, "sleeping");
    assert_eq!(
        h.call(&old).version,
        Some(1),
        "started on the default version"
    );

    let v2 = Tool::new("Naps, version 2.")
        .version(2)
        .handler(code("v2", &v2_steps))
        .previous_version(1, code("v1", &v1_steps));
    let h = h.restarted(deploy(vec![("flow", v2)]));
    let new = h.queue("flow", json!({}));
    drive_idle(&h);
    assert_eq!(h.call(&new).version, Some(2));

    h.set_now(T0 + 60_000);
    drive_idle(&h);
    assert_eq!(
        result_of(&h, &old),
        "v1: a=7",
        "finished on the code it started on"
    );
    assert_eq!(result_of(&h, &new), "v2: a=7");
    assert_eq!(h.call(&old).version, Some(1));
    assert_eq!(
        (h.record(&old).version, h.record(&new).version),
        (Some(1), Some(2)),
        "the execution history shows each call's version"
    );
    assert_eq!(
        (v1_steps.get(), v2_steps.get()),
        (1, 1),
        "each call's step ran once, in its own version's code"
    );
}

#[test]
fn a_parked_run_without_a_kept_handler_ends_with_workflow_version_changed() {
    crate::install_app();
    let (v1_steps, v2_steps) = (counter(), counter());
    let (h, id) = parked_on(Tool::new("Naps.").handler(code("v1", &v1_steps)));
    let v2 = Tool::new("Naps, version 2.")
        .version(2)
        .handler(code("v2", &v2_steps));
    let h = woken_after_deploy(h, v2);
    let record = h.record(&id);
    assert_eq!(record.status, "error");
    let result = record.result.unwrap();
    // Word for word as docs/durable-tools.md shows it.
    assert_eq!(
        result,
        "Error: workflow_version_changed: this call of \"flow\" started on version 1, and \
         version 2 is deployed with no handler kept for version 1, so its recorded steps were \
         not replayed into the changed code. Call the tool again to start over on version 2; \
         to let such calls finish instead, keep the old handler with \
         `.previous_version(1, …)` and deploy again."
    );
    assert_eq!(
        v2_steps.get(),
        0,
        "no recorded step was replayed into the new code"
    );
    assert_eq!(v1_steps.get(), 1);
    assert_eq!(record.attempts, 1, "not retried");
    assert_eq!(h.next_wake(), None);
    assert_eq!(
        h.tool_statuses(&id).last().map(String::as_str),
        Some("error")
    );
}

#[test]
fn a_deploy_that_keeps_the_version_resumes_on_the_new_code_without_rerunning_steps() {
    crate::install_app();
    let (first, second) = (counter(), counter());
    let (h, id) = parked_on(Tool::new("Naps.").handler(code("first", &first)));
    let h = woken_after_deploy(h, Tool::new("Naps.").handler(code("second", &second)));
    assert_eq!(
        result_of(&h, &id),
        "second: a=7",
        "same version: the deployed code"
    );
    assert_eq!(
        (first.get(), second.get()),
        (1, 0),
        "the step replayed its record"
    );
}

#[test]
fn a_call_started_on_a_version_the_deployed_code_does_not_know_ends_with_the_error() {
    crate::install_app();
    let steps = counter();
    let v3 = Tool::new("Naps, version 3.")
        .version(3)
        .handler(code("v3", &steps));
    let (h, id) = parked_on(v3);
    assert_eq!(h.call(&id).version, Some(3));
    // Rolled back to version 2, which keeps version 1 only.
    let v2 = Tool::new("Naps, version 2.")
        .version(2)
        .handler(code("v2", &steps))
        .previous_version(1, code("v1", &steps));
    let h = woken_after_deploy(h, v2);
    let result = result_of(&h, &id);
    assert!(
        result.contains("started on version 3") && result.contains("version 2 is deployed"),
        "{result}"
    );
    assert_eq!(steps.get(), 1);
}

/// A workflow that waits for webhook `callback`, answering with its body.
fn hook_code(label: &'static str) -> impl Fn(FlowState) -> Run + 'static {
    move |flow: FlowState| {
        Box::pin(async move {
            let event = flow
                .wait_for_webhook("callback", Duration::from_secs(300))
                .await?;
            Ok(format!("{label}: {event:?}"))
        })
    }
}

#[test]
fn a_webhook_that_resumes_a_run_after_a_deploy_runs_the_kept_handler_or_ends_the_call() {
    crate::install_app();
    let clock = clock();
    let v1 = || Tool::new("Waits.").handler(hook_code("v1"));
    let h = host(&clock, vec![("kept", v1()), ("dropped", v1())]);
    let kept = h.queue("kept", json!({}));
    let dropped = h.queue("dropped", json!({}));
    drive_idle(&h);
    let token = |h: &TestHost, id: &str| {
        let url = h.record(id).waiting_for.unwrap()["url"]
            .as_str()
            .unwrap()
            .to_owned();
        url.rsplit('/').next().unwrap().to_owned()
    };
    let (kept_token, dropped_token) = (token(&h, &kept), token(&h, &dropped));

    let h = h.restarted(deploy(vec![
        (
            "kept",
            Tool::new("Waits, v2.")
                .version(2)
                .handler(hook_code("v2"))
                .previous_version(1, hook_code("v1")),
        ),
        (
            "dropped",
            Tool::new("Waits, v2.").version(2).handler(hook_code("v2")),
        ),
    ]));
    h.set_now(T0 + 1_000);
    for token in [&kept_token, &dropped_token] {
        assert!(deliver_webhook(&h.store(), token, b"{\"n\":1}", h.now())
            .unwrap()
            .is_ok());
    }
    drive_idle(&h);
    assert_eq!(
        result_of(&h, &kept),
        "v1: Received(Object {\"n\": Number(1)})"
    );
    assert!(result_of(&h, &dropped).contains("workflow_version_changed"));
    let late = deliver_webhook(&h.store(), &dropped_token, b"{}", h.now()).unwrap();
    assert!(matches!(late, Err(WebhookRefusal::Closed(_))), "{late:?}");
}

#[test]
fn a_call_that_recorded_nothing_runs_on_the_deployed_version() {
    crate::install_app();
    let clock = clock();
    let (v1_runs, v2_runs, approved_runs) = (counter(), counter(), counter());
    let flaky = step_tool(&v1_runs, |_| Err(ToolError::new("upstream hiccup")));
    let refund = step_tool(&approved_runs, |_| Ok("v1 refund".to_owned())).needs_approval();
    let h = host(&clock, vec![("flaky", flaky), ("refund", refund)]);
    let retried = h.queue("flaky", json!({}));
    let approval = h.queue("refund", json!({}));
    drive_idle(&h);
    assert_eq!(h.call(&retried).status, "retrying");
    assert_eq!(h.call(&retried).version, Some(1));
    assert_eq!(h.call(&approval).version, None, "never started");

    let v2_flaky = step_tool(&v2_runs, |_| Ok("v2 answer".to_owned())).version(2);
    let v2_refund = step_tool(&approved_runs, |_| Ok("v2 refund".to_owned()))
        .needs_approval()
        .version(2);
    let h = h.restarted(deploy(vec![("flaky", v2_flaky), ("refund", v2_refund)]));
    h.thread()
        .decide_approval(h.now(), &approval, true, None)
        .unwrap();
    h.set_now(h.call(&retried).wake_at.unwrap());
    drive_idle(&h);
    assert_eq!(
        result_of(&h, &retried),
        "v2 answer",
        "nothing to replay: new code"
    );
    assert_eq!(h.call(&retried).version, Some(2));
    assert_eq!(result_of(&h, &approval), "v2 refund");
    assert_eq!(h.call(&approval).version, Some(2));
    assert_eq!((v1_runs.get(), v2_runs.get()), (1, 1));
}

#[test]
fn the_registry_refuses_a_version_0_and_kept_versions_that_are_not_older_or_repeat() {
    crate::install_app();
    let steps = counter();
    let refused = |tool: Tool| {
        Registry::build(vec![("flow", tool)])
            .unwrap_err()
            .to_string()
    };
    let zero = refused(Tool::new("x").version(0).handler(code("v0", &steps)));
    assert!(zero.contains("versions start at 1"), "{zero}");
    let newer = refused(
        Tool::new("x")
            .version(2)
            .handler(code("v2", &steps))
            .previous_version(2, code("v2", &steps)),
    );
    assert!(
        newer.contains("`.previous_version(2, …)` is not older than the tool's version 2"),
        "{newer}"
    );
    let twice = refused(
        Tool::new("x")
            .version(3)
            .handler(code("v3", &steps))
            .previous_version(1, code("v1", &steps))
            .previous_version(1, code("v1", &steps)),
    );
    assert!(twice.contains("given twice"), "{twice}");
    let fine = Tool::new("x")
        .version(3)
        .handler(code("v3", &steps))
        .previous_version(1, code("v1", &steps))
        .previous_version(2, code("v2", &steps));
    assert!(fine.check().is_ok());
    assert_eq!(fine.policy().kept_versions, [1, 2]);
    let overridden = fine.with_policy(ToolPolicy::default());
    assert_eq!(
        (
            overridden.policy().version,
            overridden.policy().kept_versions.clone()
        ),
        (3, vec![1, 2]),
        "an operator's policy does not change the code's versions"
    );
}
