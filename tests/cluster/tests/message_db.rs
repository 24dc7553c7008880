//! chunked_map_message_store side by side with message-db 1.3 itself (docs/message-db.md): the
//! package from npm (`tests/message_db/package.json`, installed here by `npm ci`, never
//! committed) installed by its own installer into one database, the extension into another, on
//! the same throw-away server; the scenarios of message-db's test/ scripts
//! (`tests/message_db/scenarios.sql`) run against both with psql, and the outputs compared line
//! by line: positions, order, errors, consumer-group membership, reports. Ids are fixed by the
//! scenarios; times and global positions are not printed as such (they may differ).

use std::path::{Path, PathBuf};
use std::process::Command;

use chunked_map_cluster_tests::{pg_bin, pg_bin_dir, repo_root, Cluster, SUPERUSER};

/// message-db's `database/` directory, from the npm package.
fn message_db_database_dir() -> PathBuf {
    let dir = repo_root().join("tests/message_db");
    let output = Command::new("npm")
        .args(["ci", "--silent", "--no-audit", "--no-fund"])
        .current_dir(&dir)
        .output()
        .expect("npm ci");
    assert!(
        output.status.success(),
        "npm ci in {} failed:\n{}",
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    dir.join("node_modules/@eventide/message-db/database")
}

/// message-db itself, as its installer makes it, into database `message_db`.
fn install_message_db(cluster: &Cluster) {
    let installer = message_db_database_dir();
    let path = format!(
        "{}:{}",
        pg_bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let output = Command::new("bash")
        .arg(installer.join("install.sh"))
        .current_dir(&installer)
        .env("DATABASE_NAME", "message_db")
        .env("PGHOST", cluster.socket_dir())
        .env("PGPORT", cluster.port().to_string())
        .env("PGUSER", SUPERUSER)
        .env("PATH", path)
        .output()
        .expect("message-db's install.sh");
    assert!(
        output.status.success(),
        "message-db's install.sh failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Everything psql prints for `file` against `database`, errors in their place.
fn psql_transcript(cluster: &Cluster, database: &str, file: &Path) -> String {
    let output = Command::new("bash")
        .arg("-c")
        .arg(r#""$0" -X -a -v ON_ERROR_STOP=0 -d "$1" -f "$2" 2>&1"#)
        .arg(pg_bin("psql"))
        .arg(database)
        .arg(file)
        .env("PGHOST", cluster.socket_dir())
        .env("PGPORT", cluster.port().to_string())
        .env("PGUSER", SUPERUSER)
        .env("PGOPTIONS", "-c client_min_messages=warning")
        .output()
        .expect("psql");
    assert!(output.status.success(), "psql {database}");
    // psql names the file in each error line: the same file, the same line numbers
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn message_db_scenarios_print_the_same_on_chunked_map_as_on_message_db_1_3() {
    let cluster = Cluster::start();
    install_message_db(&cluster);
    // chunked_map's, in a database of its own
    cluster
        .database("chunked")
        .batch_execute("CREATE EXTENSION chunked_map_message_store")
        .expect("create extension chunked_map_message_store");

    let scenarios = repo_root().join("tests/message_db/scenarios.sql");
    let theirs = psql_transcript(&cluster, "message_db", &scenarios);
    let ours = psql_transcript(&cluster, "chunked", &scenarios);
    // both ran every scenario, errors included (a transcript of errors alone is no comparison)
    for expected in [
        "Wrong expected version: 1 (Stream: account-1, Stream Version: 2)",
        "duplicate key value violates unique constraint \"messages_id\"",
        "Consumer group member must be less than the group size",
        "Retrieval with SQL condition is not activated",
        "cannot execute INSERT in a read-only transaction",
        "type_summary",
    ] {
        assert!(
            theirs.contains(expected),
            "message-db's transcript lacks {expected:?}:\n{theirs}"
        );
    }
    let theirs_lines: Vec<&str> = theirs.lines().collect();
    let ours_lines: Vec<&str> = ours.lines().collect();
    let first_difference = theirs_lines
        .iter()
        .zip(&ours_lines)
        .position(|(a, b)| a != b)
        .or_else(|| {
            (theirs_lines.len() != ours_lines.len())
                .then(|| theirs_lines.len().min(ours_lines.len()))
        });
    if let Some(at) = first_difference {
        let from = at.saturating_sub(8);
        let show = |lines: &[&str]| lines[from..(at + 8).min(lines.len())].join("\n");
        panic!(
            "the transcripts differ at line {}:\n--- message-db 1.3\n{}\n--- chunked_map_message_store\n{}",
            at + 1,
            show(&theirs_lines),
            show(&ours_lines)
        );
    }
    eprintln!(
        "{} lines of transcript, the same on both",
        theirs_lines.len()
    );
}

#[test]
fn message_db_py_from_pypi_works_unchanged_against_chunked_map() {
    let cluster = Cluster::start();
    cluster
        .database("store")
        .batch_execute(
            "CREATE EXTENSION chunked_map_message_store;
             -- as message-db's users set it: the client calls the functions unqualified
             ALTER ROLE message_store IN DATABASE store SET search_path = message_store, public;",
        )
        .expect("create extension chunked_map_message_store");
    let requirements = repo_root().join("tests/message_db/requirements.txt");
    let python = chunked_map_cluster_tests::python_with("message-db-py", &requirements);
    let output = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "message-db-py==0.3.5",
        ])
        .output()
        .expect("pip install message-db-py");
    assert!(
        output.status.success(),
        "pip install message-db-py failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let url = format!(
        "postgresql://message_store@127.0.0.1:{}/store",
        cluster.port()
    );
    let output = Command::new(&python)
        .arg(repo_root().join("tests/message_db/client_check.py"))
        .arg(&url)
        .output()
        .expect("the client check");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("message-db-py: every check passed"),
        "message-db-py against chunked_map_message_store:\n{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// What a store holds, printed the same way on both: each stream's messages in position order
/// (id, type, position, data, metadata, time) and each category's ids in global position order.
fn store_contents(client: &mut postgres::Client) -> String {
    client
        .batch_execute("SET search_path = message_store, public")
        .expect("search_path");
    let streams: Vec<String> = client
        .query(
            "SELECT DISTINCT stream_name::text FROM message_store.messages ORDER BY 1",
            &[],
        )
        .expect("streams")
        .iter()
        .map(|row| row.get(0))
        .collect();
    let mut printed = String::new();
    for stream in &streams {
        let row = client
            .query_one(
                "SELECT string_agg(pg_catalog.format('%s %s %s %s %s %s %s', m.id, m.stream_name, m.type,
                                                     m.position, coalesce(m.data, '(null)'),
                                                     coalesce(m.metadata, '(null)'), m.time), E'\\n'
                                   ORDER BY m.position)
                 FROM message_store.get_stream_messages($1, 0, -1) AS m",
                &[stream],
            )
            .expect("a stream's messages");
        printed.push_str(&row.get::<_, String>(0));
        printed.push('\n');
    }
    for category in ["account", "order"] {
        // the whole category, the messages correlated with category "other", and member 0 of a
        // consumer group of 2: what the message's index row says, as each store filters it
        for (read, filters) in [
            ("all", "NULL, NULL, NULL"),
            ("correlated", "'other', NULL, NULL"),
            ("member 0 of 2", "NULL, 0, 2"),
        ] {
            let row = client
                .query_one(
                    &format!(
                        "SELECT string_agg(m.id, ' ' ORDER BY m.global_position)
                         FROM message_store.get_category_messages($1, 1, -1, {filters}) AS m"
                    ),
                    &[&category],
                )
                .expect("a category's messages");
            printed.push_str(&format!("{category} {read}: {}\n", row.get::<_, String>(0)));
        }
    }
    printed
}

#[test]
fn a_message_db_database_moves_over_with_its_streams_positions_times_and_category_order() {
    let cluster = Cluster::start();
    install_message_db(&cluster);
    // message-db's messages: two categories, streams of several hundred messages (archived
    // chunks on chunked_map's side), metadata or none, more than one import transaction
    let mut theirs = cluster.connect("message_db");
    theirs
        .batch_execute(
            "SET search_path = message_store, public;
             SELECT message_store.write_message(
                        pg_catalog.format('00000000-0000-4000-8000-%s', pg_catalog.lpad(n::text, 12, '0')),
                        CASE WHEN n % 3 = 0 THEN 'order-' || (n % 4) ELSE 'account-' || (n % 5) END,
                        CASE WHEN n % 2 = 0 THEN 'Opened' ELSE 'Deposited' END,
                        CASE WHEN n % 11 = 0 THEN NULL ELSE pg_catalog.jsonb_build_object('n', n) END,
                        CASE WHEN n % 7 = 0 THEN NULL
                             ELSE pg_catalog.jsonb_build_object('correlationStreamName', 'other-' || n) END)
             FROM pg_catalog.generate_series(1, 2500) AS n;
             -- (one statement wrote them all at one time: each its own, to the microsecond)
             UPDATE message_store.messages
             SET time = time - global_position * interval '1 minute 0.000001 second';",
        )
        .expect("message-db's writes");
    // the recipe's copy, then the recipe
    let mut copied = Vec::new();
    std::io::Read::read_to_end(
        &mut theirs
            .copy_out(
                "COPY (SELECT global_position, position, time, stream_name, type, data, metadata, id
                       FROM message_store.messages) TO STDOUT",
            )
            .expect("copy out"),
        &mut copied,
    )
    .expect("read the copy");
    let mut ours = cluster.database("chunked");
    ours.batch_execute(
        "CREATE EXTENSION chunked_map_message_store;
         CREATE SCHEMA message_db_import;
         CREATE TABLE message_db_import.messages (global_position bigint, position bigint,
             time timestamp, stream_name text, type text, data jsonb, metadata jsonb, id uuid);",
    )
    .expect("the import's table");
    let mut writer = ours
        .copy_in("COPY message_db_import.messages FROM STDIN")
        .expect("copy in");
    std::io::Write::write_all(&mut writer, &copied).expect("write the copy");
    writer.finish().expect("finish the copy");
    let import = || {
        let recipe = repo_root().join("sql/message_store/import-from-message-db.sql");
        let output = Command::new(pg_bin("psql"))
            .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", "chunked", "-f"])
            .arg(&recipe)
            .env("PGHOST", cluster.socket_dir())
            .env("PGPORT", cluster.port().to_string())
            .env("PGUSER", SUPERUSER)
            .output()
            .expect("psql");
        assert!(
            output.status.success(),
            "the import recipe failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    };
    // an import that stopped after its first committed part (the first 700 messages), then the
    // recipe again: it goes on from there
    ours.batch_execute(
        "CREATE TABLE message_db_import.later AS
             SELECT * FROM message_db_import.messages WHERE global_position > (
                 SELECT global_position FROM message_db_import.messages
                 ORDER BY global_position OFFSET 699 LIMIT 1);
         DELETE FROM message_db_import.messages AS m
         WHERE m.global_position IN (SELECT global_position FROM message_db_import.later);",
    )
    .expect("hold the later messages back");
    import();
    ours.batch_execute(
        "INSERT INTO message_db_import.messages SELECT * FROM message_db_import.later",
    )
    .expect("the later messages");
    import();
    // and once more, after the whole import: nothing changes
    import();

    let numbered = ours
        .query_one(
            "SELECT count(*) FILTER (WHERE global_position IS NULL) FROM message_store.message_index",
            &[],
        )
        .expect("unnumbered");
    assert_eq!(
        numbered.get::<_, i64>(0),
        0,
        "the import numbered its messages"
    );
    let theirs = store_contents(&mut theirs);
    let ours = store_contents(&mut ours);
    assert_eq!(theirs.lines().count(), 2500 + 6, "every message printed");
    assert!(
        theirs.contains("(null) (null)"),
        "messages without data or metadata"
    );
    assert_eq!(ours, theirs, "the store after the import is message-db's");
}
