//! The statements of the feed across maps (see `feed`): consumers, their positions and
//! horizons, and the maps that moved. A map's category is the part of its name before its first
//! `-` (the whole name when it has none), `split_part(map, '-', 1)`; a consumer's category NULL
//! follows every map. A map belongs to member `m` of a group of `g` when
//! `hashtextextended(map, 0)` is `m` modulo `g` (PostgreSQL's stable 64-bit hash of text, the
//! one hash partitioning uses: the same on every version and platform).

use crate::pg::spi::{Bool, Int4, Int8, NotNull, Nullable, Session, Text};
use crate::statements;

/// Whether a consumer of category `$1` (NULL: every map) follows `$2`'s category.
macro_rules! follows {
    ($category:literal, $map:literal) => {
        concat!(
            "(",
            $category,
            " IS NULL OR ",
            $category,
            " = split_part(",
            $map,
            ", '-', 1))"
        )
    };
}

/// A subscription's position replaces one a consumer of the same name left behind (an
/// unsubscription whose snapshot could not see a position an open poll was making).
macro_rules! over_a_left_position {
    () => {
        "ON CONFLICT (consumer, map) DO UPDATE
         SET seq = excluded.seq, pending = excluded.pending, incarnation = excluded.incarnation"
    };
}

/// A map the poll looks at: one that moved since the member's horizon, or one of the
/// consumer's positions still catching up, with what is left to deliver.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub map: String,
    /// The transaction id of the map's latest move (`None`: a position catching up).
    pub xid: Option<i64>,
}

statements! {
    /// Whether any consumer follows maps of `$1`'s category, on the newest committed state.
    pub FOLLOWED: Statement<(Text,), (NotNull<Bool>,)> = read(concat!(
        "SELECT EXISTS (SELECT 1 FROM chunked_map.consumer AS c WHERE ",
        follows!("c.category", "$1"), ")"
    ));

    /// Creates the consumer; no row when it exists.
    pub CREATE_CONSUMER: Statement<(Text, Text, Bool), (NotNull<Bool>,)> = write(
        "INSERT INTO chunked_map.consumer (consumer, category, from_start)
         VALUES ($1, $2, $3)
         ON CONFLICT (consumer) DO NOTHING
         RETURNING true"
    );

    /// The consumer's own horizon (group size 0): the oldest transaction id any member starts
    /// from. Every append that sees the consumer's maps followed has an id at or above it: the
    /// xmin of the snapshot the subscription made its changes with. And the horizon of the one
    /// member of a group of 1 (the default), made now so that its first polls never wait for
    /// each other (a member of another group is made by its first poll, which may wait for a
    /// concurrent first poll of the same member).
    pub BASE_HORIZON: Statement<(Text,), ()> = write(
        "INSERT INTO chunked_map.consumer_horizon (consumer, group_size, member, horizon)
         SELECT $1, g, 0, pg_snapshot_xmin(pg_current_snapshot())
         FROM unnest(ARRAY[0, 1]) AS g"
    );

    /// Marks the maps of category `$1` followed (waiting for the lock of any map another
    /// transaction is appending to, so that no append of it is left unrecorded).
    pub FOLLOW_CATEGORY: Statement<(Text,), ()> = write(concat!(
        "UPDATE chunked_map.map_state AS s SET followed = true
         WHERE NOT s.followed AND ", follows!("$1::text", "s.map")
    ));

    /// Positions of a consumer that starts at each map's newest record.
    pub POSITIONS_AT_NEWEST: Statement<(Text, Text), ()> = write(concat!(
        "INSERT INTO chunked_map.consumer_position (consumer, map, seq, pending, incarnation)
         SELECT $1, s.map, s.next_seq - 1, false, s.incarnation
         FROM chunked_map.map_state AS s
         WHERE ", follows!("$2::text", "s.map"), "
         ", over_a_left_position!()
    ));

    /// Positions of a consumer that reads every map from its oldest kept record: each waits to
    /// be read to its end (`pending`), whether or not the map moves again.
    pub POSITIONS_FROM_START: Statement<(Text, Text), ()> = write(concat!(
        "INSERT INTO chunked_map.consumer_position (consumer, map, seq, pending, incarnation)
         SELECT $1, s.map, s.oldest_seq - 1, s.next_seq > s.oldest_seq, s.incarnation
         FROM chunked_map.map_state AS s
         WHERE ", follows!("$2::text", "s.map"), "
         ", over_a_left_position!()
    ));

    /// The positions of every consumer that follows a map just started (at its start: a poll
    /// never has to make one, nor wait for another poll making it). A position left from an
    /// earlier map of the name stays, and counts as none (another incarnation): it is not
    /// inserted over, since a poll that holds it (an open poll that returned the dropped map's
    /// records) would make the insert wait for that poll's end.
    pub POSITIONS_FOR_A_NEW_MAP: Statement<(Text,), ()> = write(concat!(
        "INSERT INTO chunked_map.consumer_position (consumer, map, seq, pending, incarnation)
         SELECT c.consumer, s.map, 0, false, s.incarnation
         FROM chunked_map.map_state AS s
         JOIN chunked_map.consumer AS c ON ", follows!("c.category", "s.map"), "
         WHERE s.map = $1
           AND NOT EXISTS (SELECT 1 FROM chunked_map.consumer_position AS p
                           WHERE p.consumer = c.consumer AND p.map = s.map)
         ON CONFLICT (consumer, map) DO NOTHING"
    ));

    /// Removes the consumer's positions (a statement of their own: on a Citus cluster they are
    /// on the workers, the consumer and its horizons on the coordinator; also those of a
    /// consumer that is gone, left by a poll its removal could not see).
    pub DELETE_POSITIONS: Statement<(Text,), ()> = write(
        "DELETE FROM chunked_map.consumer_position AS p WHERE p.consumer = $1"
    );

    /// Removes the consumer and its horizons; no row when there was none.
    pub DELETE_CONSUMER: Statement<(Text,), (NotNull<Bool>,)> = write(
        "WITH horizons AS (
             DELETE FROM chunked_map.consumer_horizon AS h WHERE h.consumer = $1
         )
         DELETE FROM chunked_map.consumer AS c WHERE c.consumer = $1
         RETURNING true"
    );

    /// Maps no remaining consumer follows are not followed any more; with no consumer left,
    /// the record of moves is emptied.
    pub UNFOLLOW: Statement<(), ()> = write(concat!(
        "WITH emptied AS (
             DELETE FROM chunked_map.map_change AS m
             WHERE NOT EXISTS (SELECT 1 FROM chunked_map.consumer)
         )
         UPDATE chunked_map.map_state AS s SET followed = false
         WHERE s.followed
           AND NOT EXISTS (SELECT 1 FROM chunked_map.consumer AS c WHERE ",
        follows!("c.category", "s.map"), ")"
    ));

    /// The consumer, locked against its removal while it is polled: its category (NULL: every
    /// map) and whether it exists.
    pub CONSUMER: Statement<(Text,), (NotNull<Bool>, Nullable<Text>)> = write(
        "SELECT true, c.category FROM chunked_map.consumer AS c
         WHERE c.consumer = $1
         FOR KEY SHARE"
    );

    /// A member's horizon, made when it polls for the first time: from the lowest horizon of
    /// the consumer's other members (or its own, before any member polled), so that a member of
    /// a new group size starts where the slowest one of the old size was.
    pub ADD_MEMBER: Statement<(Text, Int4, Int4), ()> = write(
        "INSERT INTO chunked_map.consumer_horizon (consumer, group_size, member, horizon)
         SELECT $1, $2, $3, coalesce(
                    (SELECT min(h.horizon::text::numeric)::text::xid8
                     FROM chunked_map.consumer_horizon AS h
                     WHERE h.consumer = $1 AND h.group_size > 0),
                    (SELECT h.horizon FROM chunked_map.consumer_horizon AS h
                     WHERE h.consumer = $1 AND h.group_size = 0))
         WHERE EXISTS (SELECT 1 FROM chunked_map.consumer_horizon AS h WHERE h.consumer = $1)
         ON CONFLICT (consumer, group_size, member) DO NOTHING"
    );

    /// The member's horizon, locked for this poll; no row when another poll of the same member
    /// holds it (or the consumer has no horizon at all: restored from a dump, see
    /// [`RESTORED_HORIZON`]).
    pub MEMBER_HORIZON: Statement<(Text, Int4, Int4), (NotNull<Int8>,)> = write(
        "SELECT h.horizon::text::bigint FROM chunked_map.consumer_horizon AS h
         WHERE h.consumer = $1 AND h.group_size = $2 AND h.member = $3
         FOR UPDATE SKIP LOCKED"
    );

    /// Whether the member has a horizon (committed, or this transaction's).
    pub MEMBER_EXISTS: Statement<(Text, Int4, Int4), (NotNull<Bool>,)> = write(
        "SELECT EXISTS (SELECT 1 FROM chunked_map.consumer_horizon AS h
                        WHERE h.consumer = $1 AND h.group_size = $2 AND h.member = $3)"
    );

    /// Whether the consumer has any horizon (none after a restore: horizons are transaction ids,
    /// which mean nothing in another cluster, and are not dumped).
    pub HAS_HORIZON: Statement<(Text,), (NotNull<Bool>,)> = write(
        "SELECT EXISTS (SELECT 1 FROM chunked_map.consumer_horizon AS h WHERE h.consumer = $1)"
    );

    /// A restored consumer starts over from its positions: every map it follows is read to its
    /// end once (`pending`), from its position or, without one, from its start (a trimmed start
    /// is reported as such); and it gets a horizon of this cluster (two members' first polls
    /// after a restore may both get here: the second makes nothing).
    pub RESTORED_HORIZON: Statement<(Text, Text), ()> = write(concat!(
        "WITH kept AS (
             UPDATE chunked_map.consumer_position AS p SET pending = true WHERE p.consumer = $1
         ), added AS (
             INSERT INTO chunked_map.consumer_position (consumer, map, seq, pending, incarnation)
             SELECT $1, s.map, 0, true, s.incarnation
             FROM chunked_map.map_state AS s
             WHERE ", follows!("$2::text", "s.map"), "
             ON CONFLICT (consumer, map) DO NOTHING
         )
         INSERT INTO chunked_map.consumer_horizon (consumer, group_size, member, horizon)
         SELECT $1, g, 0, pg_snapshot_xmin(pg_current_snapshot())
         FROM unnest(ARRAY[0, 1]) AS g
         ON CONFLICT (consumer, group_size, member) DO NOTHING"
    ));

    /// What the member has to look at, in the order of the moves (positions catching up
    /// last), at most `$6`: maps of its category and its share that moved at or after its
    /// horizon `$2`, and its positions still catching up, each only if it has records after the
    /// consumer's position. The first row carries the snapshot's xmin, and is there also when no
    /// map is (with a NULL map): nothing below that xmin can still commit.
    pub CANDIDATES: Statement<(Text, Int8, Text, Int4, Int4, Int8), (NotNull<Int8>, Nullable<Text>, Nullable<Int8>)> = write(concat!(
        "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint, k.map, k.xid
         FROM (SELECT 1) AS one
         LEFT JOIN LATERAL (
             SELECT w.map, w.xid
             FROM (
                 SELECT m.map, m.xid::text::bigint AS xid
                 FROM chunked_map.map_change AS m
                 -- bounded on both sides (every visible move is below the snapshot's xmax), so
                 -- that a generic plan probes the index instead of guessing a third of the table
                 WHERE m.xid >= $2::text::xid8 AND m.xid < pg_snapshot_xmax(pg_current_snapshot())
                 UNION ALL
                 SELECT p.map, NULL
                 FROM chunked_map.consumer_position AS p
                 WHERE p.consumer = $1 AND p.pending
             ) AS w
             -- one probe of each primary key per map looked at (a lateral subquery and a scalar
             -- one: the plan does not depend on statistics the feed's small tables may not have)
             CROSS JOIN LATERAL (
                 SELECT s.next_seq, s.incarnation FROM chunked_map.map_state AS s WHERE s.map = w.map
             ) AS s
             WHERE ", follows!("$3::text", "w.map"), "
               AND ($5 = 1 OR ((hashtextextended(w.map, 0) % $5) + $5) % $5 = $4)
               AND s.next_seq - 1 > coalesce((SELECT p.seq FROM chunked_map.consumer_position AS p
                                              WHERE p.consumer = $1 AND p.map = w.map
                                                AND p.incarnation = s.incarnation), 0)
             ORDER BY w.xid NULLS LAST, w.map
             LIMIT $6
         ) AS k ON true"
    ));

    /// On a Citus cluster, a member's row, made by its first poll: its lock is what keeps two
    /// polls of the member apart. Its horizon means nothing there (no moves are recorded:
    /// [`MAPS_BEHIND`]); the xmin only fills the column.
    pub ADD_MEMBER_ON_CITUS: Statement<(Text, Int4, Int4), ()> = write(
        "INSERT INTO chunked_map.consumer_horizon (consumer, group_size, member, horizon)
         VALUES ($1, $2, $3, pg_snapshot_xmin(pg_current_snapshot()))
         ON CONFLICT (consumer, group_size, member) DO NOTHING"
    );

    /// On a Citus cluster, what the member has to look at: the maps of its category and its
    /// share with records after the consumer's position (none, or one of an earlier
    /// incarnation: the map is read from its start), in random order so that, with more maps
    /// behind than one poll takes, none waits for ever; at most `$5`. One statement on every
    /// worker at once (positions are colocated with the maps): it reads every map's state (no
    /// index covers the category, a part of the name), so its cost grows with the number of maps
    /// in the database, not with their records.
    pub MAPS_BEHIND: Statement<(Text, Text, Int4, Int4, Int8), (NotNull<Text>,)> = write(concat!(
        "SELECT s.map
         FROM chunked_map.map_state AS s
         LEFT JOIN chunked_map.consumer_position AS p ON p.map = s.map AND p.consumer = $1
         WHERE ", follows!("$2::text", "s.map"), "
           AND ($4 = 1 OR ((hashtextextended(s.map, 0) % $4) + $4) % $4 = $3)
           AND s.next_seq - 1 > CASE WHEN p.incarnation = s.incarnation THEN p.seq ELSE 0 END
         ORDER BY random()
         LIMIT $5"
    ));

    /// The consumer's position in the map, locked for this poll (made at 0 when the consumer
    /// has none: a map started after the subscription, read from its start); no row when
    /// another poll holds it.
    pub ADD_POSITION: Statement<(Text, Text), ()> = write(
        "INSERT INTO chunked_map.consumer_position (consumer, map, seq, pending, incarnation)
         SELECT $1, s.map, 0, false, s.incarnation FROM chunked_map.map_state AS s WHERE s.map = $2
         ON CONFLICT (consumer, map) DO NOTHING"
    );

    /// The consumer's position in the map, and the incarnation it belongs to.
    pub LOCK_POSITION: Statement<(Text, Text), (NotNull<Int8>, NotNull<Int8>)> = write(
        "SELECT p.seq, p.incarnation FROM chunked_map.consumer_position AS p
         WHERE p.consumer = $1 AND p.map = $2
         FOR UPDATE SKIP LOCKED"
    );

    /// Whether the consumer has a position in the map (committed, or this transaction's).
    pub POSITION_EXISTS: Statement<(Text, Text), (NotNull<Bool>,)> = write(
        "SELECT EXISTS (SELECT 1 FROM chunked_map.consumer_position AS p
                        WHERE p.consumer = $1 AND p.map = $2)"
    );

    /// Where the map's records are now, as a writer sees them: `(next_seq, oldest_seq,
    /// incarnation)`.
    pub EXTENT_NOW: Statement<(Text,), (NotNull<Int8>, NotNull<Int8>, NotNull<Int8>)> = write(
        "SELECT s.next_seq, s.oldest_seq, s.incarnation
         FROM chunked_map.map_state AS s WHERE s.map = $1"
    );

    /// Records `$2 < seq < $3`, oldest first, at most `$4`, on the snapshot a writer reads
    /// with (the forward read's statement, `reads::READ_FORWARD`).
    pub RECORDS_NOW: Statement<(Text, Int8, Int8, Int8), super::reads::RecordColumns> =
        write(super::reads::read_forward_sql!());

    /// Moves the consumer's position in the map (incarnation `$5`) to `$3`; `$4`: it read the
    /// map to its end. A position of an earlier incarnation becomes this one's.
    pub MOVE_POSITION: Statement<(Text, Text, Int8, Bool, Int8), ()> = write(
        "UPDATE chunked_map.consumer_position AS p
         SET seq = $3, pending = p.pending AND p.incarnation = $5 AND NOT $4, incarnation = $5
         WHERE p.consumer = $1 AND p.map = $2"
    );

    /// Moves the member's horizon up to `$4` (never down).
    pub MOVE_HORIZON: Statement<(Text, Int4, Int4, Int8), ()> = write(
        "UPDATE chunked_map.consumer_horizon AS h
         SET horizon = greatest(h.horizon, $4::text::xid8)
         WHERE h.consumer = $1 AND h.group_size = $2 AND h.member = $3"
    );
}

/// [`FOLLOWED`] on the newest committed state.
pub fn followed(session: &Session, map: &str) -> bool {
    session
        .run_on_latest(&FOLLOWED, (map,))
        .first()
        .is_some_and(|(followed,)| followed)
}

/// [`CANDIDATES`]: the snapshot's xmin and the candidates.
pub fn candidates(
    session: &Session,
    consumer: &str,
    horizon: i64,
    category: Option<&str>,
    (member, group_size): (i32, i32),
    limit: i64,
) -> (i64, Vec<Candidate>) {
    let rows = session.run(
        &CANDIDATES,
        (consumer, horizon, category, member, group_size, limit),
    );
    let mut xmin = 0;
    let mut candidates = Vec::new();
    for (snapshot_xmin, map, xid) in rows.iter() {
        xmin = snapshot_xmin;
        if let Some(map) = map {
            candidates.push(Candidate { map, xid });
        }
    }
    (xmin, candidates)
}

/// [`MAPS_BEHIND`].
pub fn maps_behind(
    session: &Session,
    consumer: &str,
    category: Option<&str>,
    (member, group_size): (i32, i32),
    limit: i64,
) -> Vec<String> {
    session
        .run(
            &MAPS_BEHIND,
            (consumer, category, member, group_size, limit),
        )
        .iter()
        .map(|(map,)| map)
        .collect()
}

pub fn consumer(session: &Session, consumer: &str) -> Option<Option<String>> {
    session
        .run(&CONSUMER, (consumer,))
        .first()
        .map(|(_, category)| category)
}

/// The consumer's position in the map, locked: `(seq, incarnation)`; `None` when another poll
/// holds it. A position is made by the subscription or the map's start; one missing (a
/// restored database, say) is made here, which only then can wait for another poll making it.
pub fn lock_position(session: &Session, consumer: &str, map: &str) -> Option<(i64, i64)> {
    let lock = || session.run(&LOCK_POSITION, (consumer, map)).first();
    if let Some(position) = lock() {
        return Some(position);
    }
    let exists = session
        .run(&POSITION_EXISTS, (consumer, map))
        .first()
        .is_some_and(|(exists,)| exists);
    if exists {
        return None;
    }
    session.run(&ADD_POSITION, (consumer, map));
    lock()
}

pub fn extent_now(session: &Session, map: &str) -> Option<(i64, i64, i64)> {
    session.run(&EXTENT_NOW, (map,)).first()
}
