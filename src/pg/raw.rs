//! PostgreSQL functions called without pgrx's guard.
//!
//! pgrx wraps every function of its bindings so that an ERROR PostgreSQL raises in it becomes a
//! Rust panic; the copy it makes keeps only the message, detail and hint (context, position,
//! internal query and constraint names are lost), and pgrx re-raises it with a Rust backtrace in
//! its DETAIL when the server's environment asks for backtraces. The calls whose errors a caller
//! of the extension must see as PostgreSQL raised them go through these declarations instead,
//! always inside [`super::boundary::catching`], which keeps the whole error.
//!
//! The signatures are PostgreSQL's (the same in 15, 16, 17 and 18), with pgrx's types.

use std::ffi::{c_char, c_int, c_long};

use pgrx::pg_sys;

unsafe extern "C-unwind" {
    pub fn SPI_connect() -> c_int;
    pub fn SPI_finish() -> c_int;
    pub fn SPI_prepare(
        src: *const c_char,
        nargs: c_int,
        argtypes: *mut pg_sys::Oid,
    ) -> pg_sys::SPIPlanPtr;
    pub fn SPI_keepplan(plan: pg_sys::SPIPlanPtr) -> c_int;
    pub fn SPI_execute_plan(
        plan: pg_sys::SPIPlanPtr,
        values: *mut pg_sys::Datum,
        nulls: *const c_char,
        read_only: bool,
        tcount: c_long,
    ) -> c_int;
    pub fn SPI_execute_snapshot(
        plan: pg_sys::SPIPlanPtr,
        values: *mut pg_sys::Datum,
        nulls: *const c_char,
        snapshot: pg_sys::Snapshot,
        crosscheck_snapshot: pg_sys::Snapshot,
        read_only: bool,
        fire_triggers: bool,
        tcount: c_long,
    ) -> c_int;

    pub fn InitMaterializedSRF(fcinfo: pg_sys::FunctionCallInfo, flags: u32);
    pub fn tuplestore_putvalues(
        state: *mut pg_sys::Tuplestorestate,
        tdesc: pg_sys::TupleDesc,
        values: *const pg_sys::Datum,
        isnull: *const bool,
    );

    pub fn LockAcquire(
        locktag: *const pg_sys::LOCKTAG,
        lockmode: pg_sys::LOCKMODE,
        session_lock: bool,
        dont_wait: bool,
    ) -> pg_sys::LockAcquireResult::Type;
    pub fn LockRelease(
        locktag: *const pg_sys::LOCKTAG,
        lockmode: pg_sys::LOCKMODE,
        session_lock: bool,
    ) -> bool;

    /// PostgreSQL's NOTIFY (commands/async.h), which pgrx's bindings leave out.
    pub fn Async_Notify(channel: *const c_char, payload: *const c_char);

    /// 25006 when the transaction is read-only (a standby's always are), naming the command.
    pub fn PreventCommandIfReadOnly(cmdname: *const c_char);

    /// Raises a copied error again, every field as it was (elog.c).
    pub fn ReThrowError(edata: *mut pg_sys::ErrorData) -> !;
    /// Raises an error made of the given fields, with the context of the code that is running.
    pub fn ThrowErrorData(edata: *mut pg_sys::ErrorData);
}
