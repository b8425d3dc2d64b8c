//! `edgent::testing::adversarial::openai_stream`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| edgent::testing::adversarial::openai_stream(data));
