//! The platform's clock and timers: the driver reads the time and passes it to the engine as
//! `now`, and races I/O against deadlines.

use std::future::Future;
use std::time::Duration;

use futures_util::future::{select, Either};
use worker::Delay;

/// Milliseconds since the Unix epoch. `Date.now()` itself: `worker::Date::now` creates a
/// `Date` object per call (and frees its handle), which a turn's many readings of the clock
/// paid for in its CPU profile.
pub(crate) fn now() -> i64 {
    worker::js_sys::Date::now() as i64
}

/// Runs `fut` with a deadline; `None` when the deadline won.
pub(crate) async fn with_timeout<F: Future>(fut: F, limit: Duration) -> Option<F::Output> {
    let fut = Box::pin(fut);
    // setTimeout wraps past 2^31 - 1 ms and would fire at once.
    let limit = limit.min(Duration::from_millis(edgent::values::limits::MAX_TIMER_MS));
    let delay = Box::pin(Delay::from(limit));
    match select(fut, delay).await {
        Either::Left((out, _)) => Some(out),
        Either::Right(_) => None,
    }
}
