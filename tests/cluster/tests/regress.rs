//! Runs the pg_regress suite (tests/pg_regress) against a throw-away cluster: psql sessions
//! whose output, errors and SQLSTATEs included, must match the committed expected files.
//! With CHUNKED_MAP_REGRESS_ACCEPT=1 the actual output is copied over the expected files
//! instead (then read the diff before committing it).

use std::path::Path;
use std::process::Command;

use chunked_map_cluster_tests::{repo_root, Cluster, SUPERUSER};

const PG_REGRESS: &str = "/usr/lib/postgresql/15/lib/pgxs/src/test/regress/pg_regress";

#[test]
fn pg_regress_output_matches_the_expected_files() {
    let cluster = Cluster::start();
    let suite = repo_root().join("tests/pg_regress");
    let output_dir = cluster.socket_dir().join("regress");
    std::fs::create_dir_all(&output_dir).expect("output directory");

    let status = Command::new(PG_REGRESS)
        .arg(format!("--inputdir={}", suite.display()))
        .arg(format!("--outputdir={}", output_dir.display()))
        .arg(format!("--schedule={}", suite.join("schedule").display()))
        .arg(format!("--host={}", cluster.socket_dir().display()))
        .arg(format!("--port={}", cluster.port()))
        .arg(format!("--user={SUPERUSER}"))
        .arg("--bindir=/usr/lib/postgresql/15/bin")
        .arg("--dbname=chunked_map_regress")
        // the scripts' `\i setup.psql` is relative to here
        .current_dir(&suite)
        .status()
        .expect("run pg_regress");

    if std::env::var_os("CHUNKED_MAP_REGRESS_ACCEPT").is_some() {
        accept(&output_dir.join("results"), &suite.join("expected"));
        return;
    }
    if !status.success() {
        let diffs =
            std::fs::read_to_string(output_dir.join("regression.diffs")).unwrap_or_default();
        panic!("pg_regress found differences:\n{diffs}");
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
