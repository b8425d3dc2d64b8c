//! `get_weather`: current weather for a city from OpenWeatherMap's current-weather API. A step
//! tool: an outbound `fetch` with the key read from a secret, and every failure classified
//! for the retry policy. An outage or a timeout is retried (3 attempts, backoff with jitter),
//! a 429 comes back after its `Retry-After`, and a bad key or an unknown city is fatal: no
//! retry, the model explains it. Calls are limited to 60 a minute across the deployment, to
//! protect the API key's quota.
//!
//! Configure with `wrangler secret put WEATHER_API_KEY` (`.dev.vars` locally). The base URL
//! can be changed with the `WEATHER_API_URL` var (tests point it at a local server).

use edgent::prelude::*;

const DEFAULT_BASE_URL: &str = "https://api.openweathermap.org/data/2.5";

/// Which city, and in which units.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetWeather {
    /// City name, optionally with a country code: "Lisbon" or "Paris,FR".
    pub city: String,
    /// Temperature units.
    #[serde(default)]
    pub units: Units,
}

/// Temperature units.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Units {
    /// Degrees Celsius, wind in m/s.
    #[default]
    Celsius,
    /// Degrees Fahrenheit, wind in mph.
    Fahrenheit,
}

/// The weather now.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Weather {
    /// The city as the service knows it.
    pub city: String,
    /// Temperature in the requested units.
    pub temperature: f64,
    /// The requested units.
    pub units: Units,
    /// Short description, e.g. "light rain".
    pub conditions: String,
    /// Relative humidity, percent.
    pub humidity_percent: Option<f64>,
}

/// The part of the provider's answer we read.
#[derive(Deserialize)]
struct ApiAnswer {
    name: String,
    main: ApiMain,
    #[serde(default)]
    weather: Vec<ApiCondition>,
}

#[derive(Deserialize)]
struct ApiMain {
    temp: f64,
    humidity: Option<f64>,
}

#[derive(Deserialize)]
struct ApiCondition {
    description: String,
}

/// Registered as `get_weather`.
pub fn tool() -> Tool {
    Tool::new("Gets the current weather (temperature, conditions, humidity) for a city.")
        .handler(get_weather)
        .retry(RetryPolicy::attempts(3).backoff(Duration::from_millis(500)))
        .timeout(Duration::from_secs(15))
        .rate_limit(RateLimit::per_minute(60).per_deployment())
        .refine(|a: &GetWeather| {
            if a.city.trim().is_empty() {
                Err("city must not be empty".into())
            } else {
                Ok(())
            }
        })
}

async fn get_weather(flow: FlowState, args: GetWeather) -> Result<Json<Weather>, ToolError> {
    let Some(key) = flow.secret("WEATHER_API_KEY") else {
        return Err(ToolError::fatal(
            "the weather service is not configured (no WEATHER_API_KEY secret); tell the user weather is unavailable",
        ));
    };
    let base = flow
        .var("WEATHER_API_URL")
        .unwrap_or_else(|| DEFAULT_BASE_URL.to_owned());
    let units = match args.units {
        Units::Celsius => "metric",
        Units::Fahrenheit => "imperial",
    };
    let request = HttpRequest::get(format!("{}/weather", base.trim_end_matches('/')))
        .query("q", args.city.trim())
        .query("units", units)
        .query("appid", &key)
        .timeout_ms(8_000);
    let response = flow.fetch(request).await.map_err(|e| {
        // The key travels in the URL; make sure an error quoting the URL cannot leak it.
        let e = e.to_string().replace(&key, "***");
        ToolError::new(format!("the weather service did not answer ({e}); try again later"))
    })?;
    match response.status {
        200..=299 => {}
        401 | 403 => return Err(ToolError::fatal("the weather service rejected our API key; tell the user weather is unavailable")),
        404 => {
            return Err(ToolError::fatal(format!(
                "no city named {:?} was found; check the spelling or add a country code",
                args.city.trim()
            )))
        }
        429 => {
            let text = "the weather service is rate limiting us; try again in a minute";
            return Err(match response.retry_after() {
                Some(after) => ToolError::retry_after(text, after),
                None => ToolError::new(text),
            });
        }
        status => {
            return Err(ToolError::new(format!(
                "the weather service failed (HTTP {status}); try again later"
            )))
        }
    }
    let answer: ApiAnswer = response
        .json()
        .map_err(|_| ToolError::fatal("the weather service sent an answer we could not read"))?;
    Ok(Json(Weather {
        city: answer.name,
        temperature: answer.main.temp,
        units: args.units,
        conditions: answer
            .weather
            .into_iter()
            .next()
            .map_or_else(|| "unknown".to_owned(), |c| c.description),
        humidity_percent: answer.main.humidity,
    }))
}
