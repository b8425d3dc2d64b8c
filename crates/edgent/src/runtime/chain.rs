//! One model call: the attempts the engine's [`ModelChain`] asks for (retries after their
//! delay, fallbacks to the next model), each streamed from the platform into a sink.

use futures_util::future::{join, select, Either};
use serde_json::Value;

use crate::config::policy::ModelPolicy;
use crate::config::{AgentConfig, ModelConfig, DEFAULT_TOTAL_TIMEOUT_MS};
use crate::engine::model_chain::{AttemptEnd, ChainStep, ModelChain};
use crate::engine::request_log::ModelRequestLog;
use crate::engine::structured::{correction, give_up, judge, Verdict, MAX_CORRECTIONS};
use crate::engine::thread::Thread;
use crate::llm::memo::MemoUse;
use crate::llm::stream::{Completion, ProviderError, StreamEvent};
use crate::llm::{request_body, ModelRequest, OutputFormat};
use crate::tool::nested::with_timeout;
use crate::tool::offer::Offer;
use crate::values::message::Message;

use super::config_check::ConfigCheck;
use super::{ModelReply, Platform, ThreadRuntime};
use crate::tool::BoxFuture;

/// The request body for a model, from what every provider needs.
#[derive(Clone, Copy)]
pub(super) struct RequestParts<'a> {
    pub(super) system: &'a str,
    pub(super) history: &'a [Message],
    /// The tools offered, and the record of how they were chosen for each attempt's log row.
    pub(super) offer: &'a Offer,
    pub(super) config: &'a AgentConfig,
    /// The final answer's shape, when the prompt has a `response_format`.
    pub(super) output: Option<OutputFormat<'a>>,
    /// What the wire format may reuse, when `history` is the stored messages as stored.
    pub(super) memo: Option<MemoUse<'a>>,
}

impl RequestParts<'_> {
    fn body(&self, model: &ModelConfig) -> String {
        request_body(&ModelRequest {
            target: model.target(),
            system: self.system,
            history: self.history,
            tools: &self.offer.tools,
            tool_choice: self.config.prompt.tool_choice,
            parallel_tool_calls: self.config.prompt.parallel_tool_calls,
            output: self.output,
            memo: self.memo,
        })
    }
}

/// What a chain answers when its configuration check overruled the copy it was sent with
/// (the caller reads the check, not this).
pub(super) fn superseded() -> ProviderError {
    ProviderError::Config("the agent's configuration changed while the request was sent".into())
}

/// How long the end of a reply's body is awaited once its end marker arrived: a server that
/// keeps the connection open after `[DONE]` must not hold the stored reply back.
const TAIL_READ_MS: u64 = 1_000;

/// What a model chain reports to its caller while it runs.
pub(super) trait ChainSink {
    /// Stream events of the current attempt. After a batch holding [`StreamEvent::Done`] the
    /// chain only reads the body's end, for at most [`TAIL_READ_MS`], then returns without
    /// awaiting anything else.
    fn events(&mut self, events: Vec<StreamEvent>) -> Result<(), ProviderError>;
    /// A new attempt starts after a failed one: forget the partial reply.
    fn reset(&mut self);
    /// An attempt ended: log its row (the sink knows the token counts of a success).
    /// `retry` is the failure and the plan when another attempt follows.
    fn attempt_done(
        &mut self,
        log: ModelRequestLog,
        ok: bool,
        retry: Option<(&ProviderError, &str)>,
    );
    /// Whether the thread was stopped (no further attempt, no further bytes).
    fn stopped(&self) -> bool;
    /// The reply assembled so far.
    fn completion(&mut self) -> &mut Completion;
    /// The answer does not fit the prompt's `response_format` (`why`); the model is asked
    /// again (a [`ChainSink::reset`] follows).
    fn correcting(&mut self, format_name: &str, why: &str);
    /// The check of the configuration this call was planned with, while it may still
    /// overrule it: an attempt's reply is read only once it answered (see
    /// [`super::config_check`]).
    fn config_check(&mut self) -> Option<&mut ConfigCheck> {
        None
    }
    /// In how many ms the frames the sink holds back are due (`None`: it holds none). The
    /// chain sends them then ([`ChainSink::send_held`]) if no event came first.
    fn held_for(&self) -> Option<u64> {
        None
    }
    /// Sends the frames held back, their window over.
    fn send_held(&mut self) {}
}

/// The reply's next batch of events. While the sink holds frames back, their window's end is
/// raced with the read (one timer per window, kept in `due` across reads): when it comes
/// first, they are sent and the same read is awaited on.
async fn next_batch(
    platform: &dyn Platform,
    reply: &mut dyn ModelReply,
    sink: &mut dyn ChainSink,
    due: &mut Option<BoxFuture<'static, ()>>,
) -> Result<Option<Vec<StreamEvent>>, ProviderError> {
    let mut read = reply.next_events();
    let Some(wait) = sink.held_for() else {
        *due = None;
        return read.await;
    };
    let timer = due.get_or_insert_with(|| platform.sleep(wait));
    match select(&mut read, timer).await {
        Either::Left((events, _)) => events,
        Either::Right(((), _)) => {
            *due = None;
            sink.send_held();
            read.await
        }
    }
}

/// Collects a reply that is not streamed to clients: a sub-prompt's (depth-0 clients do not
/// see it) or a compaction's summary. Every attempt is logged and counts toward the thread's
/// budget, failed ones too.
pub(super) struct CollectSink<'t, 'a> {
    pub(super) runtime: &'t ThreadRuntime,
    pub(super) thread: &'t Thread<'a>,
    pub(super) completion: Completion,
    pub(super) models: &'t [ModelConfig],
    /// The call a sub-prompt answers and the sub-prompt's depth (its attempts are logged at
    /// that depth under the call); `None` for a summary, logged with the turn's.
    pub(super) sub_prompt_of: Option<(&'t str, u32)>,
}

impl ChainSink for CollectSink<'_, '_> {
    fn events(&mut self, events: Vec<StreamEvent>) -> Result<(), ProviderError> {
        events.iter().try_for_each(|ev| self.completion.apply(ev))
    }

    fn reset(&mut self) {
        self.completion = Completion::default();
    }

    fn attempt_done(
        &mut self,
        mut log: ModelRequestLog,
        _ok: bool,
        _retry: Option<(&ProviderError, &str)>,
    ) {
        if let Some((call, depth)) = self.sub_prompt_of {
            log.depth = depth;
            log.message_id = Some(call.to_owned());
        }
        log.add_usage(&self.completion, self.models);
        self.runtime.record(self.thread, &log);
    }

    fn stopped(&self) -> bool {
        self.runtime.stop_requested.get()
    }

    fn completion(&mut self) -> &mut Completion {
        &mut self.completion
    }

    /// Nothing to tell: these attempts reach no client.
    fn correcting(&mut self, _format_name: &str, _why: &str) {}
}

/// [`run_chain`], with the answer checked against the prompt's `response_format` (when it has
/// one) as the engine judges it (`engine::structured`): an answer that does not fit goes back
/// to the model with what is wrong, up to [`MAX_CORRECTIONS`] times in the same call, and one
/// that still does not fit fails the call. `Ok(Some(value))`: the answer and its value;
/// `Ok(None)`: no format, a reply that calls tools instead, or a stop.
pub(super) async fn run_checked_chain(
    platform: &dyn Platform,
    models: &[ModelConfig],
    parts: &RequestParts<'_>,
    sink: &mut dyn ChainSink,
) -> Result<Option<Value>, ProviderError> {
    let Some(format) = parts.output else {
        return run_chain(platform, models, parts, sink)
            .await
            .map(|()| None);
    };
    // The history grows by the corrections only: the model reads its answer and what is wrong.
    let mut history = parts.history.to_vec();
    let mut corrections = 0;
    loop {
        let attempt = RequestParts {
            history: &history,
            // After a correction the history holds messages that are not stored.
            memo: parts.memo.filter(|_| corrections == 0),
            ..*parts
        };
        run_chain(platform, models, &attempt, sink).await?;
        if sink.stopped() {
            return Ok(None);
        }
        let why = match judge(sink.completion(), &format) {
            Verdict::NotTheAnswer => return Ok(None),
            Verdict::Fits(value) => return Ok(Some(value)),
            Verdict::Misfits(why) => why,
        };
        if corrections >= MAX_CORRECTIONS {
            return Err(give_up(&format, &why));
        }
        corrections += 1;
        let answer = std::mem::take(&mut sink.completion().text);
        history.extend(correction(answer, &format, &why, platform.now_ms()));
        sink.correcting(format.name, &why);
        sink.reset();
    }
}

/// Performs a model call's chain: makes the attempts the engine's [`ModelChain`] asks for
/// (after their delay), streams each into `sink`, and hands each end back to the chain, until
/// a whole reply arrives, the thread stops, or the chain gives up.
pub(super) async fn run_chain(
    platform: &dyn Platform,
    models: &[ModelConfig],
    parts: &RequestParts<'_>,
    sink: &mut dyn ChainSink,
) -> Result<(), ProviderError> {
    let mut chain = ModelChain::new(models);
    // Read once per call (the vars do not change while it runs), checked before each attempt.
    let policy = ModelPolicy::from_vars(|k| platform.var(k));
    // The failure of the attempt before this one, while a retry is pending.
    let mut failed: Option<ProviderError> = None;
    while let Some(attempt) = chain.poll_attempt() {
        if attempt.delay_ms > 0 {
            platform.sleep(attempt.delay_ms).await;
        }
        if let Some(error) = failed.take() {
            if sink.stopped() {
                return Err(error);
            }
            sink.reset();
        }
        let model = models.get(attempt.model).ok_or_else(ModelChain::no_model)?;
        let started = platform.now_ms();
        let mut first_chunk_at = None;
        let body = parts.body(model);
        let outcome = attempt_once(platform, &policy, model, body, sink, &mut first_chunk_at).await;
        if let (Err(_), Some(check)) = (&outcome, sink.config_check()) {
            // Failed before the check answered (a refused model, the deadline): whether this
            // attempt is one of the call's depends on the answer.
            check.settle().await;
        }
        if sink.config_check().is_some_and(|check| check.overruled()) {
            // Made with a configuration that changed meanwhile (its reply, if any, cancelled
            // unread): not an attempt of this chain, nothing logged; the caller sends the call
            // again.
            return Err(superseded());
        }
        // The key is read only to redact it from an error text the provider may echo.
        let secret = match &outcome {
            Ok(_) => None,
            Err(_) => model
                .api_key_secret
                .as_deref()
                .and_then(|s| platform.secret(s)),
        };
        let end = AttemptEnd {
            started,
            finished: platform.now_ms(),
            first_chunk_at,
            outcome,
            stopped: sink.stopped(),
            secret: secret.as_deref(),
        };
        // Every attempt of the call offered the same tools: each row says which.
        let logged = |mut log: ModelRequestLog| {
            log.tool_selection = Some(parts.offer.selection.to_json());
            log
        };
        match chain.handle_attempt_end(models, end) {
            ChainStep::Done { log } => {
                sink.attempt_done(logged(log), true, None);
                return Ok(());
            }
            ChainStep::GiveUp { log, error } => {
                sink.attempt_done(logged(log), false, None);
                return Err(error);
            }
            ChainStep::Retry { log, error, plan } => {
                sink.attempt_done(logged(log), false, Some((&error, &plan)));
                failed = Some(error);
            }
        }
    }
    Err(ModelChain::no_model())
}

/// One attempt: open, stream to the end. `Ok(status)` once the stream ended properly.
async fn attempt_once(
    platform: &dyn Platform,
    policy: &ModelPolicy,
    model: &ModelConfig,
    body: String,
    sink: &mut dyn ChainSink,
    first_chunk_at: &mut Option<i64>,
) -> Result<u16, ProviderError> {
    // Again at call time: a row written into D1 without the API, or a policy tightened since,
    // fails here with no network attempt, so the secret goes nowhere.
    policy
        .check(model)
        .map_err(|why| ProviderError::Config(format!("model {:?}: {why}", model.name)))?;
    // A key that is missing or empty would only earn an opaque 401 (or a network error) from
    // the provider: say what to do instead, before any request. Locally, `npm run dev` with no
    // key seeds the demo model in this model's place, so a first run gets answers.
    if let Some(secret) = &model.api_key_secret {
        let set = platform
            .secret(secret)
            .is_some_and(|key| !key.trim().is_empty());
        if !set {
            return Err(ProviderError::Config(format!(
                "secret {secret} is empty: set it in .dev.vars, or use the demo model \
                 (`npm run dev` with no key set starts it); deployed: `wrangler secret put \
                 {secret}` (model {:?})",
                model.name
            )));
        }
    }
    // The whole attempt has a deadline: the first-chunk and stall timeouts never end a stream
    // that drips a byte at a time.
    let total = model.total_timeout_ms.unwrap_or(DEFAULT_TOTAL_TIMEOUT_MS);
    let stream = async {
        let opening = platform.open_model(model, body);
        let mut reply = match sink.config_check() {
            // The request goes out while the configuration is confirmed.
            Some(check) => {
                let (opened, _) = join(opening, check.settle()).await;
                if check.overruled() {
                    if let Ok(mut reply) = opened {
                        reply.cancel();
                    }
                    return Ok(0);
                }
                opened?
            }
            None => opening.await?,
        };
        let mut due = None;
        while let Some(events) = next_batch(platform, &mut *reply, sink, &mut due).await? {
            if first_chunk_at.is_none() {
                *first_chunk_at = Some(platform.now_ms());
            }
            let done = events.iter().any(|e| matches!(e, StreamEvent::Done));
            sink.events(events)?;
            if sink.stopped() {
                reply.cancel();
                break;
            }
            if done {
                // The reply is whole. Its body's end is read (dropping a body unread cancels
                // it, which costs more than the last bytes), but briefly and without failing
                // on it: the sink holds the last frames until the chain returns.
                let tail = async { while let Ok(Some(_)) = reply.next_events().await {} };
                if with_timeout(tail, platform.sleep(TAIL_READ_MS))
                    .await
                    .is_none()
                {
                    reply.cancel();
                }
                break;
            }
        }
        Ok(200)
    };
    // A reply dropped at the deadline aborts its request (the driver's stream is dropped).
    with_timeout(stream, platform.sleep(u64::from(total)))
        .await
        .unwrap_or_else(|| {
            Err(ProviderError::Timeout(format!(
                "the reply took longer than {total} ms (total_timeout_ms)"
            )))
        })
}
