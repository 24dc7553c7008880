//! Reading maps the way a client does: page by page, following next_page_token.

use postgres::Client;
use serde_json::Value;

/// Every page of `map` from `current` to the oldest, as the exact text the server returned.
pub fn all_pages_text(client: &mut Client, map: &str) -> Vec<(String, String)> {
    let mut token = "current".to_string();
    let mut pages = Vec::new();
    loop {
        let text: String = client
            .query_one(
                "SELECT chunked_map.chunked_page($1, $2)::text",
                &[&map, &token],
            )
            .unwrap_or_else(|e| panic!("page {token} of {map}: {e}"))
            .get(0);
        let page: Value = serde_json::from_str(&text).expect("page is JSON");
        let next = page["next_page_token"].as_str().map(str::to_owned);
        pages.push((token, text));
        match next {
            Some(next) => token = next,
            None => return pages,
        }
    }
}

/// Every page of `map`, parsed.
pub fn all_pages(client: &mut Client, map: &str) -> Vec<Value> {
    all_pages_text(client, map)
        .into_iter()
        .map(|(_, text)| serde_json::from_str(&text).expect("page is JSON"))
        .collect()
}

/// The sequence numbers of a page, in the order given.
pub fn seqs(page: &Value) -> Vec<i64> {
    page["records"]
        .as_array()
        .expect("records")
        .iter()
        .map(|record| record["seq"].as_i64().expect("seq"))
        .collect()
}

/// Every sequence number of `map`, in page order (newest first).
pub fn all_seqs(client: &mut Client, map: &str) -> Vec<i64> {
    all_pages(client, map).iter().flat_map(seqs).collect()
}

/// A record of a page or of `chunked_get` without its time, once the time is checked to be what
/// pages write (ISO 8601 in UTC with microseconds), for comparing records across runs.
pub fn without_time(mut record: Value) -> Value {
    let at = record
        .as_object_mut()
        .and_then(|object| object.remove("at"))
        .unwrap_or_else(|| panic!("a record without \"at\": {record}"));
    let at = at
        .as_str()
        .unwrap_or_else(|| panic!("\"at\" is not a time: {at}"));
    let bytes = at.as_bytes();
    let shape_ok = bytes.len() == 27
        && bytes[10] == b'T'
        && bytes[26] == b'Z'
        && bytes[19] == b'.'
        && at
            .chars()
            .enumerate()
            .all(|(i, c)| matches!(i, 4 | 7 | 10 | 13 | 16 | 19 | 26) || c.is_ascii_digit());
    assert!(
        shape_ok,
        "\"at\" is not ISO 8601 UTC with microseconds: {at}"
    );
    record
}

/// `text` (a page, a record) with each record's time written `"at": "<time>"`, for comparing
/// what two runs wrote: their times differ. A time is what pages write (see [`without_time`]);
/// anything else after `"at": ` is left as it is, so that it shows in the comparison.
pub fn mask_times(text: &str) -> String {
    const KEY: &str = "\"at\": \"";
    let mut masked = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(found) = rest.find(KEY) {
        let after = &rest[found + KEY.len()..];
        masked.push_str(&rest[..found + KEY.len()]);
        match after.get(..28) {
            Some(time) if time.ends_with("Z\"") && time.as_bytes()[10] == b'T' => {
                masked.push_str("<time>\"");
                rest = &after[28..];
            }
            _ => rest = after,
        }
    }
    masked.push_str(rest);
    masked
}

// ---- Pages of the upgrade fixtures (tests/fixtures/chunked_map-VERSION-pages.json) ----

/// Every page of the fixture, read again, as (map, token, text).
pub fn fixture_pages_now(client: &mut Client, pages: &[Value]) -> Vec<(String, String, String)> {
    pages
        .iter()
        .map(|page| {
            let (map, token) = (
                page["map"].as_str().unwrap(),
                page["token"].as_str().unwrap(),
            );
            let text: String = client
                .query_one(
                    "SELECT chunked_map.chunked_page($1, $2)::text",
                    &[&map, &token],
                )
                .unwrap_or_else(|e| panic!("page {token} of {map}: {e}"))
                .get(0);
            (map.to_owned(), token.to_owned(), text)
        })
        .collect()
}

/// Every page of the fixture as the current version serves it: byte for byte what the old
/// version served, but for what 0.5 adds to each record, `"at": null, "id": null` (a record
/// appended before 0.5 has no known time and no id), in jsonb's order of keys. Made by the
/// server from the old text, so that the comparison is of exact texts.
pub fn fixture_pages_then(client: &mut Client, pages: &[Value]) -> Vec<(String, String, String)> {
    pages
        .iter()
        .map(|page| {
            let old = page["page"].as_str().unwrap();
            let served: String = client
                .query_one(
                    "SELECT jsonb_set($1::text::jsonb, '{records}', coalesce(
                         (SELECT jsonb_agg(r.record || '{\"at\": null, \"id\": null}' ORDER BY r.i)
                          FROM jsonb_array_elements($1::text::jsonb -> 'records')
                               WITH ORDINALITY AS r(record, i)),
                         '[]'))::text",
                    &[&old],
                )
                .unwrap()
                .get(0);
            (
                page["map"].as_str().unwrap().to_owned(),
                page["token"].as_str().unwrap().to_owned(),
                served,
            )
        })
        .collect()
}
