//! chunked_map: append-only, insertion-ordered logs per key in PostgreSQL, stored in bounded
//! chunks and read in token-addressed pages, newest first.
//!
//! - `api`: the SQL functions, thin: arguments in, one domain call, result out
//! - `append`: where a map is written (start, append, batch, resize, notify, drop)
//! - `direct_append`: the one-record append through the table and index access methods, no
//!   statement (declines to the SQL path for every case it does not handle)
//! - `lock`: taking a map's lock, and what a writer is told when it cannot
//! - `name_lock`: the lock on a map's name that starts and drops take, in a lock space of its own
//! - `chunking`: when a chunk is full, how a batch is cut into chunks (pure Rust)
//! - `read`: where a map is read (pages, rows, forward reads, records, info)
//! - `retention`: shedding a map's oldest chunks: `chunked_trim`, the retention policy
//! - `statements`: every SQL statement the extension runs on one node, declared once, by purpose
//! - `citus`: everything that differs on a Citus cluster (the NULL-map guard, distribution, the
//!   routed append, the polled lock wait), and the one question: are the tables distributed here?
//! - `pg`: the PostgreSQL C interface as the rest uses it: the error boundary, the calling
//!   convention, typed statements over SPI; it knows nothing of the extension's errors or tables
//! - `feed`: the feed across maps: consumers, their positions, polling
//! - `xact`: what is remembered until the end of the transaction (and announced at commit)
//! - `token`: page tokens, parsed and formatted
//! - `input`: argument checks and the limits they enforce
//! - `error`: every failure, its SQLSTATE, message, detail and hint
//! - `jsonb`: jsonb values passed through as datums, and their measured size
//! - `message_store`: (0.5) the message store's write (`chunked_map_message_store`), in C
//! - `immutability`: the trigger that keeps history from being rewritten
//! - `verify`: `chunked_verify`, the consistency check
//! - `guc`: settings

mod api;
mod append;
mod chunking;
mod citus;
mod direct_append;
mod error;
mod feed;
mod guc;
mod immutability;
mod input;
mod jsonb;
mod lock;
mod message_store;
mod name_lock;
mod order;
mod pg;
mod read;
mod record_ids;
mod retention;
mod sql_declarations;
mod statement_list;
mod statements;
mod stream;
mod token;
mod verify;
mod xact;

#[cfg(any(test, feature = "pg_test"))]
mod tests;

::pgrx::pg_module_magic!(name, version);

pgrx::extension_sql_file!("../sql/bootstrap.sql", name = "bootstrap", bootstrap);
pgrx::extension_sql_file!("../sql/api.sql", name = "api", requires = ["bootstrap"]);
pgrx::extension_sql_file!("../sql/protect.sql", name = "protect", requires = ["api"]);
pgrx::extension_sql_file!("../sql/finalize.sql", name = "finalize", finalize);

#[pgrx::pg_guard]
pub extern "C-unwind" fn _PG_init() {
    guc::register();
    xact::register();
    citus::null_map_guard::install();
}

/// Required by `cargo pgrx test`.
#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    /// The `#[pg_test]`s run at the same time, each in its own transaction that rolls back,
    /// and share map names: waiting for a map's lock lets one test's `chunked_start('m')` wait
    /// for another's to roll back instead of failing with 40001 (what a client would retry).
    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec!["chunked_map.lock_timeout = '60s'"]
    }
}
