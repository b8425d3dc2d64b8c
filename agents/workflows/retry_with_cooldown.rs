//! `retry_with_cooldown`: the "retry with cooldown" pattern. Tries to read the weather; after
//! a failure it sleeps durably for a cooldown that doubles each time, then tries again. Each
//! try's outcome (success or failure) is a recorded step, so a run after a sleep or a restart
//! makes the same decisions without calling the service again.

use edgent::prelude::*;

/// Which city, how many tries and the first cooldown.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetryWithCooldown {
    /// City name.
    pub city: String,
    /// Tries in all (1 to 5).
    #[serde(default = "three")]
    pub tries: u32,
    /// Seconds before the second try; doubled before each further one (1 to 3600).
    #[serde(default = "ten")]
    pub first_cooldown_seconds: u64,
}

fn three() -> u32 {
    3
}

fn ten() -> u64 {
    10
}

/// Registered as `retry_with_cooldown`.
pub fn tool() -> Tool {
    Tool::new("Reads the weather for a city, trying again after growing cooldowns if the service fails.")
        .handler(retry_with_cooldown)
        // The workflow retries by itself; a failure of the whole is final.
        .retry(RetryPolicy::none())
        .refine(|r: &RetryWithCooldown| {
            if !(1..=5).contains(&r.tries) {
                return Err(format!("tries is {}; it must be 1 to 5", r.tries));
            }
            match r.first_cooldown_seconds {
                1..=3600 => Ok(()),
                s => Err(format!("first_cooldown_seconds is {s}; it must be 1 to 3600")),
            }
        })
}

async fn retry_with_cooldown(flow: FlowState, r: RetryWithCooldown) -> Result<CallToolResult, ToolError> {
    let mut cooldown = r.first_cooldown_seconds;
    let mut last_error = String::new();
    for i in 1..=r.tries {
        // The outcome itself is the step's value: a failure is recorded too.
        let outcome: Result<String, String> = flow
            .step(&format!("try_{i}"), || async {
                Ok(
                    match flow
                        .call_tool("get_weather", serde_json::json!({ "city": r.city }))
                        .await
                    {
                        Ok(result) if !result.is_error() => Ok(result.to_model_text()),
                        Ok(result) => Err(result.to_model_text()),
                        Err(e) => Err(e.text().to_owned()),
                    },
                )
            })
            .await?;
        match outcome {
            Ok(text) => return Ok(CallToolResult::text(text)),
            Err(e) => last_error = e,
        }
        if i < r.tries {
            flow.sleep(&format!("cooldown_{i}"), Duration::from_secs(cooldown))
                .await?;
            cooldown *= 2;
        }
    }
    Err(ToolError::fatal(format!(
        "the weather service failed {} times; last error: {last_error}",
        r.tries
    )))
}
