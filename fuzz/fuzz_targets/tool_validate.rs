//! `edgent::testing::adversarial::tool_validate` over the example app's tools.
#![no_main]

use libfuzzer_sys::fuzz_target;

thread_local! {
    static TOOLS: edgent::tool::Registry = {
        edgent_example::CATALOG.install();
        edgent_example::CATALOG.registry().expect("the example app's tools")
    };
}

fuzz_target!(|data: &[u8]| {
    TOOLS.with(|registry| edgent::testing::adversarial::tool_validate(registry, data));
});
