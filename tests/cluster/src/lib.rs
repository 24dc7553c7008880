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
pub mod page;

pub const SUPERUSER: &str = "postgres";

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repository root")
}

pub fn pg_bin(program: &str) -> PathBuf {
    Path::new("/usr/lib/postgresql/15/bin").join(program)
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
        cluster.script(&args);
        cluster
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The socket directory, usable as libpq's `host`.
    pub fn socket_dir(&self) -> &Path {
        &self.dir
    }

    pub fn connect(&self, database: &str) -> Client {
        self.connect_as(database, SUPERUSER)
    }

    pub fn connect_as(&self, database: &str, user: &str) -> Client {
        postgres::Config::new()
            .host_path(&self.dir)
            .port(self.port)
            .user(user)
            .dbname(database)
            .connect_timeout(Duration::from_secs(30))
            .connect(NoTls)
            .unwrap_or_else(|e| panic!("connect to {database} as {user}: {e}"))
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
        let script = repo_root().join("scripts/pgcluster.sh");
        let output = Command::new(&script)
            .args(args)
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

/// Every notification `listener` received within `wait`, as (channel, payload parsed as JSON).
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

/// A notification chunked_map sends for `map` committed up to `last_seq`.
pub fn announced(map: &str, last_seq: i64) -> (String, Value) {
    (
        "chunked_map".to_owned(),
        serde_json::json!({"map": map, "last_seq": last_seq}),
    )
}
