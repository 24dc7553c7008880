//! chunked_map: append-only, insertion-ordered logs per key in PostgreSQL, stored in bounded
//! chunks and read in token-addressed pages, newest first.
//!
//! - `api`: the SQL functions, thin
//! - `append`: where an append happens (lock, current chunk, rollover)
//! - `read`: where a page is read
//! - `store`: every SQL statement the extension runs
//! - `token`: page tokens, parsed and formatted
//! - `input`: argument checks
//! - `error`: every failure and its SQLSTATE; `report`: raising them
//! - `jsonb`: jsonb values passed through as datums
//! - `immutability`: the trigger that keeps history from being rewritten
//! - `verify`: `chunked_verify`, the consistency check
//! - `guc`: settings

mod api;
mod append;
mod error;
mod guc;
mod immutability;
mod input;
mod jsonb;
mod read;
mod report;
mod store;
mod token;
mod verify;

#[cfg(any(test, feature = "pg_test"))]
mod tests;

::pgrx::pg_module_magic!(name, version);

pgrx::extension_sql_file!("../sql/bootstrap.sql", name = "bootstrap", bootstrap);
pgrx::extension_sql_file!(
    "../sql/records.sql",
    name = "records",
    requires = [api::chunked_page]
);
pgrx::extension_sql_file!(
    "../sql/protect.sql",
    name = "protect",
    requires = ["bootstrap", immutability::chunked_forbid_rewrite]
);
pgrx::extension_sql_file!("../sql/finalize.sql", name = "finalize", finalize);

#[pgrx::pg_guard]
pub extern "C-unwind" fn _PG_init() {
    guc::register();
}

/// Required by `cargo pgrx test`.
#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec![]
    }
}
