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
