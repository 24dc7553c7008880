//! Runs the suites PostgreSQL's own test runners drive, each against a throw-away cluster:
//! - `tests/pg_regress`: psql sessions whose output, errors included, must match the committed
//!   expected files (`pg_regress`);
//! - `tests/isolation`: interleavings of several sessions in a given order, one spec per
//!   interleaving (`pg_isolation_regress`, PostgreSQL's isolation tester).
//!
//! With CHUNKED_MAP_REGRESS_ACCEPT=1 the actual output is copied over the expected files
//! instead (then read the diff before committing it).

use std::path::Path;
use std::process::Command;

use chunked_map_cluster_tests::{pg_bin_dir, pgxs_dir, repo_root, Cluster, SUPERUSER};

#[test]
fn pg_regress_output_matches_the_expected_files() {
    run_suite("regress/pg_regress", "pg_regress", "chunked_map_regress");
}

#[test]
fn isolation_specs_match_the_expected_files() {
    run_suite(
        "isolation/pg_isolation_regress",
        "isolation",
        "chunked_map_isolation",
    );
}

fn run_suite(runner: &str, suite: &str, database: &str) {
    let cluster = Cluster::start();
    let suite = repo_root().join("tests").join(suite);
    let output_dir = cluster.socket_dir().join("results-dir");
    std::fs::create_dir_all(&output_dir).expect("output directory");

    let status = Command::new(pgxs_dir().join("src/test").join(runner))
        .arg(format!("--inputdir={}", suite.display()))
        .arg(format!("--outputdir={}", output_dir.display()))
        .arg(format!("--schedule={}", suite.join("schedule").display()))
        .arg(format!("--host={}", cluster.socket_dir().display()))
        .arg(format!("--port={}", cluster.port()))
        .arg(format!("--user={SUPERUSER}"))
        .arg(format!("--bindir={}", pg_bin_dir().display()))
        .arg(format!("--dbname={database}"))
        // the regression scripts' `\i setup.psql` is relative to here
        .current_dir(&suite)
        .status()
        .expect("run the test runner");

    if std::env::var_os("CHUNKED_MAP_REGRESS_ACCEPT").is_some() {
        accept(&output_dir.join("results"), &suite.join("expected"));
        return;
    }
    if !status.success() {
        let diffs =
            std::fs::read_to_string(output_dir.join("regression.diffs")).unwrap_or_default();
        panic!("{runner} found differences:\n{diffs}");
    }
}

fn accept(results: &Path, expected: &Path) {
    for entry in std::fs::read_dir(results).expect("results") {
        let path = entry.expect("result").path();
        if path.extension().is_none_or(|ext| ext != "out") {
            continue;
        }
        let target = expected.join(path.file_name().expect("file name"));
        std::fs::copy(&path, &target).expect("copy result");
        eprintln!("accepted {}", target.display());
    }
}
