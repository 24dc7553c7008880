//! Everything the extension does differently on a Citus cluster, and the one question the rest
//! of the extension asks about it: are the storage tables distributed here?
//!
//! - keeping a NULL map away from Citus's function delegation ([`null_map_guard`]);
//! - `chunked_distribute()` itself ([`distribute`]);
//! - the statements only a cluster runs, the routed append among them ([`statements`]);
//! - waiting for a map whose row is on another node ([`lock_wait`]).

pub mod distribute;
pub mod lock_wait;
pub mod map_functions;
pub mod null_map_guard;
pub mod statements;

use pgrx::pg_sys;

use crate::error::ChunkedError;
use crate::pg::spi::Session;
use crate::xact;

/// Whether Citus's library is in this process (Citus runs only preloaded: where none of its
/// settings is defined, it is not there).
pub fn is_loaded() -> bool {
    // SAFETY: a lookup in the table of defined settings, which raises nothing when missing_ok.
    unsafe { !pg_sys::GetConfigOption(c"citus.node_conninfo".as_ptr(), true, false).is_null() }
}

/// Whether the storage tables are distributed: Citus is loaded, installed in this database (a
/// catalog lookup, no statement) and `map_state` is one of its distributed tables. Looked up once
/// per transaction. Where `map_state` is distributed and another storage table is not (an update
/// of the extension added it, and `chunked_distribute()` has not run since), 55000 says so:
/// nothing may read or write a map half on its node and half on this one.
pub fn tables_are_distributed(session: &Session) -> bool {
    xact::distributed_tables(|| {
        let distributed = is_loaded()
            // SAFETY: a catalog lookup by name, which raises nothing when missing.
            && unsafe { pg_sys::get_extension_oid(c"citus".as_ptr(), true) } != pg_sys::InvalidOid
            && statements::is_distributed_table(session, statements::TABLES_ANCHOR);
        if distributed {
            let local = distribute::TABLES
                .iter()
                .find(|table| !statements::is_distributed_table(session, table));
            if let Some(table) = local {
                ChunkedError::StoragePartlyDistributed {
                    table: (*table).to_owned(),
                }
                .raise();
            }
        }
        distributed
    })
}

/// Whether the maps are distributed (`map_state` is), without asking whether every other storage
/// table is too: for a start, which writes `map_state` alone (a cluster updated to 0.5 and not
/// distributed again yet still starts maps).
pub fn maps_are_distributed(session: &Session) -> bool {
    is_loaded()
        // SAFETY: a catalog lookup by name, which raises nothing when missing.
        && unsafe { pg_sys::get_extension_oid(c"citus".as_ptr(), true) } != pg_sys::InvalidOid
        && statements::is_distributed_table(session, statements::TABLES_ANCHOR)
}

/// Whether a wait for `map`'s lock must be polled from here (see [`lock_wait`]).
pub fn waits_from_another_node(session: &Session, map: &str) -> bool {
    tables_are_distributed(session) && !statements::map_is_on_this_node(session, map)
}
