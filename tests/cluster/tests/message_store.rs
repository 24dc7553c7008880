//! chunked_map_message_store (docs/message-db.md) with real connections: writers of different
//! streams of one category never wait for each other, and category readers resuming from their
//! last global position + 1 get every committed message exactly once, never one of a
//! rolled-back write, each stream's in position order, each stream to one member of a group —
//! across writers with rollbacks and long transactions.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use chunked_map_cluster_tests::dice::Dice;
use chunked_map_cluster_tests::{Client, Cluster};

const STREAMS: usize = 40;
const WRITERS: usize = 8;
const TRANSACTIONS_PER_WRITER: usize = 120;
const CATEGORIES: [&str; 2] = ["order", "payment"];

/// A message as a reader got it: (global position, stream, position, id).
type Read = (i64, String, i64, String);

/// What each reader got: by (category, member).
type Reads = BTreeMap<(String, i64), Vec<Read>>;

fn store(cluster: &Cluster, database: &str) -> Client {
    let mut client = cluster.database(database);
    client
        .batch_execute("CREATE EXTENSION chunked_map_message_store")
        .expect("create extension chunked_map_message_store");
    client
}

fn uuid(writer: usize, round: usize, n: usize) -> String {
    format!(
        "00000000-0000-4000-8000-{:04x}{:04x}{:04x}",
        writer, round, n
    )
}

fn stream_name(i: usize) -> String {
    format!("{}-{}", CATEGORIES[i % 2], i)
}

/// One category batch from `position`, as a member of a group of 2.
fn read_batch(client: &mut Client, category: &str, position: i64, member: i64) -> Vec<Read> {
    client
        .query(
            "SELECT global_position, stream_name::text, position, id::text
             FROM message_store.get_category_messages($1, $2, 50, NULL, $3, 2)",
            &[&category, &position, &member],
        )
        .expect("a category read")
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2), row.get(3)))
        .collect()
}

#[test]
fn writers_of_one_category_never_wait_and_readers_get_each_committed_message_once_in_order() {
    let cluster = Cluster::start();
    let mut setup = store(&cluster, "store");
    let url = cluster.url("store");

    let done = Arc::new(AtomicBool::new(false));
    let started = Arc::new(Barrier::new(WRITERS + 1));
    let acknowledged: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let rolled_back: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let mut writers = Vec::new();
    for writer in 0..WRITERS {
        let url = url.clone();
        let started = Arc::clone(&started);
        let acknowledged = Arc::clone(&acknowledged);
        let rolled_back = Arc::clone(&rolled_back);
        writers.push(std::thread::spawn(move || {
            let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
            // a writer that waited for another one of its category would fail, not wait
            client.batch_execute("SET lock_timeout = '2s'").unwrap();
            let mut dice = Dice(0x9e37_79b9_7f4a_7c15 ^ (writer as u64 + 1));
            started.wait();
            for round in 0..TRANSACTIONS_PER_WRITER {
                let rollback = dice.roll(6) == 0;
                let long = writer == 0 && round % 40 == 20;
                let mut transaction = client.transaction().unwrap();
                let mut mine = Vec::new();
                // several streams in one transaction in one order, as a client avoids deadlocks
                let mut streams: Vec<String> = (0..(1 + dice.roll(3) as usize))
                    .map(|_| stream_name(dice.roll(STREAMS as u64) as usize))
                    .collect();
                streams.sort();
                for (n, stream) in streams.iter().enumerate() {
                    let id = uuid(writer, round, n);
                    transaction
                        .query_one(
                            "SELECT message_store.write_message($1, $2, 'Happened', jsonb_build_object('w', $3::int, 'r', $4::int))",
                            &[&id, &stream, &(writer as i32), &(round as i32)],
                        )
                        .unwrap_or_else(|e| panic!("writer {writer} round {round}: {e}"));
                    mine.push(id);
                }
                if long {
                    // open while the others write and the readers read
                    std::thread::sleep(Duration::from_millis(300));
                }
                if rollback {
                    transaction.rollback().unwrap();
                    rolled_back.lock().unwrap().extend(mine);
                } else {
                    transaction.commit().unwrap();
                    acknowledged.lock().unwrap().extend(mine);
                }
            }
        }));
    }

    // two readers per category, members 0 and 1 of a group of 2, each resuming from its last
    // global position + 1 as a message-db consumer does
    let reads: Arc<Mutex<Reads>> = Arc::default();
    let mut readers = Vec::new();
    for category in CATEGORIES {
        for member in 0..2i64 {
            let url = url.clone();
            let done = Arc::clone(&done);
            let reads = Arc::clone(&reads);
            readers.push(std::thread::spawn(move || {
                let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
                let mut position = 1i64;
                let mut mine = Vec::new();
                let mut quiet_after_done = 0;
                while quiet_after_done < 20 {
                    let batch = read_batch(&mut client, category, position, member);
                    if let Some(last) = batch.last() {
                        position = last.0 + 1;
                        quiet_after_done = 0;
                    } else if done.load(Ordering::SeqCst) {
                        quiet_after_done += 1;
                    }
                    mine.extend(batch);
                    std::thread::sleep(Duration::from_millis(5));
                }
                reads
                    .lock()
                    .unwrap()
                    .insert((category.to_owned(), member), mine);
            }));
        }
    }

    started.wait();
    let began = Instant::now();
    for writer in writers {
        writer.join().expect("writer");
    }
    let written = began.elapsed();
    done.store(true, Ordering::SeqCst);
    for reader in readers {
        reader.join().expect("reader");
    }

    let acknowledged = acknowledged.lock().unwrap().clone();
    let rolled_back = rolled_back.lock().unwrap().clone();
    let reads = reads.lock().unwrap().clone();
    // what the store holds is what the writers' commits made
    let stored: BTreeSet<String> = setup
        .query("SELECT id::text FROM message_store.messages", &[])
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(stored, acknowledged, "stored = acknowledged");
    assert!(stored.is_disjoint(&rolled_back));
    let mut got_by_category: BTreeMap<&str, Vec<Read>> = BTreeMap::new();
    for ((category, member), mine) in &reads {
        // each member's batches in global position order, each stream's in position order, and
        // every stream of its share (message-db's hash of the cardinal id)
        let mut last_global = 0;
        let mut last_position: BTreeMap<&str, i64> = BTreeMap::new();
        for (global, stream, position, _) in mine {
            assert!(
                *global > last_global,
                "{category}/{member}: {global} after {last_global}"
            );
            last_global = *global;
            let previous = last_position.insert(stream, *position).unwrap_or(-1);
            assert_eq!(
                *position,
                previous + 1,
                "{category}/{member}: {stream} skipped or repeated"
            );
            assert!(stream.starts_with(category.as_str()));
        }
        for stream in last_position.keys() {
            let owner: i64 = setup
                .query_one(
                    "SELECT abs(message_store.hash_64(message_store.cardinal_id($1))) % 2",
                    &[stream],
                )
                .unwrap()
                .get(0);
            assert_eq!(owner, *member, "{stream} read by member {member}");
        }
        got_by_category
            .entry(CATEGORIES.iter().find(|c| *c == category).unwrap())
            .or_default()
            .extend(mine.iter().cloned());
    }
    let mut all_read = BTreeSet::new();
    for (category, got) in &got_by_category {
        let ids: BTreeSet<String> = got.iter().map(|read| read.3.clone()).collect();
        assert_eq!(ids.len(), got.len(), "{category}: a message twice");
        all_read.extend(ids);
    }
    assert_eq!(all_read, acknowledged, "every committed message read, once");
    eprintln!(
        "{} messages committed ({} rolled back) by {WRITERS} writers in {written:?}; read once each",
        acknowledged.len(),
        rolled_back.len()
    );
}

#[test]
fn a_message_written_after_an_open_one_is_read_after_it_once_both_committed() {
    let cluster = Cluster::start();
    let mut reader = store(&cluster, "late");
    let mut first = cluster.connect("late");
    let mut second = cluster.connect("late");
    // the first writer of category order holds its transaction open
    first
        .batch_execute(
            "BEGIN;
             SELECT message_store.write_message('00000000-0000-4000-8000-000000000001', 'order-1', 'Placed', '{}');",
        )
        .unwrap();
    // another writer of the category, another stream: never waits for it
    second
        .batch_execute(
            "SET lock_timeout = '100ms';
             SELECT message_store.write_message('00000000-0000-4000-8000-000000000002', 'order-2', 'Placed', '{}');",
        )
        .unwrap();
    // committed, but not readable yet: the open writer could still commit a message before it
    let read = |reader: &mut Client| -> Vec<(i64, String)> {
        reader
            .query(
                "SELECT global_position, stream_name::text FROM message_store.get_category_messages('order')",
                &[],
            )
            .unwrap()
            .iter()
            .map(|row| (row.get(0), row.get(1)))
            .collect()
    };
    assert_eq!(read(&mut reader), []);
    let stream: Vec<(String, Option<i64>)> = reader
        .query(
            "SELECT stream_name::text, global_position FROM message_store.get_stream_messages('order-2')",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    assert_eq!(
        stream,
        [("order-2".to_owned(), None)],
        "a stream read has it, without a global position yet"
    );
    first.batch_execute("COMMIT").unwrap();
    // both now, the one whose writer began first first
    assert_eq!(
        read(&mut reader),
        [(1, "order-1".to_owned()), (2, "order-2".to_owned())]
    );
    // a rolled-back write leaves no trace and holds nothing back
    first
        .batch_execute(
            "BEGIN;
             SELECT message_store.write_message('00000000-0000-4000-8000-000000000003', 'order-3', 'Placed', '{}');
             ROLLBACK;
             SELECT message_store.write_message('00000000-0000-4000-8000-000000000004', 'order-4', 'Placed', '{}');",
        )
        .unwrap();
    assert_eq!(
        read(&mut reader),
        [
            (1, "order-1".to_owned()),
            (2, "order-2".to_owned()),
            (3, "order-4".to_owned())
        ]
    );
}
