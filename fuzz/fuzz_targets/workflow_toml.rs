//! `edgent::testing::adversarial::workflow_toml`, with the TOML parser and the build check
//! `edgent-build` uses.
#![no_main]

use edgent::build_support::definition::Workflow;
use libfuzzer_sys::fuzz_target;

fn parse(text: &str) -> Result<Workflow, String> {
    toml::from_str(text).map_err(|e| e.to_string())
}

fuzz_target!(|data: &[u8]| {
    edgent::testing::adversarial::workflow_toml(data, &parse, &edgent_build::check_workflow);
});
