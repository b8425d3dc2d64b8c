//! A step planned with a cached configuration older than its freshness bound, confirmed while
//! the step's model request starts.
//!
//! A configuration copy is used without asking D1 for [`CONFIG_TTL_MS`]; after that, one
//! query for its version stamp confirms it (see [`crate::config::cache`]). A chat at human
//! pace (a message every few seconds or more) finds its copy older than that at every turn,
//! so waiting for the check before the model request would put a D1 round trip into every
//! turn.
//!
//! Instead, when the engine says the next step can only be a model request (the thread owes
//! the model a call, no tool call is open, the copy's step limit and budget allow it:
//! `Thread::only_a_model_step_next`), the turn loop plans that step with the cached copy and
//! sends the check's query at once. The model request goes out at the same time; its reply
//! is read only after the check answered. When the configuration moved, the request is
//! cancelled unread and sent again with the new copy (unless the thread was stopped
//! meanwhile); when the check fails, the call fails with its cause. A request that needs I/O
//! before it is sent (an MCP server's tool list, tool selection by embeddings) waits for the
//! check first, and so does a compaction planned instead. Any other step is planned only with
//! a confirmed copy. So nothing the model answers, and nothing a client sees, comes from a
//! copy not confirmed within the bound; what the stale copy decided is that this step is a
//! model request (with its limits and its history window).
//!
//! A new isolate holds no copy at all. So the thread keeps the configuration it last ran on
//! in its own storage (`ThreadRuntime::keep_copy`: written when an instance first runs a
//! confirmed configuration and when its version moves), and a turn in a new isolate gives
//! that copy to the host (`ThreadRuntime::adopt_kept_copy`) to plan with the same way, unless
//! it is over [`KEPT_COPY_TTL_MS`] old or the host refuses it (another build's rows, a version
//! older than one the isolate read).
//!
//! [`CONFIG_TTL_MS`]: crate::config::cache::CONFIG_TTL_MS

use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use super::ThreadRuntime;
use crate::config::cache::KEPT_COPY_TTL_MS;
use crate::config::AgentConfig;
use crate::engine::store::{ConfigCopy, Side};
use crate::engine::thread::Thread;
use crate::tool::BoxFuture;

/// What [`super::Platform::load_agent`] answers.
type Loaded = Result<Result<Rc<AgentConfig>, String>, String>;

/// What the check found.
#[derive(Clone)]
pub(super) enum Verdict {
    /// The copy the step was planned with is current (the same, or reloaded equal).
    Held,
    /// The configuration changed: this is the current one.
    Moved(Rc<AgentConfig>),
    /// It could not be confirmed (a database fault, or a configuration that no longer
    /// resolves): the step fails with this.
    Failed(String),
}

/// The check of one planned copy: pending until it is awaited to its end (a request that
/// times out while it waits leaves it pending for the next attempt).
pub(super) struct ConfigCheck {
    planned: Rc<AgentConfig>,
    pending: Option<BoxFuture<'static, Loaded>>,
    verdict: Option<Verdict>,
}

impl ConfigCheck {
    /// Checks `planned` with `check` (the platform's load of the same agent and side).
    pub(super) fn new(planned: Rc<AgentConfig>, check: BoxFuture<'static, Loaded>) -> Self {
        let mut this = ConfigCheck {
            planned,
            pending: Some(check),
            verdict: None,
        };
        // A future does nothing until it is polled: polled once now, its query goes out
        // before anything else the step does. Its answer is taken when it is awaited (a
        // future may be polled again with another waker).
        if let Some(check) = this.pending.as_mut() {
            let mut cx = Context::from_waker(Waker::noop());
            if let Poll::Ready(answer) = check.as_mut().poll(&mut cx) {
                this.pending = None;
                this.verdict = Some(this.judge(answer));
            }
        }
        this
    }

    /// Waits for the answer, at once when it came already.
    pub(super) async fn settle(&mut self) -> Verdict {
        if let Some(check) = self.pending.as_mut() {
            let answer = check.await;
            self.pending = None;
            self.verdict = Some(self.judge(answer));
        }
        self.verdict.clone().unwrap_or(Verdict::Held)
    }

    fn judge(&self, answer: Loaded) -> Verdict {
        match answer {
            // The version stamp is the whole configuration's: a change to another agent
            // reloads this one too, and finds it as it was.
            Ok(Ok(config)) if Rc::ptr_eq(&config, &self.planned) || config == self.planned => {
                Verdict::Held
            }
            Ok(Ok(config)) => Verdict::Moved(config),
            Ok(Err(why)) => Verdict::Failed(why),
            Err(e) => Verdict::Failed(format!("could not read agent configuration: {e}")),
        }
    }

    /// The check answered, and not with the planned copy: a request sent with it must not be
    /// read.
    pub(super) fn overruled(&self) -> bool {
        matches!(self.verdict, Some(Verdict::Moved(_) | Verdict::Failed(_)))
    }
}

/// The copies a thread keeps of the configuration it ran on, for its first turn in a new
/// isolate (see the module's documentation and `engine::store::ConfigCopy`).
impl ThreadRuntime {
    /// Keeps `config` (confirmed within its bound) as the thread's copy, unless this instance
    /// knows the thread keeps that version already: a new instance plans its first model
    /// request with it (see `config_check`). A failure only loses that head start.
    pub(super) fn keep_copy(&self, thread: &Thread<'_>, config: &Rc<AgentConfig>) {
        let Some((version, body)) = self.platform.agent_copy(config) else {
            return;
        };
        let (agent_id, side, now) = (config.agent_id(), config.side, self.now());
        // Kept again when its age nears the limit, so an instance that runs for hours leaves
        // a copy a new isolate may still take.
        let known = self.copy_kept.borrow().iter().any(|(a, s, v, kept_at)| {
            (a.as_str(), *s, *v) == (agent_id, side, version)
                && now.saturating_sub(*kept_at) < KEPT_COPY_TTL_MS / 2
        });
        if known {
            return;
        }
        let copy = ConfigCopy {
            version,
            body: body.to_string(),
            kept_at: now,
        };
        match thread.store().set_config_copy(agent_id, side, &copy) {
            Ok(()) => self.note_copy_kept((agent_id.to_owned(), side, version, now)),
            Err(e) => self
                .platform
                .log_error(&format!("could not keep the configuration copy: {e}")),
        }
    }

    /// Remembers that the thread keeps a copy (agent, side, version, when kept): one per agent
    /// and side.
    fn note_copy_kept(&self, kept: (String, Side, i64, i64)) {
        let mut known = self.copy_kept.borrow_mut();
        known.retain(|(agent, side, _, _)| (agent.as_str(), *side) != (kept.0.as_str(), kept.1));
        known.push(kept);
    }

    /// The copy the thread kept for `agent_id`'s `side`, given to the host (which held none)
    /// to plan with while it is confirmed. `None` when there is none, it is older than
    /// [`KEPT_COPY_TTL_MS`], or the host refuses it (then the load is awaited, and its result
    /// kept instead).
    pub(super) fn adopt_kept_copy(
        &self,
        thread: &Thread<'_>,
        agent_id: &str,
        side: Side,
    ) -> Option<Rc<AgentConfig>> {
        let copy = thread.store().config_copy(agent_id, side).ok().flatten()?;
        if self.now().saturating_sub(copy.kept_at) > KEPT_COPY_TTL_MS {
            return None;
        }
        let config = self
            .platform
            .adopt_agent_copy(agent_id, side, copy.version, &copy.body)?;
        self.note_copy_kept((agent_id.to_owned(), side, copy.version, copy.kept_at));
        Some(config)
    }
}
