//! `jsonb` values passed through as the PostgreSQL datums they are.
//!
//! pgrx's own `JsonB` turns every value into text and parses it with serde_json, and back: that
//! costs a full re-serialisation per call and loses numbers serde_json cannot hold exactly
//! (`1e400`, 30-digit integers). Payloads and pages never need to be looked at in Rust, so they
//! cross the boundary untouched: an argument is handed to SPI as it came, and a page built by
//! SQL is returned as SPI built it.

use pgrx::callconv::{Arg, ArgAbi, BoxRet, FcInfo};
use pgrx::datum::Datum;
use pgrx::nullable::Nullable;
use pgrx::{pg_sys, FromDatum, IntoDatum, PgMemoryContexts};

/// A non-NULL `jsonb` value.
#[derive(Clone, Copy)]
pub struct Jsonb(pg_sys::Datum);

impl Jsonb {
    /// Size of the value in bytes as stored uncompressed, without the varlena header: the
    /// measure `chunked_map.max_payload_bytes` limits. Does not detoast.
    pub fn size(self) -> usize {
        // SAFETY: a Jsonb always holds a non-NULL varlena datum.
        let raw = unsafe { pg_sys::toast_raw_datum_size(self.0) };
        raw.saturating_sub(pg_sys::VARHDRSZ)
    }
}

impl FromDatum for Jsonb {
    unsafe fn from_polymorphic_datum(
        datum: pg_sys::Datum,
        is_null: bool,
        _typoid: pg_sys::Oid,
    ) -> Option<Self> {
        (!is_null).then_some(Jsonb(datum))
    }

    /// Values read through SPI are copied (and detoasted) into the caller's context, because
    /// SPI frees its own memory when the connection closes.
    unsafe fn from_datum_in_memory_context(
        mut memory_context: PgMemoryContexts,
        datum: pg_sys::Datum,
        is_null: bool,
        _typoid: pg_sys::Oid,
    ) -> Option<Self> {
        if is_null {
            return None;
        }
        memory_context.switch_to(|_| {
            // SAFETY: a non-NULL jsonb datum is a varlena pointer.
            let copy = unsafe { pg_sys::pg_detoast_datum_copy(datum.cast_mut_ptr()) };
            Some(Jsonb(pg_sys::Datum::from(copy)))
        })
    }
}

impl IntoDatum for Jsonb {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        Some(self.0)
    }

    fn type_oid() -> pg_sys::Oid {
        pg_sys::JSONBOID
    }
}

unsafe impl<'fcx> ArgAbi<'fcx> for Jsonb {
    unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
        let index = arg.index();
        unsafe { arg.unbox_arg_using_from_datum() }
            .unwrap_or_else(|| panic!("argument {index} must not be null"))
    }

    unsafe fn unbox_nullable_arg(arg: Arg<'_, 'fcx>) -> Nullable<Self> {
        unsafe { arg.unbox_arg_using_from_datum() }.into()
    }
}

unsafe impl BoxRet for Jsonb {
    unsafe fn box_into<'fcx>(self, fcinfo: &mut FcInfo<'fcx>) -> Datum<'fcx> {
        unsafe { fcinfo.return_raw_datum(self.0) }
    }
}

pgrx::impl_sql_translatable!(Jsonb, "jsonb");

/// A non-NULL `jsonb[]` value, passed to SPI whole; its elements are read with [`elements`].
#[derive(Clone, Copy)]
pub struct JsonbArray(pg_sys::Datum);

impl JsonbArray {
    /// The elements, `None` for a NULL element. Detoasts the array once.
    pub fn elements(self) -> Vec<Option<Jsonb>> {
        let mut values: *mut pg_sys::Datum = std::ptr::null_mut();
        let mut nulls: *mut bool = std::ptr::null_mut();
        let mut count: i32 = 0;
        // SAFETY: a JsonbArray holds a non-NULL jsonb[] datum; jsonb is a varlena (typlen -1,
        // passed by reference, int alignment) as deconstruct_array needs to be told.
        unsafe {
            let array = pg_sys::pg_detoast_datum(self.0.cast_mut_ptr()) as *mut pg_sys::ArrayType;
            pg_sys::deconstruct_array(
                array,
                pg_sys::JSONBOID,
                -1,
                false,
                pg_sys::TYPALIGN_INT as _,
                &mut values,
                &mut nulls,
                &mut count,
            );
            let count = usize::try_from(count).unwrap_or(0);
            let values = std::slice::from_raw_parts(values, count);
            let nulls = std::slice::from_raw_parts(nulls, count);
            values
                .iter()
                .zip(nulls)
                .map(|(v, n)| (!n).then_some(Jsonb(*v)))
                .collect()
        }
    }
}

impl FromDatum for JsonbArray {
    unsafe fn from_polymorphic_datum(
        datum: pg_sys::Datum,
        is_null: bool,
        _typoid: pg_sys::Oid,
    ) -> Option<Self> {
        (!is_null).then_some(JsonbArray(datum))
    }
}

impl IntoDatum for JsonbArray {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        Some(self.0)
    }

    fn type_oid() -> pg_sys::Oid {
        pg_sys::JSONBARRAYOID
    }
}

unsafe impl<'fcx> ArgAbi<'fcx> for JsonbArray {
    unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
        let index = arg.index();
        unsafe { arg.unbox_arg_using_from_datum() }
            .unwrap_or_else(|| panic!("argument {index} must not be null"))
    }

    unsafe fn unbox_nullable_arg(arg: Arg<'_, 'fcx>) -> Nullable<Self> {
        unsafe { arg.unbox_arg_using_from_datum() }.into()
    }
}

pgrx::impl_sql_translatable!(JsonbArray, arg_only = "jsonb[]");
