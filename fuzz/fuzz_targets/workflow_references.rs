//! `edgent::testing::adversarial::workflow_references`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| edgent::testing::adversarial::workflow_references(data));
