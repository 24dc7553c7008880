//! PostgreSQL functions called without pgrx's guard.
//!
//! pgrx wraps every function of its bindings so that an ERROR PostgreSQL raises in it becomes a
//! Rust panic; the copy it makes keeps only the message, detail and hint (context, position,
//! internal query and constraint names are lost), and pgrx re-raises it with a Rust backtrace in
//! its DETAIL when the server's environment asks for backtraces. The calls whose errors a caller
//! of the extension must see as PostgreSQL raised them go through these declarations instead,
//! always inside [`super::boundary::catching`], which keeps the whole error.
//!
//! The signatures are PostgreSQL's, with pgrx's types; where a version differs the declaration
//! is `cfg`'d per version, as pgrx's features select.

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
    pub fn get_call_result_type(
        fcinfo: pg_sys::FunctionCallInfo,
        result_type_id: *mut pg_sys::Oid,
        result_tuple_desc: *mut pg_sys::TupleDesc,
    ) -> pg_sys::TypeFuncClass::Type;
    pub fn BlessTupleDesc(tupdesc: pg_sys::TupleDesc) -> pg_sys::TupleDesc;
    pub fn HeapTupleHeaderGetDatum(tuple: pg_sys::HeapTupleHeader) -> pg_sys::Datum;
    // PostgreSQL 17 made the arrays of these three `const` (the callers pass `*mut`, which
    // either declaration takes)
    #[cfg(any(feature = "pg15", feature = "pg16"))]
    pub fn tuplestore_putvalues(
        state: *mut pg_sys::Tuplestorestate,
        tdesc: pg_sys::TupleDesc,
        values: *mut pg_sys::Datum,
        isnull: *mut bool,
    );
    #[cfg(not(any(feature = "pg15", feature = "pg16")))]
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

    // The message store's write (`crate::message_store`): a message's id read as a uuid, its
    // payload built as jsonb_build_object builds one (`crate::jsonb::object`).
    pub fn DirectFunctionCall1Coll(
        func: pg_sys::PGFunction,
        collation: pg_sys::Oid,
        arg1: pg_sys::Datum,
    ) -> pg_sys::Datum;
    pub fn uuid_in(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum;
    pub fn uuid_out(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum;
    pub fn pushJsonbValue(
        pstate: *mut *mut pg_sys::JsonbParseState,
        seq: pg_sys::JsonbIteratorToken::Type,
        jbval: *mut pg_sys::JsonbValue,
    ) -> *mut pg_sys::JsonbValue;
    pub fn JsonbValueToJsonb(val: *mut pg_sys::JsonbValue) -> *mut pg_sys::Jsonb;

    // The direct append (`super::heap`): tables and indexes written through their access
    // methods, as PostgreSQL's logical replication apply worker and catalog updates do.
    pub fn CommandCounterIncrement();
    pub fn GetCurrentCommandId(used: bool) -> pg_sys::CommandId;
    pub fn GetTransactionSnapshot() -> pg_sys::Snapshot;
    pub fn RegisterSnapshot(snapshot: pg_sys::Snapshot) -> pg_sys::Snapshot;
    pub fn UnregisterSnapshot(snapshot: pg_sys::Snapshot);
    pub fn get_namespace_oid(nspname: *const c_char, missing_ok: bool) -> pg_sys::Oid;
    pub fn get_relname_relid(relname: *const c_char, relnamespace: pg_sys::Oid) -> pg_sys::Oid;
    pub fn table_open(relation: pg_sys::Oid, lockmode: pg_sys::LOCKMODE) -> pg_sys::Relation;
    /// NULL when no relation has that OID (any more).
    pub fn try_table_open(relation: pg_sys::Oid, lockmode: pg_sys::LOCKMODE) -> pg_sys::Relation;
    pub fn table_close(relation: pg_sys::Relation, lockmode: pg_sys::LOCKMODE);
    pub fn index_open(relation: pg_sys::Oid, lockmode: pg_sys::LOCKMODE) -> pg_sys::Relation;
    pub fn index_close(relation: pg_sys::Relation, lockmode: pg_sys::LOCKMODE);
    pub fn RelationGetIndexList(relation: pg_sys::Relation) -> *mut pg_sys::List;
    pub fn BuildIndexInfo(index: pg_sys::Relation) -> *mut pg_sys::IndexInfo;
    pub fn CheckCmdReplicaIdentity(relation: pg_sys::Relation, cmd: pg_sys::CmdType::Type);
    pub fn ScanKeyInit(
        entry: pg_sys::ScanKey,
        attribute: pg_sys::AttrNumber,
        strategy: pg_sys::StrategyNumber,
        procedure: pg_sys::RegProcedure,
        argument: pg_sys::Datum,
    );
    #[cfg(not(feature = "pg18"))]
    pub fn index_beginscan(
        heap: pg_sys::Relation,
        index: pg_sys::Relation,
        snapshot: pg_sys::Snapshot,
        nkeys: c_int,
        norderbys: c_int,
    ) -> pg_sys::IndexScanDesc;
    /// PostgreSQL 18 adds the scan's instrumentation (NULL: none).
    #[cfg(feature = "pg18")]
    pub fn index_beginscan(
        heap: pg_sys::Relation,
        index: pg_sys::Relation,
        snapshot: pg_sys::Snapshot,
        instrument: *mut pg_sys::IndexScanInstrumentation,
        nkeys: c_int,
        norderbys: c_int,
    ) -> pg_sys::IndexScanDesc;
    pub fn index_rescan(
        scan: pg_sys::IndexScanDesc,
        keys: pg_sys::ScanKey,
        nkeys: c_int,
        orderbys: pg_sys::ScanKey,
        norderbys: c_int,
    );
    pub fn index_getnext_slot(
        scan: pg_sys::IndexScanDesc,
        direction: pg_sys::ScanDirection::Type,
        slot: *mut pg_sys::TupleTableSlot,
    ) -> bool;
    pub fn index_endscan(scan: pg_sys::IndexScanDesc);
    pub fn table_slot_create(
        relation: pg_sys::Relation,
        reglist: *mut *mut pg_sys::List,
    ) -> *mut pg_sys::TupleTableSlot;
    pub fn MakeSingleTupleTableSlot(
        desc: pg_sys::TupleDesc,
        ops: *const pg_sys::TupleTableSlotOps,
    ) -> *mut pg_sys::TupleTableSlot;
    pub fn ExecDropSingleTupleTableSlot(slot: *mut pg_sys::TupleTableSlot);
    pub fn ExecStoreHeapTuple(
        tuple: pg_sys::HeapTuple,
        slot: *mut pg_sys::TupleTableSlot,
        should_free: bool,
    ) -> *mut pg_sys::TupleTableSlot;
    pub fn ExecFetchSlotHeapTuple(
        slot: *mut pg_sys::TupleTableSlot,
        materialize: bool,
        should_free: *mut bool,
    ) -> pg_sys::HeapTuple;
    pub fn heap_deform_tuple(
        tuple: pg_sys::HeapTuple,
        desc: pg_sys::TupleDesc,
        values: *mut pg_sys::Datum,
        isnull: *mut bool,
    );
    #[cfg(any(feature = "pg15", feature = "pg16"))]
    pub fn heap_modify_tuple_by_cols(
        tuple: pg_sys::HeapTuple,
        desc: pg_sys::TupleDesc,
        ncols: c_int,
        columns: *mut c_int,
        values: *mut pg_sys::Datum,
        isnull: *mut bool,
    ) -> pg_sys::HeapTuple;
    #[cfg(not(any(feature = "pg15", feature = "pg16")))]
    pub fn heap_modify_tuple_by_cols(
        tuple: pg_sys::HeapTuple,
        desc: pg_sys::TupleDesc,
        ncols: c_int,
        columns: *const c_int,
        values: *const pg_sys::Datum,
        isnull: *const bool,
    ) -> pg_sys::HeapTuple;
    #[cfg(any(feature = "pg15", feature = "pg16"))]
    pub fn heap_form_tuple(
        desc: pg_sys::TupleDesc,
        values: *mut pg_sys::Datum,
        isnull: *mut bool,
    ) -> pg_sys::HeapTuple;
    #[cfg(not(any(feature = "pg15", feature = "pg16")))]
    pub fn heap_form_tuple(
        desc: pg_sys::TupleDesc,
        values: *const pg_sys::Datum,
        isnull: *const bool,
    ) -> pg_sys::HeapTuple;
    pub fn simple_heap_insert(relation: pg_sys::Relation, tuple: pg_sys::HeapTuple);
    /// PostgreSQL 15: no report of which indexes need entries (the caller asks the tuple).
    #[cfg(feature = "pg15")]
    #[allow(clippy::too_many_arguments)]
    pub fn heap_update(
        relation: pg_sys::Relation,
        otid: pg_sys::ItemPointer,
        tuple: pg_sys::HeapTuple,
        cid: pg_sys::CommandId,
        crosscheck: pg_sys::Snapshot,
        wait: bool,
        failure: *mut pg_sys::TM_FailureData,
        lock_mode: *mut pg_sys::LockTupleMode::Type,
    ) -> pg_sys::TM_Result::Type;
    #[cfg(not(feature = "pg15"))]
    #[allow(clippy::too_many_arguments)]
    pub fn heap_update(
        relation: pg_sys::Relation,
        otid: pg_sys::ItemPointer,
        tuple: pg_sys::HeapTuple,
        cid: pg_sys::CommandId,
        crosscheck: pg_sys::Snapshot,
        wait: bool,
        failure: *mut pg_sys::TM_FailureData,
        lock_mode: *mut pg_sys::LockTupleMode::Type,
        update_indexes: *mut pg_sys::TU_UpdateIndexes::Type,
    ) -> pg_sys::TM_Result::Type;
    pub fn FormIndexDatum(
        info: *mut pg_sys::IndexInfo,
        slot: *mut pg_sys::TupleTableSlot,
        estate: *mut pg_sys::EState,
        values: *mut pg_sys::Datum,
        isnull: *mut bool,
    );
    pub fn index_insert(
        index: pg_sys::Relation,
        values: *mut pg_sys::Datum,
        isnull: *mut bool,
        heap_tid: pg_sys::ItemPointer,
        heap: pg_sys::Relation,
        check_unique: pg_sys::IndexUniqueCheck::Type,
        index_unchanged: bool,
        info: *mut pg_sys::IndexInfo,
    ) -> bool;
    // Rows inserted with every index entry (`super::insert`), as the executor inserts them.
    pub fn PushActiveSnapshot(snapshot: pg_sys::Snapshot);
    pub fn PopActiveSnapshot();
    pub fn UpdateActiveSnapshotCommandId();
    pub fn CreateExecutorState() -> *mut pg_sys::EState;
    pub fn FreeExecutorState(estate: *mut pg_sys::EState);
    pub fn InitResultRelInfo(
        info: *mut pg_sys::ResultRelInfo,
        relation: pg_sys::Relation,
        range_table_index: pg_sys::Index,
        partition_root: *mut pg_sys::ResultRelInfo,
        instrument_options: c_int,
    );
    pub fn ExecOpenIndices(info: *mut pg_sys::ResultRelInfo, speculative: bool);
    pub fn ExecCloseIndices(info: *mut pg_sys::ResultRelInfo);
    pub fn ExecStoreVirtualTuple(slot: *mut pg_sys::TupleTableSlot) -> *mut pg_sys::TupleTableSlot;
    pub fn simple_table_tuple_insert(relation: pg_sys::Relation, slot: *mut pg_sys::TupleTableSlot);
    #[cfg(feature = "pg15")]
    pub fn ExecInsertIndexTuples(
        info: *mut pg_sys::ResultRelInfo,
        slot: *mut pg_sys::TupleTableSlot,
        estate: *mut pg_sys::EState,
        update: bool,
        no_dup_err: bool,
        spec_conflict: *mut bool,
        arbiter_indexes: *mut pg_sys::List,
    ) -> *mut pg_sys::List;
    /// PostgreSQL 16 adds `only_summarizing` (for HOT updates).
    #[cfg(not(feature = "pg15"))]
    #[allow(clippy::too_many_arguments)]
    pub fn ExecInsertIndexTuples(
        info: *mut pg_sys::ResultRelInfo,
        slot: *mut pg_sys::TupleTableSlot,
        estate: *mut pg_sys::EState,
        update: bool,
        no_dup_err: bool,
        spec_conflict: *mut bool,
        arbiter_indexes: *mut pg_sys::List,
        only_summarizing: bool,
    ) -> *mut pg_sys::List;
    /// A sequence's next value (`nextval(regclass)`), called through `DirectFunctionCall1Coll`.
    pub fn nextval_oid(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum;
    pub fn RelationGetNumberOfBlocksInFork(
        relation: pg_sys::Relation,
        fork: pg_sys::ForkNumber::Type,
    ) -> pg_sys::BlockNumber;
    pub fn pg_class_aclmask(
        table: pg_sys::Oid,
        role: pg_sys::Oid,
        mask: pg_sys::AclMode,
        how: pg_sys::AclMaskHow::Type,
    ) -> pg_sys::AclMode;
    pub fn get_func_name(function: pg_sys::Oid) -> *mut c_char;
    pub fn GetUserId() -> pg_sys::Oid;
    pub fn get_func_namespace(function: pg_sys::Oid) -> pg_sys::Oid;
    pub fn pg_detoast_datum(datum: *mut pg_sys::varlena) -> *mut pg_sys::varlena;
    pub fn cstring_to_text_with_len(text: *const c_char, len: c_int) -> *mut pg_sys::text;

    /// Raises a copied error again, every field as it was (elog.c).
    pub fn ReThrowError(edata: *mut pg_sys::ErrorData) -> !;
    /// Raises an error made of the given fields, with the context of the code that is running.
    pub fn ThrowErrorData(edata: *mut pg_sys::ErrorData);
}

/// Every declaration above has the signature of pgrx's binding of the same function, which
/// bindgen generated from the headers of the PostgreSQL being built for (15, 16, 17 or 18, by
/// feature): a declaration that disagrees with them does not compile, whichever version it is
/// built for. (Never called: the check is the type checker's.)
#[allow(dead_code)]
fn declarations_match_the_servers_headers() {
    /// `ours` and `bindings` take the same arguments and return the same type.
    macro_rules! same_signature {
        ($($name:ident($($arg:ident),*);)*) => {$({
            #[allow(clippy::too_many_arguments, non_snake_case)]
            fn same<$($arg,)* R>(
                _ours: unsafe extern "C-unwind" fn($($arg),*) -> R,
                _bindings: unsafe fn($($arg),*) -> R,
            ) {
            }
            same(self::$name, pg_sys::$name);
        })*};
    }
    same_signature! {
        SPI_connect();
        SPI_finish();
        SPI_prepare(A, B, C);
        SPI_keepplan(A);
        SPI_execute_plan(A, B, C, D, E);
        SPI_execute_snapshot(A, B, C, D, E, F, G, H);
        InitMaterializedSRF(A, B);
        get_call_result_type(A, B, C);
        BlessTupleDesc(A);
        HeapTupleHeaderGetDatum(A);
        tuplestore_putvalues(A, B, C, D);
        LockAcquire(A, B, C, D);
        LockRelease(A, B, C);
        PreventCommandIfReadOnly(A);
        DirectFunctionCall1Coll(A, B, C);
        uuid_in(A);
        uuid_out(A);
        pushJsonbValue(A, B, C);
        JsonbValueToJsonb(A);
        CommandCounterIncrement();
        GetCurrentCommandId(A);
        GetTransactionSnapshot();
        RegisterSnapshot(A);
        UnregisterSnapshot(A);
        get_namespace_oid(A, B);
        get_relname_relid(A, B);
        table_open(A, B);
        try_table_open(A, B);
        table_close(A, B);
        index_open(A, B);
        index_close(A, B);
        RelationGetIndexList(A);
        BuildIndexInfo(A);
        CheckCmdReplicaIdentity(A, B);
        ScanKeyInit(A, B, C, D, E);
        index_rescan(A, B, C, D, E);
        index_getnext_slot(A, B, C);
        index_endscan(A);
        table_slot_create(A, B);
        MakeSingleTupleTableSlot(A, B);
        ExecDropSingleTupleTableSlot(A);
        ExecStoreHeapTuple(A, B, C);
        ExecFetchSlotHeapTuple(A, B, C);
        heap_deform_tuple(A, B, C, D);
        heap_modify_tuple_by_cols(A, B, C, D, E, F);
        heap_form_tuple(A, B, C);
        simple_heap_insert(A, B);
        FormIndexDatum(A, B, C, D, E);
        index_insert(A, B, C, D, E, F, G, H);
        PushActiveSnapshot(A);
        PopActiveSnapshot();
        UpdateActiveSnapshotCommandId();
        CreateExecutorState();
        FreeExecutorState(A);
        InitResultRelInfo(A, B, C, D, E);
        ExecOpenIndices(A, B);
        ExecCloseIndices(A);
        ExecStoreVirtualTuple(A);
        simple_table_tuple_insert(A, B);
        nextval_oid(A);
        RelationGetNumberOfBlocksInFork(A, B);
        get_func_name(A);
        pg_class_aclmask(A, B, C, D);
        GetUserId();
        get_func_namespace(A);
        pg_detoast_datum(A);
        cstring_to_text_with_len(A, B);
        ThrowErrorData(A);
    }
    #[cfg(not(feature = "pg18"))]
    same_signature! { index_beginscan(A, B, C, D, E); }
    #[cfg(feature = "pg18")]
    same_signature! { index_beginscan(A, B, C, D, E, F); }
    #[cfg(feature = "pg15")]
    same_signature! { ExecInsertIndexTuples(A, B, C, D, E, F, G); }
    #[cfg(not(feature = "pg15"))]
    same_signature! { ExecInsertIndexTuples(A, B, C, D, E, F, G, H); }
    #[cfg(feature = "pg15")]
    same_signature! { heap_update(A, B, C, D, E, F, G, H); }
    #[cfg(not(feature = "pg15"))]
    same_signature! { heap_update(A, B, C, D, E, F, G, H, I); }
    // Async_Notify has no binding in pgrx: its prototype is checked against the server's
    // commands/async.h by the cluster test `raw_declarations::async_notify_is_declared_as_the_server_declares_it`
    // a function that never returns: its type stated, once for each (PostgreSQL 18 marks it
    // `pg_noreturn` in a way bindgen does not read: pgrx's binding returns `()` there)
    let _: unsafe extern "C-unwind" fn(*mut pg_sys::ErrorData) -> ! = ReThrowError;
    #[cfg(not(feature = "pg18"))]
    let _: unsafe fn(*mut pg_sys::ErrorData) -> ! = pg_sys::ReThrowError;
    #[cfg(feature = "pg18")]
    let _: unsafe fn(*mut pg_sys::ErrorData) = pg_sys::ReThrowError;
}
