-- The thread index: one row per thread, kept current by the thread itself in the background
-- (a best-effort copy; the thread's Durable Object stays the truth). `GET /api/threads` pages
-- it newest first by `created_at`, then `thread_id` (a key that never changes, so a cursor
-- neither skips nor repeats a thread updated while a client pages). Each filter (agent,
-- status, parent) has an index that ends with that order; a tag filter walks `thread_tags`,
-- whose primary key is (tag, created_at, thread_id).
--
-- The same statements are `edgent::api::thread_index::SCHEMA` (a host test keeps them equal).

CREATE TABLE thread_index (
    thread_id TEXT PRIMARY KEY,
    agent_id TEXT NOT NULL,
    status TEXT NOT NULL,
    title TEXT,
    tags TEXT NOT NULL DEFAULT '[]',
    parent TEXT,
    turn_count INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);

CREATE INDEX thread_index_newest ON thread_index (created_at, thread_id);

CREATE INDEX thread_index_by_agent ON thread_index (agent_id, created_at, thread_id);

CREATE INDEX thread_index_by_status ON thread_index (status, created_at, thread_id);

CREATE INDEX thread_index_by_parent ON thread_index (parent, created_at, thread_id);

CREATE TABLE thread_tags (
    tag TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    thread_id TEXT NOT NULL,
    PRIMARY KEY (tag, created_at, thread_id)
) WITHOUT ROWID;

CREATE INDEX thread_tags_by_thread ON thread_tags (thread_id);
