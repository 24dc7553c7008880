//! chunked_map in `shared_preload_libraries` (what a Citus cluster needs, see the README's
//! "Scaling out with Citus"): on a plain PostgreSQL its planner hook changes no answer. A NULL
//! map is 22004 as without it, a call PostgreSQL would not make raises nothing, and every other
//! query plans as before.

use chunked_map_cluster_tests::{assert_error, query_json, Cluster};

#[test]
fn preloaded_on_plain_postgresql_the_answers_are_the_same() {
    let cluster = Cluster::start_with(&["shared_preload_libraries='chunked_map'"]);
    let mut client = cluster.database("preloaded");
    let guard: String = client
        .query_one("SHOW chunked_map.null_map_guard", &[])
        .unwrap()
        .get(0);
    assert_eq!(guard, "on");
    client
        .batch_execute(
            "SELECT chunked_map.chunked_start('m', 2);
             SELECT chunked_map.chunked_register('m', jsonb_build_object('n', n)) FROM generate_series(1, 3) AS n;
             CREATE FUNCTION info(m text) RETURNS jsonb LANGUAGE sql AS 'SELECT chunked_map.chunked_info(m)';",
        )
        .unwrap();
    for sql in [
        "SELECT chunked_map.chunked_info(NULL)",
        "SELECT chunked_map.chunked_info(map => NULL)",
        "SELECT * FROM chunked_map.chunked_read(NULL)",
        "SELECT info(NULL)",
    ] {
        assert_error(
            client.query(sql, &[]),
            "22004",
            "argument \"map\" must not be null",
        );
    }
    let guarded = client
        .query(
            "SELECT chunked_map.chunked_info($1) WHERE $1::text IS NOT NULL",
            &[&None::<&str>],
        )
        .unwrap();
    assert!(guarded.is_empty());
    // a NULL map in a call PostgreSQL would skip: no error (a CASE never taken)
    let skipped: Option<String> = client
        .query_one(
            "SELECT CASE WHEN false THEN chunked_map.chunked_info(NULL)::text END",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(skipped, None);
    assert_eq!(
        query_json(&mut client, "info('m')", &[])["total_records"],
        3
    );
    let seqs: Vec<i64> = client
        .query(
            "SELECT seq FROM chunked_map.chunked_read(map => 'm', after_seq => 1)",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(seqs, [2, 3]);
}
