//! One model attempt: a streaming call over `fetch` (bytes fed to the wire format's parser as
//! they arrive, under the first-chunk and stall deadlines), or the `AI` binding.

use std::time::Duration;

use wasm_bindgen::JsValue;
use worker::{
    AbortController, Env, Fetch, Headers, Method, RequestInit, RequestRedirect, ResponseBody,
};

use super::clock::with_timeout;
use super::http::read_at_most;
use super::model_body::{End, ModelBody, Next};
use edgent::config::{
    ModelConfig, Provider, DEFAULT_FIRST_CHUNK_TIMEOUT_MS, DEFAULT_STALL_TIMEOUT_MS,
};
use edgent::llm::stream::{ProviderError, StreamEvent};
use edgent::llm::{
    auth_headers, endpoint, error_message, request_headers, retry_after_ms, StreamParser,
};
use edgent::llm::{embeddings, workers_ai};
use edgent::runtime::{ModelReply, WholeReply};
use edgent::tool::{BoxFuture, HostError, HttpRequest};
use edgent::values::redact::redact_secrets;

/// Largest error body we read from a failing provider.
const MAX_ERROR_BODY: usize = 16 * 1024;

/// An open model response body.
pub(crate) struct ModelStream {
    /// Read under the first-chunk and stall deadlines (see [`ModelBody`]).
    body: ModelBody,
    parser: StreamParser,
    abort: Option<AbortController>,
    finished: bool,
    /// The longest quiet allowed between chunks.
    stall: Duration,
    /// The longest wait allowed for the first chunk.
    first_chunk: Duration,
}

impl ModelStream {
    /// Sends the request and waits for a successful status.
    pub(crate) async fn open(
        env: &Env,
        model: &ModelConfig,
        body: &str,
    ) -> Result<Self, ProviderError> {
        let (Some(url), Some(parser)) =
            (endpoint(&model.target()), StreamParser::new(model.provider))
        else {
            return Err(ProviderError::Config(format!(
                "provider {:?} does not stream over HTTP",
                model.provider.as_str()
            )));
        };
        let first_chunk = Duration::from_millis(u64::from(
            model
                .first_chunk_timeout_ms
                .unwrap_or(DEFAULT_FIRST_CHUNK_TIMEOUT_MS),
        ));
        let stall = Duration::from_millis(u64::from(
            model.stall_timeout_ms.unwrap_or(DEFAULT_STALL_TIMEOUT_MS),
        ));
        let key = match &model.api_key_secret {
            // The key is read from the secret at call time and goes nowhere but its header.
            Some(secret) => Some(env.secret(secret).map_err(|_| {
                ProviderError::Config(format!(
                    "the secret {secret:?} named by model {:?} is not set",
                    model.name
                ))
            })?),
            None => None,
        };
        let headers = Headers::new();
        let key = key.map(|k| k.to_string());
        for (name, value) in request_headers(model.provider, key.as_deref()) {
            headers
                .set(name, &value)
                .map_err(|e| ProviderError::Config(e.to_string()))?;
        }
        let mut init = RequestInit::new();
        // The key goes to the host the operator allowed (MODEL_HOSTS), never on to where a
        // redirect points: a 3xx is the model server's answer, an error like any non-2xx.
        init.with_method(Method::Post)
            .with_headers(headers)
            .with_body(Some(JsValue::from_str(body)))
            .with_redirect(RequestRedirect::Manual);
        let request = super::http::outgoing(&url, &init)
            .map_err(|e| ProviderError::Config(format!("bad model URL: {e}")))?;
        // Aborts the request if this future is dropped before the stream is handed over (the
        // attempt's overall deadline can fire while it waits for headers or an error body).
        let mut abort = AbortOnDrop(Some(AbortController::default()));
        let signal = abort.signal();
        let sent = with_timeout(
            Fetch::Request(request).send_with_signal(&signal),
            first_chunk,
        )
        .await;
        let mut response = match sent {
            None => {
                return Err(ProviderError::Timeout("no response headers in time".into()));
            }
            Some(Err(e)) => return Err(ProviderError::Network(e.to_string())),
            Some(Ok(r)) => r,
        };
        let status = response.status_code();
        if !(200..300).contains(&status) {
            let retry_after = response.headers().get("retry-after").ok().flatten();
            let retry_after_ms = retry_after_ms(retry_after.as_deref());
            // At most MAX_ERROR_BODY bytes are read, however much the server sends.
            let text = with_timeout(read_at_most(&mut response, MAX_ERROR_BODY), stall)
                .await
                .and_then(Result::ok)
                .map(|(bytes, _)| String::from_utf8_lossy(&bytes).into_owned())
                .unwrap_or_default();
            let message = failure_message(model, status, &text);
            return Err(ProviderError::Http {
                status,
                message,
                retry_after_ms,
            });
        }
        // A success with no body at all is a reply cut short before its first byte.
        let ResponseBody::Stream(stream) = response.body() else {
            return Err(ProviderError::Truncated);
        };
        let body = ModelBody::start(stream.as_ref(), first_chunk, stall);
        Ok(ModelStream {
            body,
            parser,
            abort: abort.0.take(),
            finished: false,
            stall,
            first_chunk,
        })
    }

    /// The next batch of events (every byte that arrived since the last batch, parsed);
    /// `Ok(None)` once the stream has ended properly.
    pub(crate) async fn next_events(&mut self) -> Result<Option<Vec<StreamEvent>>, ProviderError> {
        if self.finished {
            return Ok(None);
        }
        match self.body.next().await {
            Next::Bytes(bytes) => self.parser.feed(&bytes).map(Some),
            Next::End(End::Finished) => {
                self.finished = true;
                self.parser.finish().map(Some)
            }
            // The server answered, then the connection broke: the reply is cut short.
            Next::End(End::Broken) => Err(ProviderError::Truncated),
            Next::End(End::TimedOut { started }) => {
                self.cancel();
                Err(ProviderError::Timeout(if started {
                    format!("the stream stalled for {} ms", self.stall.as_millis())
                } else {
                    format!("no first chunk within {} ms", self.first_chunk.as_millis())
                }))
            }
        }
    }

    /// Aborts the underlying fetch (on stop or timeout) so the connection is not left open.
    pub(crate) fn cancel(&mut self) {
        self.body.cancel();
        if let Some(abort) = self.abort.take() {
            abort.abort();
        }
    }
}

/// An abort controller that aborts its request when dropped still holding it.
struct AbortOnDrop(Option<AbortController>);

impl AbortOnDrop {
    fn signal(&self) -> worker::AbortSignal {
        self.0
            .as_ref()
            .map_or_else(worker::AbortSignal::abort, AbortController::signal)
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(abort) = self.0.take() {
            abort.abort();
        }
    }
}

impl Drop for ModelStream {
    /// A stream dropped before its end (the attempt's overall deadline, a stopped turn) aborts
    /// its request, so the connection is not left open.
    fn drop(&mut self) {
        if !self.finished {
            self.cancel();
        }
    }
}

/// Opens one model attempt's reply: a streamed HTTP response, or a Workers AI answer (the
/// binding does not stream tool-call deltas, so its whole reply is one batch of events).
pub(crate) async fn open(
    env: Env,
    model: ModelConfig,
    body: String,
) -> Result<Box<dyn ModelReply>, ProviderError> {
    if model.provider == Provider::WorkersAi {
        // The binding takes an object: the one format that needs the body parsed again.
        let body: serde_json::Value = serde_json::from_str(&body)
            .map_err(|e| ProviderError::Config(format!("request body: {e}")))?;
        let events = run_workers_ai(&env, &model, &body).await?;
        return Ok(Box::new(WholeReply::new(events)));
    }
    Ok(Box::new(ModelStream::open(&env, &model, &body).await?))
}

impl ModelReply for ModelStream {
    fn next_events(&mut self) -> BoxFuture<'_, Result<Option<Vec<StreamEvent>>, ProviderError>> {
        Box::pin(ModelStream::next_events(self))
    }

    fn cancel(&mut self) {
        ModelStream::cancel(self);
    }
}

/// One Workers AI call through the `AI` binding (not streamed: the binding's stream has no
/// tool-call deltas), mapped to the same events as a stream.
async fn run_workers_ai(
    env: &Env,
    model: &ModelConfig,
    input: &serde_json::Value,
) -> Result<Vec<StreamEvent>, ProviderError> {
    let ai = env.ai("AI").map_err(|_| {
        ProviderError::Config(
            "the Worker has no AI binding named \"AI\" (see docs/deploying.md)".into(),
        )
    })?;
    let limit = Duration::from_millis(u64::from(
        model
            .first_chunk_timeout_ms
            .unwrap_or(DEFAULT_FIRST_CHUNK_TIMEOUT_MS),
    ));
    let out: serde_json::Value = match with_timeout(ai.run(&model.model, input), limit).await {
        None => {
            return Err(ProviderError::Timeout(
                "Workers AI did not answer in time".into(),
            ))
        }
        // The binding reports capacity and upstream failures as thrown errors.
        Some(Err(e)) => return Err(ProviderError::Network(format!("Workers AI: {e}"))),
        Some(Ok(v)) => v,
    };
    workers_ai::parse_response(&out)
}

/// Largest embedding answer read: 96 vectors of 1,536 dimensions as JSON text are ~3 MB.
const MAX_EMBEDDING_BODY: usize = 8 * 1024 * 1024;

/// One embedding request of tool selection: `POST {base_url}/embeddings` with the model's key
/// (the host's `fetch`, aborted at the deadline), or the `AI` binding; the answer's JSON
/// within `timeout_ms`.
pub(crate) async fn embed(
    env: Env,
    model: ModelConfig,
    body: serde_json::Value,
    timeout_ms: u32,
) -> Result<serde_json::Value, ProviderError> {
    let late = || ProviderError::Timeout(format!("no embeddings within {timeout_ms} ms"));
    let Some(url) = embeddings::endpoint(&model.target()) else {
        let ai = env.ai("AI").map_err(|_| {
            ProviderError::Config("the Worker has no AI binding named \"AI\"".into())
        })?;
        let limit = Duration::from_millis(u64::from(timeout_ms));
        return match with_timeout(ai.run(&model.model, &body), limit).await {
            None => Err(late()),
            Some(Err(e)) => Err(ProviderError::Network(format!("Workers AI: {e}"))),
            Some(Ok(v)) => Ok(v),
        };
    };
    let mut headers = vec![("content-type".to_owned(), "application/json".to_owned())];
    let mut key = None;
    if let Some(secret) = &model.api_key_secret {
        // Read at call time; it goes nowhere but its header, and is cut from error text.
        let k = env.secret(secret).map(|k| k.to_string()).map_err(|_| {
            ProviderError::Config(format!(
                "the secret {secret:?} named by model {:?} is not set",
                model.name
            ))
        })?;
        headers.extend(
            auth_headers(model.provider, &k)
                .into_iter()
                .map(|(n, v)| (n.to_owned(), v)),
        );
        key = Some(k);
    }
    let request = HttpRequest {
        method: "POST".into(),
        url,
        headers,
        body: Some(body.to_string()),
        timeout_ms,
        // The key goes to the host the operator allowed, never on to where a redirect points.
        follow_redirects: false,
    };
    let response = crate::host::fetch_at_most(request, MAX_EMBEDDING_BODY)
        .await
        .map_err(|e| match e {
            HostError::Timeout { .. } => late(),
            HostError::TooLarge => ProviderError::TooLarge(format!(
                "an embedding answer over {MAX_EMBEDDING_BODY} bytes"
            )),
            other => ProviderError::Network(other.to_string()),
        })?;
    if !(200..300).contains(&response.status) {
        let message = failure_message(&model, response.status, &response.body);
        return Err(ProviderError::Http {
            status: response.status,
            message: redact_secrets(&message, key.as_slice()).into_owned(),
            retry_after_ms: None,
        });
    }
    serde_json::from_str(&response.body)
        .map_err(|e| ProviderError::Malformed(format!("embedding answer: {e}")))
}

/// The Worker's embedder outside a thread object (the recommend route).
pub(crate) struct WorkerEmbedder(pub(crate) Env);

impl edgent::runtime::Embedder for WorkerEmbedder {
    fn embed(
        &self,
        model: &ModelConfig,
        body: serde_json::Value,
        timeout_ms: u32,
    ) -> BoxFuture<'static, Result<serde_json::Value, ProviderError>> {
        Box::pin(embed(self.0.clone(), model.clone(), body, timeout_ms))
    }
}

/// What a model server's non-2xx answer says: its own error message, or for a redirect (never
/// followed: the key would go with it) what to do instead.
fn failure_message(model: &ModelConfig, status: u16, body: &str) -> String {
    if (300..400).contains(&status) {
        return "a redirect, which is not followed (the key would go with it): set the model's \
                base_url to the final URL"
            .to_owned();
    }
    error_message(model.provider, body)
}
