//! The SQL functions. Thin: they check their arguments and call the append or read path.
//!
//! None is STRICT (every argument is an `Option`), so a NULL raises 22004 instead of quietly
//! returning NULL. All are SECURITY DEFINER with a pinned `search_path`: callers are granted
//! EXECUTE on functions, never privileges on the storage tables.

use pgrx::prelude::*;

use crate::append;
use crate::error::OrRaise;
use crate::input::{self, required, MapName};
use crate::jsonb::Jsonb;
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
