//! The thread's frame log: every frame broadcast to the thread's sockets gets the thread's next
//! sequence number (`seq`) and is written here before it is sent, so a socket that reconnects
//! with `?after=<seq>` (or sends the rpc `resume`) is sent every frame it missed, in order.
//! The chunks of a reply still streaming are the exception: a flush of chunks alone is kept in
//! the thread object's memory ([`LiveChunks`], which says why and what it changes).
//!
//! Pure over [`Sql`] and the object's [`LiveChunks`], so every host numbers and logs frames the
//! same way: a host sends the texts [`append`] returns and never serialises or numbers a frame
//! itself.
//!
//! What it costs per flush of frames: one multi-row `INSERT … RETURNING seq` (up to
//! [`ROWS_PER_INSERT`] frames each, within the Durable Object's 100 bound parameters per
//! statement; the seqs come back from the insert, so nothing is read to number frames), or for
//! a flush of chunks nothing but, now and then, one `UPDATE` reserving a block of seqs. The
//! first block of a reply is reserved by the flush that logs its pending message, in the same
//! transaction, so its first chunks go out without waiting for a write.
//! Compaction runs inside that insert (the `frame_log_compacted` trigger: a settled `message`
//! frame drops its chunks and earlier `message` frames). Pruning to the bound
//! ([`FRAME_LOG_MAX_FRAMES`], [`FRAME_LOG_MAX_BYTES`]) is checked once per [`PRUNE_EVERY`]
//! frames logged (an object instance starts counting at the newest seq, which its
//! predecessors' unchecked frames cannot exceed) and after a flush of [`PRUNE_AFTER_BYTES`] or
//! more: one read (a scan of the log), plus one transaction when there is something to prune.

mod live;

pub use live::{LiveChunks, LIVE_CHUNKS_MAX_BYTES, RESERVE_FIRST, RESERVE_MAX};

use crate::values::limits::{FRAME_LOG_MAX_BYTES, FRAME_LOG_MAX_FRAMES, SQLITE_MAX_LENGTH};
use crate::values::message::{MessageStatus, Role};
use crate::values::protocol::ServerFrame;
use crate::values::sql::{Sql, SqlError, SqlValue};

/// Frames per `INSERT`: four bound parameters each, one more for a reservation, and a Durable
/// Object statement takes at most 100.
pub const ROWS_PER_INSERT: usize = 24;
/// Pruning is checked once per this many frames an instance logs (so the log holds at most
/// this many frames over [`FRAME_LOG_MAX_FRAMES`] between checks).
pub const PRUNE_EVERY: i64 = 256;
/// Pruning is also checked after a flush of this many bytes or more (large messages), so the
/// log holds at most about [`PRUNE_EVERY`] times this over [`FRAME_LOG_MAX_BYTES`].
pub const PRUNE_AFTER_BYTES: usize = 16 * 1024;
/// Largest frame kept whole: a row must stay under the Durable Object's 2 MB. A larger frame
/// is still numbered and sent, but kept without its body: a replay that reaches it is a reset
/// (the client refetches pages).
pub const MAX_KEPT_FRAME_BYTES: usize = SQLITE_MAX_LENGTH - 64 * 1024;

/// The floor's key in `edgent_meta`: the highest seq pruned (0: none).
const FLOOR_KEY: &str = "frame_floor";

/// What [`append`] produced: the text of every frame in order (with `"seq"` when it was
/// logged), and the error that kept frames from being logged, if any.
#[derive(Debug)]
pub struct Appended {
    /// The frames as sent on the wire, in the order given.
    pub texts: Vec<String>,
    /// Why some frames (those whose text has no `seq`) were not logged.
    pub error: Option<SqlError>,
}

/// Numbers `frames` with the thread's next seqs, logs them (compacting and pruning as above)
/// and returns their texts, serialised once, with `"seq":n` last. A flush of chunk frames
/// alone is kept in `live` instead of the log. A storage failure leaves the frames it hit
/// unnumbered: they are still returned (and so sent) without `seq`, and the error says why.
pub fn append(live: &LiveChunks, sql: &dyn Sql, frames: &[ServerFrame]) -> Appended {
    if let Some(kept) = keep_chunks(live, sql, frames) {
        return kept;
    }
    let mut texts = Vec::with_capacity(frames.len());
    let (mut logged, mut last, mut bytes) = (0, 0, 0usize);
    let mut error = None;
    // A reply about to stream: its first block of seqs is reserved by this flush's last insert.
    let ahead = frames.iter().any(opens_a_reply) && live.reserves_ahead();
    let batches = frames.len().div_ceil(ROWS_PER_INSERT);
    let mut reserved = None;
    for (i, batch) in frames.chunks(ROWS_PER_INSERT).enumerate() {
        let bodies: Vec<String> = batch.iter().map(ServerFrame::to_json).collect();
        if error.is_some() {
            texts.extend(bodies);
            continue;
        }
        bytes += bodies.iter().map(String::len).sum::<usize>();
        let reserve = (ahead && i + 1 == batches).then_some(RESERVE_FIRST);
        match insert(sql, batch, bodies, reserve) {
            Ok((numbered, end)) => {
                logged += numbered.len();
                last = numbered.last().map_or(last, |(seq, _)| *seq);
                texts.extend(numbered.into_iter().map(|(seq, body)| with_seq(body, seq)));
                reserved = end;
            }
            Err((e, bodies)) => {
                texts.extend(bodies);
                error = Some(e);
            }
        }
    }
    for frame in frames {
        if let ServerFrame::Message { message } = frame {
            if message.status != MessageStatus::Pending {
                live.settled(&message.id);
            }
        }
    }
    if logged > 0 {
        let due = live.logged(last, logged);
        if let Some(end) = reserved {
            live.reserved(last + 1, end);
        }
        if error.is_none() && (due || bytes >= PRUNE_AFTER_BYTES) {
            error = prune(sql).err();
        }
    }
    Appended { texts, error }
}

/// A reply's pending message: its chunks come next, in the flushes after this one.
fn opens_a_reply(frame: &ServerFrame) -> bool {
    matches!(frame, ServerFrame::Message { message }
        if message.status == MessageStatus::Pending && message.role == Role::Assistant)
}

/// A flush of chunk frames alone, numbered from a reserved block and kept in `live`; `None`
/// when the flush holds any other frame, or no block could be reserved (the frames are logged
/// as usual then, and a failure to log them is reported there).
fn keep_chunks(live: &LiveChunks, sql: &dyn Sql, frames: &[ServerFrame]) -> Option<Appended> {
    let ids: Vec<&str> = frames
        .iter()
        .map(|frame| match frame {
            ServerFrame::MessageChunk { message_id, .. } => Some(message_id.as_str()),
            _ => None,
        })
        .collect::<Option<_>>()?;
    let first = live.take_seqs(sql, frames.len()).ok().flatten()?;
    let texts = frames
        .iter()
        .zip(ids)
        .zip(first..)
        .map(|((frame, message_id), seq)| {
            let text = with_seq(frame.to_json(), seq);
            live.keep(seq, message_id, &text);
            text
        })
        .collect();
    Some(Appended { texts, error: None })
}

/// Why an insert failed, and the bodies it was given (sent without `seq`).
type Unlogged = (SqlError, Vec<String>);

/// What an insert logged: each body with its seq, in order, and the last seq it reserved for a
/// reply's chunks, if it reserved any.
type Logged = (Vec<(i64, String)>, Option<i64>);

/// One `INSERT` of up to [`ROWS_PER_INSERT`] frames: the bodies with their seqs, in order (or
/// the error and the bodies back). With `reserve`, the same insert also reserves that many seqs
/// after its last frame for a reply's chunks. Bodies are moved into the bound parameters and
/// taken back out, never copied.
fn insert(
    sql: &dyn Sql,
    frames: &[ServerFrame],
    bodies: Vec<String>,
    reserve: Option<i64>,
) -> Result<Logged, Unlogged> {
    let mut statement =
        String::from("INSERT INTO frame_log (seq, message_id, settled, bytes, body) VALUES ");
    let mut params = Vec::with_capacity(frames.len() * 4 + 1);
    // Bodies too large to keep: bound as NULL, held here for the answer.
    let mut held: Vec<Option<String>> = Vec::with_capacity(frames.len());
    for (i, (frame, body)) in frames.iter().zip(bodies).enumerate() {
        statement.push_str(if i == 0 {
            "(NULL, ?, ?, ?, ?)"
        } else {
            ", (NULL, ?, ?, ?, ?)"
        });
        let (message_id, settled) = match frame {
            ServerFrame::Message { message } => (
                Some(message.id.clone()),
                message.status != MessageStatus::Pending,
            ),
            ServerFrame::MessageChunk { message_id, .. } => (Some(message_id.clone()), false),
            _ => (None, false),
        };
        params.push(SqlValue::from(message_id));
        params.push(SqlValue::from(settled));
        if body.len() <= MAX_KEPT_FRAME_BYTES {
            params.push(SqlValue::Integer(body.len() as i64));
            params.push(SqlValue::Text(body));
            held.push(None);
        } else {
            params.push(SqlValue::Integer(0));
            params.push(SqlValue::Null);
            held.push(Some(body));
        }
    }
    if let Some(size) = reserve {
        // The reservation: a row numbered `size` past this insert's last frame, which the
        // `frame_log_reservation` trigger deletes at once. AUTOINCREMENT keeps its seq as the
        // counter, so the seqs between are this flush's to give to chunks, durable with it.
        // (A trigger cannot move the counter itself: the insert writes it back at its end.)
        statement.push_str(
            ", (COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'frame_log'), 0) + ?, \
             NULL, 0, -1, NULL)",
        );
        let past = i64::try_from(frames.len()).unwrap_or(i64::MAX);
        params.push(SqlValue::Integer(past.saturating_add(size)));
    }
    statement.push_str(" RETURNING seq");
    let answer = sql.exec(&statement, &params);
    let bodies: Vec<String> = held
        .into_iter()
        .enumerate()
        .map(|(i, held)| match (held, params.get_mut(i * 4 + 3)) {
            (Some(body), _) => body,
            (None, Some(SqlValue::Text(body))) => std::mem::take(body),
            (None, _) => String::new(),
        })
        .collect();
    let rows = match answer {
        Ok(rows) => rows,
        Err(e) => return Err((e, bodies)),
    };
    let mut seqs = Vec::with_capacity(rows.len());
    for row in &rows {
        match row.int(0) {
            Ok(seq) => seqs.push(seq),
            Err(e) => return Err((e, bodies)),
        }
    }
    let expected = bodies.len() + usize::from(reserve.is_some());
    if seqs.len() != expected {
        let why = format!("{expected} rows logged, {} seqs returned", seqs.len());
        return Err((SqlError(why), bodies));
    }
    // RETURNING's order is not promised; AUTOINCREMENT numbers the rows in VALUES order (the
    // reservation's row, last, has the highest).
    seqs.sort_unstable();
    let end = if reserve.is_some() { seqs.pop() } else { None };
    Ok((seqs.into_iter().zip(bodies).collect(), end))
}

/// `body` (a frame's JSON object) with `"seq":n` as its last key.
pub fn with_seq(mut body: String, seq: i64) -> String {
    if body.ends_with('}') {
        body.pop();
        let sep = if body.ends_with('{') { "" } else { "," };
        body.push_str(&format!("{sep}\"seq\":{seq}}}"));
    }
    body
}

/// Drops the oldest frames past the bound and raises the floor to the highest one dropped.
fn prune(sql: &dyn Sql) -> Result<(), SqlError> {
    let cut = sql
        .exec(
            "SELECT MAX(seq) FROM (
                SELECT seq, ROW_NUMBER() OVER newest AS n, SUM(bytes) OVER newest AS total
                FROM frame_log WINDOW newest AS (ORDER BY seq DESC)
            ) WHERE n > ? OR total > ?",
            &[FRAME_LOG_MAX_FRAMES.into(), FRAME_LOG_MAX_BYTES.into()],
        )?
        .first()
        .map(|row| row.opt_int(0))
        .transpose()?
        .flatten();
    let Some(cut) = cut else {
        return Ok(());
    };
    let floor = [SqlValue::from(FLOOR_KEY), SqlValue::Integer(cut)];
    let cut = [SqlValue::Integer(cut)];
    sql.batch(&[
        ("DELETE FROM frame_log WHERE seq <= ?", &cut),
        (
            "INSERT INTO edgent_meta (key, value) VALUES (?, ?)
             ON CONFLICT (key) DO UPDATE SET value = MAX(value, excluded.value)",
            &floor,
        ),
    ])?;
    Ok(())
}

/// The newest seq in the log (0: none yet) and the floor (the highest seq pruned, 0: none).
pub fn newest_and_floor(sql: &dyn Sql) -> Result<(i64, i64), SqlError> {
    let (newest, _, floor) = seqs_now(sql)?;
    Ok((newest, floor))
}

/// The newest seq in the log, the log's counter (the last seq handed out or reserved) and the
/// floor, in one read.
fn seqs_now(sql: &dyn Sql) -> Result<(i64, i64, i64), SqlError> {
    let rows = sql.exec(
        "SELECT (SELECT MAX(seq) FROM frame_log),
                (SELECT seq FROM sqlite_sequence WHERE name = 'frame_log'),
                (SELECT value FROM edgent_meta WHERE key = ?)",
        &[FLOOR_KEY.into()],
    )?;
    let Some(row) = rows.first() else {
        return Ok((0, 0, 0));
    };
    let floor = row.opt_int(2)?.unwrap_or(0);
    // The newest frame is never pruned or compacted away; the floor covers a log emptied by
    // some future rule all the same.
    let newest = row.opt_int(0)?.unwrap_or(0).max(floor);
    Ok((newest, row.opt_int(1)?.unwrap_or(0), floor))
}

const RUNNING_STATUS: &str = "{\"type\":\"status\",\"state\":\"running\"%";
const ANY_STATUS: &str = "{\"type\":\"status\",%";

/// The seq of the frame that began the answer in progress: the first `status` frame saying
/// `running` since the last one that was not (`None` when the log holds none). A resumed AI
/// SDK answer replays from there.
pub fn answer_start(sql: &dyn Sql) -> Result<Option<i64>, SqlError> {
    // The serialiser writes a status frame's fields in this order (`"type"` first); the log is
    // bounded, so the scan is too. Not the newest `running`: a message sent while a turn runs
    // says `running` again, mid-answer.
    let rows = sql.exec(
        "SELECT MIN(seq) FROM frame_log
         WHERE message_id IS NULL AND body LIKE ?1
           AND seq > (SELECT COALESCE(MAX(seq), 0) FROM frame_log
                      WHERE message_id IS NULL AND body LIKE ?2 AND body NOT LIKE ?1)",
        &[RUNNING_STATUS.into(), ANY_STATUS.into()],
    )?;
    Ok(rows.first().map(|r| r.opt_int(0)).transpose()?.flatten())
}

/// What a socket resuming after a seq is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replay {
    /// The newest seq in the log now (what `hello` carries; live frames follow it).
    pub newest: i64,
    /// The logged frames after the asked seq, in order, as sent the first time.
    pub frames: Vec<String>,
    /// The asked seq is older than the log (or the frames after it were too large to keep):
    /// send `reset` instead of frames.
    pub reset: bool,
}

/// The frames to send a socket that saw everything up to `after` (`None`: a fresh socket, sent
/// nothing): the logged frames after it and the chunks `live` keeps, in seq order. An `after`
/// at or past the newest seq gets nothing; one below the floor (or before chunks dropped for
/// the memory bound) a reset.
pub fn replay(live: &LiveChunks, sql: &dyn Sql, after: Option<i64>) -> Result<Replay, SqlError> {
    let (logged, counter, floor) = seqs_now(sql)?;
    // The counter is ahead of the log by chunks a previous instance sent (their seqs are not
    // in the log but were seen), and by seqs this instance reserved and has not sent yet: only
    // the former count as sent.
    let counted = if live.holds_block() { 0 } else { counter };
    let nothing = Replay {
        newest: logged.max(live.newest()).max(counted),
        frames: Vec::new(),
        reset: false,
    };
    let Some(after) = after.filter(|after| *after < nothing.newest) else {
        return Ok(nothing);
    };
    let reset = Replay {
        reset: true,
        ..nothing.clone()
    };
    let Some(chunks) = live.after(after).filter(|_| after >= floor) else {
        return Ok(reset);
    };
    let rows = sql.exec(
        "SELECT seq, body FROM frame_log WHERE seq > ? ORDER BY seq",
        &[after.into()],
    )?;
    let mut frames = Vec::with_capacity(rows.len() + chunks.len());
    for row in rows {
        match row.opt_text(1)? {
            Some(body) => frames.push((row.int(0)?, body)),
            None => return Ok(reset),
        }
    }
    let frames = merge_by_seq(frames, chunks);
    Ok(Replay { frames, ..nothing })
}

/// Logged rows (bodies without `seq`) and kept chunks (texts with it) as one list of texts in
/// seq order.
fn merge_by_seq(rows: Vec<(i64, String)>, chunks: Vec<(i64, String)>) -> Vec<String> {
    let mut out = Vec::with_capacity(rows.len() + chunks.len());
    let mut chunks = chunks.into_iter().peekable();
    for (seq, body) in rows {
        while let Some((_, text)) = chunks.next_if(|(chunk, _)| *chunk < seq) {
            out.push(text);
        }
        out.push(with_seq(body, seq));
    }
    out.extend(chunks.map(|(_, text)| text));
    out
}
