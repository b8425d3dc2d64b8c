//! JSON responses and bounded body reading.

use serde::Serialize;
use worker::{Request, Response, Result};

use edgent::api::{ApiError, MAX_BODY_BYTES};
use edgent::tool::RegistryError;

/// A JSON response with `status`.
pub(crate) fn json<T: Serialize>(status: u16, body: &T) -> Result<Response> {
    Ok(Response::from_json(body)?.with_status(status))
}

/// The API's error shape.
pub(crate) fn error(e: &ApiError) -> Result<Response> {
    json(e.status, &e.body())
}

/// A 500 whose cause goes to the log only (clients get `what`).
pub(crate) fn logged(what: &str, cause: impl std::fmt::Display) -> ApiError {
    worker::console_error!("{what}: {cause}");
    ApiError::internal(what)
}

/// A broken tool definition: logged, and reported (it names the tool and the problem, which is
/// the developer's own code, not a secret).
pub(crate) fn registry_error(e: &RegistryError) -> ApiError {
    worker::console_error!("tool registry: {e}");
    ApiError::new(500, "invalid_tool", e.to_string())
}

/// Reads the body, refusing more than [`MAX_BODY_BYTES`] (by header first, then by count).
pub(crate) async fn read_body(req: &mut Request) -> std::result::Result<Vec<u8>, ApiError> {
    let declared = req
        .headers()
        .get("content-length")
        .ok()
        .flatten()
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES) {
        return Err(ApiError::too_large());
    }
    let bytes = req
        .bytes()
        .await
        .map_err(|_| ApiError::new(400, "bad_body", "could not read the request body"))?;
    if bytes.len() > MAX_BODY_BYTES {
        return Err(ApiError::too_large());
    }
    Ok(bytes)
}
