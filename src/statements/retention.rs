//! The statements that remove a map's oldest archived chunks (`chunked_trim`, the retention
//! policy) and keep its policy. Every one runs as the holder of the map's lock.

use pgrx::pg_sys;

use super::state::{map_state, state_columns, MapState, StateColumns};
use super::writes::lost_state_row;
use crate::pg::spi::{Bool, Int8, IntervalValue, NotNull, Nullable, Session, Text, Tid};
use crate::statements;

/// An archived chunk as retention looks at it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Aged {
    pub first_seq: i64,
    /// Archived longer ago than the map's `retain_age` (false when it has none).
    pub past_age: bool,
}

statements! {
    /// The map's oldest archived chunks, oldest first, at most `$2`, each with whether its
    /// newest record is older than the map's `retain_age` (measured from the transaction's
    /// start, so never later than the clock; compared as intervals, so that no age is out of
    /// range). A record appended before 0.5 has no time: a chunk none of whose records has one
    /// counts from when it was archived. Reads the chunks' rows and times, never their payloads.
    pub OLDEST_CHUNKS: Statement<(Text, Int8), (NotNull<Int8>, NotNull<Bool>)> = write(
        "SELECT a.first_seq,
                coalesce(pg_catalog.now() - a.newest_at >= s.retain_age, false)
         FROM chunked_map.map_state AS s
         CROSS JOIN LATERAL (
             SELECT b.first_seq,
                    coalesce((SELECT max(t.at) FROM unnest(b.ats) AS t(at)), b.archived_at)
                        AS newest_at
             FROM chunked_map.archived_chunk AS b
             WHERE b.map = s.map
             ORDER BY b.first_seq
             LIMIT $2
         ) AS a
         WHERE s.map = $1
         ORDER BY a.first_seq"
    );

    /// The first sequence of the archived chunk that holds sequence `$2` (the greatest first
    /// sequence not above it; one probe of the primary key), NULL when none is that old.
    pub CHUNK_HOLDING: Statement<(Text, Int8), (Nullable<Int8>,)> = write(
        "SELECT max(a.first_seq)
         FROM chunked_map.archived_chunk AS a
         WHERE a.map = $1 AND a.first_seq <= $2"
    );

    /// Removes the map's archived chunks before sequence `$2` (whole chunks: `$2` is the first
    /// sequence of a kept chunk, or of the current chunk), makes the chunk at `$2` the oldest
    /// (its page has no older page now) and moves the map's oldest sequence to `$2`; returns the
    /// new state; the ids of the removed records are forgotten (see `record_ids`). The removed
    /// rows' space (and their TOAST) is PostgreSQL's to reuse once no snapshot can see them
    /// (VACUUM).
    pub TRIM_TO: Statement<(Text, Int8, Tid), StateColumns> = write(concat!(
        "WITH removed AS (
             DELETE FROM chunked_map.archived_chunk AS a
             WHERE a.map = $1 AND a.first_seq < $2
             RETURNING a.first_seq
         ), forgotten AS (
             DELETE FROM chunked_map.record_id AS r
             WHERE r.map = $1 AND r.seq < $2
         ), unlinked AS (
             UPDATE chunked_map.archived_chunk AS a
             SET prev_token = NULL
             WHERE a.map = $1 AND a.first_seq = $2 AND a.prev_token IS NOT NULL
         )
         UPDATE chunked_map.map_state AS s
         SET oldest_seq = $2,
             archived_chunks = s.archived_chunks - (SELECT count(*) FROM removed),
             newest_archived_token = CASE WHEN $2 >= s.current_first_seq THEN NULL
                                          ELSE s.newest_archived_token END
         WHERE s.ctid = $3 AND s.map = $1
         RETURNING ", state_columns!()
    ));

    /// Sets the map's retention policy (NULL: no limit).
    pub SET_RETENTION: Statement<(Text, Tid, Int8, IntervalValue), (NotNull<Tid>,)> = write(
        "UPDATE chunked_map.map_state AS s
         SET retain_records = $3, retain_age = $4
         WHERE s.ctid = $2 AND s.map = $1
         RETURNING s.ctid"
    );

    /// Every map with a retention policy, by name.
    pub RETAINED_MAPS: Statement<(), (NotNull<Text>,)> = write(
        "SELECT s.map
         FROM chunked_map.map_state AS s
         WHERE s.retain_records IS NOT NULL OR s.retain_age IS NOT NULL
         ORDER BY s.map"
    );
}

/// [`OLDEST_CHUNKS`]: at most `limit` of them.
pub fn oldest_chunks(session: &Session, map: &str, limit: i64) -> Vec<Aged> {
    session
        .run_as_lock_holder(&OLDEST_CHUNKS, (map, limit))
        .iter()
        .map(|(first_seq, past_age)| Aged {
            first_seq,
            past_age,
        })
        .collect()
}

/// [`CHUNK_HOLDING`].
pub fn chunk_holding(session: &Session, map: &str, seq: i64) -> Option<i64> {
    session
        .run_as_lock_holder(&CHUNK_HOLDING, (map, seq))
        .first()
        .and_then(|(first_seq,)| first_seq)
}

/// [`TRIM_TO`]: the new state.
pub fn trim_to(session: &Session, map: &str, state: &MapState, first_kept: i64) -> MapState {
    session
        .run_as_lock_holder(&TRIM_TO, (map, first_kept, state.tid))
        .first()
        .map(map_state)
        .unwrap_or_else(|| lost_state_row(map))
}

/// [`SET_RETENTION`]: the state row's new address.
pub fn set_retention(
    session: &Session,
    map: &str,
    state: &MapState,
    max_records: Option<i64>,
    max_age: Option<pgrx::datum::Interval>,
) -> pg_sys::ItemPointerData {
    session
        .run(&SET_RETENTION, (map, state.tid, max_records, max_age))
        .first()
        .map(|(tid,)| tid)
        .unwrap_or_else(|| lost_state_row(map))
}

/// [`RETAINED_MAPS`].
pub fn retained_maps(session: &Session) -> Vec<String> {
    session
        .run(&RETAINED_MAPS, ())
        .iter()
        .map(|(map,)| map)
        .collect()
}
