//! The lock of a map's name (see `name_lock`), taken by `chunked_start` and `chunked_drop`,
//! which may have no row to lock: so that a start never waits behind a drop or another start of
//! the same name that has not committed yet; and what the caller is told when it is held.

use crate::error::Held;
use crate::guc;
use crate::input::MapName;
use crate::name_lock::{self, Wait};
use crate::pg::boundary::{OrRethrow, PgError};
use crate::pg::spi::Session;

use super::refusal::{locked, waiting_up_to};

/// Takes the lock of the map's name: without waiting, or up to `chunked_map.lock_timeout`.
pub fn lock_name(session: &Session, map: MapName<'_>) {
    on_name(session, map, name_lock::lock);
}

/// Waits until no other transaction is starting or dropping a map of this name, without taking
/// the name's lock: at once, or up to `chunked_map.lock_timeout`.
pub fn probe_name(session: &Session, map: MapName<'_>) {
    on_name(session, map, name_lock::probe);
}

/// `take` without waiting; if another transaction holds the name, 40001, or `take` again
/// waiting up to `chunked_map.lock_timeout`.
fn on_name(
    session: &Session,
    map: MapName<'_>,
    take: fn(&Session, MapName<'_>, Wait) -> Result<bool, PgError>,
) {
    if take(session, map, Wait::Never).or_rethrow() {
        return;
    }
    match guc::lock_timeout_ms() {
        None => locked(map, Held::StartOrDrop),
        Some(ms) => {
            waiting_up_to(
                ms,
                ms,
                || take(session, map, Wait::UpToLockTimeout),
                |held| locked(map, held),
            );
        }
    }
}
