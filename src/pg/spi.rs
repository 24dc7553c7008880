//! How the extension runs its SQL: typed statements over PostgreSQL's SPI, each declared once
//! (name, SQL, parameter types, result columns: [`statements!`](crate::statements)), deciding
//! per statement two things and nothing else, the snapshot and where results live.
//!
//! - **Types.** A statement's parameters are a tuple of SQL types (`(Text, Int8)`), and only Rust
//!   values of those types can be bound to it ([`Bind`]); its result is a set of columns
//!   ([`Columns`]), whose types are checked against the prepared plan's result when it is
//!   prepared, so a row's decoder cannot read a column as another type. A test prepares every
//!   statement of the extension (every `statements!` block lists its own in `ALL`).
//! - **Snapshot.** A reader's statements run read-only (`SPI read_only = true`): on the snapshot
//!   of the SQL statement that called the function, however many statements the function runs
//!   and whatever the transaction wrote before. A writer's statements run read-write: under READ
//!   COMMITTED each takes a new snapshot (so once a writer holds a map's lock it sees what the
//!   lock's previous holder committed), under REPEATABLE READ and SERIALIZABLE the transaction's.
//! - **Memory.** Everything SPI allocates is freed when the connection closes at the end of the
//!   call; rows borrow the connection and cannot outlive it. A value that must outlive it (a page
//!   returned to the caller) is copied once into the memory of the call ([`CallerMemory`]).
//!
//! Every statement is prepared once per backend and kept, under its key (its module and name):
//! PostgreSQL's plan cache revalidates a kept plan after DDL on what it uses (an upgrade, a
//! dropped and recreated extension), so the key needs no invalidation of its own. Every call into
//! SPI goes through [`catching`]: an error PostgreSQL raises travels on whole.
//! (Whether the database's SQL objects match the library is checked by `statements::connect`,
//! which every call uses.)

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_char, CString};
use std::marker::PhantomData;

use pgrx::pg_sys;
use pgrx::FromDatum;

use crate::pg::boundary::{catching, internal, OrRethrow, PgError};
pub use crate::pg::fmgr::CallerMemory;
use crate::pg::raw;

/// Declares statements, each once, with its SQL, parameter types and result columns, and `ALL`,
/// the list of them that the tests prepare:
///
/// ```ignore
/// statements! {
///     /// What it does.
///     pub LOCK_STATE: Statement<(Text,), StateColumns> = write(concat!("SELECT ...", "..."));
/// }
/// ```
/// `read` statements run on the calling statement's snapshot and may not write; `write` ones
/// see what a writer sees (see the module's description).
#[macro_export]
macro_rules! statements {
    ($( $(#[$doc:meta])* $vis:vis $name:ident: Statement<$params:ty, $columns:ty> = $access:ident($sql:expr); )*) => {
        $(
            $(#[$doc])*
            $vis const $name: $crate::pg::spi::Statement<$params, $columns> =
                $crate::pg::spi::Statement::$access(concat!(module_path!(), "::", stringify!($name)), $sql);
        )*
        /// Every statement of this module, for the test that prepares each one.
        #[allow(dead_code)]
        pub const ALL: &[&dyn $crate::pg::spi::Declared] = &[$(&$name),*];
        /// The key and SQL of every statement of this module (for the tests that read them
        /// without PostgreSQL).
        #[allow(dead_code)]
        pub const SQL: &[(&str, &str)] = &[$(
            (concat!(module_path!(), "::", stringify!($name)), $sql)
        ),*];
    };
}

/// Which snapshot a statement reads with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// The calling statement's snapshot; the statement may not write.
    Read,
    /// A writer's: a new snapshot per statement under READ COMMITTED, the transaction's under
    /// REPEATABLE READ and SERIALIZABLE.
    Write,
}

/// One SQL statement of the extension: schema-qualified, parameterised, with a unique key.
pub struct Statement<P: Params, C: Columns> {
    key: &'static str,
    sql: &'static str,
    access: Access,
    types: PhantomData<fn(P) -> C>,
}

impl<P: Params, C: Columns> Statement<P, C> {
    pub const fn read(key: &'static str, sql: &'static str) -> Self {
        Statement {
            key,
            sql,
            access: Access::Read,
            types: PhantomData,
        }
    }

    pub const fn write(key: &'static str, sql: &'static str) -> Self {
        Statement {
            key,
            sql,
            access: Access::Write,
            types: PhantomData,
        }
    }
}

/// What the test that prepares every statement needs to know of one.
#[cfg_attr(not(any(test, feature = "pg_test")), allow(dead_code))]
pub trait Declared: Sync {
    /// Prepares (and keeps) the statement, checking its result's column types.
    fn prepare(&self, session: &Session);
}

impl<P: Params, C: Columns> Declared for Statement<P, C> {
    fn prepare(&self, _session: &Session) {
        kept_plan(self);
    }
}

// SAFETY (of the Sync above's requirement): a Statement holds only static strings.
unsafe impl<P: Params, C: Columns> Sync for Statement<P, C> {}

// ---- parameters -------------------------------------------------------------------------

/// An SQL type a parameter or a column can have.
pub trait SqlType {
    const OID: pg_sys::Oid;
}

macro_rules! sql_types {
    ($($(#[$doc:meta])* $name:ident = $oid:ident;)*) => {
        $( $(#[$doc])* pub struct $name; impl SqlType for $name { const OID: pg_sys::Oid = pg_sys::$oid; } )*
    };
}

sql_types! {
    Text = TEXTOID;
    Int4 = INT4OID;
    Int8 = INT8OID;
    Bool = BOOLOID;
    /// A row's address (`ctid`).
    Tid = TIDOID;
    /// A `jsonb` value.
    JsonbValue = JSONBOID;
    /// A `jsonb[]` array.
    JsonbArrayValue = JSONBARRAYOID;
    /// A transaction id (`xmin`).
    Xid = XIDOID;
    Bytea = BYTEAOID;
    /// An `interval`.
    IntervalValue = INTERVALOID;
    /// A `timestamptz`: microseconds since 2000-01-01 00:00 UTC, as PostgreSQL keeps it.
    Timestamptz = TIMESTAMPTZOID;
    /// A `text[]` array.
    TextArrayValue = TEXTARRAYOID;
    /// What a function returning nothing returns.
    Void = VOIDOID;
}

/// A statement parameter: a datum that lives at least as long as the statement runs, or NULL.
#[derive(Clone, Copy)]
pub struct Param(Option<pg_sys::Datum>);

/// A Rust value that can be bound to a parameter of SQL type `S`; the datum is made in the
/// current memory context (SPI's, during a connection) or points into the caller's arguments.
pub trait Bind<S: SqlType> {
    fn bind(self) -> Param;
}

impl Bind<Text> for &str {
    fn bind(self) -> Param {
        Param(pgrx::IntoDatum::into_datum(self))
    }
}

impl Bind<Text> for Option<&str> {
    fn bind(self) -> Param {
        Param(self.and_then(pgrx::IntoDatum::into_datum))
    }
}

impl Bind<Int4> for i32 {
    fn bind(self) -> Param {
        Param(Some(pg_sys::Datum::from(self)))
    }
}

impl Bind<Int8> for i64 {
    fn bind(self) -> Param {
        Param(Some(pg_sys::Datum::from(self)))
    }
}

impl Bind<Int8> for Option<i64> {
    fn bind(self) -> Param {
        Param(self.map(pg_sys::Datum::from))
    }
}

impl Bind<Timestamptz> for i64 {
    fn bind(self) -> Param {
        Param(Some(pg_sys::Datum::from(self)))
    }
}

impl Bind<TextArrayValue> for Option<crate::jsonb::TextArrayDatum<'_>> {
    fn bind(self) -> Param {
        Param(self.map(|array| array.datum()))
    }
}

impl Bind<Bool> for bool {
    fn bind(self) -> Param {
        Param(Some(pg_sys::Datum::from(self)))
    }
}

impl Bind<Tid> for pg_sys::ItemPointerData {
    /// A tid is passed by reference: copied into the current memory context.
    fn bind(self) -> Param {
        // SAFETY: palloc in the current (SPI) context, filled before use, read while the
        // statement runs.
        unsafe {
            let copy = pg_sys::palloc(std::mem::size_of::<pg_sys::ItemPointerData>())
                .cast::<pg_sys::ItemPointerData>();
            copy.write(self);
            Param(Some(pg_sys::Datum::from(copy)))
        }
    }
}

impl Bind<Tid> for Option<pg_sys::ItemPointerData> {
    fn bind(self) -> Param {
        self.map_or(Param(None), Bind::<Tid>::bind)
    }
}

impl Bind<IntervalValue> for Option<pgrx::datum::Interval> {
    /// An interval is passed by reference: copied into the current memory context.
    fn bind(self) -> Param {
        Param(self.and_then(pgrx::IntoDatum::into_datum))
    }
}

impl Bind<JsonbValue> for crate::jsonb::Jsonb<'_> {
    fn bind(self) -> Param {
        Param(Some(self.datum()))
    }
}

impl Bind<JsonbValue> for Option<crate::jsonb::Jsonb<'_>> {
    fn bind(self) -> Param {
        Param(self.map(crate::jsonb::Jsonb::datum))
    }
}

impl Bind<JsonbArrayValue> for crate::jsonb::JsonbArrayDatum<'_> {
    fn bind(self) -> Param {
        Param(Some(self.datum()))
    }
}

/// A statement's parameter list: a tuple of SQL types.
pub trait Params {
    const TYPES: &'static [pg_sys::Oid];
}

/// Values for the parameter list `P`, one per parameter, of the parameters' types.
pub trait Arguments<P: Params> {
    fn bind_all(self) -> Vec<Param>;
}

macro_rules! params_for_tuples {
    ($( ($($t:ident $v:ident $x:ident),*) )*) => {
        $(
            impl<$($t: SqlType),*> Params for ($($t,)*) {
                const TYPES: &'static [pg_sys::Oid] = &[$($t::OID),*];
            }
            #[allow(unused_variables)]
            impl<$($t: SqlType, $v: Bind<$t>),*> Arguments<($($t,)*)> for ($($v,)*) {
                fn bind_all(self) -> Vec<Param> {
                    let ($($x,)*) = self;
                    vec![$($x.bind()),*]
                }
            }
        )*
    };
}

params_for_tuples! {
    ()
    (A VA a)
    (A VA a, B VB b)
    (A VA a, B VB b, C VC c)
    (A VA a, B VB b, C VC c, D VD d)
    (A VA a, B VB b, C VC c, D VD d, E VE e)
    (A VA a, B VB b, C VC c, D VD d, E VE e, F VF f)
    (A VA a, B VB b, C VC c, D VD d, E VE e, F VF f, G VG g)
    (A VA a, B VB b, C VC c, D VD d, E VE e, F VF f, G VG g, H VH h)
    (A VA a, B VB b, C VC c, D VD d, E VE e, F VF f, G VG g, H VH h, I VI i)
    (A VA a, B VB b, C VC c, D VD d, E VE e, F VF f, G VG g, H VH h, I VI i, J VJ j)
}

// ---- columns ----------------------------------------------------------------------------

/// A column of a statement's result, and the Rust value it decodes to (valid for `'r`, the
/// rows it comes from).
pub trait Column {
    const OID: pg_sys::Oid;
    type Value<'r>;
    /// # Safety
    /// `datum` is a value of the column's type (checked when the plan was prepared), valid for
    /// `'r`; `None` is SQL NULL.
    unsafe fn decode<'r>(datum: Option<pg_sys::Datum>) -> Option<Self::Value<'r>>;
}

/// A column that must not be NULL: NULL is a fault of the statement (an internal error).
pub struct NotNull<S>(PhantomData<S>);
/// A column that may be NULL.
pub struct Nullable<S>(PhantomData<S>);

macro_rules! decodes {
    ($sql:ident => $value:ty, |$d:ident| $decode:expr) => {
        impl Column for NotNull<$sql> {
            const OID: pg_sys::Oid = <$sql as SqlType>::OID;
            type Value<'r> = $value;
            #[allow(unused_unsafe)]
            unsafe fn decode<'r>(datum: Option<pg_sys::Datum>) -> Option<Self::Value<'r>> {
                // SAFETY: the caller's: a datum of this type.
                datum.map(|$d| unsafe { $decode })
            }
        }
        impl Column for Nullable<$sql> {
            const OID: pg_sys::Oid = <$sql as SqlType>::OID;
            type Value<'r> = Option<$value>;
            #[allow(unused_unsafe)]
            unsafe fn decode<'r>(datum: Option<pg_sys::Datum>) -> Option<Self::Value<'r>> {
                // SAFETY: the caller's: a datum of this type.
                Some(datum.map(|$d| unsafe { $decode }))
            }
        }
    };
}

decodes!(Int4 => i32, |d| i32::from_datum(d, false).unwrap_or_default());
decodes!(Int8 => i64, |d| i64::from_datum(d, false).unwrap_or_default());
decodes!(Bool => bool, |d| bool::from_datum(d, false).unwrap_or_default());
// map names and tokens are UTF-8: the extension installs only in UTF8 databases
decodes!(Text => String, |d| String::from_datum(d, false).unwrap_or_default());
decodes!(Bytea => Vec<u8>, |d| <Vec<u8>>::from_datum(d, false).unwrap_or_default());
decodes!(Tid => pg_sys::ItemPointerData, |d| *d.cast_mut_ptr::<pg_sys::ItemPointerData>());
decodes!(Timestamptz => i64, |d| d.value() as i64);
decodes!(Xid => pg_sys::TransactionId, |d| pg_sys::TransactionId::from(d.value() as u32));

impl Column for NotNull<JsonbValue> {
    const OID: pg_sys::Oid = pg_sys::JSONBOID;
    /// A jsonb value inside the rows: valid while they are.
    type Value<'r> = RowJsonb<'r>;
    unsafe fn decode<'r>(datum: Option<pg_sys::Datum>) -> Option<Self::Value<'r>> {
        datum.map(|datum| RowJsonb {
            datum,
            rows: PhantomData,
        })
    }
}

impl Column for Nullable<JsonbValue> {
    const OID: pg_sys::Oid = pg_sys::JSONBOID;
    type Value<'r> = Option<RowJsonb<'r>>;
    unsafe fn decode<'r>(datum: Option<pg_sys::Datum>) -> Option<Self::Value<'r>> {
        Some(datum.map(|datum| RowJsonb {
            datum,
            rows: PhantomData,
        }))
    }
}

impl Column for Nullable<Void> {
    const OID: pg_sys::Oid = pg_sys::VOIDOID;
    type Value<'r> = ();
    unsafe fn decode<'r>(_datum: Option<pg_sys::Datum>) -> Option<Self::Value<'r>> {
        Some(())
    }
}

/// A non-NULL jsonb value of a result row, valid while the rows are (`'r`).
#[derive(Clone, Copy)]
pub struct RowJsonb<'r> {
    datum: pg_sys::Datum,
    rows: PhantomData<&'r ()>,
}

impl<'r> RowJsonb<'r> {
    /// A copy in the caller's memory, which outlives the rows.
    pub fn copy_to<'fcx>(self, memory: CallerMemory<'fcx>) -> crate::jsonb::Jsonb<'fcx> {
        // SAFETY: a non-NULL jsonb datum of a result row, valid now.
        unsafe { memory.copy_jsonb(self.datum) }
    }

    /// The value, for as long as the rows live.
    pub fn jsonb(self) -> crate::jsonb::Jsonb<'r> {
        // SAFETY: a non-NULL jsonb datum valid for 'r.
        unsafe { crate::jsonb::Jsonb::from_raw(self.datum) }
    }
}

/// A statement's result columns and what a row of them decodes to.
pub trait Columns {
    const TYPES: &'static [pg_sys::Oid];
    type Row<'r>;
    /// # Safety
    /// `row` is a row of a plan whose result types are [`Columns::TYPES`].
    unsafe fn decode<'r>(row: &RawRow<'r>) -> Option<Self::Row<'r>>;
}

macro_rules! columns_for_tuples {
    ($( ($($t:ident $n:literal),*) )*) => {
        $(
            impl<$($t: Column),*> Columns for ($($t,)*) {
                const TYPES: &'static [pg_sys::Oid] = &[$($t::OID),*];
                type Row<'r> = ($($t::Value<'r>,)*);
                #[allow(unused_variables, unused_unsafe)]
                unsafe fn decode<'r>(row: &RawRow<'r>) -> Option<Self::Row<'r>> {
                    // SAFETY: the caller's: each column is of its declared type.
                    unsafe { Some(($($t::decode(row.datum($n))?,)*)) }
                }
            }
        )*
    };
}

columns_for_tuples! {
    ()
    (A 1)
    (A 1, B 2)
    (A 1, B 2, C 3)
    (A 1, B 2, C 3, D 4)
    (A 1, B 2, C 3, D 4, E 5)
    (A 1, B 2, C 3, D 4, E 5, F 6)
    (A 1, B 2, C 3, D 4, E 5, F 6, G 7)
    (A 1, B 2, C 3, D 4, E 5, F 6, G 7, H 8)
    (A 1, B 2, C 3, D 4, E 5, F 6, G 7, H 8, I 9)
    (A 1, B 2, C 3, D 4, E 5, F 6, G 7, H 8, I 9, J 10)
    (A 1, B 2, C 3, D 4, E 5, F 6, G 7, H 8, I 9, J 10, K 11)
    (A 1, B 2, C 3, D 4, E 5, F 6, G 7, H 8, I 9, J 10, K 11, L 12)
    (A 1, B 2, C 3, D 4, E 5, F 6, G 7, H 8, I 9, J 10, K 11, L 12, M 13)
    (A 1, B 2, C 3, D 4, E 5, F 6, G 7, H 8, I 9, J 10, K 11, L 12, M 13, N 14)
}

// ---- running ----------------------------------------------------------------------------

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
    let result = f(&session);
    // SAFETY: closes the connection opened above; `Rows` borrow the session, so nothing read
    // through it outlives `f` but what was copied out of SPI's memory.
    unsafe { catching(|| raw::SPI_finish()) }.or_rethrow();
    result
}

thread_local! {
    /// Kept plans, by statement key.
    static KEPT: RefCell<HashMap<&'static str, pg_sys::SPIPlanPtr>> = RefCell::new(HashMap::new());
}

impl Session {
    /// Runs `statement` with the snapshot its access asks for.
    pub fn run<P: Params, C: Columns>(
        &self,
        statement: &Statement<P, C>,
        arguments: impl Arguments<P>,
    ) -> Rows<'_, C> {
        self.execute(statement, arguments.bind_all(), None)
            .or_rethrow()
    }

    /// The same, returning the error PostgreSQL raises (a lock timeout, say) for the caller to
    /// relabel or let go on. The transaction is aborting after an error.
    pub fn try_run<P: Params, C: Columns>(
        &self,
        statement: &Statement<P, C>,
        arguments: impl Arguments<P>,
    ) -> Result<Rows<'_, C>, PgError> {
        self.execute(statement, arguments.bind_all(), None)
    }

    /// Runs a read-only `statement` on the newest committed state (a snapshot taken now), for
    /// telling apart "absent" from "created after this transaction's snapshot".
    pub fn run_on_latest<P: Params, C: Columns>(
        &self,
        statement: &Statement<P, C>,
        arguments: impl Arguments<P>,
    ) -> Rows<'_, C> {
        // SAFETY: a snapshot that SPI registers for the statement's duration.
        let latest = unsafe { pg_sys::GetLatestSnapshot() };
        self.execute(statement, arguments.bind_all(), Some((latest, true)))
            .or_rethrow()
    }

    /// Runs a writing `statement` on the newest committed state (a snapshot taken now, also
    /// under REPEATABLE READ and SERIALIZABLE), for a write that must see what was committed
    /// after the transaction's snapshot (a subscription marking the maps it follows: a map
    /// started since must not be left out).
    pub fn run_on_latest_write<P: Params, C: Columns>(
        &self,
        statement: &Statement<P, C>,
        arguments: impl Arguments<P>,
    ) -> Rows<'_, C> {
        // SAFETY: a snapshot that SPI registers for the statement's duration.
        let latest = unsafe { pg_sys::GetLatestSnapshot() };
        self.execute(statement, arguments.bind_all(), Some((latest, false)))
            .or_rethrow()
    }

    /// Runs a `statement` of the holder of a map's lock over that map's current chunk. Under
    /// SERIALIZABLE it reads with a snapshot that sees every committed row and the
    /// transaction's own (PostgreSQL's "self" snapshot), which takes no predicate locks: the
    /// rows it reads are those only the lock's holder writes, and PostgreSQL's btree predicate
    /// locks are page-sized, so reading them under the transaction snapshot would make a
    /// rollover conflict with appends to other maps whose records share its index pages. Its
    /// writes are checked for conflicts as any others. Otherwise, [`Session::run`].
    pub fn run_as_lock_holder<P: Params, C: Columns>(
        &self,
        statement: &Statement<P, C>,
        arguments: impl Arguments<P>,
    ) -> Rows<'_, C> {
        // SAFETY: XactIsoLevel is a plain int of this backend (one thread), fixed for the
        // whole transaction once it has a snapshot; reading it cannot fault.
        let serializable = unsafe { pg_sys::XactIsoLevel } == pg_sys::XACT_SERIALIZABLE as i32;
        // PostgreSQL's static "self" snapshot; SPI copies it for the statement.
        let snapshot =
            serializable.then_some((std::ptr::addr_of_mut!(pg_sys::SnapshotSelfData), false));
        self.execute(statement, arguments.bind_all(), snapshot)
            .or_rethrow()
    }

    fn execute<P: Params, C: Columns>(
        &self,
        statement: &Statement<P, C>,
        params: Vec<Param>,
        snapshot: Option<(pg_sys::Snapshot, bool)>,
    ) -> Result<Rows<'_, C>, PgError> {
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
        // SAFETY: a kept plan with as many parameters as `params` (both come from P); SPI is
        // connected; the values live until the call returns. An error the statement raises
        // goes on as PostgreSQL raised it.
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
            internal(format!(
                "statement {} failed with SPI status {status}",
                statement.key
            ));
        }
        // SAFETY: the globals SPI just set for this statement, read before anything else runs.
        unsafe {
            Ok(Rows {
                table: pg_sys::SPI_tuptable,
                count: usize::try_from(pg_sys::SPI_processed).unwrap_or(usize::MAX),
                key: statement.key,
                session: PhantomData,
                columns: PhantomData,
            })
        }
    }
}

/// The kept plan of `statement`, prepared on first use in this backend, with its result's
/// column types checked against the declaration.
fn kept_plan<P: Params, C: Columns>(statement: &Statement<P, C>) -> pg_sys::SPIPlanPtr {
    if let Some(plan) = KEPT.with(|kept| kept.borrow().get(statement.key).copied()) {
        return plan;
    }
    let sql = CString::new(statement.sql).unwrap_or_else(|_| {
        super::boundary::internal(format!("statement {} holds a NUL byte", statement.key))
    });
    let mut types = P::TYPES.to_vec();
    let count = i32::try_from(types.len()).unwrap_or_else(|_| {
        super::boundary::internal(format!(
            "statement {} has too many parameters",
            statement.key
        ))
    });
    let (sql, types) = (sql.as_ptr(), types.as_mut_ptr());
    // SAFETY: SPI is connected; SPI_keepplan moves the plan out of SPI's memory so that it
    // survives the connection. An error in preparing (the SQL objects changed under the plan)
    // goes on as PostgreSQL raised it.
    let plan = unsafe {
        let plan = catching(|| raw::SPI_prepare(sql, count, types)).or_rethrow();
        if plan.is_null() || catching(|| raw::SPI_keepplan(plan)).or_rethrow() != 0 {
            internal(format!("statement {} could not be prepared", statement.key));
        }
        plan
    };
    let returned = result_types(plan);
    if returned != C::TYPES {
        internal(format!(
            "statement {} returns columns of types {returned:?}, declared {:?}",
            statement.key,
            C::TYPES
        ));
    }
    KEPT.with(|kept| kept.borrow_mut().insert(statement.key, plan));
    plan
}

/// The types of the columns a prepared plan returns (none for a statement without RETURNING).
fn result_types(plan: pg_sys::SPIPlanPtr) -> Vec<pg_sys::Oid> {
    // SAFETY: a valid prepared plan; its plan sources and their result descriptor are PostgreSQL's
    // own, read and not kept. The last source is the one whose rows SPI returns.
    unsafe {
        let sources = pgrx::PgList::<pg_sys::CachedPlanSource>::from_pg(
            pg_sys::SPI_plan_get_plan_sources(plan),
        );
        let Some(source) = sources.get_ptr(sources.len().saturating_sub(1)) else {
            return Vec::new();
        };
        let desc = (*source).resultDesc;
        if desc.is_null() {
            return Vec::new();
        }
        (1..=(*desc).natts)
            .map(|column| pg_sys::SPI_gettypeid(desc, column))
            .collect()
    }
}

/// The rows a statement returned, of columns `C`, valid while the SPI connection is open.
/// Freed when dropped.
pub struct Rows<'s, C: Columns> {
    table: *mut pg_sys::SPITupleTable,
    count: usize,
    key: &'static str,
    session: PhantomData<&'s Session>,
    columns: PhantomData<fn() -> C>,
}

impl<C: Columns> Rows<'_, C> {
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn first(&self) -> Option<C::Row<'_>> {
        self.get(0)
    }

    pub fn get(&self, index: usize) -> Option<C::Row<'_>> {
        if self.table.is_null() || index >= self.count {
            return None;
        }
        // SAFETY: index is below the number of rows the table holds; the rows are of the
        // statement's plan, whose result types were checked against C when it was prepared.
        unsafe {
            let row = RawRow {
                tuple: *(*self.table).vals.add(index),
                desc: (*self.table).tupdesc,
                rows: PhantomData,
            };
            match C::decode(&row) {
                Some(decoded) => Some(decoded),
                None => internal(format!(
                    "statement {} returned NULL in a NOT NULL column",
                    self.key
                )),
            }
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = C::Row<'_>> {
        (0..self.count).filter_map(|index| self.get(index))
    }
}

impl<C: Columns> Drop for Rows<'_, C> {
    fn drop(&mut self) {
        // While an error unwinds, the transaction's abort frees SPI's memory wholesale.
        if !self.table.is_null() && !std::thread::panicking() {
            // SAFETY: a tuple table of the open connection, freed once.
            unsafe { pg_sys::SPI_freetuptable(self.table) };
        }
    }
}

/// One row of [`Rows`], before it is decoded. Columns are numbered from 1, as in SQL.
pub struct RawRow<'r> {
    tuple: pg_sys::HeapTuple,
    desc: pg_sys::TupleDesc,
    rows: PhantomData<&'r ()>,
}

impl RawRow<'_> {
    /// The raw datum of a column, `None` for NULL; valid while the row is.
    fn datum(&self, column: i32) -> Option<pg_sys::Datum> {
        let mut is_null = false;
        // SAFETY: a tuple and descriptor of an SPI result; the column is one of the declared
        // columns, whose count was checked against the descriptor.
        let datum = unsafe { pg_sys::SPI_getbinval(self.tuple, self.desc, column, &mut is_null) };
        (!is_null).then_some(datum)
    }
}
