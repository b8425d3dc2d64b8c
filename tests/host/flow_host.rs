//! The host tests' way to the shipped harness (`edgent::testing::TestHost`): real SQLite, the
//! example app's registry, a virtual clock and the frames it was asked to broadcast, with the
//! secret `TEST_SECRET` set. No network: `fetch` and D1 answer with an error.

use std::rc::Rc;

pub(crate) use edgent::testing::{block_on, TestHost};

/// `TestHost::with_thread(now)`: the example app's host at `now`.
pub(crate) trait WithThread {
    /// A host over a fresh database holding thread `thread-1` (agent `support`).
    fn with_thread(now: i64) -> Rc<TestHost>;
}

impl WithThread for TestHost {
    fn with_thread(now: i64) -> Rc<TestHost> {
        TestHost::new(crate::registry().unwrap(), now)
            .secret("TEST_SECRET", "s3cret")
            .into_rc()
    }
}
