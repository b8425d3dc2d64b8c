//! What the driver reads and writes besides the turn: the thread's links, its records for
//! clients (tool calls, the model request log, tool statuses), webhook deliveries and the
//! AI-human handover. Every one goes through the [`Thread`], so the store stays the engine's.

use serde_json::{Map, Value};

use super::{Thread, ThreadError};
use crate::config::PromptConfig;
use crate::engine::durable::{self, WebhookRefusal};
use crate::engine::request_log::{self, LogPage, ModelRequestLog};
use crate::engine::store::McpServerRow;
use crate::engine::tool_records::ToolCallPage;
use crate::values::status::Order;
use crate::values::ToolPolicy;

/// The thread that runs a new child thread as an agent tool, as the child records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParentLink<'a> {
    /// The parent thread's id.
    pub thread_id: &'a str,
    /// The thread a client created at the top of the chain (the parent's root, or the
    /// parent itself).
    pub root_thread_id: &'a str,
    /// The child's nesting: one more than its parent's.
    pub nesting: u32,
}

impl Thread<'_> {
    /// Records where a new thread came from: the parent thread that runs it as an agent
    /// tool (and how deep that makes it), and the origin clients reach it at (for webhook
    /// URLs).
    pub fn link(
        &self,
        parent: Option<ParentLink<'_>>,
        public_url: Option<&str>,
    ) -> Result<(), ThreadError> {
        if let Some(parent) = parent {
            self.store
                .set_parent(parent.thread_id, parent.root_thread_id, parent.nesting)?;
        }
        if let Some(url) = public_url {
            self.store.set_public_url(url)?;
        }
        Ok(())
    }

    /// How many child threads deep this thread is (0: a client created it).
    pub fn nesting(&self) -> Result<u32, ThreadError> {
        Ok(self.store.nesting()?)
    }

    /// A page of the thread's tool calls with their attempts and steps.
    pub fn tool_call_page(
        &self,
        limit: u32,
        offset: u32,
        order: Order,
    ) -> Result<ToolCallPage, ThreadError> {
        Ok(self.store.tool_call_page(limit, offset, order)?)
    }

    /// A page of the model request log.
    pub fn request_log_page(
        &self,
        limit: u32,
        offset: u32,
        order: Order,
    ) -> Result<LogPage, ThreadError> {
        Ok(request_log::page(self.store.sql(), limit, offset, order)?)
    }

    /// What the thread keeps of its prompts' MCP servers (sessions and tool lists), by name.
    pub fn mcp_servers(&self) -> Result<Vec<(String, McpServerRow)>, ThreadError> {
        self.summary()?;
        Ok(self.store.mcp_servers()?)
    }

    /// Stores one model attempt's log row (already redacted by the model chain).
    pub fn record_model_request(&self, row: &ModelRequestLog) -> Result<(), ThreadError> {
        Ok(request_log::record(self.store.sql(), row)?)
    }

    /// Whether `tool` can run now under `policy`: `available`, `busy`, `rate_limited`, ….
    pub fn tool_status(
        &self,
        tool: &str,
        policy: &ToolPolicy,
        now: i64,
    ) -> Result<&'static str, ThreadError> {
        Ok(durable::tool_status(&self.store, tool, policy, now)?)
    }

    /// Delivers a webhook body to the call waiting on `token` (the call id on success).
    pub fn deliver_webhook(
        &self,
        token: &str,
        body: &[u8],
        now: i64,
    ) -> Result<Result<String, WebhookRefusal>, ThreadError> {
        Ok(durable::deliver_webhook(&self.store, token, body, now)?)
    }

    /// `prompt`'s system text rendered with the thread's context (a context that cannot be
    /// read renders as empty: the turn goes on without it).
    pub fn system_text(&self, prompt: &PromptConfig) -> String {
        if !prompt.system.contains("{{") {
            // Nothing to fill in: no need to read the context.
            return prompt.system.clone();
        }
        prompt.render_system(&self.context())
    }

    /// The thread's key/value context.
    pub fn context(&self) -> Map<String, Value> {
        self.store.context_all().unwrap_or_default()
    }

    /// An AI-human agent takes the thread over: it answers from the next turn, side A.
    pub fn hand_over(&self, now: i64, agent_id: &str) -> Result<(), ThreadError> {
        Ok(self.store.set_agent(now, agent_id)?)
    }

    /// What the thread index needs besides the summary: the first top-level user message's
    /// text (the title), and whether a write to the index failed since the last that
    /// succeeded (the dirty flag). One statement.
    pub fn index_facts(&self) -> Result<(Option<String>, bool), ThreadError> {
        Ok(self.store.index_facts()?)
    }

    /// Records whether the thread index is behind this thread (a write failed) or caught up.
    pub fn set_index_dirty(&self, dirty: bool) -> Result<(), ThreadError> {
        Ok(self.store.set_index_dirty(dirty)?)
    }

    /// The child thread of an agent-tool call: the one recorded for `tool_call_id`, else
    /// `fresh` (recorded now), so a retried call talks to the same child.
    pub fn child_thread(
        &self,
        now: i64,
        tool_call_id: &str,
        fresh: &str,
    ) -> Result<String, ThreadError> {
        Ok(self.store.child_thread(now, tool_call_id, fresh)?)
    }
}
