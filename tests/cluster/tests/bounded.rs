//! The contract (docs/contract.md), Chunks and tokens: an append reads and writes a bounded amount of data (at most one
//! chunk plus the state row) however many records the map holds, and a page read touches only
//! the chunk it names and the state row. Checked with PostgreSQL's own per-table counters on a
//! map of many chunks among many maps.

use chunked_map_cluster_tests::{Client, Cluster};

/// Per storage table: (sequential scans, index scans, tuples read by sequential scans).
fn table_access(client: &mut Client) -> Vec<(String, i64, i64, i64)> {
    client
        .batch_execute("SELECT pg_stat_force_next_flush()")
        .unwrap();
    client
        .query(
            "SELECT relname::text, coalesce(seq_scan, 0), coalesce(idx_scan, 0), coalesce(seq_tup_read, 0)
             FROM pg_stat_user_tables WHERE schemaname = 'chunked_map' ORDER BY relname",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2), row.get(3)))
        .collect()
}

fn delta(
    before: &[(String, i64, i64, i64)],
    after: &[(String, i64, i64, i64)],
    table: &str,
) -> (i64, i64, i64) {
    // a table missing from the counters is a broken test (a renamed table), not zero accesses
    let find = |rows: &[(String, i64, i64, i64)]| {
        rows.iter()
            .find(|r| r.0 == table)
            .map(|r| (r.1, r.2, r.3))
            .unwrap_or_else(|| panic!("chunked_map.{table} is not in pg_stat_user_tables"))
    };
    let (b, a) = (find(before), find(after));
    (a.0 - b.0, a.1 - b.1, a.2 - b.2)
}

#[test]
#[should_panic(expected = "chunked_map.map_state is not in pg_stat_user_tables")]
fn a_table_missing_from_the_counters_fails_the_comparison() {
    let counters = vec![("current_record".to_string(), 1, 2, 3)];
    delta(&counters, &counters, "map_state");
}

#[test]
fn appends_never_read_history_and_a_page_read_touches_one_chunk() {
    let cluster = Cluster::start();
    let mut client = cluster.database("bounded");
    // 2,000 maps with 20 records each in their current chunks (40,000 rows of current_record
    // that a scan of it would read), and one of 20,000 records (200 archived chunks)
    client
        .batch_execute(
            "SELECT chunked_map.chunked_start('other' || n) FROM generate_series(1, 2000) AS n;
             SELECT count(*) FROM generate_series(1, 2000) AS n,
                 chunked_map.chunked_register_many('other' || n, ARRAY(SELECT '{}'::jsonb FROM generate_series(1, 20)));
             SELECT chunked_map.chunked_start('big');
             SELECT count(*) FROM chunked_map.chunked_register_many('big',
                 ARRAY(SELECT jsonb_build_object('n', n) FROM generate_series(1, 20000) AS n));",
        )
        .unwrap();
    client
        .batch_execute(
            "ANALYZE chunked_map.map_state, chunked_map.current_record, chunked_map.archived_chunk",
        )
        .unwrap();

    // 250 single appends (two rollovers among them), each its own transaction
    let before = table_access(&mut client);
    for _ in 0..250 {
        client
            .execute("SELECT chunked_map.chunked_register('big', '{}')", &[])
            .unwrap();
    }
    let after = table_access(&mut client);
    let (seq_scans, index_scans, _) = delta(&before, &after, "archived_chunk");
    assert_eq!(
        (seq_scans, index_scans),
        (0, 0),
        "appends never read archived chunks"
    );
    let (seq_scans, _, _) = delta(&before, &after, "current_record");
    assert_eq!(
        seq_scans, 0,
        "the current chunk is reached through its index"
    );
    let (seq_scans, _, _) = delta(&before, &after, "map_state");
    assert_eq!(seq_scans, 0, "the state row is reached through its index");

    // an archived page: one index probe of archived_chunk, nothing else of the map's history
    let before = table_access(&mut client);
    client
        .execute(
            "SELECT chunked_map.chunked_page('big', '00000000000000010001')",
            &[],
        )
        .unwrap();
    let after = table_access(&mut client);
    assert_eq!(delta(&before, &after, "archived_chunk"), (0, 1, 0));
    assert_eq!(delta(&before, &after, "current_record"), (0, 0, 0));
    let (seq_scans, _, _) = delta(&before, &after, "map_state");
    assert_eq!(seq_scans, 0);

    // the current page: the state row and the current chunk, no archived chunk
    let before = table_access(&mut client);
    client
        .execute("SELECT chunked_map.chunked_page('big')", &[])
        .unwrap();
    let after = table_access(&mut client);
    assert_eq!(delta(&before, &after, "archived_chunk"), (0, 0, 0));
    let (seq_scans, index_scans, _) = delta(&before, &after, "current_record");
    assert_eq!((seq_scans, index_scans), (0, 1));
    assert_eq!(delta(&before, &after, "map_state"), (0, 1, 0));

    // a record by sequence: one probe of the archived chunks' primary key
    let before = table_access(&mut client);
    client
        .execute("SELECT chunked_map.chunked_get('big', 12345)", &[])
        .unwrap();
    let after = table_access(&mut client);
    assert_eq!(delta(&before, &after, "archived_chunk"), (0, 1, 0));

    // following the map: a read at its tail (after a sequence of the current chunk) touches no
    // archived chunk, only the state row and the current chunk
    let before = table_access(&mut client);
    let tail: i64 = client
        .query_one(
            "SELECT count(*) FROM chunked_map.chunked_read('big', 20210, 1000)",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(tail, 40);
    let after = table_access(&mut client);
    assert_eq!(delta(&before, &after, "archived_chunk"), (0, 0, 0));
    let (seq_scans, _, _) = delta(&before, &after, "current_record");
    assert_eq!(seq_scans, 0);
    let (seq_scans, _, _) = delta(&before, &after, "map_state");
    assert_eq!(seq_scans, 0);

    // from the start, 150 records: the two archived chunks that hold them, and nothing of the
    // 200 others
    let fetched_before = archived_fetched_by_index(&mut client);
    let before = table_access(&mut client);
    let first: Vec<i64> = client
        .query(
            "SELECT seq FROM chunked_map.chunked_read('big', 0, 150)",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(first, (1..=150).collect::<Vec<_>>());
    let after = table_access(&mut client);
    assert_eq!(
        delta(&before, &after, "archived_chunk"),
        (0, 2, 0),
        "one probe for the chunk holding the position, one range scan from it"
    );
    let (seq_scans, _, _) = delta(&before, &after, "current_record");
    assert_eq!(seq_scans, 0);
    let fetched = archived_fetched_by_index(&mut client) - fetched_before;
    assert!(
        fetched <= 3,
        "archived chunks fetched: {fetched}; a scan to the end would fetch 200"
    );
}

/// Rows of archived_chunk fetched through its indexes so far.
fn archived_fetched_by_index(client: &mut Client) -> i64 {
    client
        .batch_execute("SELECT pg_stat_force_next_flush()")
        .unwrap();
    client
        .query_one(
            "SELECT coalesce(idx_tup_fetch, 0) FROM pg_stat_user_tables
             WHERE schemaname = 'chunked_map' AND relname = 'archived_chunk'",
            &[],
        )
        .unwrap()
        .get(0)
}

/// Rows inserted into each storage table so far.
fn inserted(client: &mut Client) -> Vec<(String, i64)> {
    client
        .batch_execute("SELECT pg_stat_force_next_flush()")
        .unwrap();
    client
        .query(
            "SELECT relname::text, n_tup_ins FROM pg_stat_user_tables
             WHERE schemaname = 'chunked_map' ORDER BY relname",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect()
}

fn inserted_into(before: &[(String, i64)], after: &[(String, i64)], table: &str) -> i64 {
    let find = |rows: &[(String, i64)]| {
        rows.iter()
            .find(|r| r.0 == table)
            .map(|r| r.1)
            .unwrap_or_default()
    };
    find(after) - find(before)
}

#[test]
fn a_batch_archives_its_full_chunks_without_passing_them_through_the_current_chunk() {
    let cluster = Cluster::start();
    let mut client = cluster.database("batch_rows");
    client
        .batch_execute(
            "SELECT chunked_map.chunked_start('batch', 100);
             SELECT chunked_map.chunked_register('batch', '{}') FROM generate_series(1, 30);",
        )
        .unwrap();
    let before = inserted(&mut client);
    let count: i64 = client
        .query_one(
            "SELECT count(*) FROM chunked_map.chunked_register_many('batch',
                 ARRAY(SELECT jsonb_build_object('n', n) FROM generate_series(1, 10050) AS n))",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(count, 10_050);
    let after = inserted(&mut client);
    // 70 fill the current chunk (31..100), 100 chunks of 100 go to the archive as they are,
    // and the last 80 make the new current chunk
    assert_eq!(inserted_into(&before, &after, "current_record"), 70 + 80);
    assert_eq!(inserted_into(&before, &after, "archived_chunk"), 1 + 99);
    let next_seq: i64 = client
        .query_one(
            "SELECT (chunked_map.chunked_info('batch') ->> 'next_seq')::bigint",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(next_seq, 10_081);
    let consistent: bool = client
        .query_one(
            "SELECT (chunked_map.chunked_verify('batch') ->> 'consistent')::boolean",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(consistent);
}

#[test]
fn the_five_thousandth_append_of_a_transaction_finds_the_state_row_without_the_index() {
    let cluster = Cluster::start();
    let mut client = cluster.database("long_transaction");
    // written directly (the default) or by SQL, the first append finds the row through the
    // index and learns its new address; every later one goes to the version by that address
    for (direct, probes) in [(true, 1), (false, 1)] {
        let map = format!("long_{direct}");
        client
            .execute("SELECT chunked_map.chunked_start($1, 10000)", &[&map])
            .unwrap();
        client
            .batch_execute(&format!("SET chunked_map.direct_append = {direct}"))
            .unwrap();
        let before = table_access(&mut client);
        // 5,000 calls, each its own statement, in one transaction: every append rewrites the
        // state row, and only the transaction's commit lets PostgreSQL prune the versions;
        // found through the index, the Nth append would visit N of them
        client.batch_execute("BEGIN").unwrap();
        for expected in 1..=5_000_i64 {
            let seq: i64 = client
                .query_one("SELECT chunked_map.chunked_register($1, '{}')", &[&map])
                .unwrap()
                .get(0);
            assert_eq!(seq, expected);
        }
        client.batch_execute("COMMIT").unwrap();
        let after = table_access(&mut client);
        assert_eq!(
            delta(&before, &after, "map_state"),
            (0, probes, 0),
            "direct_append = {direct}: {probes} index probe(s), the others go to the row version by address"
        );
        let consistent: bool = client
            .query_one(
                "SELECT (chunked_map.chunked_verify($1) ->> 'consistent')::boolean",
                &[&map],
            )
            .unwrap()
            .get(0);
        assert!(consistent);
    }
}
