//! `edgent::testing::adversarial::definition_round_trip`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| edgent::testing::adversarial::definition_round_trip(data));
