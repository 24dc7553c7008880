//! G. Retention: the space a trim gives back, and what retention at every rollover costs an
//! append. H. The feed: what following a map costs an append, what a poll costs among 10 and
//! 10,000 maps, what the feed keeps after 1,000,000 appends, and what a long-open transaction
//! does to polls. Every ratio is taken between runs of the same round, medians over rounds.

use std::fmt::Write as _;
use std::time::Instant;

use chunked_map_cluster_tests::Client;

use crate::pgbench::{Length, Run};
use crate::{median, payload, sync_option, Bench};

fn size(client: &mut Client, sql: &str) -> f64 {
    client
        .query_one(&format!("SELECT ({sql})::float8"), &[])
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .get(0)
}

/// The storage tables' bytes (heap, TOAST, indexes).
fn storage_bytes(client: &mut Client) -> f64 {
    size(
        client,
        "pg_total_relation_size('chunked_map.archived_chunk')
         + pg_total_relation_size('chunked_map.current_record')
         + pg_total_relation_size('chunked_map.map_state')",
    )
}

/// Loads `count` records into `map` in calls of 10,000.
fn load(client: &mut Client, map: &str, count: i64) {
    let mut done = 0;
    while done < count {
        let batch = (count - done).min(10_000);
        client
            .batch_execute(&format!(
                "SELECT count(*) FROM chunked_map.chunked_register_many('{map}',
                     ARRAY(SELECT {} FROM generate_series({}, {}) AS g))",
                payload("g"),
                done + 1,
                done + batch
            ))
            .expect("load");
        done += batch;
    }
}

fn mib(bytes: f64) -> f64 {
    bytes / 1024.0 / 1024.0
}

/// A/B appends of one client in the same round: the rate of each script, alternated (each
/// round starts with the next one, so that none always runs first).
fn alternate(bench: &Bench, runs: &[(&str, String)], rounds: usize, seconds: u32) -> Vec<Vec<f64>> {
    let mut rates = vec![Vec::new(); runs.len()];
    for round in 0..rounds {
        eprintln!("  round {} of {rounds}", round + 1);
        for k in 0..runs.len() {
            let i = (k + round) % runs.len();
            let (database, script) = &runs[i];
            let outcome = bench.pgbench(
                database,
                &Run {
                    script,
                    clients: 1,
                    length: Length::Seconds(seconds),
                    defines: vec![],
                    options: sync_option(false),
                    retry: false,
                    log_dir: None,
                },
            );
            rates[i].push(outcome.tps);
        }
    }
    rates
}

fn ratio(rates: &[Vec<f64>], a: usize, b: usize) -> f64 {
    median(rates[a].iter().zip(&rates[b]).map(|(x, y)| x / y).collect())
}

pub fn section_g(bench: &mut Bench) -> String {
    let big = bench.options.big;
    let keep = big / 10;
    let mut out = String::new();

    // space: a map of `big` records trimmed to its newest `keep`
    let mut client = bench.cluster.database("retention_space");
    client
        .batch_execute("SELECT chunked_map.chunked_start('audit', 100)")
        .unwrap();
    load(&mut client, "audit", big);
    client.batch_execute("VACUUM ANALYZE").unwrap();
    let before = storage_bytes(&mut client);
    let trim_began = Instant::now();
    let removed: i64 = client
        .query_one(
            "SELECT chunked_map.chunked_trim('audit', (chunked_map.chunked_info('audit') ->> 'next_seq')::bigint - $1)",
            &[&keep],
        )
        .unwrap()
        .get(0);
    let trim_took = trim_began.elapsed();
    let after_trim = storage_bytes(&mut client);
    client
        .batch_execute("VACUUM chunked_map.archived_chunk")
        .unwrap();
    let after_vacuum = storage_bytes(&mut client);
    // the space is reused: loading as many records again as went grows the tables by little
    client
        .batch_execute("SELECT chunked_map.chunked_start('again', 100)")
        .unwrap();
    load(&mut client, "again", removed);
    client.batch_execute("VACUUM ANALYZE").unwrap();
    let after_reload = storage_bytes(&mut client);
    let _ = writeln!(
        out,
        "### G. Retention\n\nSpace: a map of {big} records (chunk size 100, ~230-byte payloads) trimmed to its newest {keep} \
         (`chunked_trim`: {removed} records, {:.0} ms), storage tables' bytes (heap + TOAST + indexes):\n",
        trim_took.as_secs_f64() * 1000.0
    );
    let _ = writeln!(out, "| moment | MiB |");
    let _ = writeln!(out, "|---|---:|");
    let _ = writeln!(out, "| before the trim | {:.1} |", mib(before));
    let _ = writeln!(out, "| after the trim | {:.1} |", mib(after_trim));
    let _ = writeln!(out, "| after VACUUM | {:.1} |", mib(after_vacuum));
    let _ = writeln!(
        out,
        "| after loading {removed} records into another map | {:.1} |",
        mib(after_reload)
    );
    let _ = writeln!(
        out,
        "\nAfter VACUUM the removed chunks' space is free for reuse inside the files (PostgreSQL gives back \
         to the file system only empty pages at a table's end): loading as many records again, into another \
         map, grows the tables by {:.1} MiB, where the {big} records had taken {:.1} MiB.\n",
        mib(after_reload - after_vacuum),
        mib(before)
    );

    // cost: retention at every rollover against no retention, same round
    let mut client = bench.cluster.database("retention_cost");
    client
        .batch_execute(
            "SELECT chunked_map.chunked_start('kept', 100), chunked_map.chunked_start('retained', 100);
             SELECT chunked_map.chunked_set_retention('retained', 10000);",
        )
        .unwrap();
    load(&mut client, "kept", 20_000);
    load(&mut client, "retained", 20_000);
    client.batch_execute("VACUUM ANALYZE").unwrap();
    let script = |map: &str| {
        format!(
            "\\set n random(1, 1000000)\nSELECT chunked_map.chunked_register('{map}', {});\n",
            payload(":n")
        )
    };
    let runs = [
        ("retention_cost", script("kept")),
        ("retention_cost", script("retained")),
    ];
    let (rounds, seconds) = (bench.options.append_rounds, bench.options.append_seconds);
    eprintln!("retention: appends with and without a policy");
    let rates = alternate(bench, &runs, rounds, seconds);
    let kept_chunks = size(
        &mut client,
        "(SELECT count(*) FROM chunked_map.archived_chunk WHERE map = 'retained')",
    );
    let _ = writeln!(
        out,
        "Appends (1 client, synchronous_commit off, {seconds} s × {rounds} rounds, median) to a map of 20,000 records \
         with no policy, and to one keeping its newest 10,000 (a chunk of 100 removed at every rollover, \
         {kept_chunks:.0} archived chunks kept at the end):\n"
    );
    let _ = writeln!(out, "| map | appends/s |");
    let _ = writeln!(out, "|---|---:|");
    let _ = writeln!(out, "| no retention | {:.0} |", median(rates[0].clone()));
    let _ = writeln!(
        out,
        "| retention at every rollover | {:.0} |",
        median(rates[1].clone())
    );
    let _ = writeln!(
        out,
        "\nRetained ÷ unretained, same round: **{:.2}**.\n",
        ratio(&rates, 1, 0)
    );
    out
}

pub fn section_h(bench: &mut Bench) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "### H. The feed across maps\n");
    // append cost: no consumer in the database; a consumer of another category (the map is
    // not followed); a consumer of the map's category (followed)
    for (database, subscribe) in [
        ("feed_none", None),
        ("feed_unfollowed", Some("other")),
        ("feed_followed", Some("bench")),
    ] {
        let mut client = bench.cluster.database(database);
        client
            .batch_execute("SELECT chunked_map.chunked_start('bench-1', 100)")
            .unwrap();
        if let Some(category) = subscribe {
            client
                .execute(
                    "SELECT chunked_map.chunked_subscribe('c', $1, false)",
                    &[&category],
                )
                .unwrap();
        }
        load(&mut client, "bench-1", 10_000);
        client.batch_execute("VACUUM ANALYZE").unwrap();
    }
    let script = format!(
        "\\set n random(1, 1000000)\nSELECT chunked_map.chunked_register('bench-1', {});\n",
        payload(":n")
    );
    let runs = [
        ("feed_none", script.clone()),
        ("feed_unfollowed", script.clone()),
        ("feed_followed", script.clone()),
    ];
    let (rounds, seconds) = (bench.options.append_rounds, bench.options.append_seconds);
    eprintln!("feed: appends to maps no one follows, and followed");
    let rates = alternate(bench, &runs, rounds, seconds);
    let _ = writeln!(
        out,
        "Appends (1 client, synchronous_commit off, {seconds} s × {rounds} rounds, median), each database with one map of 10,000 records:\n"
    );
    let _ = writeln!(out, "| database | appends/s |");
    let _ = writeln!(out, "|---|---:|");
    for ((name, _), rate) in [
        ("no consumer at all", ()),
        ("a consumer of another category (map not followed)", ()),
        ("a consumer of the map's category (followed)", ()),
    ]
    .iter()
    .zip(&rates)
    {
        let _ = writeln!(out, "| {name} | {:.0} |", median(rate.clone()));
    }
    let _ = writeln!(
        out,
        "\nUnfollowed ÷ no consumer: **{:.2}**; followed ÷ unfollowed: **{:.2}** (same round).\n",
        ratio(&rates, 1, 0),
        ratio(&rates, 2, 1)
    );

    // poll cost among 10 and 10,000 maps (each holding 100 records the consumer has had)
    let mut poll_rates = Vec::new();
    for maps in [10_i64, 10_000] {
        let database = format!("feed_poll_{maps}");
        let mut client = bench.cluster.database(&database);
        client
            .batch_execute("SELECT chunked_map.chunked_subscribe('c', 'idle', true)")
            .unwrap();
        // 500 maps per transaction: a transaction holds the lock of every name it starts
        // until it ends (docs/sizes.md)
        for first in (1..=maps).step_by(500) {
            let last = (first + 499).min(maps);
            client
                .batch_execute(&format!(
                    "SELECT chunked_map.chunked_start('idle-' || n, 100) FROM generate_series({first}, {last}) AS n"
                ))
                .unwrap();
            client
                .batch_execute(&format!(
                    "SELECT count(*) FROM generate_series({first}, {last}) AS n,
                         chunked_map.chunked_register_many('idle-' || n, ARRAY(SELECT {} FROM generate_series(1, 100) AS g))",
                    payload("g")
                ))
                .unwrap();
        }
        client
            .batch_execute("SELECT chunked_map.chunked_start('idle-active', 100)")
            .unwrap();
        // the consumer catches up with all of it
        loop {
            let got: i64 = client
                .query_one(
                    "SELECT count(*) FROM chunked_map.chunked_poll('c', 10000)",
                    &[],
                )
                .unwrap()
                .get(0);
            if got == 0 {
                break;
            }
        }
        client.batch_execute("VACUUM ANALYZE").unwrap();
        poll_rates.push(database);
    }
    let poll_script = format!(
        "\\set n random(1, 1000000)\nSELECT chunked_map.chunked_register('idle-active', {});\nSELECT count(*) FROM chunked_map.chunked_poll('c');\n",
        payload(":n")
    );
    let runs: Vec<(&str, String)> = poll_rates
        .iter()
        .map(|database| (database.as_str(), poll_script.clone()))
        .collect();
    eprintln!("feed: an append and a poll among 10 and 10,000 maps");
    let rates = alternate(bench, &runs, rounds, seconds);
    let _ = writeln!(
        out,
        "A poll among idle maps: each transaction appends one record to one map and polls it (1 client, {seconds} s × {rounds} rounds, median); \
         the idle maps hold 100 records each, all delivered:\n"
    );
    let _ = writeln!(out, "| idle maps (records in them) | append + poll /s |");
    let _ = writeln!(out, "|---|---:|");
    let _ = writeln!(out, "| 10 (1,000) | {:.0} |", median(rates[0].clone()));

    let _ = writeln!(
        out,
        "| 10,000 (1,000,000) | {:.0} |",
        median(rates[1].clone())
    );
    let _ = writeln!(
        out,
        "\n10,000 maps ÷ 10 maps: **{:.2}**.\n",
        ratio(&rates, 1, 0)
    );

    // what the feed keeps after `big` appends, a consumer keeping up
    let big = bench.options.big;
    let mut client = bench.cluster.database("feed_storage");
    client
        .batch_execute(
            "SELECT chunked_map.chunked_subscribe('c', 'load', false);
             SELECT chunked_map.chunked_start('load-' || n, 100) FROM generate_series(1, 100) AS n;",
        )
        .unwrap();
    let mut consumer = bench.cluster.connect("feed_storage");
    let mut delivered = 0_i64;
    let began = Instant::now();
    for call in 0..(big / 100) {
        client
            .execute(
                &format!(
                    "SELECT count(*) FROM chunked_map.chunked_register_many('load-' || ($1::bigint % 100 + 1),
                         ARRAY(SELECT {} FROM generate_series(1, 100) AS g))",
                    payload("g")
                ),
                &[&call],
            )
            .unwrap();
        if call % 10 == 9 {
            let got: i64 = consumer
                .query_one(
                    "SELECT count(*) FROM chunked_map.chunked_poll('c', 10000)",
                    &[],
                )
                .unwrap()
                .get(0);
            delivered += got;
        }
    }
    loop {
        let got: i64 = consumer
            .query_one(
                "SELECT count(*) FROM chunked_map.chunked_poll('c', 10000)",
                &[],
            )
            .unwrap()
            .get(0);
        if got == 0 {
            break;
        }
        delivered += got;
    }
    let took = began.elapsed();
    let feed_tables = "pg_total_relation_size('chunked_map.map_change')
         + pg_total_relation_size('chunked_map.consumer_position')
         + pg_total_relation_size('chunked_map.consumer_horizon')
         + pg_total_relation_size('chunked_map.consumer')";
    let feed_before = size(&mut client, feed_tables);
    client.batch_execute("VACUUM").unwrap();
    let feed_after = size(&mut client, feed_tables);
    let moves = size(&mut client, "(SELECT count(*) FROM chunked_map.map_change)");
    let _ = writeln!(
        out,
        "What the feed keeps: {big} records appended to 100 maps in {} calls of 100 while one consumer keeps up \
         ({delivered} delivered, {:.1} s): the feed's tables (moves, positions, horizons, consumers) hold \
         **{:.0} kB** ({moves:.0} rows of moves: one per map), {:.0} kB after a VACUUM.\n",
        big / 100,
        took.as_secs_f64(),
        feed_before / 1024.0,
        feed_after / 1024.0
    );

    // a long-open transaction: polls look at every map moved since it began (delivery goes on)
    let mut client = bench.cluster.database("feed_long");
    client
        .batch_execute(
            "SELECT chunked_map.chunked_subscribe('c', 'busy', false);
             SELECT chunked_map.chunked_start('busy-' || n, 100) FROM generate_series(1, 1000) AS n;",
        )
        .unwrap();
    let poll_ms = |client: &mut Client, long: bool| -> (f64, i64) {
        let mut idle = bench.cluster.connect("feed_long");
        if long {
            idle.batch_execute(
                "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT pg_current_xact_id()",
            )
            .unwrap();
        }
        client
            .batch_execute(&format!(
                "SELECT chunked_map.chunked_register('busy-' || n, {}) FROM generate_series(1, 1000) AS n",
                payload("n")
            ))
            .unwrap();
        let mut first = 0;
        let mut times = Vec::new();
        for i in 0..21 {
            if i > 0 {
                client
                    .batch_execute(&format!(
                        "SELECT chunked_map.chunked_register('busy-1', {})",
                        payload("1")
                    ))
                    .unwrap();
            }
            let began = Instant::now();
            let got: i64 = client
                .query_one(
                    "SELECT count(*) FROM chunked_map.chunked_poll('c', 10000)",
                    &[],
                )
                .unwrap()
                .get(0);
            if i == 0 {
                first = got;
            } else {
                times.push(began.elapsed().as_secs_f64() * 1000.0);
            }
        }
        if long {
            idle.batch_execute("COMMIT").unwrap();
        }
        (median(times), first)
    };
    let (without, first_without) = poll_ms(&mut client, false);
    let (with, first_with) = poll_ms(&mut client, true);
    let _ = writeln!(
        out,
        "A long-open transaction (REPEATABLE READ, holding an old snapshot) while 1,000 maps move: it delays nothing \
         that committed — the first poll after the moves delivers {first_with} records with it open, {first_without} without — \
         but until it ends every poll looks again at every map moved since it began: a poll that delivers one record \
         takes **{with:.2} ms** with it open, **{without:.2} ms** without (median of 20).\n"
    );
    out
}
