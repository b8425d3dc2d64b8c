//! A top-level model call's stream on its way to clients: text becomes `message_chunk`
//! frames, sent at once or, within a short window of the last one sent, together.

use super::chain::ChainSink;
use super::config_check::ConfigCheck;
use super::ThreadRuntime;
use crate::config::ModelConfig;
use crate::engine::request_log::ModelRequestLog;
use crate::engine::thread::{ModelCall, Thread};
use crate::llm::stream::{Completion, ProviderError, StreamEvent};

/// How long streamed text may wait to be sent with the text after it: once a `message_chunk`
/// frame has gone out, the text that follows within this window goes out as one frame at its
/// end (or with the stored reply, if the reply ends first). A reply's first text is never held.
/// A fast stream then sends a few frames instead of one per network read: each frame is a
/// socket send, a serialisation and a deflate pass, and a burst of many small frames was what
/// `wrangler dev`'s proxy held back for about 200 ms (docs/decisions). 20 ms is faster than a
/// screen redraws text twice, so a reader sees no difference.
pub const CHUNK_WINDOW_MS: i64 = 20;

/// Receives one top-level model call's stream: chunks go to clients as they arrive, those
/// within [`CHUNK_WINDOW_MS`] of the last one sent together.
pub(super) struct MainSink<'t, 'a> {
    pub(super) runtime: &'t ThreadRuntime,
    pub(super) thread: &'t mut Thread<'a>,
    pub(super) call: &'t mut ModelCall,
    pub(super) models: &'t [ModelConfig],
    /// The attempt's end marker arrived: later batches are not flushed on their own.
    pub(super) ended: bool,
    /// The check of the configuration the call was planned with, while it runs.
    pub(super) check: Option<&'t mut ConfigCheck>,
    /// When the attempt's last chunk frame went out (`None` before its first).
    pub(super) chunk_sent_at: Option<i64>,
    /// Text is queued that waits for the window after `chunk_sent_at` to end.
    pub(super) holding: bool,
}

impl MainSink<'_, '_> {
    /// Sends what the thread queued and starts a new chunk window.
    fn send_now(&mut self) {
        self.runtime.flush(self.thread);
        self.chunk_sent_at = Some(self.runtime.now());
        self.holding = false;
    }
}

impl ChainSink for MainSink<'_, '_> {
    fn events(&mut self, events: Vec<StreamEvent>) -> Result<(), ProviderError> {
        self.ended |= events.iter().any(|e| matches!(e, StreamEvent::Done));
        for ev in events {
            self.thread.on_model_event(self.call, ev)?;
        }
        // From the end marker on, chunks go out with the stored reply, in one logged insert:
        // the chain only reads the body's end (the server closes it with the marker), and
        // the turn loop flushes before it awaits anything else. Before it, text within the
        // window of the last chunk sent waits for the window's end (`held_for`).
        if self.ended || !self.thread.has_frames() {
            return Ok(());
        }
        match self.chunk_sent_at {
            Some(at) if self.runtime.now() - at < CHUNK_WINDOW_MS => self.holding = true,
            _ => self.send_now(),
        }
        Ok(())
    }

    fn held_for(&self) -> Option<u64> {
        let at = self.chunk_sent_at.filter(|_| self.holding && !self.ended)?;
        let left = (at + CHUNK_WINDOW_MS - self.runtime.now()).max(0);
        Some(u64::try_from(left).unwrap_or(0))
    }

    fn send_held(&mut self) {
        if self.holding && !self.ended {
            self.send_now();
        }
    }

    fn reset(&mut self) {
        self.ended = false;
        self.thread.reset_model_call(self.call);
        self.runtime.flush(self.thread);
        // The next attempt's first text goes out at once.
        self.chunk_sent_at = None;
        self.holding = false;
    }

    fn attempt_done(
        &mut self,
        mut log: ModelRequestLog,
        _ok: bool,
        retry: Option<(&ProviderError, &str)>,
    ) {
        log.message_id = Some(self.call.message_id.clone());
        // A failed attempt's reported usage counts too (a provider bills what it streamed):
        // the thread's budget sees every token.
        log.add_usage(&self.call.completion, self.models);
        self.runtime.record(self.thread, &log);
        if let Some((error, plan)) = retry {
            self.thread.report_retry(error, &log.model, plan);
            self.runtime.flush(self.thread);
        }
    }

    fn stopped(&self) -> bool {
        self.runtime.stop_requested.get()
    }

    fn completion(&mut self) -> &mut Completion {
        &mut self.call.completion
    }

    fn correcting(&mut self, format_name: &str, why: &str) {
        self.thread.report_correction(format_name, why);
    }

    fn config_check(&mut self) -> Option<&mut ConfigCheck> {
        self.check.as_deref_mut()
    }
}
