//! Where an append happens: lock the map, add to the current chunk, archive it when full.
//!
//! Lock order is always the same, the map's state row first and nothing else of another map, so
//! appends cannot deadlock. The lock never waits unless `chunked_map.lock_timeout` says so, and
//! every way a concurrent append can surface (a held lock, a lock timeout, a row changed after a
//! REPEATABLE READ snapshot, a sequence taken by an append that committed after the snapshot)
//! becomes the one 40001 of [`ChunkedError::Conflict`].

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::CString;
use std::panic::AssertUnwindSafe;

use pgrx::pg_sys::panic::CaughtError;
use pgrx::prelude::*;
use pgrx::spi::SpiClient;

use crate::error::{ChunkedError, OrRaise};
use crate::guc;
use crate::input::{self, MapName};
use crate::jsonb::{Jsonb, JsonbArray};
use crate::report;
use crate::store::{self, MapState};
use crate::token::archived_token;

/// Appends one record and returns its sequence number: two statements, the lock (which also
/// finds the next sequence) and the insert, and a third when the current chunk is full.
pub fn append(map: MapName<'_>, payload: Jsonb) -> i64 {
    input::payload_size(payload.size(), guc::max_payload_bytes()).or_raise();
    let seq = concurrent_append_is_conflict(map, || {
        Spi::connect(|client| {
            let (state, next) = lock_map(client, map);
            append_at(client, map, &state, next, payload)
        })
    });
    remember_appended(map, seq);
    seq
}

/// Appends one record only if the map's newest sequence is `expected_last_seq` (0: empty map).
pub fn append_if_last(map: MapName<'_>, payload: Jsonb, expected_last_seq: i64) -> i64 {
    input::payload_size(payload.size(), guc::max_payload_bytes()).or_raise();
    let seq = concurrent_append_is_conflict(map, || {
        Spi::connect(|client| {
            let (state, _) = lock_map(client, map);
            // the exact newest sequence, read after the lock was granted
            let next = store::next_seq(client, map.as_str(), &state);
            if next - 1 != expected_last_seq {
                return Err(ChunkedError::UnexpectedLastSeq {
                    map: map.as_str().to_owned(),
                    expected: expected_last_seq,
                    actual: next - 1,
                });
            }
            Ok(append_at(client, map, &state, next, payload))
        })
    });
    seq.or_raise()
}

/// Appends every payload in order under one lock; returns the first and last sequence
/// assigned (`first > last` when there were none).
pub fn append_many(map: MapName<'_>, payloads: JsonbArray) -> (i64, i64) {
    let elements = payloads.elements();
    let limit = guc::max_payload_bytes();
    for (index, element) in elements.iter().enumerate() {
        let payload = element.ok_or(ChunkedError::NullElement {
            argument: "payloads",
            index: index + 1,
        });
        input::payload_size(payload.or_raise().size(), limit).or_raise();
    }
    let count = i64::try_from(elements.len()).unwrap_or(i64::MAX);
    let (first, last) = concurrent_append_is_conflict(map, || {
        Spi::connect(|client| {
            let (mut state, first) = lock_map(client, map);
            let mut next = first;
            let mut done = 0;
            while done < count {
                let room = state.current_first_seq + i64::from(state.current_chunk_size) - next;
                if room == 0 {
                    state = roll_over(client, map, &state);
                    continue;
                }
                let take = room.min(count - done);
                store::append_many_to_current(
                    client,
                    map.as_str(),
                    next,
                    payloads,
                    done + 1,
                    done + take,
                );
                next += take;
                done += take;
            }
            (first, next - 1)
        })
    });
    remember_appended(map, last);
    (first, last)
}

/// Changes the chunk size of a map under its append lock (so it cannot race an append's
/// rollover). The current chunk keeps its size unless it holds no record yet.
pub fn set_chunk_size(map: MapName<'_>, chunk_size: i32) {
    concurrent_append_is_conflict(map, || {
        Spi::connect(|client| {
            let (state, _) = lock_map(client, map);
            // whether the chunk is empty, read after the lock was granted
            let current_is_empty =
                store::next_seq(client, map.as_str(), &state) == state.current_first_seq;
            store::set_chunk_size(client, map.as_str(), chunk_size, current_is_empty);
        })
    })
}

/// Removes a whole map under its append lock; `false` when it did not exist.
pub fn drop_map(map: MapName<'_>) -> bool {
    concurrent_append_is_conflict(map, || {
        Spi::connect(|client| {
            if try_lock_map(client, map).is_none() {
                return false;
            }
            store::drop_map(client, map.as_str());
            true
        })
    })
}

/// Appends the record with sequence `next`, archiving the current chunk first if it is full.
fn append_at(
    client: &SpiClient<'_>,
    map: MapName<'_>,
    state: &MapState,
    next: i64,
    payload: Jsonb,
) -> i64 {
    let seq = if next == state.current_first_seq + i64::from(state.current_chunk_size) {
        roll_over(client, map, state).current_first_seq
    } else {
        next
    };
    store::insert_record(client, map.as_str(), seq, payload);
    seq
}

fn roll_over(client: &SpiClient<'_>, map: MapName<'_>, state: &MapState) -> MapState {
    let token = archived_token(state.current_first_seq);
    store::roll_over(client, map.as_str(), state, token)
}

/// Takes the map's append lock and finds its next sequence. Raises 42704 for a map that was
/// never started.
fn lock_map(client: &SpiClient<'_>, map: MapName<'_>) -> (MapState, i64) {
    try_lock_map(client, map).unwrap_or_else(|| {
        report::raise(&ChunkedError::MapNotStarted {
            map: map.as_str().to_owned(),
        })
    })
}

/// Takes the map's append lock: `FOR UPDATE NOWAIT`, or, with `chunked_map.lock_timeout` set, a
/// wait bounded by it (and then the next sequence is read after the wait, with a fresh
/// snapshot). `None` for a map that was never started.
fn try_lock_map(client: &SpiClient<'_>, map: MapName<'_>) -> Option<(MapState, i64)> {
    match guc::lock_timeout_ms() {
        None => store::lock_state_nowait(client, map.as_str(), appended_last(map)),
        Some(ms) => {
            let state = with_lock_timeout(ms, || store::lock_state_wait(client, map.as_str()))?;
            let next = store::next_seq(client, map.as_str(), &state);
            Some((state, next))
        }
    }
}

thread_local! {
    /// The sequence this backend appended last, per map: the hint that keeps the lock
    /// statement's probe for the next sequence to one index entry. Bounded: forgotten whole
    /// when it grows past [`HINTS_KEPT`] maps (a missing hint only costs a wider probe).
    static APPENDED_LAST: RefCell<HashMap<String, i64>> = RefCell::new(HashMap::new());
}
const HINTS_KEPT: usize = 1024;

fn appended_last(map: MapName<'_>) -> i64 {
    APPENDED_LAST.with(|hints| hints.borrow().get(map.as_str()).copied().unwrap_or(0))
}

fn remember_appended(map: MapName<'_>, seq: i64) {
    APPENDED_LAST.with(|hints| {
        let mut hints = hints.borrow_mut();
        if hints.len() >= HINTS_KEPT && !hints.contains_key(map.as_str()) {
            hints.clear();
        }
        hints.insert(map.as_str().to_owned(), seq);
    });
}

/// Runs `f` with the server's `lock_timeout` set to `ms`, restoring it afterwards (an error
/// restores it as part of the transaction's abort).
fn with_lock_timeout<R>(ms: i32, f: impl FnOnce() -> R) -> R {
    let value = CString::new(format!("{ms}ms")).unwrap_or_default();
    // SAFETY: the same calls fmgr makes for a function's SET clause; the nest level confines
    // the change to this call.
    let nest_level = unsafe {
        let level = pg_sys::NewGUCNestLevel();
        pg_sys::set_config_option(
            c"lock_timeout".as_ptr(),
            value.as_ptr(),
            pg_sys::GucContext::PGC_USERSET,
            pg_sys::GucSource::PGC_S_SESSION,
            pg_sys::GucAction::GUC_ACTION_SAVE,
            true,
            0,
            false,
        );
        level
    };
    let result = f();
    unsafe { pg_sys::AtEOXact_GUC(true, nest_level) };
    result
}

/// Runs an append, turning what a concurrent append raises into [`ChunkedError::Conflict`].
/// The handler only re-raises: there is no subtransaction to recover in.
fn concurrent_append_is_conflict<R>(map: MapName<'_>, f: impl FnOnce() -> R) -> R {
    let conflict = move |error: CaughtError| -> R {
        match error {
            CaughtError::PostgresError(_) => report::raise(&ChunkedError::Conflict {
                map: map.as_str().to_owned(),
            }),
            ours => ours.rethrow(),
        }
    };
    PgTryBuilder::new(AssertUnwindSafe(f))
        // another transaction holds the lock (NOWAIT), or lock_timeout expired
        .catch_when(PgSqlErrorCode::ERRCODE_LOCK_NOT_AVAILABLE, conflict)
        // REPEATABLE READ: the state row changed after the snapshot was taken
        .catch_when(PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE, conflict)
        // a record committed after the statement's snapshot (in REPEATABLE READ, the
        // transaction's) already holds the sequence this append computed
        .catch_when(PgSqlErrorCode::ERRCODE_UNIQUE_VIOLATION, conflict)
        // only possible with a lock_timeout longer than deadlock_timeout
        .catch_when(PgSqlErrorCode::ERRCODE_T_R_DEADLOCK_DETECTED, conflict)
        .execute()
}
