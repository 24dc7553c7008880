//! The contract (docs/contract.md), Scale-out: on a Citus coordinator with two workers, `chunked_distribute()` spreads
//! the maps over the workers, and the contract holds on the distributed cluster: API, tokens,
//! errors with their SQLSTATEs, 40001 on a held map and `chunked_map.lock_timeout`, contiguous
//! sequences under concurrent writers with retry, immutability for granted roles on every node,
//! `search_path` tricks, verify, info, forward reads, notifications.
//!
//! Citus is not part of the project: these tests run where it is installed, through
//! `scripts/test-citus.sh` (`cargo test --test citus -- --ignored`), which says so and skips
//! where it is not.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use chunked_map_cluster_tests::citus::CitusCluster;
use chunked_map_cluster_tests::dice::Dice;
use chunked_map_cluster_tests::page::{
    all_pages_text, all_seqs, fixture_pages_now, fixture_pages_then, without_time,
};
use chunked_map_cluster_tests::{
    announced, assert_error, notifications_delivered as delivered, notify_channel, query_json,
    Client,
};
use serde_json::json;

fn register(client: &mut Client, map: &str, payload: &str) -> Result<i64, postgres::Error> {
    client
        .query_one(
            "SELECT chunked_map.chunked_register($1, $2::text::jsonb)",
            &[&map, &payload],
        )
        .map(|row| row.get(0))
}

fn distribute(client: &mut Client) {
    client
        .batch_execute("SELECT chunked_map.chunked_distribute()")
        .expect("chunked_distribute");
}

/// Calls of chunked_register(text, jsonb) counted by a node since its start.
fn register_calls(client: &mut Client) -> i64 {
    client
        .batch_execute("SELECT pg_stat_force_next_flush()")
        .unwrap();
    client
        .query_one(
            "SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_user_functions
             WHERE schemaname = 'chunked_map' AND funcname = 'chunked_register'",
            &[],
        )
        .unwrap()
        .get(0)
}

#[test]
#[ignore = "needs Citus: scripts/test-citus.sh"]
fn distributing_keeps_existing_maps_and_calls_run_on_the_node_holding_the_map() {
    let citus = CitusCluster::start("distribute");
    let mut coordinator = citus.coordinator();
    coordinator
        .batch_execute(
            "SELECT chunked_map.chunked_start('before', 3);
             SELECT chunked_map.chunked_register('before', jsonb_build_object('n', n))
             FROM generate_series(1, 10) AS n;
             SELECT chunked_map.chunked_start('also_before');
             SELECT chunked_map.chunked_register('also_before', '{\"big\": 12345678901234567890.5}');",
        )
        .unwrap();
    let before = all_pages_text(&mut coordinator, "before");
    let also_before = all_pages_text(&mut coordinator, "also_before");

    distribute(&mut coordinator);
    // idempotent: a second call finds everything distributed and changes nothing
    distribute(&mut coordinator);

    let tables: Vec<(String, String, i32)> = coordinator
        .query(
            "SELECT logicalrelid::regclass::text, column_to_column_name(logicalrelid, partkey),
                    colocationid
             FROM pg_dist_partition WHERE logicalrelid::regclass::text LIKE 'chunked_map.%'
             ORDER BY 1",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2)))
        .collect();
    assert_eq!(
        tables.iter().map(|t| t.0.as_str()).collect::<Vec<_>>(),
        [
            "chunked_map.archived_chunk",
            // (0.5) the feed's positions live with their maps
            "chunked_map.consumer_position",
            "chunked_map.current_record",
            "chunked_map.map_state",
            "chunked_map.record_id"
        ]
    );
    assert!(tables.iter().all(|t| t.1 == "map"), "{tables:?}");
    assert!(
        tables.iter().all(|t| t.2 == tables[0].2),
        "colocated: {tables:?}"
    );
    let functions: Vec<String> = coordinator
        .query(
            "SELECT o.objid::regprocedure::text FROM pg_dist_object AS o
             WHERE o.classid = 'pg_proc'::regclass AND o.distribution_argument_index = 0
               AND o.colocationid = $1
             ORDER BY 1",
            &[&tables[0].2],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(
        functions,
        [
            "chunked_map.chunked_drop(text)",
            "chunked_map.chunked_get(text,bigint)",
            "chunked_map.chunked_get_by_id(text,text)",
            "chunked_map.chunked_info(text)",
            "chunked_map.chunked_page(text,text)",
            "chunked_map.chunked_read(text,bigint,integer)",
            "chunked_map.chunked_records(text,text)",
            "chunked_map.chunked_register(text,jsonb)",
            "chunked_map.chunked_register(text,jsonb,bigint)",
            "chunked_map.chunked_register_many(text,jsonb[])",
            "chunked_map.chunked_register_many_once(text,jsonb[],text[])",
            "chunked_map.chunked_register_once(text,jsonb,text,bigint)",
            // (0.5) the message store's append
            "chunked_map.chunked_register_with_id(text,jsonb,text,timestamp with time zone)",
            "chunked_map.chunked_set_chunk_size(text,integer)",
            "chunked_map.chunked_set_id_window(text,bigint)",
            "chunked_map.chunked_set_notify(text,boolean)",
            "chunked_map.chunked_set_retention(text,bigint,interval)",
            "chunked_map.chunked_start(text,integer)",
            "chunked_map.chunked_trim(text,bigint)",
            "chunked_map.chunked_verify(text)",
        ]
    );
    // the rows moved to the shards: the coordinator's own tables keep none, not even on disk
    let local_bytes: i64 = coordinator
        .query_one(
            "SELECT sum(pg_relation_size(c))::bigint FROM unnest(ARRAY['chunked_map.map_state',
                 'chunked_map.current_record', 'chunked_map.archived_chunk', 'chunked_map.record_id']::regclass[]) AS c",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(local_bytes, 0);

    // every page as it was, through the coordinator and through each worker
    assert_eq!(all_pages_text(&mut coordinator, "before"), before);
    assert_eq!(all_pages_text(&mut coordinator, "also_before"), also_before);
    for index in 0..2 {
        let mut worker = citus.worker(index);
        assert_eq!(all_pages_text(&mut worker, "before"), before);
    }

    // calls outside a transaction block are delegated: they run on the workers, not here
    let coordinator_calls = register_calls(&mut coordinator);
    let worker_calls: i64 = (0..2).map(|i| register_calls(&mut citus.worker(i))).sum();
    for n in 0..20 {
        let map = format!("spread{}", n % 10);
        coordinator
            .execute("SELECT chunked_map.chunked_start($1)", &[&map])
            .unwrap();
        register(&mut coordinator, &map, "{}").unwrap();
    }
    // the workers' sessions report their counts when idle, within a second or so
    let mut delegated = 0;
    for _ in 0..100 {
        let now: i64 = (0..2).map(|i| register_calls(&mut citus.worker(i))).sum();
        delegated = now - worker_calls;
        if delegated >= 20 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(delegated, 20);
    assert_eq!(register_calls(&mut coordinator), coordinator_calls);
    // and the maps are spread over both workers
    let per_worker: Vec<i64> = (0..2)
        .map(|i| {
            citus
                .worker(i)
                .query_one(
                    "SELECT count(*) FROM pg_stat_user_functions
                     WHERE funcname = 'chunked_register' AND calls > 0",
                    &[],
                )
                .unwrap()
                .get(0)
        })
        .collect();
    assert_eq!(per_worker, [1, 1], "both workers ran appends");
}

#[test]
#[ignore = "needs Citus: scripts/test-citus.sh"]
fn the_api_and_its_errors_hold_through_the_coordinator_and_through_a_worker() {
    let citus = CitusCluster::start("api");
    let mut coordinator = citus.coordinator();
    distribute(&mut coordinator);
    let clients = [
        ("via_coordinator", coordinator),
        ("via_worker", citus.worker(0)),
    ];
    for (map, mut client) in clients {
        let started: bool = client
            .query_one("SELECT chunked_map.chunked_start($1, 3)", &[&map])
            .unwrap()
            .get(0);
        assert!(started);
        let again: bool = client
            .query_one("SELECT chunked_map.chunked_start($1, 3)", &[&map])
            .unwrap()
            .get(0);
        assert!(!again);
        for n in 1..=7 {
            assert_eq!(
                register(&mut client, map, &format!("{{\"n\": {n}}}")).unwrap(),
                n
            );
        }
        // pages newest first, tokens chained, every record once
        assert_eq!(all_seqs(&mut client, map), [7, 6, 5, 4, 3, 2, 1]);
        let page = query_json(
            &mut client,
            "chunked_map.chunked_page($1, '00000000000000000004')",
            &[&map],
        );
        assert_eq!(page["next_page_token"], "00000000000000000001");
        let forward: Vec<i64> = client
            .query(
                "SELECT seq FROM chunked_map.chunked_read($1, 2, 4)",
                &[&map],
            )
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect();
        assert_eq!(forward, [3, 4, 5, 6]);
        let rows: i64 = client
            .query_one(
                "SELECT count(*) FROM chunked_map.chunked_records($1, '00000000000000000001')",
                &[&map],
            )
            .unwrap()
            .get(0);
        assert_eq!(rows, 3);
        assert_eq!(
            without_time(query_json(
                &mut client,
                "chunked_map.chunked_get($1, 5)",
                &[&map]
            )),
            json!({"seq": 5, "payload": {"n": 5}, "id": null})
        );
        let many: i64 = client
            .query_one(
                "SELECT count(*) FROM chunked_map.chunked_register_many($1, ARRAY['{}', '{}']::jsonb[])",
                &[&map],
            )
            .unwrap()
            .get(0);
        assert_eq!(many, 2);
        // optimistic appends: right expectation appends, wrong one is 23000
        let seq: i64 = client
            .query_one("SELECT chunked_map.chunked_register($1, '{}', 9)", &[&map])
            .unwrap()
            .get(0);
        assert_eq!(seq, 10);
        assert_error(
            client.query("SELECT chunked_map.chunked_register($1, '{}', 3)", &[&map]),
            "23000",
            &format!("map \"{map}\" has newest sequence 10, expected 3"),
        );
        client
            .execute("SELECT chunked_map.chunked_set_chunk_size($1, 5)", &[&map])
            .unwrap();
        let info = query_json(&mut client, "chunked_map.chunked_info($1)", &[&map]);
        assert_eq!(info["total_records"], 10);
        assert_eq!(info["chunk_size"], 5);
        // (0.5) ids: a repeated id appends nothing, across a rollover, in a batch too; the
        // record is found by its id
        let once = |client: &mut Client, id: &str| -> (i64, bool) {
            let row = client
                .query_one(
                    "SELECT seq, duplicate FROM chunked_map.chunked_register_once($1, '{\"once\": 1}', $2)",
                    &[&map, &id],
                )
                .unwrap();
            (row.get(0), row.get(1))
        };
        assert_eq!(once(&mut client, "a"), (11, false));
        assert_eq!(once(&mut client, "a"), (11, true));
        let batch: Vec<(i64, bool)> = client
            .query(
                "SELECT seq, duplicate FROM chunked_map.chunked_register_many_once($1,
                     ARRAY['{}', '{}', '{}', '{}', '{}', '{}']::jsonb[], ARRAY['b', 'a', 'c', 'b', NULL, 'd'])",
                &[&map],
            )
            .unwrap()
            .iter()
            .map(|row| (row.get(0), row.get(1)))
            .collect();
        assert_eq!(
            batch,
            [
                (12, false),
                (11, true),
                (13, false),
                (12, true),
                (14, false),
                (15, false)
            ]
        );
        assert_eq!(once(&mut client, "a"), (11, true));
        assert_eq!(
            without_time(query_json(
                &mut client,
                "chunked_map.chunked_get_by_id($1, 'a')",
                &[&map]
            )),
            json!({"seq": 11, "payload": {"once": 1}, "id": "a"})
        );
        client
            .execute(
                "SELECT chunked_map.chunked_set_id_window($1, NULL)",
                &[&map],
            )
            .unwrap();
        let verify = query_json(&mut client, "chunked_map.chunked_verify($1)", &[&map]);
        assert_eq!(verify["consistent"], true, "{verify}");

        // the errors of the contract's error table (docs/contract.md), with their SQLSTATEs and messages
        assert_error(
            register(&mut client, "nobody", "{}"),
            "42704",
            "map \"nobody\" does not exist",
        );
        assert_error(
            client.query("SELECT chunked_map.chunked_page($1, 'abc')", &[&map]),
            "22023",
            "\"abc\"",
        );
        assert_error(
            client.query(
                "SELECT chunked_map.chunked_page($1, '00000000000000000002')",
                &[&map],
            ),
            "42704",
            "00000000000000000002",
        );
        assert_error(
            client.query("SELECT chunked_map.chunked_register(NULL, '{}')", &[]),
            "22004",
            "map",
        );
        assert_error(
            client.query("SELECT chunked_map.chunked_start($1, 0)", &[&"other"]),
            "22023",
            "chunk_size must be between 1 and 10000, got 0",
        );
        assert_error(
            client.query(
                "SELECT chunked_map.chunked_register($1, jsonb_build_object('b', repeat('x', 1048576)))",
                &[&map],
            ),
            "54000",
            "exceeds the limit of 1048576 bytes",
        );
        // a NULL map, as a constant and as a bound parameter: 22004 (Citus 13.2 would crash
        // the backend hashing it to find the node), and the node serves on
        // in every form the planner reduces to one: named, cast, folded, inlined from an SQL
        // function of the application's
        client
            .batch_execute(
                "SET citus.enable_ddl_propagation = off;
                 CREATE FUNCTION pg_temp.info(m text) RETURNS jsonb LANGUAGE sql
                     AS 'SELECT chunked_map.chunked_info(m)';
                 RESET citus.enable_ddl_propagation;",
            )
            .unwrap();
        for sql in [
            "SELECT chunked_map.chunked_info(NULL)",
            "SELECT chunked_map.chunked_register(NULL, '{}')",
            "SELECT * FROM chunked_map.chunked_read(NULL, 0, 10)",
            "SELECT chunked_map.chunked_info(map => NULL)",
            "SELECT * FROM chunked_map.chunked_read(map => NULL)",
            "SELECT chunked_map.chunked_info(NULL::varchar::text)",
            "SELECT chunked_map.chunked_info(nullif('a', 'a'))",
            "SELECT pg_temp.info(NULL)",
        ] {
            assert_error(
                client.query(sql, &[]),
                "22004",
                "argument \"map\" must not be null",
            );
        }
        for sql in [
            "SELECT chunked_map.chunked_page($1)",
            "SELECT chunked_map.chunked_info(map => $1)",
        ] {
            assert_error(
                client.query(sql, &[&None::<&str>]),
                "22004",
                "argument \"map\" must not be null",
            );
        }
        // where PostgreSQL would not call the function, nothing is raised
        let guarded = client
            .query(
                "SELECT chunked_map.chunked_info($1) WHERE $1::text IS NOT NULL",
                &[&None::<&str>],
            )
            .unwrap();
        assert!(guarded.is_empty());
        // the rest of the table: other NULL arguments, names out of range
        for (sql, sqlstate, message) in [
            (
                "SELECT chunked_map.chunked_register('via', NULL)",
                "22004",
                "argument \"payload\" must not be null",
            ),
            (
                "SELECT chunked_map.chunked_page('via', NULL)",
                "22004",
                "argument \"page_token\" must not be null",
            ),
            (
                "SELECT chunked_map.chunked_start('via', NULL)",
                "22004",
                "argument \"chunk_size\" must not be null",
            ),
            (
                "SELECT chunked_map.chunked_get('via', NULL)",
                "22004",
                "argument \"seq\" must not be null",
            ),
            (
                "SELECT chunked_map.chunked_start('')",
                "22023",
                "map name must be 1 to 200 bytes",
            ),
            (
                "SELECT chunked_map.chunked_start(repeat('m', 201))",
                "22023",
                "map name must be 1 to 200 bytes",
            ),
        ] {
            assert_error(client.query(sql, &[]), sqlstate, message);
        }
        // none of the failed calls changed the map
        assert_eq!(
            query_json(&mut client, "chunked_map.chunked_info($1)", &[&map])["total_records"],
            15
        );

        let dropped: bool = client
            .query_one("SELECT chunked_map.chunked_drop($1)", &[&map])
            .unwrap()
            .get(0);
        assert!(dropped);
        assert_error(
            client.query("SELECT chunked_map.chunked_page($1)", &[&map]),
            "42704",
            map,
        );
    }
}

#[test]
#[ignore = "needs Citus: scripts/test-citus.sh"]
fn a_held_map_fails_at_once_or_waits_up_to_lock_timeout_and_no_longer() {
    let citus = CitusCluster::start("held");
    let mut coordinator = citus.coordinator();
    distribute(&mut coordinator);
    coordinator
        .batch_execute(
            "SELECT chunked_map.chunked_start('hot');
             CREATE ROLE patient LOGIN;
             GRANT USAGE ON SCHEMA chunked_map TO patient;
             GRANT EXECUTE ON FUNCTION chunked_map.chunked_register(text, jsonb) TO patient;
             ALTER ROLE patient SET chunked_map.lock_timeout = '200ms';
             ALTER ROLE patient SET statement_timeout = '20s';",
        )
        .unwrap();

    let mut holder = citus.coordinator();
    holder
        .batch_execute("BEGIN; SELECT chunked_map.chunked_register('hot', '{\"by\": \"holder\"}');")
        .unwrap();

    // delegated to the worker holding the map: 40001 at once
    let mut other = citus.coordinator();
    assert_error(
        register(&mut other, "hot", "{}"),
        "40001",
        "map \"hot\" is locked by a concurrent append",
    );
    // through a worker, whichever holds the map
    for index in 0..2 {
        assert_error(
            register(&mut citus.worker(index), "hot", "{}"),
            "40001",
            "map \"hot\" is locked by a concurrent append",
        );
    }
    // in a transaction block (not delegated: the row is on a worker, whose session does not see
    // this one's settings), lock_timeout still bounds the wait: 40001 after it, while the
    // holder is still open (a wait without bound would end with statement_timeout's 57014)
    other
        .batch_execute(
            "BEGIN; SET LOCAL chunked_map.lock_timeout = '200ms'; SET LOCAL statement_timeout = '20s';",
        )
        .unwrap();
    let error = assert_error(register(&mut other, "hot", "{}"), "40001", "\"hot\"");
    assert!(
        error.detail().unwrap_or_default().contains("200 ms"),
        "{:?}",
        error.detail()
    );
    other.batch_execute("ROLLBACK").unwrap();
    // delegated, with the setting where the call runs: ALTER ROLE ... SET, which Citus applies
    // on every node
    let mut patient = citus.connect_as(&citus.coordinator, "patient");
    let error = assert_error(register(&mut patient, "hot", "{}"), "40001", "\"hot\"");
    assert!(error.detail().unwrap_or_default().contains("200 ms"));

    // a wait that the holder's commit ends: the waiter appends after it
    coordinator
        .batch_execute("ALTER ROLE patient SET chunked_map.lock_timeout = '15s'")
        .unwrap();
    let mut patient = citus.connect_as(&citus.coordinator, "patient");
    let waiter = std::thread::spawn(move || register(&mut patient, "hot", "{\"by\": \"patient\"}"));
    std::thread::sleep(Duration::from_millis(300));
    holder.batch_execute("COMMIT").unwrap();
    assert_eq!(waiter.join().unwrap().unwrap(), 2);
    assert_eq!(all_seqs(&mut coordinator, "hot"), [2, 1]);
}

#[test]
#[ignore = "needs Citus: scripts/test-citus.sh"]
fn eight_writers_retrying_on_40001_produce_contiguous_sequences() {
    let citus = Arc::new(CitusCluster::start("writers"));
    let mut coordinator = citus.coordinator();
    distribute(&mut coordinator);
    coordinator
        .batch_execute(
            "SELECT chunked_map.chunked_start('w0', 7);
             SELECT chunked_map.chunked_start('w1', 7);",
        )
        .unwrap();
    let barrier = Arc::new(Barrier::new(8));
    let threads: Vec<_> = (0..8)
        .map(|writer| {
            let (citus, barrier) = (Arc::clone(&citus), Arc::clone(&barrier));
            std::thread::spawn(move || {
                // half through the coordinator, half through the workers
                let mut client = match writer % 4 {
                    0 | 1 => citus.coordinator(),
                    n => citus.worker(n - 2),
                };
                let map = format!("w{}", writer % 2);
                barrier.wait();
                let mut retries = 0;
                for n in 0..40 {
                    loop {
                        let payload = format!("{{\"writer\": {writer}, \"n\": {n}}}");
                        match register(&mut client, &map, &payload) {
                            Ok(_) => break,
                            Err(error) => {
                                let code = error.code().map(|c| c.code().to_owned());
                                assert_eq!(code.as_deref(), Some("40001"), "{error}");
                                retries += 1;
                                std::thread::sleep(Duration::from_micros(200 * (retries % 10)));
                            }
                        }
                    }
                }
                retries
            })
        })
        .collect();
    let retries: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    eprintln!("retried 40001 {retries} times");
    for map in ["w0", "w1"] {
        assert_eq!(
            all_seqs(&mut coordinator, map),
            (1..=160).rev().collect::<Vec<i64>>()
        );
        let verify = query_json(&mut coordinator, "chunked_map.chunked_verify($1)", &[&map]);
        assert_eq!(verify["consistent"], true, "{verify}");
        // each writer's records in its own order
        let order: Vec<(i64, i64)> = coordinator
            .query(
                "SELECT (payload ->> 'writer')::bigint, (payload ->> 'n')::bigint
                 FROM chunked_map.chunked_read($1, 0, 1000)",
                &[&map],
            )
            .unwrap()
            .iter()
            .map(|row| (row.get(0), row.get(1)))
            .collect();
        for writer in 0..8 {
            let mine: Vec<i64> = order
                .iter()
                .filter(|(w, _)| *w == writer)
                .map(|(_, n)| *n)
                .collect();
            if !mine.is_empty() {
                assert_eq!(mine, (0..40).collect::<Vec<i64>>());
            }
        }
    }
}

#[test]
#[ignore = "needs Citus: scripts/test-citus.sh"]
fn no_role_but_the_owner_can_change_history_on_any_node() {
    let citus = CitusCluster::start("immutable");
    let mut coordinator = citus.coordinator();
    distribute(&mut coordinator);
    coordinator
        .batch_execute(
            "SELECT chunked_map.chunked_start('audit', 3);
             SELECT chunked_map.chunked_register('audit', jsonb_build_object('n', n))
             FROM generate_series(1, 8) AS n;
             CREATE ROLE intruder LOGIN;
             GRANT USAGE ON SCHEMA chunked_map TO intruder;
             GRANT ALL ON ALL TABLES IN SCHEMA chunked_map TO intruder;",
        )
        .unwrap();
    let before = all_pages_text(&mut coordinator, "audit");
    let attempts = [
        (
            "UPDATE chunked_map.archived_chunk SET payloads = '{}'",
            "UPDATE on chunked_map.archived_chunk",
        ),
        (
            "DELETE FROM chunked_map.archived_chunk WHERE map = 'audit'",
            "DELETE on chunked_map.archived_chunk",
        ),
        (
            "TRUNCATE chunked_map.archived_chunk",
            "TRUNCATE on chunked_map.archived_chunk",
        ),
        (
            "DELETE FROM chunked_map.map_state WHERE map = 'audit'",
            "DELETE on chunked_map.map_state",
        ),
        (
            "TRUNCATE chunked_map.map_state",
            "TRUNCATE on chunked_map.map_state",
        ),
        (
            "UPDATE chunked_map.current_record SET payload = '{}' WHERE map = 'audit'",
            "UPDATE on chunked_map.current_record",
        ),
        (
            "INSERT INTO chunked_map.current_record VALUES ('audit', 1000, '{\"forged\": true}')",
            "INSERT on chunked_map.current_record",
        ),
    ];
    let nodes = citus.nodes();
    for node in &nodes {
        let mut intruder = citus.connect_as(node, "intruder");
        for (sql, message) in attempts {
            let error = assert_error(intruder.batch_execute(sql), "42501", message);
            assert!(
                error
                    .message()
                    .ends_with("is not allowed: chunked_map history is append-only"),
                "{}",
                error.message()
            );
        }
    }
    // a worker's shards directly: the same triggers are on every shard
    let (shard, port): (String, i32) = coordinator
        .query_one(
            "SELECT 'archived_chunk_' || s.shardid, n.nodeport
             FROM pg_dist_shard AS s
             JOIN pg_dist_placement AS p ON p.shardid = s.shardid
             JOIN pg_dist_node AS n ON n.groupid = p.groupid
             WHERE s.logicalrelid = 'chunked_map.archived_chunk'::regclass
             ORDER BY s.shardid LIMIT 1",
            &[],
        )
        .map(|row| (row.get(0), row.get(1)))
        .unwrap();
    let node = citus
        .workers
        .iter()
        .find(|worker| i32::from(worker.port()) == port)
        .expect("the shard's worker");
    let mut intruder = citus.connect_as(node, "intruder");
    assert_error(
        intruder.batch_execute(&format!(
            "SET citus.enable_manual_changes_to_shards = on; UPDATE chunked_map.{shard} SET payloads = '{{}}'"
        )),
        "42501",
        "is not allowed: chunked_map history is append-only",
    );
    let mut worker = citus.worker(0);
    // distributing is the owner's
    let mut intruder = citus.connect_as(&citus.coordinator, "intruder");
    assert_error(
        intruder.batch_execute("SELECT chunked_map.chunked_distribute()"),
        "42501",
        "permission denied for function chunked_distribute",
    );
    // a worker is not where distributing happens
    assert_error(
        worker.batch_execute("SELECT chunked_map.chunked_distribute()"),
        "55000",
        "this node is not the Citus coordinator",
    );

    assert_eq!(all_pages_text(&mut coordinator, "audit"), before);
    let verify = query_json(&mut coordinator, "chunked_map.chunked_verify('audit')", &[]);
    assert_eq!(verify["consistent"], true);
}

#[test]
#[ignore = "needs Citus: scripts/test-citus.sh"]
fn search_path_tricks_change_nothing_on_the_cluster() {
    let citus = CitusCluster::start("search_path");
    let mut coordinator = citus.coordinator();
    distribute(&mut coordinator);
    coordinator
        .batch_execute(
            "SELECT chunked_map.chunked_start('plain', 2);
             SELECT chunked_map.chunked_register('plain', jsonb_build_object('n', n))
             FROM generate_series(1, 5) AS n;",
        )
        .unwrap();
    let expected = all_pages_text(&mut coordinator, "plain");
    // look-alikes on every node, first on the path of the sessions that call
    for node in citus.nodes() {
        node.connect(&citus.database)
            .batch_execute(
                "SET citus.enable_ddl_propagation = off;
                 CREATE SCHEMA trap;
                 CREATE TABLE trap.map_state (map text, next_seq bigint);
                 CREATE TABLE trap.archived_chunk (map text);
                 CREATE FUNCTION trap.jsonb_build_object(text, bigint) RETURNS jsonb
                     LANGUAGE sql AS $$ SELECT '{\"trapped\": true}'::jsonb $$;
                 CREATE FUNCTION trap.unnest(jsonb[]) RETURNS SETOF jsonb
                     LANGUAGE sql AS $$ SELECT '{\"trapped\": true}'::jsonb $$;",
            )
            .unwrap();
    }
    for node in citus.nodes() {
        let mut client = node.connect(&citus.database);
        client
            .batch_execute("SET search_path = trap, pg_catalog, chunked_map, public")
            .unwrap();
        assert_eq!(all_pages_text(&mut client, "plain"), expected);
        let read: i64 = client
            .query_one(
                "SELECT count(*) FROM chunked_map.chunked_read('plain', 0, 100)",
                &[],
            )
            .unwrap()
            .get(0);
        assert_eq!(read, 5);
    }
    let mut client = citus.coordinator();
    client
        .batch_execute("SET search_path = trap, pg_catalog, chunked_map, public")
        .unwrap();
    assert_eq!(register(&mut client, "plain", "{}").unwrap(), 6);
    let verify = query_json(&mut client, "chunked_map.chunked_verify('plain')", &[]);
    assert_eq!(verify["consistent"], true);
}

#[test]
#[ignore = "needs Citus: scripts/test-citus.sh"]
fn notifications_come_from_the_node_that_commits_the_append() {
    let citus = CitusCluster::start("notify");
    let mut coordinator = citus.coordinator();
    distribute(&mut coordinator);
    coordinator
        .batch_execute(
            "SELECT chunked_map.chunked_start('loud');
             SELECT chunked_map.chunked_set_notify('loud', true);",
        )
        .unwrap();
    // the map's channel, as the node holding it reports it, listened to on every node
    let channel = notify_channel(&mut coordinator, "loud");
    let mut listeners: Vec<Client> = citus
        .nodes()
        .iter()
        .map(|node| {
            let mut client = node.connect(&citus.database);
            client
                .batch_execute(&format!("LISTEN \"{channel}\""))
                .unwrap();
            client
        })
        .collect();
    // delegated: the worker holding the map runs and commits the append, and notifies there
    register(&mut coordinator, "loud", "{}").unwrap();
    let heard: Vec<_> = listeners.iter_mut().map(delivered).collect();
    assert!(heard[0].is_empty(), "coordinator: {:?}", heard[0]);
    let on_workers: Vec<_> = heard[1..].iter().flatten().cloned().collect();
    assert_eq!(on_workers, [announced(&channel, "loud", 1)]);
    // in a transaction block the function runs on the coordinator, which notifies
    coordinator
        .batch_execute("BEGIN; SELECT chunked_map.chunked_register('loud', '{}'); COMMIT;")
        .unwrap();
    let heard: Vec<_> = listeners.iter_mut().map(delivered).collect();
    assert_eq!(heard[0], [announced(&channel, "loud", 2)]);
    assert!(heard[1..].iter().all(Vec::is_empty), "{heard:?}");
}

#[test]
#[ignore = "needs Citus: scripts/test-citus.sh"]
fn distributing_needs_chunked_map_preloaded_after_citus_on_every_node() {
    let citus = CitusCluster::start_preloading("preload", "citus");
    let mut coordinator = citus.coordinator();
    let error = assert_error(
        coordinator.batch_execute("SELECT chunked_map.chunked_distribute()"),
        "55000",
        "chunked_distribute needs chunked_map in shared_preload_libraries (after citus) on every node",
    );
    let ports: Vec<String> = citus
        .workers
        .iter()
        .map(|worker| format!("127.0.0.1:{}", worker.port()))
        .collect();
    assert!(
        error
            .message()
            .ends_with(&format!("not on this coordinator, {}", ports.join(", "))),
        "{}",
        error.message()
    );
    // nothing was distributed
    let distributed: i64 = coordinator
        .query_one(
            "SELECT count(*) FROM pg_dist_partition WHERE logicalrelid::text LIKE 'chunked_map.%'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(distributed, 0);
}

/// The message store runs on one node: on a Citus coordinator whose maps are not distributed it
/// works as on a single server; `chunked_distribute` refuses a database that has it, and it
/// refuses to be created where the maps are distributed (messages are numbered on one node, and
/// its index would stay on whichever node a write ran on).
#[test]
#[ignore = "needs Citus: scripts/test-citus.sh"]
fn the_message_store_runs_on_undistributed_maps_and_is_never_mixed_with_distributed_ones() {
    let citus = CitusCluster::start("message_store");
    let mut coordinator = citus.coordinator();
    // (its check must see what was committed after the lock it takes: not in REPEATABLE READ)
    coordinator
        .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        .unwrap();
    assert_error(
        coordinator.batch_execute("CREATE EXTENSION chunked_map_message_store"),
        "0A000",
        "where Citus is installed, the message store is created under READ COMMITTED",
    );
    coordinator.batch_execute("ROLLBACK").unwrap();
    coordinator
        .batch_execute("CREATE EXTENSION chunked_map_message_store")
        .expect("create the message store on undistributed maps");
    for (stream, n) in [("account-1", 1), ("account-2", 2), ("account-1", 3)] {
        coordinator
            .query_one(
                "SELECT message_store.write_message(gen_random_uuid()::varchar, $1, 'Opened', \
                 jsonb_build_object('n', $2::int))",
                &[&stream, &n],
            )
            .expect("write_message");
    }
    let read: Vec<(String, i64, i64)> = coordinator
        .query(
            "SELECT stream_name::text, position, global_position
             FROM message_store.get_category_messages('account')",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2)))
        .collect();
    assert_eq!(
        read,
        [
            ("account-1".to_owned(), 0, 1),
            ("account-2".to_owned(), 0, 2),
            ("account-1".to_owned(), 1, 3)
        ]
    );

    let workers: Vec<String> = citus
        .workers
        .iter()
        .map(|worker| format!("127.0.0.1:{}", worker.port()))
        .collect();
    let error = assert_error(
        coordinator.batch_execute("SELECT chunked_map.chunked_distribute()"),
        "0A000",
        "chunked_distribute cannot distribute the maps of a database with the message store \
         (extension chunked_map_message_store) on ",
    );
    assert!(
        error
            .message()
            .ends_with(&format!(" on this coordinator, {}", workers.join(", "))),
        "{}",
        error.message()
    );
    let distributed = |client: &mut Client| -> i64 {
        client
            .query_one(
                "SELECT count(*) FROM pg_dist_partition WHERE logicalrelid::text LIKE 'chunked_map.%'",
                &[],
            )
            .unwrap()
            .get(0)
    };
    assert_eq!(distributed(&mut coordinator), 0, "nothing was distributed");

    // without the store, the maps (the streams among them) are distributed; the store cannot
    // come back on them, on any node
    coordinator
        .batch_execute("DROP EXTENSION chunked_map_message_store")
        .unwrap();
    distribute(&mut coordinator);
    assert!(distributed(&mut coordinator) > 0);
    assert_error(
        coordinator.batch_execute("CREATE EXTENSION chunked_map_message_store"),
        "0A000",
        "the message store does not run on distributed maps",
    );
    let mut worker = citus.worker(0);
    assert_error(
        worker.batch_execute("CREATE EXTENSION chunked_map_message_store"),
        "0A000",
        "the message store does not run on distributed maps",
    );
    for node in citus.nodes() {
        let installed: i64 = node
            .connect("message_store")
            .query_one(
                "SELECT count(*) FROM pg_extension WHERE extname = 'chunked_map_message_store'",
                &[],
            )
            .unwrap()
            .get(0);
        assert_eq!(installed, 0, "node {}", node.port());
    }
    let records: i64 = coordinator
        .query_one(
            "SELECT count(*) FROM chunked_map.chunked_read('account-1', 0)",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(records, 2, "the streams' records moved with their maps");
}

/// `chunked_distribute` and `CREATE EXTENSION chunked_map_message_store` run at once, in either
/// order: both take the same lock before they look at each other, so the second waits for the
/// first and, once the first has committed, is refused. Never both.
#[test]
#[ignore = "needs Citus: scripts/test-citus.sh"]
fn distributing_and_creating_the_message_store_at_once_never_both_succeed() {
    const DISTRIBUTE: &str = "SELECT chunked_map.chunked_distribute()";
    const CREATE_STORE: &str = "CREATE EXTENSION chunked_map_message_store";
    for (database, first_statement, second_statement, refusal) in [
        (
            "store_then_distribute",
            CREATE_STORE,
            DISTRIBUTE,
            "chunked_distribute cannot distribute the maps of a database with the message store",
        ),
        (
            "distribute_then_store",
            DISTRIBUTE,
            CREATE_STORE,
            "the message store does not run on distributed maps",
        ),
    ] {
        let citus = CitusCluster::start(database);
        let mut first = citus.coordinator();
        let mut observer = citus.coordinator();
        first.batch_execute("BEGIN").unwrap();
        first.batch_execute(first_statement).expect(first_statement);
        let mut second = citus.coordinator();
        let second_pid: i32 = second
            .query_one("SELECT pg_backend_pid()", &[])
            .unwrap()
            .get(0);
        let waiter = std::thread::spawn(move || second.batch_execute(second_statement));
        let began = std::time::Instant::now();
        loop {
            let waits: bool = observer
                .query_one(
                    "SELECT count(*) > 0 FROM pg_stat_activity
                     WHERE pid = $1 AND wait_event_type = 'Lock'",
                    &[&second_pid],
                )
                .unwrap()
                .get(0);
            // (finished without waiting: refused at once, or the failure asserted below)
            if waits || waiter.is_finished() {
                break;
            }
            assert!(
                began.elapsed() < Duration::from_secs(60),
                "{database}: the second neither waited for the first nor ended ({second_statement})"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        first.batch_execute("COMMIT").unwrap();
        assert_error(waiter.join().unwrap(), "0A000", refusal);
    }
}

#[test]
#[ignore = "needs Citus: scripts/test-citus.sh"]
fn trim_and_retention_work_on_distributed_maps_and_the_feed_reports_what_they_removed() {
    let citus = CitusCluster::start("retention");
    let mut coordinator = citus.coordinator();
    distribute(&mut coordinator);
    coordinator
        .batch_execute(
            "SELECT chunked_map.chunked_start(m, 5) FROM unnest(ARRAY['t1', 't2', 't3', 't4']) AS m;
             SELECT count(*) FROM unnest(ARRAY['t1', 't2', 't3', 't4']) AS m,
                 LATERAL chunked_map.chunked_register_many(m, ARRAY(SELECT jsonb_build_object('n', n) FROM generate_series(1, 23) AS n));
             SELECT chunked_map.chunked_subscribe('sink');",
        )
        .unwrap();
    // a trim through the coordinator, delegated to the map's node
    let removed: i64 = coordinator
        .query_one("SELECT chunked_map.chunked_trim('t1', 12)", &[])
        .unwrap()
        .get(0);
    assert_eq!(removed, 10);
    assert_eq!(
        all_seqs(&mut coordinator, "t1"),
        (11..=23).rev().collect::<Vec<_>>()
    );
    assert_error(
        coordinator.query_one("SELECT chunked_map.chunked_get('t1', 3)", &[]),
        "42704",
        "record 3 of map \"t1\" was trimmed: the oldest sequence kept is 11",
    );
    // a policy applied by rollovers, and chunked_apply_retention() over every node
    coordinator
        .batch_execute(
            "SELECT chunked_map.chunked_set_retention('t2', 6);
             SELECT chunked_map.chunked_register('t2', '{}') FROM generate_series(1, 10);
             SELECT chunked_map.chunked_set_retention(m, 3) FROM unnest(ARRAY['t3', 't4']) AS m;",
        )
        .unwrap();
    let oldest_t2: i64 = coordinator
        .query_one(
            "SELECT (chunked_map.chunked_info('t2') ->> 'oldest_seq')::bigint",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(
        oldest_t2 > 1,
        "rollovers applied the policy: oldest {oldest_t2}"
    );
    let applied: i64 = coordinator
        .query_one("SELECT chunked_map.chunked_apply_retention()", &[])
        .unwrap()
        .get(0);
    // t2 (newest 6 kept, chunks of 5): its rollovers at 26 and 31 removed two chunks each (the
    // bound of a rollover: one more than it archived), leaving 21..25, 26..30 and 31..33; the
    // newest 6 are 28..33, so 21..25 is due too
    assert_eq!(oldest_t2, 21, "each rollover removed at most two chunks");
    assert_eq!(
        applied, 45,
        "t3 and t4: 1..20 each (the newest 3 are in 21..23); t2: 21..25"
    );
    let oldest: Vec<i64> = coordinator
        .query(
            "SELECT (chunked_map.chunked_info(m) ->> 'oldest_seq')::bigint
             FROM unnest(ARRAY['t2', 't3', 't4']) AS m",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(oldest, [26, 21, 21]);
    for map in ["t1", "t2", "t3", "t4"] {
        let report = query_json(&mut coordinator, "chunked_map.chunked_verify($1)", &[&map]);
        assert_eq!(report["consistent"], true, "{map}: {report}");
    }
    // the feed, subscribed before the trims, says what they removed before it had them: a gap
    // row through the record before the oldest kept, then every record kept, once
    let rows = coordinator
        .query(
            "SELECT map, seq, trimmed FROM chunked_map.chunked_poll('sink', 1000)",
            &[],
        )
        .unwrap();
    let mut delivered: BTreeMap<String, Vec<(i64, bool)>> = BTreeMap::new();
    for row in &rows {
        delivered
            .entry(row.get(0))
            .or_default()
            .push((row.get(1), row.get(2)));
    }
    for (map, oldest, newest) in [
        ("t1", 11, 23),
        ("t2", 26, 33),
        ("t3", 21, 23),
        ("t4", 21, 23),
    ] {
        let expected: Vec<(i64, bool)> = std::iter::once((oldest - 1, true))
            .chain((oldest..=newest).map(|seq| (seq, false)))
            .collect();
        assert_eq!(delivered[map], expected, "{map}");
    }
    let again: i64 = coordinator
        .query_one(
            "SELECT count(*) FROM chunked_map.chunked_poll('sink', 1000)",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(again, 0, "acknowledged by the poll's commit");
}

// ---- The feed on a cluster (docs/citus.md, *The feed*) ----

/// A delivered or appended record: (map, seq, payload as text).
type FedRecord = (String, i64, String);

/// What each member of each consumer was delivered: by (consumer, member).
type Deliveries = BTreeMap<(String, i32), Vec<FedRecord>>;

/// One poll through `client` in a transaction of its own: what it delivered, if its commit
/// succeeded (an error anywhere: nothing was acknowledged, `None`).
fn poll_and_commit(
    client: &mut Client,
    consumer: &str,
    member: i32,
    group: i32,
) -> Option<Vec<FedRecord>> {
    let mut transaction = client.transaction().ok()?;
    let rows = transaction
        .query(
            "SELECT map, seq, payload::text, trimmed FROM chunked_map.chunked_poll($1, 40, $2, $3)",
            &[&consumer, &member, &group],
        )
        .ok()?;
    let records = rows
        .iter()
        .map(|row| {
            assert!(!row.get::<_, bool>(3), "nothing is trimmed in this test");
            (row.get(0), row.get(1), row.get(2))
        })
        .collect();
    transaction.commit().ok()?;
    Some(records)
}

/// Every record of `maps` as the storage holds them at the end (through the coordinator).
fn stored_records(client: &mut Client, maps: &[String]) -> BTreeSet<FedRecord> {
    let mut stored = BTreeSet::new();
    for map in maps {
        for row in client
            .query(
                "SELECT seq, payload::text FROM chunked_map.chunked_read($1, 0, 10000)",
                &[map],
            )
            .unwrap()
        {
            stored.insert((map.clone(), row.get(0), row.get(1)));
        }
    }
    stored
}

/// Each record once, each map's in sequence order, exactly what the storage holds of the maps
/// the consumer follows.
fn assert_delivered_once_in_order(
    consumer: &str,
    delivered: &[FedRecord],
    expected: &BTreeSet<FedRecord>,
) {
    let mut last: BTreeMap<&str, i64> = BTreeMap::new();
    for (map, seq, _) in delivered {
        let previous = last.insert(map, *seq).unwrap_or(0);
        assert!(
            *seq > previous,
            "{consumer}: {map} delivered {seq} after {previous}"
        );
    }
    let set: BTreeSet<FedRecord> = delivered.iter().cloned().collect();
    assert_eq!(set.len(), delivered.len(), "{consumer}: a record twice");
    let missing: Vec<_> = expected.difference(&set).take(5).collect();
    let extra: Vec<_> = set.difference(expected).take(5).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{consumer}: {} delivered, {} stored; missing {missing:?}; not stored {extra:?}",
        set.len(),
        expected.len()
    );
}

/// Maps whose shard is on each worker (by the port of the node Citus placed it on).
fn maps_on_worker(client: &mut Client, maps: &[String], port: u16) -> Vec<String> {
    maps.iter()
        .filter(|map| {
            let node_port: i32 = client
                .query_one(
                    "SELECT n.nodeport FROM pg_dist_placement AS p
                     JOIN pg_dist_node AS n ON n.groupid = p.groupid
                     WHERE p.shardid = get_shard_id_for_distribution_column('chunked_map.map_state', $1::text)",
                    &[map],
                )
                .unwrap()
                .get(0);
            node_port == i32::from(port)
        })
        .cloned()
        .collect()
}

#[test]
#[ignore = "needs Citus: scripts/test-citus.sh"]
fn the_feed_through_the_coordinator_delivers_every_committed_record_once_across_a_worker_restart() {
    const MAPS: usize = 60;
    const WRITERS: usize = 6;
    const TRANSACTIONS_PER_WRITER: usize = 120;
    let citus = CitusCluster::start("feed");
    let mut coordinator = citus.coordinator();
    distribute(&mut coordinator);
    let maps: Vec<String> = (0..MAPS).map(|i| format!("acct-{i}")).collect();
    let others: Vec<String> = (0..6).map(|i| format!("other-{i}")).collect();
    // 50 of the category's maps exist before the subscriptions, 10 are started after them (on
    // a cluster a start makes no position: the first poll that reaches the map makes it)
    let (before, after) = maps.split_at(50);
    for map in before.iter().chain(&others) {
        coordinator
            .execute("SELECT chunked_map.chunked_start($1, 8)", &[map])
            .unwrap();
    }
    for port in citus.workers.iter().map(|worker| worker.port()) {
        assert!(
            !maps_on_worker(&mut coordinator, &maps, port).is_empty(),
            "maps on the worker of port {port}"
        );
    }
    // two consumers polled by groups through the coordinator: the category, by 2 members;
    // every map, by 3
    coordinator
        .batch_execute(
            "SELECT chunked_map.chunked_subscribe('projection', 'acct');
             SELECT chunked_map.chunked_subscribe('audit');",
        )
        .unwrap();
    let groups: [(&str, i32); 2] = [("projection", 2), ("audit", 3)];
    for map in after {
        coordinator
            .execute("SELECT chunked_map.chunked_start($1, 8)", &[map])
            .unwrap();
    }

    let stop = Arc::new(AtomicBool::new(false));
    let delivered: Arc<Mutex<Deliveries>> = Arc::default();
    let mut pollers = Vec::new();
    for (consumer, group) in groups {
        for member in 0..group {
            let stop = Arc::clone(&stop);
            let delivered = Arc::clone(&delivered);
            let url = citus.url(&citus.coordinator);
            pollers.push(std::thread::spawn(move || {
                let mut client: Option<Client> = None;
                while !stop.load(Ordering::SeqCst) {
                    let connection = match client.as_mut() {
                        Some(connection) if !connection.is_closed() => connection,
                        _ => match postgres::Client::connect(&url, postgres::NoTls) {
                            Ok(connection) => client.insert(connection),
                            Err(_) => continue,
                        },
                    };
                    if let Some(records) = poll_and_commit(connection, consumer, member, group) {
                        delivered
                            .lock()
                            .unwrap()
                            .entry((consumer.to_owned(), member))
                            .or_default()
                            .extend(records);
                    }
                }
            }));
        }
    }

    // writers through the coordinator: delegated single appends, and transaction blocks over
    // several maps (committed by two-phase commit when they span both workers), one in six
    // rolled back; writer 0 keeps one transaction open over a third of its run
    let committed: Arc<Mutex<Vec<FedRecord>>> = Arc::default();
    let started = Arc::new(Barrier::new(WRITERS + 1));
    let mut writers = Vec::new();
    for writer in 0..WRITERS {
        let committed = Arc::clone(&committed);
        let started = Arc::clone(&started);
        let url = citus.url(&citus.coordinator);
        let every: Vec<String> = maps.iter().chain(&others).cloned().collect();
        writers.push(std::thread::spawn(move || {
            let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
            let mut dice = Dice(0x2545_f491_4f6c_dd1d ^ (writer as u64 + 1));
            started.wait();
            let mut long: Option<Vec<FedRecord>> = None;
            for round in 0..TRANSACTIONS_PER_WRITER {
                if client.is_closed() {
                    client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
                }
                if writer == 0 && round == TRANSACTIONS_PER_WRITER / 3 {
                    // a long transaction: opened here, committed two thirds on
                    let map = &every[dice.roll(every.len() as u64) as usize];
                    let payload = format!("{{\"w\": {writer}, \"round\": {round}, \"long\": true}}");
                    if client.batch_execute("BEGIN").is_ok() {
                        if let Ok(row) = client.query_one(
                            "SELECT chunked_map.chunked_register($1, $2::text::jsonb)",
                            &[map, &payload],
                        ) {
                            long = Some(vec![(map.clone(), row.get(0), payload)]);
                        }
                    }
                    continue;
                }
                if long.is_some() {
                    if round == 2 * TRANSACTIONS_PER_WRITER / 3 {
                        if client.batch_execute("COMMIT").is_ok() {
                            committed.lock().unwrap().extend(long.take().unwrap_or_default());
                        }
                        long = None;
                    }
                    continue;
                }
                let rollback = dice.roll(6) == 0;
                let appends = 1 + dice.roll(3) as usize;
                // a round that fails (its maps' worker is down) is tried again until it is done
                for attempt in 0.. {
                assert!(attempt < 600, "writer {writer}: round {round} failed for 30 s");
                if client.is_closed() {
                    client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
                }
                let mut mine = Vec::new();
                let outcome: Result<(), postgres::Error> = (|| {
                    let mut transaction = client.transaction()?;
                    for n in 0..appends {
                        let map = &every[dice.roll(every.len() as u64) as usize];
                        let payload = format!(
                            "{{\"w\": {writer}, \"round\": {round}, \"n\": {n}, \"rolled_back\": {rollback}}}"
                        );
                        let seq: i64 = transaction
                            .query_one(
                                "SELECT chunked_map.chunked_register($1, $2::text::jsonb)",
                                &[map, &payload],
                            )?
                            .get(0);
                        mine.push((map.clone(), seq, payload));
                    }
                    if rollback {
                        transaction.rollback()
                    } else {
                        transaction.commit()
                    }
                })();
                match outcome {
                    Ok(()) => {
                        if !rollback {
                            committed.lock().unwrap().extend(mine);
                        }
                        break;
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(50)),
                }
                }
            }
        }));
    }
    started.wait();
    let began = std::time::Instant::now();
    // a worker restarted while everything runs
    std::thread::sleep(Duration::from_millis(1500));
    citus.workers[1].crash();
    std::thread::sleep(Duration::from_millis(500));
    citus.workers[1].restart();
    let restarted = began.elapsed();
    let delivered_by_the_restart: usize = delivered.lock().unwrap().values().map(Vec::len).sum();
    for writer in writers {
        writer.join().expect("writer");
    }
    let written = began.elapsed();
    assert!(written > restarted, "the writers ran across the restart");
    stop.store(true, Ordering::SeqCst);
    for poller in pollers {
        poller.join().expect("poller");
    }

    // what the storage holds is what the writers' acknowledged commits made, plus what a commit
    // cut by the restart made before its answer was lost; never a rolled-back append
    // a commit the restart cut after the coordinator's own commit is finished by Citus's
    // recovery of prepared transactions (every minute; run here rather than waited for), in a
    // session of its own (this one's connection to the restarted worker is gone)
    let mut coordinator = citus.coordinator();
    coordinator
        .batch_execute("SELECT recover_prepared_transactions()")
        .unwrap();
    let every: Vec<String> = maps.iter().chain(&others).cloned().collect();
    let stored = stored_records(&mut coordinator, &every);
    let canonical = |(map, seq, payload): &FedRecord| {
        let value: serde_json::Value = serde_json::from_str(payload).expect("a payload");
        (map.clone(), *seq, value.to_string())
    };
    let stored_canonical: BTreeSet<FedRecord> = stored.iter().map(canonical).collect();
    let acknowledged = committed.lock().unwrap().clone();
    for record in &acknowledged {
        assert!(
            stored_canonical.contains(&canonical(record)),
            "acknowledged but not stored: {record:?}"
        );
    }
    assert!(
        stored
            .iter()
            .all(|(_, _, payload)| !payload.contains("\"rolled_back\": true")),
        "a rolled-back append is stored"
    );

    // then every member polls to the end: prepared transactions a crash cut in two are
    // resolved by Citus's recovery, which is run here rather than waited for
    let mut delivered = Arc::try_unwrap(delivered).unwrap().into_inner().unwrap();
    let while_writing: usize = delivered.values().map(Vec::len).sum();
    assert!(
        while_writing > delivered_by_the_restart && delivered_by_the_restart > 0,
        "polls delivered before the restart ({delivered_by_the_restart}) and after it, while the \
         writers ran ({while_writing} in all)"
    );
    eprintln!(
        "writers ran {written:?} (worker restarted by {restarted:?}): {} records acknowledged, \
         {} stored; {while_writing} deliveries while they ran",
        acknowledged.len(),
        stored.len()
    );
    let started_draining = std::time::Instant::now();
    for (consumer, group) in groups {
        let expected: BTreeSet<FedRecord> = stored
            .iter()
            .filter(|(map, _, _)| consumer == "audit" || map.starts_with("acct-"))
            .cloned()
            .collect();
        loop {
            let all: Vec<FedRecord> = (0..group)
                .flat_map(|member| {
                    delivered
                        .get(&(consumer.to_owned(), member))
                        .cloned()
                        .unwrap_or_default()
                })
                .collect();
            if all.len() >= expected.len() {
                // a map belongs to one member of the group: never delivered to two
                let mut member_of: BTreeMap<String, i32> = BTreeMap::new();
                for member in 0..group {
                    for (map, _, _) in delivered
                        .get(&(consumer.to_owned(), member))
                        .into_iter()
                        .flatten()
                    {
                        let first = *member_of.entry(map.clone()).or_insert(member);
                        assert_eq!(first, member, "{consumer}: {map} went to two members");
                    }
                }
                // each member's share in its own order
                for member in 0..group {
                    let mine = delivered
                        .get(&(consumer.to_owned(), member))
                        .cloned()
                        .unwrap_or_default();
                    let mut last: BTreeMap<String, i64> = BTreeMap::new();
                    for (map, seq, _) in &mine {
                        assert!(
                            *seq > last.insert(map.clone(), *seq).unwrap_or(0),
                            "{consumer} member {member}: {map} out of order at {seq}"
                        );
                    }
                }
                let mut by_map = all.clone();
                by_map.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
                assert_delivered_once_in_order(consumer, &by_map, &expected);
                break;
            }
            assert!(
                started_draining.elapsed() < Duration::from_secs(180),
                "{consumer}: {} of {} delivered after 3 minutes",
                all.len(),
                expected.len()
            );
            coordinator
                .batch_execute("SELECT recover_prepared_transactions()")
                .unwrap();
            for member in 0..group {
                let records = poll_and_commit(&mut coordinator, consumer, member, group)
                    .expect("a poll with every node up");
                delivered
                    .entry((consumer.to_owned(), member))
                    .or_default()
                    .extend(records);
            }
        }
    }
    // no node recorded a move: a cluster reads positions, not transaction ids
    for node in citus.nodes() {
        let moves: i64 = node
            .connect(&citus.database)
            .query_one("SELECT count(*) FROM chunked_map.map_change", &[])
            .unwrap()
            .get(0);
        assert_eq!(moves, 0);
    }
}

#[test]
#[ignore = "needs Citus: scripts/test-citus.sh"]
fn a_poll_while_a_worker_is_stopped_fails_naming_it_and_the_feed_goes_on_once_it_is_back() {
    let citus = CitusCluster::start("stopped");
    let mut coordinator = citus.coordinator();
    distribute(&mut coordinator);
    let maps: Vec<String> = (0..12).map(|i| format!("job-{i}")).collect();
    coordinator
        .batch_execute("SELECT chunked_map.chunked_subscribe('runner', 'job')")
        .unwrap();
    for map in &maps {
        coordinator
            .execute("SELECT chunked_map.chunked_start($1, 2)", &[map])
            .unwrap();
        coordinator
            .execute(
                "SELECT chunked_map.chunked_register_many($1, ARRAY(SELECT jsonb_build_object('n', n) FROM generate_series(1, 3) AS n))",
                &[map],
            )
            .unwrap();
    }
    let stopped = &citus.workers[0];
    assert!(!maps_on_worker(&mut coordinator, &maps, stopped.port()).is_empty());
    stopped.crash();
    let error = coordinator
        .query("SELECT * FROM chunked_map.chunked_poll('runner', 100)", &[])
        .expect_err("a poll with a worker down");
    let message = error
        .as_db_error()
        .map(|db| db.message().to_owned())
        .unwrap_or_else(|| error.to_string());
    assert!(
        message.contains(&format!("127.0.0.1:{}", stopped.port())),
        "the error names the worker: {message}"
    );
    // on a worker the feed is refused: consumers are on the coordinator
    for call in [
        "SELECT * FROM chunked_map.chunked_poll('runner')",
        "SELECT chunked_map.chunked_subscribe('elsewhere')",
        "SELECT chunked_map.chunked_unsubscribe('runner')",
    ] {
        assert_error(
            citus.worker(1).query(call, &[]),
            "0A000",
            "on a Citus cluster the feed (chunked_subscribe, chunked_poll, chunked_unsubscribe) runs on the coordinator only",
        );
    }
    stopped.restart();
    let mut coordinator = citus.coordinator();
    let behind = coordinator
        .query_one(
            "SELECT maps_behind, records_behind FROM chunked_map.consumers WHERE consumer = 'runner'",
            &[],
        )
        .unwrap();
    assert_eq!((behind.get::<_, i64>(0), behind.get::<_, i64>(1)), (12, 36));
    let delivered = poll_and_commit(&mut coordinator, "runner", 0, 1).expect("a poll");
    let expected: BTreeSet<FedRecord> = stored_records(&mut coordinator, &maps);
    assert_eq!(expected.len(), 36);
    let mut by_map = delivered.clone();
    by_map.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    assert_delivered_once_in_order("runner", &by_map, &expected);
    // a map dropped and started again under its name, through the coordinator: its positions
    // go with it (on its worker), and the new map is delivered from its first record
    let dropped: bool = coordinator
        .query_one("SELECT chunked_map.chunked_drop('job-0')", &[])
        .unwrap()
        .get(0);
    assert!(dropped);
    let left: i64 = coordinator
        .query_one(
            "SELECT count(*) FROM chunked_map.consumer_position WHERE map = 'job-0'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(left, 0, "the dropped map's positions went with it");
    coordinator
        .batch_execute("SELECT chunked_map.chunked_start('job-0')")
        .unwrap();
    coordinator
        .batch_execute("SELECT chunked_map.chunked_register('job-0', '{\"again\": true}')")
        .unwrap();
    let again = poll_and_commit(&mut coordinator, "runner", 0, 1).expect("a poll");
    assert_eq!(
        again,
        [("job-0".to_owned(), 1, "{\"again\": true}".to_owned())]
    );
    // a drop in a transaction block through the coordinator (not delegated)
    coordinator
        .batch_execute(
            "SELECT chunked_map.chunked_start('job-gone');
             SELECT chunked_map.chunked_register('job-gone', '{}');",
        )
        .unwrap();
    assert_eq!(
        poll_and_commit(&mut coordinator, "runner", 0, 1)
            .expect("a poll")
            .len(),
        1
    );
    coordinator
        .batch_execute("BEGIN; SELECT chunked_map.chunked_drop('job-gone'); COMMIT;")
        .unwrap();
    let gone: (i64, i64) = {
        let row = coordinator
            .query_one(
                "SELECT (SELECT count(*) FROM chunked_map.map_state WHERE map = 'job-gone'),
                        (SELECT count(*) FROM chunked_map.consumer_position WHERE map = 'job-gone')",
                &[],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert_eq!(gone, (0, 0), "the map and its position are gone");
    // the group grows from 1 to 2 and then to 3 members: nothing again, nothing skipped
    let more = |client: &mut Client, round: i32| {
        for map in &maps {
            client
                .execute(
                    "SELECT chunked_map.chunked_register($1, jsonb_build_object('round', $2::int))",
                    &[map, &round],
                )
                .unwrap();
        }
    };
    let mut grown: Vec<FedRecord> = Vec::new();
    for (round, group) in [(1, 2), (2, 3)] {
        more(&mut coordinator, round);
        for member in 0..group {
            grown.extend(
                poll_and_commit(&mut coordinator, "runner", member, group).expect("a poll"),
            );
        }
    }
    let everything = stored_records(&mut coordinator, &maps);
    let since: BTreeSet<FedRecord> = everything
        .iter()
        .filter(|(_, _, payload)| payload.contains("round"))
        .cloned()
        .collect();
    assert_eq!(since.len(), 24);
    grown.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    assert_delivered_once_in_order("runner", &grown, &since);
    // the view, for a role given the consumer recipe (its queries run on the workers too)
    coordinator
        .batch_execute(&format!(
            "{}\nCREATE ROLE watcher LOGIN IN ROLE chunked_map_consumer;",
            std::fs::read_to_string(
                chunked_map_cluster_tests::repo_root().join("sql/grants/consumer.sql")
            )
            .unwrap()
        ))
        .unwrap();
    let mut watcher = citus.connect_as(&citus.coordinator, "watcher");
    let behind: i64 = watcher
        .query_one(
            "SELECT records_behind FROM chunked_map.consumers WHERE consumer = 'runner'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(behind, 0);
    // unsubscribed through the coordinator, its positions go from the workers
    coordinator
        .batch_execute("SELECT chunked_map.chunked_unsubscribe('runner')")
        .unwrap();
    for worker in 0..2 {
        let positions: i64 = citus
            .worker(worker)
            .query_one("SELECT count(*) FROM chunked_map.consumer_position", &[])
            .unwrap()
            .get(0);
        assert_eq!(positions, 0);
    }
    // and subscribed again under its name, from the start of every map
    coordinator
        .batch_execute("SELECT chunked_map.chunked_subscribe('runner', 'job')")
        .unwrap();
    let mut again: Vec<FedRecord> = Vec::new();
    loop {
        let records = poll_and_commit(&mut coordinator, "runner", 0, 1).expect("a poll");
        if records.is_empty() {
            break;
        }
        again.extend(records);
    }
    again.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    assert_delivered_once_in_order("runner", &again, &everything);
}

#[test]
#[ignore = "needs Citus: scripts/test-citus.sh"]
fn a_distributed_database_of_0_4_1_updates_and_distributes_what_0_5_added() {
    // a database of 0.4.1, distributed as 0.4.1's chunked_distribute() did (its three storage
    // tables by map, colocated), holding the maps of the 0.3.0 fixture: made here with SQL,
    // since this build's library serves 0.5.0's SQL objects only
    let citus = CitusCluster::start_at_version("update", "0.3.0");
    let fixtures = chunked_map_cluster_tests::repo_root().join("tests/fixtures");
    citus.coordinator.run(
        &chunked_map_cluster_tests::pg_bin("psql"),
        &[
            "-X",
            "-q",
            "-v",
            "ON_ERROR_STOP=1",
            "-d",
            &citus.database,
            "-f",
            fixtures
                .join("chunked_map-0.3.0-data.sql")
                .to_str()
                .unwrap(),
        ],
    );
    let pages: Vec<serde_json::Value> = serde_json::from_str(
        &std::fs::read_to_string(fixtures.join("chunked_map-0.3.0-pages.json")).unwrap(),
    )
    .unwrap();
    let mut coordinator = citus.coordinator();
    coordinator
        .batch_execute(
            "ALTER EXTENSION chunked_map UPDATE TO '0.4.1';
             SET citus.enable_unsafe_triggers = on;
             SET citus.shard_replication_factor = 1;
             SELECT create_distributed_table('chunked_map.map_state', 'map', colocate_with => 'none');
             SELECT create_distributed_table(t, 'map', colocate_with => 'chunked_map.map_state')
             FROM unnest(ARRAY['chunked_map.current_record', 'chunked_map.archived_chunk']::regclass[]) AS t;
             SELECT truncate_local_data_after_distributing_table(t)
             FROM unnest(ARRAY['chunked_map.map_state', 'chunked_map.current_record',
                               'chunked_map.archived_chunk']::regclass[]) AS t;
             RESET citus.enable_unsafe_triggers;",
        )
        .unwrap();

    // the package of 0.5.0 on every node, then the update on the coordinator
    coordinator
        .batch_execute("ALTER EXTENSION chunked_map UPDATE")
        .unwrap();
    for worker in 0..2 {
        let version: String = citus
            .worker(worker)
            .query_one(
                "SELECT extversion FROM pg_extension WHERE extname = 'chunked_map'",
                &[],
            )
            .unwrap()
            .get(0);
        assert_eq!(
            version, "0.5.0",
            "Citus carries the update to worker {worker}"
        );
    }
    // the tables 0.5 added are on the coordinator alone until distributed: what uses them says so
    assert_error(
        coordinator.query(
            "SELECT * FROM chunked_map.chunked_register_once('subs', '{}', 'too-early')",
            &[],
        ),
        "55000",
        "chunked_map's storage table chunked_map.record_id is not distributed, while the others are",
    );
    // a start, which writes the maps' state alone, goes on meanwhile
    let started: bool = coordinator
        .query_one("SELECT chunked_map.chunked_start('started-between')", &[])
        .unwrap()
        .get(0);
    assert!(started);
    distribute(&mut coordinator);
    let distributed: Vec<String> = coordinator
        .query(
            "SELECT logicalrelid::regclass::text FROM pg_dist_partition
             WHERE logicalrelid::regclass::text IN ('chunked_map.record_id', 'chunked_map.consumer_position')
             ORDER BY 1",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(
        distributed,
        ["chunked_map.consumer_position", "chunked_map.record_id"]
    );
    // every page byte for byte what 0.3.0 served, but for 0.5's "at": null, "id": null, through
    // the coordinator and both workers; every map consistent
    let expected = fixture_pages_then(&mut coordinator, &pages);
    assert_eq!(fixture_pages_now(&mut coordinator, &pages), expected);
    for worker in 0..2 {
        assert_eq!(
            fixture_pages_now(&mut citus.worker(worker), &pages),
            expected
        );
    }
    let maps: Vec<String> = coordinator
        .query("SELECT map FROM chunked_map.map_state ORDER BY map", &[])
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert!(maps.len() >= 5, "{maps:?}");
    for map in &maps {
        let report = query_json(&mut coordinator, "chunked_map.chunked_verify($1)", &[map]);
        assert_eq!(report["consistent"], true, "{map}: {report}");
    }
    // 0.5 on the updated cluster: an id remembered on the map's node, whichever node is asked
    let once = |client: &mut Client| -> (i64, bool) {
        let row = client
            .query_one(
                "SELECT seq, duplicate FROM chunked_map.chunked_register_once('subs', '{\"x\": 1}', 'the-id')",
                &[],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert_eq!(once(&mut coordinator), (24, false));
    assert_eq!(once(&mut citus.worker(1)), (24, true));
    // and the feed, through the coordinator, from the start of every map
    coordinator
        .batch_execute("SELECT chunked_map.chunked_subscribe('after-update')")
        .unwrap();
    let mut delivered = Vec::new();
    loop {
        let batch = poll_and_commit(&mut coordinator, "after-update", 0, 1).expect("a poll");
        if batch.is_empty() {
            break;
        }
        delivered.extend(batch);
    }
    delivered.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    let stored = stored_records(&mut coordinator, &maps);
    assert_delivered_once_in_order("after-update", &delivered, &stored);
}
