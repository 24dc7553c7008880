//! `ALTER EXTENSION chunked_map UPDATE` from every released version, on a database holding what
//! that version's build wrote (`tests/fixtures`: its data as pg_dump wrote it, and every page it
//! served): every page stays byte-identical, the new functions work on the old data, appends go
//! on where it left off, and the upgraded catalog is exactly that of a fresh install (so the
//! upgrade scripts miss nothing).

use chunked_map_cluster_tests::page::{all_seqs, fixture_pages_now, fixture_pages_then};
use chunked_map_cluster_tests::{
    announced, assert_error, extension_version, listen_to, notifications_delivered, pg_bin,
    query_json, repo_root, Client, Cluster,
};
use serde_json::Value;

/// Everything the extension creates, described in a comparable form.
const CATALOG: &str = r#"
SELECT 'function ' || p.proname || '(' || pg_get_function_arguments(p.oid) || ') '
       || pg_get_function_result(p.oid) || ' ' || p.provolatile::text || p.proparallel::text
       || CASE WHEN p.prosecdef THEN ' definer' ELSE ' invoker' END
       || CASE WHEN p.proisstrict THEN ' strict' ELSE '' END
       || ' config=' || coalesce(array_to_string(p.proconfig, ','), '')
       || ' lang=' || l.lanname || ' src=' || regexp_replace(p.prosrc, '\s+', ' ', 'g')
       || ' acl=' || coalesce(p.proacl::text, 'default')
FROM pg_proc AS p JOIN pg_language AS l ON l.oid = p.prolang
WHERE p.pronamespace = 'chunked_map'::regnamespace
UNION ALL
SELECT 'column ' || a.attrelid::regclass || '.' || a.attname || ' '
       || format_type(a.atttypid, a.atttypmod) || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
       || ' default=' || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
       || ' compression=' || a.attcompression::text || ' storage=' || a.attstorage::text
FROM pg_attribute AS a
JOIN pg_class AS c ON c.oid = a.attrelid
LEFT JOIN pg_attrdef AS d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE c.relnamespace = 'chunked_map'::regnamespace AND c.relkind = 'r'
  AND a.attnum > 0 AND NOT a.attisdropped
UNION ALL
SELECT 'relation ' || c.oid::regclass || ' kind=' || c.relkind::text || ' acl=' || coalesce(c.relacl::text, 'default')
       || ' options=' || coalesce(array_to_string(c.reloptions, ','), '')
FROM pg_class AS c WHERE c.relnamespace = 'chunked_map'::regnamespace
UNION ALL
SELECT 'constraint ' || conrelid::regclass || '.' || conname || ' ' || pg_get_constraintdef(oid)
FROM pg_constraint WHERE connamespace = 'chunked_map'::regnamespace
UNION ALL
SELECT 'index ' || pg_get_indexdef(indexrelid)
FROM pg_index WHERE indrelid IN (SELECT oid FROM pg_class WHERE relnamespace = 'chunked_map'::regnamespace)
UNION ALL
SELECT 'trigger ' || pg_get_triggerdef(t.oid)
FROM pg_trigger AS t JOIN pg_class AS c ON c.oid = t.tgrelid
WHERE c.relnamespace = 'chunked_map'::regnamespace AND NOT t.tgisinternal
UNION ALL
SELECT 'dumped ' || x::regclass || ' where=' || coalesce(e.extcondition[i], '')
FROM pg_extension AS e, unnest(e.extconfig) WITH ORDINALITY AS u(x, i)
WHERE e.extname = 'chunked_map'
UNION ALL
SELECT 'member ' || pg_describe_object(classid, objid, 0)
FROM pg_depend
WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
  AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'chunked_map')
UNION ALL
SELECT 'schema acl=' || coalesce(nspacl::text, 'default') FROM pg_namespace WHERE nspname = 'chunked_map'
UNION ALL
SELECT 'version ' || extversion FROM pg_extension WHERE extname = 'chunked_map'
ORDER BY 1
"#;

fn catalog(client: &mut Client) -> Vec<String> {
    client
        .query(CATALOG, &[])
        .expect("catalog")
        .iter()
        .map(|row| row.get(0))
        .collect()
}

/// A database with the extension at `version`, filled from that version's fixture; returns a
/// connection and the pages that version served.
fn released_database(cluster: &Cluster, database: &str, version: &str) -> (Client, Vec<Value>) {
    cluster
        .connect("postgres")
        .batch_execute(&format!("CREATE DATABASE {database}"))
        .unwrap();
    let mut client = cluster.connect(database);
    client
        .batch_execute(&format!("CREATE EXTENSION chunked_map VERSION '{version}'"))
        .unwrap();
    let fixtures = repo_root().join("tests/fixtures");
    let data = fixtures.join(format!("chunked_map-{version}-data.sql"));
    cluster.run(
        &pg_bin("psql"),
        &[
            "-X",
            "-q",
            "-v",
            "ON_ERROR_STOP=1",
            "-d",
            database,
            "-f",
            data.to_str().unwrap(),
        ],
    );
    let pages = std::fs::read_to_string(fixtures.join(format!("chunked_map-{version}-pages.json")))
        .expect("fixture pages");
    let pages: Vec<Value> = serde_json::from_str(&pages).expect("fixture pages are JSON");
    (client, pages)
}

fn consistent(client: &mut Client) {
    let maps: Vec<String> = client
        .query("SELECT map FROM chunked_map.map_state", &[])
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    for map in maps {
        let report = query_json(client, "chunked_map.chunked_verify($1)", &[&map]);
        assert_eq!(report["consistent"], true, "{report}");
    }
}

#[test]
fn a_database_of_0_2_0_upgrades_with_every_page_kept_and_matches_a_fresh_install() {
    let cluster = Cluster::start();
    let (mut upgraded, pages) = released_database(&cluster, "upgraded", "0.2.0");

    // the new library refuses the old tables until the update, and says what to do
    let error = assert_error(
        upgraded.query("SELECT chunked_map.chunked_page('subs')", &[]),
        "55000",
        &format!(
            "chunked_map's library is version {}, but its SQL objects in this database are version 0.2.0",
            extension_version()
        ),
    );
    assert_eq!(
        error.hint(),
        Some("Run ALTER EXTENSION chunked_map UPDATE.")
    );
    drop(upgraded);
    let mut upgraded = cluster.connect("upgraded");
    upgraded
        .batch_execute("ALTER EXTENSION chunked_map UPDATE")
        .unwrap();

    assert_eq!(
        fixture_pages_now(&mut upgraded, &pages),
        fixture_pages_then(&mut upgraded, &pages),
        "every page byte-identical"
    );
    let mut fresh = cluster.database("fresh");
    assert_eq!(catalog(&mut upgraded), catalog(&mut fresh));
    consistent(&mut upgraded);

    // the state row carries what 0.2.0 derived, and the new functions read the old data
    let info = query_json(&mut upgraded, "chunked_map.chunked_info('subs')", &[]);
    assert_eq!(info["next_seq"], 24);
    assert_eq!(info["archived_chunks"], 4);
    assert_eq!(info["current_records"], 3);
    let forward: Vec<i64> = upgraded
        .query(
            "SELECT seq FROM chunked_map.chunked_read('audit', 95, 10)",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(forward, (96..=105).collect::<Vec<_>>());
    let record = query_json(&mut upgraded, "chunked_map.chunked_get('audit', 150)", &[]);
    assert_eq!(
        record,
        // appended by 0.2.0: its time is not known, and it has no id
        serde_json::json!({"seq": 150, "payload": {"event": 150}, "at": null, "id": null})
    );

    // appends continue where 0.2.0 left off: a full chunk rolls over, a batch fills and
    // archives, an optimistic append sees the right newest sequence
    let seq: i64 = upgraded
        .query_one("SELECT chunked_map.chunked_register('full', '{}')", &[])
        .unwrap()
        .get(0);
    assert_eq!(seq, 9);
    upgraded
        .batch_execute("SELECT chunked_map.chunked_set_chunk_size('subs', 2)")
        .unwrap();
    let seqs: Vec<i64> = upgraded
        .query(
            "SELECT chunked_map.chunked_register_many('subs', ARRAY['{}', '{}', '{}', '{}']::jsonb[])",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(seqs, vec![24, 25, 26, 27]);
    assert_eq!(
        all_seqs(&mut upgraded, "subs"),
        (1..=27).rev().collect::<Vec<_>>()
    );
    let seq: i64 = upgraded
        .query_one("SELECT chunked_map.chunked_register('many', '{}', 40)", &[])
        .unwrap()
        .get(0);
    assert_eq!(seq, 41);
    consistent(&mut upgraded);
    // the archived pages of 0.2.0 are still byte-identical after all that
    let archived: Vec<Value> = pages
        .iter()
        .filter(|page| page["token"] != "current")
        .cloned()
        .collect();
    assert_eq!(
        fixture_pages_now(&mut upgraded, &archived),
        fixture_pages_then(&mut upgraded, &archived)
    );

    // the history triggers now refuse INSERT too
    upgraded
        .batch_execute(
            "CREATE ROLE intruder; GRANT ALL ON ALL TABLES IN SCHEMA chunked_map TO intruder;
             GRANT USAGE ON SCHEMA chunked_map TO intruder",
        )
        .unwrap();
    upgraded.batch_execute("SET ROLE intruder").unwrap();
    assert_error(
        upgraded.execute(
            "INSERT INTO chunked_map.current_record VALUES ('subs', 28, '{}')",
            &[],
        ),
        "42501",
        "INSERT on chunked_map.current_record is not allowed",
    );
}

#[test]
fn a_database_of_0_1_0_upgrades_through_0_2_0_with_every_page_kept() {
    let cluster = Cluster::start();
    let (mut upgraded, pages) = released_database(&cluster, "upgraded", "0.1.0");
    upgraded
        .batch_execute("ALTER EXTENSION chunked_map UPDATE")
        .unwrap();
    assert_eq!(
        fixture_pages_now(&mut upgraded, &pages),
        fixture_pages_then(&mut upgraded, &pages),
        "every page byte-identical"
    );
    let mut fresh = cluster.database("fresh");
    assert_eq!(catalog(&mut upgraded), catalog(&mut fresh));
    consistent(&mut upgraded);
    let seq: i64 = upgraded
        .query_one("SELECT chunked_map.chunked_register('audit', '{}')", &[])
        .unwrap()
        .get(0);
    assert_eq!(seq, 251);
}

#[test]
fn a_database_of_0_3_0_upgrades_with_every_page_kept_and_matches_a_fresh_install() {
    let cluster = Cluster::start();
    let (upgraded, pages) = released_database(&cluster, "upgraded", "0.3.0");
    drop(upgraded);
    let mut upgraded = cluster.connect("upgraded");
    upgraded
        .batch_execute(
            "BEGIN; ALTER EXTENSION chunked_map UPDATE;
             CREATE TEMP TABLE updated_at AS SELECT now() AS at; COMMIT",
        )
        .unwrap();
    assert_eq!(
        fixture_pages_now(&mut upgraded, &pages),
        fixture_pages_then(&mut upgraded, &pages),
        "every page byte-identical"
    );
    let mut fresh = cluster.database("fresh");
    assert_eq!(catalog(&mut upgraded), catalog(&mut fresh));
    consistent(&mut upgraded);

    // 0.4: chunks archived by 0.3 count as archived at the update (an age limit starts there);
    // nothing was trimmed
    let (chunks, at_update, oldest): (i64, i64, i64) = {
        let row = upgraded
            .query_one(
                "SELECT count(*), count(*) FILTER (WHERE a.archived_at = u.at),
                        (SELECT max(oldest_seq) FROM chunked_map.map_state)
                 FROM chunked_map.archived_chunk AS a, updated_at AS u",
                &[],
            )
            .unwrap();
        (row.get(0), row.get(1), row.get(2))
    };
    assert!(chunks > 0);
    assert_eq!(at_update, chunks, "every 0.3 chunk has the update's time");
    assert_eq!(oldest, 1);

    // the map whose notifications were on has a channel of its own now, and its commits are
    // announced there
    let mut listener = cluster.connect("upgraded");
    let channel = listen_to(&mut listener, "notified");
    assert!(
        channel.starts_with("chunked_map_") && channel.len() == 44,
        "{channel}"
    );
    let seq: i64 = upgraded
        .query_one("SELECT chunked_map.chunked_register('notified', '{}')", &[])
        .unwrap()
        .get(0);
    assert_eq!(seq, 6);
    assert_eq!(
        notifications_delivered(&mut listener),
        vec![announced(&channel, "notified", 6)]
    );
    // every map goes on where 0.3.0 left off
    for (map, next) in [
        ("subs", 24),
        ("audit", 251),
        ("resized", 17),
        ("empty", 1),
        ("bytes", 10),
    ] {
        let seq: i64 = upgraded
            .query_one("SELECT chunked_map.chunked_register($1, '{}')", &[&map])
            .unwrap()
            .get(0);
        assert_eq!(seq, next, "{map}");
    }
    let started: bool = upgraded
        .query_one("SELECT chunked_map.chunked_start('new-after-update')", &[])
        .unwrap()
        .get(0);
    assert!(started);
    consistent(&mut upgraded);
    let archived: Vec<Value> = pages
        .iter()
        .filter(|page| page["token"] != "current")
        .cloned()
        .collect();
    assert_eq!(
        fixture_pages_now(&mut upgraded, &archived),
        fixture_pages_then(&mut upgraded, &archived)
    );
}
