//! Where a map is written: started, appended to (one record or a batch), resized, dropped.
//!
//! Every write takes the map's lock first (see `lock`) and holds it to the end of the caller's
//! transaction; the lock order is always the same, one map's state row and nothing else of
//! another map, so writes cannot deadlock. The next sequence is stored in the state row and
//! advanced by every append under that lock: the state row is the one source of truth, read by
//! the lock holder, never derived from what a snapshot happens to see.

use crate::chunking::{self, Batch};
use crate::citus;
use crate::direct_append;
use crate::error::{ChunkedError, OrRaise};
use crate::feed;
use crate::guc;
use crate::input::{self, MapName};
use crate::jsonb::{BatchMemory, Jsonb, JsonbArray, Payload};
use crate::lock;
use crate::pg::spi::Session;
use crate::record_ids::{self, InBatch};
use crate::retention;
use crate::statements;
use crate::statements::state::{self, MapState};
use crate::statements::writes::{self, BatchRecords, NewRecord, Written};
use crate::stream;
use crate::token::archived_token;
use crate::xact::{self, Announcement};

/// Starts a map; `false` (and no change) when it already exists. Never waits (unless
/// `chunked_map.lock_timeout` says so). The map's name is locked (see `lock`) by a start that
/// creates the map and by a drop, so that a start never meets an uncommitted start or drop of
/// the same name: one of the map's existence is 40001 at once; starts of a map that exists do
/// not lock its name (they only check that nobody holds it), so they never conflict with each
/// other. The insert happens only once no committed or uncommitted row of the map can be there,
/// so it has nothing to wait for. Under REPEATABLE READ and SERIALIZABLE, a map started or
/// dropped after the snapshot is 40001.
pub fn start(map: MapName<'_>, chunk_size: i32) -> bool {
    statements::connect(|session| {
        let repeatable = lock::uses_transaction_snapshot();
        let visible = state::visible_to_writer(session, map.as_str());
        let now = if repeatable {
            state::map_exists_now(session, map.as_str())
        } else {
            visible
        };
        if visible != now {
            changed_after_snapshot(map);
        }
        if visible {
            // a drop of it may be under way
            lock::probe_name(session, map);
            if state::map_exists_now(session, map.as_str()) {
                return false;
            }
            if repeatable {
                changed_after_snapshot(map);
            }
        }
        lock::lock_name(session, map);
        // started by a transaction that committed while this one took the lock
        if state::map_exists_now(session, map.as_str()) {
            if repeatable {
                changed_after_snapshot(map);
            }
            return false;
        }
        let followed = feed::followed_from_its_start(session, map);
        let started = writes::start(session, map.as_str(), chunk_size, followed);
        if started && followed {
            feed::positions_for_a_new_map(session, map);
        }
        started
    })
}

fn changed_after_snapshot(map: MapName<'_>) -> ! {
    ChunkedError::ChangedAfterSnapshot {
        map: map.as_str().to_owned(),
    }
    .raise()
}

/// How records are written on this server, the one rule: directly (`direct_append`), unless
/// Citus is loaded, the transaction cannot write, or `chunked_map.direct_append` is off; then by
/// SQL statements (`statements::writes::write_record`), which Citus routes to the map's node.
/// (The direct write also hands a record to SQL where the storage tables are not as the
/// extension made them.) Batches are written by SQL in either case.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Way {
    Direct,
    Sql,
}

impl Way {
    fn on_this_server() -> Way {
        if direct_append::can_write_directly() {
            Way::Direct
        } else {
            Way::Sql
        }
    }
}

/// What an append answers: the record's sequence, whether it was appended before (an id the map
/// remembers: nothing was appended now), and the record's address in `current_record` where it
/// was written directly now (a hint for readers that find it again: the row stays there until
/// its chunk is archived or the map trimmed, and the address may then hold another record).
#[derive(Debug, Clone, Copy)]
pub struct Registered {
    pub seq: i64,
    pub duplicate: bool,
    pub record: Option<pgrx::pg_sys::ItemPointerData>,
}

/// The time a record appended now is given: the transaction's start (`now()`), the same for
/// every record of the transaction and by either way of writing it.
fn transaction_time() -> i64 {
    // SAFETY: reads the transaction's start, which PostgreSQL set when it began; raises nothing.
    unsafe { pgrx::pg_sys::GetCurrentTransactionStartTimestamp() }
}

/// A record's id, and what the append does with it.
#[derive(Debug, Clone, Copy)]
pub enum RecordId<'a> {
    /// Remembered by the map (`record_ids`): an id it remembers appends nothing.
    Once(&'a str),
    /// Kept with the record only, never looked up: its writer keeps its ids unique (the message
    /// store's index of message ids does, docs/message-db.md). The map is a stream, started by
    /// its first record if it does not exist.
    Kept(&'a str),
}

impl<'a> RecordId<'a> {
    fn value(self) -> &'a str {
        match self {
            RecordId::Once(id) | RecordId::Kept(id) => id,
        }
    }

    /// The id the map must look up and remember, if any.
    fn remembered(self) -> Option<&'a str> {
        match self {
            RecordId::Once(id) => Some(id),
            RecordId::Kept(_) => None,
        }
    }
}

/// Appends one record and returns its sequence number; with `expected_last_seq`, only if the
/// map's newest sequence is that (0: an empty map), the optimistic append; with an id to
/// remember (`RecordId::Once`), only if the map does not remember that id (`record_ids`), else
/// it answers with the sequence the id was appended as; with `at`, the record's time is that (a
/// record moved over from another store keeps its own), else the transaction's start. The one
/// append of a record: lock the map, check that it takes the record (a message and a stream go
/// together: `stream`), look the id up, check the expectation, make room (archive a full
/// chunk), write the record (see [`Way`]), remember its id, record what the feed and the
/// commit's notification need.
///
/// Directly, the common case (no id to look up) is one call that locks without waiting and
/// writes; where it cannot (another transaction holds the map, the map does not exist, its chunk
/// is full), or where an id must be looked up first, the lock is taken by `lock` (which waits up to
/// `chunked_map.lock_timeout` or says why not), the chunk archived, and the record written by
/// the same way.
pub fn append(
    map: MapName<'_>,
    payload: Jsonb<'_>,
    expected_last_seq: Option<i64>,
    id: Option<RecordId<'_>>,
    at: Option<i64>,
) -> Registered {
    let remembered = id.and_then(RecordId::remembered);
    let payload = input::payload(payload, guc::payload_limit()).or_raise();
    let max_chunk_bytes = guc::max_chunk_bytes();
    let way = Way::on_this_server();
    let message = matches!(id, Some(RecordId::Kept(_)));
    let record = NewRecord {
        payload,
        at: at.unwrap_or_else(transaction_time),
        id: id.map(RecordId::value),
        message,
    };
    // Sequences only grow: an expectation below the newest sequence this transaction sees can
    // never come true, whoever holds the map now. It is refused before the map's lock is taken:
    // PostgreSQL sends the error before the failed transaction releases its locks, so a lock
    // taken here would briefly hold up a writer that reacts to the error at once. A transaction
    // that wrote the map holds it already: nobody else can move it, and the expectation is
    // compared under the lock. (An append with an id is a retry, perhaps: the id is looked up
    // before the expectation is compared, under the lock.) A stream stays one, and a map of other
    // records never becomes one: a refusal by the rule is final too, and comes first, as under
    // the lock.
    if let (Some(expected), None) = (expected_last_seq, remembered) {
        if xact::written(map.as_str()).is_none() {
            statements::connect(|session| {
                if let Some((next_seq, is_stream)) =
                    state::next_seq_for_writer(session, map.as_str())
                {
                    // (whether it would make the map a stream is decided under the lock)
                    stream::admission(is_stream, next_seq, message).or_raise(map.as_str());
                    if expected < next_seq - 1 {
                        unexpected_last_seq(map, expected, next_seq - 1);
                    }
                }
            });
        }
    }
    // (whether the direct write found the map, and holds its row now: its chunk was full)
    let map_found = way == Way::Direct && remembered.is_none() && {
        statements::check_sql_objects_once();
        let at = xact::written(map.as_str());
        match direct_append::write(map.as_str(), record, max_chunk_bytes, at, expected_last_seq) {
            direct_append::Outcome::Appended(appended) => {
                return Registered {
                    seq: wrote_directly(map, appended),
                    duplicate: false,
                    record: Some(appended.record),
                };
            }
            direct_append::Outcome::NotAsExpected { actual } => {
                if let Some(expected) = expected_last_seq {
                    unexpected_last_seq(map, expected, actual);
                }
                true
            }
            direct_append::Outcome::Full => true,
            direct_append::Outcome::Declined => false,
        }
    };
    // A map the message store appends to (its ids kept, not remembered) is a stream, started by
    // its first message: where the direct write declined, perhaps for want of the map. Only a
    // map this writer does not see is started: `start` of a map that exists would look at its
    // name's lock, which a drop takes before waiting for the map's row, the row this transaction
    // may hold already (a deadlock where the write should wait for the drop's end, or go on).
    if message
        && !map_found
        && !statements::connect(|session| state::visible_to_writer(session, map.as_str()))
    {
        start(map, input::DEFAULT_CHUNK_SIZE);
    }
    let written = statements::connect(|session| {
        let state = lock::lock_existing_map(session, map);
        stream::admission(state.message_stream, state.current.next_seq, message)
            .or_raise(map.as_str());
        if let Some(seq) =
            remembered.and_then(|id| record_ids::appended_as(session, map.as_str(), id))
        {
            return UnderLock::AppendedBefore {
                seq,
                tid: state.tid,
            };
        }
        let actual = state.current.next_seq - 1;
        if let Some(expected) = expected_last_seq.filter(|expected| *expected != actual) {
            unexpected_last_seq(map, expected, actual);
        }
        let state = make_room(session, map, state, payload.bytes(), max_chunk_bytes);
        let written = match way {
            Way::Direct => match direct_append::write(
                map.as_str(),
                record,
                max_chunk_bytes,
                Some(state.tid),
                None,
            ) {
                direct_append::Outcome::Appended(appended) => Written {
                    seq: appended.seq,
                    tid: appended.tid,
                    announce_on: state.announce_on.clone(),
                    followed: appended.followed,
                    record: Some(appended.record),
                },
                direct_append::Outcome::Declined => {
                    writes::write_record(session, map.as_str(), &state, record)
                }
                // the lock is held and the chunk has room: the row cannot have changed
                direct_append::Outcome::Full | direct_append::Outcome::NotAsExpected { .. } => {
                    writes::lost_state_row(map.as_str())
                }
            },
            Way::Sql => writes::write_record(session, map.as_str(), &state, record),
        };
        if let Some(id) = remembered {
            record_ids::remember(session, map.as_str(), id, written.seq);
        }
        record_move(session, map, written.followed);
        UnderLock::Wrote(written)
    });
    match written {
        UnderLock::Wrote(written) => {
            let (seq, record) = (written.seq, written.record);
            wrote(map, written);
            Registered {
                seq,
                duplicate: false,
                record,
            }
        }
        UnderLock::AppendedBefore { seq, tid } => {
            // the map's lock is held to the transaction's end, as by any write
            xact::remember_written(map.as_str(), tid);
            Registered {
                seq,
                duplicate: true,
                record: None,
            }
        }
    }
}

/// What an append did under the map's lock.
enum UnderLock {
    Wrote(Written),
    /// The id was appended before as `seq`; the state row (locked) is at `tid`.
    AppendedBefore {
        seq: i64,
        tid: pgrx::pg_sys::ItemPointerData,
    },
}

/// What the rest of the transaction needs of a record written directly at the first try: the
/// map's move (a followed map, once per transaction) and its channel (an announced map), each
/// read by a statement only where the map needs it.
fn wrote_directly(map: MapName<'_>, appended: direct_append::Appended) -> i64 {
    let announce_on = if (appended.followed && !xact::moved(map.as_str())) || appended.announced {
        statements::connect(|session| {
            record_move(session, map, appended.followed);
            appended
                .announced
                .then(|| writes::announced_on(session, map.as_str(), appended.tid))
                .flatten()
        })
    } else {
        None
    };
    wrote(
        map,
        Written {
            seq: appended.seq,
            tid: appended.tid,
            announce_on,
            followed: appended.followed,
            record: Some(appended.record),
        },
    );
    appended.seq
}

fn unexpected_last_seq(map: MapName<'_>, expected: i64, actual: i64) -> ! {
    ChunkedError::UnexpectedLastSeq {
        map: map.as_str().to_owned(),
        expected,
        actual,
    }
    .raise()
}

/// Makes room for a record of `bytes` bytes in the map whose lock the caller holds: archives
/// its current chunk if full (and applies its retention), and returns the state to write at.
fn make_room(
    session: &Session,
    map: MapName<'_>,
    state: MapState,
    bytes: usize,
    max_chunk_bytes: usize,
) -> MapState {
    if state.current.fits(bytes, max_chunk_bytes) {
        return state;
    }
    let archived = archive_current(session, map, &state, max_chunk_bytes);
    // one chunk (or the pieces of an oversized one) archived: at most one more removed
    retention::apply_locked(session, map.as_str(), archived, Some(2)).0
}

/// Archives the current chunk (the caller holds the map's lock) and returns the state of the
/// new, empty, current chunk. A chunk holding more bytes than a chunk may (stored before the
/// byte limit existed, or the setting was lowered since) is archived in as many pieces as the
/// limit asks, each with its own token, chained like any other chunks.
fn archive_current(
    session: &Session,
    map: MapName<'_>,
    state: &MapState,
    max_chunk_bytes: usize,
) -> MapState {
    let chunk = state.current;
    let oversized = usize::try_from(chunk.bytes).map_or(true, |bytes| bytes > max_chunk_bytes);
    let pieces: Vec<std::ops::Range<i64>> = if oversized {
        let sizes =
            writes::current_payload_sizes(session, map.as_str(), chunk.first_seq..chunk.next_seq);
        chunking::cut(&sizes, usize::MAX, max_chunk_bytes)
            .into_iter()
            .map(|piece| chunk.first_seq + to_i64(piece.start)..chunk.first_seq + to_i64(piece.end))
            .collect()
    } else {
        std::iter::once(chunk.first_seq..chunk.next_seq).collect()
    };
    let mut newest = state.newest_archived_token.clone();
    for piece in &pieces {
        writes::archive_current_range(
            session,
            map.as_str(),
            piece.clone(),
            chunk.size,
            newest.as_deref(),
        );
        newest = Some(archived_token(piece.start));
    }
    let newest = newest.unwrap_or_else(|| archived_token(chunk.first_seq));
    writes::close_current(session, map.as_str(), state, &newest, to_i64(pieces.len()))
}

/// Appends every payload in order under one lock; returns the sequence of each (contiguous).
/// Full chunks of the batch are archived as they are, without passing through the current
/// chunk's table; each payload is sent to the server once.
pub fn append_many(map: MapName<'_>, payloads: JsonbArray<'_>) -> Vec<Registered> {
    let payloads = batch_payloads(payloads);
    let ids = vec![None; payloads.len()];
    append_batch(map, &payloads, &ids)
}

/// [`append_many`] with an id per payload (`None`: none): a payload whose id the map remembers,
/// or that an earlier payload of the batch has, appends nothing and answers with that record's
/// sequence (see `record_ids`).
pub fn append_many_once(
    map: MapName<'_>,
    payloads: JsonbArray<'_>,
    ids: &[Option<&str>],
) -> Vec<Registered> {
    let payloads = batch_payloads(payloads);
    if ids.len() != payloads.len() {
        ChunkedError::IdsDoNotMatchPayloads {
            payloads: payloads.len(),
            ids: ids.len(),
        }
        .raise()
    }
    append_batch(map, &payloads, ids)
}

/// The payloads of a batch, each measured and within the limit.
fn batch_payloads(payloads: JsonbArray<'_>) -> Vec<Payload<'_>> {
    let limit = guc::payload_limit();
    payloads
        .elements()
        .into_iter()
        .enumerate()
        .map(|(index, element)| {
            let payload = element
                .ok_or(ChunkedError::NullElement {
                    argument: "payloads",
                    index: index + 1,
                })
                .or_raise();
            input::payload(payload, limit).or_raise()
        })
        .collect()
}

fn append_batch(
    map: MapName<'_>,
    all: &[Payload<'_>],
    all_ids: &[Option<&str>],
) -> Vec<Registered> {
    let max_chunk_bytes = guc::max_chunk_bytes();
    let at = transaction_time();
    let mut memory = BatchMemory::new();
    let (plan, first, tid, announce_on) = statements::connect(|session| {
        let mut state = lock::lock_existing_map(session, map);
        // a batch holds no messages
        stream::admission(state.message_stream, state.current.next_seq, false)
            .or_raise(map.as_str());
        let known = if all_ids.iter().any(Option::is_some) {
            memory.with_arrays(&[], all_ids, |_, ids| {
                ids.map(|ids| record_ids::appended_as_any(session, map.as_str(), ids))
                    .unwrap_or_default()
            })
        } else {
            Default::default()
        };
        let plan = record_ids::plan_batch(all_ids, &known);
        let (payloads, ids): (Vec<Payload<'_>>, Vec<Option<&str>>) = plan
            .iter()
            .zip(all.iter().zip(all_ids))
            .filter(|(answer, _)| matches!(answer, InBatch::New(_)))
            .map(|(_, (payload, id))| (*payload, *id))
            .unzip();
        let first = state.current.next_seq;
        if payloads.is_empty() {
            return (plan, first, state.tid, None);
        }
        let sizes: Vec<usize> = payloads.iter().map(|p| p.bytes()).collect();
        let Batch { fill, chunks } =
            chunking::plan_batch(&state.current, state.chunk_size, &sizes, max_chunk_bytes);
        let mut archived = 0_i64;
        let write_range = |memory: &mut BatchMemory,
                           range: std::ops::Range<usize>,
                           write: &mut dyn FnMut(BatchRecords<'_>)| {
            memory.with_arrays(&payloads[range.clone()], &ids[range], |payloads, ids| {
                write(BatchRecords { payloads, ids, at })
            })
        };

        if fill > 0 {
            let next_seq = state.current.next_seq;
            write_range(&mut memory, 0..fill, &mut |records| {
                writes::append_payloads(session, map.as_str(), next_seq, records)
            });
            state.current.next_seq += to_i64(fill);
            state.current.bytes += total_bytes(&sizes[..fill]);
        }
        if let Some((last, full)) = chunks.split_last() {
            state = archive_current(session, map, &state, max_chunk_bytes);
            for chunk in full {
                let first_seq = state.current.next_seq;
                let (chunk_size, prev_token) =
                    (state.chunk_size, state.newest_archived_token.clone());
                write_range(&mut memory, chunk.clone(), &mut |records| {
                    writes::archive_payloads(
                        session,
                        map.as_str(),
                        first_seq,
                        chunk_size,
                        prev_token.as_deref(),
                        records,
                    )
                });
                state.newest_archived_token = Some(archived_token(first_seq));
                state.current.next_seq += to_i64(chunk.len());
                state.current.first_seq = state.current.next_seq;
                archived += 1;
            }
            let next_seq = state.current.next_seq;
            write_range(&mut memory, last.clone(), &mut |records| {
                writes::append_payloads(session, map.as_str(), next_seq, records)
            });
            state.current.size = state.chunk_size;
            state.current.next_seq += to_i64(last.len());
            state.current.bytes = total_bytes(&sizes[last.clone()]);
        }
        state.tid = writes::advance_state(session, map.as_str(), &state, archived);
        if ids.iter().any(Option::is_some) {
            memory.with_arrays(&[], &ids, |_, ids| {
                if let Some(ids) = ids {
                    record_ids::remember_from(session, map.as_str(), first, ids);
                }
            });
        }
        if !chunks.is_empty() {
            record_ids::keep_window(session, map.as_str(), &state);
            // `archived + 1` chunks archived (the current one, and the batch's full ones): at
            // most one more than that removed
            let bound = usize::try_from(archived)
                .unwrap_or(usize::MAX)
                .saturating_add(2);
            state = retention::apply_locked(session, map.as_str(), state, Some(bound)).0;
        }
        record_move(session, map, state.followed);
        (plan, first, state.tid, state.announce_on.clone())
    });
    let new = plan
        .iter()
        .filter(|answer| matches!(answer, InBatch::New(_)))
        .count();
    if new == 0 {
        xact::remember_written(map.as_str(), tid);
    } else {
        wrote(
            map,
            Written {
                seq: first + to_i64(new) - 1,
                tid,
                announce_on,
                followed: false,
                record: None,
            },
        );
    }
    plan.into_iter()
        .map(|answer| match answer {
            InBatch::New(n) => Registered {
                seq: first + to_i64(n),
                duplicate: false,
                record: None,
            },
            InBatch::SameAs(n) => Registered {
                seq: first + to_i64(n),
                duplicate: true,
                record: None,
            },
            InBatch::Known(seq) => Registered {
                seq,
                duplicate: true,
                record: None,
            },
        })
        .collect()
}

/// Changes the chunk size of a map under its lock (so it cannot race an append's rollover).
/// The current chunk keeps its size unless it holds no record yet.
pub fn set_chunk_size(map: MapName<'_>, chunk_size: i32) {
    let tid = statements::connect(|session| {
        let state = lock::lock_existing_map(session, map);
        writes::set_chunk_size(session, map.as_str(), &state, chunk_size)
    });
    xact::remember_written(map.as_str(), tid);
}

/// Sets how many of its newest records' ids the map remembers (`None`: every record's it
/// keeps), and forgets at once those outside the new window (see `record_ids`).
pub fn set_id_window(map: MapName<'_>, window: Option<i64>) {
    let tid = statements::connect(|session| {
        let state = lock::lock_existing_map(session, map);
        let state = writes::set_id_window(session, map.as_str(), &state, window);
        record_ids::keep_window(session, map.as_str(), &state);
        state.tid
    });
    xact::remember_written(map.as_str(), tid);
}

/// Turns notifications of committed appends on or off. What the transaction's commit sends is
/// decided at its commit, with the setting as the transaction leaves it: turned on after this
/// transaction appended to the map, its commit announces those appends; turned off, nothing.
pub fn set_notify(map: MapName<'_>, enabled: bool) {
    let (tid, channel, appended_up_to) = statements::connect(|session| {
        let state = lock::lock_existing_map(session, map);
        let (tid, channel) = writes::set_notify(session, map.as_str(), &state, enabled);
        // The newest record is in the current chunk (an append always leaves it there); when
        // this transaction inserted it, the transaction appended to the map.
        let newest = state.current.next_seq - 1;
        let appended = enabled
            && newest >= 1
            && writes::inserted_by_this_transaction(session, map.as_str(), newest);
        (tid, channel, appended.then_some(newest))
    });
    xact::remember_written(map.as_str(), tid);
    match (enabled, channel, appended_up_to) {
        (true, Some(channel), Some(last_seq)) => {
            xact::announce_at_commit(map.as_str(), Announcement { channel, last_seq })
        }
        (true, _, _) => {}
        (false, _, _) => xact::announce_nothing(map.as_str()),
    }
}

/// Removes a whole map under its lock; `false` when it did not exist.
pub fn drop_map(map: MapName<'_>) -> bool {
    statements::connect(|session| {
        lock::lock_name(session, map);
        if lock::lock_map_for_drop(session, map).is_none() {
            return false;
        }
        // every storage table is written: none may be left on this node (Citus)
        let distributed = citus::tables_are_distributed(session);
        writes::drop_map(session, map.as_str(), !distributed);
        xact::forget_dropped(map.as_str());
        true
    })
}

/// Records, for a map a consumer follows, that it moved in this transaction (once per
/// transaction: see `feed`).
/// Never on a Citus cluster, where no moves are recorded (see `feed`), even for a map whose
/// state row says it is followed (a single node's data restored into a distributed database).
fn record_move(session: &Session, map: MapName<'_>, followed: bool) {
    if followed && !xact::moved(map.as_str()) && !citus::tables_are_distributed(session) {
        writes::record_change(session, map.as_str());
        xact::remember_moved(map.as_str());
    }
}

/// What the rest of the transaction needs to know of an append.
fn wrote(map: MapName<'_>, written: Written) {
    xact::remember_written(map.as_str(), written.tid);
    if let Some(channel) = written.announce_on {
        let last_seq = written.seq;
        xact::announce_at_commit(map.as_str(), Announcement { channel, last_seq });
    }
}

fn to_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn total_bytes(sizes: &[usize]) -> i64 {
    sizes.iter().map(|size| to_i64(*size)).sum()
}
