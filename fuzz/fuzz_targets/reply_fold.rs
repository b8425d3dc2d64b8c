//! `edgent::testing::adversarial::reply_fold`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| edgent::testing::adversarial::reply_fold(data));
