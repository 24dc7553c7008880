//! The feed across maps: consumers that follow every map of a category (`order-17`, `order-18`,
//! … are of category `order`), or every map, including maps started later, each record
//! delivered once per consumer whose polls commit, in sequence order per map.
//!
//! **How no committed record is missed, without serialising writers.** A map's sequences are
//! contiguous and assigned under its lock, so a position per map (the last sequence the
//! consumer acknowledged) cannot skip a record; what the feed must learn is *which maps moved*,
//! in an order that no commit can overtake. The first append of a transaction to a followed map
//! writes the transaction's id into the map's row of `map_change` (one row per map, updated
//! under the map's lock that the writer holds anyway: no writer waits for another map's). A
//! member of a consumer keeps a horizon: every move with an id below it has been looked at.
//! A poll takes the moves at or above its horizon (a transaction id that committed late is
//! still there: its id is at or above the horizon, because the horizon never passes the xmin
//! of a poll's snapshot, below which nothing can still commit — the transaction horizon of
//! PgQ and its heirs), delivers every record after the consumer's position in each map those
//! moves name, and moves its horizon to the lesser of that xmin and the first move it could not
//! finish. A move of a map written over by a later transaction carries the later id, which is
//! at or above the horizon for the same reason.
//!
//! **Which maps are followed.** `map_state.followed`, set by `chunked_subscribe` for the maps
//! of its category under each map's row lock (it waits for a transaction appending to one), and
//! by `chunked_start` for a new map when a consumer follows its category. Subscribing and
//! starting exclude each other (the feed lock, `name_lock::lock_feed`), so no map is started
//! unfollowed by a subscription it could not see. Appends to maps nobody follows do nothing
//! more.
//!
//! **Acknowledgement.** A poll moves the consumer's positions and the member's horizon in the
//! caller's transaction: its commit acknowledges what it returned, its rollback hands the same
//! records out again. Two polls of the same member never run at once (the second returns
//! nothing); members of a group share the consumer's positions, each map belonging to one
//! member (a stable hash of its name), so a map is never delivered to two members at once and
//! changing the group size neither repeats nor skips an acknowledged record.

use crate::citus;
use crate::error::{ChunkedError, OrRaise};
use crate::input::{self, ConsumerName, MapName};
use crate::jsonb::Jsonb;
use crate::lock;
use crate::pg::spi::{CallerMemory, Session};
use crate::statements;
use crate::statements::feed as feed_statements;
use crate::statements::reads::{Record, Records};

/// One delivered row: a record, or (payload `None`) the sign that records up to `seq` were
/// trimmed before the consumer had them.
pub struct Delivered<'fcx> {
    pub map: String,
    pub seq: i64,
    pub payload: Option<Jsonb<'fcx>>,
    /// The record's time and id (see `statements::reads::Record`).
    pub at: Option<i64>,
    pub id: Option<String>,
}

/// Whether a map started now is followed: on the newest committed state, once no subscription
/// can be under way (the feed lock, shared). Never on a Citus cluster, where no moves are
/// recorded (see [`poll_by_positions`]).
pub fn followed_from_its_start(session: &Session, map: MapName<'_>) -> bool {
    if citus::maps_are_distributed(session) {
        return false;
    }
    lock::lock_feed_for_start(map);
    feed_statements::followed(session, map.as_str())
}

/// After the start of a followed map: every consumer that follows it gets its position now.
pub fn positions_for_a_new_map(session: &Session, map: MapName<'_>) {
    session.run_on_latest_write(&feed_statements::POSITIONS_FOR_A_NEW_MAP, (map.as_str(),));
}

/// Whether the storage is distributed (a Citus cluster, where the feed runs on the coordinator:
/// consumers and their members are kept there, positions with the maps on the workers); on a
/// worker, 0A000.
fn on_citus(session: &Session) -> bool {
    let distributed = citus::tables_are_distributed(session);
    if distributed && !citus::statements::citus_is_coordinator(session) {
        ChunkedError::FeedOffCoordinator.raise();
    }
    distributed
}

/// Creates a consumer; `false` (and no change) when it exists.
pub fn subscribe(consumer: ConsumerName<'_>, category: Option<&str>, from_start: bool) -> bool {
    let category = input::category(category).or_raise();
    statements::connect(|session| {
        let on_citus = on_citus(session);
        lock::lock_feed_exclusive(consumer);
        if session
            .run_on_latest_write(
                &feed_statements::CREATE_CONSUMER,
                (consumer.as_str(), category, from_start),
            )
            .is_empty()
        {
            return false;
        }
        session.run_on_latest_write(&feed_statements::BASE_HORIZON, (consumer.as_str(),));
        if !on_citus {
            session.run_on_latest_write(&feed_statements::FOLLOW_CATEGORY, (category,));
        }
        let positions = if from_start {
            &feed_statements::POSITIONS_FROM_START
        } else {
            &feed_statements::POSITIONS_AT_NEWEST
        };
        session.run_on_latest_write(positions, (consumer.as_str(), category));
        true
    })
}

/// Removes a consumer, its positions and horizons; `false` when there was none.
pub fn unsubscribe(consumer: ConsumerName<'_>) -> bool {
    statements::connect(|session| {
        let on_citus = on_citus(session);
        lock::lock_feed_exclusive(consumer);
        // the consumer first: its removal waits for the polls that hold it, so that the
        // positions they made are there to be removed next
        let existed = !session
            .run_on_latest_write(&feed_statements::DELETE_CONSUMER, (consumer.as_str(),))
            .is_empty();
        session.run_on_latest_write(&feed_statements::DELETE_POSITIONS, (consumer.as_str(),));
        if existed && !on_citus {
            session.run_on_latest_write(&feed_statements::UNFOLLOW, ());
        }
        existed
    })
}

/// The next records `member` of `group_size` has not had, at most `max_records`, each map's in
/// sequence order; moves the consumer's positions and the member's horizon in the caller's
/// transaction.
pub fn poll<'fcx>(
    caller: CallerMemory<'fcx>,
    consumer: ConsumerName<'_>,
    max_records: i32,
    (member, group_size): (i32, i32),
) -> Vec<Delivered<'fcx>> {
    let consumer = consumer.as_str();
    statements::connect(|session| {
        let on_citus = on_citus(session);
        let Some(category) = feed_statements::consumer(session, consumer) else {
            return Err(ChunkedError::ConsumerNotFound {
                consumer: consumer.to_owned(),
            });
        };
        let category = category.as_deref();
        let budget = i64::from(max_records);
        if on_citus {
            return Ok(poll_by_positions(
                session,
                caller,
                consumer,
                category,
                budget,
                (member, group_size),
            ));
        }
        let horizon = match member_horizon(session, consumer, category, (member, group_size)) {
            Some(horizon) => horizon,
            // another poll of this member is under way: nothing for this one
            None => return Ok(Vec::new()),
        };
        let (xmin, candidates) = feed_statements::candidates(
            session,
            consumer,
            horizon,
            category,
            (member, group_size),
            budget + 1,
        );
        let mut delivered = Vec::new();
        let mut left = budget;
        // the first move this poll did not finish: the horizon stays at or below it
        let mut unfinished: Option<i64> = None;
        let mut hold = |xid: Option<i64>| {
            if let Some(xid) = xid {
                unfinished = Some(unfinished.map_or(xid, |held: i64| held.min(xid)));
            }
        };
        if i64::try_from(candidates.len()).unwrap_or(i64::MAX) > budget {
            hold(candidates.last().and_then(|last| last.xid));
        }
        let mut seen: Vec<&str> = Vec::new();
        for candidate in &candidates {
            if seen.contains(&candidate.map.as_str()) {
                continue;
            }
            seen.push(candidate.map.as_str());
            if left == 0 {
                hold(candidate.xid);
                continue;
            }
            match deliver(session, caller, consumer, &candidate.map, left) {
                Some((records, finished)) => {
                    left -= i64::try_from(records.len()).unwrap_or(i64::MAX);
                    if !finished {
                        hold(candidate.xid);
                    }
                    delivered.extend(records);
                }
                // another poll holds the consumer's position in this map
                None => hold(candidate.xid),
            }
        }
        let next = unfinished.map_or(xmin, |held| held.min(xmin));
        session.run(
            &feed_statements::MOVE_HORIZON,
            (consumer, group_size, member, next),
        );
        Ok(delivered)
    })
    .or_raise()
}

/// On a Citus cluster: a transaction's id and its snapshot's xmin are its node's, and a
/// transaction block on the coordinator commits its part on a worker (`COMMIT PREPARED`) after
/// the coordinator's own commit, so no horizon of transaction ids can say which moves every
/// node has made visible. The poll looks instead, on every worker at once, for the maps whose
/// newest sequence is past the consumer's position (`MAPS_BEHIND`), and delivers from each as
/// a single node does: the positions alone keep every committed record delivered once, and the
/// caller's commit (Citus's two-phase commit over the workers it touched) acknowledges them.
fn poll_by_positions<'fcx>(
    session: &Session,
    caller: CallerMemory<'fcx>,
    consumer: &str,
    category: Option<&str>,
    budget: i64,
    (member, group_size): (i32, i32),
) -> Vec<Delivered<'fcx>> {
    if !member_locked_on_citus(session, consumer, (member, group_size)) {
        // another poll of this member is under way: nothing for this one
        return Vec::new();
    }
    let mut delivered = Vec::new();
    let mut left = budget;
    for map in
        feed_statements::maps_behind(session, consumer, category, (member, group_size), budget)
    {
        if left <= 0 {
            break;
        }
        // `None`: another poll holds the consumer's position in this map
        if let Some((records, _finished)) = deliver(session, caller, consumer, &map, left) {
            left -= i64::try_from(records.len()).unwrap_or(i64::MAX);
            delivered.extend(records);
        }
    }
    delivered
}

/// On a Citus cluster, the member's row locked for this poll (made by its first poll);
/// `false` when another poll holds it.
fn member_locked_on_citus(
    session: &Session,
    consumer: &str,
    (member, group_size): (i32, i32),
) -> bool {
    lock_member(session, consumer, (member, group_size), || {
        session.run(
            &feed_statements::ADD_MEMBER_ON_CITUS,
            (consumer, group_size, member),
        );
    })
    .is_some()
}

/// The member's horizon, locked for this poll (made on its first poll; for a consumer restored
/// from a dump, after it starts over from its positions); `None` when another poll holds it.
fn member_horizon(
    session: &Session,
    consumer: &str,
    category: Option<&str>,
    (member, group_size): (i32, i32),
) -> Option<i64> {
    lock_member(session, consumer, (member, group_size), || {
        let has_horizon = session
            .run(&feed_statements::HAS_HORIZON, (consumer,))
            .first()
            .is_some_and(|(has,)| has);
        if !has_horizon {
            session.run(&feed_statements::RESTORED_HORIZON, (consumer, category));
        }
        session.run(&feed_statements::ADD_MEMBER, (consumer, group_size, member));
    })
}

/// The member's row locked for this poll, its horizon; made by `add` on the member's first poll.
/// `None` when another poll holds it. Only a member's very first poll can wait: for another
/// first poll of the same member.
fn lock_member(
    session: &Session,
    consumer: &str,
    (member, group_size): (i32, i32),
    add: impl FnOnce(),
) -> Option<i64> {
    let lock = || {
        session
            .run(
                &feed_statements::MEMBER_HORIZON,
                (consumer, group_size, member),
            )
            .first()
            .map(|(horizon,)| horizon)
    };
    if let Some(horizon) = lock() {
        return Some(horizon);
    }
    let exists = session
        .run(
            &feed_statements::MEMBER_EXISTS,
            (consumer, group_size, member),
        )
        .first()
        .is_some_and(|(exists,)| exists);
    if exists {
        // held by another poll
        return None;
    }
    add();
    lock()
}

/// Delivers up to `budget` rows of `map` after the consumer's position, and moves the position;
/// whether it read the map to its end. `None` when another poll holds the position.
fn deliver<'fcx>(
    session: &Session,
    caller: CallerMemory<'fcx>,
    consumer: &str,
    map: &str,
    budget: i64,
) -> Option<(Vec<Delivered<'fcx>>, bool)> {
    let (mut position, position_incarnation) =
        feed_statements::lock_position(session, consumer, map)?;
    // dropped since it was looked at: nothing more (a map started again under the name is
    // looked at through its own move)
    let Some((next_seq, oldest_seq, incarnation)) = feed_statements::extent_now(session, map)
    else {
        return Some((Vec::new(), true));
    };
    if position_incarnation != incarnation {
        // a position in a map of the same name that was dropped: this one is read from its start
        position = 0;
    }
    let mut rows = Vec::new();
    let mut budget = budget;
    let gap = |rows: &mut Vec<Delivered<'fcx>>, through: i64, budget: &mut i64| {
        // trimmed before the consumer had them: said, never skipped in silence
        rows.push(Delivered {
            map: map.to_owned(),
            seq: through,
            payload: None,
            at: None,
            id: None,
        });
        *budget -= 1;
    };
    if position < oldest_seq - 1 {
        gap(&mut rows, oldest_seq - 1, &mut budget);
        position = oldest_seq - 1;
    }
    if budget > 0 && position < next_seq - 1 {
        let end = next_seq.min(position.saturating_add(budget).saturating_add(1));
        let records: Records<'fcx> = session
            .run(&feed_statements::RECORDS_NOW, (map, position, end, budget))
            .iter()
            .map(|(seq, payload, at, id)| Record {
                seq,
                payload: payload.copy_to(caller),
                at,
                id,
            })
            .collect();
        // a trim that committed since the map's extent was read (this statement has a snapshot
        // of its own under READ COMMITTED): the records start later than the position
        if let Some(first) = records.first() {
            if first.seq > position + 1 {
                gap(&mut rows, first.seq - 1, &mut budget);
            }
        }
        for record in records
            .into_iter()
            .take(usize::try_from(budget.max(0)).unwrap_or(0))
        {
            position = record.seq;
            rows.push(Delivered {
                map: map.to_owned(),
                seq: record.seq,
                payload: Some(record.payload),
                at: record.at,
                id: record.id,
            });
        }
    }
    let finished = position >= next_seq - 1;
    session.run(
        &feed_statements::MOVE_POSITION,
        (consumer, map, position, finished, incarnation),
    );
    Some((rows, finished))
}
