//! JSON responses, bounded body reading, outgoing requests, and the boxed handler futures the
//! router and the thread object dispatch to.

use futures_util::StreamExt;
use serde::Serialize;
use worker::{Request, RequestInit, Response, Result};

use edgent::api::{ApiError, MAX_BODY_BYTES};
use edgent::tool::RegistryError;

/// An outgoing request: `Request::new_with_init` without its `cf` step. That method converts
/// `init.cf` (Cloudflare's image, cache and TLS options) to a JS object whenever one is set,
/// which links ~11 KB of wasm for every caller; no request of ours sets `cf`. The same fields
/// as worker 0.8.7 passes (method, headers, redirect, cache, body), and the same error.
pub(crate) fn outgoing(url: &str, init: &RequestInit) -> Result<Request> {
    use worker::web_sys;
    let js = web_sys::RequestInit::new();
    if !init.headers.is_empty() {
        js.set_headers(init.headers.as_ref());
    }
    js.set_method(init.method.as_ref());
    js.set_redirect(init.redirect.into());
    if let Some(cache) = init.cache {
        js.set_cache(cache.into());
    }
    if let Some(body) = &init.body {
        js.set_body(body);
    }
    web_sys::Request::new_with_str_and_init(url, &js)
        .map(Request::from)
        .map_err(|e| {
            worker::Error::JsError(
                e.as_string()
                    .unwrap_or_else(|| "invalid URL or options for Request".to_string()),
            )
        })
}

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

/// The request's URL as the runtime gives it (already normalised). Read as a string: the
/// `url` crate's parser behind `Request::url` (with its IDNA host tables) cost the Worker ~35 KB
/// of code for the query and the origin, which need no parsing of the host.
fn raw_url(req: &Request) -> String {
    req.inner().url()
}

/// The query string, without `?` (and without any fragment).
pub(crate) fn raw_query(req: &Request) -> Option<String> {
    let url = raw_url(req);
    let url = url.split('#').next().unwrap_or_default();
    url.split_once('?').map(|(_, q)| q.to_owned())
}

/// The query's `name=value` pairs, percent-decoded.
pub(crate) fn query_pairs(req: &Request) -> Vec<(String, String)> {
    raw_query(req)
        .map(|q| {
            form_urlencoded::parse(q.as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// The first value of query parameter `name`.
pub(crate) fn query_param(req: &Request, name: &str) -> Option<String> {
    query_pairs(req)
        .into_iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
}

/// `scheme://host[:port]`, where clients reached us.
pub(crate) fn origin(req: &Request) -> Option<String> {
    let url = raw_url(req);
    let (scheme, rest) = url.split_once("://")?;
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    (!host.is_empty()).then(|| format!("{scheme}://{host}"))
}

/// Reads the body, refusing more than [`MAX_BODY_BYTES`] (by header first, then by count).
pub(crate) async fn read_body(req: &mut Request) -> std::result::Result<Vec<u8>, ApiError> {
    read_body_within(req, MAX_BODY_BYTES).await
}

/// [`read_body`] with another limit (the AI SDK chat route's).
pub(crate) async fn read_body_within(
    req: &mut Request,
    max: usize,
) -> std::result::Result<Vec<u8>, ApiError> {
    let too_large = || {
        ApiError::new(
            413,
            "payload_too_large",
            format!("request bodies are limited to {max} bytes"),
        )
    };
    let declared = req
        .headers()
        .get("content-length")
        .ok()
        .flatten()
        .and_then(|v| v.parse::<usize>().ok());
    if req.inner().body().is_none() {
        return Ok(Vec::new());
    }
    let unreadable = |_| ApiError::new(400, "bad_body", "could not read the request body");
    let mut stream = req.stream().map_err(unreadable)?;
    if declared.is_some_and(|n| n > max) {
        // Refused by its header, read to its end first (when not huge): answered mid-upload,
        // many clients report a reset instead of the 413.
        if declared.is_some_and(|n| n <= DRAIN_MAX) {
            drain(&mut stream, DRAIN_MAX).await;
        }
        return Err(too_large());
    }
    // Counted while it arrives: a body without Content-Length (chunked) is refused at the
    // first chunk past the limit, never buffered whole.
    match collect_at_most(&mut stream, max, declared.unwrap_or(0))
        .await
        .map_err(unreadable)?
    {
        (bytes, true) => Ok(bytes),
        (bytes, false) => {
            // A body that declared a length within the limit and sent more is read to the
            // drain's bound like one refused by its header; a chunked body (no length: it may
            // be endless) is refused at once, its sender reading a reset or the 413.
            if declared.is_some() {
                drain(&mut stream, DRAIN_MAX.saturating_sub(bytes.len())).await;
            }
            Err(too_large())
        }
    }
}

/// The most of a refused body that is read and dropped before the 413 goes out, so that a
/// client still sending it reads the answer; past it the rest is left unread.
const DRAIN_MAX: usize = 4 * 1024 * 1024;

/// Reads and drops at most `limit` more bytes of `stream` (errors end it quietly: the body
/// is refused anyway).
async fn drain(stream: &mut worker::ByteStream, limit: usize) {
    let mut left = limit;
    while let Some(Ok(chunk)) = stream.next().await {
        match left.checked_sub(chunk.len()) {
            Some(rest) => left = rest,
            None => return,
        }
    }
}

/// Collects a body stream, at most `max` bytes of it: the bytes, and whether that was all of
/// it. Stops at the first chunk past the limit, so a body far over it is never held whole.
async fn collect_at_most(
    stream: &mut worker::ByteStream,
    max: usize,
    capacity: usize,
) -> worker::Result<(Vec<u8>, bool)> {
    let mut bytes = Vec::with_capacity(capacity.min(max));
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        if bytes.len() + chunk.len() > max {
            let room = max - bytes.len();
            bytes.extend_from_slice(&chunk[..room]);
            return Ok((bytes, false));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok((bytes, true))
}

/// Reads a response body, at most `max` bytes of it (see [`collect_at_most`]): the bytes,
/// and whether that was all of it.
pub(crate) async fn read_at_most(
    resp: &mut Response,
    max: usize,
) -> worker::Result<(Vec<u8>, bool)> {
    match resp.body() {
        worker::ResponseBody::Stream(_) => collect_at_most(&mut resp.stream()?, max, 0).await,
        worker::ResponseBody::Body(bytes) => {
            Ok((bytes[..bytes.len().min(max)].to_vec(), bytes.len() <= max))
        }
        worker::ResponseBody::Empty => Ok((Vec::new(), true)),
    }
}

/// A handler's future as one of its own, polled through a vtable, for the arms of a dispatch
/// (the router's routes, the thread object's requests). The wasm engine compiles a function
/// when it first runs: with every arm inlined into the dispatching future, the first request
/// of an isolate compiled all of them to answer one (the router's was 58 KB).
pub(crate) fn boxed<'a, T>(
    handler: impl std::future::Future<Output = T> + 'a,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = T> + 'a>> {
    Box::pin(handler)
}
