//! The Diesel example against a throw-away cluster: its appends meet a map another transaction
//! holds (40001, retried), its optimistic append after the wrong sequence is the domain error,
//! and the rows it reads back are every record, newest first.
//!
//! The holder releases the map when the retry loop has met it, not after a pause: a pause races
//! the loop's own backoff (whose total depends on the process id), which is how this test once
//! failed on a loaded machine.

use chunked_map_cluster_tests::Cluster;
use chunked_map_diesel_example::{pages, register, register_with_backoff, start, AppendError};
use diesel::{Connection, PgConnection};
use serde_json::json;

#[test]
fn diesel_appends_with_retries_maps_the_mismatch_and_reads_every_record() {
    let cluster = Cluster::start();
    let mut holder = cluster.database("diesel");
    let mut conn = PgConnection::establish(&cluster.url("diesel")).expect("connect");
    assert!(start(&mut conn, "subscribers", 3).unwrap());
    assert!(!start(&mut conn, "subscribers", 3).unwrap());

    // another transaction holds the map until the append has met it once
    holder
        .batch_execute(
            "BEGIN; SELECT chunked_map.chunked_register('subscribers', '{\"held\": true}')",
        )
        .unwrap();
    let mut holder = Some(holder);
    let (seq, retries) = register_with_backoff(
        &mut conn,
        "subscribers",
        &json!({"n": 1}),
        None,
        |attempt| {
            assert_eq!(attempt, 0, "the map is held for the first attempt only");
            let mut holder = holder.take().expect("the holder is still open");
            holder.batch_execute("COMMIT").unwrap();
        },
    )
    .unwrap();
    assert!(holder.is_none(), "the first attempt met the held map");
    assert_eq!(seq, 2);
    assert_eq!(retries, 1);
    for n in 2..=9 {
        let (seq, _) = register(&mut conn, "subscribers", &json!({"n": n}), None).unwrap();
        assert_eq!(seq, n + 1);
    }

    match register(&mut conn, "subscribers", &json!({"late": true}), Some(9)) {
        Err(AppendError::UnexpectedLastSeq(message)) => assert_eq!(
            message,
            "map \"subscribers\" has newest sequence 10, expected 9"
        ),
        other => panic!("{other:?}"),
    }
    let (seq, _) = register(&mut conn, "subscribers", &json!({"n": 10}), Some(10)).unwrap();
    assert_eq!(seq, 11);

    let read = pages(&mut conn, "subscribers").unwrap();
    let tokens: Vec<&str> = read.iter().map(|(token, _)| token.as_str()).collect();
    assert_eq!(
        tokens,
        [
            "current",
            "00000000000000000007",
            "00000000000000000004",
            "00000000000000000001"
        ]
    );
    let seqs: Vec<i64> = read
        .iter()
        .flat_map(|(_, records)| records.iter().map(|r| r.seq))
        .collect();
    assert_eq!(seqs, (1..=11).rev().collect::<Vec<_>>());
    assert_eq!(read[0].1[0].payload, json!({"n": 10}));
}
