//! Runs the suites PostgreSQL's own test runners drive, each against a throw-away cluster:
//! - `tests/pg_regress`: psql sessions whose output, errors included, must match the committed
//!   expected files (`pg_regress`);
//! - `tests/isolation`: interleavings of several sessions in a given order, one spec per
//!   interleaving (`pg_isolation_regress`, PostgreSQL's isolation tester). The specs
//!   `<function>_per_isolation_level` are written here, before the tester runs, from one
//!   template (`tests/isolation/write_function_per_isolation_level.spec.in`) and the
//!   list [`UNDER_EACH_ISOLATION_LEVEL`].
//!
//! With CHUNKED_MAP_REGRESS_ACCEPT=1 the actual output is copied over the expected files
//! instead (then read the diff before committing it).

use std::path::Path;
use std::process::Command;

use chunked_map_cluster_tests::{pg_bin_dir, pgxs_dir, repo_root, Cluster, SUPERUSER};

/// A write function tested by the template spec: the same sessions and permutations (another
/// transaction holds the map; another transaction's append committed after the caller's
/// snapshot), under READ COMMITTED, REPEATABLE READ and SERIALIZABLE.
struct WriteFunction {
    /// the spec's name is `<spec>_per_isolation_level`
    spec: &'static str,
    /// the signature the spec's first line names
    signature: &'static str,
    /// what the spec adds to the template's header (comment lines), or ""
    about: &'static str,
    /// the statement each isolation level's session runs; `$session` is that session's name
    /// (rc, rr, ser)
    call: &'static str,
}

const UNDER_EACH_ISOLATION_LEVEL: &[WriteFunction] = &[
    WriteFunction {
        spec: "chunked_register",
        signature: "chunked_register(map, payload)",
        about: "",
        call: "SELECT chunked_map.chunked_register('m', jsonb_build_object('by', '$session'));",
    },
    WriteFunction {
        spec: "optimistic_register",
        signature: "chunked_register(map, payload, expected_last_seq)",
        about: "# The caller expects the newest sequence to be 1 (the setup's record). Once another append has
# committed, that expectation is wrong: 23000 \"has newest sequence 2, expected 1\", never 40001,
# so that a retry loop stops; under REPEATABLE READ and SERIALIZABLE the out-of-date snapshot
# is reported first.",
        call: "SELECT chunked_map.chunked_register('m', jsonb_build_object('by', '$session'), 1);",
    },
    WriteFunction {
        spec: "chunked_register_many",
        signature: "chunked_register_many(map, payloads)",
        about: "# Three payloads: with the writer's record they fill the chunk of 3 and roll it over.",
        call: "SELECT count(*) FROM chunked_map.chunked_register_many('m', ARRAY[\
               jsonb_build_object('by', '$session'), jsonb_build_object('by', '$session'), \
               jsonb_build_object('by', '$session')]::jsonb[]);",
    },
    WriteFunction {
        spec: "chunked_register_once",
        signature: "chunked_register_once(map, payload, id)",
        about: "# (0.5) Each session's own id: an append like any other to the lock and the snapshot.",
        call: "SELECT * FROM chunked_map.chunked_register_once('m', jsonb_build_object('by', '$session'), '$session');",
    },
    WriteFunction {
        spec: "register_many_once",
        signature: "chunked_register_many_once(map, payloads, ids)",
        about: "# (0.5) Three payloads, the third's id the first's: two records, with the writer's they fill the
# chunk of 3 and roll it over.",
        call: "SELECT * FROM chunked_map.chunked_register_many_once('m', ARRAY[\
               jsonb_build_object('by', '$session'), jsonb_build_object('by', '$session'), \
               jsonb_build_object('by', '$session')]::jsonb[], ARRAY['$session-1', '$session-2', '$session-1']);",
    },
    WriteFunction {
        spec: "chunked_set_id_window",
        signature: "chunked_set_id_window(map, max_records)",
        about: "",
        call: "SELECT chunked_map.chunked_set_id_window('m', 5);",
    },
    WriteFunction {
        spec: "chunked_set_chunk_size",
        signature: "chunked_set_chunk_size(map, chunk_size)",
        about: "",
        call: "SELECT chunked_map.chunked_set_chunk_size('m', 2);",
    },
    WriteFunction {
        spec: "chunked_set_notify",
        signature: "chunked_set_notify(map, enabled)",
        about: "",
        call: "SELECT chunked_map.chunked_set_notify('m', true);",
    },
    WriteFunction {
        spec: "chunked_trim",
        signature: "chunked_trim(map, before_seq)",
        about: "# (0.4) Nothing is old enough to go here: what is tested is the lock, as for every write.",
        call: "SELECT chunked_map.chunked_trim('m', 2);",
    },
    WriteFunction {
        spec: "chunked_set_retention",
        signature: "chunked_set_retention(map, max_records, max_age)",
        about: "",
        call: "SELECT chunked_map.chunked_set_retention('m', 10, '1 day');",
    },
    WriteFunction {
        spec: "chunked_apply_retention",
        signature: "chunked_apply_retention(map)",
        about: "",
        call: "SELECT chunked_map.chunked_apply_retention('m');",
    },
    WriteFunction {
        spec: "chunked_drop",
        signature: "chunked_drop(map)",
        about: "# A drop removes every record of the map, also one committed after the snapshot (READ
# COMMITTED), or fails and removes nothing: it never leaves a record behind.",
        call: "SELECT chunked_map.chunked_drop('m');",
    },
];

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

/// Every spec the template makes is in the schedule, with its expected output, and no other
/// spec of that name is committed: a function added to the list is tested, one removed is not
/// left half-tested.
#[test]
fn each_write_function_of_the_template_has_a_scheduled_spec_and_expected_output() {
    let suite = repo_root().join("tests/isolation");
    let schedule = std::fs::read_to_string(suite.join("schedule")).expect("isolation schedule");
    for function in UNDER_EACH_ISOLATION_LEVEL {
        let name = format!("{}_per_isolation_level", function.spec);
        assert!(
            schedule.lines().any(|line| line == format!("test: {name}")),
            "{name} is not in tests/isolation/schedule"
        );
        assert!(
            suite.join("expected").join(format!("{name}.out")).is_file(),
            "tests/isolation/expected/{name}.out is missing"
        );
        assert!(
            !suite.join("specs").join(format!("{name}.spec")).exists(),
            "tests/isolation/specs/{name}.spec is committed, but the template writes it"
        );
    }
}

/// The isolation tester names each connection `isolation/<spec>/<session>` in
/// `application_name`, which PostgreSQL cuts at 63 bytes with a NOTICE in the output: every spec
/// name and session name together fit.
#[test]
fn every_isolation_spec_and_session_name_fits_in_an_application_name() {
    let input = std::env::temp_dir().join(format!("chunked_map-spec-names-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&input);
    isolation_input(&input);
    let mut too_long = Vec::new();
    for entry in std::fs::read_dir(input.join("specs")).expect("specs") {
        let path = entry.expect("spec").path();
        let name = path
            .file_stem()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        let spec = std::fs::read_to_string(&path).expect("spec text");
        for session in spec
            .lines()
            .filter_map(|line| line.strip_prefix("session "))
        {
            let application_name = format!("isolation/{name}/{}", session.trim());
            if application_name.len() > 63 {
                too_long.push(application_name);
            }
        }
    }
    let _ = std::fs::remove_dir_all(&input);
    assert!(too_long.is_empty(), "longer than 63 bytes: {too_long:?}");
}

/// The isolation suite's input: the committed specs, expected files and schedule, and the specs
/// written from the template.
fn isolation_input(into: &Path) {
    let suite = repo_root().join("tests/isolation");
    for directory in ["specs", "expected"] {
        std::fs::create_dir_all(into.join(directory)).expect("input directory");
        for entry in std::fs::read_dir(suite.join(directory)).expect("suite directory") {
            let path = entry.expect("suite file").path();
            let target = into
                .join(directory)
                .join(path.file_name().expect("file name"));
            std::fs::copy(&path, target).expect("copy suite file");
        }
    }
    std::fs::copy(suite.join("schedule"), into.join("schedule")).expect("copy schedule");

    let template_path = suite.join("write_function_per_isolation_level.spec.in");
    let template = std::fs::read_to_string(&template_path).expect("template spec");
    // the template's own header (how it is used) is not part of the specs
    let template = &template[template.find("# @FUNCTION@").expect("@FUNCTION@ line")..];
    for function in UNDER_EACH_ISOLATION_LEVEL {
        let mut spec = template
            .replace("@FUNCTION@", function.signature)
            .replace("@ABOUT@", function.about);
        for session in ["rc", "rr", "ser"] {
            spec = spec.replace(
                &format!("@CALL_{}@", session.to_uppercase()),
                &function.call.replace("$session", session),
            );
        }
        assert!(
            !spec.contains('@'),
            "a placeholder is left in {}",
            function.spec
        );
        let name = format!("{}_per_isolation_level.spec", function.spec);
        std::fs::write(into.join("specs").join(name), spec).expect("write spec");
    }
}

fn run_suite(runner: &str, suite: &str, database: &str) {
    let cluster = Cluster::start();
    let committed = repo_root().join("tests").join(suite);
    let output_dir = cluster.socket_dir().join("results-dir");
    std::fs::create_dir_all(&output_dir).expect("output directory");
    let input = if suite == "isolation" {
        let input = cluster.socket_dir().join("isolation-input");
        isolation_input(&input);
        input
    } else {
        committed.clone()
    };

    // scripts/test-one.sh names one file or spec: only it runs (the whole schedule otherwise)
    let tests: Vec<String> = match std::env::var("CHUNKED_MAP_ONLY") {
        Ok(only) => {
            let named: Vec<String> = only
                .split(',')
                .filter(|name| {
                    let schedule =
                        std::fs::read_to_string(input.join("schedule")).unwrap_or_default();
                    schedule.lines().any(|line| line == format!("test: {name}"))
                })
                .map(|name| name.to_owned())
                .collect();
            if named.is_empty() {
                eprintln!("CHUNKED_MAP_ONLY={only}: nothing of {suite} runs");
                return;
            }
            named
        }
        Err(_) => vec![format!("--schedule={}", input.join("schedule").display())],
    };
    let status = Command::new(pgxs_dir().join("src/test").join(runner))
        .arg(format!("--inputdir={}", input.display()))
        .arg(format!("--outputdir={}", output_dir.display()))
        .arg(format!("--host={}", cluster.socket_dir().display()))
        .arg(format!("--port={}", cluster.port()))
        .arg(format!("--user={SUPERUSER}"))
        .arg(format!("--bindir={}", pg_bin_dir().display()))
        .arg(format!("--dbname={database}"))
        .args(&tests)
        // the regression scripts' `\i setup.psql` is relative to here
        .current_dir(&input)
        .status()
        .expect("run the test runner");

    if std::env::var_os("CHUNKED_MAP_REGRESS_ACCEPT").is_some() {
        accept(&output_dir.join("results"), &committed.join("expected"));
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
