//! chunked_map benchmark: appends, contention, page latency and bytes, against a plain INSERT
//! into an events table and a growing jsonb array, interleaved in one run on one throw-away
//! cluster, medians of several rounds. Prints a markdown table (and writes it to
//! bench/results/latest.md). Run by bench/run.sh, which installs the release build first.
//!
//! Usage: chunked_map_bench [--append-rounds N] [--append-seconds S] [--rounds N] [--seconds S] [--quick]
//!        [--appends-only | --retention-and-feed]

mod http;
mod pgbench;
mod shedding_and_feed;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use chunked_map_cluster_tests::{repo_root, Client, Cluster};
use pgbench::{Length, Outcome, Run};

/// A ~230-byte subscriber record, the same expression in every variant.
pub(crate) fn payload(n: &str) -> String {
    format!(
        "jsonb_build_object('email', 'user' || {n} || '@example.com', 'name', 'Subscriber number ' || {n}, \
         'plan', 'pro', 'source', 'newsletter-signup-form', 'referrer', 'https://example.com/landing/spring', \
         'signed_up_at', '2026-11-30T01:23:45Z', 'tags', jsonb_build_array('early-adopter', 'eu', 'weekly'))"
    )
}

pub(crate) struct Options {
    /// Section A alternates many short runs: this machine's speed drifts over seconds, and a
    /// ratio taken between adjacent short runs cancels most of the drift.
    pub(crate) append_rounds: usize,
    pub(crate) append_seconds: u32,
    rounds: usize,
    seconds: u32,
    pub(crate) big: i64,
    mid: i64,
    bytes_records: u64,
    load_records: u64,
    /// Section A only, printed and not written to the results file: for comparing changes.
    appends_only: bool,
    /// Sections G and H only (retention and the feed), written to
    /// bench/results/retention-and-feed.md.
    retention_and_feed_only: bool,
}

impl Options {
    fn from_args() -> Options {
        let args: Vec<String> = std::env::args().skip(1).collect();
        fn value<T: std::str::FromStr>(args: &[String], flag: &str) -> Option<T> {
            args.iter()
                .position(|a| a == flag)
                .and_then(|i| args.get(i + 1))
                .and_then(|v| v.parse().ok())
        }
        // --quick: smaller maps and shorter runs (flags given explicitly still apply)
        let quick = args.iter().any(|a| a == "--quick");
        Options {
            append_rounds: value(&args, "--append-rounds").unwrap_or(if quick { 2 } else { 8 }),
            append_seconds: value(&args, "--append-seconds").unwrap_or(if quick { 1 } else { 2 }),
            rounds: value(&args, "--rounds").unwrap_or(if quick { 1 } else { 3 }),
            seconds: value(&args, "--seconds").unwrap_or(if quick { 2 } else { 5 }),
            big: if quick { 100_000 } else { 1_000_000 },
            mid: if quick { 10_000 } else { 100_000 },
            bytes_records: if quick { 20_000 } else { 100_000 },
            load_records: if quick { 20_000 } else { 200_000 },
            appends_only: args.iter().any(|a| a == "--appends-only"),
            retention_and_feed_only: args.iter().any(|a| a == "--retention-and-feed"),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Variant {
    PlainInsert,
    Naive,
    Chunked,
    /// The released 0.3.0, installed by bench/baseline.sh as extension chunked_map_v030 in a
    /// database of its own.
    ChunkedV030,
    ChunkedBatch100,
    /// (0.5) `chunked_register_once`, each record with a new id (a UUID).
    ChunkedOnce,
}

/// The database the baseline extension lives in.
const BASELINE_DATABASE: &str = "bench_v030";

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::PlainInsert => "plain_insert",
            Variant::Naive => "naive jsonb array",
            Variant::Chunked => "chunked_register",
            Variant::ChunkedV030 => "chunked_register, 0.3.0",
            Variant::ChunkedBatch100 => "chunked_register_many (100/call)",
            Variant::ChunkedOnce => "chunked_register_once (an id each)",
        }
    }

    fn records_per_transaction(self) -> f64 {
        if self == Variant::ChunkedBatch100 {
            100.0
        } else {
            1.0
        }
    }

    fn database(self) -> &'static str {
        if self == Variant::ChunkedV030 {
            BASELINE_DATABASE
        } else {
            "bench"
        }
    }

    fn script(self) -> String {
        let one = payload(":n");
        match self {
            Variant::PlainInsert => {
                format!("\\set n random(1, 1000000)\nINSERT INTO bench.events (map, payload) VALUES (:map, {one});\n")
            }
            Variant::Naive => format!(
                "\\set n random(1, 1000000)\nUPDATE bench.naive SET items = items || jsonb_build_array({one}) WHERE map = :map;\n"
            ),
            Variant::Chunked | Variant::ChunkedV030 => {
                format!("\\set n random(1, 1000000)\nSELECT chunked_map.chunked_register(:map, {one});\n")
            }
            Variant::ChunkedBatch100 => format!(
                "\\set n random(1, 1000000)\nSELECT count(*) FROM chunked_map.chunked_register_many(:map, \
                 ARRAY(SELECT {} FROM generate_series(1, 100) AS i));\n",
                payload("(:n + i)")
            ),
            Variant::ChunkedOnce => format!(
                "\\set n random(1, 1000000)\nSELECT seq FROM chunked_map.chunked_register_once(:map, {one}, gen_random_uuid()::text);\n"
            ),
        }
    }
}

pub(crate) struct Bench {
    pub(crate) cluster: Cluster,
    client: Client,
    /// A connection to the baseline's database, when the baseline is installed.
    baseline: Option<Client>,
    work: PathBuf,
    pub(crate) options: Options,
    fresh_maps: usize,
}

impl Bench {
    fn sql(&mut self, sql: &str) {
        self.client
            .batch_execute(sql)
            .unwrap_or_else(|e| panic!("{sql}: {e:?}"));
    }

    fn wal_lsn(&mut self) -> i64 {
        self.client
            .query_one(
                "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint",
                &[],
            )
            .unwrap()
            .get(0)
    }

    pub(crate) fn pgbench(&self, database: &str, run: &Run<'_>) -> Outcome {
        pgbench::run(&self.cluster, database, &self.work, run)
    }

    /// A map with no record yet, ready for `variant`.
    fn fresh_map(&mut self, variant: Variant) -> String {
        self.fresh_maps += 1;
        let map = format!("fresh{}", self.fresh_maps);
        match variant {
            Variant::PlainInsert => {}
            Variant::Naive => self.sql(&format!("INSERT INTO bench.naive VALUES ('{map}', '[]')")),
            Variant::Chunked | Variant::ChunkedBatch100 | Variant::ChunkedOnce => {
                self.sql(&format!("SELECT chunked_map.chunked_start('{map}')"))
            }
            Variant::ChunkedV030 => {
                if let Some(baseline) = self.baseline.as_mut() {
                    baseline
                        .batch_execute(&format!("SELECT chunked_map.chunked_start('{map}')"))
                        .expect("start a baseline map");
                }
            }
        }
        map
    }
}

fn main() {
    let began = Instant::now();
    let options = Options::from_args();
    let cluster = Cluster::start_with(&[
        "shared_buffers=1GB",
        "max_wal_size=16GB",
        "checkpoint_timeout=1h",
        "max_connections=40",
    ]);
    let work = cluster.socket_dir().join("bench");
    std::fs::create_dir_all(&work).expect("work directory");
    let client = cluster.database("bench");
    let baseline = baseline_database(&cluster);
    let mut bench = Bench {
        cluster,
        client,
        baseline,
        work,
        options,
        fresh_maps: 0,
    };

    if bench.options.retention_and_feed_only {
        eprintln!("retention ({:?})", began.elapsed());
        let retention = shedding_and_feed::section_g(&mut bench);
        eprintln!("feed ({:?})", began.elapsed());
        let feed = shedding_and_feed::section_h(&mut bench);
        let report = format!(
            "{}\n{retention}\n{feed}\nWhole run: {:.1} minutes.\n",
            machine(),
            began.elapsed().as_secs_f64() / 60.0
        );
        println!("{report}");
        let out = repo_root().join("bench/results/retention-and-feed.md");
        std::fs::write(&out, &report).expect("write report");
        eprintln!("written to {}", out.display());
        return;
    }
    eprintln!("setting up and prefilling ({:?})", began.elapsed());
    setup(&mut bench);
    let appends = section_a(&mut bench);
    if bench.options.appends_only {
        println!("{}\n{appends}", machine());
        return;
    }
    eprintln!("contention ({:?})", began.elapsed());
    let contention = section_b(&mut bench);
    eprintln!("page latency ({:?})", began.elapsed());
    let pages = section_c(&mut bench);
    eprintln!("bytes ({:?})", began.elapsed());
    let bytes = section_d(&mut bench);
    eprintln!("batch loads ({:?})", began.elapsed());
    let loads = section_e(&mut bench);
    eprintln!("notifications ({:?})", began.elapsed());
    let notify = section_f(&mut bench);
    eprintln!("retention ({:?})", began.elapsed());
    let retention = shedding_and_feed::section_g(&mut bench);
    eprintln!("feed ({:?})", began.elapsed());
    let feed = shedding_and_feed::section_h(&mut bench);
    eprintln!("HTTP load ({:?})", began.elapsed());
    let http = http::section(
        &bench.cluster,
        &bench.work,
        bench.options.rounds,
        bench.options.seconds * 2,
    )
    .unwrap_or_default();

    let report = format!(
        "{}\n{appends}\n{contention}\n{pages}\n{bytes}\n{loads}\n{notify}\n{retention}\n{feed}\n{http}\nWhole run: {:.1} minutes.\n",
        machine(),
        began.elapsed().as_secs_f64() / 60.0
    );
    println!("{report}");
    let out = repo_root().join("bench/results/latest.md");
    std::fs::create_dir_all(out.parent().expect("results directory")).expect("results directory");
    std::fs::write(&out, &report).expect("write report");
    eprintln!("written to {}", out.display());
}

/// The baseline's database, when bench/baseline.sh installed it; otherwise the benchmark runs
/// without the A/B columns and says so.
fn baseline_database(cluster: &Cluster) -> Option<Client> {
    let mut postgres = cluster.connect("postgres");
    let available: i64 = postgres
        .query_one(
            "SELECT count(*) FROM pg_available_extensions WHERE name = 'chunked_map_v030'",
            &[],
        )
        .unwrap()
        .get(0);
    if available == 0 {
        eprintln!(
            "chunked_map_v030 is not installed (bench/baseline.sh): no comparison with 0.3.0"
        );
        return None;
    }
    postgres
        .batch_execute(&format!("CREATE DATABASE {BASELINE_DATABASE}"))
        .unwrap();
    let mut client = cluster.connect(BASELINE_DATABASE);
    client
        .batch_execute("CREATE EXTENSION chunked_map_v030")
        .unwrap();
    Some(client)
}

fn setup(bench: &mut Bench) {
    let (mid, big) = (bench.options.mid, bench.options.big);
    bench.sql(
        "CREATE SCHEMA bench;
         CREATE TABLE bench.events (map text, id bigserial, payload jsonb);
         CREATE INDEX ON bench.events (map, id);
         CREATE TABLE bench.naive (map text PRIMARY KEY, items jsonb NOT NULL);",
    );
    for (map, count) in [("mid", mid), ("big", big)] {
        bench.sql(&format!(
            "INSERT INTO bench.events (map, payload) SELECT '{map}', {} FROM generate_series(1, {count}) AS g;
             SELECT chunked_map.chunked_start('{map}');",
            payload("g")
        ));
        let mut done = 0;
        while done < count {
            let batch = (count - done).min(10_000);
            bench.sql(&format!(
                "SELECT count(*) FROM chunked_map.chunked_register_many('{map}',
                     ARRAY(SELECT {} FROM generate_series({}, {}) AS g))",
                payload("g"),
                done + 1,
                done + batch
            ));
            done += batch;
        }
    }
    bench.sql(&format!(
        "INSERT INTO bench.naive SELECT 'mid', jsonb_agg({}) FROM generate_series(1, {mid}) AS g",
        payload("g")
    ));
    bench.sql("VACUUM ANALYZE");
    if let Some(baseline) = bench.baseline.as_mut() {
        // the same maps in the baseline's database, loaded in calls of 1,000 (as 0.2.0 needed:
        // its batch append re-read its whole array for every chunk it filled)
        for (map, count) in [("mid", mid), ("big", big)] {
            baseline
                .batch_execute(&format!("SELECT chunked_map.chunked_start('{map}')"))
                .unwrap();
            for start in (1..=count).step_by(1000) {
                baseline
                    .batch_execute(&format!(
                        "SELECT count(*) FROM chunked_map.chunked_register_many('{map}',
                             ARRAY(SELECT {} FROM generate_series({start}, {}) AS g))",
                        payload("g"),
                        (start + 999).min(count)
                    ))
                    .unwrap();
            }
        }
        baseline.batch_execute("VACUUM ANALYZE").unwrap();
    }
    bench.sql("CHECKPOINT");
}

pub(crate) fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

pub(crate) fn sync_option(on: bool) -> String {
    format!("-c synchronous_commit={}", if on { "on" } else { "off" })
}

/// A. Single-client appends at 0, mid and big records already in the map.
fn section_a(bench: &mut Bench) -> String {
    let sizes = [
        ("0", None),
        ("100,000", Some("mid")),
        ("1,000,000", Some("big")),
    ];
    let mut configs = Vec::new();
    for sync in [false, true] {
        for (label, map) in sizes {
            for variant in [
                Variant::PlainInsert,
                Variant::Naive,
                Variant::Chunked,
                Variant::ChunkedOnce,
                Variant::ChunkedV030,
                Variant::ChunkedBatch100,
            ] {
                // the naive array is measured where it is still measurable, once
                let skip = (variant == Variant::Naive && (map == Some("big") || sync))
                    || (variant == Variant::ChunkedBatch100 && map.is_some())
                    || (variant == Variant::ChunkedV030 && bench.baseline.is_none());
                if !skip {
                    configs.push((sync, label, map, variant));
                }
            }
        }
    }
    // Each variant's rate, and its ratio to plain_insert measured in the same round (runs of one
    // round are adjacent, so the ratio cancels most of the machine's drift).
    let mut records_per_second: BTreeMap<(bool, &str, Variant), Vec<f64>> = BTreeMap::new();
    let mut ratio_to_plain: BTreeMap<(bool, &str, Variant), Vec<f64>> = BTreeMap::new();
    let mut wal_per_record: BTreeMap<(bool, &str, Variant), Vec<f64>> = BTreeMap::new();
    let seconds = bench.options.append_seconds;
    let rounds = bench.options.append_rounds;
    for round in 0..rounds {
        eprintln!("appends, round {} of {rounds}", round + 1);
        for &(sync, label, map, variant) in &configs {
            let map = match map {
                Some(map) => map.to_string(),
                None => bench.fresh_map(variant),
            };
            let before = bench.wal_lsn();
            let script = variant.script();
            let outcome = bench.pgbench(
                variant.database(),
                &Run {
                    script: &script,
                    clients: 1,
                    length: Length::Seconds(seconds),
                    defines: vec![("map".into(), map)],
                    options: sync_option(sync),
                    retry: false,
                    log_dir: None,
                },
            );
            let wal = (bench.wal_lsn() - before) as f64;
            let records = outcome.transactions as f64 * variant.records_per_transaction();
            let key = (sync, label, variant);
            let rate = outcome.tps * variant.records_per_transaction();
            records_per_second.entry(key).or_default().push(rate);
            wal_per_record
                .entry(key)
                .or_default()
                .push(wal / records.max(1.0));
            let plain = records_per_second[&(sync, label, Variant::PlainInsert)][round];
            ratio_to_plain.entry(key).or_default().push(rate / plain);
        }
    }
    let ratio = |key: (bool, &str, Variant)| median(ratio_to_plain[&key].clone());

    let mut out = String::new();
    let _ = writeln!(
        out,
        "### A. Single-client appends (pgbench -M prepared, 1 client, {seconds} s × {rounds} rounds; medians, ratios taken within each round)\n"
    );
    let _ = writeln!(out, "| synchronous_commit | records in map | variant | records/s | × plain_insert | WAL bytes/record |");
    let _ = writeln!(out, "|---|---|---|---:|---:|---:|");
    for &(sync, label, _, variant) in &configs {
        let rate = median(records_per_second[&(sync, label, variant)].clone());
        let wal = median(wal_per_record[&(sync, label, variant)].clone());
        let _ = writeln!(
            out,
            "| {} | {label} | {} | {rate:.0} | {:.2} | {wal:.0} |",
            if sync { "on" } else { "off" },
            variant.name(),
            ratio((sync, label, variant))
        );
    }
    let per_round = |a: (bool, &str, Variant), b: (bool, &str, Variant)| {
        median(
            records_per_second[&a]
                .iter()
                .zip(&records_per_second[&b])
                .map(|(x, y)| x / y)
                .collect(),
        )
    };
    let flat = per_round(
        (false, "1,000,000", Variant::Chunked),
        (false, "0", Variant::Chunked),
    );
    let batch = per_round(
        (false, "0", Variant::ChunkedBatch100),
        (false, "0", Variant::Chunked),
    );
    let flat_once = per_round(
        (false, "1,000,000", Variant::ChunkedOnce),
        (false, "0", Variant::ChunkedOnce),
    );
    let once = per_round(
        (false, "0", Variant::ChunkedOnce),
        (false, "0", Variant::Chunked),
    );
    let _ = writeln!(
        out,
        "\nchunked_register at 1,000,000 records ÷ at 0 records (synchronous_commit off, same round): **{flat:.2}**. \
         chunked_register_many with 100 records per call ÷ chunked_register, records/s: **{batch:.1}×**. \
         chunked_register_once (an id each) at 1,000,000 ÷ at 0: **{flat_once:.2}**; ÷ chunked_register at 0: **{once:.2}**."
    );
    if bench.baseline.is_some() {
        let _ = write!(
            out,
            "\nchunked_register 0.4 ÷ 0.3.0, records/s in the same round (synchronous_commit off / on):"
        );
        for (label, _) in sizes {
            let _ = write!(
                out,
                " {label} records **{:.2}** / **{:.2}**;",
                per_round(
                    (false, label, Variant::Chunked),
                    (false, label, Variant::ChunkedV030)
                ),
                per_round(
                    (true, label, Variant::Chunked),
                    (true, label, Variant::ChunkedV030)
                ),
            );
        }
        let _ = writeln!(out);
    } else {
        let _ = writeln!(
            out,
            "\n(0.3.0 not measured: bench/baseline.sh did not install chunked_map_v030.)"
        );
    }
    out
}

/// B. Contention: 8 clients on 8 maps, and 8 clients on one map.
fn section_b(bench: &mut Bench) -> String {
    for client in 0..8 {
        bench.sql(&format!(
            "SELECT chunked_map.chunked_start('eight{client}')"
        ));
    }
    bench.sql("SELECT chunked_map.chunked_start('one')");
    let eight_maps = "('eight' || :client_id)";
    let plain = |map: &str| {
        format!("\\set n random(1, 1000000)\nINSERT INTO bench.events (map, payload) VALUES ({map}, {});\n", payload(":n"))
    };
    let chunked = |map: &str| {
        format!(
            "\\set n random(1, 1000000)\nSELECT chunked_map.chunked_register({map}, {});\n",
            payload(":n")
        )
    };
    let configs: Vec<(&str, String, &str)> = vec![
        ("plain_insert, 8 clients, 8 maps", plain(eight_maps), ""),
        (
            "chunked_register, 8 clients, 8 maps",
            chunked(eight_maps),
            "",
        ),
        ("plain_insert, 8 clients, 1 map", plain("'one'"), ""),
        (
            "chunked_register, 8 clients, 1 map, NOWAIT (default), retry on 40001",
            chunked("'one'"),
            "",
        ),
        (
            "chunked_register, 8 clients, 1 map, chunked_map.lock_timeout = 50ms",
            chunked("'one'"),
            "-c chunked_map.lock_timeout=50ms",
        ),
        (
            "chunked_register, 8 clients, 1 map, blocking FOR UPDATE (lock_timeout = 1h)",
            chunked("'one'"),
            "-c chunked_map.lock_timeout=1h",
        ),
    ];
    let mut results: Vec<Vec<Outcome>> = vec![Vec::new(); configs.len()];
    let seconds = bench.options.seconds;
    for round in 0..bench.options.rounds {
        eprintln!(
            "contention, round {} of {}",
            round + 1,
            bench.options.rounds
        );
        for (i, (_, script, options)) in configs.iter().enumerate() {
            let outcome = bench.pgbench(
                "bench",
                &Run {
                    script,
                    clients: 8,
                    length: Length::Seconds(seconds),
                    defines: vec![],
                    options: format!("{} {options}", sync_option(true)),
                    retry: true,
                    log_dir: None,
                },
            );
            results[i].push(outcome);
        }
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "### B. Contention (8 clients, synchronous_commit on, pgbench --max-tries=0 retries 40001, {seconds} s × {} rounds, median)\n",
        bench.options.rounds
    );
    let _ = writeln!(
        out,
        "| workload | commits/s | retries per commit | failed transactions |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|");
    let mut commits = Vec::new();
    for ((name, _, _), outcomes) in configs.iter().zip(&results) {
        let tps = median(outcomes.iter().map(|o| o.tps).collect());
        let retries = median(
            outcomes
                .iter()
                .map(|o| o.retries as f64 / (o.transactions.max(1)) as f64)
                .collect(),
        );
        let failed: u64 = outcomes.iter().map(|o| o.failed).sum();
        commits.push(tps);
        let _ = writeln!(out, "| {name} | {tps:.0} | {retries:.2} | {failed} |");
    }
    let _ = writeln!(
        out,
        "\nOne map, lock_timeout = 50ms ÷ blocking FOR UPDATE: **{:.2}**; NOWAIT with retries ÷ blocking: **{:.2}**.",
        commits[4] / commits[5],
        commits[3] / commits[5]
    );
    out
}

/// C. Page latency on the map of `big` records.
fn section_c(bench: &mut Bench) -> String {
    let configs = [
        ("chunked_page, current", "SELECT chunked_map.chunked_page(:map, 'current');\n".to_string()),
        (
            "chunked_page, archived token (random chunk)",
            format!(
                "\\set k random(0, {})\nSELECT chunked_map.chunked_page(:map, lpad((:k * 100 + 1)::text, 20, '0'));\n",
                bench.options.big / 100 - 1
            ),
        ),
        (
            "reference: plain_insert table, newest 100 as JSON",
            "SELECT jsonb_agg(jsonb_build_object('seq', e.id, 'payload', e.payload)) FROM \
             (SELECT id, payload FROM bench.events WHERE map = :map ORDER BY id DESC LIMIT 100) AS e;\n"
                .to_string(),
        ),
    ];
    let mut p50 = vec![Vec::new(); configs.len()];
    let mut p95 = vec![Vec::new(); configs.len()];
    let seconds = bench.options.seconds;
    for round in 0..bench.options.rounds {
        for (i, (_, script)) in configs.iter().enumerate() {
            let log_dir = bench.work.join(format!("latency-{round}-{i}"));
            bench.pgbench(
                "bench",
                &Run {
                    script,
                    clients: 1,
                    length: Length::Seconds(seconds),
                    defines: vec![("map".into(), "big".into())],
                    options: String::new(),
                    retry: false,
                    log_dir: Some(log_dir.clone()),
                },
            );
            let latencies = pgbench::latencies_us(&log_dir);
            let at = |q: f64| {
                latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)] as f64
            };
            p50[i].push(at(0.50) / 1000.0);
            p95[i].push(at(0.95) / 1000.0);
        }
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "### C. Page latency, map of {} records, chunk size 100 (1 client, latency seen by the client, {seconds} s × {} rounds, median)\n",
        bench.options.big,
        bench.options.rounds
    );
    let _ = writeln!(out, "| read | p50 ms | p95 ms |");
    let _ = writeln!(out, "|---|---:|---:|");
    for (i, (name, _)) in configs.iter().enumerate() {
        let _ = writeln!(
            out,
            "| {name} | {:.3} | {:.3} |",
            median(p50[i].clone()),
            median(p95[i].clone())
        );
    }
    out
}

/// D. Bytes per record after `bytes_records` appends through the API, and WAL per append.
fn section_d(bench: &mut Bench) -> String {
    let records = bench.options.bytes_records;
    let mut client = bench.cluster.database("bytes");
    client
        .batch_execute(
            "CREATE TABLE events (map text, id bigserial, payload jsonb);
             CREATE INDEX ON events (map, id);
             SELECT chunked_map.chunked_start('bytes');",
        )
        .unwrap();
    let wal_lsn = |client: &mut Client| -> i64 {
        client
            .query_one(
                "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint",
                &[],
            )
            .unwrap()
            .get(0)
    };
    let mut wal = BTreeMap::new();
    let scripts = [
        (
            "plain_insert",
            format!("\\set n random(1, 1000000)\nINSERT INTO events (map, payload) VALUES ('bytes', {});\n", payload(":n")),
            "events",
        ),
        (
            "chunked_register",
            format!("\\set n random(1, 1000000)\nSELECT chunked_map.chunked_register('bytes', {});\n", payload(":n")),
            "chunked_map.map_state, chunked_map.current_record, chunked_map.archived_chunk",
        ),
    ];
    // Appends in ten slices, each followed by the VACUUM that autovacuum would run: the
    // rollovers leave dead rows in the current chunk's table, and reclaiming them (and the WAL
    // that costs) is part of what an append costs.
    const SLICES: u64 = 10;
    for (name, script, tables) in &scripts {
        client.batch_execute("CHECKPOINT").unwrap();
        let before = wal_lsn(&mut client);
        for _ in 0..SLICES {
            bench.pgbench(
                "bytes",
                &Run {
                    script,
                    clients: 1,
                    length: Length::Transactions(records / SLICES),
                    defines: vec![],
                    options: sync_option(false),
                    retry: false,
                    log_dir: None,
                },
            );
            client.batch_execute(&format!("VACUUM {tables}")).unwrap();
        }
        wal.insert(
            *name,
            (wal_lsn(&mut client) - before) as f64 / records as f64,
        );
    }
    client
        .batch_execute(&format!(
            "CREATE TABLE naive (map text PRIMARY KEY, items jsonb NOT NULL);
             INSERT INTO naive SELECT 'bytes', jsonb_agg({}) FROM generate_series(1, {records}) AS g;",
            payload("g")
        ))
        .unwrap();
    client.batch_execute("VACUUM ANALYZE").unwrap();
    let size = |client: &mut Client, sql: &str| -> f64 {
        client
            .query_one(&format!("SELECT ({sql})::float8"), &[])
            .unwrap()
            .get(0)
    };
    let plain = size(&mut client, "pg_total_relation_size('events')");
    let naive = size(&mut client, "pg_total_relation_size('naive')");
    let archived_heap = size(
        &mut client,
        "pg_relation_size('chunked_map.archived_chunk')",
    );
    let archived_toast = size(
        &mut client,
        "pg_total_relation_size((SELECT reltoastrelid FROM pg_class WHERE oid = 'chunked_map.archived_chunk'::regclass))",
    );
    let archived_index = size(&mut client, "pg_indexes_size('chunked_map.archived_chunk')");
    let current = size(
        &mut client,
        "pg_total_relation_size('chunked_map.current_record')",
    );
    let state = size(
        &mut client,
        "pg_total_relation_size('chunked_map.map_state')",
    );
    let chunked = archived_heap + archived_toast + archived_index + current + state;
    let per = |bytes: f64| bytes / records as f64;

    // (0.5) the same appends with an id each (a UUID's 36 characters), in a database of their
    // own: what the ids cost in the records and in what the map remembers (its newest 10,000)
    let mut with_ids = bench.cluster.database("bytes_ids");
    with_ids
        .batch_execute("SELECT chunked_map.chunked_start('bytes')")
        .unwrap();
    let once_script = format!(
        "\\set n random(1, 1000000)\nSELECT seq FROM chunked_map.chunked_register_once('bytes', {}, gen_random_uuid()::text);\n",
        payload(":n")
    );
    with_ids.batch_execute("CHECKPOINT").unwrap();
    let before = wal_lsn(&mut with_ids);
    for _ in 0..SLICES {
        bench.pgbench(
            "bytes_ids",
            &Run {
                script: &once_script,
                clients: 1,
                length: Length::Transactions(records / SLICES),
                defines: vec![],
                options: sync_option(false),
                retry: false,
                log_dir: None,
            },
        );
        with_ids
            .batch_execute("VACUUM chunked_map.map_state, chunked_map.current_record, chunked_map.archived_chunk, chunked_map.record_id")
            .unwrap();
    }
    let wal_with_ids = (wal_lsn(&mut with_ids) - before) as f64 / records as f64;
    with_ids.batch_execute("VACUUM ANALYZE").unwrap();
    let stored_with_ids = size(
        &mut with_ids,
        "pg_total_relation_size('chunked_map.archived_chunk') + pg_total_relation_size('chunked_map.current_record')
         + pg_total_relation_size('chunked_map.map_state')",
    );
    let remembered = size(
        &mut with_ids,
        "pg_total_relation_size('chunked_map.record_id')",
    );
    let remembered_ids = size(
        &mut with_ids,
        "(SELECT count(*) FROM chunked_map.record_id)",
    );

    let mut out = String::new();
    let _ = writeln!(out, "### D. Bytes after {records} appends (table + TOAST + indexes) and WAL per append, a VACUUM after every {} appends included\n", records / SLICES);
    let _ = writeln!(
        out,
        "| variant | bytes/record | × plain_insert | WAL bytes/append | × plain_insert |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|");
    let _ = writeln!(
        out,
        "| plain_insert | {:.1} | 1.00 | {:.0} | 1.00 |",
        per(plain),
        wal["plain_insert"]
    );
    let _ = writeln!(
        out,
        "| chunked_map | {:.1} | {:.2} | {:.0} | {:.2} |",
        per(chunked),
        chunked / plain,
        wal["chunked_register"],
        wal["chunked_register"] / wal["plain_insert"]
    );
    let _ = writeln!(
        out,
        "| chunked_map, each record with an id (36 characters) | {:.1} | {:.2} | {:.0} | {:.2} |",
        per(stored_with_ids + remembered),
        (stored_with_ids + remembered) / plain,
        wal_with_ids,
        wal_with_ids / wal["plain_insert"]
    );
    let _ = writeln!(
        out,
        "| naive jsonb array (built in one statement) | {:.1} | {:.2} | – | – |",
        per(naive),
        naive / plain
    );
    let _ = writeln!(
        out,
        "\nchunked_map bytes/record: archived chunks {:.1} (heap {:.1}, TOAST {:.1}, index {:.1}), current chunk {:.1}, state {:.1}.",
        per(archived_heap + archived_toast + archived_index),
        per(archived_heap),
        per(archived_toast),
        per(archived_index),
        per(current),
        per(state)
    );
    let _ = writeln!(
        out,
        "\nWith ids: records {:.1} bytes/record; the ids the map remembers (record_id, its newest {remembered_ids:.0}) {:.0} bytes, {:.1} per remembered id — bounded by the window, not by the {records} records.",
        per(stored_with_ids),
        remembered,
        remembered / remembered_ids.max(1.0)
    );
    out
}

/// E. Loading a map with chunked_register_many in calls of different sizes: records/s, and the
/// bytes the current chunk's table keeps after the load and a VACUUM (records that pass through
/// it leave dead rows behind).
fn section_e(bench: &mut Bench) -> String {
    let records = bench.options.load_records;
    let mut variants = vec![(Variant::Chunked, "chunked_map")];
    if bench.baseline.is_some() {
        variants.push((Variant::ChunkedV030, "chunked_map_v030"));
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "### E. Loading {records} records with chunked_register_many (chunk size 100, ~230-byte payloads, one client), then VACUUM\n"
    );
    let _ = writeln!(
        out,
        "| version | payloads per call | records/s | current_record bytes after VACUUM | archived_chunk bytes |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|");
    for (variant, extension) in variants {
        for per_call in [100_000_u64, 1_000] {
            let database = format!("load_{}_{per_call}", variant.database());
            bench
                .client
                .batch_execute(&format!("CREATE DATABASE {database}"))
                .unwrap();
            let mut client = bench.cluster.connect(&database);
            client
                .batch_execute(&format!(
                    "CREATE EXTENSION {extension}; SELECT chunked_map.chunked_start('load', 100)"
                ))
                .unwrap();
            let began = Instant::now();
            for start in (1..=records).step_by(per_call as usize) {
                client
                    .batch_execute(&format!(
                        "SELECT count(*) FROM chunked_map.chunked_register_many('load',
                             ARRAY(SELECT {} FROM generate_series({start}, {}) AS g))",
                        payload("g"),
                        (start + per_call - 1).min(records)
                    ))
                    .unwrap();
            }
            let rate = records as f64 / began.elapsed().as_secs_f64();
            client
                .batch_execute("VACUUM chunked_map.current_record, chunked_map.archived_chunk")
                .unwrap();
            let (current, archived): (i64, i64) = {
                let row = client
                    .query_one(
                        "SELECT pg_total_relation_size('chunked_map.current_record'),
                                pg_total_relation_size('chunked_map.archived_chunk')",
                        &[],
                    )
                    .unwrap();
                (row.get(0), row.get(1))
            };
            let _ = writeln!(
                out,
                "| {} | {per_call} | {rate:.0} | {current} | {archived} |",
                if variant == Variant::ChunkedV030 {
                    "0.3.0"
                } else {
                    "0.4"
                }
            );
        }
    }
    out
}

/// F. What notifications cost: appends to a map whose notifications are on against one whose
/// are off, from one client (ratio within each round) and from 8 clients on 8 maps (a notifying
/// commit takes PostgreSQL's global notify queue lock).
fn section_f(bench: &mut Bench) -> String {
    for (map, notify) in [("quiet", false), ("loud", true)] {
        bench.sql(&format!(
            "SELECT chunked_map.chunked_start('{map}'), chunked_map.chunked_set_notify('{map}', {notify})"
        ));
        for client in 0..8 {
            bench.sql(&format!(
                "SELECT chunked_map.chunked_start('{map}{client}'), chunked_map.chunked_set_notify('{map}{client}', {notify})"
            ));
        }
    }
    let one = |map: &str| {
        format!(
            "\\set n random(1, 1000000)\nSELECT chunked_map.chunked_register({map}, {});\n",
            payload(":n")
        )
    };
    let configs: Vec<(&str, String, u32, bool)> = vec![
        ("1 client, notifications off", one("'quiet'"), 1, false),
        ("1 client, notifications on", one("'loud'"), 1, false),
        (
            "8 clients on 8 maps, notifications off",
            one("('quiet' || :client_id)"),
            8,
            true,
        ),
        (
            "8 clients on 8 maps, notifications on",
            one("('loud' || :client_id)"),
            8,
            true,
        ),
    ];
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); configs.len()];
    let (rounds, seconds) = (bench.options.append_rounds, bench.options.append_seconds);
    for round in 0..rounds {
        eprintln!("notifications, round {} of {rounds}", round + 1);
        for (i, (_, script, clients, sync)) in configs.iter().enumerate() {
            let outcome = bench.pgbench(
                "bench",
                &Run {
                    script,
                    clients: *clients,
                    length: Length::Seconds(seconds),
                    defines: vec![],
                    options: sync_option(*sync),
                    retry: false,
                    log_dir: None,
                },
            );
            rates[i].push(outcome.tps);
        }
    }
    let ratio = |on: usize, off: usize| {
        median(
            rates[on]
                .iter()
                .zip(&rates[off])
                .map(|(a, b)| a / b)
                .collect(),
        )
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "### F. Notifications (chunked_set_notify): appends with notifications on and off ({seconds} s × {rounds} rounds, median; 1 client at synchronous_commit off, 8 clients at on)\n"
    );
    let _ = writeln!(out, "| workload | appends/s |");
    let _ = writeln!(out, "|---|---:|");
    for ((name, _, _, _), values) in configs.iter().zip(&rates) {
        let _ = writeln!(out, "| {name} | {:.0} |", median(values.clone()));
    }
    let _ = writeln!(
        out,
        "\nOn ÷ off, same round: 1 client **{:.2}**; 8 clients on 8 maps **{:.2}**.",
        ratio(1, 0),
        ratio(3, 2)
    );
    out
}

fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .unwrap_or("unknown")
        .trim()
        .to_string();
    let cores = cpuinfo
        .lines()
        .filter(|l| l.starts_with("processor"))
        .count();
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .next()
                .map(|l| l.split_whitespace().nth(1).unwrap_or("0").to_string())
        })
        .and_then(|kb| kb.parse::<f64>().ok())
        .map(|kb| format!("{:.0} GiB", kb / 1024.0 / 1024.0))
        .unwrap_or_default();
    let version = std::process::Command::new(chunked_map_cluster_tests::pg_bin("postgres"))
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let date = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    format!(
        "## chunked_map benchmark, {date}\n\n{cores} × {model}, {memory}; {version}; release build; \
         a throw-away cluster (shared_buffers 1GB, checkpoints only between runs); pgbench on the same machine.\n"
    )
}
