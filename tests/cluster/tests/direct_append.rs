//! The contract (docs/contract.md), Appends: the direct append (`chunked_map.direct_append`,
//! on by default: the state row and the record written through the table and index access
//! methods) behaves exactly as the SQL statements do. One random workload, the same in both
//! runs, is run once with the setting off and once with it on, each in a database of its own on
//! one server: every call must answer the same (the value, or the same SQLSTATE and message)
//! and every page of every map must be byte-identical.

use chunked_map_cluster_tests::page::{all_pages_text, mask_times};
use chunked_map_cluster_tests::{assert_error, Client, Cluster};
use postgres::SimpleQueryMessage;

/// A small deterministic generator (xorshift64*), so that both runs make the same calls.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

/// What a statement answered: its rows as text, or its SQLSTATE and message.
fn answer(client: &mut Client, sql: &str) -> String {
    match client.simple_query(sql) {
        Ok(messages) => {
            let rows: Vec<String> = messages
                .iter()
                .filter_map(|message| match message {
                    SimpleQueryMessage::Row(row) => Some(
                        (0..row.len())
                            .map(|i| row.get(i).unwrap_or("NULL").to_owned())
                            .collect::<Vec<_>>()
                            .join("|"),
                    ),
                    _ => None,
                })
                .collect();
            format!("ok {}", mask_times(&rows.join(";")))
        }
        Err(error) => {
            let db = error
                .as_db_error()
                .unwrap_or_else(|| panic!("not a server error: {error}"));
            format!("error {} {}", db.code().code(), db.message())
        }
    }
}

/// A payload of about `size` bytes.
fn payload(random: &mut Random, step: usize) -> String {
    let size = match random.below(100) {
        0..=2 => 200_000 + random.below(250_000),
        3..=10 => 1_000 + random.below(3_000),
        _ => random.below(120),
    } as usize;
    format!(
        r#"{{"step": {step}, "n": {}, "text": "{}"}}"#,
        random.next() % 1_000_000,
        "x".repeat(size)
    )
}

const MAPS: [&str; 5] = ["a", "b", "c", "f-1", "n"];
const ISOLATION: [&str; 3] = ["READ COMMITTED", "REPEATABLE READ", "SERIALIZABLE"];

/// Everything a run answered, and every page of every map at its end.
#[derive(PartialEq, Eq)]
struct Run {
    answers: Vec<String>,
    pages: Vec<(String, Vec<(String, String)>)>,
}

fn run(cluster: &Cluster, database: &str, direct: bool) -> Run {
    let mut writer = cluster.database(database);
    let mut holder = cluster.connect(database);
    let session = format!(
        "SET chunked_map.direct_append = {direct}; SET chunked_map.max_chunk_bytes = 600000;"
    );
    for client in [&mut writer, &mut holder] {
        client.batch_execute(&session).expect("settings");
    }
    writer
        .batch_execute(
            "SELECT chunked_map.chunked_start('a', 3);
             SELECT chunked_map.chunked_start('b', 1);
             SELECT chunked_map.chunked_start('c', 10);
             SELECT chunked_map.chunked_start('f-1', 4);
             SELECT chunked_map.chunked_start('n', 5);
             SELECT chunked_map.chunked_set_notify('n', true);
             SELECT chunked_map.chunked_subscribe('follower', 'f');",
        )
        .expect("maps");
    let mut random = Random(0x5eed_c0ff_ee15_2026);
    let mut answers = Vec::new();
    let mut holding: Option<&str> = None;
    for step in 0..400 {
        // the other session: takes a map and holds it for a while, or commits an append
        // after the writer's snapshot
        if holding.is_none() && random.chance(15) {
            let map = random.pick(&MAPS);
            answers.push(answer(&mut holder, "BEGIN"));
            answers.push(answer(
                &mut holder,
                &format!("SELECT chunked_map.chunked_register('{map}', '{{\"holder\": {step}}}')"),
            ));
            holding = Some(map);
        } else if holding.is_some() && random.chance(30) {
            let end = if random.chance(50) {
                "COMMIT"
            } else {
                "ROLLBACK"
            };
            answers.push(answer(&mut holder, end));
            holding = None;
        }
        let isolation = random.pick(&ISOLATION);
        answers.push(answer(
            &mut writer,
            &format!("BEGIN ISOLATION LEVEL {isolation}"),
        ));
        // the snapshot, for REPEATABLE READ and SERIALIZABLE
        answers.push(answer(
            &mut writer,
            "SELECT chunked_map.chunked_info('a')->>'total_records'",
        ));
        if holding.is_none() && random.chance(10) {
            let map = random.pick(&MAPS);
            answers.push(answer(
                &mut holder,
                &format!("SELECT chunked_map.chunked_register('{map}', '{{\"late\": {step}}}')"),
            ));
        }
        for _ in 0..1 + random.below(12) {
            let map = if random.chance(3) {
                "ghost"
            } else {
                random.pick(&MAPS)
            };
            let sql = match random.below(100) {
                0..=49 => format!(
                    "SELECT chunked_map.chunked_register('{map}', '{}')",
                    payload(&mut random, step)
                ),
                // (0.5) ids from a small pool: duplicates, and ids of rolled-back appends
                50..=59 => format!(
                    "SELECT * FROM chunked_map.chunked_register_once('{map}', '{}', 'i{}')",
                    payload(&mut random, step),
                    random.below(12)
                ),
                60..=69 => {
                    let expected = random.below(40);
                    format!(
                        "SELECT chunked_map.chunked_register('{map}', '{}', {expected})",
                        payload(&mut random, step)
                    )
                }
                70..=79 => {
                    let payloads: Vec<String> = (0..1 + random.below(8))
                        .map(|_| format!("'{}'::jsonb", payload(&mut random, step)))
                        .collect();
                    format!(
                        "SELECT chunked_map.chunked_register_many('{map}', ARRAY[{}])",
                        payloads.join(", ")
                    )
                }
                80..=84 => format!(
                    "SELECT chunked_map.chunked_set_chunk_size('{map}', {})",
                    1 + random.below(6)
                ),
                85..=89 => "SAVEPOINT s".to_owned(),
                90..=94 => "ROLLBACK TO SAVEPOINT s".to_owned(),
                _ => format!("SELECT count(*) FROM chunked_map.chunked_records('{map}')"),
            };
            answers.push(answer(&mut writer, &sql));
        }
        let end = if random.chance(85) {
            "COMMIT"
        } else {
            "ROLLBACK"
        };
        answers.push(answer(&mut writer, end));
    }
    if holding.is_some() {
        answers.push(answer(&mut holder, "COMMIT"));
    }
    answers.push(answer(
        &mut writer,
        "SELECT m, chunked_map.chunked_verify(m)->>'consistent' FROM unnest(ARRAY['a','b','c','f-1','n']) AS m",
    ));
    answers.push(answer(
        &mut writer,
        "SELECT count(*) FROM chunked_map.chunked_poll('follower', 100000)",
    ));
    let pages = MAPS
        .iter()
        .map(|map| {
            let pages = all_pages_text(&mut writer, map)
                .into_iter()
                .map(|(token, text)| (token, mask_times(&text)))
                .collect();
            (map.to_string(), pages)
        })
        .collect();
    Run { answers, pages }
}

#[test]
fn one_random_workload_answers_the_same_and_leaves_the_same_pages_through_both_append_paths() {
    let cluster = Cluster::start();
    let sql = run(&cluster, "through_sql", false);
    let direct = run(&cluster, "direct", true);
    assert_eq!(sql.answers.len(), direct.answers.len(), "calls made");
    for (i, (by_sql, directly)) in sql.answers.iter().zip(&direct.answers).enumerate() {
        assert_eq!(by_sql, directly, "answer {i}");
    }
    let errors = |run: &Run, code: &str| {
        run.answers
            .iter()
            .filter(|answer| answer.starts_with(&format!("error {code}")))
            .count()
    };
    // the workload meets what it is meant to meet: held maps, post-snapshot changes, wrong
    // expectations, absent maps, and rollovers (several pages)
    for code in ["40001", "23000", "42704"] {
        assert!(errors(&direct, code) > 0, "no {code} in the workload");
    }
    for (map, pages) in &direct.pages {
        assert!(pages.len() > 3, "map {map} has {} pages", pages.len());
    }
    assert!(sql.pages == direct.pages, "pages differ");
    assert!(
        direct
            .answers
            .iter()
            .rev()
            .nth(1)
            .is_some_and(|verify| !verify.contains("false")),
        "verify: {:?}",
        direct.answers.iter().rev().nth(1)
    );
}

/// How often the storage tables' statement-level trigger ran in this session, as far as the
/// statistics of this transaction show: once per statement that writes them, none for a direct
/// append.
fn trigger_calls(client: &mut Client) -> i64 {
    statistic(
        client,
        "SELECT coalesce(sum(calls), 0)::bigint FROM pg_catalog.pg_stat_xact_user_functions
         WHERE funcname = 'chunked_forbid_rewrite'",
    )
}

/// The one number a query of this transaction's statistics answers.
fn statistic(client: &mut Client, query: &str) -> i64 {
    client
        .query_one(query, &[])
        .unwrap_or_else(|error| panic!("{query}: {error}"))
        .get(0)
}

#[test]
fn a_plain_append_runs_no_statement_when_written_directly() {
    let cluster = Cluster::start();
    let mut client = cluster.database("no_statement");
    client
        .batch_execute("SET track_functions = 'all'; SELECT chunked_map.chunked_start('m', 100);")
        .expect("setup");
    for (direct, expected) in [(true, 0), (false, 20)] {
        client
            .batch_execute(&format!("SET chunked_map.direct_append = {direct}; BEGIN"))
            .expect("begin");
        // (counts not yet flushed to the statistics are shown too: count from here)
        let before = trigger_calls(&mut client);
        for i in 0..10 {
            client
                .execute(
                    "SELECT chunked_map.chunked_register('m', jsonb_build_object('i', $1::int))",
                    &[&i],
                )
                .expect("append");
        }
        // the SQL path: an UPDATE of the state row and an INSERT of the record per append
        assert_eq!(
            trigger_calls(&mut client) - before,
            expected,
            "direct_append = {direct}"
        );
        client.batch_execute("COMMIT").expect("commit");
    }
    let count: i64 = client
        .query_one("SELECT count(*) FROM chunked_map.chunked_records('m')", &[])
        .expect("records")
        .get(0);
    assert_eq!(count, 20);
}

/// Runs `statements` in a new database with the extension, written directly or through SQL:
/// every statement's answer.
fn answers(cluster: &Cluster, database: &str, direct: bool, statements: &[&str]) -> Vec<String> {
    let mut client = cluster.database(database);
    client
        .batch_execute(&format!("SET chunked_map.direct_append = {direct}"))
        .expect("setting");
    statements
        .iter()
        .map(|sql| format!("{sql} => {}", answer(&mut client, sql)))
        .collect()
}

/// The same statements, written directly and through SQL, answer the same.
fn same_both_ways(cluster: &Cluster, name: &str, statements: &[&str]) {
    let through_sql = answers(cluster, &format!("{name}_sql"), false, statements);
    let direct = answers(cluster, &format!("{name}_direct"), true, statements);
    for (by_sql, directly) in through_sql.iter().zip(&direct) {
        assert_eq!(by_sql, directly, "{name}");
    }
}

/// A map in block 12 or so of map_state, so that an address remembered before a rewrite lies
/// past the end of the rewritten table.
const MANY_MAPS: &str =
    "SELECT count(chunked_map.chunked_start('f' || g, 3)) FROM generate_series(1, 600) AS g";

#[test]
fn an_address_remembered_before_the_table_was_rewritten_is_not_read() {
    let cluster = Cluster::start();
    same_both_ways(
        &cluster,
        "rewritten",
        &[
            MANY_MAPS,
            "SELECT chunked_map.chunked_start('m', 100)",
            "BEGIN",
            "SELECT chunked_map.chunked_register('m', '{\"a\": 1}')",
            "SELECT chunked_map.chunked_register('m', '{\"a\": 2}')",
            "DROP EXTENSION chunked_map",
            "CREATE EXTENSION chunked_map",
            "SELECT chunked_map.chunked_start('m', 100)",
            "SELECT chunked_map.chunked_register('m', '{\"a\": 3}')",
            "SELECT chunked_map.chunked_register('m', '{\"a\": 4}')",
            "COMMIT",
            MANY_MAPS,
            "SELECT count(chunked_map.chunked_drop('f' || g)) FROM generate_series(1, 600) AS g",
            "BEGIN",
            "SELECT chunked_map.chunked_register('m', '{\"a\": 5}')",
            "SELECT chunked_map.chunked_register('m', '{\"a\": 6}')",
            "CLUSTER chunked_map.map_state USING map_state_pkey",
            "SELECT chunked_map.chunked_register('m', '{\"a\": 7}')",
            "COMMIT",
            "SELECT chunked_map.chunked_page('m')::text",
            "SELECT chunked_map.chunked_verify('m')->>'consistent'",
        ],
    );
}

#[test]
fn constraints_generated_columns_rules_children_and_other_triggers_on_the_storage_tables_act_as_through_sql(
) {
    let cluster = Cluster::start();
    same_both_ways(
        &cluster,
        "checks",
        &[
            "SELECT chunked_map.chunked_start('m', 100)",
            "ALTER TABLE chunked_map.map_state ADD CONSTRAINT small CHECK (next_seq <= 3)",
            "ALTER TABLE chunked_map.current_record ADD CONSTRAINT tiny CHECK (octet_length(payload::text) < 20)",
            "SELECT chunked_map.chunked_register('m', '{\"a\": 1}')",
            "SELECT chunked_map.chunked_register('m', '{\"a\": \"0123456789012345678901234567890\"}')",
            "SELECT chunked_map.chunked_register('m', '{\"a\": 2}')",
            "SELECT chunked_map.chunked_register('m', '{\"a\": 3}')",
            "ALTER TABLE chunked_map.map_state DROP CONSTRAINT small",
            "ALTER TABLE chunked_map.current_record DROP CONSTRAINT tiny",
            "ALTER TABLE chunked_map.map_state ADD COLUMN twice bigint GENERATED ALWAYS AS (next_seq * 2) STORED",
            "SELECT chunked_map.chunked_register('m', '{\"a\": 4}')",
            "SELECT chunked_map.chunked_register('m', '{\"a\": 5}')",
            "SELECT twice FROM chunked_map.map_state WHERE map = 'm'",
        ],
    );
    same_both_ways(
        &cluster,
        "rules",
        &[
            "SELECT chunked_map.chunked_start('m', 10)",
            "CREATE TABLE public.audit (map text, seq bigint)",
            "CREATE RULE audit AS ON INSERT TO chunked_map.current_record DO ALSO INSERT INTO public.audit VALUES (new.map, new.seq)",
            "SELECT chunked_map.chunked_register('m', '{\"a\": 1}')",
            "DROP RULE audit ON chunked_map.current_record",
            "CREATE RULE noupd AS ON UPDATE TO chunked_map.map_state DO INSTEAD NOTHING",
            "SELECT chunked_map.chunked_register('m', '{\"b\": 1}')",
            "DROP RULE noupd ON chunked_map.map_state",
            "SELECT chunked_map.chunked_register('m', '{\"b\": 2}')",
            "SELECT count(*) FROM public.audit",
        ],
    );
    same_both_ways(
        &cluster,
        "triggers",
        &[
            "SELECT chunked_map.chunked_start('m', 10)",
            "CREATE TABLE public.audit (tbl text)",
            "CREATE FUNCTION public.audit_fn() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO public.audit VALUES (TG_TABLE_NAME); RETURN NULL; END $$",
            "DROP TRIGGER current_record_is_append_only ON chunked_map.current_record",
            "CREATE TRIGGER current_record_is_append_only AFTER INSERT ON chunked_map.current_record FOR EACH STATEMENT EXECUTE FUNCTION public.audit_fn()",
            "SELECT chunked_map.chunked_register('m', '{\"a\": 1}')",
            "SELECT chunked_map.chunked_register('m', '{\"a\": 2}')",
            "SELECT count(*) FROM public.audit",
        ],
    );
    same_both_ways(
        &cluster,
        "children",
        &[
            "SELECT chunked_map.chunked_start('m', 10)",
            "CREATE TABLE public.ms_child () INHERITS (chunked_map.map_state)",
            "SELECT chunked_map.chunked_register('m', '{\"a\": 1}')",
            "INSERT INTO public.ms_child SELECT * FROM ONLY chunked_map.map_state",
            "SELECT chunked_map.chunked_register('m', '{\"a\": 2}')",
            "SELECT next_seq FROM ONLY chunked_map.map_state WHERE map = 'm'",
        ],
    );
}

#[test]
fn a_role_the_function_does_not_run_as_the_owner_for_is_refused_as_through_sql() {
    let cluster = Cluster::start();
    cluster
        .connect("postgres")
        .batch_execute("CREATE ROLE invoker LOGIN")
        .expect("role");
    same_both_ways(
        &cluster,
        "invoker",
        &[
            "SELECT chunked_map.chunked_start('m', 10)",
            "ALTER FUNCTION chunked_map.chunked_register(text, jsonb) SECURITY INVOKER",
            "GRANT USAGE ON SCHEMA chunked_map TO invoker",
            "GRANT EXECUTE ON FUNCTION chunked_map.chunked_register(text, jsonb) TO invoker",
            "SET ROLE invoker",
            "SELECT chunked_map.chunked_register('m', '{\"invoker\": 1}')",
            "RESET ROLE",
            "SELECT count(*) FROM chunked_map.current_record",
        ],
    );
}

#[test]
fn a_payload_is_stored_by_the_column_own_compression_whatever_form_it_came_in() {
    let cluster = Cluster::start();
    // lz4 where the server has it (Debian's do); otherwise pglz both ways, and the test shows
    // only that the values agree
    let lz4 = cluster
        .database("lz4_probe")
        .batch_execute("CREATE TABLE probe (j jsonb COMPRESSION lz4)")
        .is_ok();
    let compression = if lz4 { "lz4" } else { "pglz" };
    if !lz4 {
        eprintln!("this server has no lz4: payloads compressed by pglz only");
    }
    let set_compression =
        format!("ALTER TABLE public.t ALTER COLUMN j SET COMPRESSION {compression}");
    same_both_ways(
        &cluster,
        "compression",
        &[
            "CREATE TABLE public.t (id int, j jsonb)",
            &set_compression,
            "INSERT INTO public.t SELECT 1, jsonb_build_object('x', repeat('abc', 100000))",
            "INSERT INTO public.t SELECT 2, (SELECT jsonb_agg(md5(g::text)) FROM generate_series(1, 25000) AS g)",
            "INSERT INTO public.t SELECT 3, jsonb_build_object('small', 1)",
            "SELECT chunked_map.chunked_start('m', 50)",
            "SELECT chunked_map.chunked_register('m', t.j) FROM public.t ORDER BY id",
            "SELECT seq, pg_column_compression(payload), pg_column_size(payload), md5(payload::text) FROM chunked_map.current_record ORDER BY seq",
        ],
    );
}

/// The WAL records a statement wrote, as `EXPLAIN (ANALYZE, WAL)` counts them (its commit's not
/// included).
fn wal_records(client: &mut Client, statement: &str) -> i64 {
    let text = client
        .simple_query(&format!(
            "EXPLAIN (ANALYZE, WAL, COSTS OFF, TIMING OFF, SUMMARY OFF, FORMAT JSON) {statement}"
        ))
        .expect("explain")
        .into_iter()
        .find_map(|message| match message {
            SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
            _ => None,
        })
        .expect("a plan");
    let plan: serde_json::Value = serde_json::from_str(&text).expect("the plan as JSON");
    plan[0]["Plan"]["WAL Records"]
        .as_i64()
        .unwrap_or_else(|| panic!("no WAL Records in {plan}"))
}

#[test]
fn a_direct_append_locks_the_map_row_before_it_updates_it_as_sql_does() {
    let cluster = Cluster::start();
    let mut client = cluster.database("lock_then_update");
    client
        .batch_execute(
            "SELECT chunked_map.chunked_start('m', 100);
             SELECT chunked_map.chunked_register('m', '{\"n\": 0}');",
        )
        .expect("setup");
    // four records both ways: the row's lock, the state row's new version (heap-only: no index
    // entry), the record and its index entry. An update alone, not waiting, would write one
    // fewer, but heap_update must never meet another transaction's lock without waiting for it
    // (PostgreSQL asserts it, on servers built with assertions). (The first append made the
    // record table's first page and its index's root; the maps' pages have room, so no page is
    // pruned on the way.)
    for direct in [true, false] {
        client
            .batch_execute(&format!("SET chunked_map.direct_append = {direct}"))
            .expect("setting");
        assert_eq!(
            wal_records(
                &mut client,
                "SELECT chunked_map.chunked_register('m', '{\"n\": 1}')"
            ),
            4,
            "direct_append = {direct}"
        );
    }
    let count: i64 = client
        .query_one("SELECT count(*) FROM chunked_map.chunked_records('m')", &[])
        .expect("records")
        .get(0);
    assert_eq!(count, 3);
}

/// Another session's row lock on the map's state row, never waiting: whether it was granted
/// (else PostgreSQL's 55P03, asserted).
fn row_lock_granted(other: &mut Client, strength: &str) -> bool {
    other.batch_execute("BEGIN").expect("begin");
    let result = other.query(
        &format!(
            "SELECT 1 FROM chunked_map.map_state AS s WHERE s.map = 'm' FOR {strength} NOWAIT"
        ),
        &[],
    );
    let granted = match result {
        Ok(rows) => {
            assert_eq!(rows.len(), 1, "the map's row, FOR {strength}");
            true
        }
        Err(_) => {
            assert_error(
                result,
                "55P03",
                "could not obtain lock on row in relation \"map_state\"",
            );
            false
        }
    };
    other.batch_execute("ROLLBACK").expect("rollback");
    granted
}

#[test]
fn a_write_holds_the_map_row_as_an_update_of_its_other_columns_both_ways() {
    let cluster = Cluster::start();
    for direct in [true, false] {
        let database = format!("row_lock_{direct}");
        let mut writer = cluster.database(&database);
        let mut other = cluster.connect(&database);
        writer
            .batch_execute(&format!(
                "SET chunked_map.direct_append = {direct};
                 SELECT chunked_map.chunked_start('m', 100);
                 SELECT chunked_map.chunked_register('m', '{{}}');"
            ))
            .expect("a map");
        writer
            .batch_execute("BEGIN; SELECT chunked_map.chunked_register('m', '{\"v\": 1}');")
            .expect("an open append");
        // the lock an UPDATE of non-key columns takes, `FOR NO KEY UPDATE`: a key-share lock
        // (a foreign key's check) goes through, every stronger one is refused
        let held: Vec<(&str, bool)> = ["KEY SHARE", "SHARE", "NO KEY UPDATE", "UPDATE"]
            .into_iter()
            .map(|strength| (strength, row_lock_granted(&mut other, strength)))
            .collect();
        assert_eq!(
            held,
            [
                ("KEY SHARE", true),
                ("SHARE", false),
                ("NO KEY UPDATE", false),
                ("UPDATE", false)
            ],
            "direct_append = {direct}"
        );
        // a key-share lock taken meanwhile does not hold up the writer's next append, even when
        // it has forgotten where its row is (a savepoint rolled back) and looks for it again
        writer
            .batch_execute(
                "SAVEPOINT s;
                 SELECT chunked_map.chunked_register('m', '{\"v\": 2}');
                 ROLLBACK TO SAVEPOINT s;",
            )
            .expect("a rolled back append");
        other
            .batch_execute(
                "BEGIN;
                 SELECT 1 FROM chunked_map.map_state AS s WHERE s.map = 'm' FOR KEY SHARE NOWAIT;",
            )
            .expect("a key-share lock");
        let seq: i64 = writer
            .query_one(
                "SELECT chunked_map.chunked_register('m', '{\"v\": 3}')",
                &[],
            )
            .expect("the append after the key-share lock")
            .get(0);
        assert_eq!(seq, 3, "direct_append = {direct}");
        // a drop, which deletes the row, would wait for that lock without limit: it is refused
        // at once, as for a concurrent append; in a transaction of its own too
        assert_error(
            writer.query("SELECT chunked_map.chunked_drop('m')", &[]),
            "40001",
            "map \"m\" is locked by a concurrent append",
        );
        writer.batch_execute("ROLLBACK").expect("rollback");
        assert_error(
            writer.query("SELECT chunked_map.chunked_drop('m')", &[]),
            "40001",
            "map \"m\" is locked by a concurrent append",
        );
        other.batch_execute("ROLLBACK").expect("rollback");
        let dropped: bool = writer
            .query_one("SELECT chunked_map.chunked_drop('m')", &[])
            .expect("the drop once the key-share lock is gone")
            .get(0);
        assert!(dropped, "direct_append = {direct}");
    }
}

/// Scans of the maps' state table (by its index or not) in this transaction, as its statistics
/// show them (counts not yet flushed included).
fn state_table_scans(client: &mut Client) -> i64 {
    statistic(
        client,
        "SELECT (coalesce(t.seq_scan, 0) + coalesce(t.idx_scan, 0))::bigint
         FROM pg_catalog.pg_stat_xact_user_tables AS t
         WHERE t.schemaname = 'chunked_map' AND t.relname = 'map_state'",
    )
}

#[test]
fn a_direct_append_passes_a_lock_on_the_map_its_own_transaction_holds() {
    let cluster = Cluster::start();
    let mut client = cluster.database("own_lock");
    client
        .batch_execute(
            "SELECT chunked_map.chunked_start('m', 100);
             SELECT chunked_map.chunked_register('m', '{}');",
        )
        .expect("a map");
    // an append alone in its transaction, then after the transaction locked the map's row
    // itself (as write_message with an expected version does), as strongly as an append or
    // more; then with a savepoint that took the lock rolled back, and one that is kept
    let locks = [
        "",
        "SELECT 1 FROM chunked_map.map_state AS s WHERE s.map = 'm' FOR NO KEY UPDATE;",
        "SELECT 1 FROM chunked_map.map_state AS s WHERE s.map = 'm' FOR UPDATE;",
        "SAVEPOINT s; SELECT 1 FROM chunked_map.map_state AS s WHERE s.map = 'm' FOR NO KEY UPDATE;
         ROLLBACK TO SAVEPOINT s;",
        "SAVEPOINT s; SELECT 1 FROM chunked_map.map_state AS s WHERE s.map = 'm' FOR NO KEY UPDATE;
         RELEASE SAVEPOINT s;",
    ];
    let mut scans = Vec::new();
    for lock in locks {
        client
            .batch_execute(&format!("BEGIN; {lock}"))
            .expect("begin");
        let before = state_table_scans(&mut client);
        let seq: i64 = client
            .query_one(
                "SELECT chunked_map.chunked_register('m', '{\"v\": 1}')",
                &[],
            )
            .expect("append")
            .get(0);
        scans.push((seq, state_table_scans(&mut client) - before));
        client.batch_execute("COMMIT").expect("commit");
    }
    // each found by one probe of the map's key and updated there: the lock is not taken again
    // by SQL (a statement that reads the table again)
    assert_eq!(scans, [(2, 1), (3, 1), (4, 1), (5, 1), (6, 1)]);
    // another session's key share (a foreign key's check) does not conflict with the append's
    // lock: written directly too, the other's lock kept
    let mut other = cluster.connect("own_lock");
    other
        .batch_execute(
            "BEGIN; SELECT 1 FROM chunked_map.map_state AS s WHERE s.map = 'm' FOR KEY SHARE;",
        )
        .expect("a key share");
    client.batch_execute("BEGIN").expect("begin");
    let before = state_table_scans(&mut client);
    let seq: i64 = client
        .query_one(
            "SELECT chunked_map.chunked_register('m', '{\"v\": 1}')",
            &[],
        )
        .expect("append")
        .get(0);
    assert_eq!((seq, state_table_scans(&mut client) - before), (7, 1));
    client.batch_execute("COMMIT").expect("commit");
    other.batch_execute("COMMIT").expect("commit");
}

// (0.5) The message store's index row (`message_store.message_index`), written directly with
// its index entries or by its statement: the same rows, the same answers, the same errors.

/// The ids a message workload draws from: few, so that some are used twice.
fn message_id(random: &mut Random) -> String {
    format!("00000000-0000-4000-8000-{:012x}", random.below(90))
}

/// Metadata of every shape `correlation_category` reads: a correlation stream with a category,
/// one without `-`, one starting with `-`, a number, JSON null, an object, a non-object, none.
const METADATA: [&str; 9] = [
    "'{\"correlationStreamName\": \"corr-7\"}'",
    "'{\"correlationStreamName\": \"corr-7+x-y\", \"other\": 1}'",
    "'{\"correlationStreamName\": \"plain\"}'",
    "'{\"correlationStreamName\": \"-lead\"}'",
    "'{\"correlationStreamName\": 12.50}'",
    "'{\"correlationStreamName\": null}'",
    "'{\"correlationStreamName\": {\"a-b\": 1}}'",
    "'[\"correlationStreamName\"]'",
    "NULL",
];

const STREAMS: [&str; 6] = ["acc-1", "acc-2", "acc-3", "pay-1", "pay-2", "loose"];

fn message_run(cluster: &Cluster, database: &str, direct: bool) -> Vec<String> {
    let mut writer = cluster.database(database);
    let mut other = cluster.connect(database);
    writer
        .batch_execute("CREATE EXTENSION chunked_map_message_store")
        .expect("store");
    for client in [&mut writer, &mut other] {
        client
            .batch_execute(&format!("SET chunked_map.direct_append = {direct}"))
            .expect("setting");
    }
    let mut random = Random(0x3e55_a9e5_0000_2026);
    let mut answers = Vec::new();
    for step in 0..300 {
        let isolation = random.pick(&ISOLATION);
        answers.push(answer(
            &mut writer,
            &format!("BEGIN ISOLATION LEVEL {isolation}"),
        ));
        answers.push(answer(
            &mut writer,
            "SELECT message_store.stream_version('acc-1')",
        ));
        // another transaction's write, committed after the writer's snapshot
        if random.chance(15) {
            let stream = random.pick(&STREAMS);
            let id = message_id(&mut random);
            answers.push(answer(
                &mut other,
                &format!(
                    "SELECT message_store.write_message('{id}', '{stream}', 'Late', '{{\"step\": {step}}}')"
                ),
            ));
        }
        for _ in 0..1 + random.below(6) {
            let stream = random.pick(&STREAMS);
            let id = message_id(&mut random);
            let metadata = random.pick(&METADATA);
            let sql = match random.below(100) {
                0..=64 => format!(
                    "SELECT message_store.write_message('{id}', '{stream}', 'Done', '{{\"step\": {step}}}', {metadata})"
                ),
                65..=79 => format!(
                    "SELECT message_store.write_message('{id}', '{stream}', 'Done', '{{\"step\": {step}}}', {metadata}, {})",
                    random.below(8) as i64 - 1
                ),
                80..=84 => format!(
                    "SELECT message_store.write_message('{id}', '{stream}', NULL, '{{}}')"
                ),
                85..=89 => "SAVEPOINT s".to_owned(),
                90..=94 => "ROLLBACK TO SAVEPOINT s".to_owned(),
                _ => format!(
                    "SELECT count(*) FROM message_store.get_stream_messages('{stream}')"
                ),
            };
            answers.push(answer(&mut writer, &sql));
        }
        let end = if random.chance(85) {
            "COMMIT"
        } else {
            "ROLLBACK"
        };
        answers.push(answer(&mut writer, end));
    }
    // the rows, each read through the index it has entries in (not the table)
    writer
        .batch_execute("SET enable_seqscan = off; SET enable_bitmapscan = off")
        .expect("index scans");
    for query in [
        // the primary key
        "SELECT stream_name, position, type, correlation_category, id, write_order
         FROM message_store.message_index ORDER BY stream_name, position",
        // the ids
        "SELECT i.id, i.stream_name, i.position FROM generate_series(0, 89) AS g,
             LATERAL (SELECT * FROM message_store.message_index AS m
                      WHERE m.id = ('00000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid) AS i
         ORDER BY g",
        // the messages waiting for a global position, in the order the numbering takes them
        "SELECT stream_name, position FROM message_store.message_index
         WHERE global_position IS NULL ORDER BY writer, write_order",
        // the category batches number them, then read them off the category index
        "SELECT global_position, stream_name, position, type, metadata::text
         FROM message_store.get_category_messages('acc', 1, 1000)",
        "SELECT global_position, stream_name, position, type
         FROM message_store.get_category_messages('pay', 1, 1000)",
        "SELECT global_position, stream_name, position
         FROM message_store.get_category_messages('acc', 1, 1000, 'corr')",
        "SELECT stream_name, position, correlation_category, global_position
         FROM message_store.message_index
         WHERE split_part(stream_name, '-', 1) = 'acc' AND global_position IS NOT NULL
         ORDER BY split_part(stream_name, '-', 1), global_position",
        "SELECT count(*) FROM message_store.message_index",
    ] {
        answers.push(format!("{query} => {}", answer(&mut writer, query)));
    }
    answers
}

#[test]
fn a_random_message_workload_answers_the_same_and_indexes_the_same_through_both_paths() {
    let cluster = Cluster::start();
    let through_sql = message_run(&cluster, "messages_sql", false);
    let direct = message_run(&cluster, "messages_direct", true);
    assert_eq!(through_sql.len(), direct.len(), "calls made");
    for (i, (by_sql, directly)) in through_sql.iter().zip(&direct).enumerate() {
        assert_eq!(by_sql, directly, "answer {i}");
    }
    // the workload meets what it is meant to: duplicate ids, wrong expected versions, a
    // missing type, writes after the snapshot (under REPEATABLE READ and SERIALIZABLE)
    for code in ["23505", "P0001", "23502", "40001"] {
        assert!(
            direct
                .iter()
                .any(|answer| answer.starts_with(&format!("error {code}"))),
            "no {code} in the workload"
        );
    }
    let rows = direct.last().expect("the count");
    assert!(
        !rows.ends_with("ok 0") && !rows.contains("error"),
        "messages written: {rows}"
    );
}

/// The error a duplicate id meets in another stream, with where PostgreSQL says it was raised.
fn duplicate_id_error(client: &mut Client) -> (String, String, Option<String>) {
    let error = client
        .batch_execute(
            "SELECT message_store.write_message('00000000-0000-4000-8000-0000000000aa', 'dup-2', 'Opened', '{}')",
        )
        .expect_err("a duplicate id");
    let db = error.as_db_error().expect("a server error");
    (
        db.code().code().to_owned(),
        db.message().to_owned(),
        db.where_().map(str::to_owned),
    )
}

#[test]
fn a_message_index_row_runs_no_statement_when_written_directly() {
    let cluster = Cluster::start();
    let mut client = cluster.database("index_row");
    client
        .batch_execute(
            "CREATE EXTENSION chunked_map_message_store;
             SELECT message_store.write_message('00000000-0000-4000-8000-0000000000aa', 'dup-1', 'Opened', '{}');",
        )
        .expect("setup");
    // the same error both ways; only the statement's says the statement it was raised in
    let (code, message, context) = duplicate_id_error(&mut client);
    assert_eq!(
        (code.as_str(), message.as_str()),
        (
            "23505",
            "duplicate key value violates unique constraint \"messages_id\""
        )
    );
    assert_eq!(context, None, "written directly");
    client
        .batch_execute("SET chunked_map.direct_append = off")
        .expect("setting");
    let (code, message, context) = duplicate_id_error(&mut client);
    assert_eq!(
        (code.as_str(), message.as_str()),
        (
            "23505",
            "duplicate key value violates unique constraint \"messages_id\""
        )
    );
    let context = context.expect("the statement's context");
    assert!(
        context.contains("INSERT INTO message_store.message_index"),
        "{context}"
    );
}

/// Runs `steps` written directly and through SQL, each in a new database with the store: both
/// answer the same, and each answer starts as its step expects (so that a step meant to change
/// the table did, and a write meant to fail failed as the statement fails).
fn same_both_ways_as_expected(cluster: &Cluster, name: &str, steps: &[(String, &str)]) {
    let statements: Vec<&str> = std::iter::once("CREATE EXTENSION chunked_map_message_store")
        .chain(steps.iter().map(|(sql, _)| sql.as_str()))
        .collect();
    let through_sql = answers(cluster, &format!("{name}_sql"), false, &statements);
    let direct = answers(cluster, &format!("{name}_direct"), true, &statements);
    for (by_sql, directly) in through_sql.iter().zip(&direct) {
        assert_eq!(by_sql, directly, "{name}");
    }
    for ((sql, expected), answer) in steps.iter().zip(direct.iter().skip(1)) {
        let answered = answer.strip_prefix(&format!("{sql} => ")).unwrap_or(answer);
        assert!(
            answered.starts_with(expected),
            "{name}: {sql} answered {answered}, not {expected}"
        );
    }
}

/// A write of message `n` (its id) to `stream`, with `metadata`.
fn write_n(n: u32, stream: &str, metadata: &str) -> String {
    format!(
        "SELECT message_store.write_message('00000000-0000-4000-8000-{n:012}', '{stream}', 'Opened', '{{\"n\": {n}}}', {metadata})"
    )
}

const CORRELATED: &str = "'{\"correlationStreamName\": \"c-1\"}'";

#[test]
fn constraints_rules_triggers_and_columns_on_the_message_index_act_as_through_sql() {
    let cluster = Cluster::start();
    let rows = "SELECT stream_name, position, correlation_category, id FROM message_store.message_index ORDER BY id".to_owned();
    let step = |sql: &str, expected: &'static str| (sql.to_owned(), expected);
    same_both_ways_as_expected(
        &cluster,
        "index_checks",
        &[
            (write_n(1, "acc-1", CORRELATED), "ok 0"),
            step("ALTER TABLE message_store.message_index ADD CONSTRAINT short CHECK (length(stream_name) < 6)", "ok"),
            (write_n(2, "acc-22", CORRELATED), "error 23514"),
            (write_n(3, "acc-2", CORRELATED), "ok 0"),
            step("ALTER TABLE message_store.message_index DROP CONSTRAINT short", "ok"),
            step("ALTER TABLE message_store.message_index ALTER COLUMN correlation_category SET NOT NULL", "ok"),
            (write_n(4, "acc-1", "NULL"), "error 23502"),
            (write_n(5, "acc-1", CORRELATED), "ok 1"),
            // each write took one value of the sequence, a refused one too, and no more
            step("SELECT write_order FROM message_store.message_index WHERE position = 1", "ok 5"),
            step("ALTER TABLE message_store.message_index ALTER COLUMN correlation_category DROP NOT NULL", "ok"),
            step("ALTER TABLE message_store.message_index ADD COLUMN noted text DEFAULT 'noted'", "ok"),
            (write_n(6, "acc-1", "NULL"), "ok 2"),
            step("SELECT count(*) FILTER (WHERE noted = 'noted') FROM message_store.message_index", "ok 4"),
            step("ALTER TABLE message_store.message_index DROP COLUMN noted", "ok"),
            (write_n(7, "acc-1", "NULL"), "ok 3"),
            step("ALTER TABLE message_store.message_index ADD COLUMN twice bigint GENERATED ALWAYS AS (position * 2) STORED", "ok"),
            (write_n(8, "acc-1", "NULL"), "ok 4"),
            step("SELECT twice FROM message_store.message_index WHERE position = 4", "ok 8"),
            step("ALTER TABLE message_store.message_index DROP COLUMN twice", "ok"),
            // the one column the statement leaves out takes its default
            step("ALTER TABLE message_store.message_index ALTER COLUMN global_position SET DEFAULT -7", "ok"),
            (write_n(9, "acc-1", "NULL"), "ok 5"),
            step("SELECT global_position FROM message_store.message_index WHERE position = 5", "ok -7"),
            step("ALTER TABLE message_store.message_index ALTER COLUMN global_position DROP DEFAULT", "ok"),
            (rows.clone(), "ok acc-1|0|c|"),
        ],
    );
    same_both_ways_as_expected(
        &cluster,
        "index_uniqueness",
        &[
            // checked at the end of the transaction, as a deferred constraint is
            step("ALTER TABLE message_store.message_index ADD CONSTRAINT one_each UNIQUE (type, correlation_category) DEFERRABLE INITIALLY DEFERRED", "ok"),
            step("BEGIN", "ok"),
            (write_n(1, "acc-1", CORRELATED), "ok 0"),
            (write_n(2, "acc-2", CORRELATED), "ok 0"),
            step("COMMIT", "error 23505"),
            (write_n(3, "acc-1", CORRELATED), "ok 0"),
            step("ALTER TABLE message_store.message_index DROP CONSTRAINT one_each", "ok"),
            // an exclusion constraint, checked at once
            step("ALTER TABLE message_store.message_index ADD CONSTRAINT one_per_type EXCLUDE USING btree (type WITH =, correlation_category WITH =)", "ok"),
            (write_n(4, "acc-2", CORRELATED), "error 23P01"),
            (write_n(5, "acc-2", "NULL"), "ok 0"),
            (rows.clone(), "ok acc-1|0|c|"),
        ],
    );
    same_both_ways_as_expected(
        &cluster,
        "index_rules_triggers",
        &[
            step("CREATE TABLE public.audit (what text)", "ok"),
            step("CREATE RULE audit AS ON INSERT TO message_store.message_index DO ALSO INSERT INTO public.audit VALUES ('rule ' || new.stream_name)", "ok"),
            (write_n(1, "acc-1", "NULL"), "ok 0"),
            step("DROP RULE audit ON message_store.message_index", "ok"),
            step("CREATE FUNCTION public.audit_fn() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO public.audit VALUES (TG_WHEN || ' ' || TG_LEVEL); RETURN NULL; END $$", "ok"),
            step("CREATE TRIGGER each_row AFTER INSERT ON message_store.message_index FOR EACH ROW EXECUTE FUNCTION public.audit_fn()", "ok"),
            (write_n(2, "acc-1", "NULL"), "ok 1"),
            step("DROP TRIGGER each_row ON message_store.message_index", "ok"),
            step("CREATE TRIGGER each_statement BEFORE INSERT ON message_store.message_index FOR EACH STATEMENT EXECUTE FUNCTION public.audit_fn()", "ok"),
            (write_n(3, "acc-1", "NULL"), "ok 2"),
            step("DROP TRIGGER each_statement ON message_store.message_index", "ok"),
            step("CREATE TABLE public.streams (name text PRIMARY KEY)", "ok"),
            step("ALTER TABLE message_store.message_index ADD CONSTRAINT known FOREIGN KEY (stream_name) REFERENCES public.streams NOT VALID", "ok"),
            (write_n(4, "acc-1", "NULL"), "error 23503"),
            step("INSERT INTO public.streams VALUES ('acc-1')", "ok"),
            (write_n(5, "acc-1", "NULL"), "ok 3"),
            step("ALTER TABLE message_store.message_index DROP CONSTRAINT known", "ok"),
            (write_n(6, "acc-1", "NULL"), "ok 4"),
            step("SELECT what FROM public.audit ORDER BY what", "ok AFTER ROW;BEFORE STATEMENT;rule acc-1"),
            (rows.clone(), "ok acc-1|0|NULL|"),
        ],
    );
    same_both_ways_as_expected(
        &cluster,
        "index_search_path",
        &[
            // an index on a function the owner wrote, which calls another unqualified: it runs
            // as the owner, and finds what the statements' search_path finds, not the caller's
            step("CREATE FUNCTION public.norm(s text) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT lower(s) $$", "ok"),
            step("CREATE INDEX norm_idx ON message_store.message_index (public.norm(type))", "ok"),
            step("CREATE SCHEMA evil", "ok"),
            step("CREATE FUNCTION evil.lower(s text) RETURNS text LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'a look-alike ran'; END $$", "ok"),
            step("SET search_path = evil, pg_catalog, public", "ok"),
            (write_n(1, "acc-1", "NULL"), "ok 0"),
            (write_n(2, "acc-1", "NULL"), "ok 1"),
            step("RESET search_path", "ok"),
            step("SET enable_seqscan = off", "ok"),
            step("SELECT count(*) FROM message_store.message_index WHERE public.norm(type) = 'opened'", "ok 2"),
            (rows, "ok acc-1|0|NULL|"),
        ],
    );
    same_both_ways_as_expected(
        &cluster,
        "index_snapshot",
        &[
            // a function of an index that reads tables sees what the statement would: the
            // record the write appended, and the rows written before it by the same statement
            step("CREATE FUNCTION public.seen(s text) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$ BEGIN IF s LIKE '%-3' THEN RAISE EXCEPTION 'index % record %', (SELECT count(*) FROM message_store.message_index), (SELECT count(*) FROM chunked_map.current_record); END IF; RETURN s; END $$", "ok"),
            step("CREATE INDEX seen_idx ON message_store.message_index (public.seen(stream_name))", "ok"),
            step("SELECT message_store.write_message(('00000000-0000-4000-8000-' || lpad(i::text, 12, '0')), 'acc-' || i, 'Opened', '{}') FROM generate_series(1, 3) AS i", "error P0001 index 2 record 3"),
            step("BEGIN ISOLATION LEVEL REPEATABLE READ", "ok"),
            (write_n(1, "acc-1", "NULL"), "ok 0"),
            (write_n(2, "acc-3", "NULL"), "error P0001 index 1 record 2"),
            step("ROLLBACK", "ok"),
        ],
    );
}

#[test]
fn an_owner_that_revoked_its_own_privileges_is_refused_as_through_sql() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect("postgres");
    admin.batch_execute("CREATE ROLE boss LOGIN").expect("role");
    let steps = [
        (write_n(1, "acc-1", "NULL"), "ok 0"),
        (
            "REVOKE INSERT ON message_store.message_index FROM boss".to_owned(),
            "ok",
        ),
        (
            write_n(2, "acc-1", "NULL"),
            "error 42501 permission denied for table message_index",
        ),
        (
            "GRANT INSERT ON message_store.message_index TO boss".to_owned(),
            "ok",
        ),
        (write_n(3, "acc-1", "NULL"), "ok 1"),
        ("SELECT chunked_map.chunked_start('m', 10)".to_owned(), "ok"),
        (
            "REVOKE UPDATE ON chunked_map.map_state FROM boss".to_owned(),
            "ok",
        ),
        (
            "SELECT chunked_map.chunked_register('m', '{\"a\": 1}')".to_owned(),
            "error 42501 permission denied for table map_state",
        ),
        (
            "GRANT UPDATE ON chunked_map.map_state TO boss".to_owned(),
            "ok",
        ),
        (
            "REVOKE INSERT ON chunked_map.current_record FROM boss".to_owned(),
            "ok",
        ),
        (
            "SELECT chunked_map.chunked_register('m', '{\"a\": 2}')".to_owned(),
            "error 42501 permission denied for table current_record",
        ),
        (
            "GRANT INSERT ON chunked_map.current_record TO boss".to_owned(),
            "ok",
        ),
        (
            "SELECT chunked_map.chunked_register('m', '{\"a\": 3}')".to_owned(),
            "ok 1",
        ),
        (
            "SELECT count(*) FROM message_store.message_index".to_owned(),
            "ok 2",
        ),
    ];
    let mut runs = Vec::new();
    for direct in [false, true] {
        // the store made by boss as a superuser, who then is one no more: its owner, whose
        // privileges on its own tables count
        let database = format!("revoked_{direct}");
        admin
            .batch_execute("ALTER ROLE boss SUPERUSER")
            .expect("superuser");
        admin
            .batch_execute(&format!("CREATE DATABASE {database} OWNER boss"))
            .expect("database");
        let mut owner = cluster.connect_as(&database, "boss");
        owner
            .batch_execute(
                "CREATE EXTENSION chunked_map; CREATE EXTENSION chunked_map_message_store",
            )
            .expect("extensions");
        admin
            .batch_execute("ALTER ROLE boss NOSUPERUSER")
            .expect("no superuser");
        let mut owner = cluster.connect_as(&database, "boss");
        owner
            .batch_execute(&format!("SET chunked_map.direct_append = {direct}"))
            .expect("setting");
        let answers: Vec<String> = steps
            .iter()
            .map(|(sql, expected)| {
                let answered = answer(&mut owner, sql);
                assert!(
                    answered.starts_with(expected),
                    "direct_append = {direct}: {sql} answered {answered}, not {expected}"
                );
                answered
            })
            .collect();
        runs.push(answers);
    }
    assert_eq!(runs[0], runs[1]);
}
