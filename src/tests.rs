//! Single-session behaviour, run inside PostgreSQL by `cargo pgrx test`. Each test runs in a
//! transaction that is rolled back. Errors and their SQLSTATEs are checked by the pg_regress
//! suite and the multi-connection tests, which see them as a client does.

#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    fn query<T: IntoDatum + FromDatum>(sql: &str) -> T {
        Spi::get_one::<T>(sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .unwrap_or_else(|| panic!("{sql}: NULL"))
    }

    fn json(sql: &str) -> serde_json::Value {
        let text: String = query(&format!("SELECT ({sql})::text"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    fn page(map: &str, token: &str) -> serde_json::Value {
        json(&format!("chunked_map.chunked_page('{map}', '{token}')"))
    }

    fn seqs(page: &serde_json::Value) -> Vec<i64> {
        page["records"]
            .as_array()
            .expect("records is an array")
            .iter()
            .map(|r| r["seq"].as_i64().expect("seq is a number"))
            .collect()
    }

    fn append_n(map: &str, n: i64) {
        Spi::run(&format!(
            "SELECT chunked_map.chunked_register('{map}', jsonb_build_object('i', i))
             FROM generate_series(1, {n}) AS i"
        ))
        .expect("append");
    }

    /// Every statement prepares, and returns the columns it declares (a column of another type
    /// fails its preparation).
    #[pg_test]
    fn every_statement_prepares_and_returns_the_columns_it_declares() {
        let prepared = std::panic::catch_unwind(|| {
            crate::statements::connect(|session| {
                for statement in crate::statement_list::all(false) {
                    statement.prepare(session);
                }
            })
        });
        if let Err(failure) = prepared {
            match failure.downcast_ref::<crate::pg::boundary::Failure>() {
                Some(failure) => panic!("{failure}"),
                None => std::panic::resume_unwind(failure),
            }
        }
    }

    #[pg_test]
    fn start_creates_the_map_and_returns_true() {
        assert!(query::<bool>("SELECT chunked_map.chunked_start('m')"));
    }

    #[pg_test]
    fn starting_twice_is_harmless_and_changes_nothing() {
        query::<bool>("SELECT chunked_map.chunked_start('m', 2)");
        append_n("m", 3);
        let before = page("m", "current");
        assert!(!query::<bool>("SELECT chunked_map.chunked_start('m', 50)"));
        assert_eq!(page("m", "current"), before);
        // still chunks of 2: the 4th and 5th records roll the chunk of 3..4 over
        append_n("m", 2);
        assert_eq!(seqs(&page("m", "current")), vec![5]);
    }

    #[pg_test]
    fn the_default_chunk_size_is_100() {
        query::<bool>("SELECT chunked_map.chunked_start('m')");
        append_n("m", 101);
        let current = page("m", "current");
        assert_eq!(seqs(&current), vec![101]);
        assert_eq!(current["next_page_token"], "00000000000000000001");
        assert_eq!(
            seqs(&page("m", "00000000000000000001")),
            (1..=100).rev().collect::<Vec<_>>()
        );
    }

    #[pg_test]
    fn sequence_numbers_start_at_1_and_are_contiguous() {
        query::<bool>("SELECT chunked_map.chunked_start('m', 3)");
        for expected in 1..=10_i64 {
            let seq: i64 = query("SELECT chunked_map.chunked_register('m', '{}')");
            assert_eq!(seq, expected);
        }
    }

    #[pg_test]
    fn each_map_has_its_own_sequence() {
        query::<bool>("SELECT chunked_map.chunked_start('a')");
        query::<bool>("SELECT chunked_map.chunked_start('b')");
        append_n("a", 5);
        assert_eq!(
            query::<i64>("SELECT chunked_map.chunked_register('b', '{}')"),
            1
        );
        assert_eq!(
            query::<i64>("SELECT chunked_map.chunked_register('a', '{}')"),
            6
        );
    }

    #[pg_test]
    fn the_current_page_of_an_empty_map_has_no_records_and_no_older_page() {
        query::<bool>("SELECT chunked_map.chunked_start('m')");
        assert_eq!(
            page("m", "current"),
            serde_json::json!({"map": "m", "page_token": "current", "records": [], "next_page_token": null})
        );
    }

    #[pg_test]
    fn page_token_defaults_to_current() {
        query::<bool>("SELECT chunked_map.chunked_start('m')");
        append_n("m", 2);
        assert_eq!(json("chunked_map.chunked_page('m')"), page("m", "current"));
    }

    #[pg_test]
    fn a_full_chunk_stays_current_until_the_next_append_archives_it() {
        query::<bool>("SELECT chunked_map.chunked_start('m', 3)");
        append_n("m", 3);
        let full = page("m", "current");
        assert_eq!(seqs(&full), vec![3, 2, 1]);
        assert_eq!(full["next_page_token"], serde_json::Value::Null);

        append_n("m", 1);
        let current = page("m", "current");
        assert_eq!(seqs(&current), vec![4]);
        assert_eq!(current["next_page_token"], "00000000000000000001");
        let archived = page("m", "00000000000000000001");
        assert_eq!(seqs(&archived), vec![3, 2, 1]);
        assert_eq!(archived["page_token"], "00000000000000000001");
        assert_eq!(archived["next_page_token"], serde_json::Value::Null);
    }

    #[pg_test]
    fn pages_carry_payloads_exactly_newest_first() {
        query::<bool>("SELECT chunked_map.chunked_start('m', 2)");
        for payload in [r#"{"n": 1}"#, r#"[1, "two", null]"#, r#""text""#] {
            Spi::run(&format!(
                "SELECT chunked_map.chunked_register('m', '{payload}')"
            ))
            .expect("append");
        }
        // every record of this transaction has its start as its time, in UTC
        let now = query::<String>(
            "SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')",
        );
        let records = |page: serde_json::Value| {
            let mut records = page["records"].clone();
            for record in records.as_array_mut().expect("records") {
                let at = record
                    .as_object_mut()
                    .and_then(|record| record.remove("at"))
                    .expect("at");
                assert_eq!(at, serde_json::Value::String(now.clone()));
            }
            records
        };
        assert_eq!(
            records(page("m", "current")),
            serde_json::json!([{"seq": 3, "payload": "text", "id": null}])
        );
        assert_eq!(
            records(page("m", "00000000000000000001")),
            serde_json::json!([
                {"seq": 2, "payload": [1, "two", null], "id": null},
                {"seq": 1, "payload": {"n": 1}, "id": null}
            ])
        );
    }

    #[pg_test]
    fn numbers_are_kept_exactly() {
        query::<bool>("SELECT chunked_map.chunked_start('m')");
        let payload = r#"{"big": 123456789012345678901234567890, "tiny": 1e-400, "x": 1.50}"#;
        Spi::run(&format!(
            "SELECT chunked_map.chunked_register('m', '{payload}')"
        ))
        .expect("append");
        let stored: bool = query(&format!(
            "SELECT chunked_map.chunked_page('m') -> 'records' -> 0 -> 'payload' = '{payload}'::jsonb"
        ));
        assert!(stored);
    }

    #[pg_test]
    fn walking_next_page_token_from_current_returns_every_record_once_newest_first() {
        query::<bool>("SELECT chunked_map.chunked_start('m', 7)");
        append_n("m", 52);
        let mut token = "current".to_string();
        let mut all = Vec::new();
        let mut pages = 0;
        loop {
            let p = page("m", &token);
            all.extend(seqs(&p));
            pages += 1;
            match p["next_page_token"].as_str() {
                Some(next) => token = next.to_string(),
                None => break,
            }
        }
        assert_eq!(all, (1..=52).rev().collect::<Vec<_>>());
        // 7 archived chunks of 7 (1..49) and a current chunk of 3
        assert_eq!(pages, 8);
    }

    #[pg_test]
    fn archived_tokens_are_the_zero_padded_first_sequence() {
        query::<bool>("SELECT chunked_map.chunked_start('m', 100)");
        append_n("m", 201);
        assert_eq!(
            page("m", "current")["next_page_token"],
            "00000000000000000101"
        );
        assert_eq!(
            page("m", "00000000000000000101")["next_page_token"],
            "00000000000000000001"
        );
    }

    #[pg_test]
    fn an_archived_page_reads_byte_identical_whatever_is_appended_since() {
        query::<bool>("SELECT chunked_map.chunked_start('m', 3)");
        append_n("m", 4);
        let sql = "SELECT chunked_map.chunked_page('m', '00000000000000000001')::text";
        let before: String = query(sql);
        append_n("m", 20);
        let after: String = query(sql);
        assert_eq!(before, after);
    }

    #[pg_test]
    fn chunk_size_1_archives_every_record() {
        query::<bool>("SELECT chunked_map.chunked_start('m', 1)");
        append_n("m", 3);
        assert_eq!(seqs(&page("m", "current")), vec![3]);
        assert_eq!(seqs(&page("m", "00000000000000000002")), vec![2]);
        assert_eq!(seqs(&page("m", "00000000000000000001")), vec![1]);
    }

    #[pg_test]
    fn map_names_are_any_text_of_1_to_200_bytes() {
        let name = "ü".repeat(100); // 200 bytes
        assert!(query::<bool>(&format!(
            "SELECT chunked_map.chunked_start('{name}')"
        )));
        assert!(query::<bool>(
            "SELECT chunked_map.chunked_start('it''s a \"map\"; DROP TABLE x')"
        ));
        assert_eq!(
            query::<i64>(
                "SELECT chunked_map.chunked_register('it''s a \"map\"; DROP TABLE x', '{}')"
            ),
            1
        );
    }
}
