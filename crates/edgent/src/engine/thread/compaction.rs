//! Compaction: when a prompt names a `compaction_prompt` and its history outgrows the model's
//! budget, the older messages are summarised into one stored summary instead of being left
//! out. The model then sees the summary followed by the newest messages; clients still read
//! every message.
//!
//! The engine decides: [`Thread::next_action`] answers [`Action::Compact`] with a
//! [`CompactJob`] before a model call whose history would be cut. The job covers the messages
//! after the last summary that do not fit in half the budget. Half, so that the turns after a
//! compaction fit again and do not compact at every call. The cut comes from the same walk as
//! every history, so a call is never separated from its results. The driver has the compaction
//! prompt's model write the summary and hands the outcome to [`Thread::handle_compaction`].
//! A failure is not the turn's: the model is called with the budget-cut history, and
//! compaction is not tried again by this object for [`RETRY_AFTER_MS`].

use super::*;
use crate::engine::store::{estimate_tokens, summary_tokens};

/// The most messages one summary reads: a thread that grew far past its budget at once (an
/// import, a large injection) is summarised from its newest part; what is older is already
/// out of the model's view.
pub(super) const MAX_SUMMARISED_MESSAGES: u32 = 1_000;
/// The longest transcript the summariser reads (about 50k tokens): past it, the oldest lines
/// are left out, and the transcript says how many.
const MAX_TRANSCRIPT_CHARS: usize = 200_000;
/// How long an object waits after a failed compaction before trying again.
pub(super) const RETRY_AFTER_MS: i64 = 60_000;
/// At most this much of one message goes into the transcript the summariser reads.
const MAX_MESSAGE_CHARS: usize = 4_000;

/// The messages to summarise, for the driver.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactJob {
    /// The summary in use, which the new one replaces (its text goes first in the transcript).
    pub previous: Option<String>,
    /// The messages after it that the new summary covers, oldest first.
    pub messages: Vec<Message>,
    from: f64,
    up_to: f64,
    covers: i64,
}

impl CompactJob {
    /// The text the compaction prompt's model reads: the previous summary, then each message
    /// as `Role: text`, with tool calls and results named, each cut to a bounded length.
    pub fn transcript(&self) -> String {
        let mut lines: Vec<String> = Vec::new();
        for m in &self.messages {
            let who = match m.role {
                Role::User => "User".to_owned(),
                Role::Assistant => "Assistant".to_owned(),
                Role::System => "System".to_owned(),
                Role::Tool => format!("Tool result ({})", m.name.as_deref().unwrap_or("tool")),
            };
            let text: String = m.content.chars().take(MAX_MESSAGE_CHARS).collect();
            if !text.is_empty() {
                lines.push(format!("{who}: {text}\n"));
            }
            for call in &m.tool_calls {
                let args: String = call.arguments.chars().take(MAX_MESSAGE_CHARS).collect();
                lines.push(format!("Assistant called {}({args})\n", call.name));
            }
        }
        // The newest lines that fit, when all do not.
        let mut room = MAX_TRANSCRIPT_CHARS;
        let kept = lines
            .iter()
            .rev()
            .take_while(|l| match room.checked_sub(l.len()) {
                Some(left) => {
                    room = left;
                    true
                }
                None => false,
            })
            .count();
        let mut out = String::new();
        if let Some(previous) = &self.previous {
            out.push_str("Summary so far:\n");
            out.push_str(previous);
            out.push_str("\n\nThe conversation since:\n");
        }
        if kept < lines.len() {
            out.push_str(&format!(
                "[{} earlier lines left out]\n",
                lines.len() - kept
            ));
        }
        for line in &lines[lines.len() - kept..] {
            out.push_str(line);
        }
        out
    }

    /// The estimated tokens of what the summary replaces.
    fn tokens(&self) -> u64 {
        self.messages.iter().map(estimate_tokens).sum()
    }
}

impl Thread<'_> {
    /// The compaction a model call with `budget` needs first, if any: when the messages after
    /// the summary in use do not all fit.
    pub(super) fn compaction_due(
        &mut self,
        now: i64,
        budget: u64,
    ) -> Result<Option<CompactJob>, ThreadError> {
        if self
            .cache
            .as_ref()
            .is_some_and(|c| c.compaction_paused(now))
        {
            return Ok(None);
        }
        let summary = self.store.latest_summary()?;
        let after = summary.as_ref().map_or(f64::MIN, |s| s.up_to);
        let room = budget.saturating_sub(summary_tokens(summary.as_ref()));
        if self.store.history_after(room, after)?.complete {
            return Ok(None);
        }
        let kept = self.store.history_after(room / 2, after)?;
        let Some(keep_from) = kept.oldest else {
            return Ok(None);
        };
        let older = self
            .store
            .messages_between(after, keep_from, MAX_SUMMARISED_MESSAGES)?;
        let Some(&(up_to, _)) = older.last() else {
            return Ok(None);
        };
        let covers = summary.as_ref().map_or(0, |s| s.covers) + older.len() as i64;
        Ok(Some(CompactJob {
            previous: summary.map(|s| s.content),
            messages: older.into_iter().map(|(_, m)| m).collect(),
            from: after,
            up_to,
            covers,
        }))
    }

    /// The history budget of a model call: the model's, or less once the provider said a
    /// history did not fit ([`Thread::handle_context_overflow`]).
    pub(super) fn history_budget(&self) -> u64 {
        let configured = u64::from(self.rules.max_history_tokens);
        match self.cache.as_ref().and_then(|c| c.overflow()) {
            Some((_, learnt)) if self.rules.compacts => configured.min(learnt),
            _ => configured,
        }
    }

    /// The provider refused `call` because its history (`sent`: its estimated tokens; the
    /// driver holds it) did not fit the model's context window. With a compaction prompt, the first time in a turn: the reply is marked failed,
    /// the budget is halved from what was sent, and the model is owed the call again (the
    /// next step compacts to the new budget, then calls). Otherwise the turn fails as for any
    /// error.
    pub fn handle_context_overflow(
        &mut self,
        now: i64,
        call: ModelCall,
        error: &ProviderError,
        sent: u64,
    ) -> Result<(), ThreadError> {
        let turn = self.summary()?.turn_count;
        let cache = self.cache.get_or_insert_with(Rc::default).clone();
        let retried = cache.overflow().is_some_and(|(t, _)| t == turn);
        if !self.rules.compacts || retried {
            return self.fail_model_call(now, call, error);
        }
        let budget = (sent / 2).max(1);
        cache.note_overflow(turn, budget);
        let message = self.reply_message(&call, MessageStatus::Failed, false);
        self.update(&message)?;
        self.note_replies_settled(true);
        self.frames.push_back(ServerFrame::Message { message });
        let why = format!(
            "the history did not fit the model's context window ({error}); compacting it to \
             about {budget} tokens and asking again"
        );
        // An event, not an `error` frame: the turn goes on (clients treat errors as its end).
        let data = serde_json::json!({ "message": why, "budget": budget, "sent": sent });
        if let Ok(frame) = ServerFrame::event("context_overflow", data, now) {
            self.frames.push_back(frame);
        }
        self.store.set_needs_model(true)?;
        Ok(())
    }

    /// The history a compacting prompt's model sees: the summary in use as the first
    /// message, then the newest messages after it that fit in what the budget leaves.
    pub(super) fn compacted_history(&self, budget: u64) -> Result<Vec<Message>, ThreadError> {
        Ok(self.store.summarised_history(budget)?)
    }

    /// The summary the compaction prompt's model wrote for `job` (kept, with a `compaction`
    /// event for clients), or why it could not (an `error` frame; the model is called with
    /// the budget-cut history, and this object does not try again for a while).
    pub fn handle_compaction(
        &mut self,
        now: i64,
        job: CompactJob,
        outcome: Result<String, String>,
    ) -> Result<(), ThreadError> {
        // A summary over half the budget would leave no room and be summarised again at every
        // call: it counts as a failure.
        let half = self.history_budget() / 2;
        let fits = |t: &str| estimate_tokens(&Message::new(Role::User, t, now)) <= half;
        let text = match outcome {
            Ok(text) if !text.trim().is_empty() && fits(text.trim()) => text.trim().to_owned(),
            other => {
                let cause = match other {
                    Err(e) => e,
                    Ok(t) if t.trim().is_empty() => "the summary was empty".into(),
                    Ok(_) => format!("the summary is over half the history budget ({half} tokens)"),
                };
                let why = format!(
                    "could not summarise {} older messages ({cause}); the oldest are left out of \
                     the model's view for now",
                    job.messages.len()
                );
                // A view without the object's cache gets one: the pause must hold for the
                // step that follows, or the loop would ask again at once.
                self.cache
                    .get_or_insert_with(Rc::default)
                    .pause_compaction(now + RETRY_AFTER_MS);
                // An event, not an `error` frame: the turn goes on.
                let data = serde_json::json!({ "message": why, "messages": job.messages.len() });
                if let Ok(frame) = ServerFrame::event("compaction_failed", data, now) {
                    self.frames.push_back(frame);
                }
                return Ok(());
            }
        };
        let replaced = job.tokens();
        let id = self
            .store
            .add_summary(now, job.from, job.up_to, job.covers, &text, replaced)?;
        let data = serde_json::json!({
            "summary_id": id,
            "messages": job.messages.len(),
            "covers": job.covers,
            "tokens_replaced": replaced,
            "summary_tokens": estimate_tokens(&Message::new(Role::User, text, now)),
        });
        if let Ok(frame) = ServerFrame::event("compaction", data, now) {
            self.frames.push_back(frame);
        }
        Ok(())
    }
}
