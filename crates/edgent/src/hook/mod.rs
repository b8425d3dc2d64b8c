//! Hooks: small synchronous functions that see (and may change) messages and tool results at
//! fixed points of a thread's life, declared per prompt or agent (`hooks = ["name", …]`).
//!
//! A hook is one file in `agents/hooks/`, discovered by `build.rs` like a tool and named after
//! its file stem; it exports `pub fn hook() -> Hook`. Each hook has exactly one kind:
//!
//! | kind | sees | may |
//! |------|------|-----|
//! | [`filter_messages`](Hook::filter_messages) | a page of messages going to a client | drop or redact messages |
//! | [`prefilter_llm_history`](Hook::prefilter_llm_history) | the history about to be sent to the model | drop or rewrite messages |
//! | [`before_create_message`](Hook::before_create_message) | a message about to be stored | change its content, name, … (not its id, role or tool linkage) |
//! | [`after_create_message`](Hook::after_create_message) | a message just stored | observe only |
//! | [`after_tool_call_success`](Hook::after_tool_call_success) | a successful tool result before it is stored | rewrite it |
//! | [`after_tool_call_failure`](Hook::after_tool_call_failure) | an error tool result before it is stored | rewrite it |
//!
//! Hooks run inside the pure core's state machine, so they are plain `Fn`s with no I/O and no
//! `async`: anything slow or fallible outside the thread belongs in a tool (or a tool's
//! `emit_thread_event`). A hook that returns `Err` is skipped: the data from before it is kept
//! and [`Hooks`]' runners report the failure for the caller to log. A panic cannot be caught
//! (release builds abort), so return errors instead.
//!
//! ```
//! use edgent::prelude::*;
//!
//! /// Drops messages whose content is empty from client pages.
//! pub fn hook() -> Hook {
//!     Hook::filter_messages(|_ctx, mut messages: Vec<Message>| {
//!         messages.retain(|m| !m.content.is_empty());
//!         Ok(messages)
//!     })
//! }
//! # let _ = hook();
//! ```

use crate::values::message::{Message, ToolCall};
use crate::values::{CallToolResult, Side};

/// Builds a hook; every file in `agents/hooks/` exports one as `pub fn hook() -> Hook`.
pub type HookConstructor = fn() -> Hook;

/// The app's hooks, installed once per process (by [`crate::Catalog::install`]).
static INSTALLED: std::sync::OnceLock<&'static [(&'static str, HookConstructor)]> =
    std::sync::OnceLock::new();

/// Makes `table` the hooks every thread of this process may run. The first table installed
/// stays (a Worker, like a test binary, runs one app).
pub fn install(table: &'static [(&'static str, HookConstructor)]) {
    let _ = INSTALLED.set(table);
}

fn installed() -> &'static [(&'static str, HookConstructor)] {
    INSTALLED.get().copied().unwrap_or(&[])
}

/// Names of the installed app's hooks (`agents/hooks/`), alphabetically (what a config may
/// list).
pub fn names() -> impl Iterator<Item = &'static str> {
    installed().iter().map(|(name, _)| *name)
}

/// Where a hook runs: who is acting and at which depth.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookContext {
    /// The thread (and Durable Object) id.
    pub thread_id: String,
    /// The agent whose configuration declared the hooks.
    pub agent_id: String,
    /// The prompt whose configuration declared the hooks.
    pub prompt: String,
    /// The acting side.
    pub side: Side,
    /// 0 for the main conversation; sub-prompts run deeper.
    pub depth: u32,
}

/// Why a hook gave up: a message for the logs (never shown to the model or clients).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookError {
    message: String,
}

impl HookError {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        HookError {
            message: message.into(),
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl From<String> for HookError {
    fn from(message: String) -> Self {
        HookError { message }
    }
}

impl From<&str> for HookError {
    fn from(message: &str) -> Self {
        HookError::new(message)
    }
}

impl std::fmt::Display for HookError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for HookError {}

/// The kind of a hook: where in a thread's life it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HookKind {
    /// Over message pages returned to clients.
    FilterMessages,
    /// Over the history right before it is sent to the model.
    PrefilterLlmHistory,
    /// Before a message is stored.
    BeforeCreateMessage,
    /// After a message is stored.
    AfterCreateMessage,
    /// After a tool call succeeded, before its result is stored.
    AfterToolCallSuccess,
    /// After a tool call failed, before its result is stored.
    AfterToolCallFailure,
}

impl HookKind {
    /// The snake_case name, as in the constructor (`filter_messages`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            HookKind::FilterMessages => "filter_messages",
            HookKind::PrefilterLlmHistory => "prefilter_llm_history",
            HookKind::BeforeCreateMessage => "before_create_message",
            HookKind::AfterCreateMessage => "after_create_message",
            HookKind::AfterToolCallSuccess => "after_tool_call_success",
            HookKind::AfterToolCallFailure => "after_tool_call_failure",
        }
    }
}

impl std::fmt::Display for HookKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

type MessagesFn = Box<dyn Fn(&HookContext, Vec<Message>) -> Result<Vec<Message>, HookError>>;
type MessageFn = Box<dyn Fn(&HookContext, Message) -> Result<Message, HookError>>;
type ObserveFn = Box<dyn Fn(&HookContext, &Message) -> Result<(), HookError>>;
type ToolResultFn =
    Box<dyn Fn(&HookContext, &ToolCall, CallToolResult) -> Result<CallToolResult, HookError>>;

/// The function of a hook, by kind.
enum HookFn {
    FilterMessages(MessagesFn),
    PrefilterLlmHistory(MessagesFn),
    BeforeCreateMessage(MessageFn),
    AfterCreateMessage(ObserveFn),
    AfterToolCallSuccess(ToolResultFn),
    AfterToolCallFailure(ToolResultFn),
}

/// One hook: a synchronous function of one [`HookKind`].
pub struct Hook {
    run: HookFn,
}

impl std::fmt::Debug for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hook")
            .field("kind", &self.kind())
            .finish_non_exhaustive()
    }
}

impl Hook {
    /// Runs over every page of messages returned to clients (`get_messages`, the HTTP message
    /// list). Return the messages to show: drop or redact freely. Stored data is unchanged.
    pub fn filter_messages(
        f: impl Fn(&HookContext, Vec<Message>) -> Result<Vec<Message>, HookError> + 'static,
    ) -> Self {
        Hook {
            run: HookFn::FilterMessages(Box::new(f)),
        }
    }

    /// Runs over the history right before it is sent to the model (the system prompt is not
    /// part of it). Return the history to send. Stored data is unchanged.
    pub fn prefilter_llm_history(
        f: impl Fn(&HookContext, Vec<Message>) -> Result<Vec<Message>, HookError> + 'static,
    ) -> Self {
        Hook {
            run: HookFn::PrefilterLlmHistory(Box::new(f)),
        }
    }

    /// Runs before a message (user, assistant reply, tool result, injected) is stored; the
    /// returned message is what is stored. Changes to `id`, `role`, `tool_call_id` and the ids
    /// of `tool_calls` are undone (see [`Hooks::before_create_message`]).
    pub fn before_create_message(
        f: impl Fn(&HookContext, Message) -> Result<Message, HookError> + 'static,
    ) -> Self {
        Hook {
            run: HookFn::BeforeCreateMessage(Box::new(f)),
        }
    }

    /// Runs after a message is stored, to observe it. An `Err` is only logged.
    pub fn after_create_message(
        f: impl Fn(&HookContext, &Message) -> Result<(), HookError> + 'static,
    ) -> Self {
        Hook {
            run: HookFn::AfterCreateMessage(Box::new(f)),
        }
    }

    /// Runs after a tool call succeeded; the returned result is what is stored and shown to
    /// the model.
    pub fn after_tool_call_success(
        f: impl Fn(&HookContext, &ToolCall, CallToolResult) -> Result<CallToolResult, HookError>
            + 'static,
    ) -> Self {
        Hook {
            run: HookFn::AfterToolCallSuccess(Box::new(f)),
        }
    }

    /// Runs after a tool call failed (an error result); the returned result is what is stored
    /// and shown to the model.
    pub fn after_tool_call_failure(
        f: impl Fn(&HookContext, &ToolCall, CallToolResult) -> Result<CallToolResult, HookError>
            + 'static,
    ) -> Self {
        Hook {
            run: HookFn::AfterToolCallFailure(Box::new(f)),
        }
    }

    /// What kind of hook this is.
    pub fn kind(&self) -> HookKind {
        match self.run {
            HookFn::FilterMessages(_) => HookKind::FilterMessages,
            HookFn::PrefilterLlmHistory(_) => HookKind::PrefilterLlmHistory,
            HookFn::BeforeCreateMessage(_) => HookKind::BeforeCreateMessage,
            HookFn::AfterCreateMessage(_) => HookKind::AfterCreateMessage,
            HookFn::AfterToolCallSuccess(_) => HookKind::AfterToolCallSuccess,
            HookFn::AfterToolCallFailure(_) => HookKind::AfterToolCallFailure,
        }
    }
}

/// A hook that returned an error (its input was kept), or a `before_create_message` hook that
/// changed fields it may not (they were restored). The caller logs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookFailure {
    /// The hook's name.
    pub hook: String,
    /// Its kind ([`HookKind::as_str`]).
    pub kind: &'static str,
    /// What went wrong.
    pub error: String,
}

impl std::fmt::Display for HookFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "hook `{}` ({}): {}", self.hook, self.kind, self.error)
    }
}

/// Hook names a configuration lists that no file in `agents/hooks/` defines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownHook {
    /// The unknown names, in the order listed.
    pub unknown: Vec<String>,
    /// Every known hook name.
    pub known: Vec<String>,
}

impl std::fmt::Display for UnknownHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.unknown.iter().map(|n| format!("`{n}`")).collect();
        let plural = if self.unknown.len() == 1 { "" } else { "s" };
        write!(f, "unknown hook{plural} {}; ", names.join(", "))?;
        if self.known.is_empty() {
            f.write_str("no hooks are defined (add files to agents/hooks/)")
        } else {
            write!(f, "known hooks: {}", self.known.join(", "))
        }
    }
}

impl std::error::Error for UnknownHook {}

/// The resolved hooks of one prompt (the agent's, then the prompt's), with one runner per kind.
///
/// Every runner applies the hooks of its kind in declared order, each to the output of the one
/// before, and ignores hooks of other kinds. A hook that returns `Err` is skipped: its input
/// goes on to the next hook unchanged and the failure is returned alongside the result.
///
/// Cost: a hook receives its input by value, and an `Err` would have consumed it, so each
/// matching hook gets a clone and the original is kept until the hook succeeds. With no hook
/// of a kind, its runner clones nothing.
#[derive(Debug, Default)]
pub struct Hooks {
    hooks: Vec<(String, Hook)>,
}

impl Hooks {
    /// No hooks: every runner returns its input unchanged.
    pub fn none() -> Self {
        Hooks::default()
    }

    /// The given hooks, in this order (for tests and hand-built configurations).
    pub fn from_list(hooks: Vec<(String, Hook)>) -> Self {
        Hooks { hooks }
    }

    /// Builds the hooks named in `names` from those discovered in `agents/hooks/`, in order.
    /// A name listed twice (by the agent and its prompt, say) runs once, at its first place,
    /// so a non-idempotent hook is not applied twice. Unknown names are an error naming all
    /// of them and listing the known hooks.
    pub fn resolve<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<Hooks, UnknownHook> {
        let mut hooks: Vec<(String, Hook)> = Vec::new();
        let mut unknown: Vec<String> = Vec::new();
        for name in names {
            if hooks.iter().any(|(n, _)| n == name) || unknown.iter().any(|n| n == name) {
                continue;
            }
            match installed().iter().find(|(n, _)| *n == name) {
                Some((n, build)) => hooks.push(((*n).to_owned(), build())),
                None => unknown.push(name.to_owned()),
            }
        }
        if unknown.is_empty() {
            Ok(Hooks { hooks })
        } else {
            Err(UnknownHook {
                unknown,
                known: self::names().map(str::to_owned).collect(),
            })
        }
    }

    /// Whether there are no hooks at all.
    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }

    /// Whether any hook is of `kind` (lets a caller skip preparing data nobody will see).
    pub fn has(&self, kind: HookKind) -> bool {
        self.hooks.iter().any(|(_, h)| h.kind() == kind)
    }

    /// The hook names, in run order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.hooks.iter().map(|(n, _)| n.as_str())
    }

    /// Runs the `filter_messages` hooks over a page of messages going to a client.
    pub fn filter_messages(
        &self,
        ctx: &HookContext,
        messages: Vec<Message>,
    ) -> (Vec<Message>, Vec<HookFailure>) {
        self.chain(HookKind::FilterMessages, messages, |run, v| match run {
            HookFn::FilterMessages(f) => f(ctx, v),
            _ => Ok(v),
        })
    }

    /// Runs the `prefilter_llm_history` hooks over the history about to be sent to the model.
    pub fn prefilter_llm_history(
        &self,
        ctx: &HookContext,
        history: Vec<Message>,
    ) -> (Vec<Message>, Vec<HookFailure>) {
        self.chain(HookKind::PrefilterLlmHistory, history, |run, v| match run {
            HookFn::PrefilterLlmHistory(f) => f(ctx, v),
            _ => Ok(v),
        })
    }

    /// Runs the `before_create_message` hooks over a message about to be stored.
    ///
    /// A hook may change the content, name and other fields, but not what links the message
    /// into the thread: after each hook, a changed `id`, `role` or `tool_call_id` is set back,
    /// and so are the ids of `tool_calls` (the whole list if the hook added or removed calls).
    /// The hook's other changes are kept, and the restoration is reported as a
    /// [`HookFailure`] so the hook's author finds out.
    pub fn before_create_message(
        &self,
        ctx: &HookContext,
        message: Message,
    ) -> (Message, Vec<HookFailure>) {
        let mut message = message;
        let mut failures = Vec::new();
        for (name, run) in self.of_kind(HookKind::BeforeCreateMessage) {
            let HookFn::BeforeCreateMessage(f) = run else {
                continue;
            };
            match f(ctx, message.clone()) {
                Ok(mut changed) => {
                    let restored = restore_linkage(&message, &mut changed);
                    if !restored.is_empty() {
                        failures.push(HookFailure {
                            hook: name.to_owned(),
                            kind: HookKind::BeforeCreateMessage.as_str(),
                            error: format!(
                                "changed {} of the message; hooks may not, so {} restored \
                                 (its other changes were kept)",
                                restored.join(", "),
                                if restored.len() == 1 {
                                    "it was"
                                } else {
                                    "they were"
                                }
                            ),
                        });
                    }
                    message = changed;
                }
                Err(e) => failures.push(failure(name, HookKind::BeforeCreateMessage, e)),
            }
        }
        (message, failures)
    }

    /// Runs the `after_create_message` hooks over a message just stored; returns their errors.
    pub fn after_create_message(&self, ctx: &HookContext, message: &Message) -> Vec<HookFailure> {
        self.of_kind(HookKind::AfterCreateMessage)
            .filter_map(|(name, run)| match run {
                HookFn::AfterCreateMessage(f) => f(ctx, message)
                    .err()
                    .map(|e| failure(name, HookKind::AfterCreateMessage, e)),
                _ => None,
            })
            .collect()
    }

    /// Runs the `after_tool_call_success` hooks over the result of a successful call.
    pub fn after_tool_call_success(
        &self,
        ctx: &HookContext,
        call: &ToolCall,
        result: CallToolResult,
    ) -> (CallToolResult, Vec<HookFailure>) {
        self.chain(HookKind::AfterToolCallSuccess, result, |run, r| match run {
            HookFn::AfterToolCallSuccess(f) => f(ctx, call, r),
            _ => Ok(r),
        })
    }

    /// Runs the `after_tool_call_failure` hooks over the result of a failed call.
    pub fn after_tool_call_failure(
        &self,
        ctx: &HookContext,
        call: &ToolCall,
        result: CallToolResult,
    ) -> (CallToolResult, Vec<HookFailure>) {
        self.chain(HookKind::AfterToolCallFailure, result, |run, r| match run {
            HookFn::AfterToolCallFailure(f) => f(ctx, call, r),
            _ => Ok(r),
        })
    }

    /// Runs [`after_tool_call_failure`](Self::after_tool_call_failure) hooks for an error
    /// result and [`after_tool_call_success`](Self::after_tool_call_success) hooks otherwise.
    /// The kind is chosen once, from the result as the tool returned it: a success hook that
    /// turns the result into an error does not also run the failure hooks.
    pub fn after_tool_call(
        &self,
        ctx: &HookContext,
        call: &ToolCall,
        result: CallToolResult,
    ) -> (CallToolResult, Vec<HookFailure>) {
        if result.is_error() {
            self.after_tool_call_failure(ctx, call, result)
        } else {
            self.after_tool_call_success(ctx, call, result)
        }
    }

    /// The hooks of `kind`, in order, with their functions.
    fn of_kind(&self, kind: HookKind) -> impl Iterator<Item = (&str, &HookFn)> {
        self.hooks
            .iter()
            .filter(move |(_, h)| h.kind() == kind)
            .map(|(n, h)| (n.as_str(), &h.run))
    }

    /// Threads `value` through every hook of `kind`; a failing hook is skipped and reported.
    fn chain<T: Clone>(
        &self,
        kind: HookKind,
        mut value: T,
        run: impl Fn(&HookFn, T) -> Result<T, HookError>,
    ) -> (T, Vec<HookFailure>) {
        let mut failures = Vec::new();
        for (name, f) in self.of_kind(kind) {
            // A clone, because a hook that fails has consumed what it was given.
            match run(f, value.clone()) {
                Ok(next) => value = next,
                Err(e) => failures.push(failure(name, kind, e)),
            }
        }
        (value, failures)
    }
}

fn failure(hook: &str, kind: HookKind, error: HookError) -> HookFailure {
    HookFailure {
        hook: hook.to_owned(),
        kind: kind.as_str(),
        error: error.message,
    }
}

/// Sets back what ties `changed` into the thread to its value in `original`; returns the names
/// of the fields that had changed. These are what the store, the tool queue and providers match
/// messages by, so a hook changing them would orphan results or duplicate ids.
fn restore_linkage(original: &Message, changed: &mut Message) -> Vec<&'static str> {
    let mut restored = Vec::new();
    if changed.id != original.id {
        changed.id.clone_from(&original.id);
        restored.push("the id");
    }
    if changed.role != original.role {
        changed.role = original.role;
        restored.push("the role");
    }
    if changed.tool_call_id != original.tool_call_id {
        changed.tool_call_id.clone_from(&original.tool_call_id);
        restored.push("tool_call_id");
    }
    if changed.tool_calls.len() != original.tool_calls.len() {
        changed.tool_calls.clone_from(&original.tool_calls);
        restored.push("the number of tool_calls");
    } else {
        let mut ids_changed = false;
        for (c, o) in changed.tool_calls.iter_mut().zip(&original.tool_calls) {
            if c.id != o.id {
                c.id.clone_from(&o.id);
                ids_changed = true;
            }
        }
        if ids_changed {
            restored.push("tool call ids");
        }
    }
    restored
}
