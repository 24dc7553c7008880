//! The statements that write a map: start, append (one record, a batch), archive a chunk,
//! resize, announce, drop; and what a writer needs to know of its own transaction's rows.

use pgrx::pg_sys;

use super::state::{map_state, state_columns, MapState, StateColumns};
use crate::error::ChunkedError;
use crate::jsonb::{JsonbArrayDatum, Payload};
use crate::pg::spi::{
    Bool, Bytea, Int4, Int8, JsonbArrayValue, JsonbValue, NotNull, Nullable, Session, Text, Tid,
    Xid,
};
use crate::statements;

/// What an append that reports it wrote: the record's sequence, the state row's new version,
/// and the map's notification channel while its notifications are on.
#[derive(Debug, Clone)]
pub struct Written {
    pub seq: i64,
    pub tid: pg_sys::ItemPointerData,
    pub announce_on: Option<String>,
    /// Whether a consumer of the feed follows the map.
    pub followed: bool,
}

/// "The current chunk has room for a record of `$2` bytes, chunks holding at most `$3`": the
/// SQL form of [`crate::chunking::CurrentChunk::fits`] (a chunk is full at its size in records,
/// or when the record would take it over the byte limit; an empty chunk takes any record).
/// Every statement that uses it has the record's bytes as `$2` and the limit as `$3`.
macro_rules! has_room {
    () => {
        "s.next_seq < s.current_first_seq + s.current_chunk_size
         AND (s.current_bytes + $2 <= $3 OR s.next_seq = s.current_first_seq)"
    };
}
pub(crate) use has_room;

/// The CTE of the one-statement append that records, for a followed map, that it moved in this
/// transaction (the statement is a transaction's first append to the map): `RECORD_CHANGE` for a
/// CTE named `$cte` that returns the map's `followed`.
macro_rules! record_change_cte {
    ($cte:literal) => {
        concat!(
            "moved AS (
                 INSERT INTO chunked_map.map_change AS m (map, xid, at)
                 SELECT $1, pg_current_xact_id(), clock_timestamp() FROM ",
            $cte,
            " AS f WHERE f.followed
                 ON CONFLICT (map) DO UPDATE SET xid = excluded.xid, at = excluded.at
             )"
        )
    };
}

statements! {
    /// Creates the map's state row; no row when one for the map already exists. Under REPEATABLE
    /// READ, PostgreSQL raises 40001 itself when that row was committed after the snapshot. (An
    /// uncommitted change to an existing row would make it wait: callers look first.)
    pub START: Statement<(Text, Int4, Bool), (NotNull<Bool>,)> = write(
        "INSERT INTO chunked_map.map_state AS s
             (map, chunk_size, current_first_seq, current_chunk_size, next_seq, followed)
         VALUES ($1, $2, 1, $2, 1, $3)
         ON CONFLICT (map) DO NOTHING
         RETURNING true"
    );

    /// The one-statement append: takes the map's lock without waiting (`SKIP LOCKED`: a row
    /// another transaction holds is simply not found), advances the state by one record if the
    /// current chunk has room, and inserts the record; returns its sequence. No row when the map
    /// is absent, held by another transaction, its current chunk is full, its appends are
    /// announced, or a consumer of the feed follows it (which the slow path handles, since it
    /// reports them): the caller then takes the slow path, which also covers a race: under READ COMMITTED, a state row changed by a
    /// transaction that committed after the statement's snapshot is locked in its newest
    /// version, which that snapshot cannot update (no row; the slow path's next statement sees
    /// it). The row is found once, through the index, and updated by its address. The record's
    /// INSERT is the main statement, so that nothing else is returned: the cheapest form
    /// PostgreSQL's SQL offers for "lock, advance, insert".
    pub APPEND: Statement<(Text, Int8, Int8, JsonbValue), (NotNull<Int8>,)> = write(concat!(
        "WITH advanced AS (
             UPDATE chunked_map.map_state AS s
             SET next_seq = s.next_seq + 1, current_bytes = s.current_bytes + $2
             WHERE s.ctid = (SELECT l.ctid FROM chunked_map.map_state AS l
                             WHERE l.map = $1 FOR UPDATE SKIP LOCKED)
               AND s.map = $1
               AND NOT s.notify
               AND NOT s.followed
               AND ", has_room!(), "
             RETURNING s.next_seq - 1 AS seq
         )
         INSERT INTO chunked_map.current_record (map, seq, payload)
         SELECT $1, a.seq, $4 FROM advanced AS a
         RETURNING seq"
    ));

    /// [`APPEND`] for a map a consumer of the feed follows (as this backend last saw it): the
    /// same, and the map's move recorded (`RECORD_CHANGE`) when it is followed. A map followed
    /// no longer is appended to all the same (the move is not recorded). Its extra common table
    /// expression costs every append that runs it (17k instructions, bench/callgrind.sh): maps
    /// nobody follows use [`APPEND`].
    pub APPEND_RECORDING_ITS_MOVE: Statement<(Text, Int8, Int8, JsonbValue), (NotNull<Int8>,)> = write(concat!(
        "WITH advanced AS (
             UPDATE chunked_map.map_state AS s
             SET next_seq = s.next_seq + 1, current_bytes = s.current_bytes + $2
             WHERE s.ctid = (SELECT l.ctid FROM chunked_map.map_state AS l
                             WHERE l.map = $1 FOR UPDATE SKIP LOCKED)
               AND s.map = $1
               AND NOT s.notify
               AND ", has_room!(), "
             RETURNING s.next_seq - 1 AS seq, s.followed
         ), ", record_change_cte!("advanced"), "
         INSERT INTO chunked_map.current_record (map, seq, payload)
         SELECT $1, a.seq, $4 FROM advanced AS a
         RETURNING seq"
    ));

    /// The same append on a state row version this transaction already holds the lock on (read
    /// by `LOCK_STATE` or written by an earlier append of the same transaction): found by its
    /// address, without an index probe or a walk through the versions the transaction left
    /// behind. No row when that version is no longer the visible one, or the chunk is full.
    pub APPEND_AT: Statement<(Text, Int8, Int8, JsonbValue, Tid), (NotNull<Int8>, NotNull<Tid>, Nullable<Text>, NotNull<Bool>)> =
        write(concat!(
            "WITH advanced AS (
                 UPDATE chunked_map.map_state AS s
                 SET next_seq = s.next_seq + 1, current_bytes = s.current_bytes + $2
                 WHERE s.ctid = $5 AND s.map = $1
                   AND ", has_room!(), "
                 RETURNING s.next_seq - 1 AS seq, s.ctid,
                           CASE WHEN s.notify THEN s.notify_channel END AS notify_channel,
                           s.followed
             ), appended AS (
                 INSERT INTO chunked_map.current_record (map, seq, payload)
                 SELECT $1, a.seq, $4 FROM advanced AS a
             )
             SELECT a.seq, a.ctid, a.notify_channel, a.followed FROM advanced AS a"
        ));

    /// Records that the map moved in this transaction (see `feed`): the map's row of
    /// `map_change` carries the transaction's id. Run once per transaction and map, by the
    /// holder of the map's lock, so writers of one map never contend here more than they do
    /// for the map itself.
    pub RECORD_CHANGE: Statement<(Text,), ()> = write(
        "INSERT INTO chunked_map.map_change AS m (map, xid, at)
         VALUES ($1, pg_current_xact_id(), clock_timestamp())
         ON CONFLICT (map) DO UPDATE SET xid = excluded.xid, at = excluded.at"
    );

    /// Archives records `$2..$3` of the current chunk (all of them, or one piece of a chunk that
    /// holds more bytes than a chunk may) as one immutable row, payloads copied as they are, in
    /// the index's order (no sort). Ranges over the current chunk are bounded on both sides, so
    /// that a generic plan always probes the index (an open range may be guessed to match a
    /// third of the table and scanned whole).
    pub ARCHIVE_CURRENT_RANGE: Statement<(Text, Int8, Int8, Int4, Text), ()> = write(
        "INSERT INTO chunked_map.archived_chunk (map, first_seq, chunk_size, prev_token, payloads)
         SELECT $1, $2, $4, $5,
                ARRAY(SELECT c.payload FROM chunked_map.current_record AS c
                      WHERE c.map = $1 AND c.seq >= $2 AND c.seq < $3
                      ORDER BY c.seq)"
    );

    /// The current chunk's payloads `$2..$3`, oldest first: only needed when the chunk holds
    /// more bytes than a chunk may (stored by an earlier version, or the setting was lowered
    /// since), to cut it.
    pub CURRENT_PAYLOADS: Statement<(Text, Int8, Int8), (NotNull<JsonbValue>,)> = write(
        "SELECT c.payload
         FROM chunked_map.current_record AS c
         WHERE c.map = $1 AND c.seq >= $2 AND c.seq < $3
         ORDER BY c.seq"
    );

    /// Ends the current chunk `$2..$3` once its records are archived: removes them and starts
    /// the next chunk at `$3`, with the map's chunk size; returns the new state.
    pub CLOSE_CURRENT: Statement<(Text, Int8, Int8, Text, Int8, Tid), StateColumns> = write(concat!(
        "WITH cleared AS (
             DELETE FROM chunked_map.current_record AS c
             WHERE c.map = $1 AND c.seq >= $2 AND c.seq < $3
         )
         UPDATE chunked_map.map_state AS s
         SET next_seq = $3, current_first_seq = $3, current_chunk_size = s.chunk_size,
             current_bytes = 0, newest_archived_token = $4,
             archived_chunks = s.archived_chunks + $5
         WHERE s.ctid = $6 AND s.map = $1
         RETURNING ", state_columns!()
    ));

    /// Archives a full chunk made of payloads given by the caller (a batch append), without
    /// passing them through the current chunk's table.
    pub ARCHIVE_PAYLOADS: Statement<(Text, Int8, Int4, Text, JsonbArrayValue), ()> = write(
        "INSERT INTO chunked_map.archived_chunk (map, first_seq, chunk_size, prev_token, payloads)
         VALUES ($1, $2, $3, $4, $5)"
    );

    /// Adds payloads to the current chunk, sequences from `$2` on.
    pub APPEND_PAYLOADS: Statement<(Text, Int8, JsonbArrayValue), ()> = write(
        "INSERT INTO chunked_map.current_record (map, seq, payload)
         SELECT $1, $2 + u.n - 1, u.payload
         FROM unnest($3) WITH ORDINALITY AS u(payload, n)"
    );

    /// Sets the state after a batch append.
    pub ADVANCE_STATE: Statement<(Text, Tid, Int8, Int8, Int4, Int8, Text, Int8), (NotNull<Tid>,)> = write(
        "UPDATE chunked_map.map_state AS s
         SET next_seq = $3, current_first_seq = $4, current_chunk_size = $5, current_bytes = $6,
             newest_archived_token = $7, archived_chunks = s.archived_chunks + $8
         WHERE s.ctid = $2 AND s.map = $1
         RETURNING s.ctid"
    );

    /// Changes the size of chunks started from now on; an empty current chunk takes it too.
    pub SET_CHUNK_SIZE: Statement<(Text, Tid, Int4), (NotNull<Tid>,)> = write(
        "UPDATE chunked_map.map_state AS s
         SET chunk_size = $3,
             current_chunk_size = CASE WHEN s.next_seq = s.current_first_seq
                                       THEN $3 ELSE s.current_chunk_size END
         WHERE s.ctid = $2 AND s.map = $1
         RETURNING s.ctid"
    );

    /// Turns the announcement of committed appends on or off. The map gets its channel the
    /// first time they are turned on, and keeps it: `chunked_map_` and a random UUID's 32
    /// hexadecimal digits, a name no role can guess from the map's.
    pub SET_NOTIFY: Statement<(Text, Tid, Bool), (NotNull<Tid>, Nullable<Text>)> = write(
        "UPDATE chunked_map.map_state AS s
         SET notify = $3,
             notify_channel = CASE WHEN $3 AND s.notify_channel IS NULL
                                   THEN 'chunked_map_' || replace(gen_random_uuid()::text, '-', '')
                                   ELSE s.notify_channel END
         WHERE s.ctid = $2 AND s.map = $1
         RETURNING s.ctid, s.notify_channel"
    );

    /// Who inserted the record `$2` of the current chunk (its `xmin`).
    pub RECORD_INSERTED_BY: Statement<(Text, Int8), (NotNull<Xid>,)> = write(
        "SELECT c.xmin FROM chunked_map.current_record AS c WHERE c.map = $1 AND c.seq = $2"
    );

    /// The installation's random key (see `name_lock`).
    pub INSTALLATION_SECRET: Statement<(), (NotNull<Bytea>,)> = read(
        "SELECT i.secret FROM chunked_map.installation AS i"
    );

    /// Removes every row of one map; the caller holds its lock. Runs as the tables' owner (the
    /// functions are SECURITY DEFINER), which is what the history-protecting triggers allow.
    /// Consumers' positions in it (those no poll holds now) and its row of `map_change` go too:
    /// a map started again under the name is another incarnation, begins at sequence 1, and
    /// every consumer reads it from there.
    pub DROP_MAP: Statement<(Text,), ()> = write(
        "WITH archived AS (
             DELETE FROM chunked_map.archived_chunk AS a WHERE a.map = $1
         ), current AS (
             DELETE FROM chunked_map.current_record AS c WHERE c.map = $1
         ), positions AS (
             -- never waiting for a poll that holds one: a position left behind belongs to this
             -- map's incarnation, and counts as none for a map started again under the name
             DELETE FROM chunked_map.consumer_position AS p
             WHERE p.ctid = ANY (ARRAY(SELECT q.ctid FROM chunked_map.consumer_position AS q
                                       WHERE q.map = $1 FOR UPDATE SKIP LOCKED))
         ), moved AS (
             DELETE FROM chunked_map.map_change AS m WHERE m.map = $1
         )
         DELETE FROM chunked_map.map_state AS s WHERE s.map = $1"
    );
}

/// Creates the map's state row (`followed`: whether a consumer follows it); `false` when a row
/// for the map already exists.
pub fn start(session: &Session, map: &str, chunk_size: i32, followed: bool) -> bool {
    !session.run(&START, (map, chunk_size, followed)).is_empty()
}

/// [`RECORD_CHANGE`].
pub fn record_change(session: &Session, map: &str) {
    session.run(&RECORD_CHANGE, (map,));
}

/// The record's bytes and the chunk's byte limit, as the statements take them.
fn sizes(payload: Payload<'_>, max_chunk_bytes: usize) -> (i64, i64) {
    (
        i64::try_from(payload.bytes()).unwrap_or(i64::MAX),
        i64::try_from(max_chunk_bytes).unwrap_or(i64::MAX),
    )
}

/// [`APPEND`], or [`APPEND_RECORDING_ITS_MOVE`] for a map `followed` (as far as the caller
/// knows): the record's sequence, `None` for "take the slow path".
pub fn append(
    session: &Session,
    map: &str,
    payload: Payload<'_>,
    max_chunk_bytes: usize,
    followed: bool,
) -> Option<i64> {
    let (bytes, limit) = sizes(payload, max_chunk_bytes);
    let statement = if followed {
        &APPEND_RECORDING_ITS_MOVE
    } else {
        &APPEND
    };
    session
        .run(statement, (map, bytes, limit, payload.value()))
        .first()
        .map(|(seq,)| seq)
}

/// [`APPEND_AT`]: `None` when `tid` is not the visible version or the chunk is full.
pub fn append_at(
    session: &Session,
    map: &str,
    tid: pg_sys::ItemPointerData,
    payload: Payload<'_>,
    max_chunk_bytes: usize,
) -> Option<Written> {
    let (bytes, limit) = sizes(payload, max_chunk_bytes);
    session
        .run(&APPEND_AT, (map, bytes, limit, payload.value(), tid))
        .first()
        .map(|(seq, tid, announce_on, followed)| Written {
            seq,
            tid,
            announce_on,
            followed,
        })
}

/// [`ARCHIVE_CURRENT_RANGE`].
pub fn archive_current_range(
    session: &Session,
    map: &str,
    seqs: std::ops::Range<i64>,
    chunk_size: i32,
    prev_token: Option<&str>,
) {
    session.run_as_lock_holder(
        &ARCHIVE_CURRENT_RANGE,
        (map, seqs.start, seqs.end, chunk_size, prev_token),
    );
}

/// Sizes of the current chunk's payloads `seqs`, oldest first ([`CURRENT_PAYLOADS`]).
pub fn current_payload_sizes(
    session: &Session,
    map: &str,
    seqs: std::ops::Range<i64>,
) -> Vec<usize> {
    session
        .run_as_lock_holder(&CURRENT_PAYLOADS, (map, seqs.start, seqs.end))
        .iter()
        .map(|(payload,)| Payload::measure(payload.jsonb()).bytes())
        .collect()
}

/// [`CLOSE_CURRENT`]; returns the new state.
pub fn close_current(
    session: &Session,
    map: &str,
    state: &MapState,
    newest_token: &str,
    chunks_archived: i64,
) -> MapState {
    session
        .run_as_lock_holder(
            &CLOSE_CURRENT,
            (
                map,
                state.current.first_seq,
                state.current.next_seq,
                newest_token,
                chunks_archived,
                state.tid,
            ),
        )
        .first()
        .map(map_state)
        .unwrap_or_else(|| lost_state_row(map))
}

/// The caller holds the map's lock, yet its state row was not where the lock left it.
pub fn lost_state_row(map: &str) -> ! {
    ChunkedError::Internal {
        context: format!(
            "the state row of map \"{map}\" changed while this transaction held its lock"
        ),
    }
    .raise()
}

/// [`ARCHIVE_PAYLOADS`].
pub fn archive_payloads(
    session: &Session,
    map: &str,
    first_seq: i64,
    chunk_size: i32,
    prev_token: Option<&str>,
    payloads: JsonbArrayDatum<'_>,
) {
    session.run(
        &ARCHIVE_PAYLOADS,
        (map, first_seq, chunk_size, prev_token, payloads),
    );
}

/// [`APPEND_PAYLOADS`].
pub fn append_payloads(
    session: &Session,
    map: &str,
    first_seq: i64,
    payloads: JsonbArrayDatum<'_>,
) {
    session.run(&APPEND_PAYLOADS, (map, first_seq, payloads));
}

/// [`ADVANCE_STATE`] to `state` (its `tid` the version to change), having archived
/// `chunks_archived` more chunks; returns the new version's address.
pub fn advance_state(
    session: &Session,
    map: &str,
    state: &MapState,
    chunks_archived: i64,
) -> pg_sys::ItemPointerData {
    session
        .run(
            &ADVANCE_STATE,
            (
                map,
                state.tid,
                state.current.next_seq,
                state.current.first_seq,
                state.current.size,
                state.current.bytes,
                state.newest_archived_token.as_deref(),
                chunks_archived,
            ),
        )
        .first()
        .map(|(tid,)| tid)
        .unwrap_or_else(|| lost_state_row(map))
}

/// [`SET_CHUNK_SIZE`]: the state row's new address.
pub fn set_chunk_size(
    session: &Session,
    map: &str,
    state: &MapState,
    chunk_size: i32,
) -> pg_sys::ItemPointerData {
    session
        .run(&SET_CHUNK_SIZE, (map, state.tid, chunk_size))
        .first()
        .map(|(tid,)| tid)
        .unwrap_or_else(|| lost_state_row(map))
}

/// [`SET_NOTIFY`]: the state row's new address, and the map's channel.
pub fn set_notify(
    session: &Session,
    map: &str,
    state: &MapState,
    enabled: bool,
) -> (pg_sys::ItemPointerData, Option<String>) {
    session
        .run(&SET_NOTIFY, (map, state.tid, enabled))
        .first()
        .unwrap_or_else(|| lost_state_row(map))
}

/// Whether this transaction (or one of its subtransactions that did not roll back) inserted
/// the record `seq` of the map's current chunk.
pub fn inserted_by_this_transaction(session: &Session, map: &str, seq: i64) -> bool {
    session
        .run(&RECORD_INSERTED_BY, (map, seq))
        .first()
        // SAFETY: looks the id up among this transaction's own.
        .is_some_and(|(xid,)| unsafe { pg_sys::TransactionIdIsCurrentTransactionId(xid) })
}

/// [`INSTALLATION_SECRET`] (empty when the row is missing).
pub fn installation_secret(session: &Session) -> Vec<u8> {
    session
        .run(&INSTALLATION_SECRET, ())
        .first()
        .map(|(secret,)| secret)
        .unwrap_or_default()
}

/// [`DROP_MAP`].
pub fn drop_map(session: &Session, map: &str) {
    session.run(&DROP_MAP, (map,));
}
