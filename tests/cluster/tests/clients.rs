//! The client examples (examples/clients) run against a throw-away cluster: each starts a map,
//! appends through its retry loop while another transaction holds the map for a moment (so the
//! loop really meets 40001), and pages back to the oldest chunk. Their packages come from PyPI
//! and npm, installed here (once, cached under target/).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use chunked_map_cluster_tests::{python_with, repo_root, Cluster};
use serde_json::Value;

const MAP: &str = "subscribers";
const COUNT: i64 = 10;
const CHUNK_SIZE: i64 = 3;

fn run(command: &mut Command) -> Output {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(
        output.status.success(),
        "{command:?} failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn cache_dir(name: &str) -> PathBuf {
    repo_root().join("target/client-examples").join(name)
}

/// Runs a client against a fresh database while a transaction holds the map's append lock until
/// the client's first append has met it (40001), then checks what it appended and read back;
/// returns its report for more checks.
fn check_client(client: impl FnOnce(&str) -> Command) -> Value {
    let cluster = Cluster::start();
    let mut holder = cluster.database("clients");
    holder
        .batch_execute(&format!(
            "SELECT chunked_map.chunked_start('{MAP}', {CHUNK_SIZE})"
        ))
        .unwrap();
    holder
        .batch_execute(&format!(
            "BEGIN; SELECT chunked_map.chunked_register('{MAP}', '{{\"held\": true}}')"
        ))
        .unwrap();
    let mut command = client(&cluster.url("clients"));
    command.args([MAP, &COUNT.to_string(), &CHUNK_SIZE.to_string()]);
    let child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start client");
    // the holder commits once the client's retry loop has met the held map (its 40001 is in
    // the server's log before the client reads it), not after a pause that could race it
    cluster.wait_for_log_line(&format!("map \"{MAP}\" is locked by a concurrent append"));
    holder.batch_execute("COMMIT").unwrap();
    let output = child.wait_with_output().expect("client");
    assert!(
        output.status.success(),
        "client failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).expect("client prints JSON");
    eprintln!("client retries: {}", report["retries"]);

    // the held append is 1; the client's appends follow, contiguous
    let appended: Vec<i64> = report["appended"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_i64().unwrap())
        .collect();
    assert_eq!(appended, (2..=COUNT + 1).collect::<Vec<_>>());
    assert!(
        report["retries"].as_i64().unwrap() >= 1,
        "the retry loop met the held lock"
    );
    let records = report["records"].as_array().unwrap();
    let seqs: Vec<i64> = records.iter().map(|r| r["seq"].as_i64().unwrap()).collect();
    assert_eq!(
        seqs,
        (1..=COUNT + 1).rev().collect::<Vec<_>>(),
        "every record once, newest first"
    );
    for record in records {
        let seq = record["seq"].as_i64().unwrap();
        let expected = if seq == 1 {
            serde_json::json!({"held": true})
        } else {
            let n = seq - 1;
            serde_json::json!({"email": format!("user{n}@example.com"), "n": n})
        };
        assert_eq!(record["payload"], expected);
    }
    let pages: Vec<&str> = report["pages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert_eq!(
        pages,
        // 11 records in chunks of 3: 1..3, 4..6, 7..9 archived, 10..11 current
        [
            "current",
            "00000000000000000007",
            "00000000000000000004",
            "00000000000000000001"
        ]
    );
    report
}

#[test]
fn the_python_client_appends_with_retries_and_pages_to_the_oldest_chunk() {
    let example = repo_root().join("examples/clients/python");
    let python = python_with("python-venv", &example.join("requirements.txt"));
    check_client(|url| {
        let mut command = Command::new(&python);
        command
            .arg(example.join("subscribers.py"))
            .env("DATABASE_URL", url);
        command
    });
}

#[test]
fn the_typescript_client_appends_with_retries_and_pages_to_the_oldest_chunk() {
    let example = repo_root().join("examples/clients/typescript");
    let npm = |args: &[&str], dir: &Path| {
        run(Command::new("npm")
            .args(args)
            .arg("--no-audit")
            .arg("--no-fund")
            .current_dir(dir));
    };
    npm(&["ci", "--silent"], &example);
    npm(&["run", "--silent", "build"], &example);
    check_client(|url| {
        let mut command = Command::new("node");
        command
            .arg(example.join("dist/subscribers.js"))
            .env("DATABASE_URL", url);
        command
    });
}

#[test]
fn the_go_client_appends_with_retries_and_pages_to_the_oldest_chunk() {
    // Debian's Go 1.19 with Debian's pgx v4, in GOPATH mode (no module proxy reachable)
    let example = repo_root().join("examples/clients/go/subscribers.go");
    let binary = cache_dir("go").join("subscribers");
    std::fs::create_dir_all(cache_dir("go")).expect("cache directory");
    run(Command::new("go")
        .args(["build", "-o"])
        .arg(&binary)
        .arg(&example)
        .env("GO111MODULE", "off")
        .env("GOPATH", "/usr/share/gocode")
        .env("GOCACHE", cache_dir("go-cache")));
    check_client(|url| {
        let mut command = Command::new(&binary);
        command.env("DATABASE_URL", url);
        command
    });
}

#[test]
fn the_java_client_appends_with_retries_and_pages_to_the_oldest_chunk() {
    // Debian's JDK 17 running the single-file program, with Debian's pgjdbc
    let example = repo_root().join("examples/clients/java/Subscribers.java");
    check_client(|url| {
        let mut command = Command::new("java");
        command
            .args(["-cp", "/usr/share/java/postgresql.jar"])
            .arg(&example)
            .env("DATABASE_URL", url);
        command
    });
}

/// What an ORM example reports of its optimistic append after the wrong sequence: the domain
/// error it maps 23000 to, never a retry.
fn assert_optimistic_mismatch_is_a_domain_error(report: &Value) {
    let optimistic = report["optimistic"].as_str().expect("optimistic");
    assert!(
        optimistic.starts_with(
            "UnexpectedLastSeq: map \"subscribers\" has newest sequence 11, expected 10"
        ),
        "{optimistic}"
    );
}

#[test]
fn the_sqlalchemy_example_calls_the_functions_through_func_and_maps_the_sqlstates() {
    let example = repo_root().join("examples/orm/sqlalchemy");
    let python = python_with("sqlalchemy-venv", &example.join("requirements.txt"));
    let report = check_client(|url| {
        let mut command = Command::new(&python);
        command
            .arg(example.join("subscribers.py"))
            .env("DATABASE_URL", url);
        command
    });
    assert_optimistic_mismatch_is_a_domain_error(&report);
}

#[test]
fn the_drizzle_example_calls_the_functions_through_sql_and_maps_the_sqlstates() {
    let example = repo_root().join("examples/orm/drizzle");
    let npm = |args: &[&str]| {
        run(Command::new("npm")
            .args(args)
            .arg("--no-audit")
            .arg("--no-fund")
            .current_dir(&example));
    };
    npm(&["ci", "--silent"]);
    npm(&["run", "--silent", "build"]);
    let report = check_client(|url| {
        let mut command = Command::new("node");
        command
            .arg(example.join("dist/subscribers.js"))
            .env("DATABASE_URL", url);
        command
    });
    assert_optimistic_mismatch_is_a_domain_error(&report);
}
