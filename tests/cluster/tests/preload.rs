//! chunked_map in `shared_preload_libraries` (what a Citus cluster needs): the rest of the
//! database sees nothing of it. Errors keep every field PostgreSQL gave them (context, position,
//! internal query) and never get a Rust backtrace, also when the server runs with
//! `RUST_BACKTRACE=1`; immutable functions are evaluated as often as without it; a call with a
//! NULL map that PostgreSQL never executes raises nothing; the planner is not hooked at all
//! where Citus is not loaded.
//!
//! The NULL-map guard that Citus needs is installed here with `null_map_guard_everywhere`, so
//! that what it changes (nothing but the one query shape Citus delegates) is tested without
//! Citus.

use std::sync::{Arc, Mutex};

use chunked_map_cluster_tests::{assert_error, Client, Cluster, NoTls, SUPERUSER};

/// What a statement did, every field a client can see: its rows as text, or its error (SQLSTATE,
/// message, detail, hint, context, position, internal query and position, the names of
/// constraints and tables, where in the source it was raised), and the notices it sent.
fn outcome(client: &mut Client, notices: &Mutex<Vec<String>>, sql: &str) -> String {
    notices.lock().unwrap().clear();
    let result = match client.simple_query(sql) {
        Ok(messages) => messages
            .iter()
            .filter_map(|message| match message {
                postgres::SimpleQueryMessage::Row(row) => Some(
                    (0..row.len())
                        .map(|i| row.get(i).unwrap_or("NULL").to_owned())
                        .collect::<Vec<_>>()
                        .join("|"),
                ),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Err(error) => match error.as_db_error() {
            Some(db) => format!(
                "ERROR {} {:?} detail={:?} hint={:?} context={:?} position={:?} schema={:?} \
                 table={:?} column={:?} constraint={:?} at={:?}:{:?} {:?}",
                db.code().code(),
                db.message(),
                db.detail(),
                db.hint(),
                db.where_(),
                db.position(),
                db.schema(),
                db.table(),
                db.column(),
                db.constraint(),
                db.file(),
                db.line(),
                db.routine()
            ),
            None => format!("not a server error: {error}"),
        },
    };
    let notices = notices.lock().unwrap().join("\n");
    format!("{sql}\n=> {result}\n{notices}")
}

/// A connection whose notices are collected, to a database with the extension.
fn connected(cluster: &Cluster, database: &str) -> (Client, Arc<Mutex<Vec<String>>>) {
    drop(cluster.database(database));
    let notices = Arc::new(Mutex::new(Vec::new()));
    let collected = Arc::clone(&notices);
    let client = cluster
        .config(database, SUPERUSER)
        .notice_callback(move |notice| {
            collected.lock().unwrap().push(format!(
                "{} {} {:?} {:?}",
                notice.severity(),
                notice.message(),
                notice.detail(),
                notice.where_()
            ))
        })
        .connect(NoTls)
        .unwrap();
    (client, notices)
}

/// Statements that reach errors raised while planning, in the executor, in PL/pgSQL, in
/// PostgreSQL's parser, and inside the extension's own functions (raised by PostgreSQL there:
/// a read-only transaction, a lock timeout, a serialization failure), and an immutable function
/// with a notice inside an SQL function the planner inlines.
const STATEMENTS: &[&str] = &[
    "CREATE FUNCTION dom_check(int) RETURNS int LANGUAGE plpgsql IMMUTABLE AS $$BEGIN RETURN 10/$1; END$$",
    "SELECT dom_check(0)",
    "CREATE FUNCTION noisy(int) RETURNS int LANGUAGE plpgsql IMMUTABLE AS $$BEGIN RAISE NOTICE 'noisy(%)', $1; RETURN $1; END$$",
    "CREATE FUNCTION wrap(int) RETURNS int LANGUAGE sql AS 'SELECT $1'",
    "SELECT wrap(noisy(1))",
    "SELECT noisy(2) + 1",
    "SELECT 1 +",
    "DO $$BEGIN EXECUTE 'SELECT 1 +'; END$$",
    "SELECT * FROM no_such_table",
    "CREATE DOMAIN positive AS int CHECK (VALUE > 0)",
    "SELECT (-1)::positive",
    "CREATE TABLE t (a int PRIMARY KEY, b int CHECK (b < 10))",
    "INSERT INTO t VALUES (1, 1), (1, 2)",
    "INSERT INTO t VALUES (2, 20)",
    "SELECT chunked_map.chunked_info(NULL), 1",
    "SELECT chunked_map.chunked_info(NULL) WHERE false",
    "SELECT chunked_map.chunked_start('m', 2)",
    "SELECT chunked_map.chunked_page('m', 'bad')",
    "BEGIN READ ONLY; SELECT chunked_map.chunked_register('m', '{}')",
    "ROLLBACK",
    "BEGIN; SELECT chunked_map.chunked_info(NULL) LIMIT 0; COMMIT",
];

/// Both servers have the same errors and notices for [`STATEMENTS`], and for errors PostgreSQL
/// raises inside the extension's functions while another session holds what they need.
#[test]
fn errors_and_notices_are_the_same_with_the_library_preloaded_and_rust_backtrace_set() {
    let plain = Cluster::start();
    let preloaded = Cluster::start_with_environment(
        &[
            "shared_preload_libraries='chunked_map'",
            "chunked_map.null_map_guard_everywhere=on",
        ],
        &[("RUST_BACKTRACE", "1")],
    );
    assert_eq!(
        server_environment(&preloaded, "RUST_BACKTRACE"),
        Some("1".into())
    );
    let outcomes = |cluster: &Cluster| -> Vec<String> {
        let (mut client, notices) = connected(cluster, "d");
        let mut seen: Vec<String> = STATEMENTS
            .iter()
            .map(|sql| outcome(&mut client, &notices, sql))
            .collect();
        // PostgreSQL's own errors inside the functions: a lock the caller's lock_timeout gives
        // up on, and a serialization failure under REPEATABLE READ
        let mut holder = cluster.connect("d");
        holder
            .batch_execute("BEGIN; LOCK TABLE chunked_map.map_state IN ACCESS EXCLUSIVE MODE")
            .unwrap();
        seen.push(outcome(
            &mut client,
            &notices,
            "SET lock_timeout = '50ms'; SELECT chunked_map.chunked_register('m', '{}')",
        ));
        holder.batch_execute("ROLLBACK").unwrap();
        seen.push(outcome(
            &mut client,
            &notices,
            "RESET lock_timeout; BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT chunked_map.chunked_info('m') ->> 'next_seq'",
        ));
        holder
            .batch_execute("SELECT chunked_map.chunked_register('m', '{}')")
            .unwrap();
        seen.push(outcome(
            &mut client,
            &notices,
            "SELECT chunked_map.chunked_register('m', '{}')",
        ));
        seen.push(outcome(&mut client, &notices, "ROLLBACK"));
        seen
    };
    let (without, with) = (outcomes(&plain), outcomes(&preloaded));
    for (without, with) in without.iter().zip(&with) {
        assert_eq!(without, with);
    }
    assert_eq!(without.len(), with.len());
    // and the statements did what they are there for
    let all = without.join("\n");
    for expected in [
        "context=Some(\"PL/pgSQL function dom_check(integer) line 1 at RETURN\")",
        "NOTICE noisy(1)",
        "ERROR 25006 \"cannot execute chunked_register() in a read-only transaction\"",
        "ERROR 55P03 \"canceling statement due to lock timeout\"",
        "ERROR 40001 \"could not serialize access due to concurrent update\"",
        "ERROR 22004 \"argument \\\"map\\\" must not be null\"",
    ] {
        assert!(all.contains(expected), "{expected} not in:\n{all}");
    }
    assert_eq!(all.matches("NOTICE noisy(1)").count(), 1, "{all}");
    assert!(!all.contains("backtrace"), "{all}");
}

/// Without Citus the planner is not hooked: the answers are PostgreSQL's own, also for calls
/// PostgreSQL never makes (no rows asked for, only a plan, a cursor never fetched).
#[test]
fn preloaded_without_citus_nothing_hooks_the_planner() {
    let cluster = Cluster::start_with(&["shared_preload_libraries='chunked_map'"]);
    let (mut client, _notices) = connected(&cluster, "d");
    assert_error(
        client.simple_query("SHOW chunked_map.null_map_guard"),
        "42704",
        "unrecognized configuration parameter",
    );
    let none: Vec<_> = client
        .query("SELECT chunked_map.chunked_info(NULL) LIMIT 0", &[])
        .unwrap();
    assert!(none.is_empty());
    client
        .batch_execute(
            "EXPLAIN SELECT chunked_map.chunked_info(NULL);
             BEGIN; DECLARE c CURSOR FOR SELECT chunked_map.chunked_page(NULL); CLOSE c; COMMIT;
             SELECT * FROM chunked_map.chunked_read(NULL) LIMIT 0;",
        )
        .unwrap();
    // executed, the call raises its own error
    assert_error(
        client.query("SELECT chunked_map.chunked_info(NULL)", &[]),
        "22004",
        "argument \"map\" must not be null",
    );
}

/// Where the guard is installed, it answers 22004 for the shape Citus delegates (one call of
/// the extension's, alone in a SELECT without WHERE, outside a transaction block), even where
/// PostgreSQL would not execute it, because Citus would hash the NULL while planning; for
/// every other shape it raises nothing.
#[test]
fn the_null_map_guard_answers_only_the_query_shape_citus_delegates() {
    let cluster = Cluster::start_with(&[
        "shared_preload_libraries='chunked_map'",
        "chunked_map.null_map_guard_everywhere=on",
    ]);
    let (mut client, _notices) = connected(&cluster, "d");
    let guard: String = client
        .query_one("SHOW chunked_map.null_map_guard", &[])
        .unwrap()
        .get(0);
    assert_eq!(guard, "on");
    client
        .batch_execute(
            "CREATE FUNCTION info(m text) RETURNS jsonb LANGUAGE sql AS 'SELECT chunked_map.chunked_info(m)'",
        )
        .unwrap();
    for sql in [
        "SELECT chunked_map.chunked_info(NULL) LIMIT 0",
        "EXPLAIN SELECT chunked_map.chunked_info(NULL)",
        "SELECT chunked_map.chunked_info(map => NULL)",
        "SELECT * FROM chunked_map.chunked_read(NULL) LIMIT 0",
        "SELECT info(NULL)",
        "SELECT chunked_map.chunked_info(CASE WHEN 1 = 1 THEN NULL END)",
    ] {
        assert_error(
            client.simple_query(sql),
            "22004",
            "argument \"map\" must not be null",
        );
    }
    // a bound parameter: substituted in a custom plan, where Citus would see it
    assert_error(
        client.query("SELECT chunked_map.chunked_info($1)", &[&None::<&str>]),
        "22004",
        "argument \"map\" must not be null",
    );
    // a function of the same schema's name that is not the extension's: nothing
    let (mut other, _notices) = connected(&cluster, "other");
    other
        .batch_execute(
            "DROP EXTENSION chunked_map;
             CREATE SCHEMA IF NOT EXISTS chunked_map;
             CREATE FUNCTION chunked_map.lookup(m text) RETURNS text LANGUAGE plpgsql AS 'BEGIN RETURN m; END';",
        )
        .unwrap();
    let looked: Option<String> = other
        .query_one("SELECT chunked_map.lookup(NULL)", &[])
        .unwrap()
        .get(0);
    assert_eq!(looked, None);
    for sql in [
        "SELECT chunked_map.chunked_info(NULL) WHERE false",
        "SELECT 1 FROM (SELECT chunked_map.chunked_info(NULL)) AS s LIMIT 0",
        "SELECT chunked_map.chunked_info(NULL), 1 LIMIT 0",
        "BEGIN; SELECT chunked_map.chunked_info(NULL) LIMIT 0; COMMIT",
        "SELECT CASE WHEN false THEN chunked_map.chunked_info(NULL) END",
    ] {
        client
            .simple_query(sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
}

/// The value of `name` in the environment of `cluster`'s postmaster.
fn server_environment(cluster: &Cluster, name: &str) -> Option<String> {
    let pid_file = cluster.socket_dir().join("data/postmaster.pid");
    let pid = std::fs::read_to_string(pid_file).ok()?;
    let pid = pid.lines().next()?.trim().to_owned();
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    environ
        .split(|byte| *byte == 0)
        .filter_map(|entry| std::str::from_utf8(entry).ok())
        .find_map(|entry| entry.strip_prefix(&format!("{name}=")).map(str::to_owned))
}
