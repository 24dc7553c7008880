//! The consumer example (examples/clients/python/consumer.py) follows maps with `chunked_read`
//! and LISTENs on each map's own notification channel, keeping its position in a table of its own updated in the same
//! transaction as its work. While 4 writers append 2,000 records to 3 maps with notifications
//! on, the consumer is killed once in the middle and started again: it processes every record
//! exactly once, in order per map.

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chunked_map_cluster_tests::{python_with, repo_root, Client, Cluster};

const MAPS: [&str; 3] = ["orders", "audit", "messages"];
const WRITERS: usize = 4;
const RECORDS: i64 = 2_000;

fn consumer(python: &std::path::Path, url: &str) -> Child {
    Command::new(python)
        .arg(repo_root().join("examples/clients/python/consumer.py"))
        .arg("shipper")
        .args(MAPS)
        .env("DATABASE_URL", url)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the consumer")
}

/// 4 writers appending `RECORDS` records in all to `maps` (writer `w`'s `i`-th to map
/// `(w * stride + i) % maps`), each append its own transaction, retried on 40001; `appended`
/// counts them.
fn spawn_writers(
    cluster: &Arc<Cluster>,
    database: &'static str,
    maps: Vec<String>,
    stride: usize,
    appended: &Arc<AtomicI64>,
) -> Vec<std::thread::JoinHandle<()>> {
    let maps = Arc::new(maps);
    (0..WRITERS)
        .map(|writer| {
            let (cluster, appended, maps) =
                (Arc::clone(cluster), Arc::clone(appended), Arc::clone(&maps));
            std::thread::spawn(move || {
                let mut client = cluster.connect(database);
                let each = RECORDS / WRITERS as i64;
                for i in 0..each {
                    let map = &maps[(writer * stride + i as usize) % maps.len()];
                    let payload = format!(r#"{{"writer": {writer}, "i": {i}}}"#);
                    loop {
                        match client.query_one(
                            "SELECT chunked_map.chunked_register($1, $2::text::jsonb)",
                            &[map, &payload],
                        ) {
                            Ok(_) => break,
                            Err(e) if e.code().map(|c| c.code()) == Some("40001") => {
                                std::thread::sleep(Duration::from_micros(200))
                            }
                            Err(e) => panic!("{e}"),
                        }
                    }
                    appended.fetch_add(1, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_micros(500));
                }
            })
        })
        .collect()
}

fn processed(client: &mut Client) -> i64 {
    client
        .query_one(
            "SELECT count(*) FROM processed WHERE consumer = 'shipper'",
            &[],
        )
        .map(|row| row.get(0))
        .unwrap_or(0) // before the consumer created its table
}

#[test]
fn a_consumer_killed_and_restarted_processes_every_record_once_in_order() {
    let python = python_with(
        "python-venv",
        &repo_root().join("examples/clients/python/requirements.txt"),
    );
    let cluster = Arc::new(Cluster::start());
    let mut observer = cluster.database("consumer");
    for map in MAPS {
        observer
            .execute(
                "SELECT chunked_map.chunked_start($1, 7), chunked_map.chunked_set_notify($1, true)",
                &[&map],
            )
            .unwrap();
    }
    let url = cluster.url("consumer");
    let mut first = consumer(&python, &url);

    // 4 writers, 500 records each, spread over the maps, each append its own transaction,
    // retried on 40001
    let maps: Vec<String> = MAPS.iter().map(|map| map.to_string()).collect();
    let appended = Arc::new(AtomicI64::new(0));
    let writers = spawn_writers(&cluster, "consumer", maps, 1, &appended);

    // kill the consumer once it has processed some and the writers are midway, then restart it
    let began = Instant::now();
    while processed(&mut observer) < 300 || appended.load(Ordering::SeqCst) < RECORDS / 2 {
        assert!(began.elapsed() < Duration::from_secs(120), "no progress");
        std::thread::sleep(Duration::from_millis(20));
    }
    first.kill().expect("kill the consumer");
    first.wait().expect("the killed consumer");
    let at_kill = processed(&mut observer);
    let mut second = consumer(&python, &url);
    for writer in writers {
        writer.join().expect("writer");
    }
    assert_eq!(appended.load(Ordering::SeqCst), RECORDS);

    // the restarted consumer catches up and follows to the last record
    while processed(&mut observer) < RECORDS {
        assert!(
            began.elapsed() < Duration::from_secs(180),
            "processed {} of {RECORDS}",
            processed(&mut observer)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500)); // nothing more arrives
    second.kill().expect("stop the consumer");
    second.wait().expect("the consumer");

    // every record once (the primary key refuses a second), in order per map, exactly as stored
    let (total, maps_in_order, matching): (i64, i64, i64) = {
        let row = observer
            .query_one(
                "WITH p AS (
                     SELECT map, seq, payload,
                            row_number() OVER (PARTITION BY map ORDER BY processed_order) AS nth
                     FROM processed WHERE consumer = 'shipper')
                 SELECT (SELECT count(*) FROM p),
                        (SELECT count(*) FROM (SELECT map FROM p GROUP BY map
                                               HAVING bool_and(seq = nth)
                                                  AND max(seq) = (chunked_map.chunked_info(map) ->> 'total_records')::bigint) AS ok),
                        (SELECT count(*) FROM p
                         JOIN LATERAL chunked_map.chunked_read(p.map, p.seq - 1, 1) AS r ON r.seq = p.seq
                         WHERE r.payload = p.payload)",
                &[],
            )
            .unwrap();
        (row.get(0), row.get(1), row.get(2))
    };
    eprintln!(
        "consumer: {total} records processed of {RECORDS} appended to {} maps, 1 restart (killed after {at_kill})",
        MAPS.len()
    );
    assert_eq!(total, RECORDS, "missed none, none twice");
    assert_eq!(
        maps_in_order,
        MAPS.len() as i64,
        "in order per map, to the newest"
    );
    assert_eq!(matching, RECORDS, "payloads as stored");
}

fn feed_member(python: &std::path::Path, url: &str, member: u32) -> Child {
    Command::new(python)
        .arg(repo_root().join("examples/clients/python/feed_member.py"))
        .args(["orders-projection", "order", &member.to_string(), "2"])
        .env("DATABASE_URL", url)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start a member")
}

fn projected(client: &mut Client) -> i64 {
    client
        .query_one("SELECT count(*) FROM projection", &[])
        .map(|row| row.get(0))
        .unwrap_or(0) // before a member created its table
}

/// The consumer group example (examples/clients/python/feed_member.py, 0.4): two members share
/// the consumer of category `order` while 4 writers append to 12 maps of three categories; one
/// member is killed in the middle and started again. Every committed record of the category is
/// processed exactly once, in order per map, each map by one member, nothing of another category.
#[test]
fn a_consumer_group_with_a_member_killed_and_restarted_processes_every_record_once_in_order() {
    let python = python_with(
        "python-venv",
        &repo_root().join("examples/clients/python/requirements.txt"),
    );
    let cluster = Arc::new(Cluster::start());
    let mut observer = cluster.database("group");
    let maps: Vec<String> = (0..12)
        .map(|i| format!("{}-{i}", ["order", "account", "cart"][i % 3]))
        .collect();
    for map in &maps {
        observer
            .execute("SELECT chunked_map.chunked_start($1, 7)", &[map])
            .unwrap();
    }
    let url = cluster.url("group");
    // the first member makes the projection table and the subscription; the second starts
    // once they are there
    let zero = feed_member(&python, &url, 0);
    let began = Instant::now();
    loop {
        let ready: bool = observer
            .query_one(
                "SELECT to_regclass('public.projection') IS NOT NULL
                        AND EXISTS (SELECT 1 FROM chunked_map.consumers WHERE consumer = 'orders-projection')",
                &[],
            )
            .unwrap()
            .get(0);
        if ready {
            break;
        }
        assert!(
            began.elapsed() < Duration::from_secs(60),
            "member 0 did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut one = feed_member(&python, &url, 1);

    let appended = Arc::new(AtomicI64::new(0));
    let writers = spawn_writers(&cluster, "group", maps, 5, &appended);

    // kill member 1 once the group has processed some and the writers are midway; restart it
    while projected(&mut observer) < 100 || appended.load(Ordering::SeqCst) < RECORDS / 2 {
        assert!(began.elapsed() < Duration::from_secs(120), "no progress");
        std::thread::sleep(Duration::from_millis(20));
    }
    one.kill().expect("kill member 1");
    one.wait().expect("the killed member");
    let at_kill = projected(&mut observer);
    let one = feed_member(&python, &url, 1);
    for writer in writers {
        writer.join().expect("writer");
    }
    let expected: i64 = observer
        .query_one(
            "SELECT coalesce(sum((chunked_map.chunked_info(s.map) ->> 'total_records')::bigint), 0)::bigint
             FROM chunked_map.map_state AS s WHERE split_part(s.map, '-', 1) = 'order'",
            &[],
        )
        .unwrap()
        .get(0);
    while projected(&mut observer) < expected {
        assert!(
            began.elapsed() < Duration::from_secs(180),
            "projected {} of {expected}",
            projected(&mut observer)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500)); // nothing more arrives
    for mut member in [zero, one] {
        member.kill().expect("stop a member");
        member.wait().expect("a member");
    }

    let (total, maps_in_order, one_member_each, other_categories, matching): (
        i64,
        i64,
        i64,
        i64,
        i64,
    ) = {
        let row = observer
            .query_one(
                "WITH p AS (
                     SELECT map, seq, payload, member,
                            row_number() OVER (PARTITION BY map ORDER BY processed_order) AS nth
                     FROM projection WHERE consumer = 'orders-projection')
                 SELECT (SELECT count(*) FROM p),
                        (SELECT count(*) FROM (SELECT map FROM p GROUP BY map
                                               HAVING bool_and(seq = nth)
                                                  AND max(seq) = (chunked_map.chunked_info(map) ->> 'total_records')::bigint) AS ok),
                        (SELECT count(*) FROM (SELECT map FROM p GROUP BY map HAVING count(DISTINCT member) = 1) AS m),
                        (SELECT count(*) FROM p WHERE split_part(map, '-', 1) <> 'order'),
                        (SELECT count(*) FROM p
                         JOIN LATERAL chunked_map.chunked_read(p.map, p.seq - 1, 1) AS r ON r.seq = p.seq
                         WHERE r.payload = p.payload)",
                &[],
            )
            .unwrap();
        (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4))
    };
    eprintln!(
        "consumer group: {total} records of category order processed of {expected} committed, 2 members, 1 restart (killed after {at_kill})"
    );
    assert_eq!(total, expected, "missed none, none twice");
    assert_eq!(maps_in_order, 4, "in order per map, to the newest");
    assert_eq!(one_member_each, 4, "each map processed by one member");
    assert_eq!(other_categories, 0, "nothing of another category");
    assert_eq!(matching, expected, "payloads as stored");
}
