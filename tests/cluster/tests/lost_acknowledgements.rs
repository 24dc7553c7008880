//! (0.5) Producers that lose their acknowledgement retry with the same id, and every record is
//! in its map exactly once.
//!
//! A producer speaks PostgreSQL's protocol itself here, so that it can lose the connection at
//! exactly one of two points: after sending COMMIT and before reading the answer (the commit
//! happens: the server reads the message it was sent before it notices the connection is gone;
//! the producer cannot know), or before sending COMMIT (the server sees the connection end and
//! rolls the transaction back). Either way the producer retries the append on a new connection
//! with the same id, waiting for the lost transaction's lock of the map if the server has not
//! finished with it yet (`chunked_map.lock_timeout`), and is told which it was: the first
//! record's sequence (a duplicate) after a commit, a new record after a rollback.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

use chunked_map_cluster_tests::{Client, Cluster, SUPERUSER};

/// A connection of PostgreSQL's protocol 3.0 over the cluster's Unix socket (trust
/// authentication, as every test cluster has), sending simple queries.
struct RawConnection {
    stream: UnixStream,
}

impl RawConnection {
    fn open(socket_dir: &Path, port: u16, database: &str) -> RawConnection {
        let mut stream = UnixStream::connect(socket_dir.join(format!(".s.PGSQL.{port}")))
            .expect("connect to the socket");
        let mut body = Vec::new();
        body.extend_from_slice(&196_608_i32.to_be_bytes());
        for (key, value) in [("user", SUPERUSER), ("database", database)] {
            body.extend_from_slice(key.as_bytes());
            body.push(0);
            body.extend_from_slice(value.as_bytes());
            body.push(0);
        }
        body.push(0);
        let mut message = ((body.len() + 4) as i32).to_be_bytes().to_vec();
        message.extend_from_slice(&body);
        stream.write_all(&message).expect("startup");
        let mut connection = RawConnection { stream };
        connection.read_until_ready();
        connection
    }

    /// Sends one simple query, without reading its answer.
    fn send(&mut self, sql: &str) {
        let mut message = vec![b'Q'];
        message.extend_from_slice(&((sql.len() + 5) as i32).to_be_bytes());
        message.extend_from_slice(sql.as_bytes());
        message.push(0);
        self.stream.write_all(&message).expect("send a query");
    }

    /// Sends one simple query and reads its answer to the end; panics on an error.
    fn query(&mut self, sql: &str) {
        self.send(sql);
        self.read_until_ready();
    }

    /// Reads messages up to ReadyForQuery; panics on an ErrorResponse.
    fn read_until_ready(&mut self) {
        loop {
            let mut header = [0_u8; 5];
            self.stream.read_exact(&mut header).expect("a message");
            let len = i32::from_be_bytes(header[1..5].try_into().expect("length")) as usize;
            let mut body = vec![0_u8; len - 4];
            self.stream.read_exact(&mut body).expect("its body");
            match header[0] {
                b'E' => panic!("error: {}", String::from_utf8_lossy(&body)),
                b'Z' => return,
                _ => {}
            }
        }
    }
}

/// Where a producer loses its connection.
#[derive(Clone, Copy, Debug)]
enum Lost {
    /// Never: it reads the answer to its COMMIT.
    Nothing,
    /// After sending COMMIT, before reading the answer: committed, and the producer cannot know.
    TheAcknowledgement,
    /// Before sending COMMIT: rolled back.
    TheTransaction,
}

fn append_once(client: &mut Client, map: &str, id: &str, n: i64) -> (i64, bool) {
    let row = client
        .query_one(
            "SELECT seq, duplicate FROM chunked_map.chunked_register_once($1, jsonb_build_object('n', $3::bigint), $2)",
            &[&map, &id, &n],
        )
        .unwrap_or_else(|e| panic!("retry of {id}: {e}"));
    (row.get(0), row.get(1))
}

#[test]
fn producers_that_lose_their_acknowledgement_retry_with_the_same_id_and_append_once() {
    let cluster = Cluster::start();
    let mut setup = cluster.database("acks");
    setup
        .batch_execute(
            "SELECT chunked_map.chunked_start('orders-1', 4);
             SELECT chunked_map.chunked_start('orders-2', 7);",
        )
        .unwrap();
    const PRODUCERS: usize = 6;
    const RECORDS: i64 = 40;
    let cluster = &cluster;
    let tallies: Vec<(usize, usize, usize)> = std::thread::scope(|scope| {
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|producer| {
                scope.spawn(move || {
                    let mut retrier = cluster.connect("acks");
                    retrier
                        .batch_execute("SET chunked_map.lock_timeout = '5min'")
                        .unwrap();
                    let map = if producer % 2 == 0 { "orders-1" } else { "orders-2" };
                    let (mut committed_unknown, mut rolled_back, mut plain) = (0, 0, 0);
                    for n in 0..RECORDS {
                        let id = format!("p{producer}-{n}");
                        let lost = match (producer as i64 + n) % 3 {
                            0 => Lost::TheAcknowledgement,
                            1 => Lost::TheTransaction,
                            _ => Lost::Nothing,
                        };
                        let mut raw = RawConnection::open(cluster.socket_dir(), cluster.port(), "acks");
                        raw.query("SET chunked_map.lock_timeout = '5min'");
                        raw.query("BEGIN");
                        raw.query(&format!(
                            "SELECT * FROM chunked_map.chunked_register_once('{map}', '{{\"n\": {n}}}', '{id}')"
                        ));
                        match lost {
                            Lost::Nothing => {
                                raw.query("COMMIT");
                                drop(raw);
                                plain += 1;
                            }
                            Lost::TheAcknowledgement => {
                                raw.send("COMMIT");
                                drop(raw);
                                committed_unknown += 1;
                            }
                            Lost::TheTransaction => {
                                drop(raw);
                                rolled_back += 1;
                            }
                        }
                        // the producer does not know what happened: it retries, with the same id
                        let (_, duplicate) = append_once(&mut retrier, map, &id, n);
                        match lost {
                            Lost::Nothing | Lost::TheAcknowledgement => {
                                assert!(duplicate, "{id}: committed, so the retry is a duplicate")
                            }
                            Lost::TheTransaction => {
                                assert!(!duplicate, "{id}: rolled back, so the retry appends")
                            }
                        }
                        // and again, as a producer whose retry's answer was lost too
                        let (_, again) = append_once(&mut retrier, map, &id, n);
                        assert!(again, "{id}: a second retry is a duplicate");
                    }
                    (committed_unknown, rolled_back, plain)
                })
            })
            .collect();
        producers
            .into_iter()
            .map(|producer| producer.join().expect("producer"))
            .collect()
    });
    let committed_unknown: usize = tallies.iter().map(|t| t.0).sum();
    let rolled_back: usize = tallies.iter().map(|t| t.1).sum();
    assert!(committed_unknown > 0 && rolled_back > 0);

    // every id exactly once, in maps without gaps
    for (map, producers) in [("orders-1", [0, 2, 4]), ("orders-2", [1, 3, 5])] {
        let rows = setup
            .query(
                "SELECT seq, id FROM chunked_map.chunked_read($1, 0, 10000) ORDER BY seq",
                &[&map],
            )
            .unwrap();
        let seqs: Vec<i64> = rows.iter().map(|row| row.get(0)).collect();
        assert_eq!(
            seqs,
            (1..=seqs.len() as i64).collect::<Vec<_>>(),
            "{map}: no gap"
        );
        let mut ids: Vec<String> = rows.iter().map(|row| row.get(1)).collect();
        ids.sort();
        let mut expected: Vec<String> = producers
            .iter()
            .flat_map(|p| (0..RECORDS).map(move |n| format!("p{p}-{n}")))
            .collect();
        expected.sort();
        assert_eq!(ids, expected, "{map}: every id exactly once");
    }
}
