//! `say_hello`: greets someone by name. A tool is one file; its name is the file stem.

use edgent::prelude::*;

/// The arguments the model fills in; doc comments become the schema's descriptions.
#[derive(Deserialize, JsonSchema)]
pub struct SayHello {
    /// Who to greet.
    name: String,
}

/// Registered as `say_hello`.
pub fn tool() -> Tool {
    Tool::new("Greets someone by name.")
        .handler(say_hello)
        .refine(|a: &SayHello| {
            if a.name.trim().is_empty() {
                Err("name must not be blank".into())
            } else {
                Ok(())
            }
        })
}

async fn say_hello(_flow: FlowState, args: SayHello) -> CallToolResult {
    CallToolResult::text(format!("Hello, {}!", args.name.trim()))
}
