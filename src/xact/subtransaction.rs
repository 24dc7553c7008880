//! Things remembered until the end of a transaction, each tagged with the subtransaction that
//! made it, so that a subtransaction's rollback forgets exactly what it made and its commit hands
//! it to its parent.

use pgrx::pg_sys;

/// A remembered thing and the subtransaction that made it.
#[derive(Debug, Clone)]
pub struct Made<T> {
    pub what: T,
    pub by: pg_sys::SubTransactionId,
}

/// The subtransaction running now.
pub fn current() -> pg_sys::SubTransactionId {
    // SAFETY: GetCurrentSubTransactionId only reads this backend's transaction state (one
    // thread per backend), valid whenever a transaction is open; it raises nothing.
    unsafe { pg_sys::GetCurrentSubTransactionId() }
}
