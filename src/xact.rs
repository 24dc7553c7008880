//! What the extension remembers until the end of the current transaction, and never longer.
//! PostgreSQL's transaction callbacks give it that lifetime: it is forgotten at commit, abort
//! and prepare, and what a subtransaction added is forgotten when that subtransaction rolls back
//! (kept, as its parent's, when it commits).
//!
//! - **Where each map's state row is now.** Every append rewrites its map's state row, and a
//!   row a transaction rewrote N times leaves N versions that only its commit lets PostgreSQL
//!   prune: found through the index, the Nth append of one transaction would walk all of them.
//!   Remembering the address of the version the transaction wrote last lets the next append of
//!   the same transaction go straight to it (`direct_append::write` and
//!   `lock::lock_existing_map` take it). The address of a version written in a subtransaction
//!   that rolled back is forgotten with it: its slot may be reused. Bounded: the transaction's
//!   most recently written maps only.
//! - **Whether the storage tables are distributed** (Citus), looked up once; forgotten when a
//!   subtransaction rolls back (it may have distributed them).
//! - **Which maps to announce, on which channel, and up to which sequence.** A committing
//!   transaction that appended to a map whose notifications are on *at its commit* sends one
//!   notification on the map's channel with the newest sequence it appended and kept. The
//!   decision is the commit's: the transaction holds the lock of every map it appended to, so
//!   only it can change their notification setting until then, and it records here what it
//!   appended (from what the appends reported) and every change of the setting it makes (from
//!   `chunked_set_notify`, which also finds out whether the transaction appended to the map
//!   before turning notifications on). Nothing is read at commit, where the caller's role and
//!   `search_path` would apply.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::ffi::CString;
use std::num::NonZeroUsize;

use lru::LruCache;
use pgrx::pg_sys;

use crate::error::ChunkedError;
use crate::pg::boundary::{catching, enter, OrRethrow};
use crate::pg::raw;

/// Maps whose state row addresses one transaction keeps.
const WRITTEN_KEPT: NonZeroUsize = match NonZeroUsize::new(256) {
    Some(n) => n,
    None => unreachable!(),
};

/// What a commit sends for one map: its newest sequence, on the map's channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Announcement {
    pub channel: String,
    pub last_seq: i64,
}

/// An announcement and the extension (its `pg_extension` oid) whose map it is: an extension
/// dropped and created again in the same transaction has another oid, and none of the old one's
/// maps.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pending {
    announcement: Announcement,
    extension: pg_sys::Oid,
}

/// A remembered thing and the subtransaction that made it.
#[derive(Debug, Clone)]
struct Made<T> {
    what: T,
    by: pg_sys::SubTransactionId,
}

thread_local! {
    static WRITTEN: RefCell<LruCache<String, Made<pg_sys::ItemPointerData>>> =
        RefCell::new(LruCache::new(WRITTEN_KEPT));
    /// Maps this transaction appended to, whose move it recorded for the feed if they are
    /// followed (see `feed`); a map forgotten (the oldest of many) is only recorded again.
    static MOVED: RefCell<LruCache<String, pg_sys::SubTransactionId>> =
        RefCell::new(LruCache::new(WRITTEN_KEPT));
    /// Whether the storage tables are distributed (Citus), as this transaction found.
    static DISTRIBUTED: Cell<Option<bool>> = const { Cell::new(None) };
    /// Per map this transaction may announce: what its commit would send (`None`: nothing, the
    /// map's notifications were turned off or it was dropped), by subtransaction (innermost
    /// last).
    static TO_ANNOUNCE: RefCell<BTreeMap<String, Vec<Made<Option<Pending>>>>> =
        const { RefCell::new(BTreeMap::new()) };
}

fn current_subtransaction() -> pg_sys::SubTransactionId {
    // SAFETY: GetCurrentSubTransactionId only reads this backend's transaction state (one
    // thread per backend), valid whenever a transaction is open; it raises nothing.
    unsafe { pg_sys::GetCurrentSubTransactionId() }
}

/// The address of the state row version this transaction wrote last for `map`; `None` when it
/// has not written it (or forgot: only the most recently written maps are kept).
pub fn written(map: &str) -> Option<pg_sys::ItemPointerData> {
    WRITTEN.with(|written| written.borrow_mut().get(map).map(|made| made.what))
}

pub fn remember_written(map: &str, tid: pg_sys::ItemPointerData) {
    let made = Made {
        what: tid,
        by: current_subtransaction(),
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
    let by = current_subtransaction();
    MOVED.with(|moved| {
        let mut moved = moved.borrow_mut();
        if moved.get(map).is_none() {
            moved.put(map.to_owned(), by);
        }
    });
}

/// Announce `map` when this transaction commits (unless the subtransaction that asked rolls
/// back, or the transaction turns the map's notifications off before then).
pub fn announce_at_commit(map: &str, announcement: Announcement) {
    let extension = extension_oid();
    push_announcement(
        map,
        Some(Pending {
            announcement,
            extension,
        }),
        true,
    );
}

/// The map's notifications were turned off: its commit announces nothing of it, unless the
/// subtransaction that turned them off rolls back.
pub fn announce_nothing(map: &str) {
    push_announcement(map, None, false);
}

/// The map was dropped: nothing to announce of it, unless the subtransaction that dropped it
/// rolls back. Its state row's address is forgotten too, and its move (the drop removed the
/// map's row of `map_change`; a map started again under the name records its own).
pub fn forget_dropped(map: &str) {
    WRITTEN.with(|written| written.borrow_mut().pop(map));
    MOVED.with(|moved| moved.borrow_mut().pop(map));
    announce_nothing(map);
}

fn push_announcement(map: &str, announcement: Option<Pending>, create: bool) {
    let by = current_subtransaction();
    TO_ANNOUNCE.with(|maps| {
        let mut maps = maps.borrow_mut();
        let stack = match maps.get_mut(map) {
            Some(stack) => stack,
            None if create => maps.entry(map.to_owned()).or_default(),
            None => return,
        };
        match stack.last_mut() {
            Some(top) if top.by == by => top.what = announcement,
            _ => stack.push(Made {
                what: announcement,
                by,
            }),
        }
    });
}

/// What this transaction's commit sends now, by map: what it announced of the extension as it
/// is installed now (none once it was dropped).
fn announcements() -> Vec<(String, Announcement)> {
    let pending: Vec<(String, Pending)> = TO_ANNOUNCE.with(|maps| {
        maps.borrow()
            .iter()
            .filter_map(|(map, stack)| Some((map.clone(), stack.last()?.what.clone()?)))
            .collect()
    });
    // Every process's transactions end here, also those of processes that have no database
    // (the autovacuum launcher): the catalog is looked at only when there is something to send.
    if pending.is_empty() {
        return Vec::new();
    }
    let extension = extension_oid();
    pending
        .into_iter()
        .filter(|(_, pending)| extension != pg_sys::InvalidOid && pending.extension == extension)
        .map(|(map, pending)| (map, pending.announcement))
        .collect()
}

/// Whether the storage tables are distributed, found by `look` once per transaction.
pub fn distributed_tables(look: impl FnOnce() -> bool) -> bool {
    if let Some(distributed) = DISTRIBUTED.with(Cell::get) {
        return distributed;
    }
    let distributed = look();
    DISTRIBUTED.with(|cell| cell.set(Some(distributed)));
    distributed
}

/// The tables were distributed in this transaction: look again.
pub fn forget_distributed() {
    DISTRIBUTED.with(|cell| cell.set(None));
}

fn forget_everything() {
    WRITTEN.with(|written| written.borrow_mut().clear());
    MOVED.with(|moved| moved.borrow_mut().clear());
    TO_ANNOUNCE.with(|maps| maps.borrow_mut().clear());
    forget_distributed();
}

/// A subtransaction rolled back: what it (or a subtransaction of it) made is gone. Ids of
/// subtransactions started later are larger.
fn subtransaction_aborted(subtransaction: pg_sys::SubTransactionId) {
    forget_distributed();
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
    TO_ANNOUNCE.with(|maps| {
        let mut maps = maps.borrow_mut();
        for stack in maps.values_mut() {
            stack.retain(|made| made.by < subtransaction);
        }
        maps.retain(|_, stack| !stack.is_empty());
    });
}

/// A subtransaction committed: what it made is its parent's now.
fn subtransaction_committed(
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
    TO_ANNOUNCE.with(|maps| {
        for stack in maps.borrow_mut().values_mut() {
            let newest = stack
                .iter()
                .rev()
                .find(|made| made.by >= subtransaction)
                .cloned();
            stack.retain(|made| made.by < subtransaction);
            if let Some(newest) = newest {
                match stack.last_mut() {
                    Some(top) if top.by == parent => top.what = newest.what,
                    _ => stack.push(Made {
                        what: newest.what,
                        by: parent,
                    }),
                }
            }
        }
    });
}

/// Registers the callbacks; called once per backend, from `_PG_init`.
pub fn register() {
    // SAFETY: functions with the signatures PostgreSQL expects, registered once (from _PG_init)
    // and never unregistered: the library is never unloaded, so the pointers stay valid.
    unsafe {
        pg_sys::RegisterXactCallback(Some(on_transaction_event), std::ptr::null_mut());
        pg_sys::RegisterSubXactCallback(Some(on_subtransaction_event), std::ptr::null_mut());
    }
}

unsafe extern "C-unwind" fn on_transaction_event(
    event: pg_sys::XactEvent::Type,
    _arg: *mut std::ffi::c_void,
) {
    // SAFETY: called by PostgreSQL with nothing of ours on the stack above; an error is raised
    // from here (pre-commit and pre-prepare only, where it turns the commit into an abort).
    unsafe {
        enter(|| match event {
            pg_sys::XactEvent::XACT_EVENT_PRE_COMMIT => announce(),
            pg_sys::XactEvent::XACT_EVENT_PRE_PREPARE if !announcements().is_empty() => {
                ChunkedError::NotifyInPreparedTransaction.raise()
            }
            pg_sys::XactEvent::XACT_EVENT_COMMIT
            | pg_sys::XactEvent::XACT_EVENT_ABORT
            | pg_sys::XactEvent::XACT_EVENT_PREPARE
            | pg_sys::XactEvent::XACT_EVENT_PARALLEL_COMMIT
            | pg_sys::XactEvent::XACT_EVENT_PARALLEL_ABORT => forget_everything(),
            _ => {}
        })
    }
}

unsafe extern "C-unwind" fn on_subtransaction_event(
    event: pg_sys::SubXactEvent::Type,
    subtransaction: pg_sys::SubTransactionId,
    parent: pg_sys::SubTransactionId,
    _arg: *mut std::ffi::c_void,
) {
    // SAFETY: as above; nothing here raises.
    unsafe {
        enter(|| match event {
            pg_sys::SubXactEvent::SUBXACT_EVENT_ABORT_SUB => subtransaction_aborted(subtransaction),
            pg_sys::SubXactEvent::SUBXACT_EVENT_COMMIT_SUB => {
                subtransaction_committed(subtransaction, parent)
            }
            _ => {}
        })
    }
}

/// Sends one notification per map this transaction announces (none when it dropped the
/// extension, and with it every map).
fn announce() {
    let announcements = announcements();
    for (map, Announcement { channel, last_seq }) in announcements {
        let payload = serde_json::json!({"map": map, "last_seq": last_seq}).to_string();
        // a channel the extension made and a JSON text: neither holds a NUL byte
        let (Ok(channel), Ok(payload)) = (CString::new(channel), CString::new(payload)) else {
            crate::pg::boundary::internal(format!(
                "a notification of map \"{map}\" with a NUL byte"
            ));
        };
        let (channel_ptr, payload_ptr) = (channel.as_ptr(), payload.as_ptr());
        // SAFETY: NUL-terminated strings that outlive the call, which copies them; an error it
        // raises (a full notification queue) goes on as PostgreSQL raised it.
        unsafe { catching(|| raw::Async_Notify(channel_ptr, payload_ptr)) }.or_rethrow();
    }
}

/// The extension as it is installed in this database now (`InvalidOid`: not installed), from the
/// catalog (no SQL).
fn extension_oid() -> pg_sys::Oid {
    // SAFETY: a catalog lookup by name inside the transaction, which raises nothing when missing.
    unsafe { pg_sys::get_extension_oid(c"chunked_map".as_ptr(), true) }
}
