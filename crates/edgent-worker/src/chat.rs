//! The AI SDK chat transport's open answers: each is an SSE response fed by the thread's
//! frames through its [`UiStream`] until the answer finishes, or until the browser goes away
//! (the send fails and the stream is dropped).

use std::cell::RefCell;

use futures_channel::mpsc::{unbounded, UnboundedReceiver, UnboundedSender};
use serde_json::Value;
use worker::{Headers, Response};

use edgent::api::ui_stream::{sse, UiStream, DONE, STREAM_HEADERS};

type Chunk = worker::Result<Vec<u8>>;

struct OpenAnswer {
    ui: UiStream,
    tx: UnboundedSender<Chunk>,
}

impl OpenAnswer {
    /// Feeds one frame; false once the answer is over or nobody listens.
    fn feed(&mut self, frame: &Value) -> bool {
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
}

/// The answers streaming from one thread object (one per object instance: a stream lives as
/// long as its response, which keeps the object in memory). A stream whose receiver was
/// dropped (a refused request, a browser gone) is removed at the next frame.
#[derive(Default)]
pub(crate) struct ChatStreams(RefCell<Vec<OpenAnswer>>);

impl ChatStreams {
    /// Opens an answer stream: frames pushed from now on reach it (and `replay`, the frames
    /// it must start with, go first).
    pub(crate) fn open<'f>(
        &self,
        replay: impl IntoIterator<Item = &'f str>,
    ) -> UnboundedReceiver<Chunk> {
        let (tx, rx) = unbounded();
        let mut answer = OpenAnswer {
            ui: UiStream::new(),
            tx,
        };
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
}

/// The SSE response of an answer stream.
pub(crate) fn response(rx: UnboundedReceiver<Chunk>) -> worker::Result<Response> {
    let headers = Headers::new();
    for (name, value) in STREAM_HEADERS {
        headers.set(name, value)?;
    }
    Ok(Response::from_stream(rx)?.with_headers(headers))
}
