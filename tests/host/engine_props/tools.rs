//! The tools a case's calls draw from, one for each outcome the engine must handle: answers of
//! any size, errors, timeouts, sleeps, webhooks, approvals, rate limits, caching, a tool that
//! changes the thread while it runs and one that kills the Worker.

use super::*;

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use edgent::tool::{
    queue_tool, CallToolResult, FlowState, RateLimit, Registry, Tool, ToolError, WebhookEvent,
};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct N {
    /// A size, a count or a duration, as each tool reads it.
    #[serde(default)]
    n: u64,
}

/// Tools by index, for the generators. `nope` is not registered; the empty name is a call
/// without a name.
pub(super) const TOOLS: &[&str] = &[
    "echo", "fail", "fatal", "hang", "slow", "nap", "hook", "guarded", "limited", "shared",
    "meddle", "cached", "stepper", "crashy", "finish", "nope", "",
];

/// Sizes and durations the `n` argument takes.
pub(super) const NS: &[u64] = &[
    0,
    1,
    7,
    100,
    5_000,
    40_000,
    1_000_000,
    1_100_000,
    4_000_000_000,
];

fn capped(n: u64, max: u64) -> usize {
    usize::try_from(n.min(max)).unwrap_or(0)
}

/// `kills`: set by the `crashy` tool, which kills the Worker whenever it runs (the object's
/// next statement fails as if the process died there).
pub(super) fn registry(clock: &Rc<Cell<i64>>, kills: &Rc<Cell<bool>>) -> Registry {
    let slow_clock = clock.clone();
    let kills = kills.clone();
    let tools: Vec<(&'static str, Tool)> = vec![
        (
            "echo",
            Tool::new("Answers n bytes.").handler(|_f: FlowState, a: N| async move {
                Ok::<_, ToolError>("e".repeat(capped(a.n, 1_100_000)))
            }),
        ),
        (
            "fail",
            Tool::new("Fails, retryably.").handler(|_f: FlowState, _a: N| async {
                Err::<String, _>(ToolError::new("upstream down"))
            }),
        ),
        (
            "fatal",
            Tool::new("Fails for good, at length.").handler(|_f: FlowState, a: N| async move {
                Err::<String, _>(ToolError::fatal("f".repeat(capped(a.n, 40_000).max(1))))
            }),
        ),
        (
            "hang",
            Tool::new("Never answers.")
                .handler(|_f: FlowState, _a: N| async {
                    std::future::pending::<()>().await;
                    Ok::<_, ToolError>("never".to_owned())
                })
                .timeout(Duration::from_secs(2)),
        ),
        (
            "slow",
            Tool::new("Takes n ms.").handler(move |_f: FlowState, a: N| {
                let clock = slow_clock.clone();
                async move {
                    let ms = i64::try_from(a.n.min(100_000_000)).unwrap_or(0);
                    clock.set(clock.get() + ms);
                    Ok::<_, ToolError>("slept".to_owned())
                }
            }),
        ),
        (
            "nap",
            Tool::new("Sleeps n ms, durably.").handler(|flow: FlowState, a: N| async move {
                flow.sleep("nap", Duration::from_millis(a.n)).await?;
                Ok::<_, ToolError>("rested".to_owned())
            }),
        ),
        (
            "hook",
            Tool::new("Waits for a callback.").handler(|flow: FlowState, _a: N| async move {
                Ok::<_, ToolError>(
                    match flow
                        .wait_for_webhook("callback", Duration::from_secs(300))
                        .await?
                    {
                        WebhookEvent::Received(body) => {
                            CallToolResult::json(&json!({ "got": body }))
                        }
                        WebhookEvent::TimedOut => CallToolResult::text("timed out"),
                    },
                )
            }),
        ),
        (
            "guarded",
            Tool::new("Needs approval.")
                .handler(|_f: FlowState, _a: N| async {
                    Ok::<_, ToolError>("approved run".to_owned())
                })
                .needs_approval(),
        ),
        (
            "limited",
            Tool::new("Once a minute per thread.")
                .handler(|_f: FlowState, _a: N| async {
                    Ok::<_, ToolError>("limited ok".to_owned())
                })
                .rate_limit(RateLimit::per_minute(1)),
        ),
        (
            "shared",
            Tool::new("Twice a minute per deployment.")
                .handler(|_f: FlowState, _a: N| async {
                    Ok::<_, ToolError>("shared ok".to_owned())
                })
                .rate_limit(RateLimit::per_minute(2).per_deployment()),
        ),
        (
            "meddle",
            Tool::new("Changes the thread while it runs.").handler(
                |flow: FlowState, a: N| async move {
                    let id = format!("{INJECTED}tool-{}", edgent::values::ids::new_id());
                    match a.n % 5 {
                        0 => {
                            let mut m = InjectMessage::new(Role::Tool, "a result of nothing");
                            m.id = Some(id);
                            m.tool_call_id = Some("call_nobody_made".into());
                            edgent::tool::inject_message(&flow, m)?;
                        }
                        1 => {
                            queue_tool(&flow, "echo", json!({ "n": 3 }))?;
                        }
                        2 => {
                            let mut m = InjectMessage::new(Role::User, "a word from a tool");
                            m.id = Some(id);
                            edgent::tool::inject_message(&flow, m)?;
                        }
                        3 => edgent::tool::force_turn(&flow, Side::A)?,
                        _ => {
                            queue_tool(&flow, "nope", json!({}))?;
                        }
                    }
                    Ok::<_, ToolError>("meddled".to_owned())
                },
            ),
        ),
        (
            "cached",
            Tool::new("Cached for a minute.")
                .handler(|_f: FlowState, a: N| async move {
                    Ok::<_, ToolError>(format!("cached {}", a.n))
                })
                .cache_results(Duration::from_secs(60)),
        ),
        (
            "stepper",
            Tool::new("Records a step of n bytes, sleeps, records another.").handler(
                |flow: FlowState, a: N| async move {
                    let size = capped(a.n, 1_100_000);
                    let first: String = flow
                        .step("first", || async move { Ok("s".repeat(size)) })
                        .await?;
                    flow.sleep("pause", Duration::from_secs(1)).await?;
                    let second: u64 = flow.step("second", || async { Ok(2u64) }).await?;
                    Ok::<_, ToolError>(format!("stepped {} {second}", first.len()))
                },
            ),
        ),
        (
            "crashy",
            Tool::new("Kills the Worker whenever it runs.").handler(move |_f: FlowState, _a: N| {
                let kills = kills.clone();
                async move {
                    kills.set(true);
                    Ok::<_, ToolError>("survived".to_owned())
                }
            }),
        ),
        (
            "finish",
            Tool::new("Ends the conversation.").handler(|_f: FlowState, a: N| async move {
                Ok::<_, ToolError>(CallToolResult::json(&json!({ "answer": a.n })))
            }),
        ),
    ];
    Registry::build(tools).unwrap()
}
