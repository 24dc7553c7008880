//! A role that was never granted anything of chunked_map sees nothing of it: the same DDL, DML
//! and dumps of its own objects work as in a database without the extension, with the same
//! results and errors; nothing of the extension (a notification, a lock) tells it which maps
//! exist or lets it block or mislead a caller of the API.

use chunked_map_cluster_tests::{
    announced, assert_error, listen_to, notifications_delivered, pg_bin, Client, Cluster,
};

/// What an application's migrations and queries do as the application's own role.
const ORDINARY_WORK: &[&str] = &[
    "CREATE TABLE t1 (a int PRIMARY KEY, b text)",
    "CREATE TEMP TABLE t2 (a int)",
    "ALTER TABLE t1 ADD COLUMN c int DEFAULT 0",
    "CREATE INDEX t1_b ON t1 (b)",
    "CREATE TABLE t3 (a int REFERENCES t1 (a), d date)",
    "CREATE FUNCTION touch() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN NEW.c := NEW.c + 1; RETURN NEW; END$$",
    "CREATE TRIGGER t1_touch BEFORE INSERT OR UPDATE ON t1 FOR EACH ROW EXECUTE FUNCTION touch()",
    "ALTER TABLE t1 ADD CONSTRAINT b_short CHECK (length(b) < 10)",
    "INSERT INTO t1 (a, b) VALUES (1, 'one'), (2, 'two')",
    "UPDATE t1 SET b = 'three' WHERE a = 2",
    "INSERT INTO t3 VALUES (1, '2026-12-01')",
    "INSERT INTO t3 VALUES (9, '2026-12-01')",
    "INSERT INTO t1 (a, b) VALUES (3, 'far too long a value')",
    "CREATE VIEW v AS SELECT a, b, c FROM t1",
    "SELECT * FROM v ORDER BY a",
    "CREATE TABLE t4 (LIKE t1 INCLUDING ALL)",
    "ALTER TABLE t4 RENAME TO t5",
    "CREATE SEQUENCE s",
    "SELECT nextval('s')",
    "CREATE TEMP TABLE t6 AS SELECT * FROM t1",
    "DELETE FROM t3",
    "DROP TABLE t5",
    "COMMENT ON TABLE t1 IS 'mine'",
    "LISTEN chunked_map",
];

fn outcome(client: &mut Client, sql: &str) -> String {
    match client.simple_query(sql) {
        Ok(messages) => format!(
            "{sql}: ok, {} rows",
            messages
                .iter()
                .filter(|m| matches!(m, postgres::SimpleQueryMessage::Row(_)))
                .count()
        ),
        Err(error) => {
            let db = error.as_db_error().expect("a server error");
            format!(
                "{sql}: {} {} detail={:?} context={:?} position={:?}",
                db.code().code(),
                db.message(),
                db.detail(),
                db.where_(),
                db.position()
            )
        }
    }
}

/// The role's work and a dump of its schema, in a database of their own.
fn ordinary_work_and_dump(cluster: &Cluster, database: &str, with_extension: bool) -> Vec<String> {
    let mut owner = cluster.connect("postgres");
    owner
        .batch_execute(&format!("CREATE DATABASE {database}"))
        .unwrap();
    let mut owner = cluster.connect(database);
    owner
        .batch_execute(
            "CREATE SCHEMA app AUTHORIZATION ordinary; ALTER ROLE ordinary SET search_path = app",
        )
        .unwrap();
    if with_extension {
        owner
            .batch_execute(
                "CREATE EXTENSION chunked_map;
                 SELECT chunked_map.chunked_start('m');
                 SELECT chunked_map.chunked_register('m', '{\"secret\": 1}');",
            )
            .unwrap();
    }
    let mut ordinary = cluster.connect_as(database, "ordinary");
    let mut seen: Vec<String> = ORDINARY_WORK
        .iter()
        .map(|sql| outcome(&mut ordinary, sql))
        .collect();
    let dump = cluster.run(
        &pg_bin("pg_dump"),
        &["-U", "ordinary", "-d", database, "-n", "app", "--no-sync"],
    );
    let dump = String::from_utf8_lossy(&dump.stdout)
        .lines()
        // a random key per dump (pg_dump 15.14 and later)
        .filter(|line| !line.starts_with("\\restrict") && !line.starts_with("\\unrestrict"))
        .map(str::to_owned)
        .collect::<Vec<_>>();
    seen.push(dump.join("\n"));
    seen
}

#[test]
fn a_role_without_grants_runs_the_same_ddl_dml_and_dumps_with_the_extension_installed() {
    let cluster = Cluster::start();
    cluster
        .connect("postgres")
        .batch_execute("CREATE ROLE ordinary LOGIN")
        .unwrap();
    let without = ordinary_work_and_dump(&cluster, "db_without", false);
    let with = ordinary_work_and_dump(&cluster, "db_with", true);
    for (without, with) in without.iter().zip(&with) {
        assert_eq!(without, with);
    }
    assert_eq!(without.len(), with.len());
    // the work did what it is there for: its errors are the role's own, the dump has its tables
    let all = with.join("\n");
    for expected in [
        "23503 insert or update on table \"t3\" violates foreign key constraint",
        "23514 new row for relation \"t1\" violates check constraint \"b_short\"",
        "CREATE TABLE app.t1",
        "CREATE TRIGGER t1_touch",
    ] {
        assert!(all.contains(expected), "{expected} not in:\n{all}");
    }
    // and the extension is there, closed to the role
    let mut ordinary = cluster.connect_as("db_with", "ordinary");
    assert_error(
        ordinary.query("SELECT chunked_map.chunked_info('m')", &[]),
        "42501",
        "permission denied for schema chunked_map",
    );
}

#[test]
fn a_role_without_grants_hears_no_map_and_cannot_reach_a_consumer() {
    let cluster = Cluster::start();
    let mut owner = cluster.database("quiet");
    owner
        .batch_execute(
            "CREATE ROLE nobody LOGIN;
             SELECT chunked_map.chunked_start('victim');
             SELECT chunked_map.chunked_set_notify('victim', true);",
        )
        .unwrap();
    let mut consumer = cluster.connect("quiet");
    let channel = listen_to(&mut consumer, "victim");
    let mut nobody = cluster.connect_as("quiet", "nobody");
    // the channel is not to be had, nor guessed from the name
    assert_error(
        nobody.query("SELECT chunked_map.chunked_info('victim')", &[]),
        "42501",
        "permission denied for schema chunked_map",
    );
    assert!(!channel.contains("victim"));
    nobody
        .batch_execute("LISTEN chunked_map; LISTEN chunked_map_victim; LISTEN victim")
        .unwrap();
    owner
        .execute("SELECT chunked_map.chunked_register('victim', '{}')", &[])
        .unwrap();
    assert_eq!(notifications_delivered(&mut nobody), vec![]);
    // what it sends on the channels it can name reaches no consumer
    nobody
        .batch_execute(
            "SELECT pg_notify('chunked_map', '{\"map\": \"victim\", \"last_seq\": 999999}');
             SELECT pg_notify('chunked_map_victim', '{\"map\": \"victim\", \"last_seq\": 999999}');",
        )
        .unwrap();
    assert_eq!(
        notifications_delivered(&mut consumer),
        vec![announced(&channel, "victim", 1)]
    );
}

#[test]
fn a_role_without_grants_can_neither_hold_nor_read_the_lock_of_a_maps_name() {
    let cluster = Cluster::start();
    let mut owner = cluster.database("locks");
    owner
        .batch_execute("CREATE ROLE nobody LOGIN; SELECT chunked_map.chunked_start('victim')")
        .unwrap();
    let mut nobody = cluster.connect_as("locks", "nobody");
    // every advisory lock a role can take, on every key 0.3.0's name lock used
    nobody
        .batch_execute(
            "SELECT pg_advisory_lock(1667787105, hashtext('victim'));
             SELECT pg_advisory_lock(1667787105, hashtext('fresh'));
             SELECT pg_advisory_lock_shared(hashtext('victim'));
             SELECT pg_advisory_lock(hashtext('victim')::bigint);",
        )
        .unwrap();
    // starts and the owner's drop go on at once
    owner
        .batch_execute(
            "SELECT chunked_map.chunked_start('fresh');
             SELECT chunked_map.chunked_drop('victim');
             SELECT chunked_map.chunked_start('victim');",
        )
        .unwrap();
    // while a start holds a name's lock, what pg_locks shows every role cannot be linked to the
    // name, and the role cannot take or release it
    owner
        .batch_execute("BEGIN; SELECT chunked_map.chunked_start('held')")
        .unwrap();
    // (a start also holds the feed's lock, shared: one per database, no key at all)
    let feed: i64 = nobody
        .query_one(
            "SELECT count(*) FROM pg_locks
             WHERE locktype = 'advisory' AND objsubid = 17230 AND classid = 0 AND objid = 0",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(feed, 1, "the feed's lock, shared by the open start");
    let rows = nobody
        .query(
            "SELECT classid::bigint, objid::bigint, objsubid::integer FROM pg_locks
             WHERE locktype = 'advisory' AND objsubid NOT IN (1, 2, 17230)",
            &[],
        )
        .unwrap();
    assert_eq!(rows.len(), 1, "the name lock of the open start");
    let hashes: Vec<i64> = nobody
        .query(
            "SELECT hashtext(n)::bigint FROM unnest(ARRAY['held', 'victim', 'fresh']) AS n
             UNION ALL SELECT hashtext(n)::bigint & 4294967295 FROM unnest(ARRAY['held', 'victim', 'fresh']) AS n",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    for key in [rows[0].get::<_, i64>(0), rows[0].get::<_, i64>(1)] {
        assert!(
            !hashes.contains(&key),
            "lock key {key} is a hash of the name"
        );
    }
    nobody
        .batch_execute("SELECT pg_advisory_unlock_all()")
        .unwrap();
    let still_held: i64 = nobody
        .query_one(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid NOT IN (1, 2)",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(
        still_held, 2,
        "the name lock and the feed's lock, both still held"
    );
    owner.batch_execute("COMMIT").unwrap();
}

/// Every function of the extension, 0.5's included, is closed to a role that was granted the
/// schema and nothing else, and so are the tables, the ids a map remembers among them: it can
/// neither append with an id nor learn which ids a map remembers.
#[test]
fn a_role_with_the_schema_alone_can_call_no_function_and_read_no_id() {
    let cluster = Cluster::start();
    let mut owner = cluster.database("closed");
    owner
        .batch_execute(
            "CREATE ROLE schema_only LOGIN;
             GRANT USAGE ON SCHEMA chunked_map TO schema_only;
             SELECT chunked_map.chunked_start('m');
             SELECT * FROM chunked_map.chunked_register_once('m', '{}', 'secret-id');",
        )
        .unwrap();
    let callable: Vec<String> = owner
        .query(
            "SELECT p.oid::regprocedure::text FROM pg_proc AS p
             WHERE p.pronamespace = 'chunked_map'::regnamespace
               AND p.prorettype <> 'trigger'::regtype AND p.prorettype <> 'event_trigger'::regtype
               AND has_function_privilege('schema_only', p.oid, 'EXECUTE')
             ORDER BY 1",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(callable, Vec::<String>::new());
    let mut schema_only = cluster.connect_as("closed", "schema_only");
    for (sql, what) in [
        (
            "SELECT * FROM chunked_map.chunked_register_once('m', '{}', 'secret-id')",
            "permission denied for function chunked_register_once",
        ),
        (
            "SELECT chunked_map.chunked_get_by_id('m', 'secret-id')",
            "permission denied for function chunked_get_by_id",
        ),
        (
            "SELECT count(*) FROM chunked_map.record_id",
            "permission denied for table record_id",
        ),
    ] {
        assert_error(schema_only.query(sql, &[]), "42501", what);
    }
}
