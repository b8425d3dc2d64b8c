//! `edgent::testing::adversarial::sse_bounded`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| edgent::testing::adversarial::sse_bounded(data));
