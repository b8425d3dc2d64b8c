//! Feature tables: the tables (with their indexes and triggers) that only some threads use,
//! created by a thread's first write that needs them instead of with every new thread.
//!
//! Why: a table costs every object that has it, whether or not it holds a row. SQLite parses
//! each schema object when the database opens and keeps it in memory, so these tables cost a
//! new thread's creation CPU (14% of it) and each live object about 140 KiB (a Miniflare A/B,
//! 150 threads of two text turns with their sockets open: 1,062-1,069 against 916-932 KiB per
//! thread, 2026-12-02).
//! Most threads never schedule, run a workflow step, cache a tool result, call an agent tool,
//! keep tool storage, talk to an MCP server or compact.
//!
//! The rules that keep this sound, for every statement on a feature's table (the store's
//! `feature_exec` and `feature_insert`):
//! - a read, an update or a delete of a table that is not there finds nothing (what it would
//!   find in an empty table);
//! - an insert that finds no table creates the feature's tables and runs again.
//!
//! A thread created before this change has every table (its migrations made them), and a
//! thread created at [`super::SCHEMA_VERSION`] since then has only [`super::CURRENT`] and the
//! features it used, so a later migration that changes a feature table must run only where
//! the table exists, and must change the statements below the same way (a host test holds
//! [`super::CURRENT`] plus every feature to the migrations' result).

use super::*;

/// The optional parts of a thread's schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feature {
    /// Tool storage (`context`, the flow's key-value store).
    Context,
    /// The child threads of agent tools (`child_threads`).
    ChildThreads,
    /// Durable tools' steps and webhooks (`tool_steps`, `webhooks` and its race trigger): read
    /// together by one statement, so they come and go together.
    Durable,
    /// Cached tool results (`tool_cache`).
    ToolCache,
    /// The thread's schedules (`schedules`, its index and triggers).
    Schedules,
    /// MCP servers' sessions and tool lists (`mcp_servers`).
    McpServers,
    /// Compaction's summaries (`summaries`).
    Summaries,
}

impl Feature {
    /// Every feature, in the order their statements are listed.
    pub const ALL: [Feature; 7] = [
        Feature::Context,
        Feature::ChildThreads,
        Feature::Durable,
        Feature::ToolCache,
        Feature::Schedules,
        Feature::McpServers,
        Feature::Summaries,
    ];

    /// The statements that create the feature's tables, indexes and triggers as they are at
    /// [`SCHEMA_VERSION`].
    pub fn statements(self) -> &'static [&'static str] {
        match self {
            Feature::Context => &[TABLE_CONTEXT],
            Feature::ChildThreads => &[TABLE_CHILD_THREADS],
            Feature::Durable => &[
                TABLE_TOOL_STEPS,
                TABLE_WEBHOOKS_NOW,
                TRIGGER_WEBHOOK_RACE_WON,
            ],
            Feature::ToolCache => &[TABLE_TOOL_CACHE],
            Feature::Schedules => &[
                TABLE_SCHEDULES,
                INDEX_SCHEDULES_DUE,
                TRIGGER_SCHEDULE_ADDED,
                TRIGGER_SCHEDULE_CHANGED,
                TRIGGER_SCHEDULE_ENDED,
            ],
            Feature::McpServers => &[TABLE_MCP_SERVERS],
            Feature::Summaries => &[TABLE_SUMMARIES],
        }
    }

    /// The statements as one script that leaves what exists alone (`IF NOT EXISTS`): one
    /// crossing to storage, and safe however far an earlier attempt got.
    pub fn script(self) -> String {
        self.statements()
            .iter()
            .map(|s| {
                s.replacen("CREATE TABLE ", "CREATE TABLE IF NOT EXISTS ", 1)
                    .replacen("CREATE INDEX ", "CREATE INDEX IF NOT EXISTS ", 1)
                    .replacen("CREATE TRIGGER ", "CREATE TRIGGER IF NOT EXISTS ", 1)
            })
            .collect::<Vec<_>>()
            .join(";\n")
    }
}

/// Whether `error` is SQLite's "no such table" (the feature's tables were never created).
pub fn is_missing_table(error: &SqlError) -> bool {
    error.0.contains("no such table")
}

/// Runs a read, an update or a delete on a feature's table: a table that is not there has
/// nothing to read, update or delete.
pub fn feature_exec(
    sql: &dyn Sql,
    statement: &str,
    params: &[SqlValue],
) -> Result<Vec<Row>, SqlError> {
    match sql.exec(statement, params) {
        Err(e) if is_missing_table(&e) => Ok(Vec::new()),
        other => other,
    }
}

/// Runs an insert (or upsert) into `feature`'s tables, creating them first when this thread
/// has none yet. The statement is tried first: once the tables exist, a write costs no more
/// than it did.
pub fn feature_insert(
    sql: &dyn Sql,
    feature: Feature,
    statement: &str,
    params: &[SqlValue],
) -> Result<Vec<Row>, SqlError> {
    match sql.exec(statement, params) {
        Err(e) if is_missing_table(&e) => {
            sql.exec(&feature.script(), &[])?;
            sql.exec(statement, params)
        }
        other => other,
    }
}

/// `webhooks` as it is now (v1's table with v15's `race`).
const TABLE_WEBHOOKS_NOW: &str = "CREATE TABLE webhooks (
            token TEXT PRIMARY KEY,
            call_id TEXT NOT NULL,
            name TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'open',
            deadline_at INTEGER,
            body TEXT,
            created_at INTEGER NOT NULL,
            received_at INTEGER,
            race TEXT,
            UNIQUE (call_id, name)
        )";
