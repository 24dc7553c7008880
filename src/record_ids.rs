//! Record ids: a writer may give a record an id; while the map remembers it, appending the same
//! id again appends nothing and answers with the first record's sequence (a producer that lost
//! its acknowledgement retries safely).
//!
//! (On a Citus cluster `record_id` is distributed with the other storage tables, so a map's ids
//! are on its node; where an update added it and `chunked_distribute()` has not run since, every
//! use of ids says so: `citus::tables_are_distributed`.)
//!
//! (An append may also keep an id with its record without the map remembering it,
//! `append::RecordId::Kept`: the message store's writes, whose ids its own index keeps unique.
//! Those ids are never looked up here.)
//!
//! **Which ids a map remembers.** Those of its newest `id_window` records (`map_state`, 10,000
//! unless its owner sets another with `chunked_set_id_window`; NULL: every record it keeps), in
//! `record_id`, one row per record appended with an id. Ids below the window are forgotten when
//! a chunk is archived (so up to one chunk more is remembered) and when the window is set;
//! retention and trims (`TRIM_TO`) and drops (`DROP_MAP`) forget the ids of the records they
//! remove, and nothing else.
//!
//! Why 10,000: a producer retries within seconds or minutes of losing its acknowledgement, and a
//! map receives 10,000 appends in two minutes (NATS JetStream's default duplicate window) only
//! at more than 80 appends a second; remembering them takes about 2.7 MB per map with
//! 36-character ids (271 bytes per remembered id, benchmark section D). A window in records, unlike one in time, is the same on every node and after a
//! restore, and needs no clock to test.
//!
//! What remembering costs is bounded by the window: one row per remembered id, one index probe
//! per append with an id, one range delete per archived chunk.
//!
//! **Under concurrency.** The id is looked up by the holder of the map's lock, on a writer's
//! snapshot, before anything is written: an append of an id another transaction is appending
//! meets that transaction's lock of the map (40001 at once, or a wait up to
//! `chunked_map.lock_timeout`), and then finds the id if it committed, or appends if it rolled
//! back. A rolled-back append leaves no id behind: its row of `record_id` goes with it.

use std::collections::HashMap;

use crate::citus;
use crate::jsonb::TextArrayDatum;
use crate::pg::spi::Session;
use crate::statements::ids;
use crate::statements::state::MapState;

/// The sequence the record with `id` got, while the map (whose lock the caller holds)
/// remembers it.
pub fn appended_as(session: &Session, map: &str, id: &str) -> Option<i64> {
    citus::tables_are_distributed(session);
    ids::appended_as(session, map, id)
}

/// The same, as a reader sees it (the calling statement's snapshot).
pub fn find(session: &Session, map: &str, id: &str) -> Option<i64> {
    citus::tables_are_distributed(session);
    ids::find(session, map, id)
}

/// Which of `ids` the map (whose lock the caller holds) remembers, with their sequences.
pub fn appended_as_any(
    session: &Session,
    map: &str,
    ids: TextArrayDatum<'_>,
) -> HashMap<String, i64> {
    citus::tables_are_distributed(session);
    ids::appended_as_any(session, map, ids)
        .into_iter()
        .collect()
}

/// Remembers the id of a record just appended.
pub fn remember(session: &Session, map: &str, id: &str, seq: i64) {
    ids::remember(session, map, id, seq);
}

/// Remembers the ids of records appended from `first_seq` on, in order.
pub fn remember_from(session: &Session, map: &str, first_seq: i64, ids: TextArrayDatum<'_>) {
    ids::remember_from(session, map, first_seq, ids);
}

/// After a batch archived chunks, or the map's window was set: forgets the ids that fell out of
/// its window. (The rollover of an append forgets them in the statement that ends the chunk,
/// `statements::writes::CLOSE_CURRENT`, by the same rule.)
pub fn keep_window(session: &Session, map: &str, state: &MapState) {
    if let Some(window) = state.id_window {
        ids::forget_below(session, map, state.current.next_seq.saturating_sub(window));
    }
}

/// What becomes of one payload of a batch with ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InBatch {
    /// Appended: the `n`th (from 0) of the batch's new records.
    New(usize),
    /// Its id is one the map remembers: the record it was appended as.
    Known(i64),
    /// Its id is that of the batch's `n`th new record (a duplicate inside the batch).
    SameAs(usize),
}

/// Which payloads of a batch are new, given their ids (`None`: no id, always new) and the ids
/// the map remembers among them: the first payload of each id not remembered is new, every other
/// one a duplicate.
pub fn plan_batch(ids: &[Option<&str>], known: &HashMap<String, i64>) -> Vec<InBatch> {
    let mut first_of: HashMap<&str, usize> = HashMap::new();
    let mut new = 0;
    ids.iter()
        .map(|id| {
            if let Some(id) = id {
                if let Some(seq) = known.get(*id) {
                    return InBatch::Known(*seq);
                }
                if let Some(n) = first_of.get(id) {
                    return InBatch::SameAs(*n);
                }
                first_of.insert(id, new);
            }
            new += 1;
            InBatch::New(new - 1)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_appends_each_new_id_once_and_records_without_ids_always() {
        let known = HashMap::from([("old".to_owned(), 7)]);
        let plan = plan_batch(
            &[
                Some("a"),
                None,
                Some("old"),
                Some("a"),
                None,
                Some("b"),
                Some("b"),
            ],
            &known,
        );
        assert_eq!(
            plan,
            vec![
                InBatch::New(0),
                InBatch::New(1),
                InBatch::Known(7),
                InBatch::SameAs(0),
                InBatch::New(2),
                InBatch::New(3),
                InBatch::SameAs(3),
            ]
        );
    }

    #[test]
    fn a_batch_without_ids_is_all_new() {
        let plan = plan_batch(&[None, None], &HashMap::new());
        assert_eq!(plan, vec![InBatch::New(0), InBatch::New(1)]);
    }
}
