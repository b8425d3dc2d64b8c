//! The AI SDK chat transport's open answers: each is an SSE response fed by the thread's
//! frames through its [`UiStream`] until the answer finishes, the browser goes away (the send
//! fails and the stream is dropped), or its token stops being good (expired, revoked, the
//! thread deleted: the stream ends with an `error` part).

use std::cell::RefCell;

use futures_channel::mpsc::{unbounded, UnboundedReceiver, UnboundedSender};
use serde_json::{json, Value};
use worker::{Headers, Response};

use super::clock::now;
use edgent::api::access::Principal;
use edgent::api::ui_stream::{sse, UiStream, DONE, STREAM_HEADERS};

type Chunk = worker::Result<Vec<u8>>;

struct OpenAnswer {
    ui: UiStream,
    tx: UnboundedSender<Chunk>,
    /// When a client token's stream must end (seconds since the epoch); `None` for the server.
    expires_at: Option<i64>,
}

impl OpenAnswer {
    /// Feeds one frame; false once the answer is over or nobody listens.
    fn feed(&mut self, frame: &Value) -> bool {
        if self.expires_at.is_some_and(|at| at <= now() / 1000) {
            self.end("the token expired; ask your server for a new one");
            return false;
        }
        for chunk in self.ui.on_frame(frame) {
            if self
                .tx
                .unbounded_send(Ok(sse(&chunk).into_bytes()))
                .is_err()
            {
                return false;
            }
        }
        if self.ui.is_finished() {
            let _ = self.tx.unbounded_send(Ok(DONE.as_bytes().to_vec()));
            return false;
        }
        true
    }

    /// Ends the stream with an error part.
    fn end(&self, why: &str) {
        let error = json!({ "type": "error", "errorText": why });
        let _ = self.tx.unbounded_send(Ok(sse(&error).into_bytes()));
        let _ = self.tx.unbounded_send(Ok(DONE.as_bytes().to_vec()));
    }
}

/// The answers streaming from one thread object (one per object instance: a stream lives as
/// long as its response, which keeps the object in memory). A stream whose receiver was
/// dropped (a refused request, a browser gone) is removed at the next frame.
#[derive(Default)]
pub(crate) struct ChatStreams(RefCell<Vec<OpenAnswer>>);

impl ChatStreams {
    /// Opens an answer stream for `principal` through `ui`: `replay`, the frames it must
    /// start with, go first, then every frame pushed from now on.
    pub(crate) fn open<'f>(
        &self,
        principal: &Principal,
        ui: UiStream,
        replay: impl IntoIterator<Item = &'f str>,
    ) -> UnboundedReceiver<Chunk> {
        let (tx, rx) = unbounded();
        let expires_at = match principal {
            Principal::Server => None,
            Principal::Client(token) => Some(token.expires_at),
        };
        let mut answer = OpenAnswer { ui, tx, expires_at };
        let mut live = true;
        for text in replay {
            if let Ok(frame) = serde_json::from_str::<Value>(text) {
                if !answer.feed(&frame) {
                    live = false;
                    break;
                }
            }
        }
        if live {
            self.0.borrow_mut().push(answer);
        }
        rx
    }

    /// Feeds a broadcast frame (its JSON text) to every open answer; finished ones close.
    pub(crate) fn push(&self, text: &str) {
        let mut open = self.0.borrow_mut();
        if open.is_empty() {
            return;
        }
        let Ok(frame) = serde_json::from_str::<Value>(text) else {
            return;
        };
        open.retain_mut(|answer| answer.feed(&frame));
    }

    /// Ends every stream a client token opened (its tokens were revoked).
    pub(crate) fn end_clients(&self, why: &str) {
        self.0.borrow_mut().retain(|answer| {
            if answer.expires_at.is_some() {
                answer.end(why);
                false
            } else {
                true
            }
        });
    }

    /// Ends every stream (the thread was deleted).
    pub(crate) fn end_all(&self, why: &str) {
        for answer in self.0.borrow_mut().drain(..) {
            answer.end(why);
        }
    }
}

/// The SSE response of an answer stream.
pub(crate) fn response(rx: UnboundedReceiver<Chunk>) -> worker::Result<Response> {
    let headers = Headers::new();
    for (name, value) in STREAM_HEADERS {
        headers.set(name, value)?;
    }
    Ok(Response::from_stream(rx)?.with_headers(headers))
}
