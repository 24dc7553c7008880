//! `chunked_verify` reports a consistent map as consistent, and notices each kind of damage
//! done on purpose to a copy of a map's storage (the original stays consistent).

use chunked_map_cluster_tests::{query_json, Client, Cluster};
use serde_json::Value;

/// Copies every stored row of map `from` under the name `to` (as the owner, who may).
const COPY_MAP: &str = "
    INSERT INTO chunked_map.map_state
        SELECT $2, chunk_size, current_first_seq, current_chunk_size, newest_archived_token, archived_chunks,
               next_seq, current_bytes, notify
        FROM chunked_map.map_state WHERE map = $1;
    INSERT INTO chunked_map.current_record SELECT $2, seq, payload FROM chunked_map.current_record WHERE map = $1;
    INSERT INTO chunked_map.archived_chunk
        SELECT $2, first_seq, chunk_size, prev_token, layout, payloads FROM chunked_map.archived_chunk WHERE map = $1;";

fn copy_map(client: &mut Client, from: &str, to: &str) {
    for statement in COPY_MAP.split(';').filter(|s| !s.trim().is_empty()) {
        client.execute(statement, &[&from, &to]).expect("copy map");
    }
}

fn verify(client: &mut Client, map: &str) -> Value {
    query_json(client, "chunked_map.chunked_verify($1)", &[&map])
}

#[test]
fn verify_notices_each_kind_of_damage_to_a_copy_of_the_storage() {
    let cluster = Cluster::start();
    let mut client = cluster.database("verify");
    client
        .batch_execute(
            "SELECT chunked_map.chunked_start('m', 4);
             SELECT chunked_map.chunked_register('m', jsonb_build_object('n', n)) FROM generate_series(1, 18) AS n;",
        )
        .unwrap();
    // chunks 1..4, 5..8, 9..12, 13..16 archived; 17..18 current
    let report = verify(&mut client, "m");
    assert_eq!(
        report,
        serde_json::json!({"map": "m", "consistent": true, "problems": [], "archived_chunks": 4,
                           "current_records": 2, "total_records": 18})
    );

    let damage = [
        (
            // a chunk may hold fewer records than its size (the byte limit closed it), but then
            // the next one starts earlier
            "UPDATE chunked_map.archived_chunk SET payloads = payloads[2:] WHERE map = $1 AND first_seq = 5",
            "archived chunk 00000000000000000009 starts at sequence 9, expected 8",
        ),
        (
            "UPDATE chunked_map.archived_chunk SET payloads = '{}' WHERE map = $1 AND first_seq = 5",
            "archived chunk 00000000000000000005 holds 0 records, its size is 4",
        ),
        (
            "UPDATE chunked_map.archived_chunk SET payloads[2] = NULL WHERE map = $1 AND first_seq = 9",
            "archived chunk 00000000000000000009 is malformed (NULL payloads, or its payloads, times or ids not one-dimensional arrays of one element per record)",
        ),
        (
            "UPDATE chunked_map.archived_chunk SET payloads = ARRAY[payloads[1:2], payloads[3:4]]
             WHERE map = $1 AND first_seq = 1",
            "archived chunk 00000000000000000001 is malformed (NULL payloads, or its payloads, times or ids not one-dimensional arrays of one element per record)",
        ),
        (
            "UPDATE chunked_map.archived_chunk SET payloads = '[0:3]={1,2,3,4}'::jsonb[]
             WHERE map = $1 AND first_seq = 13",
            "archived chunk 00000000000000000013 is malformed (NULL payloads, or its payloads, times or ids not one-dimensional arrays of one element per record)",
        ),
        (
            "DELETE FROM chunked_map.archived_chunk WHERE map = $1 AND first_seq = 5",
            "archived chunk 00000000000000000009 starts at sequence 9, expected 5",
        ),
        (
            "UPDATE chunked_map.archived_chunk SET prev_token = '00000000000000000001'
             WHERE map = $1 AND first_seq = 13",
            "the token chain reaches archived chunk 00000000000000000001 out of order",
        ),
        (
            "UPDATE chunked_map.archived_chunk SET prev_token = '00000000000000000003'
             WHERE map = $1 AND first_seq = 5",
            "the token chain reaches 00000000000000000003, which names no archived chunk",
        ),
        (
            "UPDATE chunked_map.archived_chunk SET prev_token = NULL WHERE map = $1 AND first_seq = 9",
            "the token chain ends before the oldest archived chunk (2 chunks unreachable)",
        ),
        (
            "UPDATE chunked_map.archived_chunk SET chunk_size = 3 WHERE map = $1 AND first_seq = 13",
            "archived chunk 00000000000000000013 holds 4 records, its size is 3",
        ),
        (
            "DELETE FROM chunked_map.current_record WHERE map = $1 AND seq = 17",
            "the current chunk holds sequences 18..18 (1 records), the state expects 17..18",
        ),
        (
            "INSERT INTO chunked_map.current_record VALUES ($1, 20, '{}')",
            "the current chunk holds sequences 17..20 (3 records), the state expects 17..18",
        ),
        (
            "UPDATE chunked_map.map_state SET next_seq = 25 WHERE map = $1",
            "the current chunk holds sequences 17..18 (2 records), the state expects 17..24",
        ),
        (
            "UPDATE chunked_map.map_state SET current_bytes = current_bytes + 1 WHERE map = $1",
            "the current chunk holds 48 payload bytes, the state counts 49",
        ),
        (
            "UPDATE chunked_map.map_state SET newest_archived_token = '00000000000000000009' WHERE map = $1",
            "the state names 00000000000000000009 as the newest archived chunk, the newest stored is 00000000000000000013",
        ),
        (
            "UPDATE chunked_map.map_state SET archived_chunks = 7 WHERE map = $1",
            "the state counts 7 archived chunks, 4 are stored",
        ),
        (
            "UPDATE chunked_map.map_state SET current_first_seq = 18 WHERE map = $1",
            "the current chunk starts at sequence 18, expected 17",
        ),
        (
            "UPDATE chunked_map.map_state SET current_chunk_size = 1 WHERE map = $1",
            "the current chunk holds 2 records, its size is 1",
        ),
        (
            "DELETE FROM chunked_map.map_state WHERE map = $1",
            "the map's state row is missing",
        ),
    ];
    for (i, (sql, problem)) in damage.iter().enumerate() {
        let copy = format!("copy{i}");
        copy_map(&mut client, "m", &copy);
        assert_eq!(
            verify(&mut client, &copy)["consistent"],
            true,
            "the undamaged copy {copy}"
        );
        client
            .execute(*sql, &[&copy])
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        let report = verify(&mut client, &copy);
        assert_eq!(report["consistent"], false, "{sql}: {report}");
        let problems: Vec<&str> = report["problems"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_str().unwrap())
            .collect();
        assert!(
            problems.contains(problem),
            "{sql}:\n expected {problem:?}\n in {problems:#?}"
        );
    }
    assert_eq!(
        verify(&mut client, "m")["consistent"],
        true,
        "the original is untouched"
    );
}
