//! Whether the storage tables are distributed (Citus), looked up once per transaction; forgotten
//! when a subtransaction rolls back (it may have distributed them).

use std::cell::Cell;

thread_local! {
    /// Whether the storage tables are distributed (Citus), as this transaction found.
    static DISTRIBUTED: Cell<Option<bool>> = const { Cell::new(None) };
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
