//! Following a map: while a map's notifications are on *at its commit*, every committed
//! transaction that appended to it sends one notification on the map's own channel with its
//! newest sequence; nothing is sent for rolled-back appends, nor for maps whose notifications
//! are off. Every check reads what was delivered after one round trip of the listener (see
//! `notifications_delivered`): no timer.

use chunked_map_cluster_tests::{
    announced, assert_error, listen_to, notifications_delivered as delivered, Client, Cluster,
};

/// A cluster with maps `loud` (notifications on) and `quiet`, a writer, and a listener on
/// `loud`'s channel (returned last).
fn setup(database: &str) -> (Cluster, Client, Client, String) {
    let cluster = Cluster::start();
    let mut writer = cluster.database(database);
    writer
        .batch_execute(
            "SELECT chunked_map.chunked_start('loud', 3);
             SELECT chunked_map.chunked_start('quiet', 3);
             SELECT chunked_map.chunked_set_notify('loud', true);",
        )
        .unwrap();
    let mut listener = cluster.connect(database);
    let loud = listen_to(&mut listener, "loud");
    (cluster, writer, listener, loud)
}

#[test]
fn a_committed_transaction_sends_one_notification_per_map_with_its_newest_sequence() {
    let (_cluster, mut writer, mut listener, loud) = setup("notify_commit");
    // four appends in one transaction (one rollover among them), one alone, and a batch
    writer
        .batch_execute(
            "BEGIN;
             SELECT chunked_map.chunked_register('loud', '{}') FROM generate_series(1, 4);
             SELECT chunked_map.chunked_register('quiet', '{}');
             COMMIT;",
        )
        .unwrap();
    writer
        .execute("SELECT chunked_map.chunked_register('loud', '{}')", &[])
        .unwrap();
    writer
        .execute(
            "SELECT count(*) FROM chunked_map.chunked_register_many('loud', ARRAY['{}', '{}']::jsonb[])",
            &[],
        )
        .unwrap();
    assert_eq!(
        delivered(&mut listener),
        vec![
            announced(&loud, "loud", 4),
            announced(&loud, "loud", 5),
            announced(&loud, "loud", 7),
        ]
    );
}

#[test]
fn nothing_is_sent_for_rolled_back_appends_nor_for_a_map_whose_notifications_are_off() {
    let (_cluster, mut writer, mut listener, loud) = setup("notify_rollback");
    writer
        .batch_execute(
            "BEGIN;
             SELECT chunked_map.chunked_register('loud', '{}');
             ROLLBACK;
             SELECT chunked_map.chunked_register('quiet', '{}');",
        )
        .unwrap();
    // appends in a savepoint that rolls back do not count; the ones before it do
    writer
        .batch_execute(
            "BEGIN;
             SELECT chunked_map.chunked_register('loud', '{}');
             SAVEPOINT s;
             SELECT chunked_map.chunked_register('loud', '{}');
             ROLLBACK TO SAVEPOINT s;
             COMMIT;",
        )
        .unwrap();
    // a transaction whose only append to the map rolled back to a savepoint sends nothing
    writer
        .batch_execute(
            "BEGIN;
             SAVEPOINT s;
             SELECT chunked_map.chunked_register('loud', '{}');
             ROLLBACK TO SAVEPOINT s;
             COMMIT;",
        )
        .unwrap();
    assert_eq!(delivered(&mut listener), vec![announced(&loud, "loud", 1)]);

    // turned off, the map is quiet again
    writer
        .batch_execute(
            "SELECT chunked_map.chunked_set_notify('loud', false);
             SELECT chunked_map.chunked_register('loud', '{}');",
        )
        .unwrap();
    assert_eq!(delivered(&mut listener), vec![]);
    let info: bool = writer
        .query_one(
            "SELECT (chunked_map.chunked_info('loud') ->> 'notify')::boolean",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(!info);
}

#[test]
fn a_prepared_transaction_cannot_announce_and_says_so() {
    let cluster = Cluster::start_with(&["max_prepared_transactions=2"]);
    let mut writer = cluster.database("notify_prepared");
    writer
        .batch_execute(
            "SELECT chunked_map.chunked_start('loud');
             SELECT chunked_map.chunked_set_notify('loud', true);
             SELECT chunked_map.chunked_start('quiet');",
        )
        .unwrap();
    writer
        .batch_execute("BEGIN; SELECT chunked_map.chunked_register('loud', '{}');")
        .unwrap();
    let error = assert_error(
        writer.batch_execute("PREPARE TRANSACTION 'p1'"),
        "0A000",
        "cannot PREPARE a transaction that appended to a map whose notifications are on",
    );
    assert!(error
        .hint()
        .unwrap_or_default()
        .contains("chunked_set_notify"));
    // the map is as it was, and a map without notifications prepares fine
    writer
        .batch_execute(
            "BEGIN;
             SELECT chunked_map.chunked_register('quiet', '{}');
             PREPARE TRANSACTION 'p2';",
        )
        .unwrap();
    writer.batch_execute("COMMIT PREPARED 'p2'").unwrap();
    let newest: i64 = writer
        .query_one(
            "SELECT (chunked_map.chunked_info('loud') ->> 'total_records')::bigint",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(newest, 0);
}

/// Review finding: the commit-time announcement ran SQL as the committing role, under its
/// `search_path`. It now reads nothing at commit: a writer granted only the writer recipe,
/// with a `search_path` that shadows everything it could call, announces as the owner does.
#[test]
fn a_granted_writer_with_a_hostile_search_path_announces_its_commit() {
    let (cluster, mut owner, mut listener, loud) = setup("notify_writer");
    owner
        .batch_execute(
            &std::fs::read_to_string(
                chunked_map_cluster_tests::repo_root().join("sql/grants/writer.sql"),
            )
            .unwrap(),
        )
        .unwrap();
    owner
        .batch_execute(
            "CREATE ROLE app LOGIN IN ROLE chunked_map_writer;
             CREATE SCHEMA trap AUTHORIZATION app;",
        )
        .unwrap();
    let mut app = cluster.connect_as("notify_writer", "app");
    app.batch_execute(
        "CREATE FUNCTION trap.pg_notify(text, text) RETURNS void LANGUAGE sql AS 'SELECT 1/0';
         CREATE FUNCTION trap.jsonb_build_object(text, bigint) RETURNS jsonb
             LANGUAGE sql AS 'SELECT NULL::jsonb';
         CREATE TABLE trap.map_state (map text);
         SET search_path = trap, pg_catalog, chunked_map;",
    )
    .unwrap();
    app.batch_execute(
        "BEGIN;
         SELECT chunked_map.chunked_register('loud', '{\"by\": \"app\"}');
         SELECT chunked_map.chunked_register('loud', '{\"by\": \"app\"}');
         COMMIT;",
    )
    .unwrap();
    assert_eq!(delivered(&mut listener), vec![announced(&loud, "loud", 2)]);
}

/// Review finding: an append rolled back to a savepoint, then another write to the same map in
/// the transaction (chunked_set_chunk_size), announced the rolled-back sequence.
#[test]
fn a_rolled_back_append_followed_by_another_write_to_the_map_announces_nothing() {
    let (_cluster, mut writer, mut listener, loud) = setup("notify_other_write");
    writer
        .batch_execute(
            "BEGIN;
             SAVEPOINT s;
             SELECT chunked_map.chunked_register('loud', '{}');
             ROLLBACK TO SAVEPOINT s;
             SELECT chunked_map.chunked_set_chunk_size('loud', 5);
             COMMIT;",
        )
        .unwrap();
    assert_eq!(delivered(&mut listener), vec![]);
    // and the next transaction's append is sequence 1, announced as such
    writer
        .execute("SELECT chunked_map.chunked_register('loud', '{}')", &[])
        .unwrap();
    assert_eq!(delivered(&mut listener), vec![announced(&loud, "loud", 1)]);
}

/// Review finding: a transaction whose appends to an announced map all rolled back to a
/// savepoint has nothing to announce, so it can be prepared.
#[test]
fn a_transaction_whose_announced_appends_rolled_back_can_be_prepared() {
    let cluster = Cluster::start_with(&["max_prepared_transactions=2"]);
    let mut writer = cluster.database("notify_prepare_after_rollback");
    writer
        .batch_execute(
            "SELECT chunked_map.chunked_start('loud');
             SELECT chunked_map.chunked_set_notify('loud', true);
             SELECT chunked_map.chunked_start('quiet');
             BEGIN;
             SAVEPOINT s;
             SELECT chunked_map.chunked_register('loud', '{}');
             ROLLBACK TO SAVEPOINT s;
             SELECT chunked_map.chunked_register('quiet', '{}');
             PREPARE TRANSACTION 'p';",
        )
        .unwrap();
    writer.batch_execute("COMMIT PREPARED 'p'").unwrap();
    let totals: String = writer
        .query_one(
            "SELECT (chunked_map.chunked_info('loud') ->> 'total_records') || ' ' ||
                    (chunked_map.chunked_info('quiet') ->> 'total_records')",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(totals, "0 1");
}

/// Review finding: a map dropped, or the extension dropped, in the transaction that appended to
/// an announced map: the commit succeeds and announces nothing of what no longer exists; a drop
/// rolled back to a savepoint takes nothing away.
#[test]
fn what_the_transaction_dropped_is_not_announced() {
    let (_cluster, mut writer, mut listener, _loud) = setup("notify_drop");
    writer
        .batch_execute(
            "SELECT chunked_map.chunked_start('also_loud');
             SELECT chunked_map.chunked_set_notify('also_loud', true);",
        )
        .unwrap();
    let also_loud = listen_to(&mut listener, "also_loud");
    writer
        .batch_execute(
            "BEGIN;
             SELECT chunked_map.chunked_register('loud', '{}');
             SELECT chunked_map.chunked_register('also_loud', '{}');
             SELECT chunked_map.chunked_drop('loud');
             SAVEPOINT s;
             SELECT chunked_map.chunked_drop('also_loud');
             ROLLBACK TO SAVEPOINT s;
             COMMIT;",
        )
        .unwrap();
    assert_eq!(
        delivered(&mut listener),
        vec![announced(&also_loud, "also_loud", 1)]
    );
    writer
        .batch_execute(
            "BEGIN;
             SELECT chunked_map.chunked_register('also_loud', '{}');
             DROP EXTENSION chunked_map CASCADE;
             COMMIT;",
        )
        .unwrap();
    let left: i64 = writer
        .query_one(
            "SELECT count(*) FROM pg_extension WHERE extname = 'chunked_map'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(left, 0);
    assert_eq!(delivered(&mut listener), vec![]);
    // dropped and created again in the transaction: the new extension has none of the maps
    writer
        .batch_execute(
            "CREATE EXTENSION chunked_map;
             SELECT chunked_map.chunked_start('again');
             SELECT chunked_map.chunked_set_notify('again', true);",
        )
        .unwrap();
    let again = listen_to(&mut listener, "again");
    writer
        .batch_execute(
            "BEGIN;
             SELECT chunked_map.chunked_register('again', '{}');
             DROP EXTENSION chunked_map CASCADE;
             CREATE EXTENSION chunked_map;
             COMMIT;",
        )
        .unwrap();
    assert_eq!(delivered(&mut listener), vec![]);
    let _ = again;
}

/// The decision is the commit's: notifications turned on after the transaction appended to the
/// map announce those appends; turned off before the commit, nothing is sent; a change rolled
/// back to a savepoint counts for nothing.
#[test]
fn whether_a_commit_announces_is_decided_by_the_setting_at_commit() {
    let (_cluster, mut writer, mut listener, loud) = setup("notify_decided_at_commit");
    // appended while off, turned on before the commit: announced
    writer
        .batch_execute(
            "SELECT chunked_map.chunked_start('late', 3);
             BEGIN;
             SELECT chunked_map.chunked_register('late', '{}') FROM generate_series(1, 4);
             SELECT chunked_map.chunked_set_notify('late', true);
             COMMIT;",
        )
        .unwrap();
    let late = listen_to(&mut listener, "late");
    // (the LISTEN came after that commit: it cannot be heard; the next one is)
    writer
        .batch_execute(
            "BEGIN;
             SELECT chunked_map.chunked_set_notify('late', false);
             SELECT chunked_map.chunked_register('late', '{}');
             SELECT chunked_map.chunked_set_notify('late', true);
             COMMIT;",
        )
        .unwrap();
    assert_eq!(delivered(&mut listener), vec![announced(&late, "late", 5)]);
    // appended while on, turned off before the commit: nothing
    writer
        .batch_execute(
            "BEGIN;
             SELECT chunked_map.chunked_register('loud', '{}');
             SELECT chunked_map.chunked_set_notify('loud', false);
             COMMIT;",
        )
        .unwrap();
    assert_eq!(delivered(&mut listener), vec![]);
    // turned off in a savepoint that rolls back: still on at the commit, announced
    writer
        .batch_execute(
            "SELECT chunked_map.chunked_set_notify('loud', true);
             BEGIN;
             SELECT chunked_map.chunked_register('loud', '{}');
             SAVEPOINT s;
             SELECT chunked_map.chunked_set_notify('loud', false);
             ROLLBACK TO SAVEPOINT s;
             COMMIT;",
        )
        .unwrap();
    assert_eq!(delivered(&mut listener), vec![announced(&loud, "loud", 2)]);
    // turned on without an append in the transaction: nothing to announce
    writer
        .batch_execute(
            "BEGIN;
             SELECT chunked_map.chunked_set_notify('late', false);
             SELECT chunked_map.chunked_set_notify('late', true);
             COMMIT;",
        )
        .unwrap();
    assert_eq!(delivered(&mut listener), vec![]);
    // the channel is the map's for good: turned off and on, it stays the same
    assert_eq!(listen_to(&mut listener, "late"), late);
}
