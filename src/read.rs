//! Where a page is read. Reads take no lock and never wait for an append.

use pgrx::prelude::*;

use crate::error::{ChunkedError, OrRaise};
use crate::input::MapName;
use crate::jsonb::Jsonb;
use crate::store;
use crate::token::PageToken;

/// The page `token` names: `current`, or an archived chunk.
pub fn page(map: MapName<'_>, token: &str) -> Jsonb {
    let parsed = PageToken::parse(token).or_raise();
    Spi::connect(|client| {
        let page = match parsed {
            PageToken::Current => store::current_page(client, map.as_str()),
            PageToken::Archived(first_seq) => {
                first_seq.and_then(|first| store::archived_page(client, map.as_str(), first, token))
            }
        };
        page.ok_or_else(|| {
            if parsed != PageToken::Current && store::map_exists(client, map.as_str()) {
                ChunkedError::UnknownToken {
                    map: map.as_str().to_owned(),
                    token: token.to_owned(),
                }
            } else {
                not_started(map)
            }
        })
    })
    .or_raise()
}

pub fn info(map: MapName<'_>) -> Jsonb {
    Spi::connect(|client| store::info(client, map.as_str()).ok_or_else(|| not_started(map)))
        .or_raise()
}

pub fn get(map: MapName<'_>, seq: i64) -> Jsonb {
    Spi::connect(
        |client| match store::get_record(client, map.as_str(), seq) {
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
