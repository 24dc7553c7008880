//! chunked_map from Diesel 2: the stored functions declared as SQL functions and called through
//! Diesel's query builder, a page's rows through a parameterised `sql_query` (Diesel has no
//! construct for set-returning functions), 40001 retried, a wrong expected sequence turned into
//! a domain error.
//!
//! Diesel reports PostgreSQL errors by kind, not by SQLSTATE: 40001 is
//! `DatabaseErrorKind::SerializationFailure`; 23000, the optimistic mismatch, has no kind of its
//! own (`Unknown`), and is told apart by the message chunked_map documents for it.

use diesel::prelude::*;
use diesel::result::{DatabaseErrorKind, Error};
use diesel::sql_types::{BigInt, Integer, Jsonb, Text};
use serde_json::Value;

define_sql_function! {
    #[sql_name = "chunked_map.chunked_start"]
    fn chunked_start(map: Text, chunk_size: Integer) -> Bool;
}

define_sql_function! {
    #[sql_name = "chunked_map.chunked_register"]
    fn chunked_register(map: Text, payload: Jsonb) -> BigInt;
}

define_sql_function! {
    /// The optimistic append: only if the map's newest sequence is `expected_last_seq`.
    #[sql_name = "chunked_map.chunked_register"]
    fn chunked_register_after(map: Text, payload: Jsonb, expected_last_seq: BigInt) -> BigInt;
}

define_sql_function! {
    #[sql_name = "chunked_map.chunked_page"]
    fn chunked_page(map: Text, page_token: Text) -> Jsonb;
}

/// What an append can come to besides a sequence number.
#[derive(Debug)]
pub enum AppendError {
    /// Another transaction kept the map for longer than the retries.
    MapBusy,
    /// The map's newest sequence was not the one expected: decide again, do not retry.
    UnexpectedLastSeq(String),
    Database(Error),
}

/// A record of a page, as `chunked_records` returns it.
#[derive(Debug, QueryableByName)]
pub struct Record {
    #[diesel(sql_type = BigInt)]
    pub seq: i64,
    #[diesel(sql_type = Jsonb)]
    pub payload: Value,
}

pub fn start(conn: &mut PgConnection, map: &str, chunk_size: i32) -> QueryResult<bool> {
    diesel::select(chunked_start(map, chunk_size)).get_result(conn)
}

/// Appends one record in its own transaction (after `expected_last_seq`, if given), retrying
/// 40001 with a growing pause (about 0.25 to 1.8 seconds in all before [`AppendError::MapBusy`]).
/// Returns the sequence and the retries it took.
pub fn register(
    conn: &mut PgConnection,
    map: &str,
    payload: &Value,
    expected_last_seq: Option<i64>,
) -> Result<(i64, u32), AppendError> {
    register_with_backoff(conn, map, payload, expected_last_seq, |attempt| {
        let jitter = u64::from(std::process::id() % 7 + 1);
        std::thread::sleep(std::time::Duration::from_micros(
            (200 << attempt.min(8)) * jitter,
        ));
    })
}

/// [`register`] with the pause between attempts given: `backoff(attempt)` runs after attempt
/// `attempt` (0, 1, …) met a map another transaction holds, before the next one.
pub fn register_with_backoff(
    conn: &mut PgConnection,
    map: &str,
    payload: &Value,
    expected_last_seq: Option<i64>,
    mut backoff: impl FnMut(u32),
) -> Result<(i64, u32), AppendError> {
    for attempt in 0..12_u32 {
        let result = conn.transaction(|conn| match expected_last_seq {
            None => diesel::select(chunked_register(map, payload)).get_result::<i64>(conn),
            Some(expected) => diesel::select(chunked_register_after(map, payload, expected))
                .get_result::<i64>(conn),
        });
        match result {
            Ok(seq) => return Ok((seq, attempt)),
            // another transaction holds the map: back off and retry
            Err(Error::DatabaseError(DatabaseErrorKind::SerializationFailure, _)) => {
                backoff(attempt)
            }
            Err(Error::DatabaseError(DatabaseErrorKind::Unknown, info))
                if info.message().contains("has newest sequence") =>
            {
                return Err(AppendError::UnexpectedLastSeq(info.message().to_owned()));
            }
            Err(other) => return Err(AppendError::Database(other)),
        }
    }
    Err(AppendError::MapBusy)
}

/// Every page's token and its records, newest first, following `next_page_token`.
pub fn pages(conn: &mut PgConnection, map: &str) -> QueryResult<Vec<(String, Vec<Record>)>> {
    let mut token = "current".to_owned();
    let mut out = Vec::new();
    loop {
        let page: Value = diesel::select(chunked_page(map, &token)).get_result(conn)?;
        let records =
            diesel::sql_query("SELECT seq, payload FROM chunked_map.chunked_records($1, $2)")
                .bind::<Text, _>(map)
                .bind::<Text, _>(&token)
                .load::<Record>(conn)?;
        out.push((token, records));
        match page["next_page_token"].as_str() {
            Some(next) => token = next.to_owned(),
            None => return Ok(out),
        }
    }
}
