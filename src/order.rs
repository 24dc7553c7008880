//! Order keys for the message store (`chunked_map_message_store`, docs/message-db.md): what its
//! writes and its numbering of global positions need from the server, out of SQL's reach. A
//! write takes the database's writers' mark, then its key — the transaction id assigned next,
//! read after the mark and after the writer's own id. A numbering reads the next id, then looks
//! at who holds the mark: every key below the least of them is final. The locks are in a lock
//! space no SQL function can take (`name_lock`), so no role can hold writers or numbering back.

use pgrx::pg_sys;

use crate::error::ChunkedError;
use crate::name_lock::{self, OrderLock};
use crate::pg::boundary::{catching, OrRethrow};

/// The transaction id PostgreSQL assigns next, read from the shared counter (not a snapshot).
pub fn next_transaction_id() -> i64 {
    // SAFETY: takes XidGenLock shared for the read; called in a transaction, as every SQL
    // function is.
    let next = unsafe { pg_sys::ReadNextFullTransactionId() };
    i64::try_from(next.value).unwrap_or_else(|_| {
        ChunkedError::Internal {
            context: format!("next transaction id {} is past bigint", next.value),
        }
        .raise()
    })
}

/// A write's order key: the writers' mark, the transaction's id, then the next id, in order.
pub fn order_key() -> i64 {
    let marked = name_lock::lock_order(OrderLock::WritersMark).or_rethrow();
    if !marked {
        ChunkedError::Internal {
            context: "the writers' mark was refused: only writers take it, shared".to_owned(),
        }
        .raise()
    }
    // SAFETY: assigns the top transaction's id if it has none (the caller checked the
    // transaction may write); raises, caught and rethrown, where it cannot have one.
    unsafe { catching(|| pg_sys::GetTopTransactionId()) }.or_rethrow();
    next_transaction_id()
}

/// Takes the numbering lock, never waiting: `false` when another transaction holds it.
pub fn try_numbering_lock() -> bool {
    name_lock::lock_order(OrderLock::Numbering).or_rethrow()
}
