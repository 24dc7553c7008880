//! A map's lock: the one place that decides whether a write to a map may go on, and what the
//! caller is told when it may not.
//!
//! A map's lock is a row lock on its state row, taken with `FOR NO KEY UPDATE SKIP LOCKED` (the
//! lock an UPDATE of the row takes, so the direct write's update holds the map alike): it never
//! waits, and a row another transaction holds is simply not returned. When no row comes back,
//! a second look tells why, and each answer has its own error:
//! - the map has a row this transaction's snapshot sees: another transaction holds it, 40001
//!   "locked by a concurrent append" (after waiting up to `chunked_map.lock_timeout`, if set);
//! - REPEATABLE READ or SERIALIZABLE, and a row committed after the snapshot: 40001 "started or
//!   dropped ... after this transaction's snapshot";
//! - no row at all: the map does not exist.
//!
//! Under REPEATABLE READ and SERIALIZABLE, a row changed by a transaction that committed after
//! the snapshot makes PostgreSQL itself raise 40001 ("could not serialize access due to
//! concurrent update") when the lock is taken: since every write changes the state row, no
//! writer ever acts on a map its snapshot sees out of date. That error reaches the caller as
//! PostgreSQL raised it.
//!

use std::time::{Duration, Instant};

use pgrx::pg_sys;

use crate::citus::{self, lock_wait::Polled};
use crate::error::{ChunkedError, Held};
use crate::guc;
use crate::input::MapName;
use crate::pg::spi::Session;
use crate::statements::state::{self, MapState};
use crate::xact;

use super::refusal::{locked, waiting_up_to};

/// How many times a wait that ends with the row gone (dropped, perhaps started again) is tried
/// again before the caller is told to retry.
const ATTEMPTS: usize = 3;

/// Takes the map's lock and returns its state; `None` when the map does not exist. A map this
/// transaction wrote already is locked by it: its state is read where the transaction left it.
pub fn lock_map(session: &Session, map: MapName<'_>) -> Option<MapState> {
    if let Some(state) = xact::written(map.as_str())
        .and_then(|tid| state::state_written_at(session, map.as_str(), tid))
    {
        return Some(state);
    }
    // one deadline for every attempt: the call waits up to lock_timeout in all
    let mut deadline: Option<(Instant, i32)> = None;
    for _ in 0..ATTEMPTS {
        if let Some(state) = state::lock_state(session, map.as_str()) {
            return Some(state);
        }
        if !state::visible_to_writer(session, map.as_str()) {
            return absent(session, map);
        }
        let Some(ms) = guc::lock_timeout_ms() else {
            locked(map, Held::Now)
        };
        let (until, ms) = *deadline.get_or_insert_with(|| (Instant::now() + millis(ms), ms));
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            locked(map, Held::For(ms));
        }
        if let Some(state) = wait_for_lock(session, map, left, ms) {
            return Some(state);
        }
        // the row went away while we waited: a drop committed; look again
    }
    locked(map, Held::Now)
}

fn millis(ms: i32) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// Takes the map's lock, raising 42704 when the map does not exist.
pub fn lock_existing_map(session: &Session, map: MapName<'_>) -> MapState {
    lock_map(session, map).unwrap_or_else(|| {
        ChunkedError::MapNotStarted {
            map: map.as_str().to_owned(),
        }
        .raise()
    })
}

/// Takes the map's lock as [`lock_map`] does, then holds its row as the drop's DELETE needs it;
/// `None` when the map does not exist. A key-share lock another transaction holds on the row
/// (taken by hand; it goes through the lock every write takes) is refused like a concurrent
/// append, at once: the DELETE would wait for it without limit.
pub fn lock_map_for_drop(session: &Session, map: MapName<'_>) -> Option<MapState> {
    let state = lock_map(session, map)?;
    if !state::hold_for_delete(session, map.as_str()) {
        locked(map, Held::Now);
    }
    Some(state)
}

/// No row in this transaction's snapshot: under REPEATABLE READ or SERIALIZABLE, one committed
/// since means the snapshot is out of date for this map.
fn absent(session: &Session, map: MapName<'_>) -> Option<MapState> {
    if uses_transaction_snapshot() && state::map_exists_now(session, map.as_str()) {
        ChunkedError::ChangedAfterSnapshot {
            map: map.as_str().to_owned(),
        }
        .raise();
    }
    None
}

/// Whether the transaction reads with one snapshot (REPEATABLE READ, SERIALIZABLE).
pub fn uses_transaction_snapshot() -> bool {
    // SAFETY: XactIsoLevel is a plain int of this backend (one thread), fixed for the whole
    // transaction once it has a snapshot; reading it cannot fault.
    unsafe { pg_sys::XactIsoLevel >= pg_sys::XACT_REPEATABLE_READ as i32 }
}

/// Waits for the row lock, up to `left` (what remains of the call's wait; `ms` is the setting,
/// for the message); `None` when the row went away while waiting. The lock statement that came
/// before in this call holds the relation locks this one needs, so what it can time out on is
/// the row, nothing else. Where the row is on another node of a Citus cluster, the wait is
/// polled (see `citus::lock_wait`).
fn wait_for_lock(session: &Session, map: MapName<'_>, left: Duration, ms: i32) -> Option<MapState> {
    if citus::waits_from_another_node(session, map.as_str()) {
        return match citus::lock_wait::poll_for_lock(session, map.as_str(), left) {
            Polled::Locked(state) => Some(state),
            Polled::Gone => None,
            Polled::TimedOut => locked(map, Held::For(ms)),
        };
    }
    let left_ms = i32::try_from(left.as_millis()).unwrap_or(i32::MAX).max(1);
    waiting_up_to(
        left_ms,
        ms,
        || state::lock_state_wait(session, map.as_str()),
        |held| locked(map, held),
    )
}
