//! Checks on the arguments of the SQL functions, in the order the contract (docs/contract.md)
//! lists the errors, and the limits they check. Pure Rust: what a value is allowed to be, without
//! asking the database (a payload is measured by `jsonb`).

use std::ops::RangeInclusive;

use crate::error::{ChunkedError, PayloadLimit};
use crate::jsonb::{Jsonb, Payload};

/// Longest map name accepted, in bytes.
pub const MAX_MAP_NAME_BYTES: usize = 200;
/// Smallest and largest chunk size accepted.
pub const CHUNK_SIZE_RANGE: RangeInclusive<i32> = 1..=10_000;
/// Most records one `chunked_read` call returns.
pub const MAX_RECORDS_RANGE: RangeInclusive<i32> = 1..=10_000;

/// A map name that is not NULL, not empty and at most [`MAX_MAP_NAME_BYTES`] bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapName<'a>(&'a str);

impl<'a> MapName<'a> {
    pub fn parse(map: Option<&'a str>) -> Result<MapName<'a>, ChunkedError> {
        let map = required(map, "map")?;
        if map.is_empty() || map.len() > MAX_MAP_NAME_BYTES {
            return Err(ChunkedError::InvalidMapName {
                bytes: map.len(),
                max: MAX_MAP_NAME_BYTES,
            });
        }
        Ok(MapName(map))
    }

    pub fn as_str(&self) -> &'a str {
        self.0
    }
}

/// Longest consumer name and category accepted, in bytes.
pub const MAX_CONSUMER_NAME_BYTES: usize = 200;
/// Largest consumer group.
pub const GROUP_SIZE_RANGE: RangeInclusive<i32> = 1..=1024;

/// A consumer name: not NULL, not empty, at most [`MAX_CONSUMER_NAME_BYTES`] bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsumerName<'a>(&'a str);

impl<'a> ConsumerName<'a> {
    pub fn parse(consumer: Option<&'a str>) -> Result<ConsumerName<'a>, ChunkedError> {
        let consumer = required(consumer, "consumer")?;
        if consumer.is_empty() || consumer.len() > MAX_CONSUMER_NAME_BYTES {
            return Err(ChunkedError::InvalidConsumerName {
                bytes: consumer.len(),
                max: MAX_CONSUMER_NAME_BYTES,
            });
        }
        Ok(ConsumerName(consumer))
    }

    pub fn as_str(&self) -> &'a str {
        self.0
    }
}

/// A category to follow: `None` (every map), or what comes before a map name's first `-`:
/// not empty, without `-`, at most [`MAX_CONSUMER_NAME_BYTES`] bytes.
pub fn category(value: Option<&str>) -> Result<Option<&str>, ChunkedError> {
    match value {
        Some(category)
            if category.is_empty()
                || category.contains('-')
                || category.len() > MAX_CONSUMER_NAME_BYTES =>
        {
            Err(ChunkedError::InvalidCategory {
                category: crate::token::quoted(category),
                max: MAX_CONSUMER_NAME_BYTES,
            })
        }
        _ => Ok(value),
    }
}

/// A member of a consumer group: `group_size` within [`GROUP_SIZE_RANGE`], `member` from 0 to
/// `group_size - 1`.
pub fn group(member: Option<i32>, group_size: Option<i32>) -> Result<(i32, i32), ChunkedError> {
    let member = required(member, "member")?;
    let group_size = required(group_size, "group_size")?;
    if !GROUP_SIZE_RANGE.contains(&group_size) {
        return Err(ChunkedError::GroupSizeOutOfRange {
            value: group_size,
            range: GROUP_SIZE_RANGE,
        });
    }
    if !(0..group_size).contains(&member) {
        return Err(ChunkedError::MemberOutOfRange { member, group_size });
    }
    Ok((member, group_size))
}

/// The chunk size of a map started without one: `chunked_start`'s default (sql/api.sql), and
/// that of a stream started by its first message.
pub const DEFAULT_CHUNK_SIZE: i32 = 100;

/// A chunk size within [`CHUNK_SIZE_RANGE`].
pub fn chunk_size(value: Option<i32>) -> Result<i32, ChunkedError> {
    let value = required(value, "chunk_size")?;
    if CHUNK_SIZE_RANGE.contains(&value) {
        Ok(value)
    } else {
        Err(ChunkedError::ChunkSizeOutOfRange {
            value,
            range: CHUNK_SIZE_RANGE,
        })
    }
}

/// A payload, measured, when it is at most `limit` bytes; `setting` is the setting that decides
/// the limit.
pub fn payload(
    value: Jsonb<'_>,
    limit: (usize, PayloadLimit),
) -> Result<Payload<'_>, ChunkedError> {
    let payload = Payload::measure(value);
    payload_size(payload.bytes(), limit)?;
    Ok(payload)
}

/// A payload of `bytes` bytes is accepted when it is at most `limit` bytes.
pub fn payload_size(
    bytes: usize,
    (limit, setting): (usize, PayloadLimit),
) -> Result<(), ChunkedError> {
    if bytes <= limit {
        Ok(())
    } else {
        Err(ChunkedError::PayloadTooLarge {
            bytes,
            limit,
            setting,
        })
    }
}

/// A sequence to read after: 0 (from the first record) or more.
pub fn after_seq(value: Option<i64>) -> Result<i64, ChunkedError> {
    let value = required(value, "after_seq")?;
    if value >= 0 {
        Ok(value)
    } else {
        Err(ChunkedError::NegativeAfterSeq { value })
    }
}

/// How many records one read may return, within [`MAX_RECORDS_RANGE`].
pub fn max_records(value: Option<i32>) -> Result<i32, ChunkedError> {
    let value = required(value, "max_records")?;
    if MAX_RECORDS_RANGE.contains(&value) {
        Ok(value)
    } else {
        Err(ChunkedError::MaxRecordsOutOfRange {
            value,
            range: MAX_RECORDS_RANGE,
        })
    }
}

/// A retention limit on records: 1 or more, or `None` (no limit).
pub fn max_records_kept(value: Option<i64>) -> Result<Option<i64>, ChunkedError> {
    match value {
        Some(value) if value < 1 => Err(ChunkedError::InvalidRetainedRecords { value }),
        _ => Ok(value),
    }
}

/// The most bytes a record's id may have: room for any UUID, ULID, hash or key a producer
/// derives from its own data, small enough that remembering ids stays cheap.
pub const MAX_ID_BYTES: usize = 256;

/// The earliest time a writer may give a record, 0001-01-01 00:00:00 UTC, as PostgreSQL keeps a
/// `timestamptz` (microseconds from 2000-01-01 UTC: 730,119 days before).
const EARLIEST_RECORD_TIME: i64 = -730_119 * 86_400 * 1_000_000;

/// A record's time given by its writer (`None`: the transaction's start), when it is a finite
/// time from [`EARLIEST_RECORD_TIME`] on (`infinity` is `i64::MAX`; `-infinity`, `i64::MIN`).
pub fn record_time(value: Option<i64>) -> Result<Option<i64>, ChunkedError> {
    match value {
        Some(at) if at < EARLIEST_RECORD_TIME || at == i64::MAX => Err(ChunkedError::InvalidTime),
        other => Ok(other),
    }
}

/// A record's id: 1 to [`MAX_ID_BYTES`] bytes.
pub fn record_id(value: &str) -> Result<&str, ChunkedError> {
    if (1..=MAX_ID_BYTES).contains(&value.len()) {
        Ok(value)
    } else {
        Err(ChunkedError::InvalidId {
            bytes: value.len(),
            max: MAX_ID_BYTES,
        })
    }
}

/// The ids of a batch, one per payload, `None` where a payload has none; each 1 to
/// [`MAX_ID_BYTES`] bytes. The first that is not is named by its position, counted from 1.
pub fn record_ids(values: &[Option<String>]) -> Result<Vec<Option<&str>>, ChunkedError> {
    values
        .iter()
        .enumerate()
        .map(|(index, value)| match value.as_deref() {
            Some(id) => record_id(id)
                .map(Some)
                .map_err(|_| ChunkedError::InvalidIdElement {
                    index: index + 1,
                    bytes: id.len(),
                    max: MAX_ID_BYTES,
                }),
            None => Ok(None),
        })
        .collect()
}

/// How many of its newest records' ids a map remembers: 1 or more, or `None` (every record it
/// keeps).
pub fn id_window(value: Option<i64>) -> Result<Option<i64>, ChunkedError> {
    match value {
        Some(value) if value < 1 => Err(ChunkedError::InvalidIdWindow { value }),
        _ => Ok(value),
    }
}

/// A retention limit on age: a positive interval (no part of it negative, not zero), or `None`
/// (no limit). `infinity` (PostgreSQL 17 and later) is accepted and never removes anything.
pub fn max_age(
    value: Option<pgrx::datum::Interval>,
) -> Result<Option<pgrx::datum::Interval>, ChunkedError> {
    match value {
        Some(age)
            if age.is_negative() || (age.months() == 0 && age.days() == 0 && age.micros() == 0) =>
        {
            Err(ChunkedError::InvalidRetainedAge)
        }
        _ => Ok(value),
    }
}

/// SQL NULL is refused for every argument: the functions are not STRICT so that a NULL is an
/// error the caller sees, never a silent NULL result.
pub fn required<T>(value: Option<T>, argument: &'static str) -> Result<T, ChunkedError> {
    value.ok_or(ChunkedError::NullArgument { argument })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_records_limit_is_1_or_more_or_none() {
        assert_eq!(max_records_kept(None), Ok(None));
        assert_eq!(max_records_kept(Some(1)), Ok(Some(1)));
        assert_eq!(
            max_records_kept(Some(0)),
            Err(ChunkedError::InvalidRetainedRecords { value: 0 })
        );
        assert_eq!(
            max_records_kept(Some(-5)),
            Err(ChunkedError::InvalidRetainedRecords { value: -5 })
        );
    }

    #[test]
    fn map_names_of_1_to_200_bytes_are_accepted() {
        assert!(MapName::parse(Some("s")).is_ok());
        assert!(MapName::parse(Some(&"x".repeat(200))).is_ok());
        // 100 two-byte characters are 200 bytes.
        assert!(MapName::parse(Some(&"é".repeat(100))).is_ok());
    }

    #[test]
    fn empty_or_over_200_bytes_is_refused_with_the_length() {
        assert_eq!(
            MapName::parse(Some("")),
            Err(ChunkedError::InvalidMapName { bytes: 0, max: 200 })
        );
        assert_eq!(
            MapName::parse(Some(&"x".repeat(201))),
            Err(ChunkedError::InvalidMapName {
                bytes: 201,
                max: 200
            })
        );
        assert_eq!(
            MapName::parse(Some(&"é".repeat(101))),
            Err(ChunkedError::InvalidMapName {
                bytes: 202,
                max: 200
            })
        );
    }

    #[test]
    fn null_arguments_are_named() {
        assert_eq!(
            MapName::parse(None),
            Err(ChunkedError::NullArgument { argument: "map" })
        );
        assert_eq!(
            chunk_size(None),
            Err(ChunkedError::NullArgument {
                argument: "chunk_size"
            })
        );
    }

    #[test]
    fn chunk_sizes_from_1_to_10000() {
        assert_eq!(chunk_size(Some(1)), Ok(1));
        assert_eq!(chunk_size(Some(10_000)), Ok(10_000));
        for value in [0, -1, 10_001, i32::MIN, i32::MAX] {
            assert_eq!(
                chunk_size(Some(value)),
                Err(ChunkedError::ChunkSizeOutOfRange {
                    value,
                    range: CHUNK_SIZE_RANGE,
                })
            );
        }
    }

    #[test]
    fn payloads_up_to_the_limit() {
        let limit = (1024, PayloadLimit::MaxPayloadBytes);
        assert_eq!(payload_size(1024, limit), Ok(()));
        assert_eq!(
            payload_size(1025, limit),
            Err(ChunkedError::PayloadTooLarge {
                bytes: 1025,
                limit: 1024,
                setting: PayloadLimit::MaxPayloadBytes,
            })
        );
    }

    #[test]
    fn reads_start_after_0_or_more_and_return_1_to_10000_records() {
        assert_eq!(after_seq(Some(0)), Ok(0));
        assert_eq!(after_seq(Some(i64::MAX)), Ok(i64::MAX));
        assert_eq!(
            after_seq(Some(-1)),
            Err(ChunkedError::NegativeAfterSeq { value: -1 })
        );
        assert_eq!(max_records(Some(1)), Ok(1));
        assert_eq!(max_records(Some(10_000)), Ok(10_000));
        for value in [0, -1, 10_001, i32::MIN] {
            assert_eq!(
                max_records(Some(value)),
                Err(ChunkedError::MaxRecordsOutOfRange {
                    value,
                    range: MAX_RECORDS_RANGE,
                })
            );
        }
    }
}
