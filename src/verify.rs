//! `chunked_verify`: checks that a map's storage is what the append path would have written,
//! and reports (never raises) what it finds wrong.
//!
//! A consistent map: archived chunks start at the map's oldest kept sequence (1 until it was
//! trimmed) and follow each other without gap or overlap,
//! each holds at least one and at most its size of payloads; the token chain from the state's
//! newest token back through `prev_token` visits every archived chunk once, newest to oldest,
//! and ends at a chunk with no previous token; the current chunk continues the sequence without
//! gap, holds no more than its size, and the state row's next sequence and byte count agree
//! with it. Everything is read on one snapshot, so a map being appended to concurrently is
//! judged as it was at that moment.

use std::collections::HashMap;

use serde_json::json;

use crate::error::ChunkedError;
use crate::input::MapName;
use crate::input::CHUNK_SIZE_RANGE;
use crate::statements::{self, verify::StoredMap};
use crate::token::{archived_token, PageToken};

pub fn verify(map: MapName<'_>) -> serde_json::Value {
    let stored =
        statements::connect(|session| statements::verify::stored_map(session, map.as_str()));
    if stored.state.is_none() && stored.chunks.is_empty() && stored.current.is_empty() {
        ChunkedError::MapNotStarted {
            map: map.as_str().to_owned(),
        }
        .raise();
    }
    let problems = problems(&stored);
    let current_records = stored.current.len() as i64;
    let archived_records: i64 = stored.chunks.iter().map(|c| c.record_count.max(0)).sum();
    json!({
        "map": map.as_str(),
        "consistent": problems.is_empty(),
        "problems": problems,
        "archived_chunks": stored.chunks.len(),
        "current_records": current_records,
        "total_records": archived_records + current_records,
    })
}

fn problems(stored: &StoredMap) -> Vec<String> {
    let mut problems = Vec::new();
    let oldest_seq = stored.state.as_ref().map_or(1, |state| state.oldest_seq);
    if oldest_seq < 1 {
        problems.push(format!("the state's oldest sequence is {oldest_seq}"));
    }
    let mut expected_first = oldest_seq;
    for chunk in &stored.chunks {
        let token = archived_token(chunk.first_seq);
        if chunk.first_seq != expected_first {
            problems.push(format!(
                "archived chunk {token} starts at sequence {}, expected {expected_first}",
                chunk.first_seq
            ));
        }
        if !CHUNK_SIZE_RANGE.contains(&chunk.chunk_size) {
            problems.push(format!(
                "archived chunk {token} has size {}",
                chunk.chunk_size
            ));
        }
        if chunk.record_count < 1 || chunk.record_count > i64::from(chunk.chunk_size) {
            problems.push(format!(
                "archived chunk {token} holds {} records, its size is {}",
                chunk.record_count, chunk.chunk_size
            ));
        }
        if chunk.malformed {
            problems.push(format!(
                "archived chunk {token} is malformed (NULL payloads, or its payloads, times or ids not one-dimensional arrays of one element per record)"
            ));
        }
        if chunk.layout != 1 {
            problems.push(format!(
                "archived chunk {token} has unknown layout {}",
                chunk.layout
            ));
        }
        expected_first = chunk.first_seq.saturating_add(chunk.record_count.max(1));
    }
    problems.extend(chain_problems(stored));

    match &stored.state {
        None => problems.push("the map's state row is missing".into()),
        Some(state) => {
            let current = &state.current;
            if current.first_seq != expected_first {
                problems.push(format!(
                    "the current chunk starts at sequence {}, expected {expected_first}",
                    current.first_seq
                ));
            }
            let newest = stored.chunks.last().map(|c| archived_token(c.first_seq));
            if state.newest_archived_token != newest {
                problems.push(format!(
                    "the state names {} as the newest archived chunk, the newest stored is {}",
                    state.newest_archived_token.as_deref().unwrap_or("none"),
                    newest.as_deref().unwrap_or("none")
                ));
            }
            if state.archived_chunks != stored.chunks.len() as i64 {
                problems.push(format!(
                    "the state counts {} archived chunks, {} are stored",
                    state.archived_chunks,
                    stored.chunks.len()
                ));
            }
            if !CHUNK_SIZE_RANGE.contains(&state.chunk_size) {
                problems.push(format!("the map's chunk size is {}", state.chunk_size));
            }
            let records = &stored.current;
            let count = records.len() as i64;
            if count > i64::from(current.size) {
                problems.push(format!(
                    "the current chunk holds {count} records, its size is {}",
                    current.size
                ));
            }
            let contiguous = records
                .iter()
                .enumerate()
                .all(|(i, record)| record.seq == current.first_seq + i as i64);
            if !contiguous || current.next_seq != current.first_seq + count {
                let held = match (records.first(), records.last()) {
                    (Some(min), Some(max)) => format!("sequences {}..{}", min.seq, max.seq),
                    _ => "no sequence".to_owned(),
                };
                problems.push(format!(
                    "the current chunk holds {held} ({count} records), the state expects {}..{}",
                    current.first_seq,
                    current.next_seq - 1
                ));
            }
            let bytes: i64 = records.iter().map(|r| r.bytes as i64).sum();
            if bytes != current.bytes {
                problems.push(format!(
                    "the current chunk holds {bytes} payload bytes, the state counts {}",
                    current.bytes
                ));
            }
        }
    }
    problems
}

/// Follows the tokens from the newest archived chunk to the oldest, as a reader paging from
/// `current` would.
fn chain_problems(stored: &StoredMap) -> Vec<String> {
    let mut problems = Vec::new();
    let by_first: HashMap<i64, usize> = stored
        .chunks
        .iter()
        .enumerate()
        .map(|(i, c)| (c.first_seq, i))
        .collect();
    let mut token = stored
        .state
        .as_ref()
        .and_then(|s| s.newest_archived_token.clone());
    let mut expected_index = stored.chunks.len();
    while let Some(current) = token {
        let Some(index) = (match PageToken::parse(&current) {
            Ok(PageToken::Archived(Some(first))) => by_first.get(&first).copied(),
            _ => None,
        }) else {
            problems.push(format!(
                "the token chain reaches {current}, which names no archived chunk"
            ));
            return problems;
        };
        if expected_index == 0 || index != expected_index - 1 {
            problems.push(format!(
                "the token chain reaches archived chunk {current} out of order"
            ));
            return problems;
        }
        expected_index = index;
        token = stored.chunks[index].prev_token.clone();
    }
    if expected_index != 0 {
        problems.push(format!(
            "the token chain ends before the oldest archived chunk ({} chunks unreachable)",
            expected_index
        ));
    }
    problems
}
