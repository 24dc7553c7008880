-- chunked_map 0.3.1 -> 0.4.0: retention (chunked_trim, chunked_set_retention,
-- chunked_apply_retention) and the feed across maps (chunked_subscribe, chunked_poll, ...).
-- Nothing stored changes: archived chunks keep their rows and payloads, so every page reads
-- byte-identical after the update. Chunks archived by 0.3 get the time of this update as their
-- archiving time: an age limit counts from the update for them, so the update itself never
-- removes anything. tests/cluster/tests/upgrade.rs checks that an updated database ends up with
-- exactly the catalog of a fresh 0.4.0 install.
-- On a Citus cluster, call chunked_map.chunked_distribute() again afterwards: it distributes
-- the new functions (and the feed's tables stay on the coordinator, see docs/citus.md).
\echo Use "ALTER EXTENSION chunked_map UPDATE TO '0.4.0'" to load this file. \quit

-- Retention: the oldest sequence kept, and the policy; the feed: whether a consumer follows the
-- map, and which map of its name it is (every map gets its number now: map_state is rewritten
-- once, it has one row per map).
CREATE SEQUENCE chunked_map.map_incarnation;
ALTER TABLE chunked_map.map_state
    ADD COLUMN oldest_seq bigint NOT NULL DEFAULT 1,
    ADD COLUMN retain_records bigint,
    ADD COLUMN retain_age interval,
    ADD COLUMN followed boolean NOT NULL DEFAULT false,
    ADD COLUMN incarnation bigint NOT NULL DEFAULT pg_catalog.nextval('chunked_map.map_incarnation');

-- When each chunk was archived. now() is evaluated once: existing rows get it without the table
-- being rewritten; chunks archived from now on get the clock at their archiving.
ALTER TABLE chunked_map.archived_chunk
    ADD COLUMN archived_at timestamptz NOT NULL DEFAULT pg_catalog.now();
ALTER TABLE chunked_map.archived_chunk
    ALTER COLUMN archived_at SET DEFAULT pg_catalog.clock_timestamp();

CREATE FUNCTION chunked_map.chunked_trim(map text, before_seq bigint)
RETURNS bigint
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_trim_wrapper';

CREATE FUNCTION chunked_map.chunked_set_retention(map text, max_records bigint DEFAULT NULL, max_age interval DEFAULT NULL)
RETURNS void
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_set_retention_wrapper';

CREATE FUNCTION chunked_map.chunked_apply_retention(map text DEFAULT NULL)
RETURNS bigint
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_apply_retention_wrapper';

REVOKE EXECUTE ON FUNCTION chunked_map.chunked_trim(text, bigint),
    chunked_map.chunked_set_retention(text, bigint, interval),
    chunked_map.chunked_apply_retention(text) FROM PUBLIC;

-- (0.4) The feed across maps (src/feed.rs). Consumers, each following a category (the part of
-- a map's name before its first '-'; NULL: every map).
CREATE TABLE chunked_map.consumer (
    consumer   text        COLLATE "C" NOT NULL,
    category   text        COLLATE "C",
    from_start boolean     NOT NULL,
    created_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    CONSTRAINT consumer_pkey PRIMARY KEY (consumer)
);

-- Per consumer and map, the last sequence it acknowledged in the map's incarnation (a position
-- of an earlier map of the same name counts as none); pending: it has to read the map to its end
-- once whether or not the map moves (history it started from, or a restore). Made for every map
-- a consumer follows, by chunked_subscribe and chunked_start, so that polls never make one.
CREATE TABLE chunked_map.consumer_position (
    consumer    text    COLLATE "C" NOT NULL,
    map         text    COLLATE "C" NOT NULL,
    seq         bigint  NOT NULL,
    pending     boolean NOT NULL,
    incarnation bigint  NOT NULL,
    CONSTRAINT consumer_position_pkey PRIMARY KEY (consumer, map)
);
CREATE INDEX consumer_position_map ON chunked_map.consumer_position (map);
CREATE INDEX consumer_position_pending ON chunked_map.consumer_position (consumer) WHERE pending;

-- Per consumer and member of a group (group_size 0: the consumer's own, from its subscription),
-- the transaction id below which it has looked at every move. Transaction ids mean nothing in
-- another cluster: not dumped (a restored consumer starts over from its positions).
CREATE TABLE chunked_map.consumer_horizon (
    consumer   text    COLLATE "C" NOT NULL,
    group_size integer NOT NULL,
    member     integer NOT NULL,
    horizon    xid8    NOT NULL,
    CONSTRAINT consumer_horizon_pkey PRIMARY KEY (consumer, group_size, member)
);

-- Per followed map, the latest transaction that appended to it (and when): written once per
-- transaction by the holder of the map's lock. One row per map, whatever the number of appends.
-- Not dumped, for the same reason.
CREATE TABLE chunked_map.map_change (
    map text        COLLATE "C" NOT NULL,
    xid xid8        NOT NULL,
    at  timestamptz NOT NULL,
    CONSTRAINT map_change_pkey PRIMARY KEY (map)
);
CREATE INDEX map_change_xid ON chunked_map.map_change (xid);
SELECT pg_catalog.pg_extension_config_dump('chunked_map.consumer', '');
SELECT pg_catalog.pg_extension_config_dump('chunked_map.consumer_position', '');
SELECT pg_catalog.pg_extension_config_dump('chunked_map.map_incarnation', '');
REVOKE ALL ON chunked_map.consumer, chunked_map.consumer_position, chunked_map.consumer_horizon,
    chunked_map.map_change FROM PUBLIC;

CREATE FUNCTION chunked_map.chunked_subscribe(consumer text, category text DEFAULT NULL, from_start boolean DEFAULT true)
RETURNS boolean
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_subscribe_wrapper';

CREATE FUNCTION chunked_map.chunked_unsubscribe(consumer text)
RETURNS boolean
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_unsubscribe_wrapper';

CREATE FUNCTION chunked_map.chunked_poll(consumer text, max_records integer DEFAULT 100, member integer DEFAULT 0, group_size integer DEFAULT 1)
RETURNS TABLE (map text, seq bigint, payload jsonb, trimmed boolean)
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_poll_wrapper';

-- Every consumer of the feed and what it has not had yet: maps and records of its category
-- after its positions, and when the oldest move it has not passed was recorded (NULL: none, or
-- only history it is still catching up on). A view: it reads the tables as its owner, and is
-- granted like the functions (the consumer recipe). It reads every map of each consumer's
-- category: a tool for monitoring, not for every poll.
CREATE VIEW chunked_map.consumers AS
SELECT c.consumer, c.category, c.from_start,
       count(s.map) FILTER (WHERE s.next_seq - 1 > coalesce(p.seq, 0)) AS maps_behind,
       coalesce(sum(greatest(s.next_seq - 1 - greatest(coalesce(p.seq, 0), s.oldest_seq - 1), 0)), 0)::bigint AS records_behind,
       (SELECT pg_catalog.min(m.at)
        FROM chunked_map.map_change AS m
        JOIN chunked_map.map_state AS ms ON ms.map = m.map
        LEFT JOIN chunked_map.consumer_position AS mp ON mp.consumer = c.consumer AND mp.map = m.map
        WHERE (c.category IS NULL OR c.category = pg_catalog.split_part(m.map, '-', 1))
          AND ms.next_seq - 1 > coalesce(mp.seq, 0)) AS oldest_unread_move_at
FROM chunked_map.consumer AS c
LEFT JOIN chunked_map.map_state AS s
       ON c.category IS NULL OR c.category = pg_catalog.split_part(s.map, '-', 1)
LEFT JOIN chunked_map.consumer_position AS p ON p.consumer = c.consumer AND p.map = s.map
GROUP BY c.consumer, c.category, c.from_start;

REVOKE ALL ON chunked_map.consumers FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION chunked_map.chunked_subscribe(text, text, boolean),
    chunked_map.chunked_unsubscribe(text),
    chunked_map.chunked_poll(text, integer, integer, integer) FROM PUBLIC;
