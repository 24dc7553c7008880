//! Every failure the extension reports, and the one place each becomes a SQLSTATE.
//!
//! The README's SQLSTATE table lists these variants in the same order.

use pgrx::PgSqlErrorCode;

use crate::token::TOKEN_DIGITS;

/// Longest map name accepted, in bytes.
pub const MAX_MAP_NAME_BYTES: usize = 200;
/// Smallest and largest chunk size accepted.
pub const CHUNK_SIZE_RANGE: std::ops::RangeInclusive<i32> = 1..=10_000;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChunkedError {
    /// Another open transaction holds the map's append lock.
    #[error("map \"{map}\" is locked by a concurrent append")]
    Conflict { map: String },

    /// An optimistic append found another newest sequence than the caller expected.
    #[error("map \"{map}\" has newest sequence {actual}, expected {expected}")]
    UnexpectedLastSeq {
        map: String,
        expected: i64,
        actual: i64,
    },

    #[error("map \"{map}\" does not exist")]
    MapNotStarted { map: String },

    #[error("invalid page token \"{token}\"")]
    MalformedToken { token: String },

    #[error("page token \"{token}\" names no archived chunk of map \"{map}\"")]
    UnknownToken { map: String, token: String },

    #[error("map \"{map}\" has no record with sequence {seq}")]
    UnknownSeq { map: String, seq: i64 },

    #[error("argument \"{argument}\" must not be null")]
    NullArgument { argument: &'static str },

    #[error("argument \"{argument}\" must not contain null (element {index})")]
    NullElement {
        argument: &'static str,
        index: usize,
    },

    #[error("map name must be 1 to {MAX_MAP_NAME_BYTES} bytes long, got {bytes} bytes")]
    InvalidMapName { bytes: usize },

    #[error(
        "chunk_size must be between {} and {}, got {value}",
        CHUNK_SIZE_RANGE.start(),
        CHUNK_SIZE_RANGE.end()
    )]
    ChunkSizeOutOfRange { value: i32 },

    #[error("payload of {bytes} bytes exceeds the limit of {limit} bytes")]
    PayloadTooLarge { bytes: usize, limit: usize },

    /// Direct DML on stored history by a role that does not own the extension's tables.
    #[error("{operation} on {table} is not allowed: chunked_map history is append-only")]
    HistoryIsImmutable {
        operation: &'static str,
        table: String,
    },
}

impl ChunkedError {
    pub fn sqlstate(&self) -> PgSqlErrorCode {
        use ChunkedError::*;
        match self {
            Conflict { .. } | UnexpectedLastSeq { .. } => {
                PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE
            }
            MapNotStarted { .. } | UnknownToken { .. } | UnknownSeq { .. } => {
                PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT
            }
            MalformedToken { .. } | InvalidMapName { .. } | ChunkSizeOutOfRange { .. } => {
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE
            }
            NullArgument { .. } | NullElement { .. } => {
                PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED
            }
            PayloadTooLarge { .. } => PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            HistoryIsImmutable { .. } => PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
        }
    }

    pub fn detail(&self) -> Option<String> {
        use ChunkedError::*;
        match self {
            Conflict { .. } => Some(
                "Another open transaction is appending to this map; appends to one map are serialized."
                    .into(),
            ),
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
            Conflict { .. } => Some("Retry the transaction.".into()),
            UnexpectedLastSeq { .. } => Some(
                "Read the map again (chunked_info) and retry with the newest sequence, or skip the append if it already happened."
                    .into(),
            ),
            MapNotStarted { map } => Some(format!(
                "Call chunked_map.chunked_start('{}') first.",
                map.replace('\'', "''")
            )),
            UnknownToken { .. } => Some(
                "Start from 'current' and follow next_page_token; tokens are the first sequence of an archived chunk."
                    .into(),
            ),
            PayloadTooLarge { .. } => {
                Some("The limit is the setting chunked_map.max_payload_bytes.".into())
            }
            HistoryIsImmutable { operation, .. } if *operation == "DELETE" || *operation == "TRUNCATE" => {
                Some("To remove a whole map, its owner calls chunked_map.chunked_drop(map).".into())
            }
            _ => None,
        }
    }
}

/// Unwraps a result of the extension's own validation, raising the error in PostgreSQL.
pub trait OrRaise<T> {
    fn or_raise(self) -> T;
}

impl<T> OrRaise<T> for Result<T, ChunkedError> {
    fn or_raise(self) -> T {
        self.unwrap_or_else(|error| crate::report::raise(&error))
    }
}

impl<T> OrRaise<T> for Result<T, pgrx::spi::SpiError> {
    /// SPI failures are internal errors (a statement of ours that did not fit the schema).
    fn or_raise(self) -> T {
        self.unwrap_or_else(|error| crate::report::raise_internal(&format!("SPI failure: {error}")))
    }
}
