//! The thread utilities tools share with WebSocket clients: `queue_tool`, `inject_message`,
//! `get_messages`, `emit_thread_event` (and `emit_ephemeral_event`), `force_turn`,
//! `schedule` and `cancel_schedule`. Each runs
//! the same [`Thread`] operation the `rpc` methods run, then sends the frames it produced to
//! the thread's sockets.

use serde::Serialize;

use super::{FlowState, ToolError};
use crate::engine::store::{MessagePage, Order, Side};
use crate::engine::thread::{InjectMessage, Thread, ThreadError};
use crate::values::message::Message;
use crate::values::schedule::{Schedule, ScheduleSpec};

fn with_thread<T>(
    flow: &FlowState,
    f: impl FnOnce(&mut Thread<'_>, i64) -> Result<T, ThreadError>,
) -> Result<T, ToolError> {
    let host = flow.host();
    let mut thread = Thread::open_migrated(host.sql());
    let out = f(&mut thread, host.now_ms());
    let frames = std::iter::from_fn(|| thread.poll_frame()).collect();
    // Frames that could not be logged are still sent (without `seq`); the operation stands.
    let _ = super::flow::broadcast(&**host, frames);
    Ok(out?)
}

/// Queues `name` with `args` on the root flow: it runs after the current tool, after calls
/// queued before it, and before the next model call; its result is stored as a tool message.
/// Unknown names and invalid arguments are refused now, with the reason. Returns the call id.
pub fn queue_tool(flow: &FlowState, name: &str, args: impl Serialize) -> Result<String, ToolError> {
    let args = serde_json::to_value(args)?;
    let root = flow.root();
    let registry = root.host().registry();
    with_thread(root, |t, now| t.queue_tool(now, registry, name, args))
}

/// [`queue_tool`] with runtime bindings for the queued call (its `flow.bindings`: which
/// account or connection to use), kept apart from the model-visible arguments.
pub fn queue_tool_with_bindings(
    flow: &FlowState,
    name: &str,
    args: impl Serialize,
    bindings: serde_json::Map<String, serde_json::Value>,
) -> Result<String, ToolError> {
    let args = serde_json::to_value(args)?;
    let root = flow.root();
    let registry = root.host().registry();
    with_thread(root, |t, now| {
        t.queue_tool_with_bindings(now, registry, name, args, Some(&bindings))
    })
}

/// Stores a message without starting any work. See [`InjectMessage`] for the options
/// (silent, position, role, id).
pub fn inject_message(flow: &FlowState, message: InjectMessage) -> Result<Message, ToolError> {
    let depth = if message.force_top_level {
        0
    } else {
        flow.depth
    };
    let under = flow.parent_message_id.clone();
    with_thread(flow, |t, now| {
        t.inject_message_under(now, message, depth, under.as_deref())
    })
}

/// A page of the thread's top-level messages (silent ones excluded, as for clients; use
/// [`super::MessageHistory::page`] to include them).
pub fn get_messages(
    flow: &FlowState,
    limit: u32,
    offset: u32,
    order: Order,
) -> Result<MessagePage, ToolError> {
    flow.message_history.page(limit, offset, order, false)
}

/// Sends an `event` frame with `data` to every socket of this thread. It is logged with its
/// `seq` (a socket that reconnects gets it again) but never part of the conversation.
pub fn emit_thread_event(
    flow: &FlowState,
    event_type: &str,
    data: impl Serialize,
) -> Result<(), ToolError> {
    flow.stream.emit(event_type, &data)
}

/// [`emit_thread_event`] for the sockets open now only: not logged, no `seq`, never replayed
/// to a socket that reconnects.
pub fn emit_ephemeral_event(
    flow: &FlowState,
    event_type: &str,
    data: impl Serialize,
) -> Result<(), ToolError> {
    flow.stream.emit_ephemeral(event_type, &data)
}

/// Makes `side` take the next turn once queued tools have finished (the model of that side
/// is called even if no new message arrives).
pub fn force_turn(flow: &FlowState, side: Side) -> Result<(), ToolError> {
    with_thread(flow, |t, now| t.force_turn(now, side))
}

/// Makes a schedule on this thread (see [`ScheduleSpec`]: once at an instant or after a
/// delay, every interval, or on a cron expression in UTC; posting a message or queueing a
/// tool call). Refused with the reason when the spec is invalid, the tool unknown or its
/// arguments wrong, or the thread holds too many schedules. Returns it, with its first due
/// time.
///
/// Idempotent per call: the n-th schedule a call makes has the same id on every run of that
/// call, so a call run again (after a crash, or a workflow resuming from the top) gets the
/// schedule it made before instead of a second one.
pub fn schedule(flow: &FlowState, spec: &ScheduleSpec) -> Result<Schedule, ToolError> {
    let id = format!("{}-s{}", flow.tool_call_id, flow.run.next_schedule());
    let root = flow.root();
    let registry = root.host().registry();
    with_thread(root, |t, now| {
        t.create_schedule_with_id(now, spec, registry, "tool", Some(&id))
    })
}

/// Cancels a schedule of this thread.
pub fn cancel_schedule(flow: &FlowState, schedule_id: &str) -> Result<Schedule, ToolError> {
    with_thread(flow.root(), |t, now| t.cancel_schedule(now, schedule_id))
}
