//! The contract (docs/contract.md), Data safety: history cannot be rewritten by direct DML, roles can do exactly what
//! they were granted, and search_path tricks change nothing.

use chunked_map_cluster_tests::page::{all_pages_text, all_seqs, without_time};
use chunked_map_cluster_tests::{assert_error, query_json, repo_root, Client, Cluster};

fn fill(client: &mut Client) {
    client
        .batch_execute(
            "SELECT chunked_map.chunked_start('audit', 3);
             SELECT chunked_map.chunked_register('audit', jsonb_build_object('event', n))
             FROM generate_series(1, 8) AS n;
             SELECT chunked_map.chunked_start('other', 3);
             SELECT chunked_map.chunked_register('other', '{}');",
        )
        .expect("fill");
}

fn recipe(name: &str) -> String {
    std::fs::read_to_string(repo_root().join("sql/grants").join(name)).expect("recipe")
}

#[test]
fn no_role_but_the_owner_can_change_or_remove_history_even_with_table_privileges() {
    let cluster = Cluster::start();
    let mut owner = cluster.database("immutable");
    fill(&mut owner);
    let before = all_pages_text(&mut owner, "audit");
    owner
        .batch_execute(
            "CREATE ROLE intruder LOGIN;
             GRANT USAGE ON SCHEMA chunked_map TO intruder;
             GRANT ALL ON ALL TABLES IN SCHEMA chunked_map TO intruder;",
        )
        .unwrap();
    let mut intruder = cluster.connect_as("immutable", "intruder");

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
            "TRUNCATE chunked_map.map_state CASCADE",
            "TRUNCATE on chunked_map.map_state",
        ),
        (
            "UPDATE chunked_map.map_state SET newest_archived_token = NULL",
            "UPDATE on chunked_map.map_state",
        ),
        (
            "UPDATE chunked_map.current_record SET payload = '{}'",
            "UPDATE on chunked_map.current_record",
        ),
        (
            "DELETE FROM chunked_map.current_record",
            "DELETE on chunked_map.current_record",
        ),
        (
            "TRUNCATE chunked_map.current_record",
            "TRUNCATE on chunked_map.current_record",
        ),
        // also when the statement would touch no row
        (
            "DELETE FROM chunked_map.archived_chunk WHERE false",
            "DELETE on chunked_map.archived_chunk",
        ),
        // nor can history be forged: a record the next rollover would archive, a chunk, a map
        (
            "INSERT INTO chunked_map.current_record VALUES ('audit', 1000, '{\"forged\": true}')",
            "INSERT on chunked_map.current_record",
        ),
        (
            "INSERT INTO chunked_map.archived_chunk (map, first_seq, chunk_size, payloads)
             VALUES ('audit', 1000, 1, ARRAY['{}'::jsonb])",
            "INSERT on chunked_map.archived_chunk",
        ),
        (
            "INSERT INTO chunked_map.map_state (map, chunk_size, current_first_seq, current_chunk_size, next_seq)
             VALUES ('forged', 1, 1, 1, 1)",
            "INSERT on chunked_map.map_state",
        ),
        (
            "INSERT INTO chunked_map.current_record SELECT 'audit', 1000, '{}' WHERE false",
            "INSERT on chunked_map.current_record",
        ),
    ];
    for (sql, message) in attempts {
        let error = assert_error(intruder.batch_execute(sql), "42501", message);
        assert!(error
            .message()
            .ends_with("is not allowed: chunked_map history is append-only"));
    }
    // nor can anything be attached to the storage tables: a trigger would see (or change) every
    // write, a foreign key would block or cascade into a map's drop
    let database: String = owner
        .query_one("SELECT current_database()::text", &[])
        .unwrap()
        .get(0);
    owner
        .batch_execute(&format!(
            "GRANT CREATE ON SCHEMA public TO intruder;
             GRANT CREATE ON DATABASE \"{database}\" TO intruder;
             ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT ALL ON TABLES TO intruder;"
        ))
        .unwrap();
    intruder
        .batch_execute(
            "CREATE FUNCTION public.spy() RETURNS trigger LANGUAGE plpgsql AS
                 'BEGIN RAISE NOTICE ''seen''; RETURN NEW; END';
             CREATE TABLE public.keeps (map text);",
        )
        .unwrap();
    let attachments = [
        (
            "CREATE TRIGGER spy BEFORE INSERT ON chunked_map.current_record
             FOR EACH ROW EXECUTE FUNCTION public.spy()",
            "CREATE TRIGGER on chunked_map.current_record",
        ),
        (
            "CREATE TRIGGER spy AFTER UPDATE ON chunked_map.map_state
             FOR EACH STATEMENT EXECUTE FUNCTION public.spy()",
            "CREATE TRIGGER on chunked_map.map_state",
        ),
        (
            "CREATE TABLE public.holds (map text REFERENCES chunked_map.map_state (map) ON DELETE RESTRICT)",
            "a foreign key to chunked_map.map_state",
        ),
        (
            "ALTER TABLE public.keeps ADD FOREIGN KEY (map) REFERENCES chunked_map.map_state (map)",
            "a foreign key to chunked_map.map_state",
        ),
        // a schema's own tables come with CREATE SCHEMA's tag
        (
            "CREATE SCHEMA evil CREATE TABLE fk (map text REFERENCES chunked_map.map_state (map))",
            "a foreign key to chunked_map.map_state",
        ),
    ];
    for (sql, message) in attachments {
        let error = assert_error(intruder.batch_execute(sql), "42501", message);
        assert!(
            error
                .message()
                .ends_with("is not allowed: chunked_map history is append-only"),
            "{}",
            error.message()
        );
    }
    let attached: i64 = owner
        .query_one(
            "SELECT count(*) FROM pg_trigger
             WHERE tgrelid IN ('chunked_map.map_state'::regclass, 'chunked_map.current_record'::regclass,
                               'chunked_map.archived_chunk'::regclass)
               AND tgname = 'spy' OR tgconstrrelid = 'chunked_map.map_state'::regclass",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(attached, 0, "nothing attached");
    // nor can a role allowed to write every table (pg_write_all_data) replace the installation's
    // key, nor one that may read every table change anything
    owner
        .batch_execute(
            "CREATE ROLE writes_all; GRANT pg_write_all_data, pg_read_all_data TO writes_all",
        )
        .unwrap();
    owner.batch_execute("SET ROLE writes_all").unwrap();
    for (sql, message) in [
        (
            "UPDATE chunked_map.installation SET secret = '\\x00'",
            "UPDATE on chunked_map.installation",
        ),
        (
            "INSERT INTO chunked_map.installation VALUES ('\\x00')",
            "INSERT on chunked_map.installation",
        ),
        (
            "DELETE FROM chunked_map.map_state",
            "DELETE on chunked_map.map_state",
        ),
    ] {
        assert_error(owner.batch_execute(sql), "42501", message);
    }
    owner.batch_execute("RESET ROLE").unwrap();
    // dropping a map is the owner's function, not granted to others by default
    assert_error(
        intruder.query("SELECT chunked_map.chunked_drop('audit')", &[]),
        "42501",
        "permission denied for function chunked_drop",
    );

    assert_eq!(
        all_pages_text(&mut owner, "audit"),
        before,
        "history unchanged and reachable"
    );
    let report = query_json(&mut owner, "chunked_map.chunked_verify('audit')", &[]);
    assert_eq!(report["consistent"], true);

    // the owner removes a whole map through the documented function
    let dropped: bool = owner
        .query_one("SELECT chunked_map.chunked_drop('audit')", &[])
        .unwrap()
        .get(0);
    assert!(dropped);
    assert_error(
        owner.query("SELECT chunked_map.chunked_page('audit')", &[]),
        "42704",
        "\"audit\"",
    );
    let again: bool = owner
        .query_one("SELECT chunked_map.chunked_drop('audit')", &[])
        .unwrap()
        .get(0);
    assert!(!again);
    assert_eq!(all_seqs(&mut owner, "other"), vec![1]);
    let rows: i64 = owner
        .query_one(
            "SELECT (SELECT count(*) FROM chunked_map.archived_chunk WHERE map = 'audit')
                  + (SELECT count(*) FROM chunked_map.current_record WHERE map = 'audit')",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(rows, 0);
}

#[test]
fn a_role_without_grants_can_neither_read_nor_append() {
    let cluster = Cluster::start();
    let mut owner = cluster.database("no_grants");
    fill(&mut owner);
    owner.batch_execute("CREATE ROLE stranger LOGIN").unwrap();
    let mut stranger = cluster.connect_as("no_grants", "stranger");
    let calls = [
        "SELECT chunked_map.chunked_page('audit')",
        "SELECT chunked_map.chunked_register('audit', '{}')",
        "SELECT chunked_map.chunked_start('mine')",
        "SELECT * FROM chunked_map.archived_chunk",
    ];
    for sql in calls {
        assert_error(
            stranger.query(sql, &[]),
            "42501",
            "permission denied for schema chunked_map",
        );
    }
    // schema usage alone is not enough either
    owner
        .batch_execute("GRANT USAGE ON SCHEMA chunked_map TO stranger")
        .unwrap();
    assert_error(
        stranger.query("SELECT chunked_map.chunked_page('audit')", &[]),
        "42501",
        "permission denied for function chunked_page",
    );
    assert_error(
        stranger.query("SELECT chunked_map.chunked_register('audit', '{}')", &[]),
        "42501",
        "permission denied for function chunked_register",
    );
    assert_error(
        stranger.query("SELECT * FROM chunked_map.current_record", &[]),
        "42501",
        "permission denied for table current_record",
    );
    assert_eq!(
        all_seqs(&mut owner, "audit"),
        (1..=8).rev().collect::<Vec<_>>()
    );
}

#[test]
fn the_reader_recipe_reads_and_does_nothing_else() {
    let cluster = Cluster::start();
    let mut owner = cluster.database("reader");
    fill(&mut owner);
    owner.batch_execute(&recipe("reader.sql")).unwrap();
    owner
        .batch_execute("CREATE ROLE app_reader LOGIN IN ROLE chunked_map_reader")
        .unwrap();
    let mut reader = cluster.connect_as("reader", "app_reader");

    assert_eq!(
        all_pages_text(&mut reader, "audit"),
        all_pages_text(&mut owner, "audit")
    );
    let rows: i64 = reader
        .query_one(
            "SELECT count(*) FROM chunked_map.chunked_records('audit', '00000000000000000001')",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(rows, 3);
    let record = query_json(&mut reader, "chunked_map.chunked_get('audit', 2)", &[]);
    assert_eq!(record["payload"]["event"], 2);
    let info = query_json(&mut reader, "chunked_map.chunked_info('audit')", &[]);
    assert_eq!(info["total_records"], 8);
    let forward: i64 = reader
        .query_one(
            "SELECT count(*) FROM chunked_map.chunked_read('audit', 2, 100)",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(forward, 6);

    let denied = [
        (
            "SELECT chunked_map.chunked_register('audit', '{}')",
            "chunked_register",
        ),
        (
            "SELECT chunked_map.chunked_register('audit', '{}', 8)",
            "chunked_register",
        ),
        (
            "SELECT chunked_map.chunked_register_many('audit', ARRAY['{}']::jsonb[])",
            "chunked_register_many",
        ),
        ("SELECT chunked_map.chunked_start('mine')", "chunked_start"),
        (
            "SELECT chunked_map.chunked_set_chunk_size('audit', 5)",
            "chunked_set_chunk_size",
        ),
        ("SELECT chunked_map.chunked_drop('audit')", "chunked_drop"),
        (
            "SELECT chunked_map.chunked_set_notify('audit', true)",
            "chunked_set_notify",
        ),
    ];
    for (sql, function) in denied {
        assert_error(
            reader.query(sql, &[]),
            "42501",
            &format!("permission denied for function {function}"),
        );
    }
    assert_error(
        reader.query("SELECT * FROM chunked_map.archived_chunk", &[]),
        "42501",
        "permission denied for table archived_chunk",
    );
    assert_eq!(
        all_seqs(&mut owner, "audit"),
        (1..=8).rev().collect::<Vec<_>>()
    );
}

#[test]
fn the_writer_recipe_starts_and_appends_and_does_nothing_else() {
    let cluster = Cluster::start();
    let mut owner = cluster.database("writer");
    fill(&mut owner);
    owner.batch_execute(&recipe("writer.sql")).unwrap();
    owner
        .batch_execute("CREATE ROLE app_writer LOGIN IN ROLE chunked_map_writer")
        .unwrap();
    let mut writer = cluster.connect_as("writer", "app_writer");

    let started: bool = writer
        .query_one("SELECT chunked_map.chunked_start('mine', 2)", &[])
        .unwrap()
        .get(0);
    assert!(started);
    let seq: i64 = writer
        .query_one("SELECT chunked_map.chunked_register('audit', '{}')", &[])
        .unwrap()
        .get(0);
    assert_eq!(seq, 9);
    let seq: i64 = writer
        .query_one("SELECT chunked_map.chunked_register('audit', '{}', 9)", &[])
        .unwrap()
        .get(0);
    assert_eq!(seq, 10);
    let seqs = writer
        .query(
            "SELECT chunked_map.chunked_register_many('mine', ARRAY['{}', '{}', '{}']::jsonb[])",
            &[],
        )
        .unwrap();
    assert_eq!(seqs.len(), 3);

    let denied = [
        ("SELECT chunked_map.chunked_page('audit')", "chunked_page"),
        (
            "SELECT * FROM chunked_map.chunked_records('audit')",
            "chunked_records",
        ),
        ("SELECT chunked_map.chunked_get('audit', 1)", "chunked_get"),
        ("SELECT chunked_map.chunked_info('audit')", "chunked_info"),
        (
            "SELECT chunked_map.chunked_set_chunk_size('audit', 5)",
            "chunked_set_chunk_size",
        ),
        ("SELECT chunked_map.chunked_drop('audit')", "chunked_drop"),
    ];
    for (sql, function) in denied {
        assert_error(
            writer.query(sql, &[]),
            "42501",
            &format!("permission denied for function {function}"),
        );
    }
    assert_error(
        writer.batch_execute("INSERT INTO chunked_map.current_record VALUES ('audit', 11, '{}')"),
        "42501",
        "permission denied for table current_record",
    );
    assert_eq!(
        all_seqs(&mut owner, "audit"),
        (1..=10).rev().collect::<Vec<_>>()
    );
    assert_eq!(all_seqs(&mut owner, "mine"), vec![3, 2, 1]);
}

/// What [`HOSTILE_SCHEMA`]'s look-alikes recorded of their calls: nothing, or the test fails.
fn assert_nothing_hostile_was_called(owner: &mut Client) {
    let calls: Vec<String> = owner
        .query("SELECT what FROM evil.calls", &[])
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert!(calls.is_empty(), "called in the hostile schema: {calls:?}");
}

/// A schema full of look-alikes of what the extension's functions use; each records its call.
const HOSTILE_SCHEMA: &str = r#"
CREATE SCHEMA evil;
CREATE TABLE evil.calls (what text);
GRANT ALL ON SCHEMA evil TO PUBLIC;
GRANT ALL ON evil.calls TO PUBLIC;
CREATE TABLE evil.map_state (map text, chunk_size int, current_first_seq bigint,
                             current_chunk_size int, newest_archived_token text, archived_chunks bigint);
CREATE TABLE evil.current_record (map text, seq bigint, payload jsonb);
CREATE TABLE evil.archived_chunk (map text, first_seq bigint, chunk_size int, prev_token text,
                                  layout smallint, payloads jsonb[]);
INSERT INTO evil.map_state VALUES ('audit', 1, 1000, 1, '00000000000000000999', 0);
CREATE FUNCTION evil.jsonb_build_object(text, text, text, text, text, jsonb, text, text) RETURNS jsonb
    LANGUAGE sql AS $$ INSERT INTO evil.calls VALUES ('jsonb_build_object/8'); SELECT '{"evil": true}'::jsonb $$;
CREATE FUNCTION evil.jsonb_build_object(text, bigint, text, jsonb) RETURNS jsonb
    LANGUAGE sql AS $$ INSERT INTO evil.calls VALUES ('jsonb_build_object/4'); SELECT '{"evil": true}'::jsonb $$;
CREATE FUNCTION evil.jsonb_build_object(text, text, text, text, text, text, text, text) RETURNS jsonb
    LANGUAGE sql AS $$ INSERT INTO evil.calls VALUES ('jsonb_build_object/8t'); SELECT '{"evil": true}'::jsonb $$;
CREATE FUNCTION evil.jsonb_array_elements(jsonb) RETURNS SETOF jsonb
    LANGUAGE sql AS $$ INSERT INTO evil.calls VALUES ('jsonb_array_elements'); SELECT '1'::jsonb $$;
CREATE FUNCTION evil.to_jsonb(bigint) RETURNS jsonb
    LANGUAGE sql AS $$ INSERT INTO evil.calls VALUES ('to_jsonb'); SELECT '0'::jsonb $$;
CREATE FUNCTION evil.text_eq(text, text) RETURNS boolean
    LANGUAGE sql AS $$ INSERT INTO evil.calls VALUES ('='); SELECT true $$;
CREATE OPERATOR evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.text_eq);
CREATE FUNCTION evil.int8_add(bigint, integer) RETURNS bigint
    LANGUAGE sql AS $$ INSERT INTO evil.calls VALUES ('+'); SELECT 0::bigint $$;
CREATE OPERATOR evil.+ (LEFTARG = bigint, RIGHTARG = integer, FUNCTION = evil.int8_add);
CREATE FUNCTION evil.int8_max_sfunc(bigint, bigint) RETURNS bigint
    LANGUAGE sql AS $$ INSERT INTO evil.calls VALUES ('max'); SELECT 0::bigint $$;
CREATE AGGREGATE evil.max(bigint) (SFUNC = evil.int8_max_sfunc, STYPE = bigint);
CREATE FUNCTION evil.jsonb_agg_sfunc(jsonb, jsonb) RETURNS jsonb
    LANGUAGE sql AS $$ INSERT INTO evil.calls VALUES ('jsonb_agg'); SELECT '[]'::jsonb $$;
CREATE AGGREGATE evil.jsonb_agg(jsonb) (SFUNC = evil.jsonb_agg_sfunc, STYPE = jsonb);
CREATE FUNCTION evil.unnest(jsonb[]) RETURNS SETOF jsonb
    LANGUAGE sql AS $$ INSERT INTO evil.calls VALUES ('unnest'); SELECT '1'::jsonb $$;
CREATE FUNCTION evil.pg_current_xact_id() RETURNS xid8
    LANGUAGE sql AS $$ INSERT INTO evil.calls VALUES ('pg_current_xact_id'); SELECT '1'::xid8 $$;
CREATE FUNCTION evil.clock_timestamp() RETURNS timestamptz
    LANGUAGE sql AS $$ INSERT INTO evil.calls VALUES ('clock_timestamp'); SELECT 'epoch'::timestamptz $$;
CREATE FUNCTION evil.now() RETURNS timestamptz
    LANGUAGE sql AS $$ INSERT INTO evil.calls VALUES ('now'); SELECT 'epoch'::timestamptz $$;
CREATE FUNCTION evil.gen_random_uuid() RETURNS uuid
    LANGUAGE sql AS $$ INSERT INTO evil.calls VALUES ('gen_random_uuid'); SELECT '00000000-0000-0000-0000-000000000000'::uuid $$;
CREATE FUNCTION evil.replace(text, text, text) RETURNS text
    LANGUAGE sql AS $$ INSERT INTO evil.calls VALUES ('replace'); SELECT 'evil'::text $$;
CREATE FUNCTION evil.hashtextextended(text, bigint) RETURNS bigint
    LANGUAGE sql AS $$ INSERT INTO evil.calls VALUES ('hashtextextended'); SELECT 0::bigint $$;
"#;

/// The SQL functions pin no `search_path` of their own (0.4.1): the statements they run set
/// `pg_catalog, pg_temp` for themselves. Every kind of write and the feed, with rollovers, a
/// followed map, notifications, trims and retention, under a caller's path that puts the
/// look-alikes first: nothing of them is called, and the results are the extension's.
#[test]
fn statements_run_on_pg_catalog_whatever_search_path_the_caller_has() {
    let cluster = Cluster::start();
    let mut owner = cluster.database("every_function");
    owner.batch_execute(HOSTILE_SCHEMA).unwrap();
    for search_path in ["evil, pg_catalog, public", "evil"] {
        let mut client = cluster.connect_as("every_function", "postgres");
        client
            .batch_execute(&format!("SET search_path = {search_path}"))
            .unwrap();
        client
            .batch_execute(
                "SELECT chunked_map.chunked_subscribe('projection', 'hostile');
                 SELECT chunked_map.chunked_start('hostile-1', 2);
                 SELECT chunked_map.chunked_set_notify('hostile-1', true);
                 BEGIN;
                 SELECT chunked_map.chunked_register('hostile-1', jsonb_build_object('n', n))
                 FROM generate_series(1, 7) AS n;
                 SELECT chunked_map.chunked_register('hostile-1', '{\"n\": 8}', 7);
                 COMMIT;
                 SELECT chunked_map.chunked_register_many('hostile-1', ARRAY['{}', '{}']::jsonb[]);
                 SELECT chunked_map.chunked_set_chunk_size('hostile-1', 3);",
            )
            .unwrap();
        let polled: i64 = client
            .query_one(
                "SELECT count(*) FROM chunked_map.chunked_poll('projection', 100)",
                &[],
            )
            .unwrap()
            .get(0);
        assert_eq!(polled, 10, "{search_path}");
        let trimmed: i64 = client
            .query_one("SELECT chunked_map.chunked_trim('hostile-1', 5)", &[])
            .unwrap()
            .get(0);
        assert_eq!(trimmed, 4, "{search_path}");
        client
            .batch_execute(
                "SELECT chunked_map.chunked_set_retention('hostile-1', 2);
                 SELECT chunked_map.chunked_apply_retention('hostile-1');
                 SELECT chunked_map.chunked_apply_retention();",
            )
            .unwrap();
        let report = query_json(&mut client, "chunked_map.chunked_verify('hostile-1')", &[]);
        assert_eq!(report["consistent"], true, "{search_path}: {report}");
        let info = query_json(&mut client, "chunked_map.chunked_info('hostile-1')", &[]);
        assert_eq!(info["next_seq"], 11, "{search_path}: {info}");
        client
            .batch_execute(
                "SELECT chunked_map.chunked_drop('hostile-1');
                 SELECT chunked_map.chunked_unsubscribe('projection');",
            )
            .unwrap();
        // the caller's own search_path is what the caller finds after the calls
        let path: String = client.query_one("SHOW search_path", &[]).unwrap().get(0);
        assert_eq!(path, search_path);
    }
    assert_nothing_hostile_was_called(&mut owner);
}

#[test]
fn a_hostile_search_path_changes_no_result_and_nothing_in_it_is_called() {
    let cluster = Cluster::start();
    let mut owner = cluster.database("search_path");
    fill(&mut owner);
    let expected_pages = all_pages_text(&mut owner, "audit");
    owner.batch_execute(HOSTILE_SCHEMA).unwrap();
    owner.batch_execute(&recipe("reader.sql")).unwrap();
    owner.batch_execute(&recipe("writer.sql")).unwrap();
    owner
        .batch_execute("CREATE ROLE app LOGIN IN ROLE chunked_map_reader, chunked_map_writer")
        .unwrap();

    for (user, search_path) in [
        ("postgres", "evil, pg_catalog, public"),
        ("postgres", "evil"),
        ("app", "evil, pg_catalog, chunked_map"),
    ] {
        let mut client = cluster.connect_as("search_path", user);
        client
            .batch_execute(&format!("SET search_path = {search_path}"))
            .unwrap();
        // temporary look-alikes too
        client
            .batch_execute(
                "CREATE TEMP TABLE map_state (map text);
                 CREATE TEMP TABLE current_record (map text);
                 CREATE TEMP TABLE archived_chunk (map text);",
            )
            .unwrap();
        assert_eq!(
            all_pages_text(&mut client, "audit"),
            expected_pages,
            "{user}: {search_path}"
        );
        let seq: i64 = client
            .query_one(
                "SELECT chunked_map.chunked_register('other', '{\"n\": 1}')",
                &[],
            )
            .unwrap()
            .get(0);
        let many = client
            .query("SELECT chunked_map.chunked_register_many('other', ARRAY['{}', '{}', '{}']::jsonb[])", &[])
            .unwrap();
        assert_eq!(many.len(), 3);
        let info = query_json(&mut client, "chunked_map.chunked_info('other')", &[]);
        assert_eq!(info["next_seq"], seq + 4);
        let record = query_json(&mut client, "chunked_map.chunked_get('audit', 2)", &[]);
        assert_eq!(
            without_time(record),
            serde_json::json!({"seq": 2, "payload": {"event": 2}, "id": null})
        );
        let rows: i64 = client
            .query_one(
                "SELECT count(*) FROM chunked_map.chunked_records('audit', '00000000000000000004')",
                &[],
            )
            .unwrap()
            .get(0);
        assert_eq!(rows, 3);
        assert_error(
            client.query(
                "SELECT chunked_map.chunked_page('audit', '00000000000000000999')",
                &[],
            ),
            "42704",
            "names no archived chunk",
        );
    }

    assert_nothing_hostile_was_called(&mut owner);
    let report = query_json(&mut owner, "chunked_map.chunked_verify('other')", &[]);
    assert_eq!(report["consistent"], true, "{report}");
    let evil_rows: i64 = owner
        .query_one(
            "SELECT (SELECT count(*) FROM evil.current_record) + (SELECT count(*) FROM evil.archived_chunk)",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(evil_rows, 0);
}
