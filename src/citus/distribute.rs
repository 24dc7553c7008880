//! `chunked_distribute()`: on a Citus coordinator, spreads the maps over the workers. The three
//! storage tables are distributed by `map`, colocated, so every row of one map lives on one
//! node; every function whose first argument is the map is distributed by that argument, so a
//! call (outside an explicit transaction) is delegated to the node that holds the map and runs
//! there, its statements on local shards. Idempotent: what is distributed already is left as it
//! is. Maps that exist already move with their tables. Refused where the message store is
//! installed: it runs on one node (docs/citus.md).
//!
//! The history-protecting triggers go along (Citus refuses triggers on distributed tables
//! unless `citus.enable_unsafe_triggers` is on, for the call): they are created on every shard,
//! where the statements that change rows run.

use super::map_functions::MAP_FUNCTIONS;
use super::statements as citus_statements;
use crate::error::ChunkedError;
use crate::guc;
use crate::pg::spi;
use crate::statements;
use crate::xact;

/// The tables distributed by map, the first one the colocation anchor: the storage, and (0.5)
/// the feed's positions, which live with their maps. The feed's consumers and their members
/// stay on the coordinator, where the feed runs; no moves are recorded on a cluster (see
/// `feed`), so `map_change` is emptied and no map is marked followed any more.
pub const TABLES: [&str; 5] = [
    citus_statements::TABLES_ANCHOR,
    "chunked_map.current_record",
    "chunked_map.archived_chunk",
    "chunked_map.record_id",
    "chunked_map.consumer_position",
];

/// What `chunked_distribute` did: tables and functions it distributed now (not before).
pub struct Distributed {
    pub tables: usize,
    pub functions: usize,
}

pub fn distribute() -> Distributed {
    // with search_path = pg_catalog, pg_temp, as every statement of the extension
    statements::connect(|session| {
        let database = citus_statements::current_database(session);
        if citus_statements::citus_version(session).is_none() {
            ChunkedError::CitusMissing {
                what: format!("the extension citus is not installed in database \"{database}\""),
            }
            .raise();
        }
        if !citus_statements::citus_is_coordinator(session) {
            ChunkedError::CitusMissing {
                what: format!("this node is not the Citus coordinator of database \"{database}\""),
            }
            .raise();
        }
        let unguarded =
            citus_statements::nodes_without_guard(session, super::null_map_guard::installed());
        if !unguarded.is_empty() {
            ChunkedError::NotPreloaded {
                nodes: format!("not on {}", unguarded.join(", ")),
            }
            .raise();
        }
        // The message store numbers a category's messages on one node: distributed maps would
        // leave its index on the node each write ran on (docs/citus.md). Looked at once no
        // install of it can be under way, so that the two never both succeed.
        citus_statements::lock_out_the_message_store(session);
        let with_message_store = citus_statements::nodes_with_message_store(session);
        if !with_message_store.is_empty() {
            ChunkedError::MessageStoreInstalled {
                nodes: with_message_store.join(", "),
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
    citus_statements::stop_recording_moves(session);
    let mut tables = 0;
    for (index, table) in TABLES.iter().enumerate() {
        if citus_statements::is_distributed_table(session, table) {
            continue;
        }
        let colocate_with = if index == 0 {
            "none"
        } else {
            citus_statements::TABLES_ANCHOR
        };
        citus_statements::distribute_table(session, table, colocate_with);
        tables += 1;
    }
    let mut functions = 0;
    for function in MAP_FUNCTIONS {
        if citus_statements::is_distributed_function(session, function) {
            continue;
        }
        citus_statements::distribute_function(session, function, citus_statements::TABLES_ANCHOR);
        functions += 1;
    }
    Distributed { tables, functions }
}
