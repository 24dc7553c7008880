//! The contract (docs/contract.md), Data safety: pg_dump / pg_restore of a database carries every map, byte for byte,
//! and appends continue where they left off.

use chunked_map_cluster_tests::page::all_pages_text;
use chunked_map_cluster_tests::{pg_bin, query_json, Client, Cluster};

const MAPS: [&str; 4] = ["mixed", "empty", "types", "Ünïcode map ✓"];

fn fill(client: &mut Client) {
    client
        .batch_execute(
            r#"
            -- rollovers at several chunk sizes
            SELECT chunked_map.chunked_start('mixed', 4);
            SELECT chunked_map.chunked_register('mixed', jsonb_build_object('n', n)) FROM generate_series(1, 10) AS n;
            SELECT chunked_map.chunked_set_chunk_size('mixed', 3);
            SELECT chunked_map.chunked_register('mixed', jsonb_build_object('n', n)) FROM generate_series(11, 20) AS n;
            SELECT chunked_map.chunked_set_chunk_size('mixed', 1);
            SELECT chunked_map.chunked_register('mixed', jsonb_build_object('n', n)) FROM generate_series(21, 25) AS n;
            SELECT chunked_map.chunked_start('empty');
            -- every JSON type, non-ASCII text, numbers beyond double precision
            SELECT chunked_map.chunked_start('types', 3);
            SELECT chunked_map.chunked_register('types', v::jsonb)
            FROM unnest(ARRAY[
                'null', 'true', 'false', '0', '-1.5e-300', '123456789012345678901234567890.123456789',
                '""', '"Grüße, 世界 🌍 \u00e9"', '"tab\there \"quoted\" back\\slash"',
                '[]', '{}', '[1, "a", null, [true, {"k": []}]]',
                '{"ключ": "значение", "emoji": "🦀", "nested": {"deep": {"deeper": [1, 2, 3]}}}'
            ]) WITH ORDINALITY AS t(v, i) ORDER BY i;
            SELECT chunked_map.chunked_start('Ünïcode map ✓', 2);
            SELECT chunked_map.chunked_register('Ünïcode map ✓', '{"ok": "✓"}') FROM generate_series(1, 5);
            "#,
        )
        .expect("fill maps");
}

#[test]
fn pg_dump_and_pg_restore_carry_every_map_byte_for_byte() {
    let cluster = Cluster::start();
    let mut source = cluster.database("source");
    fill(&mut source);
    let before: Vec<_> = MAPS
        .iter()
        .map(|map| all_pages_text(&mut source, map))
        .collect();

    let dump = cluster.socket_dir().join("source.dump");
    let dump_path = dump.display().to_string();
    cluster.run(
        &pg_bin("pg_dump"),
        &["--format=custom", "--file", &dump_path, "source"],
    );
    cluster
        .connect("postgres")
        .batch_execute("CREATE DATABASE restored")
        .unwrap();
    // CREATE EXTENSION comes from the dump itself
    cluster.run(
        &pg_bin("pg_restore"),
        &["--exit-on-error", "--dbname=restored", &dump_path],
    );

    let mut restored = cluster.connect("restored");
    let current_version: bool = restored
        .query_one(
            "SELECT e.extversion = a.default_version
             FROM pg_extension AS e JOIN pg_available_extensions AS a ON a.name = e.extname
             WHERE e.extname = 'chunked_map'",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(current_version);
    let after: Vec<_> = MAPS
        .iter()
        .map(|map| all_pages_text(&mut restored, map))
        .collect();
    assert_eq!(after, before, "every page of every map byte-identical");

    for map in MAPS {
        let report = query_json(&mut restored, "chunked_map.chunked_verify($1)", &[&map]);
        assert_eq!(report["consistent"], true, "{report}");
    }
    // appends continue at the right sequence, in the restored and in the source database
    for client in [&mut restored, &mut source] {
        let next: Vec<i64> = MAPS
            .iter()
            .map(|map| {
                client
                    .query_one("SELECT chunked_map.chunked_register($1, '{}')", &[map])
                    .unwrap()
                    .get(0)
            })
            .collect();
        assert_eq!(next, vec![26, 1, 14, 6]);
    }
    // the protections came back with the extension
    let triggers: i64 = restored
        .query_one(
            "SELECT count(*) FROM pg_trigger WHERE tgname IN
             ('archived_chunk_is_immutable', 'current_record_is_append_only', 'map_state_is_kept')",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(triggers, 3);
}

#[test]
fn the_storage_tables_are_registered_for_pg_dump() {
    let cluster = Cluster::start();
    let mut client = cluster.database("registered");
    let tables: Vec<String> = client
        .query(
            "SELECT x::regclass::text FROM pg_extension, unnest(extconfig) AS x
             WHERE extname = 'chunked_map' ORDER BY 1",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(
        tables,
        [
            "chunked_map.archived_chunk",
            "chunked_map.consumer",
            "chunked_map.consumer_position",
            "chunked_map.current_record",
            "chunked_map.map_incarnation",
            "chunked_map.map_state",
            "chunked_map.record_id"
        ]
    );
}

/// (0.5) A database with the message store restores through pg_dump and pg_restore: the store is
/// created before any stream's data comes back (its refusal of streams left by a dropped store
/// does not meet them), and its messages read, keep their ids unique, and take the next
/// positions.
#[test]
fn a_message_store_restores_with_its_streams_and_ids() {
    let cluster = Cluster::start();
    let mut source = cluster.database("store_source");
    source
        .batch_execute(
            "CREATE EXTENSION chunked_map_message_store;
             SELECT message_store.write_message('00000000-0000-4000-8000-00000000000' || n, 'account-' || (n % 2), 'Opened', jsonb_build_object('n', n))
             FROM generate_series(1, 6) AS n;
             SELECT count(*) FROM message_store.get_category_messages('account');",
        )
        .expect("fill the store");
    let dump_path = cluster
        .socket_dir()
        .join("store.dump")
        .display()
        .to_string();
    cluster.run(
        &pg_bin("pg_dump"),
        &["--format=custom", "--file", &dump_path, "store_source"],
    );
    cluster
        .connect("postgres")
        .batch_execute("CREATE DATABASE store_restored")
        .unwrap();
    cluster.run(
        &pg_bin("pg_restore"),
        &["--exit-on-error", "--dbname=store_restored", &dump_path],
    );
    let mut restored = cluster.connect("store_restored");
    let read = |client: &mut Client| -> Vec<(String, i64, String)> {
        client
            .query(
                "SELECT stream_name::text, position, data::text FROM message_store.get_category_messages('account')",
                &[],
            )
            .unwrap()
            .iter()
            .map(|row| (row.get(0), row.get(1), row.get(2)))
            .collect()
    };
    let before = read(&mut source);
    assert_eq!(before.len(), 6);
    assert_eq!(read(&mut restored), before);
    // an id of the dump is taken: message-db's error
    let error = restored
        .execute(
            "SELECT message_store.write_message('00000000-0000-4000-8000-000000000001', 'account-1', 'Opened', '{}')",
            &[],
        )
        .expect_err("a restored id is unique");
    let error = error.as_db_error().expect("a database error");
    assert_eq!(error.code().code(), "23505");
    assert_eq!(error.constraint(), Some("messages_id"));
    // and a stream goes on at its next position
    let position: i64 = restored
        .query_one(
            "SELECT message_store.write_message('00000000-0000-4000-8000-000000000007', 'account-1', 'Opened', '{}')",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(position, 3);
}
