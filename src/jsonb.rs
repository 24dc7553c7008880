//! `jsonb` values passed through as the PostgreSQL datums they are, with the lifetime of the
//! memory they point into.
//!
//! pgrx's own `JsonB` turns every value into text and parses it with serde_json, and back: that
//! costs a full re-serialisation per call and loses numbers serde_json cannot hold exactly
//! (`1e400`, 30-digit integers). Payloads and pages never need to be looked at in Rust, so they
//! cross the boundary untouched: an argument is handed to SPI as it came, and a page built by
//! SQL is copied once into the caller's memory and returned.
//!
//! `'mcx` is the lifetime of the memory a value points into: an argument lives as long as the
//! call (`'fcx`), a result as long as the memory context of the caller it was copied into
//! ([`crate::spi::CallerMemory`]).

use std::marker::PhantomData;

use pgrx::callconv::{Arg, ArgAbi, BoxRet, FcInfo};
use pgrx::datum::Datum;
use pgrx::nullable::Nullable;
use pgrx::{pg_sys, varlena, FromDatum, IntoDatum};

/// A non-NULL `jsonb` value, valid for `'mcx`.
#[derive(Clone, Copy)]
pub struct Jsonb<'mcx> {
    datum: pg_sys::Datum,
    memory: PhantomData<&'mcx ()>,
}

impl<'mcx> Jsonb<'mcx> {
    /// # Safety
    /// `datum` is a non-NULL jsonb datum that stays valid for `'mcx`.
    pub unsafe fn from_raw(datum: pg_sys::Datum) -> Jsonb<'mcx> {
        Jsonb {
            datum,
            memory: PhantomData,
        }
    }

    /// The datum, to hand to PostgreSQL (a parameter, a result), valid for `'mcx`.
    pub fn datum(self) -> pg_sys::Datum {
        self.datum
    }

    /// The payload's size, the measure `chunked_map.max_payload_bytes` and
    /// `chunked_map.max_chunk_bytes` limit: see [`payload_bytes`].
    pub fn size(self) -> usize {
        // SAFETY: a Jsonb always holds a non-NULL jsonb datum.
        unsafe { payload_bytes(self.datum) }
    }
}

/// A jsonb payload's size: the larger of its binary size (uncompressed, without the varlena
/// header: what jsonb's own 256 MiB limit counts) and the length of its JSON text (what a page
/// read as text, a client and pg_dump get). Usually the two are close; a number like `1e131071`
/// takes a few bytes as jsonb and 131,072 characters as text, an array of small numbers four
/// times more as jsonb than as text. Bounding both keeps every page and dump of accepted
/// payloads within PostgreSQL's limits.
///
/// # Safety
/// `datum` is a non-NULL jsonb datum.
pub unsafe fn payload_bytes(datum: pg_sys::Datum) -> usize {
    unsafe { binary_bytes(datum).max(text_bytes(datum)) }
}

/// Length of the value's JSON text, as `jsonb_out` writes it. Detoasts a compressed or external
/// value (a copy in the current memory context) and frees what it allocates.
///
/// # Safety
/// `datum` is a non-NULL jsonb datum.
unsafe fn text_bytes(datum: pg_sys::Datum) -> usize {
    unsafe {
        let stored = datum.cast_mut_ptr::<pg_sys::varlena>();
        let value = pg_sys::pg_detoast_datum(stored);
        let jsonb = value as *mut pg_sys::Jsonb;
        let size = i32::try_from(varlena::varsize_any(value)).unwrap_or(i32::MAX);
        let text = pg_sys::JsonbToCString(std::ptr::null_mut(), &mut (*jsonb).root, size);
        let length = std::ffi::CStr::from_ptr(text).to_bytes().len();
        pg_sys::pfree(text.cast());
        if value != stored {
            pg_sys::pfree(value.cast());
        }
        length
    }
}

/// Bytes of a varlena datum's data without its header, whether it is inline (short or long
/// header), compressed or stored out of line: what its value takes uncompressed.
///
/// # Safety
/// `datum` is a non-NULL varlena datum.
unsafe fn binary_bytes(datum: pg_sys::Datum) -> usize {
    let pointer = datum.cast_mut_ptr::<pg_sys::varlena>();
    unsafe {
        if varlena::varatt_is_1b(pointer) && !varlena::varatt_is_1b_e(pointer) {
            varlena::varsize_1b(pointer).saturating_sub(1)
        } else {
            // the raw size of a compressed or external value, or the size of an inline one,
            // header included
            pg_sys::toast_raw_datum_size(datum).saturating_sub(pg_sys::VARHDRSZ)
        }
    }
}

impl IntoDatum for Jsonb<'_> {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        Some(self.datum)
    }

    fn type_oid() -> pg_sys::Oid {
        pg_sys::JSONBOID
    }
}

impl FromDatum for Jsonb<'_> {
    unsafe fn from_polymorphic_datum(
        datum: pg_sys::Datum,
        is_null: bool,
        _typoid: pg_sys::Oid,
    ) -> Option<Self> {
        (!is_null).then(|| unsafe { Jsonb::from_raw(datum) })
    }
}

unsafe impl<'fcx> ArgAbi<'fcx> for Jsonb<'fcx> {
    unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
        let index = arg.index();
        unsafe { arg.unbox_arg_using_from_datum() }
            .unwrap_or_else(|| panic!("argument {index} must not be null"))
    }

    unsafe fn unbox_nullable_arg(arg: Arg<'_, 'fcx>) -> Nullable<Self> {
        unsafe { arg.unbox_arg_using_from_datum() }.into()
    }
}

unsafe impl BoxRet for Jsonb<'_> {
    unsafe fn box_into<'fcx>(self, fcinfo: &mut FcInfo<'fcx>) -> Datum<'fcx> {
        unsafe { fcinfo.return_raw_datum(self.datum) }
    }
}

pgrx::impl_sql_translatable!(Jsonb<'_>, "jsonb");

/// A non-NULL `jsonb[]` argument, valid for the call.
#[derive(Clone, Copy)]
pub struct JsonbArray<'fcx> {
    datum: pg_sys::Datum,
    memory: PhantomData<&'fcx ()>,
}

impl<'fcx> JsonbArray<'fcx> {
    /// The elements, `None` for a NULL element. Detoasts the array once (into the current
    /// memory context); the elements point into it.
    pub fn elements(self) -> Vec<Option<Jsonb<'fcx>>> {
        let mut values: *mut pg_sys::Datum = std::ptr::null_mut();
        let mut nulls: *mut bool = std::ptr::null_mut();
        let mut count: i32 = 0;
        // SAFETY: a JsonbArray holds a non-NULL jsonb[] datum; jsonb is a varlena (typlen -1,
        // passed by reference, int alignment) as deconstruct_array needs to be told.
        unsafe {
            let array =
                pg_sys::pg_detoast_datum(self.datum.cast_mut_ptr()) as *mut pg_sys::ArrayType;
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
            if count == 0 {
                return Vec::new();
            }
            let values = std::slice::from_raw_parts(values, count);
            let nulls = std::slice::from_raw_parts(nulls, count);
            values
                .iter()
                .zip(nulls)
                .map(|(value, null)| (!null).then(|| Jsonb::from_raw(*value)))
                .collect()
        }
    }
}

impl FromDatum for JsonbArray<'_> {
    unsafe fn from_polymorphic_datum(
        datum: pg_sys::Datum,
        is_null: bool,
        _typoid: pg_sys::Oid,
    ) -> Option<Self> {
        (!is_null).then_some(JsonbArray {
            datum,
            memory: PhantomData,
        })
    }
}

unsafe impl<'fcx> ArgAbi<'fcx> for JsonbArray<'fcx> {
    unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
        let index = arg.index();
        unsafe { arg.unbox_arg_using_from_datum() }
            .unwrap_or_else(|| panic!("argument {index} must not be null"))
    }

    unsafe fn unbox_nullable_arg(arg: Arg<'_, 'fcx>) -> Nullable<Self> {
        unsafe { arg.unbox_arg_using_from_datum() }.into()
    }
}

pgrx::impl_sql_translatable!(JsonbArray<'_>, arg_only = "jsonb[]");

/// A `jsonb[]` built from some payloads, in the memory context current when it was built (for
/// the append path: SPI's, freed when the call's SPI connection closes).
pub fn build_array(payloads: &[Jsonb<'_>]) -> pg_sys::Datum {
    let mut datums: Vec<pg_sys::Datum> = payloads.iter().map(|p| p.datum).collect();
    let count = i32::try_from(datums.len()).unwrap_or(i32::MAX);
    // SAFETY: every element is a non-NULL jsonb datum; the type facts are jsonb's.
    unsafe {
        let array = pg_sys::construct_array(
            datums.as_mut_ptr(),
            count,
            pg_sys::JSONBOID,
            -1,
            false,
            pg_sys::TYPALIGN_INT as _,
        );
        pg_sys::Datum::from(array)
    }
}
