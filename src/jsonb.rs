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
//! ([`crate::pg::spi::CallerMemory`]).

use std::marker::PhantomData;

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
    // SAFETY: the caller's: `datum` is a non-NULL jsonb datum, which both measures need.
    unsafe { binary_bytes(datum).max(text_bytes(datum)) }
}

/// Length of the value's JSON text, as `jsonb_out` writes it, computed without writing it:
/// reading the value's containers as stored (`utils/jsonb.h`: a header with the count and kind,
/// one `JEntry` per item — an object's keys, then its values — and the items' data after them)
/// and adding what `JsonbToCString` would write for each item (brackets, `", "` between items,
/// `": "` after a key, escaped strings, numbers as `numeric_out` prints them, literals). The
/// containers are walked depth first, without recursion: its memory is one frame per level of
/// nesting, whatever the value's width or the text's length (a number like `1e131071` is 22
/// bytes stored and 131,072 characters of text, and 9,000 of them would be a gigabyte to
/// render; an array of twenty million empty arrays is as cheap to measure as one). pg_regress
/// `payload_text_is_measured_without_rendering`: exactly `octet_length(v::text)` for every kind
/// of value.
///
/// # Safety
/// `datum` is a non-NULL jsonb datum.
unsafe fn text_bytes(datum: pg_sys::Datum) -> usize {
    // SAFETY: a jsonb datum, detoasted (a copy in the current memory context when it was
    // compressed, stored out of line or with a short header, freed below, after the last read
    // of it); its root container is a valid container of that value.
    unsafe {
        let stored = datum.cast_mut_ptr::<pg_sys::varlena>();
        let value = pg_sys::pg_detoast_datum(stored);
        let root = &raw const (*value.cast::<pg_sys::Jsonb>()).root;
        let length = containers_text_bytes(root);
        if value != stored {
            pg_sys::pfree(value.cast());
        }
        length
    }
}

/// A container being measured: its items' JEntries and data, and the next item to read.
struct Level {
    entries: *const pg_sys::JEntry,
    data: *const u8,
    items: usize,
    next: usize,
    /// where the next item's data starts, from `data`
    offset: usize,
}

impl Level {
    /// Starts measuring `container`: returns its level and the length of what it writes around
    /// its items (brackets, separators).
    ///
    /// # Safety
    /// `container` points to a valid jsonb container that stays valid while the level is used.
    unsafe fn open(container: *const pg_sys::JsonbContainer) -> (Level, usize) {
        // SAFETY: the caller's: the header and the JEntries that follow it are the container's.
        unsafe {
            let header = (*container).header;
            let count = (header & pg_sys::JB_CMASK) as usize;
            let object = header & pg_sys::JB_FOBJECT != 0;
            // a raw scalar (a top-level string, number, ...) is an array of one item written
            // without brackets
            let raw_scalar = header & pg_sys::JB_FSCALAR != 0;
            let brackets = if raw_scalar { 0 } else { 2 };
            let separators = 2 * count.saturating_sub(1);
            let (items, after_keys) = if object {
                (2 * count, 2 * count)
            } else {
                (count, 0)
            };
            let entries = (*container).children.as_ptr();
            let level = Level {
                entries,
                data: entries.add(items).cast::<u8>(),
                items,
                next: 0,
                offset: 0,
            };
            (level, brackets + separators + after_keys)
        }
    }
}

/// Length of the JSON text of `root` and every container nested in it (see [`text_bytes`]).
///
/// # Safety
/// `root` points to a valid jsonb container that stays valid during the call.
unsafe fn containers_text_bytes(root: *const pg_sys::JsonbContainer) -> usize {
    const OFFSET_OR_LENGTH: u32 = pg_sys::JENTRY_OFFLENMASK;
    const HAS_OFFSET: u32 = pg_sys::JENTRY_HAS_OFF;
    const KIND: u32 = pg_sys::JENTRY_TYPEMASK;
    // SAFETY: the caller's.
    let (mut level, mut length) = unsafe { Level::open(root) };
    // the levels above the one being measured: only allocated when there is nesting
    let mut above: Vec<Level> = Vec::new();
    loop {
        if level.next == level.items {
            match above.pop() {
                Some(parent) => {
                    level = parent;
                    continue;
                }
                None => return length,
            }
        }
        // SAFETY: item `next` of a container of the value (`root` or one nested in it, found at
        // its JEntry's int-aligned offset, as `fillJsonbValue` finds it); its JEntry gives where
        // its data ends (an end offset every `JB_OFFSET_STRIDE` items, else its length), its
        // data lies within the value.
        unsafe {
            let entry = *level.entries.add(level.next);
            let field = (entry & OFFSET_OR_LENGTH) as usize;
            let start = level.offset;
            let end = if entry & HAS_OFFSET != 0 {
                field
            } else {
                start + field
            };
            level.next += 1;
            level.offset = end;
            length += match entry & KIND {
                pg_sys::JENTRY_ISSTRING => string_text_bytes(std::slice::from_raw_parts(
                    level.data.add(start),
                    end.saturating_sub(start),
                )),
                pg_sys::JENTRY_ISNUMERIC => {
                    numeric_text_bytes(level.data.add(int_align(start)).cast_mut().cast())
                }
                pg_sys::JENTRY_ISBOOL_FALSE => 5,
                pg_sys::JENTRY_ISBOOL_TRUE | pg_sys::JENTRY_ISNULL => 4,
                _ => {
                    let nested = level.data.add(int_align(start)).cast();
                    let (inner, around) = Level::open(nested);
                    above.push(std::mem::replace(&mut level, inner));
                    around
                }
            };
        }
    }
}

/// `INTALIGN`: numbers and nested containers start at an int-aligned offset.
fn int_align(offset: usize) -> usize {
    (offset + 3) & !3
}

/// Length of a string's JSON text: quoted and escaped as `escape_json` does. Most strings have
/// nothing to escape: they are counted in one pass the compiler vectorizes, and only a string
/// with something to escape is read again, byte by byte.
fn string_text_bytes(bytes: &[u8]) -> usize {
    let needs_escape = |byte: u8| byte < 0x20 || byte == b'"' || byte == b'\\';
    let escaped = bytes.iter().fold(0_usize, |count, &byte| {
        count + usize::from(needs_escape(byte))
    });
    if escaped == 0 {
        return 2 + bytes.len();
    }
    2 + bytes
        .iter()
        .map(|byte| match byte {
            b'"' | b'\\' | 0x08 | 0x0c | b'\n' | b'\r' | b'\t' => 2,
            0x00..=0x1f => 6,
            _ => 1,
        })
        .sum::<usize>()
}

/// Length of a number's text as `numeric_out` prints it, from the numeric's header alone: a
/// sign, the integer part (`0` below 1; else the first base-10000 digit without its leading
/// zeros and 4 decimal digits per further one), and a point and `dscale` digits.
///
/// # Safety
/// `numeric` points to a numeric varlena (4-byte header), valid now.
unsafe fn numeric_text_bytes(numeric: pg_sys::Numeric) -> usize {
    const SIGN_MASK: u16 = 0xC000;
    const NEGATIVE: u16 = 0x4000;
    const SHORT: u16 = 0x8000;
    const SPECIAL: u16 = 0xC000;
    // SAFETY: the numeric's header (after its 4-byte varlena header) and its digits, within the
    // value's size.
    unsafe {
        let base = numeric.cast::<u8>();
        let size = pgrx::varlena::varsize_any(numeric.cast());
        let read_u16 = |at: usize| u16::from_ne_bytes([*base.add(at), *base.add(at + 1)]);
        let header = read_u16(4);
        let (negative, dscale, weight, digits_at) = if header & SIGN_MASK == SPECIAL {
            // NaN and infinities: jsonb holds none; measured by printing, to be safe
            let text = pg_sys::numeric_out_sci(numeric, 0);
            let length = std::ffi::CStr::from_ptr(text).to_bytes().len();
            pg_sys::pfree(text.cast());
            return length;
        } else if header & SIGN_MASK == SHORT {
            let weight_bits = i32::from(header & 0x003F);
            let weight = if header & 0x0040 != 0 {
                weight_bits | !0x003F
            } else {
                weight_bits
            };
            (
                header & 0x2000 != 0,
                usize::from((header & 0x1F80) >> 7),
                weight,
                6,
            )
        } else {
            let weight = i32::from(i16::from_ne_bytes(read_u16(6).to_ne_bytes()));
            (
                header & SIGN_MASK == NEGATIVE,
                usize::from(header & 0x3FFF),
                weight,
                8,
            )
        };
        let ndigits = size.saturating_sub(digits_at) / 2;
        let integer_part = if weight < 0 {
            1
        } else {
            let first = if ndigits > 0 { read_u16(digits_at) } else { 0 };
            let first_width = match first {
                0..=9 => 1,
                10..=99 => 2,
                100..=999 => 3,
                _ => 4,
            };
            first_width + 4 * usize::try_from(weight).unwrap_or(0)
        };
        usize::from(negative) + integer_part + if dscale > 0 { 1 + dscale } else { 0 }
    }
}

/// Bytes of a varlena datum's data without its header, whether it is inline (short or long
/// header), compressed or stored out of line: what its value takes uncompressed.
///
/// # Safety
/// `datum` is a non-NULL varlena datum.
unsafe fn binary_bytes(datum: pg_sys::Datum) -> usize {
    let pointer = datum.cast_mut_ptr::<pg_sys::varlena>();
    // SAFETY: the caller's: `datum` points to a varlena, whose first byte says which header it
    // has; each size is read from the header that byte names.
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
        // SAFETY: the caller's (FromDatum's contract): a non-NULL `datum` is a jsonb datum
        // valid for as long as the value is used.
        (!is_null).then(|| unsafe { Jsonb::from_raw(datum) })
    }
}

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

/// A `jsonb[]` value built from some payloads (a batch's chunk), valid for `'m`: only as long
/// as the memory it was built in, which [`BatchMemory::with_array`] resets after use.
#[derive(Clone, Copy)]
pub struct JsonbArrayDatum<'m> {
    datum: pg_sys::Datum,
    memory: PhantomData<&'m ()>,
}

impl JsonbArrayDatum<'_> {
    pub fn datum(self) -> pg_sys::Datum {
        self.datum
    }
}

/// A `text[]` value built from some records' ids (a batch's chunk; NULL elements for records
/// without one), valid for `'m` as [`JsonbArrayDatum`] is.
#[derive(Clone, Copy)]
pub struct TextArrayDatum<'m> {
    datum: pg_sys::Datum,
    memory: PhantomData<&'m ()>,
}

impl TextArrayDatum<'_> {
    pub fn datum(self) -> pg_sys::Datum {
        self.datum
    }
}

/// Memory for a batch's arrays, one at a time: a batch's memory stays at one chunk's worth,
/// however long the batch. Freed when dropped.
pub struct BatchMemory(pgrx::PgMemoryContexts);

impl BatchMemory {
    /// A memory context under the current one.
    pub fn new() -> BatchMemory {
        BatchMemory(pgrx::PgMemoryContexts::new("chunked_map batch"))
    }

    /// Builds a `jsonb[]` of `payloads` and hands it to `write`, then frees it: the array cannot
    /// outlive the call (`write` takes it for any lifetime, so it cannot keep it).
    pub fn with_array<R>(
        &mut self,
        payloads: &[Payload<'_>],
        write: impl for<'a> FnOnce(JsonbArrayDatum<'a>) -> R,
    ) -> R {
        let mut datums: Vec<pg_sys::Datum> = payloads.iter().map(|p| p.value().datum()).collect();
        let count = i32::try_from(datums.len()).unwrap_or(i32::MAX);
        // SAFETY: every element is a non-NULL jsonb datum, valid for the call; the type facts
        // are jsonb's; the array is made in this context and used only inside `write`, before
        // the reset below.
        let datum = unsafe {
            self.0.switch_to(|_| {
                pg_sys::Datum::from(pg_sys::construct_array(
                    datums.as_mut_ptr(),
                    count,
                    pg_sys::JSONBOID,
                    -1,
                    false,
                    pg_sys::TYPALIGN_INT as _,
                ))
            })
        };
        let result = write(JsonbArrayDatum {
            datum,
            memory: PhantomData,
        });
        // SAFETY: nothing built in this context is used after `write` returned.
        unsafe { self.0.reset() };
        result
    }

    /// Builds a `jsonb[]` of `payloads` and, when any of `ids` is given, a `text[]` of them
    /// (NULL where a record has none; `None` when none has one), and hands them to `write`, then
    /// frees them, as [`BatchMemory::with_array`].
    pub fn with_arrays<R>(
        &mut self,
        payloads: &[Payload<'_>],
        ids: &[Option<&str>],
        write: impl for<'a> FnOnce(JsonbArrayDatum<'a>, Option<TextArrayDatum<'a>>) -> R,
    ) -> R {
        if ids.iter().all(Option::is_none) {
            return self.with_array(payloads, |array| write(array, None));
        }
        let ids_datum = self.text_array(ids);
        self.with_array(payloads, |array| {
            write(
                array,
                Some(TextArrayDatum {
                    datum: ids_datum,
                    memory: PhantomData,
                }),
            )
        })
    }

    /// A one-dimensional `text[]` of `values`, made in this memory.
    fn text_array(&mut self, values: &[Option<&str>]) -> pg_sys::Datum {
        let count = i32::try_from(values.len()).unwrap_or(i32::MAX);
        // SAFETY: every element is a text made here from a UTF-8 string of its length, or NULL
        // (flagged); the type facts are text's (varlena, int alignment); the array lives in this
        // context until the reset after `write` (`with_array` resets it).
        unsafe {
            self.0.switch_to(|_| {
                let mut nulls: Vec<bool> = values.iter().map(Option::is_none).collect();
                let mut datums: Vec<pg_sys::Datum> = values
                    .iter()
                    .map(|value| match value {
                        Some(text) => pg_sys::Datum::from(pg_sys::cstring_to_text_with_len(
                            text.as_ptr().cast(),
                            i32::try_from(text.len()).unwrap_or(i32::MAX),
                        )),
                        None => pg_sys::Datum::from(0usize),
                    })
                    .collect();
                let mut dims = [count];
                let mut lower_bounds = [1];
                pg_sys::Datum::from(pg_sys::construct_md_array(
                    datums.as_mut_ptr(),
                    nulls.as_mut_ptr(),
                    1,
                    dims.as_mut_ptr(),
                    lower_bounds.as_mut_ptr(),
                    pg_sys::TEXTOID,
                    -1,
                    false,
                    pg_sys::TYPALIGN_INT as _,
                ))
            })
        }
    }
}

/// A payload and its size, measured once (see [`payload_bytes`]).
#[derive(Clone, Copy)]
pub struct Payload<'fcx> {
    value: Jsonb<'fcx>,
    bytes: usize,
}

impl<'fcx> Payload<'fcx> {
    pub fn measure(value: Jsonb<'fcx>) -> Payload<'fcx> {
        Payload {
            value,
            bytes: value.size(),
        }
    }

    pub fn value(self) -> Jsonb<'fcx> {
        self.value
    }

    pub fn bytes(self) -> usize {
        self.bytes
    }
}

/// A member's value in an object [`object`] builds: a string, JSON `null`, or a jsonb value as it
/// is.
#[derive(Clone, Copy)]
pub enum Member<'a, 'mcx> {
    String(&'a str),
    Null,
    Value(Jsonb<'mcx>),
}

/// The jsonb object of `members`, in the current memory context: the same value, byte for byte,
/// as `jsonb_build_object` makes of the same keys and values (PostgreSQL's own builder, as that
/// function uses it: `pushJsonbValue`, a jsonb value pushed whole, then `JsonbValueToJsonb`,
/// which sorts the keys as jsonb keeps them). Every member's key is distinct.
///
/// # Safety
/// The current memory context outlives every use of the result; every `Member::Value` is valid.
pub unsafe fn object(members: &[(&str, Member<'_, '_>)]) -> pg_sys::Datum {
    // SAFETY: the caller's; each string pushed is read by pushJsonbValue (which copies nothing
    // but keeps pointers until JsonbValueToJsonb has copied every value into the result), and
    // lives until this function returns; a jsonb value is detoasted (a copy in the current
    // context where it is not already plain) before its container is read.
    unsafe {
        let mut state: *mut pg_sys::JsonbParseState = std::ptr::null_mut();
        crate::pg::raw::pushJsonbValue(
            &mut state,
            pg_sys::JsonbIteratorToken::WJB_BEGIN_OBJECT,
            std::ptr::null_mut(),
        );
        for (key, value) in members {
            let mut key = string_value(key);
            crate::pg::raw::pushJsonbValue(
                &mut state,
                pg_sys::JsonbIteratorToken::WJB_KEY,
                &mut key,
            );
            let mut value = match value {
                Member::String(text) => string_value(text),
                Member::Null => pg_sys::JsonbValue {
                    type_: pg_sys::jbvType::jbvNull,
                    val: std::mem::zeroed(),
                },
                Member::Value(jsonb) => {
                    let plain = crate::pg::raw::pg_detoast_datum(jsonb.datum().cast_mut_ptr())
                        .cast::<pg_sys::Jsonb>();
                    let mut binary: pg_sys::JsonbValue = std::mem::zeroed();
                    binary.type_ = pg_sys::jbvType::jbvBinary;
                    binary.val.binary.data = &raw mut (*plain).root;
                    binary.val.binary.len = pgrx::varsize_any_exhdr(plain.cast()) as i32;
                    binary
                }
            };
            crate::pg::raw::pushJsonbValue(
                &mut state,
                pg_sys::JsonbIteratorToken::WJB_VALUE,
                &mut value,
            );
        }
        let built = crate::pg::raw::pushJsonbValue(
            &mut state,
            pg_sys::JsonbIteratorToken::WJB_END_OBJECT,
            std::ptr::null_mut(),
        );
        pg_sys::Datum::from(crate::pg::raw::JsonbValueToJsonb(built))
    }
}

/// A jsonb string of `text`, pointing into it (valid while `text` is).
fn string_value(text: &str) -> pg_sys::JsonbValue {
    // SAFETY: a zeroed JsonbValue is a valid value of its plain-data union; the string member is
    // then set whole.
    let mut value: pg_sys::JsonbValue = unsafe { std::mem::zeroed() };
    value.type_ = pg_sys::jbvType::jbvString;
    value.val.string = pg_sys::JsonbValue__bindgen_ty_1__bindgen_ty_1 {
        // (a text value is at most 1 GB: its length fits)
        len: i32::try_from(text.len()).unwrap_or_else(|_| {
            crate::pg::boundary::internal(format!("a string of {} bytes", text.len()))
        }),
        val: text.as_ptr().cast_mut().cast(),
    };
    value
}
