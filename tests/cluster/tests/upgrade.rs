//! `ALTER EXTENSION chunked_map UPDATE` from 0.1.0 on a database full of data: every page stays
//! byte-identical, the new functions work on the old data, and the upgraded catalog is exactly
//! that of a fresh 0.2.0 install (so the upgrade script misses nothing).

use chunked_map_cluster_tests::page::{all_pages_text, all_seqs};
use chunked_map_cluster_tests::{assert_error, query_json, Client, Cluster};

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

fn fill(client: &mut Client) {
    client
        .batch_execute(
            "SELECT chunked_map.chunked_start('subs', 5);
             SELECT chunked_map.chunked_register('subs', jsonb_build_object('n', n, 'name', 'user ' || n))
             FROM generate_series(1, 23) AS n;
             SELECT chunked_map.chunked_start('audit', 100);
             SELECT chunked_map.chunked_register('audit', jsonb_build_object('event', n))
             FROM generate_series(1, 250) AS n;
             SELECT chunked_map.chunked_start('empty');",
        )
        .expect("fill 0.1.0 maps");
}

#[test]
fn an_upgraded_database_keeps_every_page_and_matches_a_fresh_install() {
    let cluster = Cluster::start();
    cluster
        .connect("postgres")
        .batch_execute("CREATE DATABASE upgraded")
        .unwrap();
    let mut upgraded = cluster.connect("upgraded");
    upgraded
        .batch_execute("CREATE EXTENSION chunked_map VERSION '0.1.0'")
        .unwrap();
    fill(&mut upgraded);
    let maps = ["subs", "audit", "empty"];
    let before: Vec<_> = maps
        .iter()
        .map(|map| all_pages_text(&mut upgraded, map))
        .collect();
    assert_error(
        upgraded.query("SELECT chunked_map.chunked_info('subs')", &[]),
        "42883",
        "chunked_info",
    );

    upgraded
        .batch_execute("ALTER EXTENSION chunked_map UPDATE")
        .unwrap();

    let after: Vec<_> = maps
        .iter()
        .map(|map| all_pages_text(&mut upgraded, map))
        .collect();
    assert_eq!(after, before, "every page byte-identical");

    let mut fresh = cluster.database("fresh");
    assert_eq!(catalog(&mut upgraded), catalog(&mut fresh));

    // the new functions on the old data
    let info = query_json(&mut upgraded, "chunked_map.chunked_info('subs')", &[]);
    assert_eq!(info["next_seq"], 24);
    assert_eq!(info["archived_chunks"], 4);
    assert_eq!(info["current_records"], 3);
    let record = query_json(&mut upgraded, "chunked_map.chunked_get('audit', 150)", &[]);
    assert_eq!(
        record,
        serde_json::json!({"seq": 150, "payload": {"event": 150}})
    );
    for map in maps {
        let report = query_json(&mut upgraded, "chunked_map.chunked_verify($1)", &[&map]);
        assert_eq!(report["consistent"], true, "{report}");
    }
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
    // the history triggers came with the upgrade
    upgraded.batch_execute("CREATE ROLE intruder; GRANT ALL ON ALL TABLES IN SCHEMA chunked_map TO intruder; GRANT USAGE ON SCHEMA chunked_map TO intruder").unwrap();
    upgraded.batch_execute("SET ROLE intruder").unwrap();
    assert_error(
        upgraded.execute("DELETE FROM chunked_map.archived_chunk", &[]),
        "42501",
        "DELETE on chunked_map.archived_chunk is not allowed",
    );
}
