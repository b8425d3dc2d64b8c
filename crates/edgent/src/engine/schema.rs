//! The thread database schema, versioned and migrated inside the Durable Object on first use:
//! a new database gets [`CURRENT`] in one pass, an older one the migrations it lacks.
//!
//! Each migration is a list of single statements (Durable Object SQL runs one statement per
//! `exec` reliably; so does our host adapter). Append new versions; never edit old ones.

use crate::values::sql::{Row, Sql, SqlError, SqlValue};

mod current;
mod features;
pub use current::CURRENT;
pub use features::{feature_exec, feature_insert, is_missing_table, Feature};

// Statements the migrations and the current schema share word for word (objects never altered
// after they were created).
const INDEX_MESSAGES_BY_DEPTH_POSITION: &str =
    "CREATE INDEX messages_by_depth_position ON messages (depth, position)";
const INDEX_TOOL_CALLS_BY_STATUS: &str =
    "CREATE INDEX tool_calls_by_status ON tool_calls (status, seq)";
const INDEX_MESSAGES_BY_POSITION: &str = "CREATE INDEX messages_by_position ON messages (position)";
const INDEX_MESSAGES_VISIBLE: &str =
    "CREATE INDEX messages_visible ON messages (depth, silent, position)";
const INDEX_TOOL_CALLS_BY_SEQ: &str = "CREATE INDEX tool_calls_by_seq ON tool_calls (seq)";
const INDEX_MESSAGES_PENDING: &str =
    "CREATE INDEX messages_pending ON messages (status) WHERE status = 'pending'";
const TABLE_CONTEXT: &str = "CREATE TABLE context (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL,
            updated_at INTEGER NOT NULL
        )";
const INDEX_MESSAGES_BY_PARENT: &str =
    "CREATE INDEX messages_by_parent ON messages (parent_tool_call_id, position)
            WHERE parent_tool_call_id IS NOT NULL";
const TABLE_CHILD_THREADS: &str = "CREATE TABLE child_threads (
            tool_call_id TEXT PRIMARY KEY,
            thread_id TEXT NOT NULL,
            created_at INTEGER NOT NULL
        )";
const INDEX_TOOL_CALLS_WAKING: &str =
    "CREATE INDEX tool_calls_waking ON tool_calls (wake_at) WHERE wake_at IS NOT NULL";
const TABLE_TOOL_STEPS: &str = "CREATE TABLE tool_steps (
            call_id TEXT NOT NULL,
            name TEXT NOT NULL,
            kind TEXT NOT NULL,
            seq INTEGER NOT NULL,
            status TEXT NOT NULL,
            value TEXT,
            wake_at INTEGER,
            started_at INTEGER NOT NULL,
            finished_at INTEGER,
            PRIMARY KEY (call_id, name)
        )";
const TABLE_WEBHOOKS: &str = "CREATE TABLE webhooks (
            token TEXT PRIMARY KEY,
            call_id TEXT NOT NULL,
            name TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'open',
            deadline_at INTEGER,
            body TEXT,
            created_at INTEGER NOT NULL,
            received_at INTEGER,
            UNIQUE (call_id, name)
        )";
const TABLE_TOOL_ATTEMPTS: &str = "CREATE TABLE tool_attempts (
            seq INTEGER PRIMARY KEY,
            call_id TEXT NOT NULL,
            name TEXT NOT NULL,
            attempt INTEGER NOT NULL,
            started_at INTEGER NOT NULL,
            finished_at INTEGER,
            outcome TEXT,
            error TEXT
        )";
const INDEX_TOOL_ATTEMPTS_BY_CALL: &str =
    "CREATE INDEX tool_attempts_by_call ON tool_attempts (call_id, seq)";
const INDEX_TOOL_ATTEMPTS_BY_TOOL: &str =
    "CREATE INDEX tool_attempts_by_tool ON tool_attempts (name, started_at)";
const TABLE_TOOL_CACHE: &str = "CREATE TABLE tool_cache (
            tool TEXT NOT NULL,
            arguments TEXT NOT NULL,
            result TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            PRIMARY KEY (tool, arguments)
        )";
const TRIGGER_MESSAGES_COUNTED: &str =
    "CREATE TRIGGER messages_counted AFTER INSERT ON messages WHEN NEW.depth = 0
        BEGIN
            UPDATE thread SET message_count = message_count + 1,
                visible_count = visible_count + (NEW.silent = 0);
        END";
const TRIGGER_HISTORY_CHANGED: &str = "CREATE TRIGGER history_changed AFTER UPDATE ON messages
        WHEN OLD.depth = 0 AND OLD.status != 'pending'
        BEGIN
            UPDATE thread SET history_version = history_version + 1;
        END";
const TRIGGER_HISTORY_INSERTED_BEFORE: &str =
    "CREATE TRIGGER history_inserted_before AFTER INSERT ON messages
        WHEN NEW.depth = 0 AND EXISTS (
            SELECT 1 FROM messages WHERE depth = 0 AND position > NEW.position
        )
        BEGIN
            UPDATE thread SET history_version = history_version + 1;
        END";
// The attempt log follows the call's row: a start that counts an attempt opens one (the
// rate-limit window counts them), a result closes the latest with the call's outcome and, for
// an error, the stored result text. Retries and interruptions close theirs explicitly.
const TRIGGER_ATTEMPT_STARTED: &str =
    "CREATE TRIGGER attempt_started AFTER UPDATE OF attempts ON tool_calls
        WHEN NEW.attempts > OLD.attempts
        BEGIN
            INSERT INTO tool_attempts (call_id, name, attempt, started_at)
            VALUES (NEW.id, NEW.name, NEW.attempts, NEW.started_at);
        END";
// Every logged model attempt (sub-prompts' included) adds its tokens and cost to the thread's
// totals: the budget check reads them with the row.
const TRIGGER_USAGE_COUNTED: &str = "CREATE TRIGGER usage_counted AFTER INSERT ON model_requests
        BEGIN
            UPDATE thread SET tokens_used = tokens_used + NEW.input_tokens + NEW.output_tokens,
                cost_usd = cost_usd + NEW.cost;
        END";
const TRIGGER_ATTEMPT_FINISHED: &str =
    "CREATE TRIGGER attempt_finished AFTER UPDATE OF result_message_id ON tool_calls
        WHEN OLD.result_message_id IS NULL AND NEW.result_message_id IS NOT NULL
        BEGIN
            UPDATE tool_attempts SET finished_at = NEW.finished_at, outcome = NEW.status,
                error = CASE WHEN NEW.status = 'error'
                        THEN (SELECT content FROM messages WHERE id = NEW.result_message_id) END
            WHERE seq = (SELECT MAX(seq) FROM tool_attempts WHERE call_id = NEW.id)
              AND finished_at IS NULL;
        END";

// The frame log (see `engine::frame_log`): every frame broadcast to the thread's sockets, for
// sockets that resume. `seq` is the frame's sequence number: AUTOINCREMENT, so a seq is never
// reused even after the newest rows are pruned. `message_id` is set on `message` and
// `message_chunk` frames, `settled` on a `message` frame whose status is not pending; `bytes`
// is the body's length (kept apart so the bound is summed without reading bodies). A NULL
// body is a frame too large to keep: a replay that reaches it is a reset. The table's
// AUTOINCREMENT counter (`sqlite_sequence`) also holds the seqs reserved for streamed chunks,
// which are never rows (`engine::frame_log::LiveChunks`): a migration that rebuilds this table
// must carry the counter over, or seqs already sent would be handed out again.
const TABLE_FRAME_LOG: &str = "CREATE TABLE frame_log (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            message_id TEXT,
            settled INTEGER NOT NULL DEFAULT 0,
            bytes INTEGER NOT NULL,
            body TEXT
        )";
// Compaction: a settled message replaces its streamed chunks and its earlier `message` frames
// (in the insert itself, no statement of its own), found through `frame_log_by_message`.
const TRIGGER_FRAME_LOG_COMPACTED: &str =
    "CREATE TRIGGER frame_log_compacted AFTER INSERT ON frame_log WHEN NEW.settled = 1
        BEGIN
            DELETE FROM frame_log WHERE message_id = NEW.message_id AND seq < NEW.seq;
        END";
// v20: compaction's lookup by message. Without it, every settled message scanned the whole log
// (up to `FRAME_LOG_MAX_FRAMES` rows and their bodies: about 0.17 ms per turn on a long
// thread). Only frames about a message are indexed: `message` frames, and the chunks still
// logged as rows (a flush mixing them with other frames, a thread's first frames); a reply's
// chunks otherwise stay in memory (`engine::frame_log::LiveChunks`).
const INDEX_FRAME_LOG_BY_MESSAGE: &str =
    "CREATE INDEX frame_log_by_message ON frame_log (message_id) WHERE message_id IS NOT NULL";
// v20 also: a reply's first seqs are reserved by the insert of its pending message, with a
// row numbered past them that this trigger deletes at once (its seq stays the AUTOINCREMENT
// counter). See `engine::frame_log::append`.
const TRIGGER_FRAME_LOG_RESERVATION: &str =
    "CREATE TRIGGER frame_log_reservation AFTER INSERT ON frame_log WHEN NEW.bytes < 0
        BEGIN
            DELETE FROM frame_log WHERE seq = NEW.seq;
        END";

// Schedules: a thread's own timers that post a message or queue a call when due. The thread
// row keeps the earliest active due time (`next_schedule_at`), so the turn loop and the alarm
// learn it from the row they read anyway; these triggers keep it current on every change.
const TABLE_SCHEDULES: &str = "CREATE TABLE schedules (
            id TEXT PRIMARY KEY,
            name TEXT,
            kind TEXT NOT NULL,
            spec TEXT NOT NULL,
            next_at INTEGER,
            action TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'active',
            created_by TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            fired_count INTEGER NOT NULL DEFAULT 0,
            last_fired_at INTEGER,
            ended_at INTEGER
        )";
const INDEX_SCHEDULES_DUE: &str = "CREATE INDEX schedules_due ON schedules (status, next_at)";
const TRIGGER_SCHEDULE_ADDED: &str = "CREATE TRIGGER schedule_added AFTER INSERT ON schedules
        BEGIN
            UPDATE thread SET next_schedule_at =
                (SELECT MIN(next_at) FROM schedules WHERE status = 'active');
        END";
const TRIGGER_SCHEDULE_CHANGED: &str =
    "CREATE TRIGGER schedule_changed AFTER UPDATE OF next_at, status ON schedules
        BEGIN
            UPDATE thread SET next_schedule_at =
                (SELECT MIN(next_at) FROM schedules WHERE status = 'active');
        END";
// Ended schedules (done, cancelled) are kept for the list, the 50 that ended last: a thread
// that makes a one-time schedule every day must not grow without bound.
const TRIGGER_SCHEDULE_ENDED: &str =
    "CREATE TRIGGER schedule_ended AFTER UPDATE OF status ON schedules
        WHEN NEW.status != 'active'
        BEGIN
            DELETE FROM schedules WHERE status != 'active' AND rowid NOT IN
                (SELECT rowid FROM schedules WHERE status != 'active'
                 ORDER BY ended_at DESC, rowid DESC LIMIT 50);
        END";

// Races (`flow.race`): a webhook that is one of a race's waits names the race. The first body a
// member receives closes the race's other webhooks in the same statement, so a later POST to
// one of them is refused (409) before the workflow even runs again: one winner per race.
const TRIGGER_WEBHOOK_RACE_WON: &str =
    "CREATE TRIGGER webhook_race_won AFTER UPDATE OF status ON webhooks
        WHEN NEW.status = 'received' AND NEW.race IS NOT NULL
        BEGIN
            UPDATE webhooks SET status = 'closed'
            WHERE call_id = NEW.call_id AND race = NEW.race AND token != NEW.token
              AND status = 'open';
        END";

/// Ordered migrations: `MIGRATIONS[i]` takes the schema from version `i` to `i + 1`.
pub const MIGRATIONS: &[&[&str]] = &[
    // v1: the thread row, its messages (ordered by `position`, paged through an index) and the
    // tool calls awaiting or holding results.
    &[
        "CREATE TABLE thread (
            id TEXT PRIMARY KEY,
            agent_id TEXT NOT NULL,
            tags TEXT NOT NULL DEFAULT '[]',
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            status TEXT NOT NULL DEFAULT 'idle',
            turn_count INTEGER NOT NULL DEFAULT 0,
            current_side TEXT NOT NULL DEFAULT 'a',
            steps INTEGER NOT NULL DEFAULT 0,
            stopped_by TEXT,
            last_error TEXT
        )",
        "CREATE TABLE messages (
            seq INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            position REAL NOT NULL,
            role TEXT NOT NULL,
            content TEXT NOT NULL DEFAULT '',
            name TEXT,
            tool_calls TEXT,
            tool_call_id TEXT,
            created_at INTEGER NOT NULL,
            silent INTEGER NOT NULL DEFAULT 0,
            depth INTEGER NOT NULL DEFAULT 0,
            parent_message_id TEXT,
            status TEXT NOT NULL DEFAULT 'completed'
        )",
        INDEX_MESSAGES_BY_DEPTH_POSITION,
        "CREATE TABLE tool_calls (
            id TEXT PRIMARY KEY,
            message_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            name TEXT NOT NULL,
            arguments TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'queued',
            result_message_id TEXT,
            created_at INTEGER NOT NULL,
            started_at INTEGER,
            finished_at INTEGER
        )",
        INDEX_TOOL_CALLS_BY_STATUS,
    ],
    // v2: tools and utilities. Whether the model is owed a call is stored (not inferred from
    // the last message) so queued tools can run without one; message counters make paging
    // cost independent of history length; `position` gets its own index for MAX() and
    // inserts before a message; rich tool results keep their parts; the key/value context.
    &[
        "ALTER TABLE thread ADD COLUMN needs_model INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE thread ADD COLUMN message_count INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE thread ADD COLUMN visible_count INTEGER NOT NULL DEFAULT 0",
        "UPDATE thread SET
            needs_model = CASE WHEN status = 'running' THEN 1 ELSE 0 END,
            message_count = (SELECT COUNT(*) FROM messages WHERE depth = 0),
            visible_count = (SELECT COUNT(*) FROM messages WHERE depth = 0 AND silent = 0)",
        "ALTER TABLE messages ADD COLUMN parts TEXT",
        INDEX_MESSAGES_BY_POSITION,
        INDEX_MESSAGES_VISIBLE,
        INDEX_TOOL_CALLS_BY_SEQ,
        INDEX_MESSAGES_PENDING,
        "ALTER TABLE tool_calls ADD COLUMN origin TEXT NOT NULL DEFAULT 'model'",
        "ALTER TABLE tool_calls ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0",
        TABLE_CONTEXT,
    ],
    // v3: the agent engine. Which side wrote a message (dual-AI threads show each side the
    // other's words as user messages); a pending end of the conversation (a side's stop tool)
    // and its final answer; the parent of a child thread; the model request log, paged by
    // its primary key.
    &[
        "ALTER TABLE messages ADD COLUMN side TEXT",
        "ALTER TABLE messages ADD COLUMN parent_tool_call_id TEXT",
        INDEX_MESSAGES_BY_PARENT,
        "ALTER TABLE thread ADD COLUMN ending TEXT",
        "ALTER TABLE thread ADD COLUMN result TEXT",
        "ALTER TABLE thread ADD COLUMN parent_thread_id TEXT",
        // The running prompt's hooks ({"prompt", "names"}), refreshed when a turn loads its
        // configuration, so requests between turns apply them without reading D1.
        "ALTER TABLE thread ADD COLUMN hook_config TEXT",
        "CREATE TABLE model_requests (
            seq INTEGER PRIMARY KEY,
            message_id TEXT,
            model TEXT NOT NULL,
            provider TEXT NOT NULL,
            attempt INTEGER NOT NULL,
            status TEXT NOT NULL,
            http_status INTEGER,
            latency_ms INTEGER NOT NULL,
            ttft_ms INTEGER,
            input_tokens INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            cost REAL NOT NULL DEFAULT 0,
            error TEXT,
            depth INTEGER NOT NULL DEFAULT 0,
            created_at INTEGER NOT NULL
        )",
        // Child threads created by agent-tool calls, so a re-run call finds its child.
        TABLE_CHILD_THREADS,
    ],
    // v4: durable tools. A call's status is one of queued, running, retrying, sleeping,
    // waiting, rate_limited, success, error (`done` rows from v1-v3 mean finished). A
    // suspended call sleeps until `wake_at` (one alarm serves them all through the partial
    // index); `interruptions` counts runs cut short by a crash or eviction; `detail` says what
    // a call waits for; `bindings` are the caller's runtime context; `deadline_at` is a
    // workflow's whole-run limit. Recorded workflow steps, webhooks (looked up by their
    // unguessable token), every attempt (also the rate-limit window) and cached results.
    &[
        "ALTER TABLE tool_calls ADD COLUMN wake_at INTEGER",
        "ALTER TABLE tool_calls ADD COLUMN interruptions INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE tool_calls ADD COLUMN detail TEXT",
        "ALTER TABLE tool_calls ADD COLUMN approval TEXT",
        "ALTER TABLE tool_calls ADD COLUMN bindings TEXT",
        "ALTER TABLE tool_calls ADD COLUMN deadline_at INTEGER",
        "ALTER TABLE tool_calls ADD COLUMN first_started_at INTEGER",
        "ALTER TABLE tool_calls ADD COLUMN last_error TEXT",
        INDEX_TOOL_CALLS_WAKING,
        "ALTER TABLE thread ADD COLUMN public_url TEXT",
        TABLE_TOOL_STEPS,
        TABLE_WEBHOOKS,
        TABLE_TOOL_ATTEMPTS,
        INDEX_TOOL_ATTEMPTS_BY_CALL,
        INDEX_TOOL_ATTEMPTS_BY_TOOL,
        TABLE_TOOL_CACHE,
    ],
    // v5: fewer statements per turn. The thread row's message counters follow inserts of
    // top-level messages by trigger, so appending a message is one statement; its
    // `history_version` moves when the model's history changes other than by an append (an
    // update of a final message, an insert before others), so a driver can keep the history
    // it read and read only what was appended since (`store::ThreadCache`).
    &[
        "ALTER TABLE thread ADD COLUMN history_version INTEGER NOT NULL DEFAULT 0",
        TRIGGER_MESSAGES_COUNTED,
        TRIGGER_HISTORY_CHANGED,
        TRIGGER_HISTORY_INSERTED_BEFORE,
    ],
    // v6: the attempt log is written by triggers on the call's row (two statements fewer per
    // tool run).
    &[TRIGGER_ATTEMPT_STARTED, TRIGGER_ATTEMPT_FINISHED],
    // v7: how many child threads deep this thread is (0 for one a client created), so an
    // agent that calls itself ends at a limit instead of recursing without bound.
    &["ALTER TABLE thread ADD COLUMN nesting INTEGER NOT NULL DEFAULT 0"],
    // v8: what the thread's model calls used in all, kept by a trigger on the request log, so
    // an agent's spending budget is checked from the row each step already reads.
    &[
        "ALTER TABLE thread ADD COLUMN tokens_used INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE thread ADD COLUMN cost_usd REAL NOT NULL DEFAULT 0",
        "UPDATE thread SET
            tokens_used = (SELECT COALESCE(SUM(input_tokens + output_tokens), 0) FROM model_requests),
            cost_usd = (SELECT COALESCE(SUM(cost), 0) FROM model_requests)",
        TRIGGER_USAGE_COUNTED,
    ],
    // v9: the frame log, so a socket that reconnects gets the frames it missed (`?after=`).
    &[TABLE_FRAME_LOG, TRIGGER_FRAME_LOG_COMPACTED],
    // v10: schedules, and the thread row's earliest due time.
    &[
        "ALTER TABLE thread ADD COLUMN next_schedule_at INTEGER",
        TABLE_SCHEDULES,
        INDEX_SCHEDULES_DUE,
        TRIGGER_SCHEDULE_ADDED,
        TRIGGER_SCHEDULE_CHANGED,
        TRIGGER_SCHEDULE_ENDED,
    ],
    // v11: the MCP servers' sessions and tool lists.
    &[TABLE_MCP_SERVERS],
    // v12: compaction's summaries.
    &[TABLE_SUMMARIES],
    // v13: a reply's structured answer (its prompt's `response_format`), as JSON text.
    &["ALTER TABLE messages ADD COLUMN structured TEXT"],
    // v14: which tools each model attempt was offered, and how they were chosen when the
    // prompt's `max_offered_tools` left some out (JSON, see `request_log::ToolSelection`).
    &["ALTER TABLE model_requests ADD COLUMN tool_selection TEXT"],
    // v15: durable races. The race a webhook waits in, and the trigger that closes the
    // race's other webhooks when one receives its body.
    &[
        "ALTER TABLE webhooks ADD COLUMN race TEXT",
        TRIGGER_WEBHOOK_RACE_WON,
    ],
    // v16: workflow versions. The version of its tool's code a call's runs started on (NULL
    // until it first starts). A call started before versions existed ran on version 1, every
    // tool's version until it declares another.
    &[
        "ALTER TABLE tool_calls ADD COLUMN version INTEGER",
        "UPDATE tool_calls SET version = 1 WHERE first_started_at IS NOT NULL",
    ],
    // v17: a child thread's root, the thread a client created at the top of its chain of
    // agent tools (NULL for a thread a client created, and for children made before v17).
    &["ALTER TABLE thread ADD COLUMN root_thread_id TEXT"],
    // v18: a model's tool call owes the model another call, written with the call (one
    // statement fewer per tool step; the insert's RETURNING then reads the row as changed).
    &[TRIGGER_MODEL_CALL_OWES_MODEL],
    // v19: the agent configuration the thread last ran on, with its version stamp, so an
    // instance that starts with an empty configuration cache plans its first model request
    // with it while D1 confirms it (`runtime::config_check`).
    &[TABLE_CONFIG_COPIES],
    // v20: the frame log's compaction finds a message's frames through an index, and a
    // reply's first seqs are reserved with its pending message.
    &[INDEX_FRAME_LOG_BY_MESSAGE, TRIGGER_FRAME_LOG_RESERVATION],
];

/// The resolved configuration each of the thread's (agent, side) last ran on, as JSON, with
/// the version stamp it was read at ([`super::store::ConfigCopy`]).
const TABLE_CONFIG_COPIES: &str = "CREATE TABLE config_copies (
    agent_id TEXT NOT NULL,
    side TEXT NOT NULL,
    version INTEGER NOT NULL,
    body TEXT NOT NULL,
    kept_at INTEGER NOT NULL,
    PRIMARY KEY (agent_id, side)
)";

/// A call the model made is answered by another model call: the reply that queues it sets
/// `needs_model` in the same statement. `BEFORE`, so the insert's `RETURNING` sees it.
const TRIGGER_MODEL_CALL_OWES_MODEL: &str =
    "CREATE TRIGGER model_call_owes_model BEFORE INSERT ON tool_calls WHEN NEW.origin = 'model'
     BEGIN
         UPDATE thread SET needs_model = 1;
     END";

/// The MCP servers of the thread's prompts: their sessions and tool lists
/// ([`super::store::McpServerRow`]).
const TABLE_MCP_SERVERS: &str = "CREATE TABLE mcp_servers (
    name TEXT PRIMARY KEY,
    url TEXT NOT NULL,
    session_id TEXT,
    protocol_version TEXT,
    tools TEXT,
    listed_at INTEGER
)";

/// Compaction's summaries of older messages, each with the range of positions it covers
/// ([`super::store::Summary`]).
const TABLE_SUMMARIES: &str = "CREATE TABLE summaries (
    id INTEGER PRIMARY KEY,
    from_position REAL NOT NULL,
    up_to_position REAL NOT NULL,
    message_count INTEGER NOT NULL,
    content TEXT NOT NULL,
    tokens_replaced INTEGER NOT NULL,
    created_at INTEGER NOT NULL
)";

/// The schema version this build expects.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Whether this database was ever migrated (a read-only check).
pub fn exists(sql: &dyn Sql) -> Result<bool, SqlError> {
    Ok(!sql
        .exec(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'edgent_meta'",
            &[],
        )?
        .is_empty())
}

/// Brings the database to [`SCHEMA_VERSION`], applying only the missing migrations.
///
/// Returns the version found before migrating (0 for a new database). A database newer
/// than this build is an error rather than something to guess about.
pub fn migrate(sql: &dyn Sql) -> Result<i64, SqlError> {
    sql.exec(
        "CREATE TABLE IF NOT EXISTS edgent_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)",
        &[],
    )?;
    let found = sql
        .exec(
            "SELECT value FROM edgent_meta WHERE key = 'schema_version'",
            &[],
        )?
        .first()
        .map(|row| row.int(0))
        .transpose()?
        .unwrap_or(0);
    if found > SCHEMA_VERSION {
        return Err(SqlError(format!(
            "database schema v{found} is newer than this build (v{SCHEMA_VERSION})"
        )));
    }
    if found == 0 {
        // One transaction (and one crossing to storage): a new thread's schema is whole or
        // absent.
        apply_atomically(sql, CURRENT, SCHEMA_VERSION)?;
    } else {
        replay(sql, found)?;
    }
    Ok(found)
}

/// Runs `statements` and records `version` as one transaction: a statement that fails leaves
/// the database as it was, on its old version (the next open tries again). The statements go
/// as one script (one `sql.exec`) instead of one crossing to storage each: about 4% less of
/// workerd's CPU per new thread (docs/decisions/2026-11-24-new-thread-in-one-request-and-fewer-statements.md).
fn apply_atomically(sql: &dyn Sql, statements: &[&str], version: i64) -> Result<(), SqlError> {
    let script = statements.join(";\n");
    let version = [SqlValue::Integer(version)];
    sql.batch(&[(script.as_str(), &[]), (SET_VERSION, &version)])?;
    Ok(())
}

/// Applies the migrations after version `from` one by one (an existing thread's upgrade).
pub fn replay(sql: &dyn Sql, from: i64) -> Result<(), SqlError> {
    for (version, statements) in MIGRATIONS.iter().enumerate().skip(from as usize) {
        // Each version whole or not at all: a failure leaves the thread on the one before.
        apply_atomically(sql, statements, version as i64 + 1)?;
    }
    Ok(())
}

const SET_VERSION: &str = "INSERT INTO edgent_meta (key, value) VALUES ('schema_version', ?)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value";
