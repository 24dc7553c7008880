//! Where each map's state row is now, and which followed maps' moves this transaction recorded.
//!
//! Every append rewrites its map's state row, and a row a transaction rewrote N times leaves N
//! versions that only its commit lets PostgreSQL prune: found through the index, the Nth append
//! of one transaction would walk all of them. Remembering the address of the version the
//! transaction wrote last lets the next append of the same transaction go straight to it
//! (`direct_append::write` and `lock::lock_existing_map` take it). The address of a version
//! written in a subtransaction that rolled back is forgotten with it: its slot may be reused.
//! Bounded: the transaction's most recently written maps only.

use std::cell::RefCell;
use std::num::NonZeroUsize;

use lru::LruCache;
use pgrx::pg_sys;

use super::subtransaction::{self, Made};

/// Maps whose state row addresses one transaction keeps.
const WRITTEN_KEPT: NonZeroUsize = match NonZeroUsize::new(256) {
    Some(n) => n,
    None => unreachable!(),
};

thread_local! {
    static WRITTEN: RefCell<LruCache<String, Made<pg_sys::ItemPointerData>>> =
        RefCell::new(LruCache::new(WRITTEN_KEPT));
    /// Followed maps this transaction appended to and recorded the move of (see `feed`); a map
    /// forgotten (the oldest of many) is only recorded again.
    static MOVED: RefCell<LruCache<String, pg_sys::SubTransactionId>> =
        RefCell::new(LruCache::new(WRITTEN_KEPT));
}

/// The address of the state row version this transaction wrote last for `map`; `None` when it
/// has not written it (or forgot: only the most recently written maps are kept).
pub fn written(map: &str) -> Option<pg_sys::ItemPointerData> {
    WRITTEN.with(|written| written.borrow_mut().get(map).map(|made| made.what))
}

pub fn remember_written(map: &str, tid: pg_sys::ItemPointerData) {
    let made = Made {
        what: tid,
        by: subtransaction::current(),
    };
    WRITTEN.with(|written| {
        let mut written = written.borrow_mut();
        match written.get_mut(map) {
            Some(kept) => *kept = made,
            None => {
                written.put(map.to_owned(), made);
            }
        }
    });
}

/// Whether this transaction (or a subtransaction of it that did not roll back) recorded the
/// move of `map`, a followed map it appended to, for the feed.
pub fn moved(map: &str) -> bool {
    MOVED.with(|moved| moved.borrow_mut().get(map).is_some())
}

/// This transaction recorded the move of `map` (followed) for the feed. Only a followed map's
/// move is remembered: a map this transaction appended to unfollowed may become followed by the
/// same transaction (`chunked_subscribe`), and its next append must record the move then.
pub fn remember_moved(map: &str) {
    let by = subtransaction::current();
    MOVED.with(|moved| {
        let mut moved = moved.borrow_mut();
        if moved.get(map).is_none() {
            moved.put(map.to_owned(), by);
        }
    });
}

/// The map was dropped: its state row's address is forgotten, and its move (the drop removed
/// the map's row of `map_change`; a map started again under the name records its own).
pub fn forget_dropped(map: &str) {
    WRITTEN.with(|written| written.borrow_mut().pop(map));
    MOVED.with(|moved| moved.borrow_mut().pop(map));
}

pub fn forget_everything() {
    WRITTEN.with(|written| written.borrow_mut().clear());
    MOVED.with(|moved| moved.borrow_mut().clear());
}

/// A subtransaction rolled back: what it (or a subtransaction of it) made is gone. Ids of
/// subtransactions started later are larger.
pub fn subtransaction_aborted(subtransaction: pg_sys::SubTransactionId) {
    WRITTEN.with(|written| {
        let mut written = written.borrow_mut();
        let gone: Vec<String> = written
            .iter()
            .filter(|(_, made)| made.by >= subtransaction)
            .map(|(map, _)| map.clone())
            .collect();
        for map in gone {
            written.pop(&map);
        }
    });
    MOVED.with(|moved| {
        let mut moved = moved.borrow_mut();
        let gone: Vec<String> = moved
            .iter()
            .filter(|(_, by)| **by >= subtransaction)
            .map(|(map, _)| map.clone())
            .collect();
        for map in gone {
            moved.pop(&map);
        }
    });
}

/// A subtransaction committed: what it made is its parent's now.
pub fn subtransaction_committed(
    subtransaction: pg_sys::SubTransactionId,
    parent: pg_sys::SubTransactionId,
) {
    WRITTEN.with(|written| {
        for (_, made) in written.borrow_mut().iter_mut() {
            if made.by >= subtransaction {
                made.by = parent;
            }
        }
    });
    MOVED.with(|moved| {
        for (_, by) in moved.borrow_mut().iter_mut() {
            if *by >= subtransaction {
                *by = parent;
            }
        }
    });
}
