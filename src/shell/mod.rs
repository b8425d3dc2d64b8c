//! The Worker shell: adapters between Cloudflare's runtime and the pure core. Nothing here
//! decides anything the core could decide; it routes, stores, sends and schedules.

mod admin;
mod config;
mod do_sql;
mod host;
mod http;
mod model;
mod policy;
mod rate_limiter;
mod router;
mod thread_object;

use worker::{event, Context, Env, Request, Response, Result};

#[event(fetch)]
async fn fetch(req: Request, env: Env, _ctx: Context) -> Result<Response> {
    router::handle(req, env).await
}
