//! A map's state row: its lock, and what writers and readers see of it.

use pgrx::pg_sys;

use crate::chunking::CurrentChunk;
use crate::pg::boundary::PgError;
use crate::pg::spi::{Bool, Column, Columns, Int4, Int8, NotNull, Nullable, Session, Text, Tid};
use crate::statements;

/// The state row of a map, as the holder of its lock read it.
#[derive(Debug, Clone)]
pub struct MapState {
    /// The row version read (and locked): later statements of the same call address it directly.
    pub tid: pg_sys::ItemPointerData,
    /// Size given to chunks started from now on.
    pub chunk_size: i32,
    pub current: CurrentChunk,
    /// Token of the newest archived chunk, `None` before the first rollover.
    pub newest_archived_token: Option<String>,
    /// The map's notification channel while its notifications are on.
    pub announce_on: Option<String>,
    /// The oldest sequence the map still holds (1 until chunks are trimmed).
    pub oldest_seq: i64,
    pub retention: Retention,
    /// Whether a consumer of the feed follows the map (see `feed`): its appends record, once
    /// per transaction, that it moved.
    pub followed: bool,
    /// How many of its newest records' ids the map remembers (`None`: every record's it keeps;
    /// see `record_ids`).
    pub id_window: Option<i64>,
    /// Whether the map is a stream of the message store (see `stream`).
    pub message_stream: bool,
}

/// A map's retention policy, as a writer needs it: whether archiving a chunk must look for
/// chunks to remove.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Keep at least the newest this many records.
    pub max_records: Option<i64>,
    /// Remove chunks archived longer ago than the map's `retain_age` (compared in SQL).
    pub by_age: bool,
}

impl Retention {
    pub fn any(self) -> bool {
        self.max_records.is_some() || self.by_age
    }
}

/// Declares the state row as writers read it, each column once: the expression selected (every
/// statement that returns the state selects exactly these, in this order), its type, and the
/// field of [`StateRow`] it decodes to. It makes `state_columns!()` (the select list),
/// [`StateColumns`] (the types) and [`StateRow`] with its decoder.
macro_rules! state_row {
    ($(#[$first_doc:meta])* $first:ident: $first_type:ty = $first_sql:literal,
     $($(#[$doc:meta])* $field:ident: $type:ty = $sql:literal,)*) => {
        /// The select list of the state row, as writers read it (see `state_row!`).
        macro_rules! state_columns {
            () => {
                concat!($first_sql $(, ", ", $sql)*)
            };
        }
        pub(crate) use state_columns;

        /// The types of `state_columns!()`.
        pub type StateColumns = ($first_type, $($type,)*);

        /// The state row as writers read it, column by column.
        pub struct StateRow {
            $(#[$first_doc])*
            pub $first: <$first_type as Column>::Value<'static>,
            $($(#[$doc])* pub $field: <$type as Column>::Value<'static>,)*
        }

        impl StateRow {
            fn decoded(
                ($first, $($field,)*): <StateColumns as Columns>::Row<'static>,
            ) -> StateRow {
                StateRow { $first, $($field,)* }
            }
        }
    };
}

state_row! {
    /// The row version read.
    tid: NotNull<Tid> = "s.ctid",
    chunk_size: NotNull<Int4> = "s.chunk_size",
    current_first_seq: NotNull<Int8> = "s.current_first_seq",
    next_seq: NotNull<Int8> = "s.next_seq",
    current_chunk_size: NotNull<Int4> = "s.current_chunk_size",
    current_bytes: NotNull<Int8> = "s.current_bytes",
    newest_archived_token: Nullable<Text> = "s.newest_archived_token",
    /// The channel, while notifications are on.
    announce_on: Nullable<Text> = "CASE WHEN s.notify THEN s.notify_channel END",
    oldest_seq: NotNull<Int8> = "s.oldest_seq",
    retain_records: Nullable<Int8> = "s.retain_records",
    /// Whether a `retain_age` is set.
    retains_by_age: NotNull<Bool> = "s.retain_age IS NOT NULL",
    followed: NotNull<Bool> = "s.followed",
    /// How many of the newest records' ids the map remembers (`None`: all it keeps).
    id_window: Nullable<Int8> = "s.id_window",
    message_stream: NotNull<Bool> = "s.message_stream",
}

/// A row of [`StateColumns`], decoded: where each column's meaning is given.
pub fn map_state(row: <StateColumns as Columns>::Row<'static>) -> MapState {
    let row = StateRow::decoded(row);
    MapState {
        tid: row.tid,
        chunk_size: row.chunk_size,
        current: CurrentChunk {
            first_seq: row.current_first_seq,
            next_seq: row.next_seq,
            size: row.current_chunk_size,
            bytes: row.current_bytes,
        },
        newest_archived_token: row.newest_archived_token,
        announce_on: row.announce_on,
        oldest_seq: row.oldest_seq,
        retention: Retention {
            max_records: row.retain_records,
            by_age: row.retains_by_age,
        },
        followed: row.followed,
        id_window: row.id_window,
        message_stream: row.message_stream,
    }
}

statements! {
    /// The map's lock, without waiting: a row another transaction holds is skipped (not found).
    /// Under REPEATABLE READ and SERIALIZABLE, PostgreSQL raises 40001 when the row was changed by
    /// a transaction that committed after the snapshot. The lock an UPDATE of the row's other
    /// columns takes (`FOR NO KEY UPDATE`), the one the direct write's update takes: the two ways
    /// of writing hold a map alike.
    pub LOCK_STATE: Statement<(Text,), StateColumns> = write(concat!(
        "SELECT ", state_columns!(), "
         FROM chunked_map.map_state AS s
         WHERE s.map = $1
         FOR NO KEY UPDATE SKIP LOCKED"
    ));

    /// The state row version at `$2`, which this transaction wrote (and so holds the lock of):
    /// read by its address, without an index probe or a walk through the versions the
    /// transaction left behind. No row when that version is not the one its snapshot sees.
    pub STATE_WRITTEN_AT: Statement<(Text, Tid), StateColumns> = write(concat!(
        "SELECT ", state_columns!(), "
         FROM chunked_map.map_state AS s
         WHERE s.ctid = $2 AND s.map = $1"
    ));

    /// The same lock, waiting up to the statement's `lock_timeout` (`chunked_map.lock_timeout`).
    /// Only run after [`LOCK_STATE`] in the same call, so the relation locks it needs are held
    /// already and the only thing it can wait for is the row.
    pub LOCK_STATE_WAIT: Statement<(Text,), StateColumns> = write(concat!(
        "SELECT ", state_columns!(), "
         FROM chunked_map.map_state AS s
         WHERE s.map = $1
         FOR NO KEY UPDATE"
    ));

    /// The map's row held as a DELETE needs it (`FOR UPDATE`), without waiting; no row when it
    /// cannot be. Run by a drop that holds the map already (the lock an UPDATE takes), so only a
    /// key-share lock (`FOR KEY SHARE`, taken by hand: the extension takes none on this table)
    /// can keep it out.
    pub HOLD_FOR_DELETE: Statement<(Text,), (NotNull<Bool>,)> = write(
        "SELECT true FROM chunked_map.map_state AS s WHERE s.map = $1 FOR UPDATE SKIP LOCKED"
    );

    /// Whether the map has a state row, as a writer sees it.
    pub MAP_VISIBLE_TO_WRITER: Statement<(Text,), (NotNull<Int8>,)> = write(
        "SELECT count(*) FROM chunked_map.map_state AS s WHERE s.map = $1"
    );

    /// Whether the map has a state row in the calling statement's snapshot, or (run on the
    /// latest snapshot) committed by now.
    pub MAP_EXISTS: Statement<(Text,), (NotNull<Int8>,)> = read(
        "SELECT count(*) FROM chunked_map.map_state AS s WHERE s.map = $1"
    );

    /// The next sequence of a map as a writer sees it, without its lock, and whether it is a
    /// stream.
    pub NEXT_SEQ_FOR_WRITER: Statement<(Text,), (NotNull<Int8>, NotNull<Bool>)> = write(
        "SELECT s.next_seq, s.message_stream FROM chunked_map.map_state AS s WHERE s.map = $1"
    );

    /// Where a map's records are: `(next_seq, current_first_seq, oldest_seq)`, from its state
    /// row alone.
    pub EXTENT: Statement<(Text,), (NotNull<Int8>, NotNull<Int8>, NotNull<Int8>)> = read(
        "SELECT s.next_seq, s.current_first_seq, s.oldest_seq
         FROM chunked_map.map_state AS s WHERE s.map = $1"
    );
}

/// [`LOCK_STATE`]: `None` when the map has no row this transaction can lock now.
pub fn lock_state(session: &Session, map: &str) -> Option<MapState> {
    session.run(&LOCK_STATE, (map,)).first().map(map_state)
}

/// [`STATE_WRITTEN_AT`].
pub fn state_written_at(
    session: &Session,
    map: &str,
    tid: pg_sys::ItemPointerData,
) -> Option<MapState> {
    session
        .run(&STATE_WRITTEN_AT, (map, tid))
        .first()
        .map(map_state)
}

/// [`LOCK_STATE_WAIT`]: `None` when the row went away while waiting (dropped). A timeout, a
/// deadlock or a cancel while waiting is returned, for the caller to relabel or let go on.
pub fn lock_state_wait(session: &Session, map: &str) -> Result<Option<MapState>, PgError> {
    Ok(session
        .try_run(&LOCK_STATE_WAIT, (map,))?
        .first()
        .map(map_state))
}

/// [`HOLD_FOR_DELETE`]: whether the row is held as a DELETE needs it now.
pub fn hold_for_delete(session: &Session, map: &str) -> bool {
    !session.run(&HOLD_FOR_DELETE, (map,)).is_empty()
}

/// Whether a writer sees a state row of the map.
pub fn visible_to_writer(session: &Session, map: &str) -> bool {
    session
        .run(&MAP_VISIBLE_TO_WRITER, (map,))
        .first()
        .is_some_and(|(count,)| count > 0)
}

/// Whether the map exists in the calling statement's snapshot.
pub fn map_exists(session: &Session, map: &str) -> bool {
    session
        .run(&MAP_EXISTS, (map,))
        .first()
        .is_some_and(|(count,)| count > 0)
}

/// Whether the map exists in the newest committed state.
pub fn map_exists_now(session: &Session, map: &str) -> bool {
    session
        .run_on_latest(&MAP_EXISTS, (map,))
        .first()
        .is_some_and(|(count,)| count > 0)
}

/// [`NEXT_SEQ_FOR_WRITER`]: `(next_seq, message_stream)`, `None` when the map does not exist.
pub fn next_seq_for_writer(session: &Session, map: &str) -> Option<(i64, bool)> {
    session.run(&NEXT_SEQ_FOR_WRITER, (map,)).first()
}

/// Where a map's records are, as a reader sees them.
#[derive(Debug, Clone, Copy)]
pub struct Extent {
    pub next_seq: i64,
    pub current_first_seq: i64,
    pub oldest_seq: i64,
}

/// [`EXTENT`]: `None` when the map does not exist.
pub fn extent(session: &Session, map: &str) -> Option<Extent> {
    session
        .run(&EXTENT, (map,))
        .first()
        .map(|(next_seq, current_first_seq, oldest_seq)| Extent {
            next_seq,
            current_first_seq,
            oldest_seq,
        })
}
