//! Waiting for a map's lock where its row is on another node.
//!
//! Where the storage tables are distributed and the map's row lives on another node (a call in a
//! transaction block, not delegated), that node's session does not see this one's
//! `lock_timeout`: a waiting lock statement would wait there for as long as the holder runs. The
//! wait is then a series of attempts that never wait (`SKIP LOCKED`), a few milliseconds apart,
//! until the row is free or the time is up. (A delegated call runs on the node holding the map,
//! whose lock statements run in this backend, and waits in the lock's queue.)

use std::time::{Duration, Instant};

use pgrx::pg_sys;

use crate::pg::spi::Session;
use crate::statements::state::{self, MapState};

/// How a polled wait ended.
pub enum Polled {
    Locked(MapState),
    /// The row went away (the map was dropped).
    Gone,
    /// Still held when the time was up.
    TimedOut,
}

/// The longest pause between two attempts.
const MAX_POLL_PAUSE: Duration = Duration::from_millis(10);

/// Tries to lock `map`'s state row until it is free, gone, or `left` has passed.
pub fn poll_for_lock(session: &Session, map: &str, left: Duration) -> Polled {
    let deadline = Instant::now() + left;
    let mut pause = Duration::from_millis(1);
    loop {
        if let Some(state) = state::lock_state(session, map) {
            return Polled::Locked(state);
        }
        if !state::visible_to_writer(session, map) {
            return Polled::Gone;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Polled::TimedOut;
        }
        sleep(pause.min(left));
        pause = (pause * 2).min(MAX_POLL_PAUSE);
    }
}

/// Sleeps on the backend's latch, so that a cancel or a shutdown ends the wait.
fn sleep(pause: Duration) {
    let ms = i64::try_from(pause.as_millis()).unwrap_or(i64::MAX).max(1);
    // SAFETY: the backend's own latch, waited on and reset as PostgreSQL's own waits do; a
    // cancel is raised by the interrupt check as PostgreSQL raises it (nothing of ours to drop).
    unsafe {
        pg_sys::WaitLatch(
            pg_sys::MyLatch,
            (pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH) as i32,
            ms,
            pg_sys::PG_WAIT_EXTENSION,
        );
        pg_sys::ResetLatch(pg_sys::MyLatch);
    }
    pg_sys::check_for_interrupts!();
}
