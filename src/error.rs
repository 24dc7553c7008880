//! Every failure the extension reports, and the one place each becomes a SQLSTATE, a message, a
//! detail and a hint. The README's error table has a row for each variant (grouped by SQLSTATE,
//! not in this order), and rows for what PostgreSQL or the install script raises itself. Raising one unwinds to the function PostgreSQL called
//! (`pg::boundary`), which reports it.
//!
//! Errors PostgreSQL raises itself while a function runs (a serialization failure under
//! REPEATABLE READ or SERIALIZABLE, a relation lock timeout, a unique violation from a forged
//! row) reach the caller unchanged, with PostgreSQL's own SQLSTATE and message: the extension
//! relabels nothing it did not detect itself.

use std::ops::RangeInclusive;

use pgrx::PgSqlErrorCode;

use crate::pg::boundary::{Failure, Report};
use crate::token::{self, TOKEN_DIGITS};

/// Why an append could not take a map's lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// Another transaction holds it now (the default: never wait).
    Now,
    /// It stayed held for all of `chunked_map.lock_timeout`, in milliseconds.
    For(i32),
    /// Waiting for it would have deadlocked (only possible while waiting).
    Deadlock,
    /// Another transaction is starting or dropping a map of that name.
    StartOrDrop,
}

/// Which setting limits a payload's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadLimit {
    MaxPayloadBytes,
    MaxChunkBytes,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChunkedError {
    /// Another open transaction holds the map's lock.
    #[error("map \"{map}\" is locked by a concurrent append")]
    Locked { map: String, held: Held },

    /// (0.4.1) A start while another transaction subscribes or unsubscribes a consumer of the
    /// feed (the feed's lock): held now, or for all of `chunked_map.lock_timeout`.
    #[error("map \"{map}\" cannot be started while another transaction subscribes or unsubscribes a consumer of the feed")]
    StartWhileSubscribing { map: String, held: Held },

    /// REPEATABLE READ or SERIALIZABLE: the map was started, dropped or restarted by a
    /// transaction that committed after this transaction's snapshot.
    #[error("map \"{map}\" was started or dropped by a transaction that committed after this transaction's snapshot")]
    ChangedAfterSnapshot { map: String },

    /// An optimistic append found another newest sequence than the caller expected.
    #[error("map \"{map}\" has newest sequence {actual}, expected {expected}")]
    UnexpectedLastSeq {
        map: String,
        expected: i64,
        actual: i64,
    },

    /// (0.5) A message (`chunked_register_with_id`) to a map that holds, or held, records other
    /// appends wrote (`stream`).
    #[error("map \"{map}\" holds records that are not messages")]
    HoldsOtherRecords { map: String },

    /// (0.5) Another append to a stream of the message store (`stream`).
    #[error("map \"{map}\" is a stream of the message store")]
    IsStream { map: String },

    #[error("map \"{map}\" does not exist")]
    MapNotStarted { map: String },

    #[error("invalid page token {}", token::quoted(.token))]
    MalformedToken { token: String },

    #[error("page token \"{token}\" names no archived chunk of map \"{map}\"")]
    UnknownToken { map: String, token: String },

    #[error("map \"{map}\" has no record with sequence {seq}")]
    UnknownSeq { map: String, seq: i64 },

    /// (0.5) `chunked_get_by_id` of an id the map does not remember (never given, outside its
    /// id window, or its record removed).
    #[error("map \"{map}\" remembers no record with id {}", token::quoted(.id))]
    UnknownId { map: String, id: String },

    /// (0.4) A page token of a chunk that `chunked_trim` or the map's retention removed (or any
    /// token before the oldest kept sequence).
    #[error("page token \"{token}\" of map \"{map}\" names a trimmed chunk: the oldest sequence kept is {oldest_seq}")]
    TrimmedToken {
        map: String,
        token: String,
        oldest_seq: i64,
    },

    /// (0.4) A record that `chunked_trim` or the map's retention removed.
    #[error("record {seq} of map \"{map}\" was trimmed: the oldest sequence kept is {oldest_seq}")]
    TrimmedSeq {
        map: String,
        seq: i64,
        oldest_seq: i64,
    },

    #[error("argument \"{argument}\" must not be null")]
    NullArgument { argument: &'static str },

    #[error("argument \"{argument}\" must not contain null (element {index})")]
    NullElement {
        argument: &'static str,
        index: usize,
    },

    #[error("map name must be 1 to {max} bytes long, got {bytes} bytes")]
    InvalidMapName { bytes: usize, max: usize },

    #[error("chunk_size must be between {} and {}, got {value}", .range.start(), .range.end())]
    ChunkSizeOutOfRange {
        value: i32,
        range: RangeInclusive<i32>,
    },

    #[error("after_seq must be 0 or more, got {value}")]
    NegativeAfterSeq { value: i64 },

    #[error("max_records must be between {} and {}, got {value}", .range.start(), .range.end())]
    MaxRecordsOutOfRange {
        value: i32,
        range: RangeInclusive<i32>,
    },

    #[error("max_records must be 1 or more (NULL: no limit), got {value}")]
    InvalidRetainedRecords { value: i64 },

    #[error("max_age must be a positive interval (NULL: no limit)")]
    InvalidRetainedAge,

    /// (0.5) A record's time given by its writer is a finite time of the common era: what a
    /// page prints as `YYYY-MM-DDTHH:MI:SS.USZ` and retention can subtract from now.
    #[error("at must be a finite time from 0001-01-01 00:00:00 UTC on")]
    InvalidTime,

    /// (0.5) A record id is 1 to `max` bytes.
    #[error("id must be 1 to {max} bytes long, got {bytes} bytes")]
    InvalidId { bytes: usize, max: usize },

    /// (0.5) An id of `chunked_register_many_once`'s `ids` that is not 1 to `max` bytes: its
    /// position in the array, counted from 1 (as `NullElement`, whatever the array's bounds).
    #[error("ids element {index} must be 1 to {max} bytes long, got {bytes} bytes")]
    InvalidIdElement {
        index: usize,
        bytes: usize,
        max: usize,
    },

    /// (0.5) `chunked_register_many_once`: one id (or NULL) per payload.
    #[error("ids must have one element per payload: {payloads} payloads, {ids} ids")]
    IdsDoNotMatchPayloads { payloads: usize, ids: usize },

    /// (0.5) How many records' ids a map remembers.
    #[error("max_records must be 1 or more (NULL: every record the map keeps), got {value}")]
    InvalidIdWindow { value: i64 },

    #[error("payload of {bytes} bytes exceeds the limit of {limit} bytes")]
    PayloadTooLarge {
        bytes: usize,
        limit: usize,
        setting: PayloadLimit,
    },

    /// Direct DML on stored history by a role that does not own the extension's tables.
    #[error("{operation} on {table} is not allowed: chunked_map history is append-only")]
    HistoryIsImmutable {
        operation: &'static str,
        table: String,
    },

    /// PostgreSQL cannot send notifications from a prepared (two-phase) transaction.
    #[error("cannot PREPARE a transaction that appended to a map whose notifications are on")]
    NotifyInPreparedTransaction,

    /// (0.4) Polling or removing a consumer that does not exist.
    #[error("consumer \"{consumer}\" does not exist")]
    ConsumerNotFound { consumer: String },

    /// (0.4) Subscribing or unsubscribing while a map is being started or another consumer
    /// subscribed (the feed's lock).
    #[error("consumer \"{consumer}\" cannot be subscribed or unsubscribed while another transaction starts a map or changes a subscription")]
    FeedBusy { consumer: String },

    #[error("consumer name must be 1 to {max} bytes long, got {bytes} bytes")]
    InvalidConsumerName { bytes: usize, max: usize },

    /// A category is what comes before a map name's first `-`: it has none itself.
    #[error(
        "category must be 1 to {max} bytes long without \"-\" (NULL: every map), got {category}"
    )]
    InvalidCategory { category: String, max: usize },

    #[error("group_size must be between {} and {}, got {value}", .range.start(), .range.end())]
    GroupSizeOutOfRange {
        value: i32,
        range: RangeInclusive<i32>,
    },

    #[error("member must be between 0 and {} (group_size - 1), got {member}", .group_size - 1)]
    MemberOutOfRange { member: i32, group_size: i32 },

    /// (0.5) On a Citus cluster the feed's consumers live on the coordinator: a worker cannot
    /// subscribe, poll or unsubscribe.
    #[error("on a Citus cluster the feed (chunked_subscribe, chunked_poll, chunked_unsubscribe) runs on the coordinator only")]
    FeedOffCoordinator,

    /// `chunked_distribute` where Citus is not there to distribute to.
    #[error("chunked_distribute needs Citus: {what}")]
    CitusMissing { what: String },

    /// `chunked_distribute` on nodes that do not load the library ahead of planning.
    #[error("chunked_distribute needs chunked_map in shared_preload_libraries (after citus) on every node: {nodes}")]
    NotPreloaded { nodes: String },

    /// (0.5) `chunked_distribute` where the message store is installed: it numbers messages on
    /// one node, and does not run on distributed maps (docs/citus.md).
    #[error("chunked_distribute cannot distribute the maps of a database with the message store (extension chunked_map_message_store) on {nodes}")]
    MessageStoreInstalled { nodes: String },

    /// (0.5) On a Citus cluster, a storage table an update added is not distributed yet.
    #[error("chunked_map's storage table {table} is not distributed, while the others are")]
    StoragePartlyDistributed { table: String },

    /// The library was upgraded but the database's SQL objects were not.
    #[error("chunked_map's library is version {library}, but its SQL objects in this database are version {installed}")]
    OutdatedSqlObjects { library: String, installed: String },

    /// Something the extension's own statements should never meet.
    #[error("chunked_map: {context}")]
    Internal { context: String },
}

impl ChunkedError {
    pub fn sqlstate(&self) -> PgSqlErrorCode {
        use ChunkedError::*;
        match self {
            Locked { .. }
            | StartWhileSubscribing { .. }
            | ChangedAfterSnapshot { .. }
            | FeedBusy { .. } => PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE,
            UnexpectedLastSeq { .. } => PgSqlErrorCode::ERRCODE_INTEGRITY_CONSTRAINT_VIOLATION,
            // a stream and another map are two kinds of map (23000 stays the mismatch's own)
            HoldsOtherRecords { .. } | IsStream { .. } => PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE,
            MapNotStarted { .. }
            | UnknownToken { .. }
            | UnknownSeq { .. }
            | TrimmedToken { .. }
            | TrimmedSeq { .. }
            | UnknownId { .. }
            | ConsumerNotFound { .. } => PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT,
            MalformedToken { .. }
            | InvalidMapName { .. }
            | ChunkSizeOutOfRange { .. }
            | NegativeAfterSeq { .. }
            | MaxRecordsOutOfRange { .. }
            | InvalidRetainedRecords { .. }
            | InvalidRetainedAge
            | InvalidTime
            | InvalidId { .. }
            | InvalidIdElement { .. }
            | IdsDoNotMatchPayloads { .. }
            | InvalidIdWindow { .. }
            | InvalidConsumerName { .. }
            | InvalidCategory { .. }
            | GroupSizeOutOfRange { .. }
            | MemberOutOfRange { .. } => PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            NullArgument { .. } | NullElement { .. } => {
                PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED
            }
            PayloadTooLarge { .. } => PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            HistoryIsImmutable { .. } => PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            NotifyInPreparedTransaction | FeedOffCoordinator | MessageStoreInstalled { .. } => {
                PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED
            }
            CitusMissing { .. }
            | NotPreloaded { .. }
            | OutdatedSqlObjects { .. }
            | StoragePartlyDistributed { .. } => {
                PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
            }
            Internal { .. } => PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
        }
    }

    pub fn detail(&self) -> Option<String> {
        use ChunkedError::*;
        match self {
            Locked { held, .. } => Some(match held {
                Held::Now => "Another open transaction is writing to this map; writes to one map are serialized.".into(),
                Held::For(ms) => format!("It stayed locked for chunked_map.lock_timeout ({ms} ms)."),
                Held::Deadlock => "Waiting for it would have deadlocked with another transaction.".into(),
                Held::StartOrDrop => "Another open transaction is starting or dropping a map of this name.".into(),
            }),
            StartWhileSubscribing { held, .. } => Some(match held {
                Held::For(ms) => format!("The feed stayed locked for chunked_map.lock_timeout ({ms} ms)."),
                Held::Deadlock => "Waiting for the feed would have deadlocked with another transaction.".into(),
                Held::Now | Held::StartOrDrop => "Another open transaction is subscribing or unsubscribing a consumer of the feed; maps are started once it ends.".into(),
            }),
            MalformedToken { .. } => Some(format!(
                "A page token is \"current\" or exactly {TOKEN_DIGITS} ASCII decimal digits."
            )),
            HistoryIsImmutable { .. } => Some(
                "Only the owner of the extension's tables may change them directly; use the chunked_map functions."
                    .into(),
            ),
            _ => None,
        }
    }

    pub fn hint(&self) -> Option<String> {
        use ChunkedError::*;
        match self {
            Locked { .. }
            | StartWhileSubscribing { .. }
            | ChangedAfterSnapshot { .. }
            | FeedBusy { .. } => Some("Retry the transaction.".into()),
            UnexpectedLastSeq { .. } => Some(
                "Retrying the same call cannot succeed: read the map again (chunked_info) and decide, or skip the append if it already happened."
                    .into(),
            ),
            HoldsOtherRecords { .. } => Some(
                "A stream of the message store is a map only write_message appends to.".into(),
            ),
            IsStream { .. } => Some(
                "Its messages are written by message_store.write_message only; read it with either extension's functions.".into(),
            ),
            MapNotStarted { map } => Some(format!(
                "Call chunked_map.chunked_start('{}') first.",
                map.replace('\'', "''")
            )),
            UnknownToken { .. } => Some(
                "Start from 'current' and follow next_page_token; tokens are the first sequence of an archived chunk."
                    .into(),
            ),
            TrimmedToken { .. } | TrimmedSeq { .. } => Some(
                "Records before the oldest kept sequence were removed by chunked_trim or the map's retention; start again from 'current', or read on from the oldest kept sequence with chunked_read."
                    .into(),
            ),
            PayloadTooLarge { setting, .. } => Some(match setting {
                PayloadLimit::MaxPayloadBytes => {
                    "The limit is the setting chunked_map.max_payload_bytes.".into()
                }
                PayloadLimit::MaxChunkBytes => {
                    "The limit is the setting chunked_map.max_chunk_bytes: a payload must fit in a chunk.".into()
                }
            }),
            HistoryIsImmutable { operation, .. }
                if *operation == "DELETE" || *operation == "TRUNCATE" =>
            {
                Some("To remove a whole map, its owner calls chunked_map.chunked_drop(map).".into())
            }
            NotifyInPreparedTransaction => Some(
                "Commit without PREPARE TRANSACTION, or turn notifications off with chunked_map.chunked_set_notify(map, false)."
                    .into(),
            ),
            CitusMissing { .. } => Some(
                "Install Citus on every node, CREATE EXTENSION citus on the coordinator, add the workers (citus_add_node), then call chunked_map.chunked_distribute() on the coordinator."
                    .into(),
            ),
            NotPreloaded { .. } => Some(
                "Set shared_preload_libraries = 'citus,chunked_map' on every node and restart them: Citus delegates each call by its map, and chunked_map must see a NULL map before Citus does."
                    .into(),
            ),
            MessageStoreInstalled { .. } => Some(
                "The message store runs on one node: keep this database's maps undistributed. Dropping the extension chunked_map_message_store would let them be distributed, but drops its index of messages with their global positions."
                    .into(),
            ),
            OutdatedSqlObjects { .. } => Some("Run ALTER EXTENSION chunked_map UPDATE.".into()),
            StoragePartlyDistributed { .. } => Some(
                "Run SELECT chunked_map.chunked_distribute() on the coordinator: it distributes what an update of the extension added."
                    .into(),
            ),
            UnknownId { .. } => Some(
                "A map remembers the ids of its newest id_window records (chunked_info); chunked_set_id_window(map, NULL) keeps, from then on, those of every record it keeps."
                    .into(),
            ),
            ConsumerNotFound { consumer } => Some(format!(
                "Create it with chunked_map.chunked_subscribe('{}').",
                consumer.replace('\'', "''")
            )),
            FeedOffCoordinator => Some(
                "Connect to the coordinator: consumers and their members are kept there (docs/citus.md)."
                    .into(),
            ),
            _ => None,
        }
    }

    /// Raises the error: the Rust stack unwinds to the function PostgreSQL called, which raises
    /// it there (see `pg::boundary`); the current statement fails with it.
    #[track_caller]
    pub fn raise(self) -> ! {
        let report = Report {
            sqlstate: self.sqlstate(),
            message: self.to_string(),
            detail: self.detail(),
            hint: self.hint(),
        };
        Failure::Report(report, std::panic::Location::caller()).raise()
    }
}

/// Unwraps a result of the extension's own validation, raising the error in PostgreSQL.
pub trait OrRaise<T> {
    #[track_caller]
    fn or_raise(self) -> T;
}

impl<T> OrRaise<T> for Result<T, ChunkedError> {
    #[track_caller]
    fn or_raise(self) -> T {
        match self {
            Ok(value) => value,
            Err(error) => error.raise(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_malformed_token_is_quoted_cut_with_its_length() {
        let token = "9".repeat(100_000);
        let message = ChunkedError::MalformedToken { token }.to_string();
        assert_eq!(
            message,
            format!(
                "invalid page token \"{}...\" (100000 characters)",
                "9".repeat(40)
            )
        );
        let short = ChunkedError::MalformedToken {
            token: "101".into(),
        };
        assert_eq!(short.to_string(), "invalid page token \"101\"");
    }

    #[test]
    fn the_optimistic_mismatch_has_a_sqlstate_of_its_own() {
        let mismatch = ChunkedError::UnexpectedLastSeq {
            map: "m".into(),
            expected: 1,
            actual: 2,
        };
        let others = [
            ChunkedError::Locked {
                map: "m".into(),
                held: Held::Now,
            },
            ChunkedError::ChangedAfterSnapshot { map: "m".into() },
            ChunkedError::MapNotStarted { map: "m".into() },
            ChunkedError::HoldsOtherRecords { map: "m".into() },
            ChunkedError::IsStream { map: "m".into() },
            ChunkedError::MalformedToken { token: "x".into() },
            ChunkedError::NullArgument { argument: "map" },
            ChunkedError::PayloadTooLarge {
                bytes: 2,
                limit: 1,
                setting: PayloadLimit::MaxPayloadBytes,
            },
            ChunkedError::HistoryIsImmutable {
                operation: "INSERT",
                table: "t".into(),
            },
            ChunkedError::OutdatedSqlObjects {
                library: "b".into(),
                installed: "a".into(),
            },
            ChunkedError::CitusMissing { what: "x".into() },
            ChunkedError::NotPreloaded { nodes: "x".into() },
            ChunkedError::Internal {
                context: "x".into(),
            },
        ];
        for other in others {
            assert_ne!(mismatch.sqlstate(), other.sqlstate(), "{other:?}");
        }
        assert_eq!(
            mismatch.sqlstate(),
            PgSqlErrorCode::ERRCODE_INTEGRITY_CONSTRAINT_VIOLATION
        );
    }
}
