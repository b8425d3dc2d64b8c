//! `edgent::testing::adversarial::admin_api`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| edgent::testing::adversarial::admin_api(data));
