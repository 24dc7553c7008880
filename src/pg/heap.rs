//! Rows written through PostgreSQL's table and index access methods, without planning or running
//! a statement: what PostgreSQL's own logical replication apply worker does (execReplication.c:
//! a row found through an index and locked by the table access method, then updated and inserted
//! by `heap_update` / `heap_insert`) and what its catalog updates do for index entries
//! (indexing.c, `CatalogIndexInsert`: `FormIndexDatum` without an executor, no entry for a
//! heap-only tuple).
//!
//! Only for a table where the executor would add nothing but its own cost ([`Table::open`]
//! declines any other): a plain heap table written by its owner, no row security, rules,
//! inheritance, CHECK constraints or generated columns, no trigger but the one BEFORE
//! statement-level trigger it names, and one index, a valid, immediate, unique btree on plain
//! columns.
//! The access methods do what matters and the executor relies on: row locks and their
//! outcomes, the serializable checks (`heap_insert` and `heap_update` call
//! `CheckForSerializableConflictIn`, index scans take predicate locks), WAL for recovery and
//! logical decoding, TOAST, unique checks (23505, as PostgreSQL words it).
//!
//! Every function here may raise a PostgreSQL ERROR and is called inside
//! [`super::boundary::catching`]: each takes and returns plain pointers and numbers, so a frame
//! left by `siglongjmp` has nothing to drop. What they palloc goes to the current memory
//! context, which the caller chooses. Relations stay locked to the end of the transaction, as
//! the executor leaves them.

use std::cell::Cell;
use std::ffi::{c_int, CStr};

use pgrx::pg_sys;

use super::raw;

/// A table opened for writing (`RowExclusiveLock`, as INSERT and UPDATE take it), with its one
/// unique index.
#[derive(Clone, Copy)]
pub struct Table {
    pub relation: pg_sys::Relation,
    key: pg_sys::Relation,
    key_info: *mut pg_sys::IndexInfo,
}

/// A table known by its schema and name. The backend remembers its OID once found, and checks
/// at every open that the relation with that OID is still this one (its name and schema): a
/// table dropped and made again (the extension re-created) is looked up again.
pub struct TableName {
    schema: &'static CStr,
    name: &'static CStr,
    /// The one trigger the table may carry, if any: its name and its function (in the table's
    /// schema), statement-level and BEFORE; the direct path does not fire it (its owner vouches
    /// that it lets the writer through). `None`: the table carries no trigger.
    trigger: Option<(&'static CStr, &'static CStr)>,
    /// (schema, table) as last found; InvalidOid before.
    found: Cell<(pg_sys::Oid, pg_sys::Oid)>,
    /// The trigger (its OID) last found to be that one.
    trigger_checked: Cell<pg_sys::Oid>,
}

impl TableName {
    pub const fn new(
        schema: &'static CStr,
        name: &'static CStr,
        trigger: &'static CStr,
        trigger_function: &'static CStr,
    ) -> TableName {
        TableName {
            schema,
            name,
            trigger: Some((trigger, trigger_function)),
            found: Cell::new((pg_sys::InvalidOid, pg_sys::InvalidOid)),
            trigger_checked: Cell::new(pg_sys::InvalidOid),
        }
    }

    /// A table that carries no trigger (any trigger sends its writes to SQL).
    pub const fn without_triggers(schema: &'static CStr, name: &'static CStr) -> TableName {
        TableName {
            schema,
            name,
            trigger: None,
            found: Cell::new((pg_sys::InvalidOid, pg_sys::InvalidOid)),
            trigger_checked: Cell::new(pg_sys::InvalidOid),
        }
    }

    /// Whether `triggers` is at most the table's own trigger: by its name, its function's name
    /// and schema, BEFORE and statement-level (checked once per trigger OID: a trigger made
    /// again is checked again).
    ///
    /// # Safety
    /// `triggers` is an open relation's trigger descriptor (or NULL); inside `catching`.
    unsafe fn only_its_own_trigger(
        &self,
        triggers: *mut pg_sys::TriggerDesc,
        namespace: pg_sys::Oid,
    ) -> bool {
        if triggers.is_null() {
            return true;
        }
        // SAFETY: the descriptor's numtriggers entries; catalog lookups of the trigger's function.
        unsafe {
            if (*triggers).numtriggers == 0 {
                return true;
            }
            let Some((its_trigger, its_function)) = self.trigger else {
                return false;
            };
            if (*triggers).numtriggers != 1 {
                return false;
            }
            let trigger = (*triggers).triggers;
            let tgtype = u32::try_from((*trigger).tgtype).unwrap_or(u32::MAX);
            if tgtype & (pg_sys::TRIGGER_TYPE_ROW | pg_sys::TRIGGER_TYPE_INSTEAD) != 0
                || tgtype & pg_sys::TRIGGER_TYPE_BEFORE == 0
                || CStr::from_ptr((*trigger).tgname) != its_trigger
            {
                return false;
            }
            if self.trigger_checked.get() == (*trigger).tgoid {
                return true;
            }
            let function = (*trigger).tgfoid;
            let name = raw::get_func_name(function);
            let its_own = !name.is_null()
                && CStr::from_ptr(name) == its_function
                && raw::get_func_namespace(function) == namespace;
            if its_own {
                self.trigger_checked.set((*trigger).tgoid);
            }
            its_own
        }
    }

    /// The relation, opened with `RowExclusiveLock`; `None` when there is none of that name.
    ///
    /// # Safety
    /// In a transaction, inside `catching`.
    pub(super) unsafe fn open(&self) -> Option<pg_sys::Relation> {
        let lock = pg_sys::RowExclusiveLock as pg_sys::LOCKMODE;
        // SAFETY: catalog lookups and relation opens in a transaction; the relation's pg_class
        // row is read while it is open.
        unsafe {
            let (namespace, oid) = self.found.get();
            if oid != pg_sys::InvalidOid {
                let relation = raw::try_table_open(oid, lock);
                if !relation.is_null() {
                    let class = (*relation).rd_rel;
                    if (*class).relnamespace == namespace
                        && CStr::from_ptr((*class).relname.data.as_ptr()) == self.name
                    {
                        return Some(relation);
                    }
                    raw::table_close(relation, pg_sys::NoLock as pg_sys::LOCKMODE);
                }
            }
            let namespace = raw::get_namespace_oid(self.schema.as_ptr(), true);
            if namespace == pg_sys::InvalidOid {
                return None;
            }
            let oid = raw::get_relname_relid(self.name.as_ptr(), namespace);
            if oid == pg_sys::InvalidOid {
                return None;
            }
            self.found.set((namespace, oid));
            Some(raw::table_open(oid, lock))
        }
    }
}

impl TableName {
    /// Whether `relation` (this table, open) is one the executor would write with `command`
    /// with nothing of its own to add: a plain heap table written by its owner, who holds the
    /// privileges the statement needs (an owner can revoke its own), with no row security,
    /// rules, inheritance, CHECK constraints, generated columns or triggers (but the one it
    /// names).
    ///
    /// # Safety
    /// `relation` opened by [`TableName::open`], inside `catching`.
    pub(super) unsafe fn plain(
        &self,
        relation: pg_sys::Relation,
        command: pg_sys::CmdType::Type,
    ) -> bool {
        // SAFETY: the open relation's pg_class row, tuple descriptor and trigger descriptor; a
        // privilege check of its OID (in the catalog while it is open).
        unsafe {
            let class = (*relation).rd_rel;
            let privileges = privileges_of(command);
            (*class).relkind as u8 == pg_sys::RELKIND_RELATION
                && (*class).relam == pg_sys::HEAP_TABLE_AM_OID
                // the executor would apply these: the SQL path decides
                && !(*class).relrowsecurity
                && !(*class).relhasrules
                && !(*class).relhassubclass
                && !(*class).relispartition
                && no_checks_or_generated_columns((*relation).rd_att)
                // privileges: the owner's only (the SQL path checks anyone's)
                && raw::GetUserId() == (*class).relowner
                && self.only_its_own_trigger((*relation).trigdesc, (*class).relnamespace)
                && privileges != 0
                && raw::pg_class_aclmask(
                    (*relation).rd_id,
                    raw::GetUserId(),
                    privileges,
                    pg_sys::AclMaskHow::ACLMASK_ALL,
                ) == privileges
        }
    }
}

/// The privileges on a table its statement of `command` needs: an UPDATE by a row's address
/// reads it (SELECT) and changes it (UPDATE); an INSERT, INSERT; none for another command (a
/// table this module does not write).
fn privileges_of(command: pg_sys::CmdType::Type) -> pg_sys::AclMode {
    let privileges = match command {
        pg_sys::CmdType::CMD_UPDATE => pg_sys::ACL_SELECT | pg_sys::ACL_UPDATE,
        pg_sys::CmdType::CMD_INSERT => pg_sys::ACL_INSERT,
        _ => 0,
    };
    pg_sys::AclMode::from(privileges)
}

/// What a row lock found.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Locked {
    /// The version asked for is locked by this transaction now.
    It,
    /// Not locked: another transaction holds the row, it changed or went since the snapshot,
    /// or this transaction already changed it in the same command.
    Not,
    /// Under READ COMMITTED, a newer version than the one asked for (committed after the
    /// snapshot) is what got locked.
    ANewerVersion,
}

impl Table {
    /// Opens the table `named` for writing rows with `command` (`CMD_INSERT`, `CMD_UPDATE`);
    /// `None` when it is not there, or is not a table this module writes (see the module's
    /// description).
    ///
    /// # Safety
    /// In a transaction, inside `catching`.
    pub unsafe fn open(named: &TableName, command: pg_sys::CmdType::Type) -> Option<Table> {
        // SAFETY: (for the whole function) catalog lookups and relation opens in a transaction;
        // the relcache entries read stay valid while the relations are open, which they are to
        // the end of the transaction (the lock is kept).
        unsafe {
            let relation = named.open()?;
            let key = if named.plain(relation, command) {
                the_one_unique_index(relation)
            } else {
                None
            };
            let Some(key) = key else {
                raw::table_close(relation, pg_sys::NoLock as pg_sys::LOCKMODE);
                return None;
            };
            let key_info = raw::BuildIndexInfo(key);
            if !(*key_info).ii_Expressions.is_null() || !(*key_info).ii_Predicate.is_null() {
                raw::index_close(key, pg_sys::NoLock as pg_sys::LOCKMODE);
                raw::table_close(relation, pg_sys::NoLock as pg_sys::LOCKMODE);
                return None;
            }
            // as the executor checks a table the command writes (a publication of updates needs
            // a replica identity): 55000 where it lacks one
            raw::CheckCmdReplicaIdentity(relation, command);
            Some(Table {
                relation,
                key,
                key_info,
            })
        }
    }

    /// Closes the relations, keeping their locks to the end of the transaction.
    ///
    /// # Safety
    /// Opened by [`Table::open`], closed once, inside `catching`.
    pub unsafe fn close(self) {
        // SAFETY: relations this Table opened, closed once.
        unsafe {
            raw::index_close(self.key, pg_sys::NoLock as pg_sys::LOCKMODE);
            raw::table_close(self.relation, pg_sys::NoLock as pg_sys::LOCKMODE);
        }
    }

    /// The number of the column `name` of type `type_oid`, `None` when there is none.
    pub fn column(self, name: &CStr, type_oid: pg_sys::Oid) -> Option<c_int> {
        // SAFETY: the relation is open.
        unsafe { column_number(self.relation, name, type_oid) }
    }

    /// A slot for this table's rows as its access method stores them (pinning a buffer).
    ///
    /// # Safety
    /// Inside `catching`; dropped with [`drop_slot`].
    pub unsafe fn slot(self) -> *mut pg_sys::TupleTableSlot {
        // SAFETY: the relation is open.
        unsafe { raw::table_slot_create(self.relation, std::ptr::null_mut()) }
    }

    /// The address of the row whose key (the index's one column) equals `key` (compared by
    /// `equal`, the key's btree equality), as `snapshot` sees it, read into `slot`: one probe
    /// of the unique index, which under SERIALIZABLE takes the predicate locks any index scan
    /// takes.
    ///
    /// # Safety
    /// Inside `catching`; `snapshot` registered; `key` a datum of the key's type; `slot` made
    /// by [`Table::slot`].
    pub unsafe fn find(
        self,
        equal: pg_sys::RegProcedure,
        key: pg_sys::Datum,
        snapshot: pg_sys::Snapshot,
        slot: *mut pg_sys::TupleTableSlot,
    ) -> Option<pg_sys::ItemPointerData> {
        // SAFETY: a scan of the open relation through its open index, ended before returning.
        unsafe {
            if (*(*self.key).rd_index).indnkeyatts != 1 {
                return None;
            }
            let mut scan_key = pg_sys::ScanKeyData::default();
            raw::ScanKeyInit(
                &mut scan_key,
                1,
                pg_sys::BTEqualStrategyNumber as pg_sys::StrategyNumber,
                equal,
                key,
            );
            let scan = begin_index_scan(self.relation, self.key, snapshot);
            raw::index_rescan(scan, &mut scan_key, 1, std::ptr::null_mut(), 0);
            let found =
                raw::index_getnext_slot(scan, pg_sys::ScanDirection::ForwardScanDirection, slot);
            raw::index_endscan(scan);
            found.then(|| (*slot).tts_tid)
        }
    }

    /// The number of the index's one key column in the table, `None` when it has more.
    pub fn key_column(self) -> Option<c_int> {
        // SAFETY: the open index's pg_index row; indkey has indnatts entries.
        unsafe {
            let form = (*self.key).rd_index;
            ((*form).indnkeyatts == 1).then(|| c_int::from(*(*form).indkey.values.as_ptr()))
        }
    }

    /// Locks the row version at `tid` as `FOR NO KEY UPDATE SKIP LOCKED` would (the lock an
    /// update of its other columns takes), into `slot`: never waiting. Under READ COMMITTED, as the executor does, the newest version is locked when
    /// the one asked for was updated by a committed transaction.
    ///
    /// # Safety
    /// Inside `catching`; `slot` made by [`Table::slot`]; `snapshot` registered.
    pub unsafe fn lock(
        self,
        tid: pg_sys::ItemPointerData,
        snapshot: pg_sys::Snapshot,
        slot: *mut pg_sys::TupleTableSlot,
    ) -> Locked {
        // SAFETY: the heap access method's tuple_lock on the open relation, as table_tuple_lock
        // calls it (a function pointer of the relation's access method, never NULL for heap).
        unsafe {
            let read_committed = pg_sys::XactIsoLevel < pg_sys::XACT_REPEATABLE_READ as c_int;
            let mut flags = pg_sys::TUPLE_LOCK_FLAG_LOCK_UPDATE_IN_PROGRESS;
            if read_committed {
                flags |= pg_sys::TUPLE_LOCK_FLAG_FIND_LAST_VERSION;
            }
            let Some(tuple_lock) = (*(*self.relation).rd_tableam).tuple_lock else {
                return Locked::Not;
            };
            let mut tid = tid;
            let mut failure = pg_sys::TM_FailureData::default();
            let result = tuple_lock(
                self.relation,
                &mut tid,
                snapshot,
                slot,
                raw::GetCurrentCommandId(true),
                pg_sys::LockTupleMode::LockTupleNoKeyExclusive,
                pg_sys::LockWaitPolicy::LockWaitSkip,
                flags as u8,
                &mut failure,
            );
            match result {
                pg_sys::TM_Result::TM_Ok if failure.traversed => Locked::ANewerVersion,
                pg_sys::TM_Result::TM_Ok => Locked::It,
                _ => Locked::Not,
            }
        }
    }

    /// Reads the row version at `tid` into `slot` if `snapshot` sees it.
    ///
    /// # Safety
    /// Inside `catching`; `slot` made by [`Table::slot`]; `snapshot` registered.
    pub unsafe fn fetch(
        self,
        tid: pg_sys::ItemPointerData,
        snapshot: pg_sys::Snapshot,
        slot: *mut pg_sys::TupleTableSlot,
    ) -> bool {
        // SAFETY: the heap access method's tuple_fetch_row_version on the open relation, as
        // table_tuple_fetch_row_version calls it.
        unsafe {
            let Some(fetch) = (*(*self.relation).rd_tableam).tuple_fetch_row_version else {
                return false;
            };
            // an address from before the table was rewritten (CLUSTER, the extension made
            // again) may lie past its end: not a row, as a TID scan says
            let blocks = raw::RelationGetNumberOfBlocksInFork(
                self.relation,
                pg_sys::ForkNumber::MAIN_FORKNUM,
            );
            let block = (u32::from(tid.ip_blkid.bi_hi) << 16) | u32::from(tid.ip_blkid.bi_lo);
            if block >= blocks {
                return false;
            }
            let mut tid = tid;
            fetch(self.relation, &mut tid, snapshot, slot)
        }
    }

    /// The columns of the row in `slot`, all of them (column n at n - 1).
    ///
    /// # Safety
    /// Inside `catching`; `slot` holds a row of this table; `values` and `nulls` as long as
    /// the table has columns.
    pub unsafe fn read(
        self,
        slot: *mut pg_sys::TupleTableSlot,
        values: &mut [pg_sys::Datum],
        nulls: &mut [bool],
    ) {
        // SAFETY: the slot's tuple, deformed into arrays of natts entries (checked by the caller
        // through `columns`); by-reference datums point into the slot's buffer, pinned while
        // the slot holds it.
        unsafe {
            let desc = (*self.relation).rd_att;
            debug_assert!(values.len() >= (*desc).natts as usize);
            let mut should_free = false;
            let tuple = raw::ExecFetchSlotHeapTuple(slot, false, &mut should_free);
            raw::heap_deform_tuple(tuple, desc, values.as_mut_ptr(), nulls.as_mut_ptr());
        }
    }

    /// The number of columns, dropped ones included (the length `read` needs).
    pub fn columns(self) -> usize {
        // SAFETY: the open relation's tuple descriptor.
        unsafe { usize::try_from((*(*self.relation).rd_att).natts).unwrap_or(0) }
    }

    /// Replaces `columns` (numbers) of the row version in `slot` by `values` (none NULL), as an
    /// UPDATE does: the new version's address. The row is this transaction's already (it locked
    /// or wrote this version), so no other transaction can change it: heap_update waits, as an
    /// UPDATE does, which here only passes over this transaction's own lock (it is never called
    /// not waiting: PostgreSQL asserts that such an update never meets a lock, and reports this
    /// transaction's own as another's update in progress). `None`, having written nothing, only
    /// where heap_update says the row changed all the same. Index entries are made only when
    /// the new version is not heap-only (HOT), as the executor makes them.
    ///
    /// # Safety
    /// Inside `catching`; `slot` holds a version of this table's row that the statement's
    /// snapshot sees and this transaction holds (locked through [`Table::lock`], or written by
    /// it before the last `CommandCounterIncrement`); `values` of the columns' types.
    pub unsafe fn update<const N: usize>(
        self,
        slot: *mut pg_sys::TupleTableSlot,
        columns: [c_int; N],
        values: [pg_sys::Datum; N],
    ) -> Option<pg_sys::ItemPointerData> {
        // SAFETY: the old version is one the snapshot sees, so heap_update finds it neither
        // invisible nor changed by this command (its one ERROR outcome besides a broken page);
        // the new tuple is palloc'd in the current memory context and read before it is freed
        // with it.
        unsafe {
            let desc = (*self.relation).rd_att;
            let mut should_free = false;
            let old = raw::ExecFetchSlotHeapTuple(slot, false, &mut should_free);
            let nulls = [false; N];
            let new = raw::heap_modify_tuple_by_cols(
                old,
                desc,
                c_int::try_from(N).unwrap_or(0),
                // (`*mut` because PostgreSQL 15 and 16 declare them so; it only reads them)
                columns.as_ptr().cast_mut(),
                values.as_ptr().cast_mut(),
                nulls.as_ptr().cast_mut(),
            );
            let mut otid = (*old).t_self;
            let needs_entries = heap_update_row(self.relation, &mut otid, new)?;
            if needs_entries {
                self.index(new, true);
            }
            Some((*new).t_self)
        }
    }

    /// Inserts a row of `values` (NULL where `nulls` says), with its index entry; returns its
    /// address. A duplicate key is PostgreSQL's 23505.
    ///
    /// # Safety
    /// Inside `catching`; one value per column, of the column's type.
    pub unsafe fn insert(
        self,
        values: &[pg_sys::Datum],
        nulls: &[bool],
    ) -> pg_sys::ItemPointerData {
        // SAFETY: a tuple formed from the caller's datums in the current memory context,
        // inserted into the open relation (heap_insert TOASTs what needs it).
        unsafe {
            let desc = (*self.relation).rd_att;
            debug_assert_eq!(values.len(), (*desc).natts as usize);
            let tuple =
                raw::heap_form_tuple(desc, values.as_ptr().cast_mut(), nulls.as_ptr().cast_mut());
            raw::simple_heap_insert(self.relation, tuple);
            self.index(tuple, false);
            (*tuple).t_self
        }
    }

    /// The index entry of `tuple`, stored at `tuple.t_self`, as ExecInsertIndexTuples makes it
    /// for a unique immediate index: checked (`UNIQUE_CHECK_YES`).
    unsafe fn index(self, tuple: pg_sys::HeapTuple, unchanged_key: bool) {
        // SAFETY: a slot over the tuple for FormIndexDatum (plain columns: no executor state
        // is needed, as in CatalogIndexInsert), dropped after use; the index is open.
        unsafe {
            let slot = raw::MakeSingleTupleTableSlot(
                (*self.relation).rd_att,
                &raw const pg_sys::TTSOpsHeapTuple,
            );
            raw::ExecStoreHeapTuple(tuple, slot, false);
            let mut values = [pg_sys::Datum::from(0usize); pg_sys::INDEX_MAX_KEYS as usize];
            let mut nulls = [false; pg_sys::INDEX_MAX_KEYS as usize];
            raw::FormIndexDatum(
                self.key_info,
                slot,
                std::ptr::null_mut(),
                values.as_mut_ptr(),
                nulls.as_mut_ptr(),
            );
            raw::index_insert(
                self.key,
                values.as_mut_ptr(),
                nulls.as_mut_ptr(),
                &mut (*tuple).t_self,
                self.relation,
                pg_sys::IndexUniqueCheck::UNIQUE_CHECK_YES,
                unchanged_key,
                self.key_info,
            );
            raw::ExecDropSingleTupleTableSlot(slot);
        }
    }
}

/// An index scan of one key, no ordering.
#[cfg(not(feature = "pg18"))]
unsafe fn begin_index_scan(
    heap: pg_sys::Relation,
    index: pg_sys::Relation,
    snapshot: pg_sys::Snapshot,
) -> pg_sys::IndexScanDesc {
    // SAFETY: as `Table::find` says.
    unsafe { raw::index_beginscan(heap, index, snapshot, 1, 0) }
}

/// An index scan of one key, no ordering, no instrumentation.
#[cfg(feature = "pg18")]
unsafe fn begin_index_scan(
    heap: pg_sys::Relation,
    index: pg_sys::Relation,
    snapshot: pg_sys::Snapshot,
) -> pg_sys::IndexScanDesc {
    // SAFETY: as `Table::find` says.
    unsafe { raw::index_beginscan(heap, index, snapshot, std::ptr::null_mut(), 1, 0) }
}

/// Drops a slot made by [`Table::slot`] (unpinning its buffer).
///
/// # Safety
/// Inside `catching`; the slot is not used again.
pub unsafe fn drop_slot(slot: *mut pg_sys::TupleTableSlot) {
    // SAFETY: a slot made by table_slot_create, dropped once.
    unsafe { raw::ExecDropSingleTupleTableSlot(slot) }
}

/// `heap_update` as the executor calls it (`table_tuple_update` with the command's id, no
/// crosscheck snapshot, waiting), on a row this transaction holds (see `Table::update`): whether
/// the new version needs index entries, `None` when the update did not happen (heap_update
/// returns `TM_SelfModified`, `TM_Updated` or `TM_Deleted` having written nothing).
#[cfg(feature = "pg15")]
unsafe fn heap_update_row(
    relation: pg_sys::Relation,
    otid: &mut pg_sys::ItemPointerData,
    new: pg_sys::HeapTuple,
) -> Option<bool> {
    // SAFETY: as `Table::update` says; PostgreSQL 15 reports a heap-only tuple in its header.
    unsafe {
        let mut failure = pg_sys::TM_FailureData::default();
        let mut lock_mode = pg_sys::LockTupleMode::LockTupleExclusive;
        let result = raw::heap_update(
            relation,
            otid,
            new,
            raw::GetCurrentCommandId(true),
            std::ptr::null_mut(),
            true,
            &mut failure,
            &mut lock_mode,
        );
        (result == pg_sys::TM_Result::TM_Ok)
            .then(|| u32::from((*(*new).t_data).t_infomask2) & pg_sys::HEAP_ONLY_TUPLE == 0)
    }
}

/// `heap_update` as the executor calls it (`table_tuple_update` with the command's id, no
/// crosscheck snapshot, waiting), on a row this transaction holds (see `Table::update`): whether
/// the new version needs index entries, `None` when the update did not happen (heap_update
/// returns `TM_SelfModified`, `TM_Updated` or `TM_Deleted` having written nothing).
#[cfg(not(feature = "pg15"))]
unsafe fn heap_update_row(
    relation: pg_sys::Relation,
    otid: &mut pg_sys::ItemPointerData,
    new: pg_sys::HeapTuple,
) -> Option<bool> {
    // SAFETY: as `Table::update` says. The table's one index is a btree, never summarizing, so
    // TU_Summarizing does not occur; TU_All asks for its entry.
    unsafe {
        let mut failure = pg_sys::TM_FailureData::default();
        let mut lock_mode = pg_sys::LockTupleMode::LockTupleExclusive;
        let mut update_indexes = pg_sys::TU_UpdateIndexes::TU_None;
        let result = raw::heap_update(
            relation,
            otid,
            new,
            raw::GetCurrentCommandId(true),
            std::ptr::null_mut(),
            true,
            &mut failure,
            &mut lock_mode,
            &mut update_indexes,
        );
        (result == pg_sys::TM_Result::TM_Ok)
            .then_some(update_indexes != pg_sys::TU_UpdateIndexes::TU_None)
    }
}

/// Whether the table has no CHECK constraint and no generated column (NOT NULL and defaults
/// are fine: every column is given a value).
unsafe fn no_checks_or_generated_columns(desc: pg_sys::TupleDesc) -> bool {
    // SAFETY: the open relation's tuple descriptor and its constraints.
    unsafe {
        let constraints = (*desc).constr;
        constraints.is_null() || ((*constraints).num_check == 0 && !generated(constraints))
    }
}

#[cfg(not(feature = "pg18"))]
unsafe fn generated(constraints: *mut pg_sys::TupleConstr) -> bool {
    // SAFETY: as the caller says.
    unsafe { (*constraints).has_generated_stored }
}

/// PostgreSQL 18 adds virtual generated columns.
#[cfg(feature = "pg18")]
unsafe fn generated(constraints: *mut pg_sys::TupleConstr) -> bool {
    // SAFETY: as the caller says.
    unsafe { (*constraints).has_generated_stored || (*constraints).has_generated_virtual }
}

/// The relation's one index, opened (`RowExclusiveLock`, as the executor opens the indexes of
/// a table it writes), if it is a valid, immediate, unique btree.
unsafe fn the_one_unique_index(relation: pg_sys::Relation) -> Option<pg_sys::Relation> {
    // SAFETY: the open relation's index list (a palloc'd copy) and the index's relcache entry.
    unsafe {
        let list = raw::RelationGetIndexList(relation);
        if list.is_null() || (*list).length != 1 {
            return None;
        }
        let oid = (*(*list).elements).oid_value;
        let index = raw::index_open(oid, pg_sys::RowExclusiveLock as pg_sys::LOCKMODE);
        let form = (*index).rd_index;
        let usable = (*(*index).rd_rel).relam == pg_sys::BTREE_AM_OID
            && (*form).indisunique
            && (*form).indisvalid
            && (*form).indisready
            && (*form).indislive
            && (*form).indimmediate;
        if usable {
            Some(index)
        } else {
            raw::index_close(index, pg_sys::NoLock as pg_sys::LOCKMODE);
            None
        }
    }
}

/// The number of the column `name` of type `type_oid` of `relation`, `None` when there is none.
///
/// # Safety
/// `relation` is open.
pub(super) unsafe fn column_number(
    relation: pg_sys::Relation,
    name: &CStr,
    type_oid: pg_sys::Oid,
) -> Option<c_int> {
    // SAFETY: the open relation's tuple descriptor, valid while it is open; attribute i < natts.
    unsafe {
        let desc = (*relation).rd_att;
        (0..(*desc).natts).find_map(|i| {
            let attribute = attribute(desc, i);
            let found = !(*attribute).attisdropped
                && CStr::from_ptr((*attribute).attname.data.as_ptr()) == name;
            found.then(|| {
                ((*attribute).atttypid == type_oid).then_some(c_int::from((*attribute).attnum))
            })?
        })
    }
}

/// Whether column `number` (from 1) of `relation` has a default (which a statement that leaves
/// the column out applies).
///
/// # Safety
/// `relation` is open.
pub(super) unsafe fn column_has_default(relation: pg_sys::Relation, number: c_int) -> bool {
    // SAFETY: the open relation's tuple descriptor, valid while it is open; attribute i < natts.
    unsafe {
        let desc = (*relation).rd_att;
        number >= 1 && number <= (*desc).natts && (*attribute(desc, number - 1)).atthasdef
    }
}

/// The number of columns of `relation` that are not dropped.
///
/// # Safety
/// `relation` is open.
pub(super) unsafe fn live_column_count(relation: pg_sys::Relation) -> usize {
    // SAFETY: the open relation's tuple descriptor, valid while it is open; attribute i < natts.
    unsafe {
        let desc = (*relation).rd_att;
        (0..(*desc).natts)
            .filter(|&i| !(*attribute(desc, i)).attisdropped)
            .count()
    }
}

/// Whether `nulls` (one per column, column n at n - 1, dropped ones included) puts a NULL in a
/// column that is NOT NULL.
///
/// # Safety
/// `relation` is open.
pub(super) unsafe fn null_refused(relation: pg_sys::Relation, nulls: &[bool]) -> bool {
    // SAFETY: the open relation's tuple descriptor, valid while it is open; attribute i < natts.
    unsafe {
        let desc = (*relation).rd_att;
        (0..(*desc).natts).zip(nulls).any(|(i, &null)| {
            let attribute = attribute(desc, i);
            null && !(*attribute).attisdropped && (*attribute).attnotnull
        })
    }
}

/// Attribute `i` (from 0) of a tuple descriptor.
#[cfg(not(feature = "pg18"))]
unsafe fn attribute(desc: pg_sys::TupleDesc, i: c_int) -> *const pg_sys::FormData_pg_attribute {
    // SAFETY: i < natts; before PostgreSQL 18 the attributes follow the descriptor's header.
    unsafe { (*desc).attrs.as_ptr().add(usize::try_from(i).unwrap_or(0)) }
}

/// Attribute `i` (from 0) of a tuple descriptor.
#[cfg(feature = "pg18")]
unsafe fn attribute(desc: pg_sys::TupleDesc, i: c_int) -> *const pg_sys::FormData_pg_attribute {
    // SAFETY: i < natts; PostgreSQL 18 keeps them after the compact attributes, where its
    // TupleDescAttr (pointer arithmetic, raising nothing) finds them.
    unsafe { pg_sys::TupleDescAttr(desc, i) }
}
