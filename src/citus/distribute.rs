//! `chunked_distribute()`: on a Citus coordinator, spreads the maps over the workers. The three
//! storage tables are distributed by `map`, colocated, so every row of one map lives on one
//! node; every function whose first argument is the map is distributed by that argument, so a
//! call (outside an explicit transaction) is delegated to the node that holds the map and runs
//! there, its statements on local shards. Idempotent: what is distributed already is left as it
//! is. Maps that exist already move with their tables.
//!
//! The history-protecting triggers go along (Citus refuses triggers on distributed tables
//! unless `citus.enable_unsafe_triggers` is on, for the call): they are created on every shard,
//! where the statements that change rows run.

use super::statements as store;
use crate::error::ChunkedError;
use crate::guc;
use crate::pg::spi;
use crate::xact;

/// The storage tables, the first one the colocation anchor.
pub const TABLES: [&str; 3] = [
    store::TABLES_ANCHOR,
    "chunked_map.current_record",
    "chunked_map.archived_chunk",
];

/// Every function whose first argument is the map.
pub const MAP_FUNCTIONS: [&str; 15] = [
    "chunked_map.chunked_start(text, integer)",
    "chunked_map.chunked_register(text, jsonb)",
    "chunked_map.chunked_register(text, jsonb, bigint)",
    "chunked_map.chunked_register_many(text, jsonb[])",
    "chunked_map.chunked_page(text, text)",
    "chunked_map.chunked_records(text, text)",
    "chunked_map.chunked_read(text, bigint, integer)",
    "chunked_map.chunked_get(text, bigint)",
    "chunked_map.chunked_info(text)",
    "chunked_map.chunked_set_chunk_size(text, integer)",
    "chunked_map.chunked_set_notify(text, boolean)",
    "chunked_map.chunked_verify(text)",
    "chunked_map.chunked_drop(text)",
    "chunked_map.chunked_trim(text, bigint)",
    "chunked_map.chunked_set_retention(text, bigint, interval)",
];

/// What `chunked_distribute` did: tables and functions it distributed now (not before).
pub struct Distributed {
    pub tables: usize,
    pub functions: usize,
}

pub fn distribute() -> Distributed {
    spi::connect(|session| {
        let database = store::current_database(session);
        if store::citus_version(session).is_none() {
            ChunkedError::CitusMissing {
                what: format!("the extension citus is not installed in database \"{database}\""),
            }
            .raise();
        }
        if !store::citus_is_coordinator(session) {
            ChunkedError::CitusMissing {
                what: format!("this node is not the Citus coordinator of database \"{database}\""),
            }
            .raise();
        }
        let unguarded = store::nodes_without_guard(session, super::null_map_guard::installed());
        if !unguarded.is_empty() {
            ChunkedError::NotPreloaded {
                nodes: format!("not on {}", unguarded.join(", ")),
            }
            .raise();
        }
        // For these calls only: Citus refuses triggers on distributed tables unless told; the
        // rows of a map are addressed by ctid, which only one copy of a shard keeps; and
        // Citus's notices while copying rows suggest a clean-up that this call does itself.
        let distributed = guc::with_server_setting(c"citus.enable_unsafe_triggers", "on", || {
            guc::with_server_setting(c"citus.shard_replication_factor", "1", || {
                guc::with_server_setting(c"client_min_messages", "warning", || {
                    distribute_objects(session)
                })
            })
        });
        xact::forget_distributed();
        distributed
    })
}

fn distribute_objects(session: &spi::Session) -> Distributed {
    let mut tables = 0;
    for (index, table) in TABLES.iter().enumerate() {
        if store::is_distributed_table(session, table) {
            continue;
        }
        let colocate_with = if index == 0 {
            "none"
        } else {
            store::TABLES_ANCHOR
        };
        store::distribute_table(session, table, colocate_with);
        tables += 1;
    }
    let mut functions = 0;
    for function in MAP_FUNCTIONS {
        if store::is_distributed_function(session, function) {
            continue;
        }
        store::distribute_function(session, function, store::TABLES_ANCHOR);
        functions += 1;
    }
    Distributed { tables, functions }
}
