//! `compare_weather`: the "fetch then wait" pattern. Fetches the weather, sleeps durably, and
//! fetches it again to report what changed. Each fetch is a recorded step: the sleep parks
//! the call, and when the alarm runs the workflow again the first fetch comes from the record,
//! not from the network.

use edgent::prelude::*;

/// Which city, and how long to wait between the two readings.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompareWeather {
    /// City name, optionally with a country code.
    pub city: String,
    /// Seconds between the readings (1 to 86400).
    pub wait_seconds: u64,
}

/// Both readings.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Comparison {
    /// The first reading.
    pub before: serde_json::Value,
    /// The second reading.
    pub after: serde_json::Value,
    /// Temperature change, in the readings' units.
    pub temperature_change: Option<f64>,
}

/// Registered as `compare_weather`.
pub fn tool() -> Tool {
    Tool::new("Reads the weather in a city now and again after a wait, and reports the change.")
        .handler(compare_weather)
        .deadline(Duration::from_secs(2 * 86_400))
        .refine(|c: &CompareWeather| match c.wait_seconds {
            1..=86_400 => Ok(()),
            s => Err(format!("wait_seconds is {s}; it must be 1 to 86400")),
        })
}

async fn reading(flow: &FlowState, city: &str) -> Result<serde_json::Value, ToolError> {
    let result = flow
        .call_tool("get_weather", serde_json::json!({ "city": city }))
        .await?;
    if result.is_error() {
        return Err(ToolError::fatal(result.to_model_text()));
    }
    serde_json::from_str(&result.to_model_text()).map_err(ToolError::from)
}

async fn compare_weather(flow: FlowState, c: CompareWeather) -> Result<Json<Comparison>, ToolError> {
    let before = flow.step("before", || reading(&flow, &c.city)).await?;
    flow.sleep("wait", Duration::from_secs(c.wait_seconds)).await?;
    let after = flow.step("after", || reading(&flow, &c.city)).await?;
    let temperature = |v: &serde_json::Value| v["temperature"].as_f64();
    let temperature_change = temperature(&after)
        .zip(temperature(&before))
        .map(|(a, b)| ((a - b) * 10.0).round() / 10.0);
    Ok(Json(Comparison {
        before,
        after,
        temperature_change,
    }))
}
