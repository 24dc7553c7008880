//! Where errors cross between PostgreSQL and the extension's Rust code, both ways, and nowhere
//! else.
//!
//! - **Into PostgreSQL** ([`catching`]): a call that may raise an ERROR runs under a
//!   `sigsetjmp` of our own. An ERROR comes back as a [`PgError`], a copy of the whole
//!   `ErrorData` (message, detail, hint, context, cursor and internal positions, internal
//!   query, constraint names); the transaction is then aborting, and the caller may only look at
//!   the error, relabel it, or let it go on.
//! - **Out of the extension** ([`enter`]): every function PostgreSQL calls (an SQL function, the
//!   history trigger, a planner hook, a transaction callback) runs its body in [`enter`].
//!   Failures unwind the Rust stack as a [`Failure`], running every destructor; `enter` then
//!   raises them from its own frame, where nothing is left to drop: a [`PgError`] again as
//!   PostgreSQL raised it (`ReThrowError`), one of ours (a [`Report`], which `crate::error`
//!   makes) with its SQLSTATE, detail and hint and the context of the SQL that called us
//!   (`ThrowErrorData`).
//!
//! So PostgreSQL's errors travel through the extension untouched, and no Rust backtrace is ever
//! added to them (pgrx's own guard would copy only their message, detail and hint, and add a
//! backtrace to the DETAIL when the server runs with `RUST_BACKTRACE` set).

use std::any::Any;
use std::ffi::{c_char, CStr, CString};
use std::mem::MaybeUninit;
use std::panic::Location;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::ptr::NonNull;

use pgrx::pg_sys;
use pgrx::PgLogLevel;

use super::raw;

/// What unwinds the Rust stack when a call fails; [`enter`] raises it.
pub enum Failure {
    /// Raised by PostgreSQL, kept whole.
    Postgres(PgError),
    /// Detected by the extension (`crate::error` makes these), where it was raised.
    Report(Report, &'static Location<'static>),
}

impl std::fmt::Display for Failure {
    /// The message, for a test that sees a failure as a Rust value.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Report(report, location) => write!(f, "{} ({location})", report.message),
            Failure::Postgres(error) => {
                // SAFETY: a copy made by CopyErrorData; its message is NUL-terminated or NULL.
                let message = unsafe { error.0.as_ref().message };
                if message.is_null() {
                    write!(f, "a PostgreSQL error")
                } else {
                    // SAFETY: as above.
                    write!(
                        f,
                        "{}",
                        unsafe { CStr::from_ptr(message) }.to_string_lossy()
                    )
                }
            }
        }
    }
}

/// An error of the extension's own, as PostgreSQL will report it.
pub struct Report {
    pub sqlstate: pgrx::PgSqlErrorCode,
    pub message: String,
    pub detail: Option<String>,
    pub hint: Option<String>,
}

/// A fault of the extension itself (`XX000`): a state it should never meet.
#[track_caller]
pub fn internal(context: String) -> ! {
    Failure::Report(
        Report {
            sqlstate: pgrx::PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
            message: format!("chunked_map: {context}"),
            detail: None,
            hint: None,
        },
        Location::caller(),
    )
    .raise()
}

impl Failure {
    /// Unwinds to the nearest [`enter`], running destructors on the way. Not a panic: no panic
    /// hook runs, so nothing is captured or printed.
    pub fn raise(self) -> ! {
        resume_unwind(Box::new(self))
    }
}

/// An ERROR PostgreSQL raised, copied whole into the current (sub)transaction's memory, which
/// lasts until the error has been raised again and is freed when that (sub)transaction aborts:
/// a loop that catches errors of the extension's calls in savepoints holds no more memory.
pub struct PgError(NonNull<pg_sys::ErrorData>);

// SAFETY: a backend runs one thread; a PgError only moves up that thread's own stack (the
// unwinding payload must be `Send`, and is never sent anywhere).
unsafe impl Send for PgError {}

impl PgError {
    /// The SQLSTATE, as PostgreSQL encodes it (`ERRCODE_*`).
    pub fn sqlstate(&self) -> i32 {
        // SAFETY: a copy made by CopyErrorData, freed only by `forget` or with its memory.
        unsafe { self.0.as_ref().sqlerrcode }
    }

    /// Lets the error go on to the caller, unchanged.
    pub fn rethrow(self) -> ! {
        Failure::Postgres(self).raise()
    }

    /// The error was handled (relabelled as one of the extension's): its copy is freed.
    pub fn forget(self) {
        // SAFETY: the copy is ours and freed once.
        unsafe { pg_sys::FreeErrorData(self.0.as_ptr()) }
    }
}

/// The result of a call into PostgreSQL, or the error it raised; `.or_rethrow()` lets the error
/// go on.
pub trait OrRethrow<T> {
    fn or_rethrow(self) -> T;
}

impl<T> OrRethrow<T> for Result<T, PgError> {
    fn or_rethrow(self) -> T {
        self.unwrap_or_else(|error| error.rethrow())
    }
}

/// Runs `call`, a call into PostgreSQL, and returns what it returns or the ERROR it raised.
///
/// `call` and its result are `Copy`: a closure of that kind holds nothing that needs dropping,
/// which is what makes leaving it by `siglongjmp` sound (a frame left that way must have no
/// destructor to run). It calls the unguarded declarations of [`super::raw`], never pgrx's
/// guarded bindings (whose own guard would catch the error first, keeping only part of it).
/// After an `Err`, the current transaction (or subtransaction) is aborting: do not call into
/// PostgreSQL again except to raise.
///
/// # Safety
/// `call` must be sound to run; it may raise PostgreSQL errors.
pub unsafe fn catching<T: Copy>(call: impl FnOnce() -> T + Copy) -> Result<T, PgError> {
    // SAFETY: PostgreSQL's error handling globals, saved and restored around the call exactly as
    // PG_TRY does; the jump buffer lives in call_with_sigsetjmp's frame for the whole call.
    unsafe {
        let memory = pg_sys::CurrentMemoryContext;
        let exception_stack = pg_sys::PG_exception_stack;
        let context_stack = pg_sys::error_context_stack;
        let mut result = MaybeUninit::<T>::uninit();
        // A panic inside (a pgrx-guarded call that should not be there) is carried out of the
        // C frames of sigsetjmp, which it must not unwind through.
        let mut panicked: Option<Box<dyn Any + Send>> = None;
        let jumped = cee_scape::call_with_sigsetjmp(false, |jump_buffer| {
            pg_sys::PG_exception_stack = std::ptr::from_ref(jump_buffer).cast_mut().cast();
            match catch_unwind(AssertUnwindSafe(call)) {
                Ok(value) => {
                    result.write(value);
                }
                Err(payload) => panicked = Some(payload),
            }
            0
        });
        pg_sys::PG_exception_stack = exception_stack;
        pg_sys::error_context_stack = context_stack;
        if let Some(payload) = panicked {
            resume_unwind(payload);
        }
        if jumped == 0 {
            return Ok(result.assume_init());
        }
        // PostgreSQL left CurrentMemoryContext at ErrorContext, which FlushErrorState resets.
        pg_sys::CurrentMemoryContext = lasting_memory();
        let copy = pg_sys::CopyErrorData();
        pg_sys::FlushErrorState();
        pg_sys::CurrentMemoryContext = memory;
        match NonNull::new(copy) {
            Some(copy) => Err(PgError(copy)),
            None => unreachable!("CopyErrorData returns a copy"),
        }
    }
}

/// Memory that outlives the unwinding after a caught error (SPI's, where the error may have
/// been caught, is freed on the way) and is freed with the (sub)transaction the error aborts.
fn lasting_memory() -> pg_sys::MemoryContext {
    // SAFETY: the memory context globals belong to this backend (one thread) and are only read
    // here; CurTransactionContext is checked for NULL (no transaction) before it is used.
    unsafe {
        if pg_sys::CurTransactionContext.is_null() {
            pg_sys::TopMemoryContext
        } else {
            pg_sys::CurTransactionContext
        }
    }
}

/// Runs the body of a function PostgreSQL called; what fails in it is raised from here as a
/// PostgreSQL ERROR (see the module's description). PostgreSQL may call such a function from
/// inside a [`catching`] call of ours (a trigger fired by one of our statements): the ERROR
/// then reaches that `catching`, as it would any caller's `PG_TRY`.
///
/// # Safety
/// Called from an `extern "C-unwind"` function that PostgreSQL calls, holding nothing with a
/// destructor outside `body`: the error is raised by `siglongjmp` through that frame.
pub unsafe fn enter<T>(body: impl FnOnce() -> T) -> T {
    let raise = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(value) => return value,
        Err(payload) => Raise::from(payload),
    };
    // SAFETY: `raise` holds only pointers; nothing in this frame needs dropping.
    unsafe { raise.now() }
}

/// An error about to be raised, as plain pointers (nothing to drop).
enum Raise {
    /// A copy of an error PostgreSQL raised: raised again as it was.
    Again(*mut pg_sys::ErrorData),
    /// An error of ours, in palloc'd memory: raised with the caller's context added.
    New(*mut pg_sys::ErrorData),
}

impl Raise {
    fn from(payload: Box<dyn Any + Send>) -> Raise {
        let payload = match payload.downcast::<Failure>() {
            Ok(failure) => match *failure {
                Failure::Postgres(error) => return Raise::Again(error.0.as_ptr()),
                Failure::Report(report, location) => {
                    return Raise::New(error_data(
                        (report.sqlstate as i32, location),
                        &report.message,
                        report.detail.as_deref(),
                        report.hint.as_deref(),
                    ))
                }
            },
            Err(payload) => payload,
        };
        // An error pgrx caught in one of its guarded calls (message, detail and hint are all it
        // kept), or a Rust panic: a bug, reported as an internal error.
        let payload = match payload.downcast::<pgrx::pg_sys::panic::CaughtError>() {
            Ok(caught) => {
                use pgrx::pg_sys::panic::CaughtError;
                let report = match *caught {
                    CaughtError::PostgresError(report)
                    | CaughtError::ErrorReport(report)
                    | CaughtError::RustPanic {
                        ereport: report, ..
                    } => report,
                };
                return Raise::New(error_data(
                    (report.sql_error_code() as i32, Location::caller()),
                    report.message(),
                    report.detail(),
                    report.hint(),
                ));
            }
            Err(payload) => payload,
        };
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a Rust panic".to_owned());
        Raise::New(error_data(
            (
                pgrx::PgSqlErrorCode::ERRCODE_INTERNAL_ERROR as i32,
                Location::caller(),
            ),
            &format!("chunked_map: internal error: {message}"),
            None,
            None,
        ))
    }

    /// # Safety
    /// Called where nothing with a destructor is left between here and PostgreSQL.
    unsafe fn now(self) -> ! {
        // SAFETY: valid ErrorData; both functions end in siglongjmp.
        unsafe {
            match self {
                Raise::Again(edata) => raw::ReThrowError(edata),
                Raise::New(edata) => {
                    raw::ThrowErrorData(edata);
                    unreachable!("an ERROR does not return")
                }
            }
        }
    }
}

/// An ERROR's fields, palloc'd in the current memory context (which lasts until the error is
/// raised: ThrowErrorData copies them), with the place in the source that raised it.
fn error_data(
    (sqlstate, location): (i32, &'static Location<'static>),
    message: &str,
    detail: Option<&str>,
    hint: Option<&str>,
) -> *mut pg_sys::ErrorData {
    // SAFETY: palloc'd, zeroed ErrorData and strings; ThrowErrorData reads only these fields.
    unsafe {
        let edata =
            pg_sys::palloc0(std::mem::size_of::<pg_sys::ErrorData>()).cast::<pg_sys::ErrorData>();
        (*edata).elevel = PgLogLevel::ERROR as i32;
        (*edata).sqlerrcode = sqlstate;
        (*edata).message = pstrdup(message);
        (*edata).detail = detail.map_or(std::ptr::null_mut(), pstrdup);
        (*edata).hint = hint.map_or(std::ptr::null_mut(), pstrdup);
        (*edata).domain = DOMAIN.as_ptr();
        (*edata).filename = source_file(location.file()).as_ptr();
        (*edata).lineno = i32::try_from(location.line()).unwrap_or(0);
        (*edata).funcname = DOMAIN.as_ptr();
        edata
    }
}

/// The message domain of the extension's errors.
const DOMAIN: &CStr = c"chunked_map";

/// A source file's name as a C string that lives as long as the process: PostgreSQL keeps the
/// pointer an error names its file with, without copying it. One per file of the extension.
fn source_file(file: &'static str) -> &'static CStr {
    thread_local! {
        static FILES: std::cell::RefCell<std::collections::HashMap<&'static str, &'static CStr>> =
            std::cell::RefCell::new(std::collections::HashMap::new());
    }
    FILES.with(|files| {
        *files
            .borrow_mut()
            .entry(file)
            .or_insert_with(|| Box::leak(CString::new(file).unwrap_or_default().into_boxed_c_str()))
    })
}

/// A palloc'd, NUL-terminated copy of `text` (a NUL in it ends the copy).
fn pstrdup(text: &str) -> *mut c_char {
    let text = CString::new(text.replace('\0', "")).unwrap_or_default();
    // SAFETY: a NUL-terminated string, copied into the current memory context.
    unsafe { pg_sys::pstrdup(text.as_ptr()) }
}
