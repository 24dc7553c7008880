//! The SQL functions. Thin: they check their arguments and call the write or read path.
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
use crate::spi::CallerMemory;

/// Starts a map; `false` (and no change) when it already exists.
#[pg_extern(volatile, parallel_unsafe, security_definer)]
#[search_path(pg_catalog, pg_temp)]
fn chunked_start(map: Option<&str>, chunk_size: default!(Option<i32>, 100)) -> bool {
    let map = MapName::parse(map).or_raise();
    let chunk_size = input::chunk_size(chunk_size).or_raise();
    append::start(map, chunk_size)
}

/// Appends one record; returns its sequence number.
#[pg_extern(volatile, parallel_unsafe, security_definer)]
#[search_path(pg_catalog, pg_temp)]
fn chunked_register(map: Option<&str>, payload: Option<Jsonb<'_>>) -> i64 {
    let map = MapName::parse(map).or_raise();
    let payload = required(payload, "payload").or_raise();
    append::append(map, payload)
}

/// One page of a map, newest record first, with the token of the next older page.
#[pg_extern(stable, parallel_safe, security_definer)]
#[search_path(pg_catalog, pg_temp)]
fn chunked_page<'fcx>(
    map: Option<&'fcx str>,
    page_token: default!(Option<&'fcx str>, "'current'"),
) -> Jsonb<'fcx> {
    let map = MapName::parse(map).or_raise();
    let token = required(page_token, "page_token").or_raise();
    read::page(CallerMemory::current(), map, token)
}

/// The same page as rows `(seq, payload)`, newest first.
#[pg_extern(stable, parallel_safe, security_definer)]
#[search_path(pg_catalog, pg_temp)]
fn chunked_records<'fcx>(
    map: Option<&'fcx str>,
    page_token: default!(Option<&'fcx str>, "'current'"),
) -> TableIterator<'fcx, (name!(seq, i64), name!(payload, Jsonb<'fcx>))> {
    let map = MapName::parse(map).or_raise();
    let token = required(page_token, "page_token").or_raise();
    TableIterator::new(read::page_records(CallerMemory::current(), map, token))
}

/// Records with a sequence above `after_seq`, oldest first, at most `max_records`.
#[pg_extern(stable, parallel_safe, security_definer)]
#[search_path(pg_catalog, pg_temp)]
fn chunked_read<'fcx>(
    map: Option<&'fcx str>,
    after_seq: default!(Option<i64>, 0),
    max_records: default!(Option<i32>, 100),
) -> TableIterator<'fcx, (name!(seq, i64), name!(payload, Jsonb<'fcx>))> {
    let map = MapName::parse(map).or_raise();
    let after_seq = input::after_seq(after_seq).or_raise();
    let max_records = input::max_records(max_records).or_raise();
    TableIterator::new(read::forward(
        CallerMemory::current(),
        map,
        after_seq,
        max_records,
    ))
}

/// Appends one record only if the map's newest sequence is `expected_last_seq` (0 for an empty
/// map); otherwise 23000 naming both, which retrying cannot change. A client unsure whether its
/// last append committed can retry with this and never append twice.
#[pg_extern(volatile, parallel_unsafe, security_definer, name = "chunked_register")]
#[search_path(pg_catalog, pg_temp)]
fn chunked_register_if_last(
    map: Option<&str>,
    payload: Option<Jsonb<'_>>,
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

/// While enabled, every committed transaction that appended to the map sends one notification
/// on channel `chunked_map`, payload `{"map": ..., "last_seq": n}`.
#[pg_extern(volatile, parallel_unsafe, security_definer)]
#[search_path(pg_catalog, pg_temp)]
fn chunked_set_notify(map: Option<&str>, enabled: Option<bool>) {
    let map = MapName::parse(map).or_raise();
    let enabled = required(enabled, "enabled").or_raise();
    append::set_notify(map, enabled);
}

/// `{"map", "chunk_size", "next_seq", "current_records", "archived_chunks",
/// "newest_archived_token", "total_records", "notify"}`, from the state row alone.
#[pg_extern(stable, parallel_safe, security_definer)]
#[search_path(pg_catalog, pg_temp)]
fn chunked_info<'fcx>(map: Option<&'fcx str>) -> Jsonb<'fcx> {
    let map = MapName::parse(map).or_raise();
    read::info(CallerMemory::current(), map)
}

/// One record, `{"seq": n, "payload": ...}`, by its sequence number.
#[pg_extern(stable, parallel_safe, security_definer)]
#[search_path(pg_catalog, pg_temp)]
fn chunked_get<'fcx>(map: Option<&'fcx str>, seq: Option<i64>) -> Jsonb<'fcx> {
    let map = MapName::parse(map).or_raise();
    let seq = required(seq, "seq").or_raise();
    read::get(CallerMemory::current(), map, seq)
}

/// Appends every payload in order, under one lock, rolling over as many chunks as it fills;
/// returns their sequence numbers, which are contiguous.
#[pg_extern(volatile, parallel_unsafe, security_definer)]
#[search_path(pg_catalog, pg_temp)]
fn chunked_register_many(
    map: Option<&str>,
    payloads: Option<JsonbArray<'_>>,
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

/// On a Citus coordinator: distributes the storage tables by map (colocated) and every function
/// whose first argument is the map by that argument, so that a call runs on the node holding
/// the map. Idempotent. Owner-only until granted. Without Citus: 55000.
#[pg_extern(volatile, parallel_unsafe, security_definer)]
#[search_path(pg_catalog, pg_temp)]
fn chunked_distribute() {
    let distributed = crate::distribute::distribute();
    pgrx::notice!(
        "chunked_map: distributed {} tables and {} functions now (the others were already)",
        distributed.tables,
        distributed.functions
    );
}
