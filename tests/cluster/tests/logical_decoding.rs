//! The contract (docs/contract.md), Data safety: every committed record is in the WAL as
//! logical decoding reads it, whichever way the append wrote it (directly through the access
//! methods, the default, or through SQL statements), and nothing rolled back is. Read with
//! pgoutput, PostgreSQL's own output plugin (built into every server, the wheel's for 16
//! included), through the SQL interface of a logical replication slot.

use chunked_map_cluster_tests::{Client, Cluster};

/// One decoded insert into `chunked_map.current_record`: map, sequence, payload as text (its
/// time and id are sent too, and not compared here).
type Inserted = (String, i64, String);

/// Reads pgoutput's protocol version 1 messages: inserts into the relation `relation`.
fn inserts(messages: &[Vec<u8>], relation: u32) -> Vec<Inserted> {
    let mut found = Vec::new();
    for message in messages {
        if message.first() != Some(&b'I') {
            continue;
        }
        let relid = u32::from_be_bytes(message[1..5].try_into().expect("relation id"));
        if relid != relation {
            continue;
        }
        assert_eq!(message[5], b'N', "a new tuple follows");
        let columns = u16::from_be_bytes(message[6..8].try_into().expect("columns"));
        let mut at = 8;
        let mut values = Vec::new();
        for _ in 0..columns {
            let kind = message[at];
            at += 1;
            if kind == b'n' {
                // NULL: a record without an id
                values.push(String::new());
                continue;
            }
            assert_eq!(kind, b't', "every column of a record is sent as text");
            let len = u32::from_be_bytes(message[at..at + 4].try_into().expect("length")) as usize;
            at += 4;
            values.push(String::from_utf8(message[at..at + len].to_vec()).expect("UTF-8"));
            at += len;
        }
        assert_eq!(values.len(), 5, "map, seq, payload, at, id");
        assert!(
            !values[3].is_empty(),
            "every record appended now has a time"
        );
        found.push((
            values[0].clone(),
            values[1].parse().expect("seq"),
            values[2].clone(),
        ));
    }
    found
}

fn append(client: &mut Client, map: &str, n: i32) -> Inserted {
    let row = client
        .query_one(
            "SELECT s, jsonb_build_object('n', $2::int, 'text', repeat('y', $2::int * 37))::text
             FROM chunked_map.chunked_register($1, jsonb_build_object('n', $2::int, 'text', repeat('y', $2::int * 37))) AS s",
            &[&map, &n],
        )
        .expect("append");
    (map.to_owned(), row.get(0), row.get(1))
}

#[test]
fn logical_decoding_sees_every_committed_record_whichever_way_it_was_written() {
    let cluster = Cluster::start_with(&[
        "wal_level=logical",
        "max_replication_slots=4",
        "max_wal_senders=4",
    ]);
    let mut client = cluster.database("decoding");
    // each its own transaction: a slot is made in one that has written nothing
    for setup in [
        "CREATE PUBLICATION records FOR TABLE chunked_map.current_record",
        "SELECT pg_catalog.pg_create_logical_replication_slot('records', 'pgoutput')",
        "SELECT chunked_map.chunked_start('direct', 1000)",
        "SELECT chunked_map.chunked_start('through_sql', 1000)",
    ] {
        client.batch_execute(setup).expect(setup);
    }
    let relation: u32 = client
        .query_one("SELECT 'chunked_map.current_record'::regclass::oid", &[])
        .expect("relation")
        .get(0);
    let mut committed = Vec::new();
    for (map, direct) in [("direct", true), ("through_sql", false)] {
        client
            .batch_execute(&format!("SET chunked_map.direct_append = {direct}"))
            .expect("setting");
        // one append per transaction
        for n in 0..20 {
            committed.push(append(&mut client, map, n));
        }
        // many in one transaction, a large one (TOASTed) among them
        client.batch_execute("BEGIN").expect("begin");
        for n in 20..60 {
            committed.push(append(&mut client, map, if n == 40 { 3000 } else { n }));
        }
        client.batch_execute("COMMIT").expect("commit");
        // rolled back: in the WAL, never decoded
        client.batch_execute("BEGIN").expect("begin");
        for n in 60..70 {
            append(&mut client, map, n);
        }
        client.batch_execute("ROLLBACK").expect("rollback");
        // rolled back to a savepoint, the rest committed
        client.batch_execute("BEGIN").expect("begin");
        committed.push(append(&mut client, map, 70));
        client.batch_execute("SAVEPOINT s").expect("savepoint");
        append(&mut client, map, 71);
        client
            .batch_execute("ROLLBACK TO SAVEPOINT s")
            .expect("rollback to savepoint");
        committed.push(append(&mut client, map, 72));
        client.batch_execute("COMMIT").expect("commit");
    }
    let messages: Vec<Vec<u8>> = client
        .query(
            "SELECT data FROM pg_catalog.pg_logical_slot_get_binary_changes('records', NULL, NULL,
                 'proto_version', '1', 'publication_names', 'records')",
            &[],
        )
        .expect("decode")
        .iter()
        .map(|row| row.get(0))
        .collect();
    let decoded = inserts(&messages, relation);
    assert_eq!(decoded.len(), committed.len(), "records decoded");
    assert_eq!(
        decoded, committed,
        "every committed record, in commit order, as stored"
    );
    // sequences without gaps: the rolled-back ones were given again
    for map in ["direct", "through_sql"] {
        let seqs: Vec<i64> = decoded
            .iter()
            .filter(|(m, _, _)| m == map)
            .map(|(_, seq, _)| *seq)
            .collect();
        assert_eq!(seqs, (1..=62).collect::<Vec<_>>(), "{map}");
    }
}
