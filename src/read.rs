//! Where a map is read: pages (newest first), the same pages as rows, records from a sequence
//! on (oldest first), single records, and the map's summary.
//!
//! Reads take no lock and never wait for a write. Every statement of a read runs on the
//! snapshot of the SQL statement that called the function, whatever the transaction wrote
//! before, so one call sees one state of the map. Results are copied into the caller's memory.

use crate::error::{ChunkedError, OrRaise};
use crate::input::MapName;
use crate::jsonb::Jsonb;
use crate::pg::spi::{CallerMemory, Session};
use crate::statements::reads::{self, Records};
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

/// Why a page was not found: the map does not exist, or the token names no chunk of it.
fn missing_page(
    session: &Session,
    map: MapName<'_>,
    parsed: PageToken,
    token: &str,
) -> ChunkedError {
    if parsed != PageToken::Current && state::map_exists(session, map.as_str()) {
        ChunkedError::UnknownToken {
            map: map.as_str().to_owned(),
            token: token.to_owned(),
        }
    } else {
        not_started(map)
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
        let (next_seq, current_first_seq) =
            state::extent(session, map.as_str()).ok_or_else(|| not_started(map))?;
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
            Some(None) => Err(ChunkedError::UnknownSeq {
                map: map.as_str().to_owned(),
                seq,
            }),
            Some(Some(record)) => Ok(record),
        },
    )
    .or_raise()
}

fn not_started(map: MapName<'_>) -> ChunkedError {
    ChunkedError::MapNotStarted {
        map: map.as_str().to_owned(),
    }
}
