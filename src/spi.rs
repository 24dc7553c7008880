//! How the extension runs its SQL: a thin layer over PostgreSQL's SPI that decides two things
//! per statement and nothing else, the snapshot and where results live.
//!
//! - **Snapshot.** A reader's statements run read-only (`SPI read_only = true`): on the snapshot
//!   of the SQL statement that called the function, however many statements the function runs
//!   and whatever the transaction wrote before. A writer's statements run read-write: under READ
//!   COMMITTED each takes a new snapshot (so once a writer holds a map's lock it sees what the
//!   lock's previous holder committed), under REPEATABLE READ and SERIALIZABLE the transaction's.
//!   (pgrx's own SPI client runs a statement read-only only while the transaction has no
//!   transaction id, so a reader called after any write would see a new snapshot per statement.)
//! - **Memory.** Everything SPI allocates is freed when the connection closes at the end of the
//!   call. A value that must outlive it (a page returned to the caller) is copied once, into the
//!   memory context that was current when the SQL function was called ([`CallerMemory`]) and is
//!   freed by the caller with the rest of its per-call memory. (pgrx copies SPI results into the
//!   parent of SPI's context, which for a function is the transaction's: memory that grows with
//!   every call until commit.)
//!
//! Every statement is prepared once per backend and kept, under its name: PostgreSQL's plan cache
//! revalidates a kept plan after DDL on what it uses (an upgrade, a dropped and recreated
//! extension), so the key needs no invalidation of its own.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::{c_char, CString};
use std::marker::PhantomData;

use pgrx::pg_sys;
use pgrx::{FromDatum, IntoDatum};

use crate::pg::boundary::{catching, OrRethrow, PgError};
pub use crate::pg::fmgr::CallerMemory;
use crate::pg::raw;

use crate::error::ChunkedError;

/// Which snapshot a statement reads with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// The calling statement's snapshot; the statement may not write.
    Read,
    /// A writer's: a new snapshot per statement under READ COMMITTED, the transaction's under
    /// REPEATABLE READ and SERIALIZABLE.
    Write,
}

/// One SQL statement of the extension: schema-qualified, parameterised, with a unique name.
pub struct Statement {
    pub name: &'static str,
    pub sql: &'static str,
    pub params: &'static [pg_sys::Oid],
    pub access: Access,
}

pub const TEXT: pg_sys::Oid = pg_sys::TEXTOID;
pub const INT4: pg_sys::Oid = pg_sys::INT4OID;
pub const INT8: pg_sys::Oid = pg_sys::INT8OID;
pub const BOOL: pg_sys::Oid = pg_sys::BOOLOID;
pub const TID: pg_sys::Oid = pg_sys::TIDOID;
pub const JSONB: pg_sys::Oid = pg_sys::JSONBOID;
pub const JSONB_ARRAY: pg_sys::Oid = pg_sys::JSONBARRAYOID;

/// A statement parameter: a datum that lives at least as long as the statement runs, or NULL.
#[derive(Clone, Copy)]
pub struct Param(Option<pg_sys::Datum>);

impl Param {
    /// A datum made in the current memory context (SPI's, during a connection).
    pub fn of<T: IntoDatum>(value: T) -> Param {
        Param(value.into_datum())
    }

    pub fn optional<T: IntoDatum>(value: Option<T>) -> Param {
        Param(value.and_then(IntoDatum::into_datum))
    }

    pub fn raw(datum: pg_sys::Datum) -> Param {
        Param(Some(datum))
    }

    /// A row's address, copied into the current memory context (a tid is passed by reference).
    pub fn tid(tid: pg_sys::ItemPointerData) -> Param {
        // SAFETY: palloc in the current (SPI) context, filled before use.
        unsafe {
            let copy = pg_sys::palloc(std::mem::size_of::<pg_sys::ItemPointerData>())
                as *mut pg_sys::ItemPointerData;
            copy.write(tid);
            Param(Some(pg_sys::Datum::from(copy)))
        }
    }
}

/// An open SPI connection. Everything it returns is valid until the closure passed to
/// [`connect`] returns.
pub struct Session {
    connected: PhantomData<*mut ()>,
}

/// Runs `f` with an SPI connection, closed when `f` returns. When `f` fails, the connection is
/// left to the transaction's abort (as PostgreSQL's own C code leaves it after an error): the
/// failure is on its way out of the extension, and nothing runs on the connection again.
pub fn connect<R>(f: impl FnOnce(&Session) -> R) -> R {
    // SAFETY: SPI_connect in a function PostgreSQL called; an error it raises goes on.
    unsafe { catching(|| raw::SPI_connect()) }.or_rethrow();
    let session = Session {
        connected: PhantomData,
    };
    check_sql_objects(&session);
    let result = f(&session);
    // SAFETY: closes the connection opened above; everything `f` returned was copied out of
    // SPI's memory (`Rows` borrow the session and cannot outlive `f`).
    unsafe { catching(|| raw::SPI_finish()) }.or_rethrow();
    result
}

thread_local! {
    /// Kept plans, by statement name.
    static KEPT: RefCell<HashMap<&'static str, pg_sys::SPIPlanPtr>> = RefCell::new(HashMap::new());
    /// Whether this backend found the database's SQL objects at the library's version.
    static SQL_OBJECTS_MATCH: Cell<bool> = const { Cell::new(false) };
}

const INSTALLED_VERSION: Statement = Statement {
    name: "installed_version",
    sql: "SELECT e.extversion FROM pg_catalog.pg_extension AS e WHERE e.extname = 'chunked_map'",
    params: &[],
    access: Access::Read,
};

/// Once per backend: a library newer than the database's SQL objects (installed, not yet
/// `ALTER EXTENSION ... UPDATE`d) would run statements against tables of another layout; say so
/// plainly instead. Versions only move forward, so a match is kept for the backend's life.
fn check_sql_objects(session: &Session) {
    if SQL_OBJECTS_MATCH.with(Cell::get) {
        return;
    }
    let library = env!("CARGO_PKG_VERSION");
    let installed = {
        let rows = session.run(&INSTALLED_VERSION, &[]);
        rows.first().and_then(|row| row.text(1))
    };
    match installed {
        Some(installed) if installed != library => ChunkedError::OutdatedSqlObjects {
            library: library.to_owned(),
            installed,
        }
        .raise(),
        _ => SQL_OBJECTS_MATCH.with(|matched| matched.set(true)),
    }
}

impl Session {
    /// Runs `statement` with the snapshot its access asks for.
    pub fn run(&self, statement: &Statement, params: &[Param]) -> Rows<'_> {
        self.execute(statement, params, None).or_rethrow()
    }

    /// The same, returning the error PostgreSQL raises (a lock timeout, say) for the caller to
    /// relabel or let go on. The transaction is aborting after an error.
    pub fn try_run(&self, statement: &Statement, params: &[Param]) -> Result<Rows<'_>, PgError> {
        self.execute(statement, params, None)
    }

    /// Runs a read-only `statement` on the newest committed state (a snapshot taken now), for
    /// telling apart "absent" from "created after this transaction's snapshot".
    pub fn run_on_latest(&self, statement: &Statement, params: &[Param]) -> Rows<'_> {
        // SAFETY: a snapshot registered by SPI for the statement's duration.
        let latest = unsafe { pg_sys::GetLatestSnapshot() };
        self.execute(statement, params, Some((latest, true)))
            .or_rethrow()
    }

    /// Runs a `statement` of the holder of a map's lock over that map's current chunk. Under
    /// SERIALIZABLE it reads with a snapshot that sees every committed row and the
    /// transaction's own (PostgreSQL's "self" snapshot), which takes no predicate locks: the
    /// rows it reads are those only the lock's holder writes, and PostgreSQL's btree predicate
    /// locks are page-sized, so reading them under the transaction snapshot would make a
    /// rollover conflict with appends to other maps whose records share its index pages. Its
    /// writes are checked for conflicts as any others. Otherwise, [`Session::run`].
    pub fn run_as_lock_holder(&self, statement: &Statement, params: &[Param]) -> Rows<'_> {
        // SAFETY: reading the transaction's isolation level.
        let serializable = unsafe { pg_sys::XactIsoLevel } == pg_sys::XACT_SERIALIZABLE as i32;
        if serializable {
            // SAFETY: PostgreSQL's static "self" snapshot; SPI copies it for the statement.
            let own = std::ptr::addr_of_mut!(pg_sys::SnapshotSelfData);
            self.execute(statement, params, Some((own, false)))
                .or_rethrow()
        } else {
            self.run(statement, params)
        }
    }

    fn execute(
        &self,
        statement: &Statement,
        params: &[Param],
        snapshot: Option<(pg_sys::Snapshot, bool)>,
    ) -> Result<Rows<'_>, PgError> {
        debug_assert_eq!(statement.params.len(), params.len(), "{}", statement.name);
        let plan = kept_plan(statement);
        let mut values: Vec<pg_sys::Datum> = params
            .iter()
            .map(|p| p.0.unwrap_or(pg_sys::Datum::from(0)))
            .collect();
        let nulls: Vec<c_char> = params
            .iter()
            .map(|p| if p.0.is_some() { b' ' } else { b'n' } as c_char)
            .collect();
        let read_only = statement.access == Access::Read;
        let (values, nulls) = (values.as_mut_ptr(), nulls.as_ptr());
        // SAFETY: a prepared plan with as many parameters as given; SPI is connected. An error
        // the statement raises goes on as PostgreSQL raised it.
        let status = unsafe {
            match snapshot {
                None => catching(|| raw::SPI_execute_plan(plan, values, nulls, read_only, 0)),
                Some((snapshot, read_only)) => catching(|| {
                    raw::SPI_execute_snapshot(
                        plan,
                        values,
                        nulls,
                        snapshot,
                        std::ptr::null_mut(),
                        read_only,
                        true,
                        0,
                    )
                }),
            }
        }?;
        if status < 0 {
            ChunkedError::Internal {
                context: format!(
                    "statement {} failed with SPI status {status}",
                    statement.name
                ),
            }
            .raise();
        }
        // SAFETY: the globals SPI just set for this statement.
        unsafe {
            Ok(Rows {
                table: pg_sys::SPI_tuptable,
                count: usize::try_from(pg_sys::SPI_processed).unwrap_or(usize::MAX),
                session: PhantomData,
            })
        }
    }
}

/// The kept plan of `statement`, prepared on first use in this backend.
fn kept_plan(statement: &Statement) -> pg_sys::SPIPlanPtr {
    if let Some(plan) = KEPT.with(|kept| kept.borrow().get(statement.name).copied()) {
        return plan;
    }
    let sql = CString::new(statement.sql).unwrap_or_default();
    let mut types = statement.params.to_vec();
    let (sql, count, types) = (
        sql.as_ptr(),
        i32::try_from(types.len()).unwrap_or(0),
        types.as_mut_ptr(),
    );
    // SAFETY: SPI is connected; SPI_keepplan moves the plan out of SPI's memory so that it
    // survives the connection. An error in preparing (the SQL objects changed under the plan)
    // goes on as PostgreSQL raised it.
    let plan = unsafe {
        let plan = catching(|| raw::SPI_prepare(sql, count, types)).or_rethrow();
        if plan.is_null() || catching(|| raw::SPI_keepplan(plan)).or_rethrow() != 0 {
            ChunkedError::Internal {
                context: format!("statement {} could not be prepared", statement.name),
            }
            .raise();
        }
        plan
    };
    KEPT.with(|kept| kept.borrow_mut().insert(statement.name, plan));
    plan
}

/// The rows a statement returned, valid while the SPI connection is open. Freed when dropped.
pub struct Rows<'s> {
    table: *mut pg_sys::SPITupleTable,
    count: usize,
    session: PhantomData<&'s Session>,
}

impl<'s> Rows<'s> {
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn first(&self) -> Option<Row<'_>> {
        self.get(0)
    }

    pub fn get(&self, index: usize) -> Option<Row<'_>> {
        if self.table.is_null() || index >= self.count {
            return None;
        }
        // SAFETY: index is below the number of rows the table holds.
        unsafe {
            Some(Row {
                tuple: *(*self.table).vals.add(index),
                desc: (*self.table).tupdesc,
                rows: PhantomData,
            })
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = Row<'_>> {
        (0..self.count).filter_map(|index| self.get(index))
    }
}

impl Drop for Rows<'_> {
    fn drop(&mut self) {
        // While an error unwinds, the transaction's abort frees SPI's memory wholesale.
        if !self.table.is_null() && !std::thread::panicking() {
            // SAFETY: a tuple table of the open connection, freed once.
            unsafe { pg_sys::SPI_freetuptable(self.table) };
        }
    }
}

/// One row of [`Rows`]. Columns are numbered from 1, as in SQL.
pub struct Row<'r> {
    tuple: pg_sys::HeapTuple,
    desc: pg_sys::TupleDesc,
    rows: PhantomData<&'r ()>,
}

impl Row<'_> {
    /// The raw datum of a column, `None` for NULL; valid while the row is.
    pub fn datum(&self, column: i32) -> Option<pg_sys::Datum> {
        let mut is_null = false;
        // SAFETY: a tuple and descriptor of an SPI result; an out-of-range column is reported
        // by SPI as NULL (SPI_result is set), never read.
        let datum = unsafe { pg_sys::SPI_getbinval(self.tuple, self.desc, column, &mut is_null) };
        (!is_null).then_some(datum)
    }

    pub fn i64(&self, column: i32) -> Option<i64> {
        // SAFETY: the statement's column is bigint.
        self.datum(column)
            .and_then(|d| unsafe { i64::from_datum(d, false) })
    }

    pub fn i32(&self, column: i32) -> Option<i32> {
        // SAFETY: the statement's column is integer.
        self.datum(column)
            .and_then(|d| unsafe { i32::from_datum(d, false) })
    }

    pub fn bool(&self, column: i32) -> Option<bool> {
        // SAFETY: the statement's column is boolean.
        self.datum(column)
            .and_then(|d| unsafe { bool::from_datum(d, false) })
    }

    /// A text column as a Rust string (map names and tokens are UTF-8: the extension only
    /// installs in UTF8 databases).
    pub fn text(&self, column: i32) -> Option<String> {
        // SAFETY: the statement's column is text.
        self.datum(column)
            .and_then(|d| unsafe { String::from_datum(d, false) })
    }

    /// A transaction id (`xmin`), passed by value.
    pub fn xid(&self, column: i32) -> Option<pg_sys::TransactionId> {
        self.datum(column)
            .map(|d| pg_sys::TransactionId::from(d.value() as u32))
    }

    /// A `bytea` column's bytes.
    pub fn bytea(&self, column: i32) -> Option<Vec<u8>> {
        // SAFETY: the statement's column is bytea.
        self.datum(column)
            .and_then(|d| unsafe { <Vec<u8>>::from_datum(d, false) })
    }

    /// A row address (`ctid`).
    pub fn tid(&self, column: i32) -> Option<pg_sys::ItemPointerData> {
        // SAFETY: the statement's column is tid, passed by reference.
        self.datum(column)
            .map(|d| unsafe { *d.cast_mut_ptr::<pg_sys::ItemPointerData>() })
    }
}
