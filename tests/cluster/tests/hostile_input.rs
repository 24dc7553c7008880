//! A sweep of random and adversarial inputs: every call either does what the contract (docs/contract.md) says or fails
//! with the one SQLSTATE (and message) the contract gives for that input; nothing else ever happens,
//! and every map stays consistent (`chunked_verify`) afterwards.

use std::cell::{Cell, RefCell};

use chunked_map_cluster_tests::{query_json, Client, Cluster};

/// The extension's own token rules (they depend on nothing else of it): the sweep expects what
/// they say, rather than a copy of them.
#[path = "../../../src/token.rs"]
#[allow(dead_code)]
mod token;
use postgres::types::ToSql;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

const PAYLOAD_LIMIT: i64 = 2048;
/// The fixture map: chunks of 5, 23 records: archived 1, 6, 11, 16; current 21..23.
const FIXTURE_TOKENS: [&str; 4] = [
    "00000000000000000001",
    "00000000000000000006",
    "00000000000000000011",
    "00000000000000000016",
];

/// What a call did: `Ok`, or the SQLSTATE and message it failed with.
type Outcome = Result<(), (String, String)>;

struct Sweep {
    client: RefCell<Client>,
    calls: Cell<u64>,
}

impl Sweep {
    fn call(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Outcome {
        self.calls.set(self.calls.get() + 1);
        match self.client.borrow_mut().query(sql, params) {
            Ok(_) => Ok(()),
            Err(error) => {
                let db = error
                    .as_db_error()
                    .unwrap_or_else(|| panic!("{sql}: not a server error: {error}"));
                Err((db.code().code().to_string(), db.message().to_string()))
            }
        }
    }
}

fn error(sqlstate: &str, message: String) -> Outcome {
    Err((sqlstate.to_string(), message))
}

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    })
}

fn token_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>().prop_map(|s| s.replace('\0', "")),
        "[0-9]{20}",
        "[0-9]{0,19}",
        "[0-9]{21,25}",
        "[0-9 +\\-.xeE\\t\\n\\r\\u{b}\\u{c}]{18,22}",
        "[0-9٠-٩０-９߀-߉]{20}",
        "0{15}[0-9]{5}",
        Just("current".to_string()),
        "(?i)current",
        "[ \\t]?current[ \\t\\n]?",
        proptest::sample::select(FIXTURE_TOKENS.to_vec()).prop_map(str::to_string),
    ]
}

fn expected_page(token: &str) -> Outcome {
    if token == "current" || FIXTURE_TOKENS.contains(&token) {
        Ok(())
    } else if token.len() == 20 && token.bytes().all(|b| b.is_ascii_digit()) {
        error(
            "42704",
            format!("page token \"{token}\" names no archived chunk of map \"fixture\""),
        )
    } else {
        error(
            "22023",
            format!("invalid page token {}", token::quoted(token)),
        )
    }
}

fn map_name_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z]{0,3}",
        "[a-zA-Z0-9 _\\-']{190,210}",
        "[é日🦀a]{40,70}",
        any::<String>().prop_map(|s| s.replace('\0', "")),
        (0_usize..260).prop_map(|n| "m".repeat(n)),
    ]
}

fn expected_map_name(map: &str) -> Result<(), (String, String)> {
    if map.is_empty() || map.len() > 200 {
        error(
            "22023",
            format!(
                "map name must be 1 to 200 bytes long, got {} bytes",
                map.len()
            ),
        )
    } else {
        Ok(())
    }
}

fn json_strategy() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(serde_json::Value::from),
        any::<String>().prop_map(|s| serde_json::Value::from(s.replace('\0', ""))),
        (0_usize..2300).prop_map(|n| serde_json::Value::from("x".repeat(n))),
    ];
    leaf.prop_recursive(8, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(serde_json::Value::from),
            prop::collection::btree_map(
                any::<String>().prop_map(|k| k.replace('\0', "")),
                inner,
                0..8
            )
            .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

#[test]
fn every_input_succeeds_as_specified_or_fails_with_its_sqlstate() {
    let cluster = Cluster::start();
    let mut client = cluster.database("hostile");
    client
        .batch_execute(&format!(
            "SET chunked_map.max_payload_bytes = {PAYLOAD_LIMIT};
             SELECT chunked_map.chunked_start('fixture', 5);
             SELECT chunked_map.chunked_register('fixture', jsonb_build_object('n', n)) FROM generate_series(1, 23) AS n;
             SELECT chunked_map.chunked_start('payloads', 3);"
        ))
        .unwrap();
    let sweep = Sweep {
        client: RefCell::new(client),
        calls: Cell::new(0),
    };

    // page tokens of every length and alphabet
    runner(3000)
        .run(&token_strategy(), |token| {
            let outcome = sweep.call("SELECT chunked_map.chunked_page('fixture', $1)", &[&token]);
            prop_assert_eq!(outcome, expected_page(&token), "token {:?}", token);
            Ok(())
        })
        .unwrap();

    // map names at and over the limit; a started map can be appended to and read
    runner(1500)
        .run(&map_name_strategy(), |map| {
            let expected = expected_map_name(&map);
            prop_assert_eq!(
                sweep.call("SELECT chunked_map.chunked_start($1, 3)", &[&map]),
                expected.clone()
            );
            prop_assert_eq!(
                sweep.call("SELECT chunked_map.chunked_register($1, '{}')", &[&map]),
                expected.clone()
            );
            prop_assert_eq!(
                sweep.call("SELECT chunked_map.chunked_page($1)", &[&map]),
                expected
            );
            Ok(())
        })
        .unwrap();

    // payloads of every JSON type and shape, at and over the size limit; what is accepted is
    // read back exactly
    let next_seq = Cell::new(1_i64);
    runner(2000)
        .run(&json_strategy(), |payload| {
            let text = payload.to_string();
            let size: i32 = sweep
                .client
                .borrow_mut()
                // the larger of the stored form (without its header) and the JSON text
                .query_one(
                    "SELECT greatest(pg_column_size($1::text::jsonb) - 4, octet_length($1::text::jsonb::text))",
                    &[&text],
                )
                .unwrap()
                .get(0);
            let expected = if i64::from(size) <= PAYLOAD_LIMIT {
                Ok(())
            } else {
                error("54000", format!("payload of {size} bytes exceeds the limit of {PAYLOAD_LIMIT} bytes"))
            };
            let outcome =
                sweep.call("SELECT chunked_map.chunked_register('payloads', $1::text::jsonb)", &[&text]);
            prop_assert_eq!(outcome.clone(), expected, "payload of {} bytes", size);
            if outcome.is_ok() {
                let seq = next_seq.get();
                next_seq.set(seq + 1);
                let same: bool = sweep
                    .client
                    .borrow_mut()
                    .query_one(
                        "SELECT chunked_map.chunked_get('payloads', $1) - 'at' = jsonb_build_object('seq', $1, 'payload', $2::text::jsonb, 'id', NULL)",
                        &[&seq, &text],
                    )
                    .unwrap()
                    .get(0);
                prop_assert!(same, "record {} reads back as appended", seq);
            }
            Ok(())
        })
        .unwrap();

    // deeply nested JSON, under the default limit of 1 MiB
    sweep
        .call("RESET chunked_map.max_payload_bytes", &[])
        .unwrap();
    for depth in [100, 1000, 5000] {
        let text = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let outcome = sweep.call(
            "SELECT chunked_map.chunked_register('payloads', $1::text::jsonb)",
            &[&text],
        );
        assert_eq!(outcome, Ok(()), "depth {depth}");
        next_seq.set(next_seq.get() + 1);
    }
    sweep
        .call(
            &format!("SET chunked_map.max_payload_bytes = {PAYLOAD_LIMIT}"),
            &[],
        )
        .unwrap();

    // chunk sizes at and over the bounds
    let sizes = prop_oneof![any::<i32>(), -3_i32..4, 9_997_i32..10_004];
    let started = Cell::new(0);
    runner(1500)
        .run(&sizes, |size| {
            started.set(started.get() + 1);
            let map = format!("sized {}", started.get());
            let expected = if (1..=10_000).contains(&size) {
                Ok(())
            } else {
                error(
                    "22023",
                    format!("chunk_size must be between 1 and 10000, got {size}"),
                )
            };
            prop_assert_eq!(
                sweep.call("SELECT chunked_map.chunked_start($1, $2)", &[&map, &size]),
                expected.clone()
            );
            prop_assert_eq!(
                sweep.call(
                    "SELECT chunked_map.chunked_set_chunk_size('payloads', $1)",
                    &[&size]
                ),
                expected
            );
            Ok(())
        })
        .unwrap();

    // sequence numbers and optimistic expectations of every value
    let last_fixture_seq = 23_i64;
    runner(1500)
        .run(&prop_oneof![any::<i64>(), -2_i64..30], |seq| {
            let expected = if (1..=last_fixture_seq).contains(&seq) {
                Ok(())
            } else {
                error(
                    "42704",
                    format!("map \"fixture\" has no record with sequence {seq}"),
                )
            };
            prop_assert_eq!(
                sweep.call("SELECT chunked_map.chunked_get('fixture', $1)", &[&seq]),
                expected
            );
            let newest = next_seq.get() - 1;
            let expected = if seq == newest {
                Ok(())
            } else {
                error(
                    "23000",
                    format!("map \"payloads\" has newest sequence {newest}, expected {seq}"),
                )
            };
            let outcome = sweep.call(
                "SELECT chunked_map.chunked_register('payloads', '{}', $1)",
                &[&seq],
            );
            prop_assert_eq!(outcome, expected);
            if seq == newest {
                next_seq.set(newest + 2);
            }
            Ok(())
        })
        .unwrap();

    // forward reads: any starting sequence, any number of records
    runner(1500)
        .run(
            &(
                prop_oneof![any::<i64>(), -3_i64..30],
                prop_oneof![any::<i32>(), -3_i32..10_005],
            ),
            |(after_seq, max_records)| {
                let expected = if after_seq < 0 {
                    error(
                        "22023",
                        format!("after_seq must be 0 or more, got {after_seq}"),
                    )
                } else if !(1..=10_000).contains(&max_records) {
                    error(
                        "22023",
                        format!("max_records must be between 1 and 10000, got {max_records}"),
                    )
                } else {
                    Ok(())
                };
                prop_assert_eq!(
                    sweep.call(
                        "SELECT * FROM chunked_map.chunked_read('fixture', $1, $2)",
                        &[&after_seq, &max_records]
                    ),
                    expected
                );
                Ok(())
            },
        )
        .unwrap();

    // NULL for every argument of every function
    let nulls: [(&str, &str); 19] = [
        ("SELECT chunked_map.chunked_start(NULL)", "map"),
        (
            "SELECT chunked_map.chunked_start('fixture', NULL)",
            "chunk_size",
        ),
        ("SELECT chunked_map.chunked_register(NULL, '{}')", "map"),
        (
            "SELECT chunked_map.chunked_register('fixture', NULL)",
            "payload",
        ),
        (
            "SELECT chunked_map.chunked_register('fixture', '{}', NULL)",
            "expected_last_seq",
        ),
        (
            "SELECT chunked_map.chunked_register_many('fixture', NULL)",
            "payloads",
        ),
        ("SELECT chunked_map.chunked_page(NULL)", "map"),
        (
            "SELECT chunked_map.chunked_page('fixture', NULL)",
            "page_token",
        ),
        (
            "SELECT * FROM chunked_map.chunked_records('fixture', NULL)",
            "page_token",
        ),
        ("SELECT chunked_map.chunked_get('fixture', NULL)", "seq"),
        ("SELECT chunked_map.chunked_info(NULL)", "map"),
        (
            "SELECT chunked_map.chunked_set_chunk_size('fixture', NULL)",
            "chunk_size",
        ),
        ("SELECT chunked_map.chunked_verify(NULL)", "map"),
        ("SELECT chunked_map.chunked_drop(NULL)", "map"),
        ("SELECT * FROM chunked_map.chunked_read(NULL)", "map"),
        (
            "SELECT * FROM chunked_map.chunked_read('fixture', NULL)",
            "after_seq",
        ),
        (
            "SELECT * FROM chunked_map.chunked_read('fixture', 0, NULL)",
            "max_records",
        ),
        ("SELECT chunked_map.chunked_set_notify(NULL, true)", "map"),
        (
            "SELECT chunked_map.chunked_set_notify('fixture', NULL)",
            "enabled",
        ),
    ];
    for (sql, argument) in nulls {
        assert_eq!(
            sweep.call(sql, &[]),
            error("22004", format!("argument \"{argument}\" must not be null")),
            "{sql}"
        );
    }

    let calls = sweep.calls.get();
    let mut client = sweep.client.into_inner();
    let maps: Vec<String> = client
        .query("SELECT map FROM chunked_map.map_state", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    for map in &maps {
        let report = query_json(&mut client, "chunked_map.chunked_verify($1)", &[map]);
        assert_eq!(report["consistent"], true, "{report}");
    }
    let newest: i64 = client
        .query_one(
            "SELECT (chunked_map.chunked_info('payloads') ->> 'next_seq')::bigint - 1",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(newest, next_seq.get() - 1);
    eprintln!(
        "hostile input: {calls} calls, {} maps verified consistent afterwards",
        maps.len()
    );
}
