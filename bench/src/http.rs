//! G. The HTTP service (examples/http) under load, as its users run it: the release build
//! against the benchmark cluster, wrk POSTing appends from 32 connections, to one hot map and
//! spread over 8 maps; with the service's default (requests wait up to 50 ms for a held map)
//! and with waiting off (40001 at once, retried by the service).

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use chunked_map_cluster_tests::{repo_root, Cluster};

const BASE: &str = "/patterns/sequentially-chunked-attribute-map";

/// What wrk reported for one run.
#[derive(Debug, Default, Clone)]
pub struct Load {
    pub requests_per_second: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub requests: u64,
    pub errors: u64,
}

struct Service(Child);

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn spawn(binary: &Path, url: &str, port: u16, env: &[(&str, &str)]) -> Service {
    let mut command = Command::new(binary);
    command
        .env("DATABASE_URL", url)
        .env("BIND_ADDR", format!("127.0.0.1:{port}"))
        .env("CHUNKED_MAP", "hot")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for (name, value) in env {
        command.env(name, value);
    }
    let service = Service(command.spawn().expect("start subscribers-http"));
    let began = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            began.elapsed() < Duration::from_secs(30),
            "the service did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    service
}

/// Milliseconds from wrk's "1.23ms", "456.00us", "1.02s".
fn millis(text: &str) -> f64 {
    let number = |suffix: &str| {
        text.trim_end_matches(suffix)
            .parse::<f64>()
            .unwrap_or(f64::NAN)
    };
    if text.ends_with("us") {
        number("us") / 1000.0
    } else if text.ends_with("ms") {
        number("ms")
    } else if text.ends_with('s') {
        number("s") * 1000.0
    } else {
        f64::NAN
    }
}

fn parse(output: &str) -> Load {
    let mut load = Load::default();
    for line in output.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            ["Latency", _avg, _stdev, max, ..] => load.max_ms = millis(max),
            ["50%", value] => load.p50_ms = millis(value),
            ["99%", value] => load.p99_ms = millis(value),
            ["Requests/sec:", value] => load.requests_per_second = value.parse().unwrap_or(0.0),
            ["Non-2xx", "or", "3xx", "responses:", count] => {
                load.errors += count.parse::<u64>().unwrap_or(0)
            }
            ["Socket", "errors:", rest @ ..] => {
                load.errors += rest
                    .iter()
                    .filter_map(|f| f.trim_end_matches(',').parse::<u64>().ok())
                    .sum::<u64>()
            }
            [count, "requests", "in", ..] => load.requests = count.parse().unwrap_or(0),
            _ => {}
        }
    }
    load
}

fn wrk(work: &Path, port: u16, maps: usize, seconds: u32) -> Load {
    let script = work.join(format!("post-{maps}.lua"));
    std::fs::write(
        &script,
        format!(
            "wrk.method = \"POST\"\n\
             wrk.headers[\"Content-Type\"] = \"application/json\"\n\
             wrk.body = '{{\"email\": \"user@example.com\", \"plan\": \"pro\", \"source\": \"newsletter-signup-form\"}}'\n\
             request = function()\n\
               return wrk.format(nil, \"{BASE}/register?map=map\" .. math.random(1, {maps}))\n\
             end\n"
        ),
    )
    .expect("wrk script");
    let output = Command::new("wrk")
        .args(["-t2", "-c32", &format!("-d{seconds}s"), "--latency", "-s"])
        .arg(&script)
        .arg(format!("http://127.0.0.1:{port}{BASE}/register"))
        .output()
        .expect("run wrk (Debian package wrk)");
    parse(&String::from_utf8_lossy(&output.stdout))
}

/// Runs the load section; `None` when the service's release build or wrk is missing.
pub fn section(cluster: &Cluster, work: &Path, rounds: usize, seconds: u32) -> Option<String> {
    let binary = repo_root().join("target/release/subscribers-http");
    if !binary.exists() || Command::new("wrk").arg("--version").output().is_err() {
        eprintln!("no HTTP load test: build subscribers-http --release and install wrk (bench/run.sh does)");
        return None;
    }
    let mut client = cluster.database("http");
    for map in 1..=8 {
        client
            .batch_execute(&format!("SELECT chunked_map.chunked_start('map{map}')"))
            .unwrap();
    }
    let url = cluster.url("http");
    // (workload, maps, the service's environment)
    type Config<'a> = (&'a str, usize, &'a [(&'a str, &'a str)]);
    let configs: [Config<'_>; 4] = [
        ("1 map, default (waits up to 50 ms)", 1, &[]),
        (
            "1 map, LOCK_TIMEOUT_MS=0 (never waits, retries)",
            1,
            &[("LOCK_TIMEOUT_MS", "0")],
        ),
        ("8 maps, default (waits up to 50 ms)", 8, &[]),
        (
            "8 maps, LOCK_TIMEOUT_MS=0 (never waits, retries)",
            8,
            &[("LOCK_TIMEOUT_MS", "0")],
        ),
    ];
    let mut results: Vec<Vec<Load>> = vec![Vec::new(); configs.len()];
    for round in 0..rounds {
        eprintln!("HTTP load, round {} of {rounds}", round + 1);
        for (i, (_, maps, env)) in configs.iter().enumerate() {
            let port = free_port();
            let _service = spawn(&binary, &url, port, env);
            results[i].push(wrk(work, port, *maps, seconds));
        }
    }
    let median = |values: Vec<f64>| crate::median(values);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "### G. The HTTP service under load (release build, pool of 16, wrk -t2 -c32 POSTing ~90-byte appends, {seconds} s × {rounds} rounds, median; errors summed)\n"
    );
    let _ = writeln!(
        out,
        "| workload | requests/s | p50 ms | p99 ms | max ms | errors |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|");
    for ((name, _, _), loads) in configs.iter().zip(&results) {
        let _ = writeln!(
            out,
            "| {name} | {:.0} | {:.2} | {:.2} | {:.1} | {} |",
            median(loads.iter().map(|l| l.requests_per_second).collect()),
            median(loads.iter().map(|l| l.p50_ms).collect()),
            median(loads.iter().map(|l| l.p99_ms).collect()),
            loads.iter().map(|l| l.max_ms).fold(0.0, f64::max),
            loads.iter().map(|l| l.errors).sum::<u64>(),
        );
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_wrk_prints() {
        let output = "Running 10s test @ http://127.0.0.1:8080/x
  2 threads and 32 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     5.10ms    2.01ms  44.36ms   80.00%
    Req/Sec     3.20k   200.00     3.60k    70.00%
  Latency Distribution
     50%    4.90ms
     75%    6.00ms
     90%    7.50ms
     99%    8.52ms
  64501 requests in 10.00s, 9.90MB read
  Socket errors: connect 0, read 1, write 0, timeout 2
  Non-2xx or 3xx responses: 10
Requests/sec:   6450.10
Transfer/sec:      0.99MB
";
        let load = parse(output);
        assert_eq!(load.requests, 64_501);
        assert_eq!(load.requests_per_second, 6450.10);
        assert_eq!(load.p50_ms, 4.90);
        assert_eq!(load.p99_ms, 8.52);
        assert_eq!(load.max_ms, 44.36);
        assert_eq!(load.errors, 13);
        assert_eq!(millis("456.00us"), 0.456);
        assert_eq!(millis("1.02s"), 1020.0);
    }
}
