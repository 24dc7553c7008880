//! A throw-away Citus cluster: a coordinator and two workers, each a [`Cluster`] on loopback
//! with Citus preloaded, one database with `citus` and `chunked_map` in it, the workers added
//! to the coordinator. For `tests/citus.rs`, run by `scripts/test-citus.sh` where Citus is
//! installed in the PostgreSQL the tests run against (the project never builds or ships Citus).

use std::path::PathBuf;

use crate::{pg_bin, Client, Cluster, SUPERUSER};

/// Where that PostgreSQL keeps Citus's control file.
fn citus_control() -> PathBuf {
    let sharedir = std::process::Command::new(pg_bin("pg_config"))
        .arg("--sharedir")
        .output()
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned())
        .unwrap_or_default();
    PathBuf::from(sharedir).join("extension/citus.control")
}

/// Whether Citus is installed in the PostgreSQL the tests run against.
pub fn citus_installed() -> bool {
    citus_control().exists()
}

pub struct CitusCluster {
    pub coordinator: Cluster,
    pub workers: Vec<Cluster>,
    pub database: String,
}

impl CitusCluster {
    /// Starts the nodes, as chunked_map's README says to, and makes `database` on each, with
    /// Citus; the extension is created on the coordinator (Citus creates it on the workers),
    /// not distributed yet.
    pub fn start(database: &str) -> CitusCluster {
        CitusCluster::start_preloading(database, "citus,chunked_map")
    }

    /// The same with `shared_preload_libraries` set to `libraries` on every node.
    pub fn start_preloading(database: &str, libraries: &str) -> CitusCluster {
        CitusCluster::start_with(database, libraries, None)
    }

    /// The same with chunked_map created at an earlier `version` (its install script is
    /// installed by scripts/install-extension.sh), to be updated by the test.
    pub fn start_at_version(database: &str, version: &str) -> CitusCluster {
        CitusCluster::start_with(database, "citus,chunked_map", Some(version))
    }

    fn start_with(database: &str, libraries: &str, version: Option<&str>) -> CitusCluster {
        assert!(
            citus_installed(),
            "Citus is not installed ({} is missing)",
            citus_control().display()
        );
        let preload = format!("shared_preload_libraries='{libraries}'");
        let settings = [
            preload.as_str(),
            // calls in explicit transactions commit on the workers by two-phase commit
            "max_prepared_transactions=100",
            "track_functions=all",
            "citus.enable_stat_counters=on",
        ];
        let coordinator = Cluster::start_with(&settings);
        let workers: Vec<Cluster> = (0..2).map(|_| Cluster::start_with(&settings)).collect();
        for node in std::iter::once(&coordinator).chain(&workers) {
            node.connect("postgres")
                .batch_execute(&format!("CREATE DATABASE \"{database}\""))
                .expect("create database");
            node.connect(database)
                .batch_execute("CREATE EXTENSION citus")
                .expect("create extension citus");
        }
        let mut client = coordinator.connect(database);
        client
            .execute(
                "SELECT citus_set_coordinator_host('127.0.0.1', $1)",
                &[&i32::from(coordinator.port())],
            )
            .expect("coordinator host");
        for worker in &workers {
            client
                .execute(
                    "SELECT citus_add_node('127.0.0.1', $1)",
                    &[&i32::from(worker.port())],
                )
                .expect("add worker");
        }
        let create = match version {
            Some(version) => format!("CREATE EXTENSION chunked_map VERSION '{version}'"),
            None => "CREATE EXTENSION chunked_map".to_owned(),
        };
        client
            .batch_execute(&create)
            .expect("create extension chunked_map");
        CitusCluster {
            coordinator,
            workers,
            database: database.to_owned(),
        }
    }

    pub fn coordinator(&self) -> Client {
        self.coordinator.connect(&self.database)
    }

    pub fn worker(&self, index: usize) -> Client {
        self.workers[index].connect(&self.database)
    }

    /// Every node, coordinator first.
    pub fn nodes(&self) -> Vec<&Cluster> {
        std::iter::once(&self.coordinator)
            .chain(&self.workers)
            .collect()
    }

    pub fn connect_as(&self, node: &Cluster, user: &str) -> Client {
        node.connect_as(&self.database, user)
    }

    /// A libpq URL for programs (pgbench) on `node`.
    pub fn url(&self, node: &Cluster) -> String {
        format!(
            "postgresql://{SUPERUSER}@127.0.0.1:{}/{}",
            node.port(),
            self.database
        )
    }
}
