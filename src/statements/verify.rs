//! What `chunked_verify` reads of a map: its whole history (it is a DBA's tool, not the append
//! or page path), all on one snapshot.

use crate::chunking::CurrentChunk;
use crate::jsonb::Payload;
use crate::pg::spi::{Bool, Int4, Int8, JsonbValue, NotNull, Nullable, Session, Text};
use crate::statements;

/// A map's storage as stored.
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
    pub oldest_seq: i64,
}

pub struct StoredChunk {
    pub first_seq: i64,
    pub chunk_size: i32,
    pub prev_token: Option<String>,
    pub layout: i32,
    pub record_count: i64,
    /// NULL payloads, or payloads, times or ids that are not one-dimensional arrays from index 1
    /// of one element per record.
    pub malformed: bool,
}

pub struct StoredRecord {
    pub seq: i64,
    pub bytes: usize,
}

statements! {
    pub STORED_STATE: Statement<(Text,), (
        NotNull<Int4>, NotNull<Int8>, NotNull<Int8>, NotNull<Int4>, NotNull<Int8>, Nullable<Text>, NotNull<Int8>,
        NotNull<Int8>,
    )> = read(
        "SELECT s.chunk_size, s.current_first_seq, s.next_seq, s.current_chunk_size,
                s.current_bytes, s.newest_archived_token, s.archived_chunks, s.oldest_seq
         FROM chunked_map.map_state AS s
         WHERE s.map = $1"
    );

    pub STORED_CHUNKS: Statement<(Text,), (
        NotNull<Int8>, NotNull<Int4>, Nullable<Text>, NotNull<Int4>, Nullable<Int8>, Nullable<Bool>,
    )> = read(
        "SELECT a.first_seq, a.chunk_size, a.prev_token, a.layout::integer,
                cardinality(a.payloads)::bigint,
                array_ndims(a.payloads) IS DISTINCT FROM 1
                    OR array_lower(a.payloads, 1) <> 1
                    OR array_position(a.payloads, NULL) IS NOT NULL
                    OR (a.ats IS NOT NULL AND (array_ndims(a.ats) IS DISTINCT FROM 1
                        OR array_lower(a.ats, 1) <> 1
                        OR cardinality(a.ats) <> cardinality(a.payloads)))
                    OR (a.ids IS NOT NULL AND (array_ndims(a.ids) IS DISTINCT FROM 1
                        OR array_lower(a.ids, 1) <> 1
                        OR cardinality(a.ids) <> cardinality(a.payloads)))
         FROM chunked_map.archived_chunk AS a
         WHERE a.map = $1
         ORDER BY a.first_seq"
    );

    pub STORED_CURRENT: Statement<(Text,), (NotNull<Int8>, NotNull<JsonbValue>)> = read(
        "SELECT c.seq, c.payload
         FROM chunked_map.current_record AS c
         WHERE c.map = $1
         ORDER BY c.seq"
    );
}

pub fn stored_map(session: &Session, map: &str) -> StoredMap {
    let state = session.run(&STORED_STATE, (map,)).first().map(
        |(
            chunk_size,
            first_seq,
            next_seq,
            size,
            bytes,
            newest_archived_token,
            archived_chunks,
            oldest_seq,
        )| {
            StoredState {
                chunk_size,
                current: CurrentChunk {
                    first_seq,
                    next_seq,
                    size,
                    bytes,
                },
                newest_archived_token,
                archived_chunks,
                oldest_seq,
            }
        },
    );
    let chunks = session
        .run(&STORED_CHUNKS, (map,))
        .iter()
        .map(
            |(first_seq, chunk_size, prev_token, layout, record_count, malformed)| StoredChunk {
                first_seq,
                chunk_size,
                prev_token,
                layout,
                record_count: record_count.unwrap_or(0),
                malformed: malformed.unwrap_or(true),
            },
        )
        .collect();
    let current = session
        .run(&STORED_CURRENT, (map,))
        .iter()
        .map(|(seq, payload)| StoredRecord {
            seq,
            bytes: Payload::measure(payload.jsonb()).bytes(),
        })
        .collect();
    StoredMap {
        state,
        chunks,
        current,
    }
}
