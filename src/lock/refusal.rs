//! What a writer is told when a lock it needs is held: the one place a wait's timeout or deadlock
//! becomes the extension's error.

use pgrx::prelude::*;

use crate::error::{ChunkedError, Held};
use crate::guc;
use crate::input::MapName;
use crate::pg::boundary::PgError;

/// 40001: the map is held by another transaction (or its name is: `Held::StartOrDrop`).
pub fn locked(map: MapName<'_>, held: Held) -> ! {
    ChunkedError::Locked {
        map: map.as_str().to_owned(),
        held,
    }
    .raise()
}

/// Runs `wait` with the server's `lock_timeout` set to `wait_ms` (restored afterwards; an error
/// restores it as part of the transaction's abort). The one place a wait's timeout or deadlock
/// is relabelled: `refused` raises the caller's error for it (`Held::For(ms)`, `ms` being the
/// setting's value for the message, or `Held::Deadlock`). Only for waits whose only lock is the
/// one the caller names.
pub fn waiting_up_to<R>(
    wait_ms: i32,
    ms: i32,
    wait: impl FnOnce() -> Result<R, PgError>,
    refused: impl FnOnce(Held) -> R,
) -> R {
    let outcome = guc::with_server_setting(c"lock_timeout", &format!("{wait_ms}ms"), wait);
    match outcome {
        Ok(value) => value,
        // The transaction is aborting: relabel and raise, nothing else.
        Err(error) if error.sqlstate() == PgSqlErrorCode::ERRCODE_LOCK_NOT_AVAILABLE as i32 => {
            error.forget();
            refused(Held::For(ms))
        }
        Err(error) if error.sqlstate() == PgSqlErrorCode::ERRCODE_T_R_DEADLOCK_DETECTED as i32 => {
            error.forget();
            refused(Held::Deadlock)
        }
        Err(error) => error.rethrow(),
    }
}
