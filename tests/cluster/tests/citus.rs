//! The contract (docs/contract.md), Scale-out: on a Citus coordinator with two workers, `chunked_distribute()` spreads
//! the maps over the workers, and the contract holds on the distributed cluster: API, tokens,
//! errors with their SQLSTATEs, 40001 on a held map and `chunked_map.lock_timeout`, contiguous
//! sequences under concurrent writers with retry, immutability for granted roles on every node,
//! `search_path` tricks, verify, info, forward reads, notifications.
//!
//! Citus is not part of the project: these tests run where it is installed, through
//! `scripts/test-citus.sh` (`cargo test --test citus -- --ignored`), which says so and skips
//! where it is not.

use std::sync::{Arc, Barrier};
use std::time::Duration;

use chunked_map_cluster_tests::citus::CitusCluster;
use chunked_map_cluster_tests::page::{all_pages_text, all_seqs, without_time};
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

#[test]
#[ignore = "needs Citus: scripts/test-citus.sh"]
fn trim_and_retention_work_on_distributed_maps_and_the_feed_says_it_is_not_there() {
    let citus = CitusCluster::start("retention");
    let mut coordinator = citus.coordinator();
    distribute(&mut coordinator);
    coordinator
        .batch_execute(
            "SELECT chunked_map.chunked_start(m, 5) FROM unnest(ARRAY['t1', 't2', 't3', 't4']) AS m;
             SELECT count(*) FROM unnest(ARRAY['t1', 't2', 't3', 't4']) AS m,
                 LATERAL chunked_map.chunked_register_many(m, ARRAY(SELECT jsonb_build_object('n', n) FROM generate_series(1, 23) AS n));",
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
    // the feed is not offered where the storage is distributed
    assert_error(
        coordinator.query_one("SELECT chunked_map.chunked_subscribe('c')", &[]),
        "0A000",
        "is not available on a Citus cluster",
    );
}
