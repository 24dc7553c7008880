//! The statements that read a map: pages (newest first), the same pages as rows, records from a
//! sequence on (oldest first), single records, the summary. Every one reads on the calling
//! statement's snapshot; results are copied into the caller's memory.

use crate::jsonb::Jsonb;
use crate::pg::spi::{
    CallerMemory, Int8, JsonbValue, NotNull, Nullable, RowJsonb, Session, Text, Timestamptz,
};
use crate::statements;

/// A record read from a map, its payload copied into the caller's memory.
pub struct Record<'fcx> {
    pub seq: i64,
    pub payload: Jsonb<'fcx>,
    /// When it was appended (a `timestamptz`); `None` for a record appended before 0.5.
    pub at: Option<i64>,
    pub id: Option<String>,
}

/// Records read from a map.
pub type Records<'fcx> = Vec<Record<'fcx>>;

/// The columns a record is read as: `seq, payload, at, id`.
pub type RecordColumns = (
    NotNull<Int8>,
    NotNull<JsonbValue>,
    Nullable<Timestamptz>,
    Nullable<Text>,
);

/// A record as an object of a page or of `chunked_get`: `{"at", "id", "seq", "payload"}`, its
/// time in UTC with microseconds (`2026-12-02T07:47:17.123456Z`) whatever the session's time
/// zone and date style (a page is byte-identical on every read), `null` where not known (before
/// 0.5), its id `null` where it has none.
macro_rules! record_json {
    ($seq:literal, $payload:literal, $at:literal, $id:literal) => {
        concat!(
            "jsonb_build_object('seq', ",
            $seq,
            ", 'payload', ",
            $payload,
            ", 'at', to_char(",
            $at,
            " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), 'id', ",
            $id,
            ")"
        )
    };
}

/// The forward read's SQL: records `$2 < seq < $3` of map `$1`, oldest first, at most `$4`
/// (see [`READ_FORWARD`]; the feed reads the same way on a writer's snapshot).
macro_rules! read_forward_sql {
    () => {
        "SELECT r.seq, r.payload, r.at, r.id
         FROM (
             SELECT a.first_seq + p.i - 1 AS seq, p.payload, p.at, p.id
             FROM chunked_map.archived_chunk AS a
             CROSS JOIN LATERAL unnest(a.payloads, a.ats, a.ids) WITH ORDINALITY AS p(payload, at, id, i)
             WHERE a.map = $1
               AND a.first_seq >= coalesce(
                       (SELECT b.first_seq FROM chunked_map.archived_chunk AS b
                        WHERE b.map = $1 AND b.first_seq <= $2 + 1
                        ORDER BY b.first_seq DESC LIMIT 1), 0)
               AND a.first_seq < $3
             UNION ALL
             SELECT c.seq, c.payload, c.at, c.id
             FROM chunked_map.current_record AS c
             WHERE c.map = $1 AND c.seq > $2 AND c.seq < $3
         ) AS r
         WHERE r.seq > $2 AND r.seq < $3
         ORDER BY r.seq
         LIMIT $4"
    };
}
pub(crate) use read_forward_sql;

statements! {
    /// The current page: the current chunk's records newest first, and the newest archived
    /// token. State and records are read by one statement, so they agree.
    pub CURRENT_PAGE: Statement<(Text,), (NotNull<JsonbValue>,)> = read(concat!(
        "SELECT jsonb_build_object(
                'map', s.map,
                'page_token', 'current',
                'records', coalesce(
                    (SELECT jsonb_agg(", record_json!("c.seq", "c.payload", "c.at", "c.id"), " ORDER BY c.seq DESC)
                     FROM chunked_map.current_record AS c
                     WHERE c.map = s.map AND c.seq >= s.current_first_seq AND c.seq < s.next_seq),
                    '[]'::jsonb),
                'next_page_token', s.newest_archived_token)
         FROM chunked_map.map_state AS s
         WHERE s.map = $1"
    ));

    /// An archived page: a function of the stored row alone, hence byte-identical on every read.
    pub ARCHIVED_PAGE: Statement<(Text, Int8, Text), (NotNull<JsonbValue>,)> = read(concat!(
        "SELECT jsonb_build_object(
                'map', a.map,
                'page_token', $3,
                'records', (SELECT jsonb_agg(", record_json!("a.first_seq + p.i - 1", "p.payload", "p.at", "p.id"), "
                                             ORDER BY p.i DESC)
                            FROM unnest(a.payloads, a.ats, a.ids) WITH ORDINALITY AS p(payload, at, id, i)),
                'next_page_token', a.prev_token)
         FROM chunked_map.archived_chunk AS a
         WHERE a.map = $1 AND a.first_seq = $2"
    ));

    /// The records of the current chunk, newest first (the current page as rows).
    pub CURRENT_RECORDS: Statement<(Text,), RecordColumns> = read(
        "SELECT c.seq, c.payload, c.at, c.id
         FROM chunked_map.map_state AS s
         JOIN chunked_map.current_record AS c
           ON c.map = s.map AND c.seq >= s.current_first_seq AND c.seq < s.next_seq
         WHERE s.map = $1
         ORDER BY c.seq DESC"
    );

    /// The records of one archived chunk, newest first (an archived page as rows).
    pub ARCHIVED_RECORDS: Statement<(Text, Int8), RecordColumns> = read(
        "SELECT a.first_seq + p.i - 1, p.payload, p.at, p.id
         FROM chunked_map.archived_chunk AS a
         CROSS JOIN LATERAL unnest(a.payloads, a.ats, a.ids) WITH ORDINALITY AS p(payload, at, id, i)
         WHERE a.map = $1 AND a.first_seq = $2
         ORDER BY p.i DESC"
    );

    /// Records `$2 < seq < $3`, oldest first, at most `$4`, when the first of them is archived:
    /// from the archived chunk that holds it (one probe of the primary key for the greatest
    /// first sequence not above it), the chunks after it up to the end of the range, and the
    /// current chunk.
    pub READ_FORWARD: Statement<(Text, Int8, Int8, Int8), RecordColumns> = read(
        read_forward_sql!()
    );

    /// The same when they are all in the current chunk: its index alone.
    pub READ_FORWARD_CURRENT: Statement<(Text, Int8, Int8, Int8), RecordColumns> = read(
        "SELECT c.seq, c.payload, c.at, c.id
         FROM chunked_map.current_record AS c
         WHERE c.map = $1 AND c.seq > $2 AND c.seq < $3
         ORDER BY c.seq
         LIMIT $4"
    );

    /// What `chunked_info` reports, from the state row alone. `total_records` is what the map
    /// holds now (`next_seq - oldest_seq`), `trimmed_records` what was removed from its start.
    pub INFO: Statement<(Text,), (NotNull<JsonbValue>,)> = read(
        "SELECT jsonb_build_object(
                'map', s.map,
                'chunk_size', s.chunk_size,
                'next_seq', s.next_seq,
                'current_records', s.next_seq - s.current_first_seq,
                'archived_chunks', s.archived_chunks,
                'newest_archived_token', s.newest_archived_token,
                'total_records', s.next_seq - s.oldest_seq,
                'oldest_seq', s.oldest_seq,
                'trimmed_records', s.oldest_seq - 1,
                'notify', s.notify,
                'id_window', s.id_window)
            || CASE WHEN s.notify THEN jsonb_build_object('notify_channel', s.notify_channel)
                    ELSE '{}'::jsonb END
            || CASE WHEN s.message_stream THEN jsonb_build_object('message_stream', true)
                    ELSE '{}'::jsonb END
            || CASE WHEN s.retain_records IS NOT NULL OR s.retain_age IS NOT NULL THEN
                    jsonb_build_object('retention', jsonb_build_object(
                        'max_records', s.retain_records, 'max_age', s.retain_age::text))
                    ELSE '{}'::jsonb END
         FROM chunked_map.map_state AS s
         WHERE s.map = $1"
    );

    /// One record by sequence: from the current chunk, or from the archived chunk with the
    /// greatest first sequence not above it (one probe of the primary key), at index
    /// `seq - first_seq + 1`; NULL for a sequence the map has not (or no longer has: the second
    /// column is the oldest it keeps).
    pub GET_RECORD: Statement<(Text, Int8), (Nullable<JsonbValue>, NotNull<Int8>)> = read(concat!(
        "SELECT CASE
                WHEN $2 < s.oldest_seq OR $2 >= s.next_seq THEN NULL
                WHEN $2 >= s.current_first_seq THEN
                    (SELECT ", record_json!("c.seq", "c.payload", "c.at", "c.id"), "
                     FROM chunked_map.current_record AS c
                     WHERE c.map = s.map AND c.seq = $2)
                ELSE
                    (SELECT CASE WHEN $2 < a.first_seq + cardinality(a.payloads) THEN ",
                                record_json!("$2", "a.payloads[($2 - a.first_seq + 1)::integer]",
                                             "a.ats[($2 - a.first_seq + 1)::integer]",
                                             "a.ids[($2 - a.first_seq + 1)::integer]"), "
                            END
                     FROM chunked_map.archived_chunk AS a
                     WHERE a.map = s.map AND a.first_seq <= $2
                     ORDER BY a.first_seq DESC
                     LIMIT 1)
                END,
                s.oldest_seq
         FROM chunked_map.map_state AS s
         WHERE s.map = $1"
    ));
}

/// The current page, `None` when the map was never started.
pub fn current_page<'fcx>(
    session: &Session,
    caller: CallerMemory<'fcx>,
    map: &str,
) -> Option<Jsonb<'fcx>> {
    session
        .run(&CURRENT_PAGE, (map,))
        .first()
        .map(|(page,)| page.copy_to(caller))
}

/// The archived page whose first sequence is `first_seq`, `None` when there is none.
pub fn archived_page<'fcx>(
    session: &Session,
    caller: CallerMemory<'fcx>,
    map: &str,
    first_seq: i64,
    token: &str,
) -> Option<Jsonb<'fcx>> {
    session
        .run(&ARCHIVED_PAGE, (map, first_seq, token))
        .first()
        .map(|(page,)| page.copy_to(caller))
}

fn copied<'r, 'fcx>(
    caller: CallerMemory<'fcx>,
    rows: impl Iterator<Item = (i64, RowJsonb<'r>, Option<i64>, Option<String>)>,
) -> Records<'fcx> {
    rows.map(|(seq, payload, at, id)| Record {
        seq,
        payload: payload.copy_to(caller),
        at,
        id,
    })
    .collect()
}

pub fn current_records<'fcx>(
    session: &Session,
    caller: CallerMemory<'fcx>,
    map: &str,
) -> Records<'fcx> {
    copied(caller, session.run(&CURRENT_RECORDS, (map,)).iter())
}

pub fn archived_records<'fcx>(
    session: &Session,
    caller: CallerMemory<'fcx>,
    map: &str,
    first_seq: i64,
) -> Records<'fcx> {
    copied(
        caller,
        session.run(&ARCHIVED_RECORDS, (map, first_seq)).iter(),
    )
}

/// Records after `after_seq` up to `end_seq` (exclusive), at most `max_records`, oldest first;
/// `current_first_seq` tells whether any is archived.
pub fn read_forward<'fcx>(
    session: &Session,
    caller: CallerMemory<'fcx>,
    map: &str,
    after_seq: i64,
    (end_seq, current_first_seq): (i64, i64),
    max_records: i32,
) -> Records<'fcx> {
    let statement = if after_seq.saturating_add(1) >= current_first_seq {
        &READ_FORWARD_CURRENT
    } else {
        &READ_FORWARD
    };
    let arguments = (map, after_seq, end_seq, i64::from(max_records));
    copied(caller, session.run(statement, arguments).iter())
}

/// `chunked_info` of the map, `None` when it was never started.
pub fn info<'fcx>(session: &Session, caller: CallerMemory<'fcx>, map: &str) -> Option<Jsonb<'fcx>> {
    session
        .run(&INFO, (map,))
        .first()
        .map(|(info,)| info.copy_to(caller))
}

/// A record looked up by sequence in a map that exists.
pub enum Looked<'fcx> {
    Found(Jsonb<'fcx>),
    /// The map has no such record; its oldest kept sequence is this.
    Missing {
        oldest_seq: i64,
    },
}

/// `None` when the map does not exist.
pub fn get_record<'fcx>(
    session: &Session,
    caller: CallerMemory<'fcx>,
    map: &str,
    seq: i64,
) -> Option<Looked<'fcx>> {
    session
        .run(&GET_RECORD, (map, seq))
        .first()
        .map(|(record, oldest_seq)| match record {
            Some(record) => Looked::Found(record.copy_to(caller)),
            None => Looked::Missing { oldest_seq },
        })
}
