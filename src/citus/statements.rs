//! The statements only a Citus cluster runs: what Citus is here, distributing the storage and
//! the functions, and where a map's shard lives.

use crate::pg::spi::{Bool, Int8, NotNull, Nullable, Session, Text, Void};
use crate::statements;

/// The storage table the others are colocated with.
pub const TABLES_ANCHOR: &str = "chunked_map.map_state";

/// What can be asked before Citus is known to be there.
pub mod probe {
    use crate::pg::spi::{NotNull, Text};
    use crate::statements;

    statements! {
        pub CURRENT_DATABASE: Statement<(), (NotNull<Text>,)> = read(
            "SELECT current_database()::text"
        );

        /// Citus, if it is installed in this database. The statements of `citus::statements`
        /// name Citus's functions and catalogs, and are only prepared once it is there.
        pub CITUS_VERSION: Statement<(), (NotNull<Text>,)> = read(
            "SELECT e.extversion FROM pg_catalog.pg_extension AS e WHERE e.extname = 'citus'"
        );
    }
}
use probe::{CITUS_VERSION, CURRENT_DATABASE};

statements! {
    pub CITUS_IS_COORDINATOR: Statement<(), (NotNull<Bool>,)> = read(
        "SELECT pg_catalog.citus_is_coordinator()"
    );

    /// The workers (`host:port`) without chunked_map's guard (`chunked_map.null_map_guard` is
    /// defined only where it is installed), and those that did not answer.
    pub WORKERS_WITHOUT_GUARD: Statement<(), (NotNull<Text>,)> = read(
        "SELECT w.nodename || ':' || w.nodeport
                || CASE WHEN w.success THEN '' ELSE ' (did not answer: ' || w.result || ')' END
         FROM pg_catalog.run_command_on_workers(
                  $$SELECT pg_catalog.current_setting('chunked_map.null_map_guard', true)$$) AS w
         WHERE NOT w.success OR w.result IS DISTINCT FROM 'on'
         ORDER BY w.nodename, w.nodeport"
    );

    /// The lock the message store's install script takes too before it looks whether the maps
    /// are distributed (sql/message_store): `chunked_distribute` and `CREATE EXTENSION
    /// chunked_map_message_store` look at each other one at a time. (It also holds back every
    /// append until the end of the transaction, as distributing the table does anyway.)
    pub LOCK_OUT_THE_MESSAGE_STORE: Statement<(), ()> = write(
        "LOCK TABLE chunked_map.map_state IN SHARE ROW EXCLUSIVE MODE"
    );

    /// The nodes where the message store (extension chunked_map_message_store) is installed:
    /// this coordinator, and the workers (`host:port`) that say so or do not answer.
    pub NODES_WITH_MESSAGE_STORE: Statement<(), (NotNull<Text>,)> = read(
        "SELECT 'this coordinator' FROM pg_catalog.pg_extension AS e
         WHERE e.extname = 'chunked_map_message_store'
         UNION ALL
         (SELECT w.nodename || ':' || w.nodeport
                 || CASE WHEN w.success THEN '' ELSE ' (did not answer: ' || w.result || ')' END
          FROM pg_catalog.run_command_on_workers(
                   $$SELECT pg_catalog.count(*) FROM pg_catalog.pg_extension AS e
                     WHERE e.extname = 'chunked_map_message_store'$$) AS w
          WHERE NOT w.success OR w.result <> '0'
          ORDER BY w.nodename, w.nodeport)"
    );

    /// Whether this node holds the shard of `map`'s state row (where a lock statement runs in
    /// this backend, Citus's local execution, and waits with this session's `lock_timeout`).
    pub MAP_IS_ON_THIS_NODE: Statement<(Text,), (NotNull<Int8>,)> = read(
        "SELECT count(*) FROM pg_catalog.pg_dist_placement AS p
         WHERE p.shardid = pg_catalog.get_shard_id_for_distribution_column('chunked_map.map_state', $1)
           AND p.groupid = (SELECT g.groupid FROM pg_catalog.pg_dist_local_group AS g)"
    );

    pub IS_DISTRIBUTED_TABLE: Statement<(Text,), (NotNull<Int8>,)> = write(
        "SELECT count(*) FROM pg_catalog.pg_dist_partition AS p WHERE p.logicalrelid = $1::regclass"
    );

    /// Distributes a storage table by `map` (moving the rows it holds into its shards) and
    /// removes the local copy of the rows (as the owner, whom the history triggers let through).
    pub DISTRIBUTE_TABLE: Statement<(Text, Text), (Nullable<Void>, Nullable<Void>)> = write(
        "SELECT pg_catalog.create_distributed_table($1::regclass, 'map', colocate_with => $2),
                pg_catalog.truncate_local_data_after_distributing_table($1::regclass)"
    );

    /// A cluster records no moves (see `feed`): maps followed on the single node this database
    /// was are not any more, and the moves recorded there are gone.
    /// (Two statements: on a second call `map_state` is distributed and `map_change` is not.)
    pub UNFOLLOW_EVERY_MAP: Statement<(), ()> = write(
        "UPDATE chunked_map.map_state AS s SET followed = false WHERE s.followed"
    );

    pub FORGET_MOVES: Statement<(), ()> = write("DELETE FROM chunked_map.map_change");

    pub IS_DISTRIBUTED_FUNCTION: Statement<(Text,), (NotNull<Int8>,)> = write(
        "SELECT count(*) FROM pg_catalog.pg_dist_object AS o
         WHERE o.classid = 'pg_catalog.pg_proc'::regclass AND o.objid = $1::regprocedure
           AND o.distribution_argument_index IS NOT NULL"
    );

    /// Distributes a function by its first argument, colocated with the storage tables: a call
    /// is delegated to the node holding that map.
    pub DISTRIBUTE_FUNCTION: Statement<(Text, Text), (Nullable<Void>,)> = write(
        "SELECT pg_catalog.create_distributed_function($1::regprocedure, '$1', colocate_with => $2)"
    );
}

fn count(rows: crate::pg::spi::Rows<'_, (NotNull<Int8>,)>) -> i64 {
    rows.first().map_or(0, |(count,)| count)
}

pub fn current_database(session: &Session) -> String {
    session
        .run(&CURRENT_DATABASE, ())
        .first()
        .map(|(name,)| name)
        .unwrap_or_else(|| {
            crate::error::ChunkedError::Internal {
                context: "current_database() returned no row".into(),
            }
            .raise()
        })
}

pub fn citus_version(session: &Session) -> Option<String> {
    session.run(&CITUS_VERSION, ()).first().map(|(v,)| v)
}

pub fn citus_is_coordinator(session: &Session) -> bool {
    session
        .run(&CITUS_IS_COORDINATOR, ())
        .first()
        .is_some_and(|(coordinator,)| coordinator)
}

/// Nodes without chunked_map's guard: this one (`guarded`: whether this process has it) and
/// the workers.
pub fn nodes_without_guard(session: &Session, guarded: bool) -> Vec<String> {
    let mut nodes: Vec<String> = Vec::new();
    if !guarded {
        nodes.push("this coordinator".to_owned());
    }
    nodes.extend(
        session
            .run(&WORKERS_WITHOUT_GUARD, ())
            .iter()
            .map(|(node,)| node),
    );
    nodes
}

/// Waits for any install of the message store under way, and holds back the next until the
/// transaction ends (`LOCK_OUT_THE_MESSAGE_STORE`).
pub fn lock_out_the_message_store(session: &Session) {
    session.run(&LOCK_OUT_THE_MESSAGE_STORE, ());
}

/// The nodes where the message store is installed, this coordinator first, on the newest
/// committed state (also under REPEATABLE READ, whose snapshot can predate the caller's lock).
pub fn nodes_with_message_store(session: &Session) -> Vec<String> {
    session
        .run_on_latest(&NODES_WITH_MESSAGE_STORE, ())
        .iter()
        .map(|(node,)| node)
        .collect()
}

pub fn map_is_on_this_node(session: &Session, map: &str) -> bool {
    count(session.run(&MAP_IS_ON_THIS_NODE, (map,))) > 0
}

pub fn is_distributed_table(session: &Session, table: &str) -> bool {
    count(session.run(&IS_DISTRIBUTED_TABLE, (table,))) > 0
}

pub fn distribute_table(session: &Session, table: &str, colocate_with: &str) {
    session.run(&DISTRIBUTE_TABLE, (table, colocate_with));
}

pub fn stop_recording_moves(session: &Session) {
    session.run(&UNFOLLOW_EVERY_MAP, ());
    session.run(&FORGET_MOVES, ());
}

pub fn is_distributed_function(session: &Session, function: &str) -> bool {
    count(session.run(&IS_DISTRIBUTED_FUNCTION, (function,))) > 0
}

pub fn distribute_function(session: &Session, function: &str, colocate_with: &str) {
    session.run(&DISTRIBUTE_FUNCTION, (function, colocate_with));
}
