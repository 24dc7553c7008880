//! Every SQL statement the extension runs on a single node, each declared once (see
//! `pg::spi`), by what it is for:
//!
//! - [`state`]: a map's state row: taking its lock, looking at it as a writer or a reader;
//! - [`writes`]: starting, appending, archiving, resizing, announcing, dropping;
//! - [`reads`]: pages, rows, forward reads, single records, the summary;
//! - [`retention`]: removing a map's oldest chunks, and its retention policy;
//! - [`feed`]: consumers of the feed across maps, their positions, what moved;
//! - [`ids`]: the ids a map remembers (see `record_ids`);
//! - [`verify`]: the whole stored history of a map, for `chunked_verify`.
//!
//! (The statements only a Citus cluster runs are in `citus::statements`; the list of every
//! statement, for the tests, is `statement_list`.)
//!
//! Each statement is schema-qualified, takes its values as `$n` parameters, filters on the map
//! it is given and touches no other map (every key starts with the map, so the tables can be
//! distributed by map). They run with `search_path = pg_catalog, pg_temp` ([`SEARCH_PATH`], set
//! by [`connect`]), which is why `pg_catalog` functions and operators need no qualification here.
//!
//! Storage (see `sql/bootstrap.sql`):
//! - `map_state`: one row per map, holding the next sequence and the current chunk's extent. It
//!   is the map's lock: every write takes it (`FOR NO KEY UPDATE SKIP LOCKED`; waiting only when
//!   `chunked_map.lock_timeout` says so) and every append advances it, so under REPEATABLE READ
//!   and SERIALIZABLE PostgreSQL itself refuses (40001) a writer whose snapshot predates another
//!   writer's commit.
//! - `current_record`: the records of each map's current chunk, one row each.
//! - `archived_chunk`: one row per full chunk, its payloads as one `jsonb[]`, never changed but
//!   for `prev_token` when the chunk before it is trimmed, and removed only whole by
//!   `chunked_trim` and retention (see `retention`).

pub mod feed;
pub mod ids;
pub mod reads;
pub mod retention;
pub mod state;
pub mod verify;
pub mod writes;

use std::cell::Cell;

use crate::error::ChunkedError;
use crate::guc;
use crate::pg::spi::{self, NotNull, Session, Text};
use crate::statements;

/// The `search_path` every statement runs with, whatever the caller's: PostgreSQL's catalog
/// (the functions and operators the statements use unqualified) and nothing a caller can put a
/// look-alike in before it. The SQL functions do not pin it themselves (a `SET` clause costs
/// every call, about 15k instructions, whether or not it runs any SQL): it is set here, for the
/// statements alone. The direct append runs none and names its tables by schema.
pub const SEARCH_PATH: &str = "pg_catalog, pg_temp";

/// Runs `f` with an SPI connection (see `pg::spi::connect`) and [`SEARCH_PATH`], once the
/// database's SQL objects are known to be those of this library's version. The caller's
/// `search_path` is back when `f` returns (an error restores it with the transaction's or
/// subtransaction's abort, as a function's `SET` clause is).
pub fn connect<R>(f: impl FnOnce(&Session) -> R) -> R {
    guc::with_server_setting(c"search_path", SEARCH_PATH, || {
        spi::connect(|session| {
            check_sql_objects(session);
            f(session)
        })
    })
}

/// Before a write that may run no statement (the direct append): the check of the database's
/// SQL objects that [`connect`] makes, once per backend.
pub fn check_sql_objects_once() {
    if !SQL_OBJECTS_MATCH.with(Cell::get) {
        connect(|_| ());
    }
}

thread_local! {
    /// Whether this backend found the database's SQL objects at the library's version.
    static SQL_OBJECTS_MATCH: Cell<bool> = const { Cell::new(false) };
}

statements! {
    /// The installed version of the extension's SQL objects in this database.
    pub INSTALLED_VERSION: Statement<(), (NotNull<Text>,)> = read(
        "SELECT e.extversion FROM pg_catalog.pg_extension AS e WHERE e.extname = 'chunked_map'"
    );
}

/// Once per backend: a library newer than the database's SQL objects (installed, not yet
/// `ALTER EXTENSION ... UPDATE`d) would run statements against tables of another layout; say so
/// plainly instead. Versions only move forward, so a match is kept for the backend's life.
fn check_sql_objects(session: &Session) {
    if SQL_OBJECTS_MATCH.with(Cell::get) {
        return;
    }
    let library = env!("CARGO_PKG_VERSION");
    let installed = session.run(&INSTALLED_VERSION, ()).first().map(|(v,)| v);
    match installed {
        Some(installed) if installed != library => ChunkedError::OutdatedSqlObjects {
            library: library.to_owned(),
            installed,
        }
        .raise(),
        _ => SQL_OBJECTS_MATCH.with(|matched| matched.set(true)),
    }
}
