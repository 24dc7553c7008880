//! Throw-away PostgreSQL clusters for tests that need a real server of their own: several
//! connections at once, crashes, pg_dump, roles, upgrades. Each [`Cluster`] is started by
//! `scripts/pgcluster.sh` on a free port in its own directory under /tmp, and stopped and
//! removed when dropped. The extension must be installed (`scripts/install-extension.sh`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

pub use postgres::{Client, NoTls};
use serde_json::Value;

pub mod citus;
pub mod dice;
pub mod page;

pub const SUPERUSER: &str = "postgres";

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repository root")
}

/// The extension's version, as its Cargo.toml gives it (what `CREATE EXTENSION` installs).
pub fn extension_version() -> String {
    let manifest = std::fs::read_to_string(repo_root().join("Cargo.toml"))
        .expect("the extension's Cargo.toml");
    manifest
        .lines()
        .find_map(|line| line.strip_prefix("version = \""))
        .and_then(|rest| rest.strip_suffix('"'))
        .expect("a version in Cargo.toml")
        .to_owned()
}

/// The PostgreSQL the tests run against: its major version, its programs and its PGXS test
/// runners, as `scripts/lib.sh` exports them for the `PG_MAJOR` it was given (Debian 12's
/// PostgreSQL 15 when run by hand without it).
pub fn pg_major() -> u32 {
    std::env::var("CHUNKED_MAP_PG_MAJOR")
        .ok()
        .and_then(|major| major.parse().ok())
        .unwrap_or(15)
}

pub fn pg_bin_dir() -> PathBuf {
    std::env::var_os("CHUNKED_MAP_PGBIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(format!("/usr/lib/postgresql/{}/bin", pg_major())))
}

pub fn pg_bin(program: &str) -> PathBuf {
    pg_bin_dir().join(program)
}

/// PGXS's directory (`pg_regress` and `pg_isolation_regress` are under `src/test`).
pub fn pgxs_dir() -> PathBuf {
    std::env::var_os("CHUNKED_MAP_PGXS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(format!("/usr/lib/postgresql/{}/lib/pgxs", pg_major())))
}

pub struct Cluster {
    dir: PathBuf,
    port: u16,
}

impl Cluster {
    /// A new cluster with default settings.
    pub fn start() -> Cluster {
        Cluster::start_with(&[])
    }

    /// A new cluster with extra `name=value` settings.
    pub fn start_with(settings: &[&str]) -> Cluster {
        Cluster::start_with_environment(settings, &[])
    }

    /// A new cluster with extra settings, its server started with extra environment variables
    /// (`RUST_BACKTRACE=1`, say).
    pub fn start_with_environment(settings: &[&str], environment: &[(&str, &str)]) -> Cluster {
        static STARTED: AtomicUsize = AtomicUsize::new(0);
        let n = STARTED.fetch_add(1, Ordering::SeqCst);
        let dir = PathBuf::from(format!("/tmp/chunked_map-test-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let port = free_port();
        let mut args = vec![
            "start".to_string(),
            dir.display().to_string(),
            port.to_string(),
        ];
        for setting in settings {
            args.push("-c".into());
            args.push((*setting).into());
        }
        let cluster = Cluster { dir, port };
        cluster.script_with(&args, environment);
        cluster
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The socket directory, usable as libpq's `host`.
    pub fn socket_dir(&self) -> &Path {
        &self.dir
    }

    /// Blocks until the server's log has a line containing `text` (a backend writes each
    /// message to the log before it sends it to its client), or panics after a minute.
    pub fn wait_for_log_line(&self, text: &str) {
        let began = std::time::Instant::now();
        loop {
            let log = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
            if log.lines().any(|line| line.contains(text)) {
                return;
            }
            assert!(
                began.elapsed() < Duration::from_secs(60),
                "no line of the server log contains {text:?}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    pub fn connect(&self, database: &str) -> Client {
        self.connect_as(database, SUPERUSER)
    }

    pub fn connect_as(&self, database: &str, user: &str) -> Client {
        self.config(database, user)
            .connect(NoTls)
            .unwrap_or_else(|e| panic!("connect to {database} as {user}: {e}"))
    }

    /// How to connect to `database` as `user` (to add a notice callback, say).
    pub fn config(&self, database: &str, user: &str) -> postgres::Config {
        let mut config = postgres::Config::new();
        config
            .host_path(&self.dir)
            .port(self.port)
            .user(user)
            .dbname(database)
            .connect_timeout(Duration::from_secs(30));
        config
    }

    /// A libpq URL over TCP, for programs in other languages.
    pub fn url(&self, database: &str) -> String {
        format!(
            "postgresql://{SUPERUSER}@127.0.0.1:{}/{database}",
            self.port
        )
    }

    /// Creates `database` with the extension installed in it, and returns a connection to it.
    pub fn database(&self, database: &str) -> Client {
        self.connect("postgres")
            .batch_execute(&format!("CREATE DATABASE \"{database}\""))
            .expect("create database");
        let mut client = self.connect(database);
        client
            .batch_execute("CREATE EXTENSION chunked_map")
            .expect("create extension");
        client
    }

    /// Stops the server the way a crash would: no checkpoint, no goodbye to clients.
    pub fn crash(&self) {
        self.script(&[
            "stop".into(),
            self.dir.display().to_string(),
            "immediate".into(),
        ]);
    }

    pub fn restart(&self) {
        self.script(&["restart".into(), self.dir.display().to_string()]);
    }

    /// Runs a PostgreSQL client program (pg_dump, psql, pg_regress, ...) against this cluster
    /// as the superuser; returns its output, panicking with its stderr if it fails.
    pub fn run(&self, program: &Path, args: &[&str]) -> Output {
        let output = Command::new(program)
            .args(args)
            .env("PGHOST", &self.dir)
            .env("PGPORT", self.port.to_string())
            .env("PGUSER", SUPERUSER)
            .output()
            .unwrap_or_else(|e| panic!("{}: {e}", program.display()));
        assert!(
            output.status.success(),
            "{} {args:?} failed:\n{}{}",
            program.display(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        output
    }

    fn script(&self, args: &[String]) {
        self.script_with(args, &[]);
    }

    fn script_with(&self, args: &[String], environment: &[(&str, &str)]) {
        let script = repo_root().join("scripts/pgcluster.sh");
        let output = Command::new(&script)
            .args(args)
            .env_remove("RUST_BACKTRACE")
            .env_remove("RUST_LIB_BACKTRACE")
            .envs(environment.iter().copied())
            .output()
            .expect("run pgcluster.sh");
        if !output.status.success() {
            let log = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
            panic!(
                "pgcluster.sh {args:?} failed:\n{}{}\nserver.log:\n{log}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let script = repo_root().join("scripts/pgcluster.sh");
        let _ = Command::new(script)
            .args(["stop", &self.dir.display().to_string()])
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A port nothing listens on now. Ports are handed out from a per-process range so that the
/// clusters of one test binary never race each other for the same one.
fn free_port() -> u16 {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let base = 20_000 + (std::process::id() as usize % 200) * 100;
    loop {
        let port = (base + NEXT.fetch_add(1, Ordering::SeqCst) % 100) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// A Python virtual environment under target/ with `requirements` installed (cached between
/// runs); returns its interpreter.
pub fn python_with(name: &str, requirements: &Path) -> PathBuf {
    let venv = repo_root().join("target/client-examples").join(name);
    let python = venv.join("bin/python");
    if !python.exists() {
        let status = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .expect("python3 -m venv");
        assert!(status.success(), "python3 -m venv failed");
    }
    let status = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-r",
        ])
        .arg(requirements)
        .status()
        .expect("pip install");
    assert!(
        status.success(),
        "pip install -r {} failed",
        requirements.display()
    );
    python
}

/// The SQLSTATE and message of a failed statement.
pub fn db_error(error: &postgres::Error) -> (String, String) {
    let db = error
        .as_db_error()
        .unwrap_or_else(|| panic!("not a server error: {error}"));
    (db.code().code().to_string(), db.message().to_string())
}

/// Asserts that `result` failed with `sqlstate` and a message containing `message`.
#[track_caller]
pub fn assert_error<T: std::fmt::Debug>(
    result: Result<T, postgres::Error>,
    sqlstate: &str,
    message: &str,
) -> postgres::error::DbError {
    let error = result.expect_err("expected an error");
    let db = error
        .as_db_error()
        .unwrap_or_else(|| panic!("not a server error: {error}"))
        .clone();
    assert_eq!(db.code().code(), sqlstate, "SQLSTATE of: {}", db.message());
    assert!(
        db.message().contains(message),
        "message {:?} should contain {message:?}",
        db.message()
    );
    db
}

/// Runs a query that returns one jsonb value and parses it.
pub fn query_json(
    client: &mut Client,
    sql: &str,
    params: &[&(dyn postgres::types::ToSql + Sync)],
) -> Value {
    let text: String = client
        .query_one(&format!("SELECT ({sql})::text"), params)
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .get(0);
    serde_json::from_str(&text).expect("valid JSON")
}

/// Blocks until a session connected to `database` waits for a heavyweight lock (as
/// `pg_stat_activity` shows it to `observer`, a session of its own), or panics after a minute;
/// returns its pid. What a test does next then happens while that session waits, whatever the
/// machine's load.
pub fn wait_until_a_session_waits_for_a_lock(observer: &mut Client, database: &str) -> i32 {
    let began = std::time::Instant::now();
    loop {
        let waiting = observer
            .query_opt(
                "SELECT pid FROM pg_catalog.pg_stat_activity
                 WHERE datname = $1 AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()
                 LIMIT 1",
                &[&database],
            )
            .expect("pg_stat_activity");
        if let Some(row) = waiting {
            return row.get(0);
        }
        assert!(
            began.elapsed() < Duration::from_secs(60),
            "no session of {database} waited for a lock"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Every notification `listener` has been sent by now: one round trip to its server, which
/// delivers every notification committed before the round trip started ahead of the round
/// trip's answer (PostgreSQL sends pending notifications before ReadyForQuery), then what was
/// delivered, as (channel, payload parsed as JSON). No timer: what a commit that returned
/// before this call sent is always there.
pub fn notifications_delivered(listener: &mut Client) -> Vec<(String, Value)> {
    use postgres::fallible_iterator::FallibleIterator;
    listener.batch_execute("SELECT 1").expect("round trip");
    let mut notifications = listener.notifications();
    let mut out = Vec::new();
    let mut iter = notifications.iter();
    while let Ok(Some(notification)) = iter.next() {
        let payload: Value = serde_json::from_str(notification.payload()).expect("payload is JSON");
        out.push((notification.channel().to_owned(), payload));
    }
    out
}

/// Every notification `listener` receives within `wait` (for a commit that has not returned
/// yet when the call starts, such as one on another node).
pub fn notifications_within(listener: &mut Client, wait: Duration) -> Vec<(String, Value)> {
    use postgres::fallible_iterator::FallibleIterator;
    let mut notifications = listener.notifications();
    let mut out = Vec::new();
    let mut iter = notifications.timeout_iter(wait);
    while let Ok(Some(notification)) = iter.next() {
        let payload: Value = serde_json::from_str(notification.payload()).expect("payload is JSON");
        out.push((notification.channel().to_owned(), payload));
    }
    out
}

/// The notification channel of `map` (its notifications must be on), as `chunked_info` reports
/// it.
pub fn notify_channel(client: &mut Client, map: &str) -> String {
    let channel: Option<String> = client
        .query_one(
            "SELECT chunked_map.chunked_info($1) ->> 'notify_channel'",
            &[&map],
        )
        .expect("chunked_info")
        .get(0);
    channel.unwrap_or_else(|| panic!("map {map} has no notification channel"))
}

/// Makes `listener` listen on `map`'s notification channel; returns the channel.
pub fn listen_to(listener: &mut Client, map: &str) -> String {
    let channel = notify_channel(listener, map);
    listener
        .batch_execute(&format!("LISTEN \"{channel}\""))
        .expect("LISTEN");
    channel
}

/// A notification chunked_map sends on `channel` for `map` committed up to `last_seq`.
pub fn announced(channel: &str, map: &str, last_seq: i64) -> (String, Value) {
    (
        channel.to_owned(),
        serde_json::json!({"map": map, "last_seq": last_seq}),
    )
}
