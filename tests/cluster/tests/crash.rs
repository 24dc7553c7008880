//! The contract (docs/contract.md), Data safety: a crash loses no acknowledged append and duplicates none.
//!
//! Several clients append to a few maps (with rollovers) until the server is stopped with
//! `pg_ctl stop -m immediate`; after the restart every append whose commit a client saw is
//! there, sequences are contiguous, and `chunked_verify` finds every map consistent.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chunked_map_cluster_tests::page::all_pages;
use chunked_map_cluster_tests::{query_json, Cluster};

const MAPS: [&str; 3] = ["alpha", "beta", "gamma"];
const CLIENTS: usize = 6;
/// The server is crashed once the clients have seen this many commits (every map rolled over
/// many times), however long that takes on this machine.
const ACKNOWLEDGED_BEFORE_THE_CRASH: usize = 600;

#[test]
fn an_immediate_shutdown_loses_no_acknowledged_append_and_duplicates_none() {
    let cluster = Arc::new(Cluster::start());
    let mut setup = cluster.database("crash");
    for map in MAPS {
        setup
            .execute("SELECT chunked_map.chunked_start($1, 7)", &[&map])
            .unwrap();
    }
    drop(setup);

    let crashing = Arc::new(AtomicBool::new(false));
    let acknowledged_so_far = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|id| {
            let cluster = Arc::clone(&cluster);
            let crashing = Arc::clone(&crashing);
            let acknowledged_so_far = Arc::clone(&acknowledged_so_far);
            std::thread::spawn(move || {
                let mut client = cluster.connect("crash");
                let mut acknowledged = Vec::new();
                let mut in_flight = false;
                for i in 0.. {
                    let map = MAPS[(id + i) % MAPS.len()];
                    let payload = format!(r#"{{"client": {id}, "i": {i}}}"#);
                    let result = client.query_one(
                        "SELECT chunked_map.chunked_register($1, $2::text::jsonb)",
                        &[&map, &payload],
                    );
                    match result {
                        Ok(row) => {
                            acknowledged.push((map, row.get::<_, i64>(0), payload));
                            acknowledged_so_far.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(error) if error.code().map(|c| c.code()) == Some("40001") => continue,
                        Err(_) => {
                            // the server went away: this append's outcome is unknown
                            assert!(crashing.load(Ordering::SeqCst), "error before the crash");
                            in_flight = true;
                            break;
                        }
                    }
                }
                (acknowledged, in_flight)
            })
        })
        .collect();

    let began = Instant::now();
    while acknowledged_so_far.load(Ordering::SeqCst) < ACKNOWLEDGED_BEFORE_THE_CRASH {
        assert!(
            began.elapsed() < Duration::from_secs(120),
            "the clients made no progress"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    crashing.store(true, Ordering::SeqCst);
    cluster.crash();

    let mut acknowledged = Vec::new();
    let mut in_flight = 0;
    for client in clients {
        let (appends, was_in_flight) = client.join().expect("client thread");
        acknowledged.extend(appends);
        in_flight += usize::from(was_in_flight);
    }
    cluster.restart();

    let mut client = cluster.connect("crash");
    let mut recovered = 0;
    let mut stored: HashMap<(&str, i64), String> = HashMap::new();
    for map in MAPS {
        let report = query_json(&mut client, "chunked_map.chunked_verify($1)", &[&map]);
        assert_eq!(report["consistent"], true, "{report}");
        let records: Vec<(i64, String)> = all_pages(&mut client, map)
            .iter()
            .flat_map(|page| page["records"].as_array().unwrap().clone())
            .map(|r| (r["seq"].as_i64().unwrap(), r["payload"].to_string()))
            .collect();
        let total = records.len() as i64;
        let seqs: Vec<i64> = records.iter().map(|(seq, _)| *seq).collect();
        assert_eq!(
            seqs,
            (1..=total).rev().collect::<Vec<_>>(),
            "{map}: contiguous, no duplicate"
        );
        recovered += records.len();
        for (seq, payload) in records {
            stored.insert((map, seq), payload);
        }
    }

    let mut by_map: BTreeMap<&str, usize> = BTreeMap::new();
    for (map, seq, payload) in &acknowledged {
        let expected: serde_json::Value = serde_json::from_str(payload).unwrap();
        let found = stored
            .get(&(*map, *seq))
            .unwrap_or_else(|| panic!("{map} seq {seq} lost"));
        assert_eq!(found, &expected.to_string(), "{map} seq {seq}");
        *by_map.entry(map).or_default() += 1;
    }
    // every stored payload is a distinct append: none was applied twice
    let mut payloads: Vec<&String> = stored.values().collect();
    payloads.sort();
    payloads.dedup();
    assert_eq!(payloads.len(), stored.len());
    eprintln!(
        "crash: {} appends acknowledged ({by_map:?}), {in_flight} in flight at the crash, \
         {recovered} recovered",
        acknowledged.len()
    );
    assert!(acknowledged.len() >= ACKNOWLEDGED_BEFORE_THE_CRASH);
    assert!(recovered >= acknowledged.len());
    assert!(recovered <= acknowledged.len() + in_flight);

    // the restarted server goes on appending where each map left off
    for map in MAPS {
        let next: i64 = client
            .query_one("SELECT chunked_map.chunked_register($1, '{}')", &[&map])
            .unwrap()
            .get(0);
        let count = stored.keys().filter(|(m, _)| *m == map).count() as i64;
        assert_eq!(next, count + 1);
    }
}
