//! A tool's streamed output (the seed's `getWritable`): text or data parts a running tool
//! writes for clients to see before its result. Each part is an `event` frame named
//! [`OUTPUT_EVENT`], numbered and logged like every broadcast frame (so a socket that resumes
//! gets it again, in order), and an AI SDK chat stream shows it as a `data-tool-output` part.
//! The model never sees it: the result is what it reads.
//!
//! A workflow that wakes after a sleep or a webhook runs its function again from the start:
//! a part written outside a step is written again, numbered from 0 again, while a replayed
//! step writes nothing. What must appear once belongs inside the step that does the work.

use serde::Serialize;
use serde_json::{json, Value};

use super::{broadcast, FlowState, ToolError};
use crate::values::protocol::ServerFrame;

/// The event name of a tool's output parts.
pub const OUTPUT_EVENT: &str = "tool-output";
/// The largest text or data part (bytes of JSON): a tool streaming more writes more parts.
pub const MAX_PART_BYTES: usize = 16 * 1024;

/// Writes a running call's output parts ([`FlowState::output`]).
pub struct ToolOutput<'f> {
    flow: &'f FlowState,
}

impl FlowState {
    /// This call's output stream: text and data parts clients see while it runs.
    pub fn output(&self) -> ToolOutput<'_> {
        ToolOutput { flow: self }
    }
}

impl ToolOutput<'_> {
    /// Writes a text part (shown in order, appended to what the call wrote before).
    pub fn text(&self, text: &str) -> Result<(), ToolError> {
        self.part(json!({ "type": "text", "text": text }))
    }

    /// Writes a data part of `kind` (a name the client knows: `"progress"`, `"row"`, …).
    pub fn data(&self, kind: &str, data: &impl Serialize) -> Result<(), ToolError> {
        if kind.is_empty() || kind.len() > 64 {
            return Err(ToolError::fatal("an output part's kind must be 1-64 bytes"));
        }
        let data = serde_json::to_value(data)?;
        self.part(json!({ "type": "data", "kind": kind, "data": data }))
    }

    fn part(&self, mut part: Value) -> Result<(), ToolError> {
        let size = part.to_string().len();
        if size > MAX_PART_BYTES {
            return Err(ToolError::fatal(format!(
                "an output part of {size} bytes is over {MAX_PART_BYTES}; write it in smaller parts"
            )));
        }
        let n = self.flow.run_state().next_output_part();
        part["tool_call_id"] = json!(self.flow.tool_call_id);
        part["part"] = json!(n);
        let host = self.flow.host();
        let frame = ServerFrame::event(OUTPUT_EVENT, part, host.now_ms())
            .map_err(|why| ToolError::new(why.to_string()))?;
        // A part that could not be logged is still sent (without `seq`); the tool goes on.
        let _ = broadcast(&**host, vec![frame]);
        Ok(())
    }
}
