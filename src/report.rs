//! Raising errors in PostgreSQL. Kept apart and short on purpose: the error LOCATION that
//! `\set VERBOSITY verbose` prints is this file and line, and the regression tests' expected
//! output records it.

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::{PgLogLevel, PgSqlErrorCode};

use crate::error::ChunkedError;

pub fn raise(error: &ChunkedError) -> ! {
    let mut report = ErrorReport::new(error.sqlstate(), error.to_string(), "chunked_map");
    if let Some(detail) = error.detail() {
        report = report.set_detail(detail);
    }
    if let Some(hint) = error.hint() {
        report = report.set_hint(hint);
    }
    report.report(PgLogLevel::ERROR);
    unreachable!("an ERROR report does not return")
}

pub fn raise_internal(message: &str) -> ! {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
        format!("chunked_map: {message}"),
        "chunked_map",
    )
    .report(PgLogLevel::ERROR);
    unreachable!("an ERROR report does not return")
}
