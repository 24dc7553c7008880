//! subscribers-http driven over HTTP, against PostgreSQL with chunked_map on a throw-away
//! cluster: idempotent start, appends across rollovers, paging by pageToken, every error status,
//! and 16 concurrent appenders to one map whose conflicts the service's retries absorb.

use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use chunked_map_cluster_tests::{wait_until_a_session_waits_for_a_lock, Cluster};
use serde_json::{json, Value};

const BASE: &str = "/patterns/sequentially-chunked-attribute-map";

/// The service, running as a child process on a free loopback port.
struct Service {
    child: Child,
    base: String,
    agent: ureq::Agent,
}

impl Service {
    fn spawn(cluster: &Cluster, database: &str, map: &str, env: &[(&str, &str)]) -> Service {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let address: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_subscribers-http"));
        command
            .env("DATABASE_URL", cluster.url(database))
            .env("BIND_ADDR", address.to_string())
            .env("CHUNKED_MAP", map)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        for (name, value) in env {
            command.env(name, value);
        }
        let child = command.spawn().expect("start subscribers-http");
        let began = Instant::now();
        while TcpStream::connect(address).is_err() {
            assert!(
                began.elapsed() < Duration::from_secs(20),
                "the service did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        Service {
            child,
            base: format!("http://{address}{BASE}"),
            agent,
        }
    }

    fn call(&self, method: &str, path: &str, body: Option<&str>) -> Answer {
        let url = format!("{}{path}", self.base);
        let response = match (method, body) {
            ("GET", _) => self.agent.get(&url).call(),
            ("POST", Some(body)) => self.agent.post(&url).send(body),
            ("POST", None) => self.agent.post(&url).send_empty(),
            _ => unreachable!(),
        };
        let mut response = response.unwrap_or_else(|e| panic!("{method} {url}: {e}"));
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let retries = header("x-chunked-map-retries")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let retry_after = header("retry-after");
        let content_type = header("content-type").unwrap_or_default();
        let mut text = String::new();
        response
            .body_mut()
            .as_reader()
            .read_to_string(&mut text)
            .unwrap();
        Answer {
            status: response.status().as_u16(),
            text,
            retries,
            retry_after,
            content_type,
        }
    }

    fn start(&self, chunk_size: Option<i32>) -> Answer {
        let body = chunk_size.map(|n| json!({"chunk_size": n}).to_string());
        self.call("POST", "/start", body.as_deref())
    }

    fn register(&self, payload: &str) -> Answer {
        self.call("POST", "/register", Some(payload))
    }

    fn page(&self, token: &str) -> Answer {
        self.call("GET", &format!("/subscribers?pageToken={token}"), None)
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Answer {
    status: u16,
    text: String,
    retries: u32,
    retry_after: Option<String>,
    content_type: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("{e}: {}", self.text))
    }

    #[track_caller]
    fn assert_error(&self, status: u16, sqlstate: Option<&str>, message: &str) {
        assert_eq!(self.status, status, "{}", self.text);
        let error = &self.json()["error"];
        assert_eq!(error["sqlstate"].as_str(), sqlstate, "{}", self.text);
        assert!(
            error["message"]
                .as_str()
                .unwrap_or_default()
                .contains(message),
            "{}",
            self.text
        );
    }
}

/// Every page from `current` to the oldest, following pageToken as a client would.
fn walk(service: &Service) -> Vec<Value> {
    let mut token = "current".to_string();
    let mut pages = Vec::new();
    loop {
        let answer = service.page(&token);
        assert_eq!(answer.status, 200, "{}", answer.text);
        assert!(answer.content_type.starts_with("application/json"));
        let page = answer.json();
        let next = page["next_page_token"].as_str().map(str::to_owned);
        pages.push(page);
        match next {
            Some(next) => token = next,
            None => return pages,
        }
    }
}

fn seqs(pages: &[Value]) -> Vec<i64> {
    pages
        .iter()
        .flat_map(|page| {
            page["records"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["seq"].as_i64().unwrap())
        })
        .collect()
}

#[test]
fn start_twice_append_across_rollovers_and_walk_the_page_tokens() {
    let cluster = Cluster::start();
    cluster.database("http");
    let service = Service::spawn(&cluster, "http", "subscribers", &[]);

    let first = service.start(Some(3));
    assert_eq!(first.status, 201);
    assert_eq!(first.json(), json!({"map": "subscribers", "created": true}));
    let second = service.start(None);
    assert_eq!(second.status, 200);
    assert_eq!(
        second.json(),
        json!({"map": "subscribers", "created": false})
    );

    // an empty map's current page
    let empty = service.page("current");
    assert_eq!(
        empty.json(),
        json!({"map": "subscribers", "page_token": "current", "records": [], "next_page_token": null})
    );

    for i in 1..=8 {
        let answer = service.register(&format!(
            r#"{{"email": "user{i}@example.com", "n": {i}, "big": 123456789012345678901234567890}}"#
        ));
        assert_eq!(answer.status, 200, "{}", answer.text);
        assert_eq!(answer.json(), json!({"seq": i}));
    }
    let pages = walk(&service);
    assert_eq!(seqs(&pages), (1..=8).rev().collect::<Vec<_>>());
    let tokens: Vec<&str> = pages
        .iter()
        .map(|p| p["page_token"].as_str().unwrap())
        .collect();
    assert_eq!(
        tokens,
        ["current", "00000000000000000004", "00000000000000000001"]
    );
    // the payload comes back exactly, numbers beyond double precision included
    let oldest = service.page("00000000000000000001");
    assert!(
        oldest.text.contains("123456789012345678901234567890"),
        "{}",
        oldest.text
    );
    // an archived page reads the same again after more appends
    let before = service.page("00000000000000000004").text;
    service.register("{}");
    assert_eq!(service.page("00000000000000000004").text, before);
    // pageToken defaults to current
    assert_eq!(
        service.call("GET", "/subscribers", None).json(),
        service.page("current").json()
    );
}

#[test]
fn errors_map_to_http_statuses_with_their_sqlstate() {
    let cluster = Cluster::start();
    let mut db = cluster.database("errors");
    db.batch_execute("ALTER DATABASE errors SET chunked_map.max_payload_bytes = 1024")
        .unwrap();
    db.batch_execute("SELECT chunked_map.chunked_start('subscribers', 3)")
        .unwrap();
    let service = Service::spawn(
        &cluster,
        "errors",
        "subscribers",
        &[("RETRY_MAX_ATTEMPTS", "4"), ("RETRY_MAX_ELAPSED_MS", "300")],
    );
    service.register("{}").json();

    service
        .page("abc")
        .assert_error(400, Some("22023"), "invalid page token \"abc\"");
    service
        .page("0000000000000000001")
        .assert_error(400, Some("22023"), "invalid page token");
    service.page("00000000000000000002").assert_error(
        404,
        Some("42704"),
        "names no archived chunk",
    );
    service.register("{not json").assert_error(
        400,
        Some("22P02"),
        "invalid input syntax for type json",
    );
    service
        .register(&json!({"blob": "x".repeat(2000)}).to_string())
        .assert_error(413, Some("54000"), "exceeds the limit of 1024 bytes");
    service
        .call("POST", "/start", Some(r#"{"chunk_size": "big"}"#))
        .assert_error(400, None, "chunk_size");
    service
        .call("POST", "/start", Some(r#"{"chunk_size": 0}"#))
        .assert_error(400, Some("22023"), "chunk_size must be between 1 and 10000");

    // a map that was never started
    let nobody = Service::spawn(&cluster, "errors", "nobody", &[]);
    nobody
        .register("{}")
        .assert_error(404, Some("42704"), "map \"nobody\" does not exist");
    nobody
        .page("current")
        .assert_error(404, Some("42704"), "map \"nobody\" does not exist");

    // a map held by another transaction for longer than the retry budget: 503, Retry-After
    db.batch_execute("BEGIN; SELECT chunked_map.chunked_register('subscribers', '{}');")
        .unwrap();
    let began = Instant::now();
    let busy = service.register("{}");
    busy.assert_error(503, Some("40001"), "locked by a concurrent append");
    assert_eq!(busy.retry_after.as_deref(), Some("1"));
    assert!(
        busy.retries >= 1 && busy.retries <= 3,
        "retries: {}",
        busy.retries
    );
    assert!(began.elapsed() < Duration::from_secs(3));
    db.batch_execute("COMMIT").unwrap();
    // and once it is free, the same request succeeds
    assert_eq!(service.register("{}").json(), json!({"seq": 3}));

    // an optimistic append after the wrong newest sequence: 409, and not retried
    let stale = service.call("POST", "/register?expectedLastSeq=2", Some("{}"));
    stale.assert_error(409, Some("23000"), "has newest sequence 3, expected 2");
    assert_eq!(stale.retries, 0, "a mismatch is never retried");
    assert_eq!(
        service
            .call("POST", "/register?expectedLastSeq=3", Some("{}"))
            .json(),
        json!({"seq": 4})
    );
    service
        .call("POST", "/register?expectedLastSeq=three", Some("{}"))
        .assert_error(400, None, "expectedLastSeq must be an integer");
}

#[test]
fn sixteen_concurrent_appenders_to_one_map_all_succeed_with_contiguous_sequences() {
    const APPENDERS: usize = 16;
    const EACH: usize = 25;
    let cluster = Cluster::start();
    cluster.database("concurrent");
    let service = Arc::new(Service::spawn(&cluster, "concurrent", "subscribers", &[]));
    assert_eq!(service.start(Some(10)).status, 201);

    let barrier = Arc::new(Barrier::new(APPENDERS));
    let appenders: Vec<_> = (0..APPENDERS)
        .map(|appender| {
            let service = Arc::clone(&service);
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                let mut answers = Vec::new();
                for i in 0..EACH {
                    let answer =
                        service.register(&json!({"appender": appender, "i": i}).to_string());
                    answers.push((answer.status, answer.json()["seq"].as_i64(), answer.retries));
                }
                answers
            })
        })
        .collect();
    let answers: Vec<(u16, Option<i64>, u32)> = appenders
        .into_iter()
        .flat_map(|a| a.join().expect("appender"))
        .collect();

    let unavailable = answers
        .iter()
        .filter(|(status, _, _)| *status == 503)
        .count();
    let retries: u32 = answers.iter().map(|(_, _, retries)| retries).sum();
    eprintln!(
        "{} concurrent HTTP appends by {APPENDERS} clients: {retries} retries inside the service, {unavailable} answered 503",
        answers.len()
    );
    assert!(
        answers.iter().all(|(status, _, _)| *status == 200),
        "every append succeeded"
    );
    let total = (APPENDERS * EACH) as i64;
    let mut assigned: Vec<i64> = answers.iter().filter_map(|(_, seq, _)| *seq).collect();
    assigned.sort_unstable();
    assert_eq!(assigned, (1..=total).collect::<Vec<_>>());
    let pages = walk(&service);
    assert_eq!(seqs(&pages), (1..=total).rev().collect::<Vec<_>>());
}

#[test]
fn a_request_waits_for_a_held_map_within_its_lock_timeout_and_never_waits_when_told_not_to() {
    let cluster = Cluster::start();
    let mut db = cluster.database("waits");
    db.batch_execute("SELECT chunked_map.chunked_start('subscribers')")
        .unwrap();
    // (the service's default, 50 ms, is shorter than a loaded machine may take to see the wait
    // and commit: a minute here, so that what the test sees does not depend on its speed)
    let waiting = Service::spawn(
        &cluster,
        "waits",
        "subscribers",
        &[("LOCK_TIMEOUT_MS", "60000")],
    );
    let nowait = Service::spawn(
        &cluster,
        "waits",
        "subscribers",
        &[("LOCK_TIMEOUT_MS", "0"), ("RETRY_MAX_ATTEMPTS", "1")],
    );

    // a transaction holds the map until the service's append is seen waiting for it: the
    // service waits (no retry) and appends after it
    db.batch_execute("BEGIN; SELECT chunked_map.chunked_register('subscribers', '{}');")
        .unwrap();
    let mut observer = cluster.connect("waits");
    let answer = std::thread::scope(|scope| {
        let request = scope.spawn(|| waiting.register("{}"));
        wait_until_a_session_waits_for_a_lock(&mut observer, "waits");
        db.batch_execute("COMMIT").unwrap();
        request.join().unwrap()
    });
    assert_eq!(answer.status, 200, "{}", answer.text);
    assert_eq!(answer.json(), json!({"seq": 2}));
    assert_eq!(answer.retries, 0, "it waited instead of retrying");

    // told never to wait (and not to retry), the same situation is 40001 at once: 503
    db.batch_execute("BEGIN; SELECT chunked_map.chunked_register('subscribers', '{}');")
        .unwrap();
    let began = Instant::now();
    nowait
        .register("{}")
        .assert_error(503, Some("40001"), "locked by a concurrent append");
    assert!(began.elapsed() < Duration::from_secs(1));
    db.batch_execute("COMMIT").unwrap();

    // `?map=` appends to another map through the same service
    db.batch_execute("SELECT chunked_map.chunked_start('other')")
        .unwrap();
    assert_eq!(
        waiting
            .call("POST", "/register?map=other", Some("{}"))
            .json(),
        json!({"seq": 1})
    );
}
