//! At full size: chunks of payloads as large as the API accepts stay
//! readable. Pages are one jsonb value each (PostgreSQL's limit: 256 MiB) and archived chunks
//! one array (1 GiB); `chunked_map.max_chunk_bytes` (64 MiB by default) closes a chunk before
//! either is reached. Every page is read as JSON by a client and as rows, every record is
//! compared with what was appended, and `chunked_verify` checks the whole map.

use chunked_map_cluster_tests::page::all_pages_text;
use chunked_map_cluster_tests::{query_json, Client, Cluster};

/// Appends `count` payloads of about `bytes` bytes, one call each (one statement), with chunk
/// size `chunk_size`, then checks every page and record of the map.
fn fill_and_read_back(client: &mut Client, map: &str, chunk_size: i32, count: i32, bytes: i32) {
    // record i: {"i": i, "b": <bytes characters, the letter (i mod 26)>}
    let payload = "jsonb_build_object('i', i, 'b', repeat(chr(65 + (i % 26)::int), $3))";
    client
        .execute(
            "SELECT chunked_map.chunked_start($1, $2)",
            &[&map, &chunk_size],
        )
        .unwrap();
    let appended: i64 = client
        .query_one(
            &format!(
                "SELECT count(chunked_map.chunked_register($1, {payload}))
                 FROM generate_series(1, $2) AS i"
            ),
            &[&map, &count, &bytes],
        )
        .unwrap()
        .get(0);
    assert_eq!(appended, i64::from(count));

    // every page as JSON, as a client reads it: every record once, newest first, payload exact
    let pages = all_pages_text(client, map);
    let mut expected_seq = i64::from(count);
    let mut largest_page = 0;
    for (token, text) in &pages {
        largest_page = largest_page.max(text.len());
        let page: serde_json::Value = serde_json::from_str(text).expect("page is JSON");
        let records = page["records"].as_array().expect("records");
        assert!(
            records.len() <= usize::try_from(chunk_size).unwrap(),
            "page {token}: {} records",
            records.len()
        );
        for record in records {
            assert_eq!(record["seq"], expected_seq, "page {token}");
            let payload = &record["payload"];
            assert_eq!(payload["i"], expected_seq);
            let letter = char::from(65 + u8::try_from(expected_seq % 26).unwrap());
            let b = payload["b"].as_str().expect("b is a string");
            assert_eq!(b.len(), usize::try_from(bytes).unwrap());
            assert!(b.chars().all(|c| c == letter), "record {expected_seq}");
            expected_seq -= 1;
        }
    }
    assert_eq!(expected_seq, 0, "every record read once");
    assert!(pages.len() > 2, "the map spans several chunks");
    eprintln!(
        "{map}: {count} records of {bytes} bytes in chunks of at most {chunk_size}: {} pages, the largest {largest_page} bytes of JSON",
        pages.len()
    );

    // every page as rows, each payload equal to what was appended
    let tokens: Vec<String> = pages.iter().map(|(token, _)| token.clone()).collect();
    let (rows, equal): (i64, i64) = {
        let row = client
            .query_one(
                &format!(
                    "SELECT count(*), count(*) FILTER (WHERE r.payload = (SELECT {payload} FROM (SELECT r.seq AS i) AS x))
                     FROM unnest($2::text[]) AS t(token)
                     CROSS JOIN LATERAL chunked_map.chunked_records($1, t.token) AS r"
                ),
                &[&map, &tokens, &bytes],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert_eq!((rows, equal), (i64::from(count), i64::from(count)));

    // and forward, oldest first, in reads of 100
    let forward: i64 = client
        .query_one(
            "SELECT count(*) FROM generate_series(0, $2::bigint - 1, 100) AS after_seq
             CROSS JOIN LATERAL chunked_map.chunked_read($1, after_seq, 100)",
            &[&map, &i64::from(count)],
        )
        .unwrap()
        .get(0);
    assert_eq!(forward, i64::from(count));

    let report = query_json(client, "chunked_map.chunked_verify($1)", &[&map]);
    assert_eq!(report["consistent"], true, "{report}");
}

#[test]
fn three_hundred_payloads_of_1_mib_in_a_chunk_size_of_300_stay_readable() {
    let cluster = Cluster::start_with(&["max_wal_size=4GB"]);
    let mut client = cluster.database("size_1mib");
    fill_and_read_back(&mut client, "big", 300, 300, 1_000_000);
}

#[test]
fn three_thousand_payloads_of_100_kib_in_a_chunk_size_of_10000_stay_readable() {
    let cluster = Cluster::start_with(&["max_wal_size=4GB"]);
    let mut client = cluster.database("size_100kib");
    fill_and_read_back(&mut client, "wide", 10_000, 3_000, 100 * 1024);
}
