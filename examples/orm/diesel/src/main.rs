//! chunked_map from Diesel 2 (see the library): start a map, append with retries on 40001, try
//! an optimistic append after the wrong sequence, and read every page back as rows.
//!
//!     DATABASE_URL=postgresql://... cargo run -p chunked_map_diesel_example -- [MAP] [COUNT] [CHUNK_SIZE]
//!
//! Prints one JSON object: the sequences appended, the retries it took, every record read back,
//! and what the optimistic append came to.

use chunked_map_diesel_example::{pages, register, start, AppendError};
use diesel::{Connection, PgConnection};
use serde_json::json;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let map = args.first().map_or("subscribers", String::as_str);
    let count: i64 = args.get(1).and_then(|c| c.parse().ok()).unwrap_or(10);
    let chunk_size: i32 = args.get(2).and_then(|c| c.parse().ok()).unwrap_or(3);
    let url = std::env::var("DATABASE_URL").expect("DATABASE_URL");
    let mut conn = PgConnection::establish(&url).expect("connect");

    start(&mut conn, map, chunk_size).expect("start");
    let (mut appended, mut retries) = (Vec::new(), 0);
    for i in 1..=count {
        let payload = json!({"email": format!("user{i}@example.com"), "n": i});
        let (seq, tries) = register(&mut conn, map, &payload, None).expect("append");
        appended.push(seq);
        retries += tries;
    }
    let last = *appended.last().expect("appended");
    let optimistic = match register(&mut conn, map, &json!({"late": true}), Some(last - 1)) {
        Ok(_) => "appended".to_owned(),
        Err(AppendError::UnexpectedLastSeq(message)) => format!("UnexpectedLastSeq: {message}"),
        Err(other) => panic!("{other:?}"),
    };
    let read = pages(&mut conn, map).expect("pages");
    let records: Vec<_> = read
        .iter()
        .flat_map(|(_, records)| records)
        .map(|r| json!({"seq": r.seq, "payload": r.payload}))
        .collect();
    let tokens: Vec<&str> = read.iter().map(|(token, _)| token.as_str()).collect();
    println!(
        "{}",
        json!({"appended": appended, "retries": retries, "pages": tokens,
               "records": records, "optimistic": optimistic})
    );
}
