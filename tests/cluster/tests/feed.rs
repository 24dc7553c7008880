//! The feed across maps (docs/following.md, the contract's *Feed*) with real connections: every
//! committed record delivered exactly once per consumer whose polls commit, in order per map,
//! nothing of a rolled-back append, never a map of another category, never a map to two members
//! of a group; across writers with random rollbacks and long transactions, two consumer groups
//! polling at once, a member killed in the middle of a poll, a crash of the server, and a dump
//! restored elsewhere.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chunked_map_cluster_tests::dice::Dice;
use chunked_map_cluster_tests::{pg_bin, Client, Cluster};

const CATEGORIES: [&str; 3] = ["order", "account", "cart"];
const MAPS: usize = 200;
const WRITERS: usize = 8;
const APPENDS_PER_WRITER: usize = 600;

/// A record as delivered or appended: (map, seq, payload as text).
type Record = (String, i64, String);

fn map_name(i: usize) -> String {
    format!("{}-{}", CATEGORIES[i % CATEGORIES.len()], i)
}

fn category(map: &str) -> &str {
    map.split('-').next().unwrap_or(map)
}

/// One poll in its own transaction, committed: what it delivered (empty when nothing).
fn poll_committed(client: &mut Client, consumer: &str, member: i32, group: i32) -> Vec<Record> {
    let mut transaction = client.transaction().expect("begin");
    let rows = transaction
        .query(
            "SELECT map, seq, payload::text, trimmed FROM chunked_map.chunked_poll($1, 50, $2, $3)",
            &[&consumer, &member, &group],
        )
        .expect("poll");
    let records: Vec<Record> = rows
        .iter()
        .map(|row| {
            (
                row.get(0),
                row.get(1),
                row.get::<_, Option<String>>(2).expect("no gap here"),
            )
        })
        .collect();
    transaction.commit().expect("commit the poll");
    records
}

/// Appends what `dice` decides to maps, in transactions that commit or roll back; returns what
/// committed (as the writer saw its commits).
fn write(cluster: &Cluster, writer: usize, stop_long: &AtomicBool) -> Vec<Record> {
    let mut client = cluster.connect("feed");
    let mut dice = Dice(0x9e37_79b9_7f4a_7c15 ^ (writer as u64 + 1));
    let mut committed = Vec::new();
    let mut appended = 0;
    while appended < APPENDS_PER_WRITER {
        let map = map_name(dice.roll(MAPS as u64) as usize);
        let rollback = dice.roll(10) == 0;
        let batch = 1 + dice.roll(4) as usize;
        let long = writer == 0 && dice.roll(50) == 0 && !stop_long.load(Ordering::SeqCst);
        let mut transaction = client.transaction().expect("begin");
        let mut mine = Vec::new();
        let mut failed = false;
        for k in 0..batch {
            let payload = format!(
                r#"{{"writer": {writer}, "n": {appended}, "k": {k}, "rolled_back": {rollback}}}"#
            );
            match transaction.query_one(
                "SELECT chunked_map.chunked_register($1, $2::text::jsonb)",
                &[&map, &payload],
            ) {
                Ok(row) => {
                    let seq: i64 = row.get(0);
                    // as PostgreSQL renders the stored jsonb
                    let text: String = transaction
                        .query_one("SELECT $1::text::jsonb::text", &[&payload])
                        .expect("render")
                        .get(0);
                    mine.push((map.clone(), seq, text));
                }
                Err(error) if error.code().map(|c| c.code()) == Some("40001") => {
                    failed = true;
                    break;
                }
                Err(error) => panic!("append: {error}"),
            }
        }
        if long && !failed {
            // a long transaction: it holds the map, and its id, while the others go on (one
            // that met 40001 is aborted: it only rolls back)
            for _ in 0..200 {
                transaction.query_one("SELECT 1", &[]).expect("keep open");
            }
        }
        if failed || rollback {
            transaction.rollback().expect("rollback");
        } else {
            transaction.commit().expect("commit");
            appended += mine.len();
            committed.extend(mine);
        }
    }
    committed
}

/// A consumer group's members polling until `done` and nothing more comes; member 0 of the
/// first group is killed once in the middle of a poll (its connection dropped with the poll's
/// transaction open) and starts again on a new connection.
fn consume(
    cluster: Arc<Cluster>,
    consumer: &'static str,
    member: i32,
    group: i32,
    done: Arc<AtomicBool>,
    restarts: Arc<AtomicUsize>,
    kill_once: bool,
) -> Vec<Record> {
    let mut client = cluster.connect("feed");
    let mut delivered = Vec::new();
    let mut killed = !kill_once;
    let mut empty_after_done = 0;
    loop {
        if !killed && delivered.len() > 50 {
            // a poll whose transaction never commits, once it has records in hand (tried again,
            // rolled back, while the writers have not produced any for this member yet): its
            // connection goes away
            let mut doomed = cluster.connect("feed");
            let doomed_pid: i32 = doomed
                .query_one("SELECT pg_backend_pid()", &[])
                .expect("pid")
                .get(0);
            loop {
                doomed.batch_execute("BEGIN").expect("begin");
                let lost = doomed
                    .query(
                        "SELECT map FROM chunked_map.chunked_poll($1, 50, $2, $3)",
                        &[&consumer, &member, &group],
                    )
                    .expect("poll");
                if !lost.is_empty() {
                    break;
                }
                doomed.batch_execute("ROLLBACK").expect("rollback");
                assert!(
                    !done.load(Ordering::SeqCst),
                    "the writers finished before this member had records in hand"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
            drop(doomed);
            // until the server has ended the dropped connection's transaction, the member's
            // horizon is that transaction's (its polls return nothing): wait for that event
            let mut observer = cluster.connect("feed");
            while observer
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity WHERE pid = $1",
                    &[&doomed_pid],
                )
                .expect("pg_stat_activity")
                .get::<_, i64>(0)
                > 0
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            client = cluster.connect("feed");
            killed = true;
            restarts.fetch_add(1, Ordering::SeqCst);
        }
        let records = poll_committed(&mut client, consumer, member, group);
        if records.is_empty() {
            if done.load(Ordering::SeqCst) {
                empty_after_done += 1;
                if empty_after_done >= 3 {
                    return delivered;
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        } else {
            empty_after_done = 0;
            delivered.extend(records);
        }
    }
}

/// The `n` of every record's payload.
fn payload_ns(records: &[Record]) -> BTreeSet<i64> {
    records
        .iter()
        .map(|(_, _, payload)| {
            serde_json::from_str::<serde_json::Value>(payload).expect("JSON")["n"]
                .as_i64()
                .expect("a payload with n")
        })
        .collect()
}

/// Per map, the sequences of `records`, in the order given.
fn by_map(records: &[Record]) -> BTreeMap<String, Vec<i64>> {
    let mut maps: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for (map, seq, _) in records {
        maps.entry(map.clone()).or_default().push(*seq);
    }
    maps
}

/// Exactly the committed records of `category` (or all), once each, in order per map.
fn check_delivery(
    name: &str,
    delivered: &[Record],
    committed: &[Record],
    category_of: Option<&str>,
) {
    let expected: BTreeSet<&Record> = committed
        .iter()
        .filter(|(map, _, _)| category_of.is_none_or(|c| category(map) == c))
        .collect();
    let got: BTreeSet<&Record> = delivered.iter().collect();
    let duplicates = delivered.len() - got.len();
    let missed: Vec<_> = expected.difference(&got).take(5).collect();
    let unexpected: Vec<_> = got.difference(&expected).take(5).collect();
    eprintln!(
        "{name}: {} committed of its category, {} delivered, {duplicates} duplicates, {} missed, {} unexpected",
        expected.len(),
        delivered.len(),
        expected.difference(&got).count(),
        got.difference(&expected).count()
    );
    assert_eq!(duplicates, 0, "{name}: delivered twice");
    assert!(missed.is_empty(), "{name}: missed {missed:?}");
    assert!(
        unexpected.is_empty(),
        "{name}: never committed (or another category): {unexpected:?}"
    );
    for (map, seqs) in by_map(delivered) {
        assert!(
            seqs.windows(2).all(|pair| pair[0] < pair[1]),
            "{name}: {map} out of order: {seqs:?}"
        );
    }
}

#[test]
fn every_committed_record_reaches_every_consumer_once_in_order_across_rollbacks_long_transactions_and_a_killed_member(
) {
    let cluster = Arc::new(Cluster::start());
    let mut setup = cluster.database("feed");
    for i in 0..MAPS {
        setup
            .execute("SELECT chunked_map.chunked_start($1, 7)", &[&map_name(i)])
            .unwrap();
    }
    // history before the subscriptions: the from-start consumer gets it, the other does not
    for i in 0..MAPS {
        setup
            .execute(
                "SELECT chunked_map.chunked_register($1, '{\"before\": true}')",
                &[&map_name(i)],
            )
            .unwrap();
    }
    setup
        .batch_execute(
            "SELECT chunked_map.chunked_subscribe('orders', 'order', from_start => false);
             SELECT chunked_map.chunked_subscribe('everything', NULL, from_start => true);",
        )
        .unwrap();
    let before: Vec<Record> = setup
        .query(
            "SELECT s.map, 1::bigint, '{\"before\": true}' FROM chunked_map.map_state AS s",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2)))
        .collect();

    let done = Arc::new(AtomicBool::new(false));
    let restarts = Arc::new(AtomicUsize::new(0));
    let groups: [(&'static str, i32); 2] = [("orders", 2), ("everything", 3)];
    let consumers: Vec<_> = groups
        .iter()
        .flat_map(|&(consumer, size)| (0..size).map(move |member| (consumer, member, size)))
        .map(|(consumer, member, size)| {
            let (cluster, done, restarts) = (
                Arc::clone(&cluster),
                Arc::clone(&done),
                Arc::clone(&restarts),
            );
            let kill_once = consumer == "orders" && member == 0;
            std::thread::spawn(move || {
                (
                    consumer,
                    consume(cluster, consumer, member, size, done, restarts, kill_once),
                )
            })
        })
        .collect();

    let stop_long = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let (cluster, stop_long) = (Arc::clone(&cluster), Arc::clone(&stop_long));
            std::thread::spawn(move || write(&cluster, writer, &stop_long))
        })
        .collect();
    // a transaction that keeps an old snapshot (and its id) open while everything else goes on:
    // it may delay what the consumers' horizons pass, never what they deliver
    let mut idle = cluster.connect("feed");
    idle.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT pg_current_xact_id()")
        .unwrap();
    let began = Instant::now();
    let mut committed: Vec<Record> = Vec::new();
    for writer in writers {
        committed.extend(writer.join().expect("writer"));
    }
    stop_long.store(true, Ordering::SeqCst);
    idle.batch_execute("COMMIT").unwrap();
    done.store(true, Ordering::SeqCst);

    let mut delivered: BTreeMap<&str, Vec<Record>> = BTreeMap::new();
    for consumer in consumers {
        let (name, records) = consumer.join().expect("consumer");
        delivered.entry(name).or_default().extend(records);
    }
    eprintln!(
        "{} records committed by {WRITERS} writers on {MAPS} maps in {:?}; {} restarts",
        committed.len(),
        began.elapsed(),
        restarts.load(Ordering::SeqCst)
    );
    let rolled_back = delivered
        .values()
        .flatten()
        .filter(|(_, _, payload)| payload.contains("\"rolled_back\": true"))
        .count();
    assert_eq!(rolled_back, 0, "nothing of a rolled-back append");
    check_delivery("orders", &delivered["orders"], &committed, Some("order"));
    let mut everything_expected = before.clone();
    everything_expected.extend(committed.iter().cloned());
    check_delivery(
        "everything",
        &delivered["everything"],
        &everything_expected,
        None,
    );
    assert_eq!(restarts.load(Ordering::SeqCst), 1);

    let lag: Vec<(String, i64, i64)> = setup
        .query(
            "SELECT consumer, maps_behind, records_behind FROM chunked_map.consumers ORDER BY 1",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2)))
        .collect();
    assert_eq!(
        lag,
        [("everything".into(), 0, 0), ("orders".into(), 0, 0)],
        "nothing left behind"
    );
}

#[test]
fn a_crash_between_appends_and_polls_loses_no_record_of_the_feed() {
    let cluster = Cluster::start();
    let mut client = cluster.database("crashing");
    client
        .batch_execute(
            "SELECT chunked_map.chunked_start('order-' || n, 3) FROM generate_series(1, 5) AS n;
             SELECT chunked_map.chunked_subscribe('projection', 'order', from_start => false);",
        )
        .unwrap();
    // half delivered and acknowledged, then more appended
    for n in 1..=40 {
        client
            .execute(
                "SELECT chunked_map.chunked_register('order-' || ($1 % 5 + 1), jsonb_build_object('n', $1))",
                &[&n],
            )
            .unwrap();
        if n == 20 {
            let got = poll_committed(&mut client, "projection", 0, 1);
            assert_eq!(got.len(), 20);
        }
    }
    drop(client);
    cluster.crash();
    cluster.restart();
    let mut client = cluster.connect("crashing");
    let mut rest = Vec::new();
    loop {
        let got = poll_committed(&mut client, "projection", 0, 1);
        if got.is_empty() {
            break;
        }
        rest.extend(got);
    }
    let ns = payload_ns(&rest);
    assert_eq!(ns, (21..=40).collect(), "exactly the unacknowledged ones");
    assert_eq!(rest.len(), 20, "once each");
}

#[test]
fn a_restored_consumer_goes_on_from_its_positions_without_a_duplicate() {
    let cluster = Cluster::start();
    let mut source = cluster.database("source");
    source
        .batch_execute(
            "SELECT chunked_map.chunked_start('order-' || n, 2) FROM generate_series(1, 3) AS n;
             SELECT chunked_map.chunked_subscribe('projection', 'order');
             SELECT chunked_map.chunked_register('order-' || (n % 3 + 1), jsonb_build_object('n', n))
             FROM generate_series(1, 12) AS n;",
        )
        .unwrap();
    let acknowledged = poll_committed(&mut source, "projection", 0, 1);
    assert_eq!(acknowledged.len(), 12);
    source
        .batch_execute(
            "SELECT chunked_map.chunked_register('order-' || (n % 3 + 1), jsonb_build_object('n', n))
             FROM generate_series(13, 18) AS n;
             SELECT chunked_map.chunked_start('order-4', 2);
             SELECT chunked_map.chunked_register('order-4', '{\"n\": 19}');
             -- a map whose oldest records the consumer never had are trimmed before the dump
             SELECT chunked_map.chunked_start('order-5', 2);
             SELECT count(*) FROM chunked_map.chunked_register_many('order-5',
                 ARRAY(SELECT jsonb_build_object('n', n) FROM generate_series(20, 24) AS n));
             SELECT chunked_map.chunked_trim('order-5', 5);",
        )
        .unwrap();
    let dump = cluster.socket_dir().join("feed.dump").display().to_string();
    cluster.run(
        &pg_bin("pg_dump"),
        &["--format=custom", "--file", &dump, "source"],
    );
    cluster
        .connect("postgres")
        .batch_execute("CREATE DATABASE restored")
        .unwrap();
    cluster.run(
        &pg_bin("pg_restore"),
        &["--exit-on-error", "--dbname=restored", &dump],
    );
    // the first polls after the restore, of two members at once: neither fails
    let barrier = Arc::new(std::sync::Barrier::new(2));
    let members: Vec<_> = (0..2)
        .map(|member| {
            let (barrier, config) = (Arc::clone(&barrier), cluster.config("restored", "postgres"));
            std::thread::spawn(move || {
                let mut client = config.connect(postgres::NoTls).expect("connect");
                barrier.wait();
                let mut records = Vec::new();
                let mut gaps = Vec::new();
                loop {
                    let mut transaction = client.transaction().expect("begin");
                    let rows = transaction
                        .query(
                            "SELECT map, seq, payload::text, trimmed FROM chunked_map.chunked_poll('projection', 50, $1, 2)",
                            &[&member],
                        )
                        .expect("a first poll after the restore");
                    transaction.commit().expect("commit");
                    if rows.is_empty() {
                        return (records, gaps);
                    }
                    for row in rows {
                        let map: String = row.get(0);
                        if row.get::<_, bool>(3) {
                            gaps.push((map, row.get::<_, i64>(1)));
                        } else {
                            records.push((map, row.get::<_, i64>(1), row.get::<_, String>(2)));
                        }
                    }
                }
            })
        })
        .collect();
    let mut after: Vec<Record> = Vec::new();
    let mut gaps = Vec::new();
    for member in members {
        let (records, member_gaps) = member.join().expect("member");
        after.extend(records);
        gaps.extend(member_gaps);
    }
    let ns = payload_ns(&after);
    assert_eq!(
        ns,
        (13..=19).chain(24..=24).collect(),
        "what was not acknowledged before the dump, and what the trim kept"
    );
    assert_eq!(after.len(), 8, "once each");
    assert_eq!(
        gaps,
        [("order-5".to_string(), 4)],
        "the records trimmed before the consumer had them are reported"
    );
    // and it goes on following
    let mut restored = cluster.connect("restored");
    restored
        .batch_execute("SELECT chunked_map.chunked_register('order-1', '{\"n\": 30}')")
        .unwrap();
    let mut next = poll_committed(&mut restored, "projection", 0, 2);
    next.extend(poll_committed(&mut restored, "projection", 1, 2));
    assert_eq!(next.len(), 1);
}
