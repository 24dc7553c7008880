//! The calling convention of the extension's SQL functions (fmgr's version 1): arguments in,
//! one value or a set of rows out.
//!
//! [`sql_function!`](crate::sql_function) declares one: the `pg_finfo_*` record PostgreSQL looks
//! up, and the C function itself, whose body runs in [`super::boundary::enter`] with a [`Call`].
//! The SQL side (`CREATE FUNCTION ... LANGUAGE c AS 'MODULE_PATHNAME', '<symbol>'`) is in
//! `sql/api.sql`.

use std::marker::PhantomData;

use pgrx::pg_sys;
use pgrx::FromDatum;

use super::boundary::{catching, OrRethrow};
use super::raw;
use crate::jsonb::{Jsonb, JsonbArray, Member};

/// Declares an SQL-callable C function `$symbol` whose body is `$body`, a closure taking the
/// [`Call`] and returning the result datum.
#[macro_export]
macro_rules! sql_function {
    ($finfo:ident, $symbol:ident, $body:expr) => {
        #[unsafe(no_mangle)]
        pub extern "C" fn $finfo() -> &'static ::pgrx::pg_sys::Pg_finfo_record {
            const V1: ::pgrx::pg_sys::Pg_finfo_record =
                ::pgrx::pg_sys::Pg_finfo_record { api_version: 1 };
            &V1
        }

        #[unsafe(no_mangle)]
        pub unsafe extern "C-unwind" fn $symbol(
            fcinfo: ::pgrx::pg_sys::FunctionCallInfo,
        ) -> ::pgrx::pg_sys::Datum {
            let body: fn(&$crate::pg::fmgr::Call<'_>) -> ::pgrx::pg_sys::Datum = $body;
            // SAFETY: PostgreSQL calls this with a valid fcinfo for the duration of the call;
            // this frame holds nothing with a destructor when `enter` raises through it.
            unsafe {
                $crate::pg::boundary::enter(|| {
                    let call = $crate::pg::fmgr::Call::new(fcinfo);
                    body(&call)
                })
            }
        }
    };
}

/// One call of an SQL function: its arguments, valid for `'fcx` (the call), and the memory its
/// result goes into.
pub struct Call<'fcx> {
    fcinfo: pg_sys::FunctionCallInfo,
    memory: CallerMemory<'fcx>,
}

impl Call<'_> {
    /// # Safety
    /// `fcinfo` is the call PostgreSQL is making now; the `Call` does not outlive it.
    pub unsafe fn new(fcinfo: pg_sys::FunctionCallInfo) -> Self {
        Call {
            fcinfo,
            // SAFETY: on entry the current memory context is the one fmgr gave the call
            // (per-tuple memory of the calling expression), which outlives it.
            memory: CallerMemory {
                context: unsafe { pg_sys::CurrentMemoryContext },
                call: PhantomData,
            },
        }
    }
}

impl<'fcx> Call<'fcx> {
    fn arg<T: FromDatum>(&self, index: usize) -> Option<T> {
        // SAFETY: fmgr fills `nargs` arguments; the SQL definition in sql/api.sql fixes their
        // types, which the getters below assume (src/sql_declarations.rs checks that they do).
        unsafe {
            let nargs = usize::try_from((*self.fcinfo).nargs).unwrap_or_else(|_| {
                super::boundary::internal("fmgr passed a negative argument count".into())
            });
            if index >= nargs {
                return None;
            }
            pgrx::fcinfo::pg_getarg::<T>(self.fcinfo, index)
        }
    }

    /// A `text` argument (UTF-8: the extension installs only in UTF8 databases).
    pub fn text(&self, index: usize) -> Option<&'fcx str> {
        self.arg::<&'fcx str>(index)
    }

    /// A `varchar` argument (stored as `text` is).
    pub fn varchar(&self, index: usize) -> Option<&'fcx str> {
        self.arg::<&'fcx str>(index)
    }

    pub fn int4(&self, index: usize) -> Option<i32> {
        self.arg::<i32>(index)
    }

    pub fn int8(&self, index: usize) -> Option<i64> {
        self.arg::<i64>(index)
    }

    pub fn boolean(&self, index: usize) -> Option<bool> {
        self.arg::<bool>(index)
    }

    pub fn interval(&self, index: usize) -> Option<pgrx::datum::Interval> {
        self.arg::<pgrx::datum::Interval>(index)
    }

    /// A `timestamptz` argument, as PostgreSQL keeps it (microseconds since 2000-01-01 UTC).
    pub fn timestamptz(&self, index: usize) -> Option<i64> {
        self.arg::<i64>(index)
    }

    pub fn jsonb(&self, index: usize) -> Option<Jsonb<'fcx>> {
        self.arg::<Jsonb<'fcx>>(index)
    }

    pub fn jsonb_array(&self, index: usize) -> Option<JsonbArray<'fcx>> {
        self.arg::<JsonbArray<'fcx>>(index)
    }

    /// A `text[]` argument's elements, copied, `None` for a NULL element.
    pub fn text_array(&self, index: usize) -> Option<Vec<Option<String>>> {
        self.arg::<Vec<Option<String>>>(index)
    }

    /// The trigger's data, when PostgreSQL fires the function as a trigger.
    pub fn trigger_data(&self) -> *mut pg_sys::TriggerData {
        // SAFETY: fmgr's context node, which is a TriggerData exactly when called as a trigger.
        unsafe {
            let context = (*self.fcinfo).context;
            if context.is_null() || (*context).type_ != pg_sys::NodeTag::T_TriggerData {
                super::boundary::internal("a trigger function called outside a trigger".into());
            }
            context.cast()
        }
    }

    /// Where results of this call live.
    pub fn memory(&self) -> CallerMemory<'fcx> {
        self.memory
    }

    pub fn returns_bigint(&self, value: i64) -> pg_sys::Datum {
        pg_sys::Datum::from(value)
    }

    pub fn returns_boolean(&self, value: bool) -> pg_sys::Datum {
        pg_sys::Datum::from(value)
    }

    pub fn returns_jsonb(&self, value: Jsonb<'fcx>) -> pg_sys::Datum {
        value.datum()
    }

    /// A jsonb made of a serde value, in the call's memory.
    pub fn returns_json(&self, value: &serde_json::Value) -> pg_sys::Datum {
        self.memory.jsonb_from_json(value).datum()
    }

    pub fn returns_void(&self) -> pg_sys::Datum {
        pg_sys::Datum::from(0)
    }

    /// What a statement-level trigger returns (a NULL pointer, which is not SQL NULL).
    pub fn returns_no_row(&self) -> pg_sys::Datum {
        pg_sys::Datum::from(0)
    }

    /// Refuses to go on in a read-only transaction (or on a standby) with PostgreSQL's own 25006,
    /// naming `function`, as PostgreSQL's own commands do before they write anything.
    pub fn writes(&self, function: &'static std::ffi::CStr) {
        let name = function.as_ptr();
        // SAFETY: a static NUL-terminated name; the error it raises goes on as raised.
        unsafe { catching(|| raw::PreventCommandIfReadOnly(name)) }.or_rethrow();
    }

    /// A function's one row (OUT parameters, not a set): a composite datum of the row type the
    /// SQL definition fixes at N columns, made in the caller's memory. (Cheaper to call than a
    /// set of one row: no tuplestore, and PL/pgSQL evaluates it as a simple expression.)
    pub fn returns_row<const N: usize>(&self, row: [Option<pg_sys::Datum>; N]) -> pg_sys::Datum {
        let fcinfo = self.fcinfo;
        let context = self.memory.context;
        let mut desc: pg_sys::TupleDesc = std::ptr::null_mut();
        let desc_out: *mut pg_sys::TupleDesc = &raw mut desc;
        // SAFETY: get_call_result_type reads the call's own definition (OUT parameters: a
        // composite type, its descriptor made in the current memory) and writes it to `desc`,
        // which outlives the call; the descriptor is checked before use.
        let class = unsafe {
            catching(|| raw::get_call_result_type(fcinfo, std::ptr::null_mut(), desc_out))
        }
        .or_rethrow();
        // SAFETY: a descriptor get_call_result_type made, read only when it made one.
        let columns = (class == pg_sys::TypeFuncClass::TYPEFUNC_COMPOSITE && !desc.is_null())
            .then(|| unsafe { (*desc).natts });
        if columns != i32::try_from(N).ok() {
            super::boundary::internal(format!(
                "a function returning a row of {N} columns is declared otherwise"
            ));
        }
        let nulls = row.map(|value| value.is_none());
        let values = row.map(|value| value.unwrap_or(pg_sys::Datum::from(0)));
        // SAFETY: the descriptor has N columns (checked), one value each; the tuple is formed in
        // the caller's memory, which outlives the call, and catching restores the current
        // context on an error. (`*mut` because PostgreSQL 15 and 16 declare the arrays so; it
        // only reads them.)
        unsafe {
            catching(|| {
                let previous = pg_sys::MemoryContextSwitchTo(context);
                let desc = raw::BlessTupleDesc(desc);
                let tuple = raw::heap_form_tuple(
                    desc,
                    values.as_ptr().cast_mut(),
                    nulls.as_ptr().cast_mut(),
                );
                let datum = raw::HeapTupleHeaderGetDatum((*tuple).t_data);
                pg_sys::MemoryContextSwitchTo(previous);
                datum
            })
        }
        .or_rethrow()
    }

    /// A set-returning function's rows (`RETURNS TABLE`), materialized in a tuplestore that
    /// PostgreSQL owns (in the query's memory): each row's values are copied in as they are put.
    pub fn returns_rows<const N: usize>(
        &self,
        rows: impl IntoIterator<Item = [pg_sys::Datum; N]>,
    ) -> pg_sys::Datum {
        let fcinfo = self.fcinfo;
        // SAFETY: InitMaterializedSRF checks that the caller accepts a materialized set (an
        // error otherwise) and fills resultinfo's tuplestore and descriptor from the function's
        // row type, whose column count the SQL definition fixes at N.
        unsafe { catching(|| raw::InitMaterializedSRF(fcinfo, 0)) }.or_rethrow();
        self.put_rows(rows.into_iter().map(|row| row.map(Some)))
    }

    /// [`Call::returns_rows`] with NULLs (`None`) among the values.
    pub fn returns_rows_with_nulls<const N: usize>(
        &self,
        rows: impl IntoIterator<Item = [Option<pg_sys::Datum>; N]>,
    ) -> pg_sys::Datum {
        let fcinfo = self.fcinfo;
        // SAFETY: as in returns_rows.
        unsafe { catching(|| raw::InitMaterializedSRF(fcinfo, 0)) }.or_rethrow();
        self.put_rows(rows)
    }

    /// A set-returning function's values (`RETURNS SETOF` a scalar type `type_oid`),
    /// materialized as [`Call::returns_rows`] does, in a one-column tuplestore.
    pub fn returns_values(
        &self,
        type_oid: pg_sys::Oid,
        values: impl IntoIterator<Item = pg_sys::Datum>,
    ) -> pg_sys::Datum {
        // SAFETY: what InitMaterializedSRF does for a row type, done for one column: the
        // caller's ReturnSetInfo must accept a materialized set; the tuplestore and its
        // descriptor are made in the query's memory, which outlives the call.
        unsafe {
            let info = (*self.fcinfo).resultinfo.cast::<pg_sys::ReturnSetInfo>();
            if info.is_null()
                || (*info).type_ != pg_sys::NodeTag::T_ReturnSetInfo
                || (*info).allowedModes & pg_sys::SetFunctionReturnMode::SFRM_Materialize as i32
                    == 0
            {
                super::boundary::internal(
                    "a set-returning function called where no set is accepted".into(),
                );
            }
            let query_memory = (*(*info).econtext).ecxt_per_query_memory;
            let previous = pg_sys::MemoryContextSwitchTo(query_memory);
            let desc = pg_sys::CreateTemplateTupleDesc(1);
            pg_sys::TupleDescInitEntry(desc, 1, std::ptr::null(), type_oid, -1, 0);
            let random_access = (*info).allowedModes
                & pg_sys::SetFunctionReturnMode::SFRM_Materialize_Random as i32
                != 0;
            let store = pg_sys::tuplestore_begin_heap(random_access, false, pg_sys::work_mem);
            pg_sys::MemoryContextSwitchTo(previous);
            (*info).returnMode = pg_sys::SetFunctionReturnMode::SFRM_Materialize;
            (*info).setResult = store;
            (*info).setDesc = desc;
        }
        self.put_rows(values.into_iter().map(|value| [Some(value)]))
    }

    fn put_rows<const N: usize>(
        &self,
        rows: impl IntoIterator<Item = [Option<pg_sys::Datum>; N]>,
    ) -> pg_sys::Datum {
        // SAFETY: resultinfo's tuplestore and descriptor, set up by the caller of this function
        // for rows of N columns; tuplestore_putvalues copies the values.
        unsafe {
            let info = (*self.fcinfo).resultinfo.cast::<pg_sys::ReturnSetInfo>();
            let (store, desc) = ((*info).setResult, (*info).setDesc);
            for row in rows {
                let nulls = row.map(|value| value.is_none());
                let values = row.map(|value| value.unwrap_or(pg_sys::Datum::from(0)));
                // (`*mut` because PostgreSQL 15 and 16 declare them so; it only reads them)
                let values_ptr = values.as_ptr().cast_mut();
                let nulls_ptr = nulls.as_ptr().cast_mut();
                catching(|| raw::tuplestore_putvalues(store, desc, values_ptr, nulls_ptr))
                    .or_rethrow();
            }
        }
        pg_sys::Datum::from(0)
    }
}

/// The memory context that was current when the SQL function was called: a result copied there
/// outlives the call's SPI connection and is freed by the caller. `'fcx` is the call.
#[derive(Clone, Copy)]
pub struct CallerMemory<'fcx> {
    context: pg_sys::MemoryContext,
    call: PhantomData<&'fcx ()>,
}

impl<'fcx> CallerMemory<'fcx> {
    /// A copy of a jsonb datum (detoasted) in the caller's memory.
    ///
    /// # Safety
    /// `datum` is a non-NULL jsonb datum, valid now.
    pub unsafe fn copy_jsonb(self, datum: pg_sys::Datum) -> Jsonb<'fcx> {
        // SAFETY: the copy is made in the caller's context, which lives for 'fcx.
        unsafe {
            let previous = pg_sys::MemoryContextSwitchTo(self.context);
            let copy = pg_sys::pg_detoast_datum_copy(datum.cast_mut_ptr());
            pg_sys::MemoryContextSwitchTo(previous);
            Jsonb::from_raw(pg_sys::Datum::from(copy))
        }
    }

    /// The jsonb object of `members` (see [`crate::jsonb::object`]), in the caller's memory.
    pub fn jsonb_object(self, members: &[(&str, Member<'_, '_>)]) -> Jsonb<'fcx> {
        // SAFETY: built in the caller's context, which lives for 'fcx; the members' values are
        // valid now (the caller's borrow). pushJsonbValue raises only for a value past jsonb's
        // limits: caught (which leaves the caller's context current), the context switched
        // back, then rethrown whole.
        unsafe {
            let previous = pg_sys::MemoryContextSwitchTo(self.context);
            let built = catching(|| crate::jsonb::object(members));
            pg_sys::MemoryContextSwitchTo(previous);
            Jsonb::from_raw(built.or_rethrow())
        }
    }

    /// A tid datum (passed by reference) holding `tid`, in the caller's memory.
    pub fn tid(self, tid: pg_sys::ItemPointerData) -> pg_sys::Datum {
        // SAFETY: palloc in the caller's context, which lives for 'fcx, filled before use.
        unsafe {
            let copy = pg_sys::MemoryContextAlloc(
                self.context,
                std::mem::size_of::<pg_sys::ItemPointerData>(),
            )
            .cast::<pg_sys::ItemPointerData>();
            copy.write(tid);
            pg_sys::Datum::from(copy)
        }
    }

    /// A jsonb value built from JSON text, in the caller's memory.
    pub fn jsonb_from_json(self, value: &serde_json::Value) -> Jsonb<'fcx> {
        let text = std::ffi::CString::new(value.to_string()).unwrap_or_default();
        // SAFETY: jsonb_in parses NUL-terminated text (ours: valid JSON) into a new value in the
        // caller's context.
        unsafe {
            let previous = pg_sys::MemoryContextSwitchTo(self.context);
            let datum = pgrx::direct_function_call_as_datum(
                pg_sys::jsonb_in,
                &[Some(pg_sys::Datum::from(text.as_ptr()))],
            );
            pg_sys::MemoryContextSwitchTo(previous);
            Jsonb::from_raw(datum.unwrap_or(pg_sys::Datum::from(0)))
        }
    }
}
