//! `RateLimiter`: one small SQLite-backed Durable Object per tool name, counting that tool's
//! calls across every thread of the deployment in a sliding 60-second window. A thread asks
//! it before each new attempt of a tool limited `per_deployment`.

// `#[durable_object]` generates undocumented public glue.
#![allow(missing_docs)]

use serde::{Deserialize, Serialize};
use worker::{
    durable_object, DurableObject, Env, Method, Request, RequestInit, Response, Result, State,
};

use super::clock::now;
use super::do_sql::DoSql;
use edgent::engine::durable::{Window, WINDOW_MS};
use edgent::values::sql::Sql;

#[derive(Serialize, Deserialize)]
struct Acquire {
    per_minute: u32,
}

#[derive(Serialize, Deserialize)]
struct Answer {
    used: u32,
    frees_at: i64,
}

/// Counts one tool's calls for the whole deployment.
#[durable_object]
#[allow(unreachable_pub)]
pub struct RateLimiter {
    state: State,
}

impl DurableObject for RateLimiter {
    fn new(state: State, _env: Env) -> Self {
        RateLimiter { state }
    }

    async fn fetch(&self, mut req: Request) -> Result<Response> {
        let ask: Acquire = req.json().await?;
        let sql = DoSql::of(&self.state);
        let now = now();
        let run = |q: &str, p: &[edgent::values::sql::SqlValue]| {
            sql.exec(q, p)
                .map_err(|e| worker::Error::RustError(e.to_string()))
        };
        run("CREATE TABLE IF NOT EXISTS hits (at INTEGER NOT NULL)", &[])?;
        run("CREATE INDEX IF NOT EXISTS hits_at ON hits (at)", &[])?;
        run(
            "DELETE FROM hits WHERE at <= ?",
            &[(now - WINDOW_MS).into()],
        )?;
        let rows = run("SELECT COUNT(*), MIN(at) FROM hits", &[])?;
        let (used, oldest) = rows
            .first()
            .map(|r| (r.int(0).unwrap_or(0), r.opt_int(1).ok().flatten()))
            .unwrap_or((0, None));
        let used = u32::try_from(used).unwrap_or(u32::MAX);
        if used < ask.per_minute {
            // Under the limit: this call takes a slot.
            run("INSERT INTO hits (at) VALUES (?)", &[now.into()])?;
        }
        Response::from_json(&Answer {
            used,
            frees_at: oldest.map_or(now + WINDOW_MS, |o| o + WINDOW_MS),
        })
    }
}

/// Asks the deployment's counter for `tool` for a slot: the window as it was before this call
/// (a slot was taken when `used < per_minute`).
pub(crate) async fn acquire(env: &Env, tool: &str, per_minute: u32) -> Result<Window> {
    let stub = env
        .durable_object("RATE_LIMITER")?
        .id_from_name(tool)?
        .get_stub()?;
    let body = serde_json::to_string(&Acquire { per_minute })?;
    let mut init = RequestInit::new();
    init.with_method(Method::Post).with_body(Some(body.into()));
    let req = super::http::outgoing("https://rate-limiter.internal/acquire", &init)?;
    let answer: Answer = stub.fetch_with_request(req).await?.json().await?;
    Ok(Window {
        used: answer.used,
        frees_at: answer.frees_at,
    })
}

/// The deployment window of `tool` without taking a slot (`GET /api/tools`).
pub(crate) async fn peek(env: &Env, tool: &str) -> Result<Window> {
    acquire(env, tool, 0).await
}
