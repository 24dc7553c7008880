//! One record written directly: the map's state row locked without waiting (as `FOR NO KEY
//! UPDATE SKIP LOCKED` locks it), then advanced by an update, and the record inserted through
//! PostgreSQL's table and index access methods
//! (`pg::heap`), with no statement planned or run. One of the two ways a record is written
//! (`append` says which is taken); the other, the SQL write (`statements::writes::write_record`),
//! is the reference it is compared against (the differential test).
//!
//! It does what the lock and the SQL write do together, and reports, with the row locked, what
//! the caller must handle first: a full chunk (archived by SQL, then this write again) or a
//! newest sequence other than the one expected. It declines, having written nothing, where the
//! caller must take the lock by SQL (which waits or says why it cannot): the map is absent,
//! held by another transaction, or changed since the snapshot, or it does not take the record (a
//! message and a map of other records, or another record and a stream: `stream`; the append
//! raises the refusal under the lock); and where the write must be SQL's:
//! its numbers would overflow, the tables are distributed (Citus), the transaction is read-only
//! or in parallel mode, or the storage tables are not as the extension made them
//! (`pg::heap::Table::open`). Setting `chunked_map.direct_append` off sends every record
//! through SQL.
//!
//! What it sees is what the statement would: the command counter is advanced before (earlier
//! writes of the transaction are visible) and after (its own are, to what follows), and the
//! snapshot is the one SPI would give the statement (a new one under READ COMMITTED, the
//! transaction's otherwise). It runs as the function's role (the tables' owner: the API
//! functions are SECURITY DEFINER; it declines for any other role), which the tables'
//! statement-level trigger lets through, so the trigger is not fired.
//!
//! Memory: everything it allocates lives in one context of its own, a child of
//! TopMemoryContext, reset before and after every call: nothing outlives the call but the
//! sequence and address it returns (plain numbers).

use std::cell::Cell;
use std::ffi::{c_char, c_int};

use pgrx::pg_sys;

use crate::chunking::CurrentChunk;
use crate::citus;
use crate::guc;
use crate::pg::boundary::catching;
use crate::pg::heap::{self, Locked, Table, TableName};
use crate::pg::raw;
use crate::statements::writes::NewRecord;
use crate::stream::{self, Admission};

/// A record written directly: its sequence, the state row's new address, the record's address,
/// whether a consumer of the feed follows the map (the caller records its move, once per
/// transaction) and whether its appends are announced (the caller reads the channel).
#[derive(Clone, Copy)]
pub struct Appended {
    pub seq: i64,
    pub tid: pg_sys::ItemPointerData,
    pub record: pg_sys::ItemPointerData,
    pub followed: bool,
    pub announced: bool,
}

/// What the direct write did.
#[derive(Clone, Copy)]
pub enum Outcome {
    Appended(Appended),
    /// The map's state row is locked by this transaction now, and the map's newest sequence
    /// is not the one the caller expected: nothing was written.
    NotAsExpected {
        actual: i64,
    },
    /// The map's state row is locked by this transaction now, and its current chunk is full:
    /// the caller archives it (`append::make_room`), then writes again.
    Full,
    /// Declined (see the module's description): the caller takes the map's lock by SQL (which
    /// waits, or says why it cannot) and writes by SQL where this cannot.
    Declined,
}

/// Writes one record directly. `at`: the address of the state row version this transaction
/// last wrote, if it remembers it; `expected_last_seq`: write only if the map's newest sequence
/// is this.
pub fn write(
    map: &str,
    record: NewRecord<'_>,
    max_chunk_bytes: usize,
    at: Option<pg_sys::ItemPointerData>,
    expected_last_seq: Option<i64>,
) -> Outcome {
    let Ok(map_len) = c_int::try_from(map.len()) else {
        return Outcome::Declined;
    };
    let id = match record.id {
        Some(id) => match c_int::try_from(id.len()) {
            Ok(len) => Some((id.as_ptr().cast(), len)),
            Err(_) => return Outcome::Declined,
        },
        None => None,
    };
    if !can_write_directly() {
        return Outcome::Declined;
    }
    let request = Request {
        map: map.as_ptr().cast(),
        map_len,
        payload: record.payload.value().datum(),
        bytes: record.payload.bytes(),
        appended_at: record.at,
        id,
        message: record.message,
        limit: max_chunk_bytes,
        at,
        expected_last_seq,
    };
    let memory = own_memory();
    // SAFETY: the call runs inside `catching` with only plain values in its frames; it switches
    // to the module's own memory context and back (`catching` restores the caller's on an
    // error), which is reset here once the call is over, when nothing points into it.
    let appended = unsafe {
        pg_sys::MemoryContextReset(memory);
        let outcome = catching(move || {
            let caller = pg_sys::CurrentMemoryContext;
            pg_sys::CurrentMemoryContext = memory;
            let appended = attempt(request);
            pg_sys::CurrentMemoryContext = caller;
            appended
        });
        pg_sys::MemoryContextReset(memory);
        outcome
    };
    appended.unwrap_or_else(|error| error.rethrow())
}

/// What the direct path cannot do, by its nature: write distributed tables (Citus routes
/// statements), or write at all where the statement would be refused (a read-only transaction,
/// a standby, parallel mode: the SQL path raises PostgreSQL's error).
pub fn can_write_directly() -> bool {
    // SAFETY: backend globals and a state query that raises nothing.
    let writable = unsafe { !pg_sys::XactReadOnly && !pg_sys::IsInParallelMode() };
    writable && guc::direct_append() && !citus::is_loaded()
}

/// The append's arguments as plain values (the map's bytes and the payload's datum live in the
/// caller's memory for the whole call).
#[derive(Clone, Copy)]
struct Request {
    map: *const c_char,
    map_len: c_int,
    payload: pg_sys::Datum,
    bytes: usize,
    /// The record's time (a `timestamptz`).
    appended_at: i64,
    /// The record's id: its bytes (valid for the call) and length.
    id: Option<(*const c_char, c_int)>,
    /// Whether the record is a message (`stream`).
    message: bool,
    limit: usize,
    at: Option<pg_sys::ItemPointerData>,
    expected_last_seq: Option<i64>,
}

/// The column numbers the append reads and writes.
#[derive(Clone, Copy)]
struct Columns {
    map: c_int,
    current_first_seq: c_int,
    current_chunk_size: c_int,
    next_seq: c_int,
    current_bytes: c_int,
    notify: c_int,
    followed: c_int,
    message_stream: c_int,
    record_map: c_int,
    record_seq: c_int,
    record_payload: c_int,
    record_at: c_int,
    record_id: c_int,
}

/// The columns of `current_record`: map, seq, payload, at, id.
const RECORD_COLUMNS: usize = 5;

/// The most columns of `map_state` the append reads (dropped ones included): 15 at 0.4.0.
const MAX_STATE_COLUMNS: usize = 64;

/// # Safety
/// Inside `catching`, in the module's memory context.
unsafe fn attempt(request: Request) -> Outcome {
    // SAFETY: (for the whole function) the storage tables opened, written and closed in this
    // transaction; the snapshot registered here is unregistered before returning (or by the
    // resource owner when an error aborts the transaction), as is the slot's buffer pin.
    unsafe {
        let Some(state) = MAP_STATE.with(|named| Table::open(named, pg_sys::CmdType::CMD_UPDATE))
        else {
            return Outcome::Declined;
        };
        let Some(record) =
            CURRENT_RECORD.with(|named| Table::open(named, pg_sys::CmdType::CMD_INSERT))
        else {
            state.close();
            return Outcome::Declined;
        };
        let outcome = columns(state, record).map_or(Outcome::Declined, |columns| {
            raw::CommandCounterIncrement();
            let snapshot = raw::RegisterSnapshot(raw::GetTransactionSnapshot());
            // as SPI's UpdateActiveSnapshotCommandId: the statement sees the commands before it
            // (a copy gets the current command here; under REPEATABLE READ the registered
            // snapshot may be the transaction's own, whose command CommandCounterIncrement has
            // just set to this same value)
            (*snapshot).curcid = raw::GetCurrentCommandId(false);
            let slot = state.slot();
            let outcome = advance(state, record, columns, snapshot, slot, request)
                .unwrap_or(Outcome::Declined);
            heap::drop_slot(slot);
            raw::UnregisterSnapshot(snapshot);
            if matches!(outcome, Outcome::Appended(_)) {
                raw::CommandCounterIncrement();
            }
            outcome
        });
        record.close();
        state.close();
        outcome
    }
}

/// The columns, when both tables have them with the types the extension gave them.
fn columns(state: Table, record: Table) -> Option<Columns> {
    use pg_sys::{BOOLOID, INT4OID, INT8OID, JSONBOID, TEXTOID, TIMESTAMPTZOID};
    if state.columns() > MAX_STATE_COLUMNS || record.columns() != RECORD_COLUMNS {
        return None;
    }
    let map = state.column(c"map", TEXTOID)?;
    // the state row is found by its map, through the primary key
    if state.key_column() != Some(map) {
        return None;
    }
    Some(Columns {
        map,
        current_first_seq: state.column(c"current_first_seq", INT8OID)?,
        current_chunk_size: state.column(c"current_chunk_size", INT4OID)?,
        next_seq: state.column(c"next_seq", INT8OID)?,
        current_bytes: state.column(c"current_bytes", INT8OID)?,
        notify: state.column(c"notify", BOOLOID)?,
        followed: state.column(c"followed", BOOLOID)?,
        message_stream: state.column(c"message_stream", BOOLOID)?,
        record_map: record.column(c"map", TEXTOID)?,
        record_seq: record.column(c"seq", INT8OID)?,
        record_payload: record.column(c"payload", JSONBOID)?,
        record_at: record.column(c"at", TIMESTAMPTZOID)?,
        record_id: record.column(c"id", TEXTOID)?,
    })
}

/// Finds the state row (by its remembered address, or by the map's key, then locks it, never
/// waiting), checks what the SQL append's WHERE clause checks, advances the row by an update
/// and inserts the record; `None` declines, having written nothing (a row found by its key may
/// be locked by then: the lock the SQL path takes next). What the caller handles under the
/// lock (`NotAsExpected`, `Full`) is reported with the row held.
///
/// # Safety
/// Inside `catching`; the tables open; `snapshot` registered; `slot` made by `state.slot()`.
unsafe fn advance(
    state: Table,
    record: Table,
    columns: Columns,
    snapshot: pg_sys::Snapshot,
    slot: *mut pg_sys::TupleTableSlot,
    request: Request,
) -> Option<Outcome> {
    // SAFETY: (for the whole function) the map's bytes are valid for the call (Request); the
    // text made of them and the tuples live in the module's memory context; the row read is in
    // the slot, whose buffer stays pinned until the slot is dropped.
    unsafe {
        let map = pg_sys::Datum::from(raw::cstring_to_text_with_len(request.map, request.map_len));
        // the version the snapshot sees, held by this transaction
        match request.at {
            // a version this transaction wrote (so holds the lock on), if it is still the one
            // the snapshot sees
            Some(tid) => {
                if !state.fetch(tid, snapshot, slot) {
                    return None;
                }
            }
            // found by its key, then locked as `FOR NO KEY UPDATE SKIP LOCKED` locks it: at once,
            // writing nothing, where this transaction holds it already (its own `SELECT … FOR
            // NO KEY UPDATE`, as `write_message` with an expected version takes); where another
            // does (but for a key share, which the update does not conflict with), or changed
            // it after the snapshot, not at all: the append takes the lock by SQL. (Not the
            // update alone, not waiting: heap_update must never meet another's lock unless it
            // waits for it, which PostgreSQL asserts.)
            None => {
                state.find(pg_sys::Oid::from(pg_sys::F_TEXTEQ), map, snapshot, slot)?;
                if state.lock((*slot).tts_tid, snapshot, slot) != Locked::It {
                    return None;
                }
            }
        }
        let mut values = [pg_sys::Datum::from(0usize); MAX_STATE_COLUMNS];
        let mut nulls = [true; MAX_STATE_COLUMNS];
        state.read(slot, &mut values, &mut nulls);
        // a column number `columns` found in the table, within the row read (or the append
        // declines)
        let column = |n: c_int| {
            let i = usize::try_from(n.checked_sub(1)?).ok()?;
            (!*nulls.get(i)?).then(|| values[i])
        };
        let int8 = |n| column(n).map(|datum| datum.value() as i64);
        let chunk = CurrentChunk {
            first_seq: int8(columns.current_first_seq)?,
            next_seq: int8(columns.next_seq)?,
            size: column(columns.current_chunk_size).map(|datum| datum.value() as i32)?,
            bytes: int8(columns.current_bytes)?,
        };
        let notify = column(columns.notify)?.value() != 0;
        let followed = column(columns.followed)?.value() != 0;
        if request.at.is_some() && !same_text(column(columns.map)?, request) {
            return None;
        }
        let next_seq = chunk.next_seq;
        // a refusal is raised by the append, under the lock taken by SQL
        let makes_stream = match stream::admission(
            column(columns.message_stream)?.value() != 0,
            next_seq,
            request.message,
        ) {
            Admission::Admitted => false,
            Admission::MakesStream => true,
            Admission::HoldsOtherRecords | Admission::IsStream => return None,
        };
        if let Some(expected) = request.expected_last_seq {
            if expected != next_seq - 1 {
                return Some(Outcome::NotAsExpected {
                    actual: next_seq - 1,
                });
            }
        }
        if !chunk.fits(request.bytes, request.limit) {
            return Some(Outcome::Full);
        }
        let new_bytes = chunk
            .bytes
            .checked_add(i64::try_from(request.bytes).ok()?)?;
        let after = next_seq.checked_add(1)?;
        let (after, new_bytes) = (pg_sys::Datum::from(after), pg_sys::Datum::from(new_bytes));
        let tid = if makes_stream {
            state.update(
                slot,
                [
                    columns.next_seq,
                    columns.current_bytes,
                    columns.message_stream,
                ],
                [after, new_bytes, pg_sys::Datum::from(true)],
            )?
        } else {
            state.update(
                slot,
                [columns.next_seq, columns.current_bytes],
                [after, new_bytes],
            )?
        };
        let mut row = [pg_sys::Datum::from(0usize); RECORD_COLUMNS];
        let mut nulls = [false; RECORD_COLUMNS];
        // `columns` checked that the record table has exactly these columns
        let mut set = |n: c_int, value: Option<pg_sys::Datum>| {
            if let Some(i) = usize::try_from(n - 1).ok().filter(|i| *i < RECORD_COLUMNS) {
                row[i] = value.unwrap_or(pg_sys::Datum::from(0usize));
                nulls[i] = value.is_none();
            }
        };
        set(columns.record_map, Some(map));
        set(columns.record_seq, Some(pg_sys::Datum::from(next_seq)));
        // stored as the SQL path stores it: the value itself, compressed (or moved out of
        // line) by the column's own method, whatever form the caller's datum had
        set(
            columns.record_payload,
            Some(pg_sys::Datum::from(raw::pg_detoast_datum(
                request.payload.cast_mut_ptr::<pg_sys::varlena>(),
            ))),
        );
        set(
            columns.record_at,
            Some(pg_sys::Datum::from(request.appended_at)),
        );
        set(
            columns.record_id,
            request
                .id
                .map(|(id, len)| pg_sys::Datum::from(raw::cstring_to_text_with_len(id, len))),
        );
        let record = record.insert(&row, &nulls);
        Some(Outcome::Appended(Appended {
            seq: next_seq,
            tid,
            record,
            followed,
            announced: notify,
        }))
    }
}

/// Whether the text datum `stored` is the request's map name (a short name stored inline, as
/// every map name is; anything else is not the same here, and the SQL path decides).
///
/// # Safety
/// `stored` is a text datum read from a pinned row.
unsafe fn same_text(stored: pg_sys::Datum, request: Request) -> bool {
    use pgrx::varlena::{varatt_is_1b_e, varatt_is_4b_c, vardata_any, varsize_any_exhdr};
    // SAFETY: a varlena in the pinned row; its header says how it is stored, and only an inline,
    // uncompressed one is read, within its length (pgrx's readers of the header, no PostgreSQL
    // call); the request's bytes are valid for the call.
    unsafe {
        let stored = stored.cast_mut_ptr::<pg_sys::varlena>();
        if varatt_is_1b_e(stored) || varatt_is_4b_c(stored) {
            return false;
        }
        let len = varsize_any_exhdr(stored);
        let Ok(expected) = usize::try_from(request.map_len) else {
            return false;
        };
        len == expected
            && std::slice::from_raw_parts(vardata_any(stored).cast::<u8>(), len)
                == std::slice::from_raw_parts(request.map.cast::<u8>(), expected)
    }
}

thread_local! {
    static MAP_STATE: TableName = const {
        TableName::new(
            c"chunked_map",
            c"map_state",
            c"map_state_is_kept",
            c"chunked_forbid_rewrite",
        )
    };
    static CURRENT_RECORD: TableName = const {
        TableName::new(
            c"chunked_map",
            c"current_record",
            c"current_record_is_append_only",
            c"chunked_forbid_rewrite",
        )
    };
    /// The module's memory context, made on first use.
    static OWN_MEMORY: Cell<pg_sys::MemoryContext> = const { Cell::new(std::ptr::null_mut()) };
}

fn own_memory() -> pg_sys::MemoryContext {
    OWN_MEMORY.with(|memory| {
        if memory.get().is_null() {
            // SAFETY: a context under TopMemoryContext, which lasts as long as the backend;
            // ALLOCSET_DEFAULT_SIZES.
            let made = unsafe {
                pg_sys::AllocSetContextCreateInternal(
                    pg_sys::TopMemoryContext,
                    c"chunked_map direct append".as_ptr(),
                    0,
                    8 * 1024,
                    8 * 1024 * 1024,
                )
            };
            memory.set(made);
        }
        memory.get()
    })
}
