//! The statements of record ids (see `record_ids`): which sequence an id a map remembers was
//! appended as, remembering ids, and forgetting those outside the map's window or removed.

use crate::jsonb::TextArrayDatum;
use crate::pg::spi::{Int8, NotNull, Session, Text, TextArrayValue};
use crate::statements;

statements! {
    /// The sequence the record with id `$2` of map `$1` got, while the map remembers it. Run by
    /// the holder of the map's lock (a writer's snapshot: an id committed while it waited is
    /// seen).
    pub APPENDED_AS: Statement<(Text, Text), (NotNull<Int8>,)> = write(
        "SELECT r.seq FROM chunked_map.record_id AS r WHERE r.map = $1 AND r.id = $2"
    );

    /// The same for several ids (a batch): `(id, seq)` of those the map remembers.
    pub APPENDED_AS_ANY: Statement<(Text, TextArrayValue), (NotNull<Text>, NotNull<Int8>)> = write(
        "SELECT r.id, r.seq FROM chunked_map.record_id AS r WHERE r.map = $1 AND r.id = ANY ($2)"
    );

    /// The same on the calling statement's snapshot (a reader looking a record up by its id).
    pub FIND: Statement<(Text, Text), (NotNull<Int8>,)> = read(
        "SELECT r.seq FROM chunked_map.record_id AS r WHERE r.map = $1 AND r.id = $2"
    );

    /// Remembers that the record `$3` of map `$1` has id `$2`.
    pub REMEMBER: Statement<(Text, Text, Int8), ()> = write(
        "INSERT INTO chunked_map.record_id (map, id, seq) VALUES ($1, $2, $3)"
    );

    /// Remembers the ids of records `$2`, `$2 + 1`, … (`$3`, NULL where a record has none).
    pub REMEMBER_FROM: Statement<(Text, Int8, TextArrayValue), ()> = write(
        "INSERT INTO chunked_map.record_id (map, id, seq)
         SELECT $1, u.id, $2 + u.n - 1
         FROM unnest($3) WITH ORDINALITY AS u(id, n)
         WHERE u.id IS NOT NULL"
    );

    /// Forgets the ids of the map's records below `$2`.
    pub FORGET_BELOW: Statement<(Text, Int8), ()> = write(
        "DELETE FROM chunked_map.record_id AS r WHERE r.map = $1 AND r.seq < $2"
    );
}

/// [`APPENDED_AS`].
pub fn appended_as(session: &Session, map: &str, id: &str) -> Option<i64> {
    session
        .run(&APPENDED_AS, (map, id))
        .first()
        .map(|(seq,)| seq)
}

/// [`APPENDED_AS_ANY`].
pub fn appended_as_any(
    session: &Session,
    map: &str,
    ids: TextArrayDatum<'_>,
) -> Vec<(String, i64)> {
    session
        .run(&APPENDED_AS_ANY, (map, Some(ids)))
        .iter()
        .collect()
}

/// [`FIND`].
pub fn find(session: &Session, map: &str, id: &str) -> Option<i64> {
    session.run(&FIND, (map, id)).first().map(|(seq,)| seq)
}

/// [`REMEMBER`].
pub fn remember(session: &Session, map: &str, id: &str, seq: i64) {
    session.run(&REMEMBER, (map, id, seq));
}

/// [`REMEMBER_FROM`].
pub fn remember_from(session: &Session, map: &str, first_seq: i64, ids: TextArrayDatum<'_>) {
    session.run(&REMEMBER_FROM, (map, first_seq, Some(ids)));
}

/// [`FORGET_BELOW`].
pub fn forget_below(session: &Session, map: &str, seq: i64) {
    session.run(&FORGET_BELOW, (map, seq));
}
