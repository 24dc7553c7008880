//! A message's row of `message_store.message_index`: written directly, through the table's and
//! its indexes' access methods (`pg::insert`, with no statement planned or run), where the
//! record may be written directly (`direct_append::can_write_directly`: not read-only, not in
//! parallel mode, not under Citus, `chunked_map.direct_append` on) and the table is as the store
//! made it; by its statement ([`super::statements::INDEX_MESSAGE`]) otherwise, which is the
//! reference the direct write is compared against (the cluster tests `direct_append::*message*`).
//! The two write the same row: every value is computed here, once, for both.
//!
//! The direct write declines, having written nothing (nor taken the sequence's next), where the
//! statement would do more than write the row and its index entries, or would raise an error
//! the direct write does not (`pg::insert` says which: a trigger, a rule, row security, a CHECK
//! constraint, a deferred check, a NOT NULL column given NULL, a role other than the table's
//! owner or an owner without INSERT), and where the table does not have exactly the columns the
//! store made, or has a default on the one the statement leaves out.
//!
//! It runs as the write's role (`message_store.write_message` is SECURITY DEFINER, and
//! `append_message` the owner's only: the store's owner, the table's; any other role's write
//! takes the statement), with the statement's `search_path` (`statements::SEARCH_PATH`: the
//! functions and operators the functions of an index find); it sees what the statement would
//! (`pg::insert`: the snapshot SPI would give it), and the command counter is advanced after it,
//! so that what follows in the transaction sees the row.

use std::ffi::{c_int, CStr};

use pgrx::pg_sys;

use super::statements;
use crate::direct_append;
use crate::guc;
use crate::pg::boundary::{catching, OrRethrow};
use crate::pg::heap::TableName;
use crate::pg::insert::Insertion;
use crate::pg::raw;

/// A message's row of `message_index`, every value as written.
#[derive(Clone, Copy)]
pub struct IndexRow<'a> {
    pub stream: &'a str,
    /// The message's position in its stream.
    pub position: i64,
    pub message_type: &'a str,
    /// The category of its metadata's `correlationStreamName` ([`super::correlation_category`]).
    pub correlation_category: Option<&'a str>,
    /// Its id, canonical, and the same as a `uuid` datum (valid for the call).
    pub id: &'a str,
    pub uuid: pg_sys::Datum,
    /// Its writer's order key (`order::order_key`), an `xid8`.
    pub key: i64,
    /// Where its record was written, where the append wrote it directly.
    pub record: Option<pg_sys::ItemPointerData>,
}

/// Writes `row`, directly where it can, by its statement otherwise. Its `write_order` is the
/// next of `message_store.write_order`, taken now (after the order key, which the caller took).
pub fn write(row: IndexRow<'_>) {
    if !(direct_append::can_write_directly() && written_directly(row)) {
        statements::index_message(row);
    }
}

/// Whether `row` was written directly; `false`, having written nothing, where it was declined.
/// With the statements' `search_path`, as its statement runs: a function an index's expression
/// or predicate calls, or an operator class's, runs as the store's owner, and must not find a
/// look-alike the caller put on its own path.
fn written_directly(row: IndexRow<'_>) -> bool {
    guc::with_server_setting(c"search_path", crate::statements::SEARCH_PATH, || {
        // SAFETY: only plain values and references cross into the call, which runs inside
        // `catching` and allocates only in the insertion's memory (freed by its close; on an
        // error, with the caller's memory, of which it is a child).
        unsafe { catching(|| insert(row)) }.or_rethrow()
    })
}

thread_local! {
    static MESSAGE_INDEX: TableName = const {
        TableName::without_triggers(c"message_store", c"message_index")
    };
}

/// The columns of `message_index`, by name and type, in the order `insert` gives their values.
const COLUMNS: [(&CStr, pg_sys::Oid); 9] = [
    (c"stream_name", pg_sys::TEXTOID),
    (c"position", pg_sys::INT8OID),
    (c"type", pg_sys::TEXTOID),
    (c"correlation_category", pg_sys::TEXTOID),
    (c"id", pg_sys::UUIDOID),
    (c"writer", pg_sys::XID8OID),
    (c"write_order", pg_sys::INT8OID),
    (c"global_position", pg_sys::INT8OID),
    (c"record", pg_sys::TIDOID),
];

/// The most columns (dropped ones included) the direct write fills.
const MAX_COLUMNS: usize = 32;

/// # Safety
/// In a transaction, inside `catching`.
unsafe fn insert(row: IndexRow<'_>) -> bool {
    // SAFETY: (for the whole function) the insertion opened here and closed before returning;
    // the values are datums of the columns' types, made in the insertion's memory (texts,
    // the sequence's value) or living for the call (the id's uuid, the record's address on this
    // frame), read by the insert before it returns.
    unsafe {
        let Some(table) = MESSAGE_INDEX.with(|named| Insertion::open(named)) else {
            return false;
        };
        let written = column_numbers(table).is_some_and(|numbers| {
            let Some(write_order) = write_order_sequence() else {
                return false;
            };
            let (Some(stream), Some(message_type)) = (text(row.stream), text(row.message_type))
            else {
                return false;
            };
            let correlation_category = match row.correlation_category {
                Some(category) => match text(category) {
                    Some(category) => Some(category),
                    None => return false,
                },
                None => None,
            };
            let mut record = row.record;
            let given: [Option<pg_sys::Datum>; 9] = [
                Some(stream),
                Some(pg_sys::Datum::from(row.position)),
                Some(message_type),
                correlation_category,
                Some(row.uuid),
                Some(pg_sys::Datum::from(row.key)),
                // the sequence's next, taken below once the row is known to be taken
                Some(pg_sys::Datum::from(0i64)),
                None,
                record
                    .as_mut()
                    .map(|address| pg_sys::Datum::from(std::ptr::from_mut(address))),
            ];
            let mut values = [pg_sys::Datum::from(0usize); MAX_COLUMNS];
            let mut nulls = [true; MAX_COLUMNS];
            for (number, value) in numbers.into_iter().zip(given) {
                if let Some(value) = value {
                    values[number] = value;
                    nulls[number] = false;
                }
            }
            let columns = table.columns();
            // declined before the sequence moves: the statement takes its value once
            if !table.takes(&nulls[..columns]) {
                return false;
            }
            values[numbers[WRITE_ORDER]] = raw::DirectFunctionCall1Coll(
                Some(raw::nextval_oid),
                pg_sys::InvalidOid,
                pg_sys::Datum::from(write_order),
            );
            table
                .insert(&values[..columns], &nulls[..columns])
                .is_some()
        });
        table.close();
        if written {
            raw::CommandCounterIncrement();
        }
        written
    }
}

/// The one of [`COLUMNS`] the sequence gives.
const WRITE_ORDER: usize = 6;

/// The one of [`COLUMNS`] the statement leaves out, to its default (none, as the store made it).
const LEFT_OUT: usize = 7;

/// Where each of [`COLUMNS`] is in the table (from 0), `None` unless the table has those
/// columns, of those types, and no other, and the one the statement leaves out has no default.
fn column_numbers(table: Insertion) -> Option<[usize; 9]> {
    if table.live_columns() != COLUMNS.len() || table.columns() > MAX_COLUMNS {
        return None;
    }
    let mut numbers = [0usize; 9];
    for (i, (name, type_oid)) in COLUMNS.into_iter().enumerate() {
        let column = table.column(name, type_oid)?;
        if i == LEFT_OUT && table.has_default(column) {
            return None;
        }
        numbers[i] = usize::try_from(column).ok()?.checked_sub(1)?;
    }
    Some(numbers)
}

/// The OID of `message_store.write_order`, `None` when there is none.
///
/// # Safety
/// In a transaction, inside `catching`.
unsafe fn write_order_sequence() -> Option<pg_sys::Oid> {
    // SAFETY: catalog lookups by name, which raise nothing when missing (missing_ok).
    unsafe {
        let namespace = raw::get_namespace_oid(c"message_store".as_ptr(), true);
        if namespace == pg_sys::InvalidOid {
            return None;
        }
        let sequence = raw::get_relname_relid(c"write_order".as_ptr(), namespace);
        (sequence != pg_sys::InvalidOid).then_some(sequence)
    }
}

/// `value` as a `text` datum, in the current memory context; `None` where it is longer than a
/// text holds.
///
/// # Safety
/// In a transaction, inside `catching`.
unsafe fn text(value: &str) -> Option<pg_sys::Datum> {
    let len = c_int::try_from(value.len()).ok()?;
    // SAFETY: copies `len` bytes of `value` into a new text.
    let text = unsafe { raw::cstring_to_text_with_len(value.as_ptr().cast(), len) };
    Some(pg_sys::Datum::from(text))
}
