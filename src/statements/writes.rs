//! The statements that write a map: start, append (one record, a batch), archive a chunk,
//! resize, announce, drop; and what a writer needs to know of its own transaction's rows.

use pgrx::pg_sys;

use super::state::{map_state, state_columns, MapState, StateColumns};
use crate::error::ChunkedError;
use crate::jsonb::{JsonbArrayDatum, Payload, TextArrayDatum};
use crate::pg::spi::{
    Bool, Bytea, Int4, Int8, JsonbArrayValue, JsonbValue, NotNull, Nullable, Session, Text,
    TextArrayValue, Tid, Timestamptz, Xid,
};
use crate::statements;

/// A record to write: its payload, the time it is appended at (the transaction's start), the
/// id its writer gave it, and whether it is a message (see `stream`; the caller has checked
/// that the map takes it, and a message makes the map a stream if it is not one).
#[derive(Clone, Copy)]
pub struct NewRecord<'a> {
    pub payload: Payload<'a>,
    pub at: i64,
    pub id: Option<&'a str>,
    pub message: bool,
}

/// What an append that reports it wrote: the record's sequence, the state row's new version,
/// and the map's notification channel while its notifications are on.
#[derive(Debug, Clone)]
pub struct Written {
    pub seq: i64,
    pub tid: pg_sys::ItemPointerData,
    pub announce_on: Option<String>,
    /// Whether a consumer of the feed follows the map.
    pub followed: bool,
    /// The record's address in `current_record`, where it was written directly (SQL writes do
    /// not ask for it).
    pub record: Option<pg_sys::ItemPointerData>,
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

    /// The SQL write of one record, part one: advances the state row version this transaction
    /// holds the lock on (found by its address: no index probe, no walk through the versions
    /// the transaction left behind) by one record of `$2` bytes (a message, `$4`, makes the map a
    /// stream: `stream`); returns the record's sequence
    /// and the version's new address. The caller has checked that the chunk has room
    /// (`chunking::CurrentChunk::fits`). An `UPDATE ... RETURNING` and an `INSERT ... VALUES`
    /// on one map are each routed straight to its shard by Citus (a CTE feeding an
    /// `INSERT ... SELECT` would run as separate steps through intermediate results).
    pub ADVANCE_AT: Statement<(Text, Int8, Tid, Bool), (NotNull<Int8>, NotNull<Tid>)> = write(
        "UPDATE chunked_map.map_state AS s
         SET next_seq = s.next_seq + 1, current_bytes = s.current_bytes + $2,
             message_stream = s.message_stream OR $4
         WHERE s.ctid = $3 AND s.map = $1
         RETURNING s.next_seq - 1 AS seq, s.ctid"
    );

    /// The SQL write of one record, part two: the record itself, with its time and id.
    pub INSERT_RECORD: Statement<(Text, Int8, JsonbValue, Timestamptz, Text), ()> = write(
        "INSERT INTO chunked_map.current_record (map, seq, payload, at, id)
         VALUES ($1, $2, $3, $4, $5)"
    );

    /// The map's channel while its notifications are on, from the state row version this
    /// transaction wrote (after a direct write to an announced map).
    pub ANNOUNCED_ON: Statement<(Text, Tid), (Nullable<Text>,)> = write(
        "SELECT CASE WHEN s.notify THEN s.notify_channel END
         FROM chunked_map.map_state AS s WHERE s.ctid = $2 AND s.map = $1"
    );

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
    /// holds more bytes than a chunk may) as one immutable row: payloads copied as they are, their
    /// times and ids index for index (`ids` NULL when none has one), from one scan of the range
    /// in the index's order (no sort): the aggregates read the ordered subquery as it comes, which
    /// PostgreSQL keeps as a subquery (one with ORDER BY is never pulled up into the query above)
    /// with nothing between it and them to reorder its rows.
    /// Ranges over the current chunk are bounded on both sides, so that a generic plan always
    /// probes the index (an open range may be guessed to match a third of the table and scanned
    /// whole).
    pub ARCHIVE_CURRENT_RANGE: Statement<(Text, Int8, Int8, Int4, Text), ()> = write(
        "INSERT INTO chunked_map.archived_chunk
             (map, first_seq, chunk_size, prev_token, payloads, ats, ids)
         SELECT $1, $2, $4, $5, coalesce(r.payloads, '{}'), r.ats,
                CASE WHEN r.with_ids THEN r.ids END
         FROM (SELECT array_agg(o.payload) AS payloads, array_agg(o.at) AS ats,
                      array_agg(o.id) AS ids, bool_or(o.id IS NOT NULL) AS with_ids
               FROM (SELECT c.payload, c.at, c.id FROM chunked_map.current_record AS c
                     WHERE c.map = $1 AND c.seq >= $2 AND c.seq < $3
                     ORDER BY c.seq) AS o) AS r"
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

    /// Ends the current chunk `$2..$3` once its records are archived: removes them, forgets the
    /// ids of records below the map's id window `$7` (NULL: none; see `record_ids`), and starts
    /// the next chunk at `$3`, with the map's chunk size; returns the new state.
    pub CLOSE_CURRENT: Statement<(Text, Int8, Int8, Text, Int8, Tid, Int8), StateColumns> = write(concat!(
        "WITH cleared AS (
             DELETE FROM chunked_map.current_record AS c
             WHERE c.map = $1 AND c.seq >= $2 AND c.seq < $3
         ), forgotten AS (
             DELETE FROM chunked_map.record_id AS r
             WHERE r.map = $1 AND r.seq < $3 - $7
         )
         UPDATE chunked_map.map_state AS s
         SET next_seq = $3, current_first_seq = $3, current_chunk_size = s.chunk_size,
             current_bytes = 0, newest_archived_token = $4,
             archived_chunks = s.archived_chunks + $5
         WHERE s.ctid = $6 AND s.map = $1
         RETURNING ", state_columns!()
    ));

    /// Archives a full chunk made of payloads given by the caller (a batch append), without
    /// passing them through the current chunk's table: each record's time `$6`, ids `$7`.
    pub ARCHIVE_PAYLOADS: Statement<(Text, Int8, Int4, Text, JsonbArrayValue, Timestamptz, TextArrayValue), ()> = write(
        "INSERT INTO chunked_map.archived_chunk
             (map, first_seq, chunk_size, prev_token, payloads, ats, ids)
         VALUES ($1, $2, $3, $4, $5, array_fill($6, ARRAY[cardinality($5)]), $7)"
    );

    /// Adds payloads to the current chunk, sequences from `$2` on, with time `$4` and ids `$5`
    /// (NULL: none has one).
    pub APPEND_PAYLOADS: Statement<(Text, Int8, JsonbArrayValue, Timestamptz, TextArrayValue), ()> = write(
        "INSERT INTO chunked_map.current_record (map, seq, payload, at, id)
         SELECT $1, $2 + u.n - 1, u.payload, $4, u.id
         FROM unnest($3, $5) WITH ORDINALITY AS u(payload, id, n)"
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

    /// Sets how many of its newest records' ids the map remembers (NULL: all it keeps).
    pub SET_ID_WINDOW: Statement<(Text, Tid, Int8), StateColumns> = write(concat!(
        "UPDATE chunked_map.map_state AS s
         SET id_window = $3
         WHERE s.ctid = $2 AND s.map = $1
         RETURNING ", state_columns!()
    ));

    /// A new notification channel: `chunked_map_` and a random UUID's 32 hexadecimal digits, a
    /// name no role can guess from the map's. Made by a statement of its own, on the node the
    /// call runs on: Citus refuses a volatile function in an `UPDATE` of a distributed table.
    pub NEW_CHANNEL: Statement<(), (NotNull<Text>,)> = read(
        "SELECT 'chunked_map_' || pg_catalog.replace(pg_catalog.gen_random_uuid()::text, '-', '')"
    );

    /// Turns the announcement of committed appends on or off. The map gets its channel (`$4`,
    /// from [`NEW_CHANNEL`]) the first time they are turned on, and keeps it.
    pub SET_NOTIFY: Statement<(Text, Tid, Bool, Text), (NotNull<Tid>, Nullable<Text>)> = write(
        "UPDATE chunked_map.map_state AS s
         SET notify = $3,
             notify_channel = CASE WHEN $3 AND s.notify_channel IS NULL THEN $4
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
    /// The map's move (a statement of its own, run where moves are recorded: not on a Citus
    /// cluster, where `map_change` is not distributed).
    pub FORGET_MOVE: Statement<(Text,), ()> = write(
        "DELETE FROM chunked_map.map_change AS m WHERE m.map = $1"
    );

    pub DROP_MAP: Statement<(Text,), ()> = write(
        "WITH archived AS (
             DELETE FROM chunked_map.archived_chunk AS a WHERE a.map = $1
         ), current AS (
             DELETE FROM chunked_map.current_record AS c WHERE c.map = $1
         ), positions AS (
             -- never waiting for a poll that holds one: a position left behind belongs to this
             -- map's incarnation, and counts as none for a map started again under the name (by
             -- key, not ctid: on a Citus cluster the positions are distributed)
             DELETE FROM chunked_map.consumer_position AS p
             WHERE p.map = $1
               AND p.consumer IN (SELECT q.consumer FROM chunked_map.consumer_position AS q
                                  WHERE q.map = $1 FOR UPDATE SKIP LOCKED)
         ), ids AS (
             DELETE FROM chunked_map.record_id AS r WHERE r.map = $1
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

/// The SQL write of one record ([`ADVANCE_AT`], then [`INSERT_RECORD`]) into the map whose
/// lock this transaction holds, its state row version at `state.tid`, the chunk having room.
pub fn write_record(
    session: &Session,
    map: &str,
    state: &MapState,
    record: NewRecord<'_>,
) -> Written {
    let bytes = i64::try_from(record.payload.bytes()).unwrap_or(i64::MAX);
    let (seq, tid) = session
        .run(&ADVANCE_AT, (map, bytes, state.tid, record.message))
        .first()
        .unwrap_or_else(|| lost_state_row(map));
    session.run(
        &INSERT_RECORD,
        (map, seq, record.payload.value(), record.at, record.id),
    );
    Written {
        seq,
        tid,
        announce_on: state.announce_on.clone(),
        followed: state.followed,
        record: None,
    }
}

/// [`ANNOUNCED_ON`].
pub fn announced_on(session: &Session, map: &str, tid: pg_sys::ItemPointerData) -> Option<String> {
    session
        .run(&ANNOUNCED_ON, (map, tid))
        .first()
        .unwrap_or_else(|| lost_state_row(map))
        .0
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
                state.id_window,
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

/// Records of a batch, as one statement writes them: payloads, their ids (`None`: none has
/// one), and their time.
#[derive(Clone, Copy)]
pub struct BatchRecords<'a> {
    pub payloads: JsonbArrayDatum<'a>,
    pub ids: Option<TextArrayDatum<'a>>,
    pub at: i64,
}

/// [`ARCHIVE_PAYLOADS`].
pub fn archive_payloads(
    session: &Session,
    map: &str,
    first_seq: i64,
    chunk_size: i32,
    prev_token: Option<&str>,
    records: BatchRecords<'_>,
) {
    session.run(
        &ARCHIVE_PAYLOADS,
        (
            map,
            first_seq,
            chunk_size,
            prev_token,
            records.payloads,
            records.at,
            records.ids,
        ),
    );
}

/// [`APPEND_PAYLOADS`].
pub fn append_payloads(session: &Session, map: &str, first_seq: i64, records: BatchRecords<'_>) {
    session.run(
        &APPEND_PAYLOADS,
        (map, first_seq, records.payloads, records.at, records.ids),
    );
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

/// [`SET_ID_WINDOW`]: the new state.
pub fn set_id_window(
    session: &Session,
    map: &str,
    state: &MapState,
    window: Option<i64>,
) -> MapState {
    session
        .run(&SET_ID_WINDOW, (map, state.tid, window))
        .first()
        .map(map_state)
        .unwrap_or_else(|| lost_state_row(map))
}

/// [`SET_NOTIFY`]: the state row's new address, and the map's channel.
pub fn set_notify(
    session: &Session,
    map: &str,
    state: &MapState,
    enabled: bool,
) -> (pg_sys::ItemPointerData, Option<String>) {
    // made for a map turned on (it is kept only where the map has none yet)
    let channel = enabled.then(|| {
        session
            .run(&NEW_CHANNEL, ())
            .first()
            .map(|(channel,)| channel)
            .unwrap_or_else(|| {
                ChunkedError::Internal {
                    context: "no notification channel was made".to_owned(),
                }
                .raise()
            })
    });
    session
        .run(&SET_NOTIFY, (map, state.tid, enabled, channel.as_deref()))
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

/// [`INSTALLATION_SECRET`]. The row is made by the install script and never removed: without it
/// the name locks' keys would be guessable, so its absence is an internal error.
pub fn installation_secret(session: &Session) -> Vec<u8> {
    session
        .run(&INSTALLATION_SECRET, ())
        .first()
        .map(|(secret,)| secret)
        .unwrap_or_else(|| {
            ChunkedError::Internal {
                context: "the installation's secret (chunked_map.installation) is missing".into(),
            }
            .raise()
        })
}

/// [`DROP_MAP`], and [`FORGET_MOVE`] where moves are recorded.
pub fn drop_map(session: &Session, map: &str, moves_recorded: bool) {
    session.run(&DROP_MAP, (map,));
    if moves_recorded {
        session.run(&FORGET_MOVE, (map,));
    }
}
