//! Rows inserted through PostgreSQL's table access method, their entries made in every index of
//! the table by the executor's own routine (`ExecInsertIndexTuples`, on an executor state of
//! its own), with no statement planned or run: what the logical replication apply worker does
//! for an INSERT (execReplication.c, `ExecSimpleRelationInsert`). For tables with several
//! indexes, partial ones and ones on expressions; [`super::heap`] writes tables of one plain
//! unique index without an executor state.
//!
//! Only for a table where the executor would add nothing but its own cost, as `heap` says
//! (`heap::TableName::plain`: a plain heap table written by its owner, no row security, rules,
//! inheritance, CHECK constraints, generated columns or triggers), and
//! - whose unique and exclusion indexes are all checked at once (a deferred check needs the
//!   executor's queue of after-trigger events);
//! - given a value for every column (no default is computed: a caller that leaves a column NULL
//!   where its statement leaves it out checks [`Insertion::has_default`]), a NULL in none that
//!   is NOT NULL:
//!   [`Insertion::insert`] declines such a row, having written nothing, and the statement
//!   raises PostgreSQL's error (23502).
//!
//! What it sees is what the statement would: the snapshot SPI gives a statement (the
//! transaction's, a new one under READ COMMITTED, with the command counter advanced first) is
//! the active one while the row and its entries are written, for the functions of an index's
//! expression or predicate that read tables.
//!
//! The access methods do the rest, as for `heap`: WAL, TOAST, the serializable checks, unique
//! and exclusion checks with PostgreSQL's errors and their waits, index predicates and
//! expressions evaluated as the executor evaluates them.
//!
//! Memory: [`Insertion::open`] makes the executor state and switches to its memory;
//! everything allocated until [`Insertion::close`] (the caller's values too) lives there and is
//! freed by `close`, which switches back. Every function here may raise a PostgreSQL ERROR and
//! is called inside [`super::boundary::catching`], which restores the caller's memory context
//! on an error (the executor state's memory is a child of it, freed with it).

use std::ffi::{c_int, CStr};

use pgrx::pg_sys;

use super::heap::{self, TableName};
use super::raw;

/// A table open for inserting rows, with its indexes and an executor state.
#[derive(Clone, Copy)]
pub struct Insertion {
    relation: pg_sys::Relation,
    estate: *mut pg_sys::EState,
    info: *mut pg_sys::ResultRelInfo,
    /// The memory context current when it was opened, current again once it is closed.
    caller_memory: pg_sys::MemoryContext,
}

impl Insertion {
    /// Opens the table `named` for inserting rows (`RowExclusiveLock`, as INSERT takes it, with
    /// its indexes); `None`, having opened nothing, when it is not there or is not a table this
    /// module writes (see the module's description).
    ///
    /// # Safety
    /// In a transaction, inside `catching`; closed by [`Insertion::close`].
    pub unsafe fn open(named: &TableName) -> Option<Insertion> {
        // SAFETY: (for the whole function) catalog lookups, relation and index opens in a
        // transaction; the executor state is made in the current memory context, and its
        // result relation allocated in the state's own memory.
        unsafe {
            let relation = named.open()?;
            if !named.plain(relation, pg_sys::CmdType::CMD_INSERT) {
                raw::table_close(relation, pg_sys::NoLock as pg_sys::LOCKMODE);
                return None;
            }
            // as the executor checks a table the command writes: 55000 where a publication
            // needs what the table lacks
            raw::CheckCmdReplicaIdentity(relation, pg_sys::CmdType::CMD_INSERT);
            let caller_memory = pg_sys::CurrentMemoryContext;
            let estate = raw::CreateExecutorState();
            pg_sys::CurrentMemoryContext = (*estate).es_query_cxt;
            let info = pg_sys::palloc0(std::mem::size_of::<pg_sys::ResultRelInfo>())
                .cast::<pg_sys::ResultRelInfo>();
            (*info).type_ = pg_sys::NodeTag::T_ResultRelInfo;
            raw::InitResultRelInfo(info, relation, 1, std::ptr::null_mut(), 0);
            raw::ExecOpenIndices(info, false);
            let insertion = Insertion {
                relation,
                estate,
                info,
                caller_memory,
            };
            if insertion.every_check_immediate() {
                Some(insertion)
            } else {
                insertion.close();
                None
            }
        }
    }

    /// Whether every unique or exclusion index of the table is checked at once. (A deferrable
    /// constraint also carries its recheck trigger, which `plain` declines first; this is the
    /// guard of `ExecInsertIndexTuples`' own rule, which leaves such checks to the executor.)
    unsafe fn every_check_immediate(self) -> bool {
        // SAFETY: the result relation's ri_NumIndices open indexes and their pg_index rows.
        unsafe {
            let count = usize::try_from((*self.info).ri_NumIndices).unwrap_or(0);
            (0..count).all(|i| {
                let form = (*(*(*self.info).ri_IndexRelationDescs.add(i))).rd_index;
                !((*form).indisunique || (*form).indisexclusion) || (*form).indimmediate
            })
        }
    }

    /// Closes the indexes and the table (keeping their locks to the end of the transaction, as
    /// the executor does), frees everything allocated since [`Insertion::open`] and makes the
    /// caller's memory context current again.
    ///
    /// # Safety
    /// Opened by [`Insertion::open`], closed once, inside `catching`; nothing allocated since
    /// it was opened is used after.
    pub unsafe fn close(self) {
        // SAFETY: the indexes and the relation this opened, closed once; the executor state
        // freed once, after switching out of its memory.
        unsafe {
            raw::ExecCloseIndices(self.info);
            raw::table_close(self.relation, pg_sys::NoLock as pg_sys::LOCKMODE);
            pg_sys::CurrentMemoryContext = self.caller_memory;
            raw::FreeExecutorState(self.estate);
        }
    }

    /// The number of the column `name` of type `type_oid`, `None` when there is none.
    pub fn column(self, name: &CStr, type_oid: pg_sys::Oid) -> Option<c_int> {
        // SAFETY: the relation is open.
        unsafe { heap::column_number(self.relation, name, type_oid) }
    }

    /// Whether column `number` (from 1) has a default: a row that gives it no value (NULL) is
    /// not the row a statement leaving it out writes.
    pub fn has_default(self, number: c_int) -> bool {
        // SAFETY: the relation is open.
        unsafe { heap::column_has_default(self.relation, number) }
    }

    /// The number of the table's columns, dropped ones included (the length `insert` takes).
    pub fn columns(self) -> usize {
        // SAFETY: the open relation's tuple descriptor.
        unsafe { usize::try_from((*(*self.relation).rd_att).natts).unwrap_or(0) }
    }

    /// The number of the table's columns that are not dropped.
    pub fn live_columns(self) -> usize {
        // SAFETY: the relation is open.
        unsafe { heap::live_column_count(self.relation) }
    }

    /// Whether a row with NULL where `nulls` says (one per column, column n at n - 1) is one
    /// [`Insertion::insert`] takes: no NULL in a column that is NOT NULL.
    pub fn takes(self, nulls: &[bool]) -> bool {
        // SAFETY: the relation is open.
        unsafe { !heap::null_refused(self.relation, nulls) }
    }

    /// Inserts a row of `values` (NULL where `nulls` says; one per column, column n at n - 1,
    /// dropped ones NULL), then its entry in every index whose predicate it meets; its address.
    /// `None`, having written nothing, where a column that is NOT NULL would be NULL. A
    /// duplicate key is PostgreSQL's 23505, as an INSERT raises it.
    ///
    /// # Safety
    /// Inside `catching`; one value per column, of the column's type, allocated in the
    /// insertion's memory or living longer.
    pub unsafe fn insert(
        self,
        values: &[pg_sys::Datum],
        nulls: &[bool],
    ) -> Option<pg_sys::ItemPointerData> {
        // SAFETY: a slot of the table's own kind, filled as a virtual tuple with the caller's
        // datums (copied by the access method when it forms the tuple), inserted with the
        // current command's id; the index entries made from the slot, which the insert left
        // holding the row and its address. Nothing here outlives the executor state's memory.
        unsafe {
            let columns = self.columns();
            if values.len() != columns || nulls.len() != columns {
                super::boundary::internal(format!(
                    "a row of {} values for a table of {columns} columns",
                    values.len()
                ));
            }
            if !self.takes(nulls) {
                return None;
            }
            // what the statement would see, as SPI runs it: the transaction's snapshot (a new
            // one under READ COMMITTED), the command counter advanced and the snapshot's command
            // id with it; what a function of an index's expression or predicate reads (popped
            // on an error by the (sub)transaction's abort)
            raw::PushActiveSnapshot(raw::GetTransactionSnapshot());
            raw::CommandCounterIncrement();
            raw::UpdateActiveSnapshotCommandId();
            let slot = raw::table_slot_create(self.relation, std::ptr::null_mut());
            std::ptr::copy_nonoverlapping(values.as_ptr(), (*slot).tts_values, columns);
            std::ptr::copy_nonoverlapping(nulls.as_ptr(), (*slot).tts_isnull, columns);
            raw::ExecStoreVirtualTuple(slot);
            raw::simple_table_tuple_insert(self.relation, slot);
            let recheck = insert_index_entries(self.info, slot, self.estate);
            raw::PopActiveSnapshot();
            // every check is immediate (`open`): none is left for after the statement
            if !recheck.is_null() {
                super::boundary::internal(
                    "an index entry was left to be checked at the end of the statement".to_owned(),
                );
            }
            let address = (*slot).tts_tid;
            raw::ExecDropSingleTupleTableSlot(slot);
            Some(address)
        }
    }
}

/// `ExecInsertIndexTuples` for a new row, every conflict an error: the indexes whose check is
/// left for later (none where all are immediate).
#[cfg(feature = "pg15")]
unsafe fn insert_index_entries(
    info: *mut pg_sys::ResultRelInfo,
    slot: *mut pg_sys::TupleTableSlot,
    estate: *mut pg_sys::EState,
) -> *mut pg_sys::List {
    // SAFETY: as `Insertion::insert` says.
    unsafe {
        raw::ExecInsertIndexTuples(
            info,
            slot,
            estate,
            false,
            false,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    }
}

/// `ExecInsertIndexTuples` for a new row, every conflict an error, every index (not only the
/// summarizing ones a HOT update needs): the indexes whose check is left for later.
#[cfg(not(feature = "pg15"))]
unsafe fn insert_index_entries(
    info: *mut pg_sys::ResultRelInfo,
    slot: *mut pg_sys::TupleTableSlot,
    estate: *mut pg_sys::EState,
) -> *mut pg_sys::List {
    // SAFETY: as `Insertion::insert` says.
    unsafe {
        raw::ExecInsertIndexTuples(
            info,
            slot,
            estate,
            false,
            false,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            false,
        )
    }
}
