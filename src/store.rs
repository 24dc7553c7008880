//! Every SQL statement the extension runs, and nothing else.
//!
//! Each statement is schema-qualified, takes its values as `$n` parameters, filters on the map
//! it is given and touches no other map (every key starts with the map, so the tables can be
//! distributed by map). Each is prepared once per backend and kept, so an append plans nothing.
//! The functions run with `search_path = pg_catalog, pg_temp`, which is why `pg_catalog`
//! functions and operators need no qualification here.
//!
//! Storage (see `sql/bootstrap.sql`):
//! - `map_state`: one row per map; locked by every append, changed only when a chunk is archived.
//! - `current_record`: the records of each map's current chunk, one row each.
//! - `archived_chunk`: one immutable row per full chunk, its payloads as one `jsonb[]`.

use std::cell::RefCell;
use std::collections::hash_map::Entry;
use std::collections::HashMap;

use pgrx::datum::DatumWithOid;
use pgrx::pg_sys::{self, PgOid};
use pgrx::spi::{OwnedPreparedStatement, SpiClient, SpiResult, SpiTupleTable};
use pgrx::{FromDatum, IntoDatum};

use crate::error::OrRaise;
use crate::jsonb::{Jsonb, JsonbArray};

/// A statement and the types of its parameters.
struct Statement {
    sql: &'static str,
    params: &'static [pg_sys::Oid],
    /// Read-only statements run on the caller's snapshot (what a STABLE function must do). The
    /// others take a new snapshot each (SPI's read_only = false), which an append needs: its
    /// reads after taking the map's lock must see what the lock's previous holder committed.
    read_only: bool,
}

const TEXT: pg_sys::Oid = pg_sys::TEXTOID;
const INT4: pg_sys::Oid = pg_sys::INT4OID;
const INT8: pg_sys::Oid = pg_sys::INT8OID;
const JSONB: pg_sys::Oid = pg_sys::JSONBOID;
const JSONB_ARRAY: pg_sys::Oid = pg_sys::JSONBARRAYOID;

thread_local! {
    /// Kept plans, by the address of their (static) SQL text: cheaper to hash than the text.
    static PREPARED: RefCell<HashMap<usize, OwnedPreparedStatement>> = RefCell::new(HashMap::new());
}

/// Runs `statement`, preparing and keeping it on first use in this backend.
fn run<'conn>(
    client: &SpiClient<'conn>,
    statement: &Statement,
    args: &[DatumWithOid<'_>],
) -> SpiResult<SpiTupleTable<'conn>> {
    PREPARED.with(|prepared| {
        let mut prepared = prepared.borrow_mut();
        let plan = match prepared.entry(statement.sql.as_ptr() as usize) {
            Entry::Occupied(kept) => kept.into_mut(),
            Entry::Vacant(slot) => {
                let types: Vec<PgOid> = statement
                    .params
                    .iter()
                    .map(|oid| PgOid::from(*oid))
                    .collect();
                let plan = if statement.read_only {
                    client.prepare(statement.sql, &types)?
                } else {
                    client.prepare_mut(statement.sql, &types)?
                };
                slot.insert(plan.keep())
            }
        };
        client.select(&*plan, None, args)
    })
}

/// The first column of the first row, `None` when there is no row.
fn first_value<T: IntoDatum + FromDatum>(rows: SpiTupleTable<'_>) -> Option<T> {
    if rows.is_empty() {
        None
    } else {
        rows.first().get_one::<T>().or_raise()
    }
}

fn arg<T: IntoDatum>(value: T) -> DatumWithOid<'static> {
    // SAFETY: the oid is the type's own.
    unsafe { DatumWithOid::new(value, T::type_oid()) }
}

fn nullable<T: IntoDatum>(value: Option<T>) -> DatumWithOid<'static> {
    match value {
        Some(value) => arg(value),
        None => DatumWithOid::null::<T>(),
    }
}

/// The state row of a map, as an append sees it once it holds the map's lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapState {
    /// Size given to chunks started from now on.
    pub chunk_size: i32,
    /// First sequence of the current chunk.
    pub current_first_seq: i64,
    /// Size the current chunk was started with.
    pub current_chunk_size: i32,
    /// Token of the newest archived chunk, `None` before the first rollover.
    pub newest_archived_token: Option<String>,
}

const START: Statement = Statement {
    sql: "INSERT INTO chunked_map.map_state AS s (map, chunk_size, current_first_seq, current_chunk_size)
          VALUES ($1, $2, 1, $2)
          ON CONFLICT (map) DO NOTHING
          RETURNING true",
    params: &[TEXT, INT4],
    read_only: false,
};

/// Creates the map's state row; `false` when the map already existed.
pub fn start(client: &SpiClient<'_>, map: &str, chunk_size: i32) -> bool {
    run(client, &START, &[arg(map), arg(chunk_size)])
        .or_raise()
        .len()
        == 1
}

/// The append lock, `FOR UPDATE NOWAIT`: never waits; a held lock raises 55P03, which the
/// caller reports as 40001. The same statement looks for the newest record of the current
/// chunk at or above `$2`, a hint (the sequence this backend appended last): a backward index
/// scan reads every matching entry of its leaf page, and the hint keeps that to one entry. The
/// probe reads with the statement's snapshot, taken before the lock was granted: if an append
/// committed in between, the sequence derived from it is taken already and the insert fails
/// with a unique violation, which the caller reports as the conflict it is. (A lock that may be
/// waited for is taken by [`LOCK_STATE_WAIT`], and the probe made after it.)
const LOCK_STATE_NOWAIT: Statement = Statement {
    sql: "SELECT s.chunk_size, s.current_first_seq, s.current_chunk_size, s.newest_archived_token,
                 (SELECT c.seq FROM chunked_map.current_record AS c
                  WHERE c.map = $1 AND c.seq >= greatest(s.current_first_seq, $2)
                    AND c.seq < s.current_first_seq + s.current_chunk_size
                  ORDER BY c.seq DESC LIMIT 1)
          FROM chunked_map.map_state AS s
          WHERE s.map = $1
          FOR UPDATE NOWAIT",
    params: &[TEXT, INT8],
    read_only: false,
};

/// The same lock, waiting up to the statement's `lock_timeout` (`chunked_map.lock_timeout`).
const LOCK_STATE_WAIT: Statement = Statement {
    sql: "SELECT s.chunk_size, s.current_first_seq, s.current_chunk_size, s.newest_archived_token
          FROM chunked_map.map_state AS s
          WHERE s.map = $1
          FOR UPDATE",
    params: &[TEXT],
    read_only: false,
};

fn map_state(row: &SpiTupleTable<'_>) -> MapState {
    MapState {
        chunk_size: row.get::<i32>(1).or_raise().unwrap_or_default(),
        current_first_seq: row.get::<i64>(2).or_raise().unwrap_or_default(),
        current_chunk_size: row.get::<i32>(3).or_raise().unwrap_or_default(),
        newest_archived_token: row.get::<String>(4).or_raise(),
    }
}

/// Takes the map's lock without waiting; `None` when the map was never started. Returns its
/// state and the next sequence (see [`LOCK_STATE_NOWAIT`] for what `hint` is).
pub fn lock_state_nowait(client: &SpiClient<'_>, map: &str, hint: i64) -> Option<(MapState, i64)> {
    let rows = run(client, &LOCK_STATE_NOWAIT, &[arg(map), arg(hint)]).or_raise();
    if rows.is_empty() {
        return None;
    }
    let row = rows.first();
    let state = map_state(&row);
    let next = match row.get::<i64>(5).or_raise() {
        // an entry at or above the hint is the newest of the chunk
        Some(newest) => newest + 1,
        // nothing at or above the hint: an empty chunk, or a hint above the newest record (its
        // append rolled back), which only a probe from the chunk's start can tell apart
        None if hint > state.current_first_seq => next_seq(client, map, &state),
        None => state.current_first_seq,
    };
    Some((state, next))
}

/// Takes the map's lock, waiting up to `lock_timeout`; `None` when the map was never started.
pub fn lock_state_wait(client: &SpiClient<'_>, map: &str) -> Option<MapState> {
    let rows = run(client, &LOCK_STATE_WAIT, &[arg(map)]).or_raise();
    (!rows.is_empty()).then(|| map_state(&rows.first()))
}

/// Next sequence of the map: one past the newest record of the current chunk, read with a fresh
/// snapshot by a caller that holds the map's lock. An index probe bounded below by the chunk's
/// first sequence, so dead entries of archived chunks are never visited.
const NEXT_SEQ: Statement = Statement {
    sql: "SELECT coalesce(max(c.seq) + 1, $2)
          FROM chunked_map.current_record AS c
          WHERE c.map = $1 AND c.seq >= $2",
    params: &[TEXT, INT8],
    read_only: false,
};

pub fn next_seq(client: &SpiClient<'_>, map: &str, state: &MapState) -> i64 {
    first_value(run(client, &NEXT_SEQ, &[arg(map), arg(state.current_first_seq)]).or_raise())
        .unwrap_or(state.current_first_seq)
}

/// Adds one record to the current chunk; the caller holds the map's lock and knows the
/// sequence is next and fits.
const INSERT_RECORD: Statement = Statement {
    sql: "INSERT INTO chunked_map.current_record (map, seq, payload) VALUES ($1, $2, $3)",
    params: &[TEXT, INT8, JSONB],
    read_only: false,
};

pub fn insert_record(client: &SpiClient<'_>, map: &str, seq: i64, payload: Jsonb) {
    run(client, &INSERT_RECORD, &[arg(map), arg(seq), arg(payload)]).or_raise();
}

/// Appends `payloads[from..=to]` (1-based) to the current chunk in one statement, starting at
/// `first_seq`. The caller has checked that they fit.
const APPEND_MANY_TO_CURRENT: Statement = Statement {
    sql: "INSERT INTO chunked_map.current_record (map, seq, payload)
          SELECT $1, $2 + u.n - $4, u.payload
          FROM unnest($3) WITH ORDINALITY AS u(payload, n)
          WHERE u.n BETWEEN $4 AND $5",
    params: &[TEXT, INT8, JSONB_ARRAY, INT8, INT8],
    read_only: false,
};

pub fn append_many_to_current(
    client: &SpiClient<'_>,
    map: &str,
    first_seq: i64,
    payloads: JsonbArray,
    from: i64,
    to: i64,
) {
    let args = [arg(map), arg(first_seq), arg(payloads), arg(from), arg(to)];
    run(client, &APPEND_MANY_TO_CURRENT, &args).or_raise();
}

/// Archives the full current chunk and starts the next one, in one statement: the payloads
/// become one immutable row (copied as they are, oldest first), the current chunk's rows go,
/// and the state points at the new chunk. All of it is part of the caller's
/// transaction. Data-modifying CTEs run once each, with the same snapshot. Ranges over the
/// current chunk are bounded on both sides: with an open upper bound a generic plan may guess a
/// third of the table matches and scan all of it (every map's current records and the dead
/// rows of earlier chunks); a closed range is estimated small and always probes the index.
const ROLL_OVER: Statement = Statement {
    sql: "WITH archived AS (
              INSERT INTO chunked_map.archived_chunk (map, first_seq, chunk_size, prev_token, payloads)
              SELECT $1, $2, $3, $4, array_agg(c.payload ORDER BY c.seq)
              FROM chunked_map.current_record AS c
              WHERE c.map = $1 AND c.seq >= $2 AND c.seq < $2 + $3
              RETURNING first_seq
          ), cleared AS (
              DELETE FROM chunked_map.current_record AS c
              WHERE c.map = $1 AND c.seq >= $2 AND c.seq < $2 + $3
              RETURNING c.seq
          )
          UPDATE chunked_map.map_state AS s
          SET current_first_seq = $2 + $3,
              current_chunk_size = s.chunk_size,
              newest_archived_token = $5,
              archived_chunks = s.archived_chunks + 1
          WHERE s.map = $1
          RETURNING s.current_first_seq, s.current_chunk_size",
    params: &[TEXT, INT8, INT4, TEXT, TEXT],
    read_only: false,
};

/// Archives the current chunk under `token`; returns the state of the new current chunk.
pub fn roll_over(client: &SpiClient<'_>, map: &str, state: &MapState, token: String) -> MapState {
    let args = [
        arg(map),
        arg(state.current_first_seq),
        arg(state.current_chunk_size),
        nullable(state.newest_archived_token.clone()),
        arg(token.clone()),
    ];
    let rows = run(client, &ROLL_OVER, &args).or_raise();
    let row = rows.first();
    MapState {
        chunk_size: state.chunk_size,
        current_first_seq: row.get::<i64>(1).or_raise().unwrap_or_default(),
        current_chunk_size: row.get::<i32>(2).or_raise().unwrap_or_default(),
        newest_archived_token: Some(token),
    }
}

/// Changes the size of chunks started from now on; an empty current chunk takes it too.
const SET_CHUNK_SIZE: Statement = Statement {
    sql: "UPDATE chunked_map.map_state AS s
          SET chunk_size = $2,
              current_chunk_size = CASE WHEN $3 THEN $2 ELSE s.current_chunk_size END
          WHERE s.map = $1",
    params: &[TEXT, INT4, pg_sys::BOOLOID],
    read_only: false,
};

pub fn set_chunk_size(client: &SpiClient<'_>, map: &str, chunk_size: i32, current_is_empty: bool) {
    run(
        client,
        &SET_CHUNK_SIZE,
        &[arg(map), arg(chunk_size), arg(current_is_empty)],
    )
    .or_raise();
}

/// The current page: the current chunk's records newest first, and the newest archived token.
/// State and records are read by one statement, so they agree.
const CURRENT_PAGE: Statement = Statement {
    sql: "SELECT jsonb_build_object(
                 'map', s.map,
                 'page_token', 'current',
                 'records', coalesce(
                     (SELECT jsonb_agg(jsonb_build_object('seq', c.seq, 'payload', c.payload) ORDER BY c.seq DESC)
                      FROM chunked_map.current_record AS c
                      WHERE c.map = s.map AND c.seq >= s.current_first_seq
                        AND c.seq < s.current_first_seq + s.current_chunk_size),
                     '[]'::jsonb),
                 'next_page_token', s.newest_archived_token)
          FROM chunked_map.map_state AS s
          WHERE s.map = $1",
    params: &[TEXT],
    read_only: true,
};

/// The current page, `None` when the map was never started.
pub fn current_page(client: &SpiClient<'_>, map: &str) -> Option<Jsonb> {
    first_value(run(client, &CURRENT_PAGE, &[arg(map)]).or_raise())
}

/// An archived page: a function of the stored row alone, hence byte-identical on every read.
const ARCHIVED_PAGE: Statement = Statement {
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
    read_only: true,
};

/// The archived page whose first sequence is `first_seq`, `None` when there is none.
pub fn archived_page(
    client: &SpiClient<'_>,
    map: &str,
    first_seq: i64,
    token: &str,
) -> Option<Jsonb> {
    let args = [arg(map), arg(first_seq), arg(token)];
    first_value(run(client, &ARCHIVED_PAGE, &args).or_raise())
}

const MAP_EXISTS: Statement = Statement {
    sql: "SELECT 1 FROM chunked_map.map_state AS s WHERE s.map = $1",
    params: &[TEXT],
    read_only: true,
};

pub fn map_exists(client: &SpiClient<'_>, map: &str) -> bool {
    !run(client, &MAP_EXISTS, &[arg(map)]).or_raise().is_empty()
}

/// Removes every row of one map. Runs as the tables' owner (the functions are SECURITY
/// DEFINER), which is what the history-protecting triggers allow.
const DROP_MAP: Statement = Statement {
    sql: "WITH archived AS (
              DELETE FROM chunked_map.archived_chunk AS a WHERE a.map = $1 RETURNING 1
          ), current AS (
              DELETE FROM chunked_map.current_record AS c WHERE c.map = $1 RETURNING 1
          )
          DELETE FROM chunked_map.map_state AS s WHERE s.map = $1",
    params: &[TEXT],
    read_only: false,
};

pub fn drop_map(client: &SpiClient<'_>, map: &str) {
    run(client, &DROP_MAP, &[arg(map)]).or_raise();
}

/// What `chunked_info` reports, from the state row and one bounded probe of the current chunk.
const INFO: Statement = Statement {
    sql: "SELECT jsonb_build_object(
                 'map', s.map,
                 'chunk_size', s.chunk_size,
                 'next_seq', n.next_seq,
                 'current_records', n.next_seq - s.current_first_seq,
                 'archived_chunks', s.archived_chunks,
                 'newest_archived_token', s.newest_archived_token,
                 'total_records', n.next_seq - 1)
          FROM chunked_map.map_state AS s
          CROSS JOIN LATERAL (
              SELECT coalesce(max(c.seq) + 1, s.current_first_seq) AS next_seq
              FROM chunked_map.current_record AS c
              WHERE c.map = s.map AND c.seq >= s.current_first_seq) AS n
          WHERE s.map = $1",
    params: &[TEXT],
    read_only: true,
};

/// `chunked_info` of the map, `None` when it was never started.
pub fn info(client: &SpiClient<'_>, map: &str) -> Option<Jsonb> {
    first_value(run(client, &INFO, &[arg(map)]).or_raise())
}

/// One record by sequence: from the current chunk, or from the archived chunk with the greatest
/// first sequence not above it (one probe of the primary key), at index `seq - first_seq + 1`.
const GET_RECORD: Statement = Statement {
    sql: "SELECT CASE WHEN $2 >= s.current_first_seq THEN
                     (SELECT jsonb_build_object('seq', c.seq, 'payload', c.payload)
                      FROM chunked_map.current_record AS c
                      WHERE c.map = s.map AND c.seq = $2)
                 ELSE
                     (SELECT jsonb_build_object('seq', $2, 'payload', a.payloads[($2 - a.first_seq + 1)::integer])
                      FROM chunked_map.archived_chunk AS a
                      WHERE a.map = s.map AND a.first_seq <= $2
                        AND $2 < a.first_seq + a.chunk_size
                      ORDER BY a.first_seq DESC
                      LIMIT 1)
                 END
          FROM chunked_map.map_state AS s
          WHERE s.map = $1",
    params: &[TEXT, INT8],
    read_only: true,
};

/// `Some(None)` when the map exists but has no record `seq`; `None` when the map does not exist.
pub fn get_record(client: &SpiClient<'_>, map: &str, seq: i64) -> Option<Option<Jsonb>> {
    let rows = run(client, &GET_RECORD, &[arg(map), arg(seq)]).or_raise();
    if rows.is_empty() {
        None
    } else {
        Some(rows.first().get_one::<Jsonb>().or_raise())
    }
}

/// What `chunked_verify` needs to know of a map; reads its whole history (it is a DBA's tool,
/// not the append or page path).
pub struct StoredMap {
    pub state: Option<StoredState>,
    pub chunks: Vec<StoredChunk>,
    pub current: CurrentRecords,
}

pub struct StoredState {
    pub chunk_size: i32,
    pub current_first_seq: i64,
    pub current_chunk_size: i32,
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

pub struct CurrentRecords {
    pub count: i64,
    pub min_seq: Option<i64>,
    pub max_seq: Option<i64>,
}

const STORED_STATE: Statement = Statement {
    sql: "SELECT s.chunk_size, s.current_first_seq, s.current_chunk_size,
                 s.newest_archived_token, s.archived_chunks
          FROM chunked_map.map_state AS s
          WHERE s.map = $1",
    params: &[TEXT],
    read_only: true,
};

const STORED_CHUNKS: Statement = Statement {
    sql: "SELECT a.first_seq, a.chunk_size, a.prev_token, a.layout,
                 cardinality(a.payloads),
                 array_ndims(a.payloads) IS DISTINCT FROM 1
                     OR array_lower(a.payloads, 1) <> 1
                     OR array_position(a.payloads, NULL) IS NOT NULL
          FROM chunked_map.archived_chunk AS a
          WHERE a.map = $1
          ORDER BY a.first_seq",
    params: &[TEXT],
    read_only: true,
};

const STORED_CURRENT: Statement = Statement {
    sql: "SELECT count(*), min(c.seq), max(c.seq)
          FROM chunked_map.current_record AS c
          WHERE c.map = $1",
    params: &[TEXT],
    read_only: true,
};

pub fn stored_map(client: &SpiClient<'_>, map: &str) -> StoredMap {
    let state_rows = run(client, &STORED_STATE, &[arg(map)]).or_raise();
    let state = (!state_rows.is_empty()).then(|| {
        let row = state_rows.first();
        StoredState {
            chunk_size: row.get::<i32>(1).or_raise().unwrap_or_default(),
            current_first_seq: row.get::<i64>(2).or_raise().unwrap_or_default(),
            current_chunk_size: row.get::<i32>(3).or_raise().unwrap_or_default(),
            newest_archived_token: row.get::<String>(4).or_raise(),
            archived_chunks: row.get::<i64>(5).or_raise().unwrap_or_default(),
        }
    });
    let chunks = run(client, &STORED_CHUNKS, &[arg(map)])
        .or_raise()
        .map(|row| StoredChunk {
            first_seq: row.get::<i64>(1).or_raise().unwrap_or_default(),
            chunk_size: row.get::<i32>(2).or_raise().unwrap_or_default(),
            prev_token: row.get::<String>(3).or_raise(),
            layout: row.get::<i16>(4).or_raise().unwrap_or_default(),
            record_count: row.get::<i32>(5).or_raise().map_or(0, i64::from),
            malformed: row.get::<bool>(6).or_raise().unwrap_or(true),
        })
        .collect();
    let current_rows = run(client, &STORED_CURRENT, &[arg(map)]).or_raise();
    let row = current_rows.first();
    let current = CurrentRecords {
        count: row.get::<i64>(1).or_raise().unwrap_or_default(),
        min_seq: row.get::<i64>(2).or_raise(),
        max_seq: row.get::<i64>(3).or_raise(),
    };
    StoredMap {
        state,
        chunks,
        current,
    }
}
