//! `edgent::testing::adversarial::stored_reply`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| edgent::testing::adversarial::stored_reply(data));
