//! The SQL functions. Thin: they check their arguments and call the append or read path.
//!
//! None is STRICT (every argument is an `Option`), so a NULL raises 22004 instead of quietly
//! returning NULL. All are SECURITY DEFINER with a pinned `search_path`: callers are granted
//! EXECUTE on functions, never privileges on the storage tables.

use pgrx::prelude::*;

use crate::append;
use crate::error::OrRaise;
use crate::input::{self, required, MapName};
use crate::jsonb::{Jsonb, JsonbArray};
use crate::read;

/// Starts a map; `false` (and no change) when it already exists.
#[pg_extern(volatile, parallel_unsafe, security_definer)]
#[search_path(pg_catalog, pg_temp)]
fn chunked_start(map: Option<&str>, chunk_size: default!(Option<i32>, 100)) -> bool {
    let map = MapName::parse(map).or_raise();
    let chunk_size = input::chunk_size(chunk_size).or_raise();
    Spi::connect(|client| crate::store::start(client, map.as_str(), chunk_size))
}

/// Appends one record; returns its sequence number.
#[pg_extern(volatile, parallel_unsafe, security_definer)]
#[search_path(pg_catalog, pg_temp)]
fn chunked_register(map: Option<&str>, payload: Option<Jsonb>) -> i64 {
    let map = MapName::parse(map).or_raise();
    let payload = required(payload, "payload").or_raise();
    append::append(map, payload)
}

/// One page of a map, newest record first, with the token of the next older page.
#[pg_extern(stable, parallel_safe, security_definer)]
#[search_path(pg_catalog, pg_temp)]
fn chunked_page(map: Option<&str>, page_token: default!(Option<&str>, "'current'")) -> Jsonb {
    let map = MapName::parse(map).or_raise();
    let token = required(page_token, "page_token").or_raise();
    read::page(map, token)
}

/// Appends one record only if the map's newest sequence is `expected_last_seq` (0 for an empty
/// map); otherwise 40001 naming both. A client unsure whether its last append committed can
/// retry with this and never append twice.
#[pg_extern(volatile, parallel_unsafe, security_definer, name = "chunked_register")]
#[search_path(pg_catalog, pg_temp)]
fn chunked_register_if_last(
    map: Option<&str>,
    payload: Option<Jsonb>,
    expected_last_seq: Option<i64>,
) -> i64 {
    let map = MapName::parse(map).or_raise();
    let payload = required(payload, "payload").or_raise();
    let expected = required(expected_last_seq, "expected_last_seq").or_raise();
    append::append_if_last(map, payload, expected)
}

/// Changes the size of chunks started after the call. Archived chunks keep theirs, and so does
/// the current chunk unless it holds no record yet.
#[pg_extern(volatile, parallel_unsafe, security_definer)]
#[search_path(pg_catalog, pg_temp)]
fn chunked_set_chunk_size(map: Option<&str>, chunk_size: Option<i32>) {
    let map = MapName::parse(map).or_raise();
    let chunk_size = input::chunk_size(chunk_size).or_raise();
    append::set_chunk_size(map, chunk_size);
}

/// `{"map", "chunk_size", "next_seq", "current_records", "archived_chunks",
/// "newest_archived_token", "total_records"}`, without reading the history.
#[pg_extern(stable, parallel_safe, security_definer)]
#[search_path(pg_catalog, pg_temp)]
fn chunked_info(map: Option<&str>) -> Jsonb {
    let map = MapName::parse(map).or_raise();
    read::info(map)
}

/// One record, `{"seq": n, "payload": ...}`, by its sequence number.
#[pg_extern(stable, parallel_safe, security_definer)]
#[search_path(pg_catalog, pg_temp)]
fn chunked_get(map: Option<&str>, seq: Option<i64>) -> Jsonb {
    let map = MapName::parse(map).or_raise();
    let seq = required(seq, "seq").or_raise();
    read::get(map, seq)
}

/// Appends every payload in order, under one lock, rolling over as many chunks as it fills;
/// returns their sequence numbers, which are contiguous.
#[pg_extern(volatile, parallel_unsafe, security_definer)]
#[search_path(pg_catalog, pg_temp)]
fn chunked_register_many(
    map: Option<&str>,
    payloads: Option<JsonbArray>,
) -> SetOfIterator<'static, i64> {
    let map = MapName::parse(map).or_raise();
    let payloads = required(payloads, "payloads").or_raise();
    let (first, last) = append::append_many(map, payloads);
    SetOfIterator::new(first..=last)
}

/// Removes a whole map, its history included; `false` when there was no such map. Only the
/// extension's owner may call it until EXECUTE is granted.
#[pg_extern(volatile, parallel_unsafe, security_definer)]
#[search_path(pg_catalog, pg_temp)]
fn chunked_drop(map: Option<&str>) -> bool {
    let map = MapName::parse(map).or_raise();
    append::drop_map(map)
}

/// Checks a map's storage and reports what it finds:
/// `{"map", "consistent", "problems": [...], "archived_chunks", "current_records",
/// "total_records"}`. Reads the whole history; meant for DBAs and tests.
#[pg_extern(stable, parallel_safe, security_definer)]
#[search_path(pg_catalog, pg_temp)]
fn chunked_verify(map: Option<&str>) -> pgrx::JsonB {
    let map = MapName::parse(map).or_raise();
    pgrx::JsonB(crate::verify::verify(map))
}
