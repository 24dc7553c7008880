//! Every SQL statement the extension runs, and nothing else.
//!
//! Each statement is schema-qualified, takes its values as `$n` parameters, filters on the map
//! it is given and touches no other map (every key starts with the map, so the tables can be
//! distributed by map). Each is prepared once per backend and kept (see `spi`). The functions
//! run with `search_path = pg_catalog, pg_temp`, which is why `pg_catalog` functions and
//! operators need no qualification here.
//!
//! Storage (see `sql/bootstrap.sql`):
//! - `map_state`: one row per map, holding the next sequence and the current chunk's extent. It
//!   is the map's lock: every write takes it (`FOR UPDATE SKIP LOCKED`, never waiting) and every
//!   append advances it, so under REPEATABLE READ and SERIALIZABLE PostgreSQL itself refuses
//!   (40001) a writer whose snapshot predates another writer's commit.
//! - `current_record`: the records of each map's current chunk, one row each.
//! - `archived_chunk`: one immutable row per full chunk, its payloads as one `jsonb[]`.

use pgrx::pg_sys;

use crate::chunking::CurrentChunk;
use crate::jsonb::Jsonb;
use crate::pg::boundary::PgError;
use crate::spi::{
    Access, CallerMemory, Param, Row, Session, Statement, BOOL, INT4, INT8, JSONB, JSONB_ARRAY,
    TEXT, TID,
};
use crate::xact;

/// The state row of a map, as the holder of its lock read it.
#[derive(Debug, Clone)]
pub struct MapState {
    /// The row version read (and locked): later statements of the same call address it directly.
    pub tid: pg_sys::ItemPointerData,
    /// Size given to chunks started from now on.
    pub chunk_size: i32,
    pub current: CurrentChunk,
    /// Token of the newest archived chunk, `None` before the first rollover.
    pub newest_archived_token: Option<String>,
    /// The map's notification channel while its notifications are on.
    pub announce_on: Option<String>,
}

/// What an append wrote: the record's sequence, the state row's new version, and the map's
/// notification channel while its notifications are on.
#[derive(Debug, Clone)]
pub struct Appended {
    pub seq: i64,
    pub tid: pg_sys::ItemPointerData,
    pub announce_on: Option<String>,
}

fn tid_of(row: &Row<'_>, column: i32) -> pg_sys::ItemPointerData {
    row.tid(column).unwrap_or_default()
}

const START: Statement = Statement {
    name: "start",
    sql: "INSERT INTO chunked_map.map_state AS s
              (map, chunk_size, current_first_seq, current_chunk_size, next_seq)
          VALUES ($1, $2, 1, $2, 1)
          ON CONFLICT (map) DO NOTHING
          RETURNING true",
    params: &[TEXT, INT4],
    access: Access::Write,
};

/// Creates the map's state row; `false` when a row for the map already exists. Under REPEATABLE
/// READ, PostgreSQL raises 40001 itself when that row was committed after the snapshot.
/// (An uncommitted change to an existing row would make it wait: callers look first.)
pub fn start(session: &Session, map: &str, chunk_size: i32) -> bool {
    !session
        .run(&START, &[Param::of(map), Param::of(chunk_size)])
        .is_empty()
}

/// The one-statement append: takes the map's lock without waiting (`SKIP LOCKED`: a row another
/// transaction holds is simply not found), advances the state by one record if the current chunk
/// has room (by records and by bytes; an empty chunk takes any record), and inserts the record;
/// returns its sequence. No row when the map is absent, held by another transaction, its current
/// chunk is full, or its appends are announced (which the slow path handles, since it reports
/// that): the caller then takes the slow path, which also covers a race: under READ COMMITTED, a
/// state row changed by a transaction that committed after the statement's snapshot is locked in
/// its newest version, which that snapshot cannot update (no row; the slow path's next statement
/// sees it). The row is found once, through the index, and updated by its address. The record's
/// INSERT is the main statement, so that nothing else is returned: what makes this the cheapest
/// form PostgreSQL offers for "lock, advance, insert".
const APPEND: Statement = Statement {
    name: "append",
    sql: "WITH advanced AS (
              UPDATE chunked_map.map_state AS s
              SET next_seq = s.next_seq + 1, current_bytes = s.current_bytes + $3
              WHERE s.ctid = (SELECT l.ctid FROM chunked_map.map_state AS l
                              WHERE l.map = $1 FOR UPDATE SKIP LOCKED)
                AND s.map = $1
                AND NOT s.notify
                AND s.next_seq < s.current_first_seq + s.current_chunk_size
                AND (s.current_bytes + $3 <= $4 OR s.next_seq = s.current_first_seq)
              RETURNING s.next_seq - 1 AS seq
          )
          INSERT INTO chunked_map.current_record (map, seq, payload)
          SELECT $1, a.seq, $2 FROM advanced AS a
          RETURNING seq",
    params: &[TEXT, JSONB, INT8, INT8],
    access: Access::Write,
};

/// The same append on a state row version this transaction already holds the lock on (read
/// by [`lock_state`] or written by an earlier append of the same transaction): found by its
/// address, without an index probe or a walk through the versions the transaction left behind.
/// No row when that version is no longer the visible one, or the chunk is full.
const APPEND_AT: Statement = Statement {
    name: "append_at",
    sql: "WITH advanced AS (
              UPDATE chunked_map.map_state AS s
              SET next_seq = s.next_seq + 1, current_bytes = s.current_bytes + $3
              WHERE s.ctid = $5 AND s.map = $1
                AND s.next_seq < s.current_first_seq + s.current_chunk_size
                AND (s.current_bytes + $3 <= $4 OR s.next_seq = s.current_first_seq)
              RETURNING s.next_seq - 1 AS seq, s.ctid,
                        CASE WHEN s.notify THEN s.notify_channel END AS notify_channel
          ), appended AS (
              INSERT INTO chunked_map.current_record (map, seq, payload)
              SELECT $1, a.seq, $2 FROM advanced AS a
          )
          SELECT a.seq, a.ctid, a.notify_channel FROM advanced AS a",
    params: &[TEXT, JSONB, INT8, INT8, TID],
    access: Access::Write,
};

/// [`APPEND_AT`] in two statements, for distributed tables: Citus runs a CTE that feeds an
/// `INSERT ... SELECT` as separate steps through intermediate results (over a connection to the
/// node itself), where an `UPDATE ... RETURNING` and an `INSERT ... VALUES` on one map are each
/// routed straight to its shard.
const ADVANCE_AT: Statement = Statement {
    name: "advance_at",
    sql: "UPDATE chunked_map.map_state AS s
          SET next_seq = s.next_seq + 1, current_bytes = s.current_bytes + $2
          WHERE s.ctid = $4 AND s.map = $1
            AND s.next_seq < s.current_first_seq + s.current_chunk_size
            AND (s.current_bytes + $2 <= $3 OR s.next_seq = s.current_first_seq)
          RETURNING s.next_seq - 1 AS seq, s.ctid, CASE WHEN s.notify THEN s.notify_channel END",
    params: &[TEXT, INT8, INT8, TID],
    access: Access::Write,
};

const INSERT_RECORD: Statement = Statement {
    name: "insert_record",
    sql: "INSERT INTO chunked_map.current_record (map, seq, payload) VALUES ($1, $2, $3)",
    params: &[TEXT, INT8, JSONB],
    access: Access::Write,
};

/// [`append_at`] for distributed tables ([`ADVANCE_AT`]).
pub fn append_at_routed(
    session: &Session,
    map: &str,
    tid: pg_sys::ItemPointerData,
    (payload, bytes): (Jsonb<'_>, usize),
    max_chunk_bytes: usize,
) -> Option<Appended> {
    let [map_param, payload_param, bytes, limit] =
        append_params(map, payload, bytes, max_chunk_bytes);
    let appended = appended(
        session,
        &ADVANCE_AT,
        &[Param::of(map), bytes, limit, Param::tid(tid)],
    )?;
    session.run(
        &INSERT_RECORD,
        &[map_param, Param::of(appended.seq), payload_param],
    );
    Some(appended)
}

fn appended(session: &Session, statement: &Statement, params: &[Param]) -> Option<Appended> {
    let rows = session.run(statement, params);
    rows.first().map(|row| Appended {
        seq: row.i64(1).unwrap_or_default(),
        tid: tid_of(&row, 2),
        announce_on: row.text(3),
    })
}

fn append_params(
    map: &str,
    payload: Jsonb<'_>,
    bytes: usize,
    max_chunk_bytes: usize,
) -> [Param; 4] {
    let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
    let limit = i64::try_from(max_chunk_bytes).unwrap_or(i64::MAX);
    [
        Param::of(map),
        Param::of(payload),
        Param::of(bytes),
        Param::of(limit),
    ]
}

/// [`APPEND`] of a payload of `bytes` bytes: the record's sequence, `None` for "take the slow
/// path".
pub fn append(
    session: &Session,
    map: &str,
    (payload, bytes): (Jsonb<'_>, usize),
    max_chunk_bytes: usize,
) -> Option<i64> {
    let rows = session.run(
        &APPEND,
        &append_params(map, payload, bytes, max_chunk_bytes),
    );
    rows.first().and_then(|row| row.i64(1))
}

/// [`APPEND_AT`]: `None` when `tid` is not the visible version or the chunk is full.
pub fn append_at(
    session: &Session,
    map: &str,
    tid: pg_sys::ItemPointerData,
    (payload, bytes): (Jsonb<'_>, usize),
    max_chunk_bytes: usize,
) -> Option<Appended> {
    let [a, b, c, d] = append_params(map, payload, bytes, max_chunk_bytes);
    appended(session, &APPEND_AT, &[a, b, c, d, Param::tid(tid)])
}

/// The map's lock, without waiting: a row another transaction holds is skipped (not found).
/// Under REPEATABLE READ and SERIALIZABLE, PostgreSQL raises 40001 when the row was changed by a
/// transaction that committed after the snapshot.
const LOCK_STATE: Statement = Statement {
    name: "lock_state",
    sql: "SELECT s.ctid, s.chunk_size, s.current_first_seq, s.next_seq, s.current_chunk_size,
                 s.current_bytes, s.newest_archived_token,
                 CASE WHEN s.notify THEN s.notify_channel END
          FROM chunked_map.map_state AS s
          WHERE s.map = $1
          FOR UPDATE SKIP LOCKED",
    params: &[TEXT],
    access: Access::Write,
};

/// The same lock, waiting up to the statement's `lock_timeout` (`chunked_map.lock_timeout`).
/// Only run after [`LOCK_STATE`] in the same call, so the relation locks it needs are held
/// already and the only thing it can wait for is the row.
const LOCK_STATE_WAIT: Statement = Statement {
    name: "lock_state_wait",
    sql: "SELECT s.ctid, s.chunk_size, s.current_first_seq, s.next_seq, s.current_chunk_size,
                 s.current_bytes, s.newest_archived_token,
                 CASE WHEN s.notify THEN s.notify_channel END
          FROM chunked_map.map_state AS s
          WHERE s.map = $1
          FOR UPDATE",
    params: &[TEXT],
    access: Access::Write,
};

fn map_state(row: &Row<'_>) -> MapState {
    MapState {
        tid: tid_of(row, 1),
        chunk_size: row.i32(2).unwrap_or(1),
        current: CurrentChunk {
            first_seq: row.i64(3).unwrap_or(1),
            next_seq: row.i64(4).unwrap_or(1),
            size: row.i32(5).unwrap_or(1),
            bytes: row.i64(6).unwrap_or(0),
        },
        newest_archived_token: row.text(7),
        announce_on: row.text(8),
    }
}

/// [`LOCK_STATE`]: `None` when the map has no row this transaction can lock now.
pub fn lock_state(session: &Session, map: &str) -> Option<MapState> {
    let rows = session.run(&LOCK_STATE, &[Param::of(map)]);
    rows.first().map(|row| map_state(&row))
}

/// [`LOCK_STATE_WAIT`]: `None` when the row went away while waiting (dropped). A timeout, a
/// deadlock or a cancel while waiting is returned, for the caller to relabel or let go on.
pub fn lock_state_wait(session: &Session, map: &str) -> Result<Option<MapState>, PgError> {
    let rows = session.try_run(&LOCK_STATE_WAIT, &[Param::of(map)])?;
    Ok(rows.first().map(|row| map_state(&row)))
}

/// Whether the map has a state row, as a writer sees it (see [`Access::Write`]).
const MAP_VISIBLE_TO_WRITER: Statement = Statement {
    name: "map_visible_to_writer",
    sql: "SELECT count(*) FROM chunked_map.map_state AS s WHERE s.map = $1",
    params: &[TEXT],
    access: Access::Write,
};

/// Whether the map has a state row in the calling statement's snapshot, or (run on the latest
/// snapshot) committed by now.
const MAP_EXISTS: Statement = Statement {
    name: "map_exists",
    sql: "SELECT count(*) FROM chunked_map.map_state AS s WHERE s.map = $1",
    params: &[TEXT],
    access: Access::Read,
};

fn count(rows: crate::spi::Rows<'_>) -> i64 {
    rows.first().and_then(|row| row.i64(1)).unwrap_or(0)
}

/// State rows of the map a writer sees.
pub fn map_rows_visible_to_writer(session: &Session, map: &str) -> i64 {
    count(session.run(&MAP_VISIBLE_TO_WRITER, &[Param::of(map)]))
}

pub fn map_exists(session: &Session, map: &str) -> bool {
    count(session.run(&MAP_EXISTS, &[Param::of(map)])) > 0
}

pub fn map_exists_now(session: &Session, map: &str) -> bool {
    count(session.run_on_latest(&MAP_EXISTS, &[Param::of(map)])) > 0
}

/// Archives records `$2..$3` of the current chunk (all of them, or one piece of a chunk that
/// holds more bytes than a chunk may) as one immutable row, payloads copied as they are, in the
/// index's order (no sort). Ranges
/// over the current chunk are bounded on both sides, so that a generic plan always probes the
/// index (an open range may be guessed to match a third of the table and scanned whole).
const ARCHIVE_CURRENT_RANGE: Statement = Statement {
    name: "archive_current_range",
    sql: "INSERT INTO chunked_map.archived_chunk (map, first_seq, chunk_size, prev_token, payloads)
          SELECT $1, $2, $4, $5,
                 ARRAY(SELECT c.payload FROM chunked_map.current_record AS c
                       WHERE c.map = $1 AND c.seq >= $2 AND c.seq < $3
                       ORDER BY c.seq)",
    params: &[TEXT, INT8, INT8, INT4, TEXT],
    access: Access::Write,
};

pub fn archive_current_range(
    session: &Session,
    map: &str,
    seqs: std::ops::Range<i64>,
    chunk_size: i32,
    prev_token: Option<&str>,
) {
    session.run_as_lock_holder(
        &ARCHIVE_CURRENT_RANGE,
        &[
            Param::of(map),
            Param::of(seqs.start),
            Param::of(seqs.end),
            Param::of(chunk_size),
            Param::optional(prev_token),
        ],
    );
}

/// Sizes of the current chunk's payloads, oldest first: only needed when the chunk holds more
/// bytes than a chunk may (stored by an earlier version, or the setting was lowered since).
const CURRENT_PAYLOADS: Statement = Statement {
    name: "current_payloads",
    sql: "SELECT c.payload
          FROM chunked_map.current_record AS c
          WHERE c.map = $1 AND c.seq >= $2 AND c.seq < $3
          ORDER BY c.seq",
    params: &[TEXT, INT8, INT8],
    access: Access::Write,
};

pub fn current_payload_sizes(
    session: &Session,
    map: &str,
    seqs: std::ops::Range<i64>,
) -> Vec<usize> {
    let rows = session.run_as_lock_holder(
        &CURRENT_PAYLOADS,
        &[Param::of(map), Param::of(seqs.start), Param::of(seqs.end)],
    );
    rows.iter()
        .map(|row| {
            row.datum(1)
                // SAFETY: a non-NULL jsonb column.
                .map(|datum| unsafe { crate::jsonb::payload_bytes(datum) })
                .unwrap_or(0)
        })
        .collect()
}

/// Ends the current chunk `$2..$3` once its records are archived: removes them and starts the
/// next chunk at `$3`, with the map's chunk size.
const CLOSE_CURRENT: Statement = Statement {
    name: "close_current",
    sql: "WITH cleared AS (
              DELETE FROM chunked_map.current_record AS c
              WHERE c.map = $1 AND c.seq >= $2 AND c.seq < $3
          )
          UPDATE chunked_map.map_state AS s
          SET next_seq = $3, current_first_seq = $3, current_chunk_size = s.chunk_size,
              current_bytes = 0, newest_archived_token = $4,
              archived_chunks = s.archived_chunks + $5
          WHERE s.ctid = $6 AND s.map = $1
          RETURNING s.ctid, s.chunk_size, s.current_first_seq, s.next_seq, s.current_chunk_size,
                    s.current_bytes, s.newest_archived_token,
                    CASE WHEN s.notify THEN s.notify_channel END",
    params: &[TEXT, INT8, INT8, TEXT, INT8, TID],
    access: Access::Write,
};

/// [`CLOSE_CURRENT`]; returns the new state.
pub fn close_current(
    session: &Session,
    map: &str,
    state: &MapState,
    newest_token: &str,
    chunks_archived: i64,
) -> MapState {
    let rows = session.run_as_lock_holder(
        &CLOSE_CURRENT,
        &[
            Param::of(map),
            Param::of(state.current.first_seq),
            Param::of(state.current.next_seq),
            Param::of(newest_token),
            Param::of(chunks_archived),
            Param::tid(state.tid),
        ],
    );
    rows.first()
        .map(|row| map_state(&row))
        .unwrap_or_else(|| lost_state_row(map))
}

/// The address of the state row version a statement that rewrote it returned.
fn rewritten_at(rows: &crate::spi::Rows<'_>, map: &str) -> pg_sys::ItemPointerData {
    rows.first()
        .map(|row| tid_of(&row, 1))
        .unwrap_or_else(|| lost_state_row(map))
}

/// The caller holds the map's lock, yet its state row was not where the lock left it.
pub fn lost_state_row(map: &str) -> ! {
    crate::error::ChunkedError::Internal {
        context: format!(
            "the state row of map \"{map}\" changed while this transaction held its lock"
        ),
    }
    .raise()
}

/// Archives a full chunk made of payloads given by the caller (a batch append), without passing
/// them through the current chunk's table.
const ARCHIVE_PAYLOADS: Statement = Statement {
    name: "archive_payloads",
    sql: "INSERT INTO chunked_map.archived_chunk (map, first_seq, chunk_size, prev_token, payloads)
          VALUES ($1, $2, $3, $4, $5)",
    params: &[TEXT, INT8, INT4, TEXT, JSONB_ARRAY],
    access: Access::Write,
};

pub fn archive_payloads(
    session: &Session,
    map: &str,
    first_seq: i64,
    chunk_size: i32,
    prev_token: Option<&str>,
    payloads: pg_sys::Datum,
) {
    session.run(
        &ARCHIVE_PAYLOADS,
        &[
            Param::of(map),
            Param::of(first_seq),
            Param::of(chunk_size),
            Param::optional(prev_token),
            Param::raw(payloads),
        ],
    );
}

/// Adds payloads to the current chunk, sequences from `$2` on.
const APPEND_PAYLOADS: Statement = Statement {
    name: "append_payloads",
    sql: "INSERT INTO chunked_map.current_record (map, seq, payload)
          SELECT $1, $2 + u.n - 1, u.payload
          FROM unnest($3) WITH ORDINALITY AS u(payload, n)",
    params: &[TEXT, INT8, JSONB_ARRAY],
    access: Access::Write,
};

pub fn append_payloads(session: &Session, map: &str, first_seq: i64, payloads: pg_sys::Datum) {
    session.run(
        &APPEND_PAYLOADS,
        &[Param::of(map), Param::of(first_seq), Param::raw(payloads)],
    );
}

/// Sets the state after a batch append.
const ADVANCE_STATE: Statement = Statement {
    name: "advance_state",
    sql: "UPDATE chunked_map.map_state AS s
          SET next_seq = $3, current_first_seq = $4, current_chunk_size = $5, current_bytes = $6,
              newest_archived_token = $7, archived_chunks = s.archived_chunks + $8
          WHERE s.ctid = $2 AND s.map = $1
          RETURNING s.ctid",
    params: &[TEXT, TID, INT8, INT8, INT4, INT8, TEXT, INT8],
    access: Access::Write,
};

/// [`ADVANCE_STATE`] to `state` (its `tid` the version to change), having archived
/// `chunks_archived` more chunks; returns the new version's address.
pub fn advance_state(
    session: &Session,
    map: &str,
    state: &MapState,
    chunks_archived: i64,
) -> pg_sys::ItemPointerData {
    let rows = session.run(
        &ADVANCE_STATE,
        &[
            Param::of(map),
            Param::tid(state.tid),
            Param::of(state.current.next_seq),
            Param::of(state.current.first_seq),
            Param::of(state.current.size),
            Param::of(state.current.bytes),
            Param::optional(state.newest_archived_token.as_deref()),
            Param::of(chunks_archived),
        ],
    );
    rewritten_at(&rows, map)
}

/// Changes the size of chunks started from now on; an empty current chunk takes it too.
const SET_CHUNK_SIZE: Statement = Statement {
    name: "set_chunk_size",
    sql: "UPDATE chunked_map.map_state AS s
          SET chunk_size = $3,
              current_chunk_size = CASE WHEN s.next_seq = s.current_first_seq
                                        THEN $3 ELSE s.current_chunk_size END
          WHERE s.ctid = $2 AND s.map = $1
          RETURNING s.ctid",
    params: &[TEXT, TID, INT4],
    access: Access::Write,
};

pub fn set_chunk_size(
    session: &Session,
    map: &str,
    state: &MapState,
    chunk_size: i32,
) -> pg_sys::ItemPointerData {
    let rows = session.run(
        &SET_CHUNK_SIZE,
        &[Param::of(map), Param::tid(state.tid), Param::of(chunk_size)],
    );
    rewritten_at(&rows, map)
}

/// Turns the announcement of committed appends on or off. The map gets its channel the first
/// time they are turned on, and keeps it: `chunked_map_` and a random UUID's 32 hexadecimal digits, a
/// name no role can guess from the map's.
const SET_NOTIFY: Statement = Statement {
    name: "set_notify",
    sql: "UPDATE chunked_map.map_state AS s
          SET notify = $3,
              notify_channel = CASE WHEN $3 AND s.notify_channel IS NULL
                                    THEN 'chunked_map_' || replace(gen_random_uuid()::text, '-', '')
                                    ELSE s.notify_channel END
          WHERE s.ctid = $2 AND s.map = $1
          RETURNING s.ctid, s.notify_channel",
    params: &[TEXT, TID, BOOL],
    access: Access::Write,
};

/// [`SET_NOTIFY`]: the state row's new address, and the map's channel.
pub fn set_notify(
    session: &Session,
    map: &str,
    state: &MapState,
    enabled: bool,
) -> (pg_sys::ItemPointerData, Option<String>) {
    let rows = session.run(
        &SET_NOTIFY,
        &[Param::of(map), Param::tid(state.tid), Param::of(enabled)],
    );
    let channel = rows.first().and_then(|row| row.text(2));
    (rewritten_at(&rows, map), channel)
}

/// Who inserted the record `$2` of the current chunk (its `xmin`).
const RECORD_INSERTED_BY: Statement = Statement {
    name: "record_inserted_by",
    sql: "SELECT c.xmin FROM chunked_map.current_record AS c WHERE c.map = $1 AND c.seq = $2",
    params: &[TEXT, INT8],
    access: Access::Write,
};

/// Whether this transaction (or one of its subtransactions that did not roll back) inserted
/// the record `seq` of the map's current chunk.
pub fn inserted_by_this_transaction(session: &Session, map: &str, seq: i64) -> bool {
    let rows = session.run(&RECORD_INSERTED_BY, &[Param::of(map), Param::of(seq)]);
    rows.first()
        .and_then(|row| row.xid(1))
        // SAFETY: looks the id up among this transaction's own.
        .is_some_and(|xid| unsafe { pg_sys::TransactionIdIsCurrentTransactionId(xid) })
}

/// The installation's random key (see `name_lock`).
const INSTALLATION_SECRET: Statement = Statement {
    name: "installation_secret",
    sql: "SELECT i.secret FROM chunked_map.installation AS i",
    params: &[],
    access: Access::Read,
};

pub fn installation_secret(session: &Session) -> Vec<u8> {
    let rows = session.run(&INSTALLATION_SECRET, &[]);
    rows.first()
        .and_then(|row| row.bytea(1))
        .unwrap_or_default()
}

/// Removes every row of one map; the caller holds its lock. Runs as the tables' owner (the
/// functions are SECURITY DEFINER), which is what the history-protecting triggers allow.
const DROP_MAP: Statement = Statement {
    name: "drop_map",
    sql: "WITH archived AS (
              DELETE FROM chunked_map.archived_chunk AS a WHERE a.map = $1
          ), current AS (
              DELETE FROM chunked_map.current_record AS c WHERE c.map = $1
          )
          DELETE FROM chunked_map.map_state AS s WHERE s.map = $1",
    params: &[TEXT],
    access: Access::Write,
};

pub fn drop_map(session: &Session, map: &str) {
    session.run(&DROP_MAP, &[Param::of(map)]);
}

/// The current page: the current chunk's records newest first, and the newest archived token.
/// State and records are read by one statement, so they agree.
const CURRENT_PAGE: Statement = Statement {
    name: "current_page",
    sql: "SELECT jsonb_build_object(
                 'map', s.map,
                 'page_token', 'current',
                 'records', coalesce(
                     (SELECT jsonb_agg(jsonb_build_object('seq', c.seq, 'payload', c.payload) ORDER BY c.seq DESC)
                      FROM chunked_map.current_record AS c
                      WHERE c.map = s.map AND c.seq >= s.current_first_seq AND c.seq < s.next_seq),
                     '[]'::jsonb),
                 'next_page_token', s.newest_archived_token)
          FROM chunked_map.map_state AS s
          WHERE s.map = $1",
    params: &[TEXT],
    access: Access::Read,
};

fn first_jsonb<'fcx>(
    caller: CallerMemory<'fcx>,
    rows: crate::spi::Rows<'_>,
) -> Option<Option<Jsonb<'fcx>>> {
    rows.first()
        // SAFETY: the statement's one column is jsonb, and the row is valid now.
        .map(|row| {
            row.datum(1)
                .map(|datum| unsafe { caller.copy_jsonb(datum) })
        })
}

/// The current page, `None` when the map was never started.
pub fn current_page<'fcx>(
    session: &Session,
    caller: CallerMemory<'fcx>,
    map: &str,
) -> Option<Jsonb<'fcx>> {
    first_jsonb(caller, session.run(&CURRENT_PAGE, &[Param::of(map)])).flatten()
}

/// An archived page: a function of the stored row alone, hence byte-identical on every read.
const ARCHIVED_PAGE: Statement = Statement {
    name: "archived_page",
    sql: "SELECT jsonb_build_object(
                 'map', a.map,
                 'page_token', $3,
                 'records', (SELECT jsonb_agg(jsonb_build_object('seq', a.first_seq + p.i - 1, 'payload', p.payload)
                                              ORDER BY p.i DESC)
                             FROM unnest(a.payloads) WITH ORDINALITY AS p(payload, i)),
                 'next_page_token', a.prev_token)
          FROM chunked_map.archived_chunk AS a
          WHERE a.map = $1 AND a.first_seq = $2",
    params: &[TEXT, INT8, TEXT],
    access: Access::Read,
};

/// The archived page whose first sequence is `first_seq`, `None` when there is none.
pub fn archived_page<'fcx>(
    session: &Session,
    caller: CallerMemory<'fcx>,
    map: &str,
    first_seq: i64,
    token: &str,
) -> Option<Jsonb<'fcx>> {
    let params = [Param::of(map), Param::of(first_seq), Param::of(token)];
    first_jsonb(caller, session.run(&ARCHIVED_PAGE, &params)).flatten()
}

/// The records of the current chunk, newest first (the current page as rows).
const CURRENT_RECORDS: Statement = Statement {
    name: "current_records",
    sql: "SELECT c.seq, c.payload
          FROM chunked_map.map_state AS s
          JOIN chunked_map.current_record AS c
            ON c.map = s.map AND c.seq >= s.current_first_seq AND c.seq < s.next_seq
          WHERE s.map = $1
          ORDER BY c.seq DESC",
    params: &[TEXT],
    access: Access::Read,
};

/// The records of one archived chunk, newest first (an archived page as rows).
const ARCHIVED_RECORDS: Statement = Statement {
    name: "archived_records",
    sql: "SELECT a.first_seq + p.i - 1, p.payload
          FROM chunked_map.archived_chunk AS a
          CROSS JOIN LATERAL unnest(a.payloads) WITH ORDINALITY AS p(payload, i)
          WHERE a.map = $1 AND a.first_seq = $2
          ORDER BY p.i DESC",
    params: &[TEXT, INT8],
    access: Access::Read,
};

/// Records read from a map, copied into the caller's memory.
pub type Records<'fcx> = Vec<(i64, Jsonb<'fcx>)>;

fn records<'fcx>(caller: CallerMemory<'fcx>, rows: crate::spi::Rows<'_>) -> Records<'fcx> {
    rows.iter()
        .filter_map(|row| {
            let seq = row.i64(1)?;
            let payload = row.datum(2)?;
            // SAFETY: the statement's second column is a non-NULL jsonb, valid with the row.
            Some((seq, unsafe { caller.copy_jsonb(payload) }))
        })
        .collect()
}

pub fn current_records<'fcx>(
    session: &Session,
    caller: CallerMemory<'fcx>,
    map: &str,
) -> Records<'fcx> {
    records(caller, session.run(&CURRENT_RECORDS, &[Param::of(map)]))
}

pub fn archived_records<'fcx>(
    session: &Session,
    caller: CallerMemory<'fcx>,
    map: &str,
    first_seq: i64,
) -> Records<'fcx> {
    records(
        caller,
        session.run(&ARCHIVED_RECORDS, &[Param::of(map), Param::of(first_seq)]),
    )
}

/// Where a map's records are: `(next_seq, current_first_seq)`, from its state row alone; `None`
/// when the map does not exist.
const EXTENT: Statement = Statement {
    name: "extent",
    sql: "SELECT s.next_seq, s.current_first_seq FROM chunked_map.map_state AS s WHERE s.map = $1",
    params: &[TEXT],
    access: Access::Read,
};

pub fn extent(session: &Session, map: &str) -> Option<(i64, i64)> {
    let rows = session.run(&EXTENT, &[Param::of(map)]);
    rows.first()
        .map(|row| (row.i64(1).unwrap_or(1), row.i64(2).unwrap_or(1)))
}

/// The next sequence of a map as a writer sees it (see [`Access::Write`]), without its lock.
const NEXT_SEQ_FOR_WRITER: Statement = Statement {
    name: "next_seq_for_writer",
    sql: "SELECT s.next_seq FROM chunked_map.map_state AS s WHERE s.map = $1",
    params: &[TEXT],
    access: Access::Write,
};

pub fn next_seq_for_writer(session: &Session, map: &str) -> Option<i64> {
    let rows = session.run(&NEXT_SEQ_FOR_WRITER, &[Param::of(map)]);
    rows.first().map(|row| row.i64(1).unwrap_or(1))
}

/// Records `$2 < seq < $3`, oldest first, at most `$4`, when the first of them is archived:
/// from the archived chunk that holds it (one probe of the primary key for the greatest first
/// sequence not above it), the chunks after it up to the end of the range, and the current
/// chunk.
const READ_FORWARD: Statement = Statement {
    name: "read_forward",
    sql: "SELECT r.seq, r.payload
          FROM (
              SELECT a.first_seq + p.i - 1 AS seq, p.payload
              FROM chunked_map.archived_chunk AS a
              CROSS JOIN LATERAL unnest(a.payloads) WITH ORDINALITY AS p(payload, i)
              WHERE a.map = $1
                AND a.first_seq >= coalesce(
                        (SELECT b.first_seq FROM chunked_map.archived_chunk AS b
                         WHERE b.map = $1 AND b.first_seq <= $2 + 1
                         ORDER BY b.first_seq DESC LIMIT 1), 0)
                AND a.first_seq < $3
              UNION ALL
              SELECT c.seq, c.payload
              FROM chunked_map.current_record AS c
              WHERE c.map = $1 AND c.seq > $2 AND c.seq < $3
          ) AS r
          WHERE r.seq > $2 AND r.seq < $3
          ORDER BY r.seq
          LIMIT $4",
    params: &[TEXT, INT8, INT8, INT8],
    access: Access::Read,
};

/// The same when they are all in the current chunk: its index alone.
const READ_FORWARD_CURRENT: Statement = Statement {
    name: "read_forward_current",
    sql: "SELECT c.seq, c.payload
          FROM chunked_map.current_record AS c
          WHERE c.map = $1 AND c.seq > $2 AND c.seq < $3
          ORDER BY c.seq
          LIMIT $4",
    params: &[TEXT, INT8, INT8, INT8],
    access: Access::Read,
};

pub fn read_forward<'fcx>(
    session: &Session,
    caller: CallerMemory<'fcx>,
    map: &str,
    after_seq: i64,
    (end_seq, current_first_seq): (i64, i64),
    max_records: i32,
) -> Records<'fcx> {
    let params = [
        Param::of(map),
        Param::of(after_seq),
        Param::of(end_seq),
        Param::of(i64::from(max_records)),
    ];
    let statement = if after_seq.saturating_add(1) >= current_first_seq {
        &READ_FORWARD_CURRENT
    } else {
        &READ_FORWARD
    };
    records(caller, session.run(statement, &params))
}

/// What `chunked_info` reports, from the state row alone.
const INFO: Statement = Statement {
    name: "info",
    sql: "SELECT jsonb_build_object(
                 'map', s.map,
                 'chunk_size', s.chunk_size,
                 'next_seq', s.next_seq,
                 'current_records', s.next_seq - s.current_first_seq,
                 'archived_chunks', s.archived_chunks,
                 'newest_archived_token', s.newest_archived_token,
                 'total_records', s.next_seq - 1,
                 'notify', s.notify)
             || CASE WHEN s.notify THEN jsonb_build_object('notify_channel', s.notify_channel)
                     ELSE '{}'::jsonb END
          FROM chunked_map.map_state AS s
          WHERE s.map = $1",
    params: &[TEXT],
    access: Access::Read,
};

/// `chunked_info` of the map, `None` when it was never started.
pub fn info<'fcx>(session: &Session, caller: CallerMemory<'fcx>, map: &str) -> Option<Jsonb<'fcx>> {
    first_jsonb(caller, session.run(&INFO, &[Param::of(map)])).flatten()
}

/// One record by sequence: from the current chunk, or from the archived chunk with the greatest
/// first sequence not above it (one probe of the primary key), at index `seq - first_seq + 1`.
const GET_RECORD: Statement = Statement {
    name: "get_record",
    sql: "SELECT CASE
                 WHEN $2 < 1 OR $2 >= s.next_seq THEN NULL
                 WHEN $2 >= s.current_first_seq THEN
                     (SELECT jsonb_build_object('seq', c.seq, 'payload', c.payload)
                      FROM chunked_map.current_record AS c
                      WHERE c.map = s.map AND c.seq = $2)
                 ELSE
                     (SELECT CASE WHEN $2 < a.first_seq + cardinality(a.payloads) THEN
                                 jsonb_build_object('seq', $2, 'payload', a.payloads[($2 - a.first_seq + 1)::integer])
                             END
                      FROM chunked_map.archived_chunk AS a
                      WHERE a.map = s.map AND a.first_seq <= $2
                      ORDER BY a.first_seq DESC
                      LIMIT 1)
                 END
          FROM chunked_map.map_state AS s
          WHERE s.map = $1",
    params: &[TEXT, INT8],
    access: Access::Read,
};

/// `Some(None)` when the map exists but has no record `seq`; `None` when the map does not exist.
pub fn get_record<'fcx>(
    session: &Session,
    caller: CallerMemory<'fcx>,
    map: &str,
    seq: i64,
) -> Option<Option<Jsonb<'fcx>>> {
    first_jsonb(
        caller,
        session.run(&GET_RECORD, &[Param::of(map), Param::of(seq)]),
    )
}

/// What `chunked_verify` needs to know of a map; reads its whole history (it is a DBA's tool,
/// not the append or page path), all on one snapshot.
pub struct StoredMap {
    pub state: Option<StoredState>,
    pub chunks: Vec<StoredChunk>,
    pub current: Vec<StoredRecord>,
}

pub struct StoredState {
    pub chunk_size: i32,
    pub current: CurrentChunk,
    pub newest_archived_token: Option<String>,
    pub archived_chunks: i64,
}

pub struct StoredChunk {
    pub first_seq: i64,
    pub chunk_size: i32,
    pub prev_token: Option<String>,
    pub layout: i16,
    pub record_count: i64,
    /// NULL payloads, or an array that is not one-dimensional from index 1.
    pub malformed: bool,
}

pub struct StoredRecord {
    pub seq: i64,
    pub bytes: usize,
}

const STORED_STATE: Statement = Statement {
    name: "stored_state",
    sql: "SELECT s.chunk_size, s.current_first_seq, s.next_seq, s.current_chunk_size,
                 s.current_bytes, s.newest_archived_token, s.archived_chunks
          FROM chunked_map.map_state AS s
          WHERE s.map = $1",
    params: &[TEXT],
    access: Access::Read,
};

const STORED_CHUNKS: Statement = Statement {
    name: "stored_chunks",
    sql: "SELECT a.first_seq, a.chunk_size, a.prev_token, a.layout::integer,
                 cardinality(a.payloads)::bigint,
                 array_ndims(a.payloads) IS DISTINCT FROM 1
                     OR array_lower(a.payloads, 1) <> 1
                     OR array_position(a.payloads, NULL) IS NOT NULL
          FROM chunked_map.archived_chunk AS a
          WHERE a.map = $1
          ORDER BY a.first_seq",
    params: &[TEXT],
    access: Access::Read,
};

const STORED_CURRENT: Statement = Statement {
    name: "stored_current",
    sql: "SELECT c.seq, c.payload
          FROM chunked_map.current_record AS c
          WHERE c.map = $1
          ORDER BY c.seq",
    params: &[TEXT],
    access: Access::Read,
};

pub fn stored_map(session: &Session, map: &str) -> StoredMap {
    let state_rows = session.run(&STORED_STATE, &[Param::of(map)]);
    let state = state_rows.first().map(|row| StoredState {
        chunk_size: row.i32(1).unwrap_or_default(),
        current: CurrentChunk {
            first_seq: row.i64(2).unwrap_or_default(),
            next_seq: row.i64(3).unwrap_or_default(),
            size: row.i32(4).unwrap_or_default(),
            bytes: row.i64(5).unwrap_or_default(),
        },
        newest_archived_token: row.text(6),
        archived_chunks: row.i64(7).unwrap_or_default(),
    });
    drop(state_rows);
    let chunk_rows = session.run(&STORED_CHUNKS, &[Param::of(map)]);
    let chunks = chunk_rows
        .iter()
        .map(|row| StoredChunk {
            first_seq: row.i64(1).unwrap_or_default(),
            chunk_size: row.i32(2).unwrap_or_default(),
            prev_token: row.text(3),
            layout: i16::try_from(row.i32(4).unwrap_or_default()).unwrap_or(-1),
            record_count: row.i64(5).unwrap_or(0),
            malformed: row.bool(6).unwrap_or(true),
        })
        .collect();
    drop(chunk_rows);
    let current_rows = session.run(&STORED_CURRENT, &[Param::of(map)]);
    let current = current_rows
        .iter()
        .map(|row| StoredRecord {
            seq: row.i64(1).unwrap_or_default(),
            // SAFETY: a non-NULL jsonb column.
            bytes: row
                .datum(2)
                .map(|datum| unsafe { crate::jsonb::payload_bytes(datum) })
                .unwrap_or(0),
        })
        .collect();
    StoredMap {
        state,
        chunks,
        current,
    }
}

const CURRENT_DATABASE: Statement = Statement {
    name: "current_database",
    sql: "SELECT current_database()::text",
    params: &[],
    access: Access::Read,
};

pub fn current_database(session: &Session) -> String {
    let rows = session.run(&CURRENT_DATABASE, &[]);
    rows.first().and_then(|row| row.text(1)).unwrap_or_default()
}

/// Citus, if it is installed in this database. The statements after this one name Citus's
/// functions and catalogs, and are only prepared once it is there.
const CITUS_VERSION: Statement = Statement {
    name: "citus_version",
    sql: "SELECT e.extversion FROM pg_catalog.pg_extension AS e WHERE e.extname = 'citus'",
    params: &[],
    access: Access::Read,
};

pub fn citus_version(session: &Session) -> Option<String> {
    let rows = session.run(&CITUS_VERSION, &[]);
    rows.first().and_then(|row| row.text(1))
}

const CITUS_IS_COORDINATOR: Statement = Statement {
    name: "citus_is_coordinator",
    sql: "SELECT pg_catalog.citus_is_coordinator()",
    params: &[],
    access: Access::Read,
};

pub fn citus_is_coordinator(session: &Session) -> bool {
    let rows = session.run(&CITUS_IS_COORDINATOR, &[]);
    rows.first().and_then(|row| row.bool(1)).unwrap_or(false)
}

/// The workers (`host:port`) without chunked_map's planner hook (`chunked_map.null_map_guard`
/// is defined only where the library is preloaded), and those that did not answer.
const WORKERS_WITHOUT_GUARD: Statement = Statement {
    name: "workers_without_guard",
    sql: "SELECT w.nodename || ':' || w.nodeport
                 || CASE WHEN w.success THEN '' ELSE ' (did not answer: ' || w.result || ')' END
          FROM pg_catalog.run_command_on_workers(
                   $$SELECT pg_catalog.current_setting('chunked_map.null_map_guard', true)$$) AS w
          WHERE NOT w.success OR w.result IS DISTINCT FROM 'on'
          ORDER BY w.nodename, w.nodeport",
    params: &[],
    access: Access::Read,
};

/// Nodes without chunked_map's planner hook: this one (`hooked`: whether this process has it)
/// and the workers.
pub fn nodes_without_guard(session: &Session, hooked: bool) -> Vec<String> {
    let mut nodes: Vec<String> = Vec::new();
    if !hooked {
        nodes.push("this coordinator".to_owned());
    }
    let rows = session.run(&WORKERS_WITHOUT_GUARD, &[]);
    nodes.extend(rows.iter().filter_map(|row| row.text(1)));
    nodes
}

/// Whether the storage tables are distributed: Citus is installed in this database (a catalog
/// lookup, no statement) and `map_state` is one of its distributed tables. Looked up once per
/// transaction.
pub fn tables_are_distributed(session: &Session) -> bool {
    xact::distributed_tables(|| {
        // Where Citus's library is not in this process, nothing is distributed, and no catalog
        // is read.
        crate::citus::is_loaded()
            // SAFETY: a catalog lookup by name, which raises nothing when missing.
            && unsafe { pg_sys::get_extension_oid(c"citus".as_ptr(), true) } != pg_sys::InvalidOid
            && is_distributed_table(session, TABLES_ANCHOR)
    })
}

/// Whether this node holds the shard of `map`'s state row (where a lock statement runs in this
/// backend, Citus's local execution, and waits with this session's `lock_timeout`).
const MAP_IS_ON_THIS_NODE: Statement = Statement {
    name: "map_is_on_this_node",
    sql: "SELECT count(*) FROM pg_catalog.pg_dist_placement AS p
          WHERE p.shardid = pg_catalog.get_shard_id_for_distribution_column('chunked_map.map_state', $1)
            AND p.groupid = (SELECT g.groupid FROM pg_catalog.pg_dist_local_group AS g)",
    params: &[TEXT],
    access: Access::Read,
};

pub fn map_is_on_this_node(session: &Session, map: &str) -> bool {
    count(session.run(&MAP_IS_ON_THIS_NODE, &[Param::of(map)])) > 0
}

/// The storage table the others are colocated with.
pub const TABLES_ANCHOR: &str = "chunked_map.map_state";

const IS_DISTRIBUTED_TABLE: Statement = Statement {
    name: "is_distributed_table",
    sql:
        "SELECT count(*) FROM pg_catalog.pg_dist_partition AS p WHERE p.logicalrelid = $1::regclass",
    params: &[TEXT],
    access: Access::Write,
};

pub fn is_distributed_table(session: &Session, table: &str) -> bool {
    count(session.run(&IS_DISTRIBUTED_TABLE, &[Param::of(table)])) > 0
}

/// Distributes a storage table by `map` (moving the rows it holds into its shards) and removes
/// the local copy of the rows (as the owner, whom the history triggers let through).
const DISTRIBUTE_TABLE: Statement = Statement {
    name: "distribute_table",
    sql: "SELECT pg_catalog.create_distributed_table($1::regclass, 'map', colocate_with => $2),
                 pg_catalog.truncate_local_data_after_distributing_table($1::regclass)",
    params: &[TEXT, TEXT],
    access: Access::Write,
};

pub fn distribute_table(session: &Session, table: &str, colocate_with: &str) {
    session.run(
        &DISTRIBUTE_TABLE,
        &[Param::of(table), Param::of(colocate_with)],
    );
}

const IS_DISTRIBUTED_FUNCTION: Statement = Statement {
    name: "is_distributed_function",
    sql: "SELECT count(*) FROM pg_catalog.pg_dist_object AS o
          WHERE o.classid = 'pg_catalog.pg_proc'::regclass AND o.objid = $1::regprocedure
            AND o.distribution_argument_index IS NOT NULL",
    params: &[TEXT],
    access: Access::Write,
};

pub fn is_distributed_function(session: &Session, function: &str) -> bool {
    count(session.run(&IS_DISTRIBUTED_FUNCTION, &[Param::of(function)])) > 0
}

/// Distributes a function by its first argument, colocated with the storage tables: a call is
/// delegated to the node holding that map.
const DISTRIBUTE_FUNCTION: Statement = Statement {
    name: "distribute_function",
    sql:
        "SELECT pg_catalog.create_distributed_function($1::regprocedure, '$1', colocate_with => $2)",
    params: &[TEXT, TEXT],
    access: Access::Write,
};

pub fn distribute_function(session: &Session, function: &str, colocate_with: &str) {
    session.run(
        &DISTRIBUTE_FUNCTION,
        &[Param::of(function), Param::of(colocate_with)],
    );
}

/// Every statement, for the test that their names (the keys of the kept plans) are unique.
#[cfg(test)]
pub const ALL: &[&Statement] = &[
    &START,
    &APPEND,
    &APPEND_AT,
    &ADVANCE_AT,
    &INSERT_RECORD,
    &LOCK_STATE,
    &LOCK_STATE_WAIT,
    &MAP_VISIBLE_TO_WRITER,
    &MAP_EXISTS,
    &ARCHIVE_CURRENT_RANGE,
    &CURRENT_PAYLOADS,
    &CLOSE_CURRENT,
    &ARCHIVE_PAYLOADS,
    &APPEND_PAYLOADS,
    &ADVANCE_STATE,
    &SET_CHUNK_SIZE,
    &SET_NOTIFY,
    &RECORD_INSERTED_BY,
    &INSTALLATION_SECRET,
    &DROP_MAP,
    &CURRENT_PAGE,
    &ARCHIVED_PAGE,
    &CURRENT_RECORDS,
    &ARCHIVED_RECORDS,
    &EXTENT,
    &NEXT_SEQ_FOR_WRITER,
    &READ_FORWARD_CURRENT,
    &READ_FORWARD,
    &INFO,
    &GET_RECORD,
    &STORED_STATE,
    &STORED_CHUNKS,
    &STORED_CURRENT,
    &CURRENT_DATABASE,
    &CITUS_VERSION,
    &CITUS_IS_COORDINATOR,
    &IS_DISTRIBUTED_TABLE,
    &MAP_IS_ON_THIS_NODE,
    &WORKERS_WITHOUT_GUARD,
    &DISTRIBUTE_TABLE,
    &IS_DISTRIBUTED_FUNCTION,
    &DISTRIBUTE_FUNCTION,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statement_names_are_unique_keys() {
        let mut names: Vec<&str> = ALL.iter().map(|s| s.name).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len());
    }

    #[test]
    fn every_table_is_schema_qualified() {
        let tables = [
            ("map_state", "chunked_map."),
            ("current_record", "chunked_map."),
            ("archived_chunk", "chunked_map."),
            ("installation", "chunked_map."),
        ];
        for statement in ALL {
            for (table, schema) in tables {
                for (at, _) in statement.sql.match_indices(table) {
                    let after = statement.sql[at + table.len()..].chars().next();
                    if after.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                        continue; // a longer name, such as the column archived_chunks
                    }
                    assert!(
                        statement.sql[..at].ends_with(schema),
                        "{}: {table} is not qualified",
                        statement.name
                    );
                }
            }
        }
    }
}
