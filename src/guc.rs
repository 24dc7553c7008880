//! Settings (GUCs) of the extension.

use std::cell::Cell;
use std::ffi::{CStr, CString};

use pgrx::pg_sys;
use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};

use crate::error::{ChunkedError, PayloadLimit};

/// Largest payload accepted by an append, in bytes: the larger of its jsonb value and its JSON
/// text.
pub static MAX_PAYLOAD_BYTES: GucSetting<i32> = GucSetting::<i32>::new(1024 * 1024);

/// Most payload bytes a chunk holds (a chunk always takes at least one record).
pub static MAX_CHUNK_BYTES: GucSetting<i32> = GucSetting::<i32>::new(64 * 1024 * 1024);

/// The largest `chunked_map.max_chunk_bytes` allowed. A page is one jsonb value, and jsonb holds
/// at most 256 MiB of data: 128 MiB of payloads leaves room for a page's own structure (about
/// 30 bytes per record, 10,000 records at most), and keeps even a page's JSON text, up to six
/// times its binary size for strings of control characters, under PostgreSQL's 1 GiB value limit.
pub const MAX_CHUNK_BYTES_CEILING: i32 = 128 * 1024 * 1024;

/// How long an append may wait for a map another transaction is appending to before it gives
/// up with 40001. 0, the default, never waits.
pub static LOCK_TIMEOUT_MS: GucSetting<i32> = GucSetting::<i32>::new(0);

/// Whether a one-record append writes through the table and index access methods
/// (`direct_append`) rather than the SQL statements. On by default; off is for testing (the
/// differential test runs one workload both ways) and for a fault in the direct path.
pub static DIRECT_APPEND: GucSetting<bool> = GucSetting::<bool>::new(true);

pub fn register() {
    GucRegistry::define_int_guc(
        c"chunked_map.max_payload_bytes",
        c"Largest payload an append accepts, measured as the larger of its jsonb value and its JSON text.",
        c"A larger payload is refused with SQLSTATE 54000. It can never exceed chunked_map.max_chunk_bytes. Only superusers can change it.",
        &MAX_PAYLOAD_BYTES,
        1,
        i32::MAX,
        GucContext::Suset,
        GucFlags::UNIT_BYTE,
    );
    GucRegistry::define_int_guc(
        c"chunked_map.max_chunk_bytes",
        c"Most payload bytes one chunk holds; a chunk is full at chunk_size records or at this many bytes.",
        c"Keeps every page and every rollover under PostgreSQL's size limits. Only superusers can change it.",
        &MAX_CHUNK_BYTES,
        1,
        MAX_CHUNK_BYTES_CEILING,
        GucContext::Suset,
        GucFlags::UNIT_BYTE,
    );
    GucRegistry::define_int_guc(
        c"chunked_map.lock_timeout",
        c"How long an append waits for a map that another transaction is appending to.",
        c"0 (the default) never waits: a concurrent append fails at once with SQLSTATE 40001. \
          A positive value waits up to that long, then fails with 40001.",
        &LOCK_TIMEOUT_MS,
        0,
        i32::MAX,
        GucContext::Userset,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_bool_guc(
        c"chunked_map.direct_append",
        c"Whether one-record appends write the tables directly instead of through SQL statements.",
        c"On (the default), an append locks and advances the map's state row and inserts the record \
          through PostgreSQL's table and index access methods; off, through SQL statements. Both \
          behave the same: off is for testing.",
        &DIRECT_APPEND,
        GucContext::Userset,
        GucFlags::default(),
    );
}

/// The largest payload accepted now, and the setting that decides it: a payload must fit in a
/// chunk, so `max_chunk_bytes` caps `max_payload_bytes`.
pub fn payload_limit() -> (usize, PayloadLimit) {
    let payload = usize::try_from(MAX_PAYLOAD_BYTES.get()).unwrap_or(0);
    let chunk = max_chunk_bytes();
    if payload <= chunk {
        (payload, PayloadLimit::MaxPayloadBytes)
    } else {
        (chunk, PayloadLimit::MaxChunkBytes)
    }
}

pub fn max_chunk_bytes() -> usize {
    usize::try_from(MAX_CHUNK_BYTES.get()).unwrap_or(0)
}

pub fn direct_append() -> bool {
    DIRECT_APPEND.get()
}

/// `None` means never wait. Inside [`waiting_as_long_as_held`], as long as `i32::MAX` ms.
pub fn lock_timeout_ms() -> Option<i32> {
    if WAITING_AS_LONG_AS_HELD.with(Cell::get) {
        return Some(i32::MAX);
    }
    Some(LOCK_TIMEOUT_MS.get()).filter(|ms| *ms > 0)
}

thread_local! {
    /// Whether the appends under way wait for a map's lock as long as it is held, whatever
    /// `chunked_map.lock_timeout` says (see [`waiting_as_long_as_held`]).
    static WAITING_AS_LONG_AS_HELD: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with every wait for a map's lock (or its name's) lasting as long as the lock is held
/// (`statement_timeout` and a cancel still end it), as `SET chunked_map.lock_timeout =
/// 2147483647` on a function would, without the setting's cost on every call: the message
/// store's write, whose writers of one stream wait for each other as message-db's writers of a
/// category do. Restored when `f` returns or unwinds (every failure unwinds, `pg::boundary`).
pub fn waiting_as_long_as_held<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            WAITING_AS_LONG_AS_HELD.with(|waiting| waiting.set(self.0));
        }
    }
    let _restore = Restore(WAITING_AS_LONG_AS_HELD.with(|waiting| waiting.replace(true)));
    f()
}

/// Runs `f` with PostgreSQL's setting `name` set to `value`, restored afterwards (an error
/// restores it as part of the transaction's abort), as a function's `SET` clause does.
pub fn with_server_setting<R>(name: &CStr, value: &str, f: impl FnOnce() -> R) -> R {
    let value = CString::new(value).unwrap_or_else(|_| {
        ChunkedError::Internal {
            context: format!("a setting's value with a NUL byte: {value:?}"),
        }
        .raise()
    });
    // SAFETY: the same calls fmgr makes for a function's SET clause; the nest level confines
    // the change to `f`.
    let nest_level = unsafe {
        let level = pg_sys::NewGUCNestLevel();
        let context = if pg_sys::superuser() {
            pg_sys::GucContext::PGC_SUSET
        } else {
            pg_sys::GucContext::PGC_USERSET
        };
        pg_sys::set_config_option(
            name.as_ptr(),
            value.as_ptr(),
            context,
            pg_sys::GucSource::PGC_S_SESSION,
            pg_sys::GucAction::GUC_ACTION_SAVE,
            true,
            0,
            false,
        );
        level
    };
    let result = f();
    // SAFETY: closes the nest level opened above.
    unsafe { pg_sys::AtEOXact_GUC(true, nest_level) };
    result
}

static NULL_MAP_GUARD: GucSetting<bool> = GucSetting::<bool>::new(true);
static NULL_MAP_GUARD_EVERYWHERE: GucSetting<bool> = GucSetting::<bool>::new(false);

/// `chunked_map.null_map_guard_everywhere` (postmaster): install the NULL-map guard
/// (`citus::null_map_guard`) even where Citus is not loaded, for testing it. Defined only while
/// the library is preloaded.
pub fn define_null_map_guard_everywhere() {
    GucRegistry::define_bool_guc(
        c"chunked_map.null_map_guard_everywhere",
        c"Installs chunked_map's NULL-map guard even where Citus is not loaded.",
        c"For testing the guard on a plain PostgreSQL; it only matters with Citus. Takes effect at server start.",
        &NULL_MAP_GUARD_EVERYWHERE,
        GucContext::Postmaster,
        GucFlags::default(),
    );
}

pub fn null_map_guard_everywhere() -> bool {
    NULL_MAP_GUARD_EVERYWHERE.get()
}

/// `chunked_map.null_map_guard` (internal, always on where defined): tells other nodes'
/// `chunked_distribute` that this one plans through the guard. Defined only where the guard is
/// installed.
pub fn define_null_map_guard() {
    GucRegistry::define_bool_guc(
        c"chunked_map.null_map_guard",
        c"Whether chunked_map answers a call with a NULL map before Citus's delegation sees it.",
        c"Defined (and on) only where chunked_map is in shared_preload_libraries after citus.",
        &NULL_MAP_GUARD,
        GucContext::Internal,
        GucFlags::default(),
    );
}
