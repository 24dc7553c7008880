//! What the extension remembers until the end of the current transaction, and never longer.
//! PostgreSQL's transaction callback gives it that lifetime: it is forgotten at commit, abort
//! and prepare.
//!
//! - **Where each map's state row is now.** Every append rewrites its map's state row, and a
//!   row a transaction rewrote N times leaves N versions that only its commit lets PostgreSQL
//!   prune: found through the index, the Nth append of one transaction would walk all of them.
//!   Remembering the address of the version the transaction wrote last lets the next append of
//!   the same transaction go straight to it ([`crate::store::append_at`]; the one-statement
//!   append that a transaction's first append uses does not report the address, so the second
//!   takes the slow path once to learn it); the address is only a
//!   hint that PostgreSQL checks (a version that is no longer visible, say after a rollback to a
//!   savepoint, is simply not found, and the append takes the ordinary path). Bounded: the
//!   transaction's most recently written maps only.
//! - **Which maps to announce.** A committing transaction that appended to a map whose
//!   notifications are on sends one `NOTIFY chunked_map` for it, with its newest sequence.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::ffi::CString;
use std::num::NonZeroUsize;

use lru::LruCache;
use pgrx::pg_sys;

use crate::error::ChunkedError;
use crate::spi;
use crate::store;

/// Maps whose state row addresses one transaction keeps.
const WRITTEN_KEPT: NonZeroUsize = match NonZeroUsize::new(256) {
    Some(n) => n,
    None => unreachable!(),
};

/// The channel committed appends are announced on.
pub const CHANNEL: &str = "chunked_map";

/// What this transaction knows of a map's state row it wrote.
#[derive(Debug, Clone, Copy)]
pub enum Written {
    /// The version it wrote last is at this address.
    At(pg_sys::ItemPointerData),
    /// It wrote the row, by the one-statement append, which does not report where.
    Somewhere,
}

thread_local! {
    static WRITTEN: RefCell<LruCache<String, Written>> =
        RefCell::new(LruCache::new(WRITTEN_KEPT));
    static TO_ANNOUNCE: RefCell<BTreeSet<String>> = const { RefCell::new(BTreeSet::new()) };
}

/// What this transaction kept of the state row it wrote for `map`; `None` when it has not
/// written it (or forgot: only the most recently written maps are kept).
pub fn written(map: &str) -> Option<Written> {
    WRITTEN.with(|written| written.borrow_mut().get(map).copied())
}

pub fn remember_written(map: &str, tid: pg_sys::ItemPointerData) {
    remember(map, Written::At(tid));
}

pub fn remember_written_somewhere(map: &str) {
    remember(map, Written::Somewhere);
}

fn remember(map: &str, what: Written) {
    WRITTEN.with(|written| {
        let mut written = written.borrow_mut();
        match written.get_mut(map) {
            Some(kept) => *kept = what,
            None => {
                written.put(map.to_owned(), what);
            }
        }
    });
}

/// Announce `map` when this transaction commits.
pub fn announce_at_commit(map: &str) {
    TO_ANNOUNCE.with(|maps| {
        let mut maps = maps.borrow_mut();
        if !maps.contains(map) {
            maps.insert(map.to_owned());
        }
    });
}

fn forget_everything() {
    WRITTEN.with(|written| written.borrow_mut().clear());
    TO_ANNOUNCE.with(|maps| maps.borrow_mut().clear());
}

/// Registers the transaction callback; called once per backend, from `_PG_init`.
pub fn register() {
    // SAFETY: a callback with the signature PostgreSQL expects, registered once.
    unsafe { pg_sys::RegisterXactCallback(Some(on_transaction_event), std::ptr::null_mut()) };
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn on_transaction_event(
    event: pg_sys::XactEvent::Type,
    _arg: *mut std::ffi::c_void,
) {
    match event {
        // Still inside the transaction: an error here makes the commit an abort.
        pg_sys::XactEvent::XACT_EVENT_PRE_COMMIT => announce(),
        pg_sys::XactEvent::XACT_EVENT_PRE_PREPARE
            if TO_ANNOUNCE.with(|maps| !maps.borrow().is_empty()) =>
        {
            ChunkedError::NotifyInPreparedTransaction.raise()
        }
        pg_sys::XactEvent::XACT_EVENT_COMMIT
        | pg_sys::XactEvent::XACT_EVENT_ABORT
        | pg_sys::XactEvent::XACT_EVENT_PREPARE
        | pg_sys::XactEvent::XACT_EVENT_PARALLEL_COMMIT
        | pg_sys::XactEvent::XACT_EVENT_PARALLEL_ABORT => forget_everything(),
        _ => {}
    }
}

// PostgreSQL's NOTIFY (commands/async.h), which pgrx's bindings leave out.
unsafe extern "C-unwind" {
    fn Async_Notify(channel: *const std::ffi::c_char, payload: *const std::ffi::c_char);
}

/// Sends one notification per map this transaction appended to and still has appends of (a
/// rolled-back savepoint's appends leave the map's state row as it was before them).
fn announce() {
    let maps: Vec<String> = TO_ANNOUNCE.with(|maps| maps.borrow().iter().cloned().collect());
    if maps.is_empty() {
        return;
    }
    // SPI needs an active snapshot, which a committing transaction no longer has: the
    // transaction's (under READ COMMITTED, a new one), which sees what it wrote.
    // SAFETY: pushed here and popped below, before the callback returns.
    unsafe { pg_sys::PushActiveSnapshot(pg_sys::GetTransactionSnapshot()) };
    spi::connect(|session| {
        for map in &maps {
            let Some((last_seq, xmin)) = store::announced_state(session, map) else {
                continue;
            };
            // SAFETY: a plain check of the transaction's own ids.
            if !unsafe { pg_sys::TransactionIdIsCurrentTransactionId(xmin) } {
                continue;
            }
            let payload = serde_json::json!({"map": map, "last_seq": last_seq}).to_string();
            let channel = CString::new(CHANNEL).unwrap_or_default();
            let payload = CString::new(payload).unwrap_or_default();
            // SAFETY: NUL-terminated strings, which PostgreSQL copies; an error it raises is
            // turned into a Rust panic at the boundary.
            unsafe {
                pg_sys::submodules::ffi::pg_guard_ffi_boundary(|| {
                    Async_Notify(channel.as_ptr(), payload.as_ptr())
                })
            };
        }
    });
    // SAFETY: the snapshot pushed above.
    unsafe { pg_sys::PopActiveSnapshot() };
}
