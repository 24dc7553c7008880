//! Where a map is read: pages (newest first), the same pages as rows, records from a sequence
//! on (oldest first), single records, and the map's summary.
//!
//! A map whose oldest chunks were trimmed (see `retention`) is read from its oldest kept
//! sequence: a token or a sequence before it is 42704 with its own message, a forward read from
//! before it starts at it (the caller sees the gap: the first sequence returned is not the one
//! after `after_seq`).
//!
//! Reads take no lock and never wait for a write. Every statement of a read runs on the
//! snapshot of the SQL statement that called the function, whatever the transaction wrote
//! before, so one call sees one state of the map. Results are copied into the caller's memory.

use crate::error::{ChunkedError, OrRaise};
use crate::input::MapName;
use crate::jsonb::Jsonb;
use crate::pg::spi::{CallerMemory, Session};
use crate::record_ids;
use crate::statements::reads::{self, Looked, Records};
use crate::statements::{self, state};
use crate::token::PageToken;

/// The token, parsed; 22023 when malformed.
fn parse_token(token: &str) -> PageToken {
    PageToken::parse(token)
        .map_err(|_| ChunkedError::MalformedToken {
            token: token.to_owned(),
        })
        .or_raise()
}

/// The page `token` names: `current`, or an archived chunk.
pub fn page<'fcx>(caller: CallerMemory<'fcx>, map: MapName<'_>, token: &str) -> Jsonb<'fcx> {
    let parsed = parse_token(token);
    statements::connect(|session| {
        let page = match parsed {
            PageToken::Current => reads::current_page(session, caller, map.as_str()),
            PageToken::Archived(first_seq) => first_seq.and_then(|first| {
                reads::archived_page(session, caller, map.as_str(), first, token)
            }),
        };
        page.ok_or_else(|| missing_page(session, map, parsed, token))
    })
    .or_raise()
}

/// The same page as rows, newest first.
pub fn page_records<'fcx>(
    caller: CallerMemory<'fcx>,
    map: MapName<'_>,
    token: &str,
) -> Records<'fcx> {
    let parsed = parse_token(token);
    statements::connect(|session| {
        let records = match parsed {
            PageToken::Current => reads::current_records(session, caller, map.as_str()),
            PageToken::Archived(None) => Vec::new(),
            PageToken::Archived(Some(first)) => {
                reads::archived_records(session, caller, map.as_str(), first)
            }
        };
        // an archived chunk holds at least one record, and the current page of a map that
        // exists may be empty
        let found = !records.is_empty()
            || (parsed == PageToken::Current && state::map_exists(session, map.as_str()));
        if found {
            Ok(records)
        } else {
            Err(missing_page(session, map, parsed, token))
        }
    })
    .or_raise()
}

/// Why a page was not found: the map does not exist, the token names a chunk before the oldest
/// kept one (trimmed), or it names no chunk of the map.
fn missing_page(
    session: &Session,
    map: MapName<'_>,
    parsed: PageToken,
    token: &str,
) -> ChunkedError {
    let Some(extent) = state::extent(session, map.as_str()) else {
        return not_started(map);
    };
    match parsed {
        PageToken::Current => not_started(map),
        // (a map never trimmed has oldest_seq 1, and no token below 1 ever named a chunk)
        PageToken::Archived(Some(first_seq)) if first_seq >= 1 && first_seq < extent.oldest_seq => {
            ChunkedError::TrimmedToken {
                map: map.as_str().to_owned(),
                token: token.to_owned(),
                oldest_seq: extent.oldest_seq,
            }
        }
        PageToken::Archived(_) => ChunkedError::UnknownToken {
            map: map.as_str().to_owned(),
            token: token.to_owned(),
        },
    }
}

/// Records with a sequence above `after_seq`, oldest first, at most `max_records`: reads the
/// state row, then only the chunks that hold them.
pub fn forward<'fcx>(
    caller: CallerMemory<'fcx>,
    map: MapName<'_>,
    after_seq: i64,
    max_records: i32,
) -> Records<'fcx> {
    statements::connect(|session| {
        let state::Extent {
            next_seq,
            current_first_seq,
            oldest_seq,
        } = state::extent(session, map.as_str()).ok_or_else(|| not_started(map))?;
        // before the oldest kept record: from it (the caller sees the gap in the sequences)
        let after_seq = after_seq.max(oldest_seq - 1);
        if after_seq >= next_seq - 1 {
            return Ok(Vec::new());
        }
        let end = next_seq.min(
            after_seq
                .saturating_add(i64::from(max_records))
                .saturating_add(1),
        );
        Ok(reads::read_forward(
            session,
            caller,
            map.as_str(),
            after_seq,
            (end, current_first_seq),
            max_records,
        ))
    })
    .or_raise()
}

pub fn info<'fcx>(caller: CallerMemory<'fcx>, map: MapName<'_>) -> Jsonb<'fcx> {
    statements::connect(|session| {
        reads::info(session, caller, map.as_str()).ok_or_else(|| not_started(map))
    })
    .or_raise()
}

pub fn get<'fcx>(caller: CallerMemory<'fcx>, map: MapName<'_>, seq: i64) -> Jsonb<'fcx> {
    statements::connect(
        |session| match reads::get_record(session, caller, map.as_str(), seq) {
            None => Err(not_started(map)),
            Some(Looked::Missing { oldest_seq }) if seq >= 1 && seq < oldest_seq => {
                Err(ChunkedError::TrimmedSeq {
                    map: map.as_str().to_owned(),
                    seq,
                    oldest_seq,
                })
            }
            Some(Looked::Missing { .. }) => Err(ChunkedError::UnknownSeq {
                map: map.as_str().to_owned(),
                seq,
            }),
            Some(Looked::Found(record)) => Ok(record),
        },
    )
    .or_raise()
}

/// The record with `id`, while the map remembers it (see `record_ids`): the one with the
/// sequence it was appended as.
pub fn get_by_id<'fcx>(caller: CallerMemory<'fcx>, map: MapName<'_>, id: &str) -> Jsonb<'fcx> {
    let seq = statements::connect(|session| {
        if let Some(seq) = record_ids::find(session, map.as_str(), id) {
            return Ok(seq);
        }
        if state::extent(session, map.as_str()).is_none() {
            return Err(not_started(map));
        }
        Err(ChunkedError::UnknownId {
            map: map.as_str().to_owned(),
            id: id.to_owned(),
        })
    })
    .or_raise();
    get(caller, map, seq)
}

fn not_started(map: MapName<'_>) -> ChunkedError {
    ChunkedError::MapNotStarted {
        map: map.as_str().to_owned(),
    }
}
