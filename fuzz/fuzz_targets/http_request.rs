//! `edgent::testing::adversarial::http_request`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| edgent::testing::adversarial::http_request(data));
