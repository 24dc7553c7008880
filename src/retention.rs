//! Shedding a map's oldest history: `chunked_trim`, the retention policy
//! (`chunked_set_retention`) and `chunked_apply_retention`.
//!
//! Only whole archived chunks are ever removed, oldest first, so a map always holds one
//! contiguous run of sequences, `oldest_seq .. next_seq - 1`; the current chunk is never
//! removed. Sequence numbers are never reused. Every removal takes the map's lock like any other
//! write (40001 against a concurrent append; under REPEATABLE READ and SERIALIZABLE, a map
//! changed after the snapshot is PostgreSQL's own 40001), and a reader whose snapshot predates
//! it keeps reading what it could see (PostgreSQL keeps deleted rows for the snapshots that see
//! them).
//!
//! The policy, Kafka's rule on whole segments: a record among the map's newest `max_records`, or
//! in a chunk archived less than `max_age` ago, is never removed; an archived chunk is removed
//! once all of its records are past either limit. It is applied by the write that archives a
//! chunk, in that transaction, with bounded work: a write that archives `n` chunks removes at
//! most `n + 1`, so a map under a policy sheds at least as fast as it grows and never needs a
//! background job while it receives appends. `chunked_apply_retention` applies it in full to
//! maps that stopped receiving them.

use crate::citus;
use crate::error::OrRaise;
use crate::input::{self, MapName};
use crate::lock;
use crate::pg::spi::Session;
use crate::statements;
use crate::statements::retention::{self as retention_statements, Aged};
use crate::statements::state::{self, MapState};
use crate::xact;

/// Removes the archived chunks all of whose records have a sequence below `before_seq`;
/// returns how many records went. Whole chunks only: the chunk that holds `before_seq` and the
/// current chunk stay.
pub fn trim(map: MapName<'_>, before_seq: i64) -> i64 {
    let (tid, removed) = statements::connect(|session| {
        let state = lock::lock_existing_map(session, map);
        // the removal forgets ids: record_id must be where the map is (Citus)
        citus::tables_are_distributed(session);
        let first_kept = if before_seq >= state.current.first_seq {
            state.current.first_seq
        } else {
            retention_statements::chunk_holding(session, map.as_str(), before_seq)
                .unwrap_or(state.oldest_seq)
        };
        if first_kept <= state.oldest_seq {
            return (state.tid, 0);
        }
        let trimmed = retention_statements::trim_to(session, map.as_str(), &state, first_kept);
        (trimmed.tid, first_kept - state.oldest_seq)
    });
    xact::remember_written(map.as_str(), tid);
    removed
}

/// Sets (or, with both `None`, clears) the map's retention policy. Removes nothing itself: the
/// next write that archives a chunk applies it, or `chunked_apply_retention`.
pub fn set_retention(
    map: MapName<'_>,
    max_records: Option<i64>,
    max_age: Option<pgrx::datum::Interval>,
) {
    let max_records = input::max_records_kept(max_records).or_raise();
    let max_age = input::max_age(max_age).or_raise();
    let tid = statements::connect(|session| {
        let state = lock::lock_existing_map(session, map);
        retention_statements::set_retention(session, map.as_str(), &state, max_records, max_age)
    });
    xact::remember_written(map.as_str(), tid);
}

/// Applies the policy in full: to `map` (whose lock it takes like any write), or to every map
/// that has a policy and that no other transaction holds now (a held map is skipped: its
/// holder's next rollover applies the policy). Returns how many records went.
pub fn apply(map: Option<MapName<'_>>) -> i64 {
    match map {
        Some(map) => {
            let (tid, removed) = statements::connect(|session| {
                let state = lock::lock_existing_map(session, map);
                let (state, removed) = apply_locked(session, map.as_str(), state, None);
                (state.tid, removed)
            });
            xact::remember_written(map.as_str(), tid);
            removed
        }
        None => {
            let applied = statements::connect(|session| {
                let mut applied = Vec::new();
                for map in retention_statements::retained_maps(session) {
                    let Some(state) = state::lock_state(session, &map) else {
                        continue;
                    };
                    let (state, removed) = apply_locked(session, &map, state, None);
                    applied.push((map, state.tid, removed));
                }
                applied
            });
            applied
                .into_iter()
                .map(|(map, tid, removed)| {
                    xact::remember_written(&map, tid);
                    removed
                })
                .sum()
        }
    }
}

/// Applies the map's policy (the caller holds its lock), removing at most `bound` chunks
/// (`None`: every chunk the policy lets go); returns the new state and the records removed.
pub fn apply_locked(
    session: &Session,
    map: &str,
    state: MapState,
    bound: Option<usize>,
) -> (MapState, i64) {
    if !state.retention.any() || state.current.first_seq <= state.oldest_seq {
        return (state, 0);
    }
    let window = bound.map_or(i64::MAX, |b| i64::try_from(b).unwrap_or(i64::MAX));
    let mut chunks = retention_statements::oldest_chunks(session, map, window.saturating_add(1));
    // the sequence after the window: the next chunk's first, or the current chunk's
    let after = if i64::try_from(chunks.len()).unwrap_or(i64::MAX) > window {
        chunks
            .pop()
            .map_or(state.current.first_seq, |next| next.first_seq)
    } else {
        state.current.first_seq
    };
    let keep_records_from = state
        .retention
        .max_records
        .map(|n| state.current.next_seq.saturating_sub(n));
    match first_kept(&chunks, after, keep_records_from) {
        Some(first_kept) if first_kept > state.oldest_seq => {
            citus::tables_are_distributed(session);
            let removed = first_kept - state.oldest_seq;
            (
                retention_statements::trim_to(session, map, &state, first_kept),
                removed,
            )
        }
        _ => (state, 0),
    }
}

/// The first sequence the policy keeps, given the map's oldest archived chunks in order
/// (`chunks`), the sequence that follows the last of them (`after`) and the oldest sequence
/// among the newest `max_records` (`keep_records_from`); `None` when the oldest chunk stays.
/// A chunk goes when each of its records is older than `keep_records_from` or it is past its
/// age, and only after every chunk before it went: the map stays one run of sequences.
pub fn first_kept(chunks: &[Aged], after: i64, keep_records_from: Option<i64>) -> Option<i64> {
    let mut kept_from = None;
    for (index, chunk) in chunks.iter().enumerate() {
        let end = chunks.get(index + 1).map_or(after, |next| next.first_seq);
        let past_records = keep_records_from.is_some_and(|keep| end <= keep);
        if !(past_records || chunk.past_age) {
            // (the end of the chunk before it, if one went)
            return kept_from;
        }
        kept_from = Some(end);
    }
    kept_from
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(firsts: &[(i64, bool)]) -> Vec<Aged> {
        firsts
            .iter()
            .map(|&(first_seq, past_age)| Aged {
                first_seq,
                past_age,
            })
            .collect()
    }

    #[test]
    fn a_chunk_goes_only_when_all_its_records_are_older_than_the_newest_kept() {
        // chunks 1..10, 11..20, 21..30; current from 31; keep the newest from 21 on
        let aged = chunks(&[(1, false), (11, false), (21, false)]);
        assert_eq!(first_kept(&aged, 31, Some(21)), Some(21));
        // sequence 20 is among the newest: the chunk 11..20 stays
        assert_eq!(first_kept(&aged, 31, Some(20)), Some(11));
        // nothing is old enough
        assert_eq!(first_kept(&aged, 31, Some(10)), None);
        // everything archived is old enough: the current chunk is what remains
        assert_eq!(first_kept(&aged, 31, Some(100)), Some(31));
    }

    #[test]
    fn age_removes_a_prefix_only() {
        // the middle chunk is past its age but the oldest is not: nothing goes
        let aged = chunks(&[(1, false), (11, true), (21, false)]);
        assert_eq!(first_kept(&aged, 31, None), None);
        let aged = chunks(&[(1, true), (11, true), (21, false)]);
        assert_eq!(first_kept(&aged, 31, None), Some(21));
    }

    #[test]
    fn either_limit_removes_a_chunk() {
        // 1..10 by records, 11..20 by age, 21..30 by neither
        let aged = chunks(&[(1, false), (11, true), (21, false)]);
        assert_eq!(first_kept(&aged, 31, Some(11)), Some(21));
    }

    #[test]
    fn no_chunks_or_no_policy_removes_nothing() {
        assert_eq!(first_kept(&[], 1, Some(100)), None);
        assert_eq!(first_kept(&chunks(&[(1, false)]), 11, None), None);
    }
}
