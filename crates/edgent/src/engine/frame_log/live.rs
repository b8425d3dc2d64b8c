//! The chunks of replies still streaming, kept in the thread object's memory rather than in
//! the frame log.
//!
//! A reply streams as one `message_chunk` frame per network read, and a settled `message`
//! frame replaces all of them (compaction). Writing each chunk to SQLite only to delete it a
//! moment later was most of what a streamed reply cost per chunk: an `INSERT … RETURNING`, its
//! parameters and rows across the wasm boundary, and the compaction trigger's work. A flush of
//! chunks alone now takes its seqs from a block reserved in SQLite's `sqlite_sequence` (the
//! frame log's own `AUTOINCREMENT` counter, so no later logged frame can take them) and keeps
//! the frames here, where a socket resuming in this instance is replayed them.
//!
//! A reply's first block is reserved by the insert that logs its pending message (see
//! [`super::append`]), so the write is part of that flush's transaction. Reserved at the first
//! chunk instead, it was a transaction of its own, and a Durable Object holds outgoing messages
//! until its writes are durable: the reply's first chunk waited for a storage round trip. Later
//! blocks (while a long reply keeps streaming) are still reserved by the chunk that needs them.
//!
//! What that changes: a restart mid-reply loses the chunks sent before it. The reply they
//! belong to is not lost (it is stored and run again, and its settled `message` frame replaces
//! any chunks anyway), and a seq is still never reused: the reservation is durable before any
//! seq from it is sent. A flush that logs any other frame logs its chunks with it, as before.

use std::cell::RefCell;

use super::PRUNE_EVERY;
use crate::values::sql::{Sql, SqlError};

/// The first block of seqs reserved for a stream of chunks; each further block while chunks
/// keep coming doubles, up to [`RESERVE_MAX`]. Seqs of a block not used when a logged frame
/// comes are skipped (seqs only need to increase).
pub const RESERVE_FIRST: i64 = 64;
/// The largest block of seqs reserved at once.
pub const RESERVE_MAX: i64 = 256;
/// Bytes of chunk frames kept at most; past it the oldest go, and a resume from before them is
/// a reset (the client refetches the page). A reply this long streams for minutes.
pub const LIVE_CHUNKS_MAX_BYTES: usize = 1024 * 1024;

/// One thread object's chunks of replies still streaming, and the seqs reserved for them.
#[derive(Debug, Default)]
pub struct LiveChunks(RefCell<Live>);

#[derive(Debug, Default)]
struct Live {
    /// Seqs reserved and unused: `next..=last`.
    block: Option<(i64, i64)>,
    /// The size of the next reservation (0: [`RESERVE_FIRST`]).
    next_block: i64,
    /// The chunk frames of pending messages, in seq order, as sent.
    chunks: Vec<LiveChunk>,
    bytes: usize,
    /// The highest seq given to a chunk in this instance (0: none).
    newest: i64,
    /// Per message still pending, the newest seq of its chunks dropped for the memory bound
    /// (a resume from before it is a reset until that message settles).
    dropped: Vec<(String, i64)>,
    /// Frames logged since pruning was last checked (`None`: this instance has logged none;
    /// see [`LiveChunks::logged`]).
    unchecked: Option<i64>,
    /// A reservation failed: this instance logs its chunks as other frames from now on, rather
    /// than try (and fail) again for every piece of every reply.
    refused: bool,
    /// Why it failed, until the host has logged it once.
    refusal: Option<SqlError>,
}

/// What a kept chunk counts against the bound: its text and its message id.
fn kept_bytes(message_id: &str, text: &str) -> usize {
    message_id.len() + text.len()
}

#[derive(Debug)]
struct LiveChunk {
    seq: i64,
    message_id: String,
    text: String,
}

impl LiveChunks {
    /// `n` seqs in a row for chunk frames, reserving a block when the one held runs out.
    /// `Ok(None)`: nothing has been logged in this thread yet (so there is no counter to
    /// reserve from), or a reservation failed before; the caller logs the chunks instead.
    pub(super) fn take_seqs(&self, sql: &dyn Sql, n: usize) -> Result<Option<i64>, SqlError> {
        let n = i64::try_from(n).unwrap_or(i64::MAX);
        let mut live = self.0.borrow_mut();
        if live.refused {
            return Ok(None);
        }
        let free = live.block.map_or(0, |(next, last)| last - next + 1);
        if free < n {
            let size = live.next_block.max(RESERVE_FIRST).max(n);
            let rows = sql
                .exec(
                    "UPDATE sqlite_sequence SET seq = seq + ? WHERE name = 'frame_log' RETURNING seq",
                    &[size.into()],
                )
                .inspect_err(|e| {
                    live.refused = true;
                    live.refusal = Some(e.clone());
                })?;
            let Some(last) = rows.first().map(|row| row.int(0)).transpose()? else {
                return Ok(None);
            };
            live.block = Some((last - size + 1, last));
            live.next_block = (size * 2).min(RESERVE_MAX);
        }
        let Some((first, last)) = live.block else {
            return Ok(None);
        };
        live.block = (first + n <= last).then_some((first + n, last));
        Ok(Some(first))
    }

    /// Whether the flush about to log a reply's pending message should reserve the reply's
    /// first block with it (see [`super::append`]): not once reserving has failed here.
    pub(super) fn reserves_ahead(&self) -> bool {
        !self.0.borrow().refused
    }

    /// The flush that logged a reply's pending message reserved `first..=last` in its insert:
    /// the reply's first chunks take their seqs from it, with no write of their own.
    pub(super) fn reserved(&self, first: i64, last: i64) {
        let mut live = self.0.borrow_mut();
        if first <= last {
            live.block = Some((first, last));
            live.next_block = (RESERVE_FIRST * 2).min(RESERVE_MAX);
        }
    }

    /// Keeps a chunk frame sent with `seq`, for sockets that resume.
    pub(super) fn keep(&self, seq: i64, message_id: &str, text: &str) {
        let mut live = self.0.borrow_mut();
        live.bytes += kept_bytes(message_id, text);
        live.newest = live.newest.max(seq);
        live.chunks.push(LiveChunk {
            seq,
            message_id: message_id.to_owned(),
            text: text.to_owned(),
        });
        if live.bytes > LIVE_CHUNKS_MAX_BYTES {
            // The oldest go, down to three quarters of the bound (not one per chunk from now).
            let mut cut = 0;
            while live.bytes > LIVE_CHUNKS_MAX_BYTES / 4 * 3 && cut < live.chunks.len() {
                let c = &live.chunks[cut];
                live.bytes -= kept_bytes(&c.message_id, &c.text);
                cut += 1;
            }
            let gone: Vec<LiveChunk> = live.chunks.drain(..cut).collect();
            for chunk in gone {
                match live
                    .dropped
                    .iter_mut()
                    .find(|(id, _)| *id == chunk.message_id)
                {
                    Some(entry) => entry.1 = entry.1.max(chunk.seq),
                    None => live.dropped.push((chunk.message_id, chunk.seq)),
                }
            }
        }
    }

    /// `frames` frames were logged, the last with seq `last`: seqs reserved before them can no
    /// longer be used (a chunk after a logged frame must have a greater seq). Whether pruning
    /// is due: once per [`PRUNE_EVERY`] frames logged. Frames are counted, not seqs: reserved
    /// blocks leave gaps of up to 256 seqs, and a check per gap was a scan of the whole log
    /// every other turn of a long streamed reply. An instance's first count starts at `last`
    /// (its predecessors may have logged that many frames unchecked), so a young log is not
    /// scanned and an old one is checked at once.
    pub(super) fn logged(&self, last: i64, frames: usize) -> bool {
        let mut live = self.0.borrow_mut();
        live.block = None;
        let frames = i64::try_from(frames).unwrap_or(i64::MAX);
        let count = match live.unchecked {
            Some(n) => n.saturating_add(frames),
            None => last.max(frames),
        };
        let due = count >= PRUNE_EVERY;
        live.unchecked = Some(if due { 0 } else { count });
        due
    }

    /// `message_id` settled: its final `message` frame replaces its chunks (as the log's
    /// compaction does), and the next stream starts with a small block again.
    pub(super) fn settled(&self, message_id: &str) {
        let mut live = self.0.borrow_mut();
        let mut freed = 0;
        live.chunks.retain(|c| {
            let keep = c.message_id != message_id;
            if !keep {
                freed += kept_bytes(&c.message_id, &c.text);
            }
            keep
        });
        live.bytes -= freed;
        if live.chunks.is_empty() {
            // A long reply's buffer is not kept between replies.
            live.chunks = Vec::new();
        }
        live.next_block = RESERVE_FIRST;
        live.dropped.retain(|(id, _)| id != message_id);
    }

    /// Why reserving seqs failed, once (the host logs it; the chunks were logged instead).
    pub fn take_refusal(&self) -> Option<SqlError> {
        self.0.borrow_mut().refusal.take()
    }

    /// Whether seqs reserved in this instance are still to be used: until they are, the
    /// counter in storage is ahead of every seq sent, and is not the newest.
    pub(super) fn holds_block(&self) -> bool {
        self.0.borrow().block.is_some()
    }

    /// The thread's storage was erased (its frame log and seq counter with it): nothing kept
    /// or reserved still holds.
    pub fn clear(&self) {
        *self.0.borrow_mut() = Live::default();
    }

    /// The highest seq given to a chunk in this instance (0: none).
    pub(super) fn newest(&self) -> i64 {
        self.0.borrow().newest
    }

    /// The kept chunks after `after`, with their seqs (`None`: some were dropped for the memory
    /// bound, so the replay must be a reset).
    pub(super) fn after(&self, after: i64) -> Option<Vec<(i64, String)>> {
        let live = self.0.borrow();
        if live.dropped.iter().any(|(_, seq)| after < *seq) {
            return None;
        }
        Some(
            live.chunks
                .iter()
                .filter(|c| c.seq > after)
                .map(|c| (c.seq, c.text.clone()))
                .collect(),
        )
    }
}
