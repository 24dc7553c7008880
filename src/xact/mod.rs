//! What the extension remembers until the end of the current transaction, and never longer.
//! PostgreSQL's transaction callbacks (here) give it that lifetime: it is forgotten at commit,
//! abort and prepare, and what a subtransaction added is forgotten when that subtransaction rolls
//! back (kept, as its parent's, when it commits). What is remembered, a module each:
//!
//! - [`written`]: where each map's state row is now, and which followed maps' moves were
//!   recorded;
//! - [`distributed`]: whether the storage tables are distributed (Citus);
//! - [`announce`]: which maps to announce at commit, on which channel, up to which sequence.

mod announce;
mod distributed;
mod subtransaction;
mod written;

use pgrx::pg_sys;

use crate::error::ChunkedError;
use crate::pg::boundary::enter;

pub use announce::{announce_at_commit, announce_nothing, Announcement};
pub use distributed::{distributed_tables, forget_distributed};
pub use written::{moved, remember_moved, remember_written, written};

/// The map was dropped: nothing to announce of it, unless the subtransaction that dropped it
/// rolls back; its state row's address and its move are forgotten.
pub fn forget_dropped(map: &str) {
    written::forget_dropped(map);
    announce_nothing(map);
}

fn forget_everything() {
    written::forget_everything();
    announce::forget_everything();
    forget_distributed();
}

fn subtransaction_aborted(subtransaction: pg_sys::SubTransactionId) {
    forget_distributed();
    written::subtransaction_aborted(subtransaction);
    announce::subtransaction_aborted(subtransaction);
}

fn subtransaction_committed(
    subtransaction: pg_sys::SubTransactionId,
    parent: pg_sys::SubTransactionId,
) {
    written::subtransaction_committed(subtransaction, parent);
    announce::subtransaction_committed(subtransaction, parent);
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
            pg_sys::XactEvent::XACT_EVENT_PRE_COMMIT => announce::announce(),
            pg_sys::XactEvent::XACT_EVENT_PRE_PREPARE if !announce::announcements().is_empty() => {
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
