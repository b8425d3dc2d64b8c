//! A model reply's body, read by a small JavaScript pump instead of a Rust future per read.
//!
//! Reading a streamed body from Rust (`worker::ByteStream`, through `wasm_streams`) costs, per
//! read, a `JsFuture` (two closures handed to `then`), a microtask to wake the task, two
//! reflective property reads of the result and a copy, plus a timer of our own raced against
//! every read (armed, re-armed at the first chunk, cleared at the end). The V8 profile of a
//! text turn put about a sixth of the isolate's busy time on that path (busy time is not CPU:
//! the CPU saved was about 2%, `docs/decisions/2026-12-01-reply-bodies-read-in-javascript.md`).
//! The pump reads in a JavaScript loop and hands each chunk to one Rust closure made per
//! reply, which appends it to an inbox and wakes the reader: bytes that arrive before Rust runs
//! again are parsed (and sent to clients) together. One JavaScript timer keeps both deadlines
//! (the first chunk, then the longest quiet between chunks), re-armed only when it fires: a
//! reply shorter than both limits sets it once and clears it once.

use std::cell::RefCell;
use std::future::poll_fn;
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::Duration;

use wasm_bindgen::prelude::{wasm_bindgen, Closure};
use wasm_bindgen::{JsCast, JsValue};
use worker::js_sys::{Function, Uint8Array};

// `deliver(kind, value)`: 0 bytes (a Uint8Array), 1 the body ended, 2 it broke (the server
// answered, then the connection failed), 3 a deadline passed (value: whether a chunk had
// come). Nothing is delivered after an end or after `cancel()`, so Rust may drop the closure
// once it called `cancel()`. The timer is armed for the shorter of the two limits and, when it
// fires, measures the quiet since the last chunk against the limit that applies then; until
// the first chunk it fires at least once per stall limit, so a stall right after a slow first
// chunk is seen one stall limit after that chunk.
#[wasm_bindgen(
    inline_js = "export function edgent_body_pump(body, deliver, firstMs, stallMs) {
    const reader = body.getReader();
    let started = false;
    let ended = false;
    let last = Date.now();
    const end = (kind, value) => {
        if (ended) return;
        ended = true;
        clearTimeout(timer);
        deliver(kind, value);
    };
    const check = () => {
        if (ended) return;
        const limit = started ? stallMs : firstMs;
        const quiet = Date.now() - last;
        if (quiet >= limit) {
            reader.cancel().catch(() => {});
            end(3, started);
        } else {
            // Before the first chunk, wake at least once per stall limit: a first chunk may
            // come before the longer first-chunk deadline, and the stall counts from it.
            timer = setTimeout(check, started ? limit - quiet : Math.min(limit - quiet, stallMs));
        }
    };
    let timer = setTimeout(check, Math.min(firstMs, stallMs));
    (async () => {
        try {
            for (;;) {
                const { done, value } = await reader.read();
                if (ended) return;
                if (done) return end(1);
                started = true;
                last = Date.now();
                deliver(0, value);
            }
        } catch {
            end(2);
        }
    })();
    return {
        cancel() {
            if (ended) return;
            ended = true;
            clearTimeout(timer);
            reader.cancel().catch(() => {});
        },
    };
}"
)]
extern "C" {
    type BodyPump;

    fn edgent_body_pump(
        body: &JsValue,
        deliver: &Function,
        first_ms: f64,
        stall_ms: f64,
    ) -> BodyPump;

    #[wasm_bindgen(method)]
    fn cancel(this: &BodyPump);
}

/// What the pump delivered since the last read.
pub(crate) enum Next {
    /// Every byte that arrived (never empty).
    Bytes(Vec<u8>),
    /// How the body ended, once its bytes were read.
    End(End),
}

/// How a body ended.
#[derive(Clone, Copy)]
pub(crate) enum End {
    /// It ended properly.
    Finished,
    /// The connection broke after the server had answered.
    Broken,
    /// A deadline passed; `started`: after a chunk had come (the stall limit), else the
    /// first-chunk limit.
    TimedOut { started: bool },
}

/// What the pump left for the reader.
#[derive(Default)]
struct Inbox {
    bytes: Vec<u8>,
    end: Option<End>,
    waker: Option<Waker>,
}

/// A streamed body being read; dropping it stops the pump.
pub(crate) struct ModelBody {
    inbox: Rc<RefCell<Inbox>>,
    pump: BodyPump,
    /// Called by the pump; kept alive as long as the pump may call it (until `cancel`).
    _deliver: Closure<dyn FnMut(u32, JsValue)>,
}

impl ModelBody {
    /// Starts reading `body`, with `first_chunk` for its first chunk and `stall` for the
    /// quiet between chunks after it.
    pub(crate) fn start(body: &JsValue, first_chunk: Duration, stall: Duration) -> Self {
        let inbox = Rc::new(RefCell::new(Inbox::default()));
        let filled = Rc::clone(&inbox);
        let deliver = Closure::<dyn FnMut(u32, JsValue)>::new(move |kind: u32, value: JsValue| {
            // The pump runs on the event loop, never inside a borrow of the reader below.
            let mut inbox = filled.borrow_mut();
            match kind {
                0 => {
                    let chunk: Uint8Array = value.unchecked_into();
                    let at = inbox.bytes.len();
                    inbox.bytes.resize(at + chunk.length() as usize, 0);
                    chunk.copy_to(&mut inbox.bytes[at..]);
                }
                1 => inbox.end = Some(End::Finished),
                2 => inbox.end = Some(End::Broken),
                _ => {
                    inbox.end = Some(End::TimedOut {
                        started: value.as_bool().unwrap_or(true),
                    });
                }
            }
            let waker = inbox.waker.take();
            drop(inbox);
            if let Some(waker) = waker {
                waker.wake();
            }
        });
        let pump = edgent_body_pump(
            body,
            deliver.as_ref().unchecked_ref(),
            timer_ms(first_chunk),
            timer_ms(stall),
        );
        ModelBody {
            inbox,
            pump,
            _deliver: deliver,
        }
    }

    /// The bytes that arrived since the last call, waiting for some; once they are read, how
    /// the body ended.
    pub(crate) async fn next(&mut self) -> Next {
        poll_fn(|cx| {
            let mut inbox = self.inbox.borrow_mut();
            if !inbox.bytes.is_empty() {
                return Poll::Ready(Next::Bytes(std::mem::take(&mut inbox.bytes)));
            }
            match inbox.end {
                Some(end) => Poll::Ready(Next::End(end)),
                None => {
                    inbox.waker = Some(cx.waker().clone());
                    Poll::Pending
                }
            }
        })
        .await
    }

    /// Stops reading (the pump cancels the body and delivers nothing more).
    pub(crate) fn cancel(&self) {
        self.pump.cancel();
    }
}

impl Drop for ModelBody {
    fn drop(&mut self) {
        // After this the pump calls nothing, so the closure may go with the rest.
        self.pump.cancel();
    }
}

/// A limit as `setTimeout` takes it: past 2^31 - 1 ms it would wrap and fire at once.
fn timer_ms(limit: Duration) -> f64 {
    let ms = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX);
    ms.min(edgent::values::limits::MAX_TIMER_MS) as f64
}
