//! `edgent::testing::adversarial::workers_ai_answer`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| edgent::testing::adversarial::workers_ai_answer(data));
