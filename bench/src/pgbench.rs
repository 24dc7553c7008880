//! Running pgbench against the benchmark cluster and reading what it prints.

use std::path::{Path, PathBuf};
use std::process::Command;

use chunked_map_cluster_tests::{pg_bin, Cluster};

/// One pgbench run.
pub struct Run<'a> {
    pub script: &'a str,
    pub clients: u32,
    pub length: Length,
    /// `-D name=value` definitions.
    pub defines: Vec<(String, String)>,
    /// Server settings for the run's sessions (PGOPTIONS), e.g. `-c synchronous_commit=off`.
    pub options: String,
    /// Retry transactions that fail with 40001 (pgbench --max-tries=0: unlimited, within -T).
    pub retry: bool,
    /// Write per-transaction latencies to this directory (pgbench -l).
    pub log_dir: Option<PathBuf>,
}

/// How long a run lasts.
#[derive(Clone, Copy)]
pub enum Length {
    Seconds(u32),
    /// Transactions per client.
    Transactions(u64),
}

#[derive(Debug, Default, Clone)]
pub struct Outcome {
    pub tps: f64,
    pub transactions: u64,
    pub failed: u64,
    pub retries: u64,
}

pub fn run(cluster: &Cluster, database: &str, work_dir: &Path, run: &Run<'_>) -> Outcome {
    let script = work_dir.join("script.sql");
    std::fs::write(&script, run.script).expect("write pgbench script");
    let mut command = Command::new(pg_bin("pgbench"));
    command
        .args(["-n", "-M", "prepared"])
        .arg(format!("--client={}", run.clients))
        .arg(format!("--jobs={}", run.clients.min(2)))
        .arg(match run.length {
            Length::Seconds(seconds) => format!("--time={seconds}"),
            Length::Transactions(count) => format!("--transactions={count}"),
        })
        .arg(format!("--file={}", script.display()))
        .env("PGHOST", cluster.socket_dir())
        .env("PGPORT", cluster.port().to_string())
        .env("PGUSER", chunked_map_cluster_tests::SUPERUSER)
        .env("PGOPTIONS", &run.options);
    for (name, value) in &run.defines {
        command.arg(format!("--define={name}={value}"));
    }
    if run.retry {
        command.arg("--max-tries=0");
    }
    if let Some(dir) = &run.log_dir {
        std::fs::create_dir_all(dir).expect("log directory");
        command
            .arg("--log")
            .arg(format!("--log-prefix={}", dir.join("latency").display()));
    }
    command.arg(database);
    let output = command.output().expect("run pgbench");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let outcome = parse(&stdout);
    // pgbench exits 2 when some transactions failed; that is a result, not an error
    if outcome.transactions == 0 && outcome.failed == 0 {
        panic!("pgbench did not run:\n{}\n{stdout}\n{stderr}", run.script);
    }
    outcome
}

fn number_after<T: std::str::FromStr>(text: &str, label: &str) -> Option<T> {
    let line = text
        .lines()
        .find(|line| line.trim_start().starts_with(label))?;
    let rest = line.trim_start()[label.len()..].trim_start_matches([':', '=', ' ']);
    // "20000/20000" when a transaction count was given
    rest.split_whitespace()
        .next()?
        .split('/')
        .next()?
        .parse()
        .ok()
}

pub fn parse(stdout: &str) -> Outcome {
    Outcome {
        tps: number_after(stdout, "tps").unwrap_or(0.0),
        transactions: number_after(stdout, "number of transactions actually processed")
            .unwrap_or(0),
        failed: number_after(stdout, "number of failed transactions").unwrap_or(0),
        retries: number_after(stdout, "total number of retries").unwrap_or(0),
    }
}

/// Per-transaction latencies in microseconds from the logs pgbench -l wrote into `dir`.
pub fn latencies_us(dir: &Path) -> Vec<u64> {
    let mut latencies = Vec::new();
    for entry in std::fs::read_dir(dir).expect("log directory") {
        let text = std::fs::read_to_string(entry.expect("log file").path()).expect("read log");
        // client_id transaction_no time script_no time_epoch time_us
        latencies.extend(
            text.lines()
                .filter_map(|line| line.split_whitespace().nth(2)?.parse::<u64>().ok()),
        );
    }
    latencies.sort_unstable();
    latencies
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_pgbench_summary() {
        let out = "number of transactions actually processed: 7380/7380\n\
                   number of failed transactions: 3 (0.041%)\n\
                   number of transactions retried: 120 (1.6%)\n\
                   total number of retries: 4512\n\
                   latency average = 0.677 ms\n\
                   tps = 1475.808451 (without initial connection time)\n";
        let outcome = parse(out);
        assert_eq!(outcome.transactions, 7380);
        assert_eq!(outcome.failed, 3);
        assert_eq!(outcome.retries, 4512);
        assert!((outcome.tps - 1475.808451).abs() < 1e-9);
    }
}
