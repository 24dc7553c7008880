//! Settings (GUCs) of the extension.

use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};

/// Largest payload accepted by an append, in bytes of its jsonb value.
pub static MAX_PAYLOAD_BYTES: GucSetting<i32> = GucSetting::<i32>::new(1024 * 1024);

/// How long an append may wait for a map another transaction is appending to before it gives
/// up with 40001. 0, the default, never waits (`FOR UPDATE NOWAIT`).
pub static LOCK_TIMEOUT_MS: GucSetting<i32> = GucSetting::<i32>::new(0);

pub fn register() {
    GucRegistry::define_int_guc(
        c"chunked_map.max_payload_bytes",
        c"Largest payload an append accepts, measured as the size of its jsonb value.",
        c"A larger payload is refused with SQLSTATE 54000. Only superusers can change it.",
        &MAX_PAYLOAD_BYTES,
        1,
        i32::MAX,
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
}

pub fn max_payload_bytes() -> usize {
    usize::try_from(MAX_PAYLOAD_BYTES.get()).unwrap_or(0)
}

/// `None` means never wait.
pub fn lock_timeout_ms() -> Option<i32> {
    Some(LOCK_TIMEOUT_MS.get()).filter(|ms| *ms > 0)
}
