//! Everything the extension does differently on a Citus cluster.
//!
//! - [`null_map_guard`]: keeps a NULL map away from Citus's function delegation.

pub mod null_map_guard;

use pgrx::pg_sys;

/// Whether Citus's library is in this process (Citus runs only preloaded: where none of its
/// settings is defined, it is not there).
pub fn is_loaded() -> bool {
    // SAFETY: a lookup in the table of defined settings, which raises nothing when missing_ok.
    unsafe { !pg_sys::GetConfigOption(c"citus.node_conninfo".as_ptr(), true, false).is_null() }
}
