-- Storage of chunked_map. Every key starts with the map, so the tables can be distributed by
-- map (Citus); nothing here refers to another table, so no statement locks two maps. Map names
-- compare byte by byte (COLLATE "C"): equality is the same in every collation, and the keys are
-- compared on every append, where a linguistic collation would cost strcoll() calls.

-- Map names, tokens and messages are UTF-8 in the library: refuse, clearly, a database that
-- could not hold them.
DO $$
BEGIN
    IF pg_catalog.getdatabaseencoding() <> 'UTF8' THEN
        RAISE EXCEPTION 'chunked_map requires a database with encoding UTF8; database "%" uses %',
                pg_catalog.current_database(), pg_catalog.getdatabaseencoding()
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Create the database with ENCODING ''UTF8'' (for example CREATE DATABASE ... ENCODING ''UTF8'' TEMPLATE template0) and install chunked_map there.';
    END IF;
END
$$;

-- (0.4) Numbers maps as they are started (map_state.incarnation).
CREATE SEQUENCE chunked_map.map_incarnation;

-- One row per map: the map's lock (every write takes it, FOR NO KEY UPDATE SKIP LOCKED) and the
-- truth about its current chunk. Every append advances next_seq and current_bytes in it, so
-- under REPEATABLE READ and SERIALIZABLE a writer whose snapshot predates another writer's
-- commit is refused by PostgreSQL itself. Those columns are not indexed, so the update stays
-- on the row's page (HOT) where the fill factor leaves room. No CHECK constraints: PostgreSQL
-- prepares a table's CHECK expressions anew in every statement that writes it, which for the
-- six ranges the functions already enforce cost more than the rest of an append; stored values
-- are checked by chunked_verify.
CREATE TABLE chunked_map.map_state (
    map                   text    COLLATE "C" NOT NULL,
    -- size given to chunks started from now on
    chunk_size            integer NOT NULL,
    -- the current chunk: its first sequence and the size it was started with
    current_first_seq     bigint  NOT NULL,
    current_chunk_size    integer NOT NULL,
    -- token of the newest archived chunk, NULL before the first rollover
    newest_archived_token text,
    archived_chunks       bigint  NOT NULL DEFAULT 0,
    -- the sequence the next record gets, and the payload bytes of the current chunk
    next_seq              bigint  NOT NULL,
    current_bytes         bigint  NOT NULL DEFAULT 0,
    -- whether committed appends are announced, and on which channel: chunked_map_ and 32
    -- hexadecimal digits of a random UUID, given the first time notifications are turned on
    notify                boolean NOT NULL DEFAULT false,
    notify_channel        text,
    -- (0.4) the oldest sequence the map still holds: 1 until chunks are trimmed, then the
    -- first sequence of the oldest kept chunk (next_seq when every archived chunk is gone and
    -- the current chunk is empty)
    oldest_seq            bigint  NOT NULL DEFAULT 1,
    -- (0.4) the retention policy, NULL = no limit: archived chunks all of whose records are
    -- older than the newest retain_records, or archived longer than retain_age ago, are removed
    retain_records        bigint,
    retain_age            interval,
    -- (0.4) whether a consumer of the feed follows the map (its category): its appends then
    -- record in map_change, once per transaction, that it moved
    followed              boolean NOT NULL DEFAULT false,
    -- (0.4) which map of that name this is: a map dropped and started again is another one, and
    -- a consumer's position in the one before (see consumer_position) means nothing for it
    incarnation           bigint  NOT NULL DEFAULT pg_catalog.nextval('chunked_map.map_incarnation'),
    -- (0.5) how many of its newest records' ids the map remembers (record_id), NULL: those of
    -- every record it keeps
    id_window             bigint  DEFAULT 10000,
    -- (0.5) whether the map is a stream of the message store: every record it ever held was
    -- appended by chunked_register_with_id (its id kept by its writer), and no other append takes
    -- it. Set by the first such record, which an empty map that never held a record only takes.
    message_stream        boolean NOT NULL DEFAULT false,
    CONSTRAINT map_state_pkey PRIMARY KEY (map)
) WITH (fillfactor = 70);

-- The records of each map's current chunk, one row each: an append inserts one row and
-- rewrites nothing. At most current_chunk_size rows per map.
CREATE TABLE chunked_map.current_record (
    map     text   COLLATE "C" NOT NULL,
    seq     bigint NOT NULL,
    payload jsonb  NOT NULL,
    -- (0.5) when the record was appended: the appending transaction's start (now()); NULL for
    -- records appended before 0.5
    at      timestamptz,
    -- (0.5) the id its writer gave it, if any
    id      text   COLLATE "C",
    CONSTRAINT current_record_pkey PRIMARY KEY (map, seq)
);

-- One immutable row per archived chunk. Its token is lpad(first_seq, 20, '0'); it knows the
-- size it was started with and the token of the chunk before it, so paging needs no
-- arithmetic on sizes. Layout 1: payloads holds the chunk's payloads oldest first (at most
-- chunk_size of them, fewer when chunked_map.max_chunk_bytes filled it first), the record with
-- sequence first_seq + i - 1 at index i. Archiving copies the payload datums as they are
-- (ARRAY(SELECT payload ...)), never re-encoding JSON; pages are built from it when read.
CREATE TABLE chunked_map.archived_chunk (
    map        text     COLLATE "C" NOT NULL,
    first_seq  bigint   NOT NULL,
    chunk_size integer  NOT NULL,
    prev_token text,
    layout     smallint NOT NULL DEFAULT 1,
    payloads   jsonb[]  NOT NULL,
    -- (0.4) when the chunk was archived (the clock at the write that archived it), the age that
    -- retain_age is measured by; chunks archived before 0.4 have the time of the update to 0.4
    archived_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    -- (0.5) the records' times and ids, index for index with payloads: ats NULL for a chunk
    -- archived before 0.5 (an element NULL for a record appended before 0.5), ids NULL when no
    -- record of the chunk has one
    ats        timestamptz[],
    ids        text[]   COLLATE "C",
    CONSTRAINT archived_chunk_pkey PRIMARY KEY (map, first_seq)
);

-- Archived chunks are written once and read whole: compress them with lz4 where the server
-- has it (it does on Debian/PGDG builds); otherwise the default (pglz) applies.
DO $$
BEGIN
    IF 'lz4' = ANY (SELECT pg_catalog.unnest(enumvals) FROM pg_catalog.pg_settings
                    WHERE name = 'default_toast_compression') THEN
        ALTER TABLE chunked_map.archived_chunk ALTER COLUMN payloads SET COMPRESSION lz4,
                                               ALTER COLUMN ats SET COMPRESSION lz4,
                                               ALTER COLUMN ids SET COMPRESSION lz4;
    END IF;
END
$$;

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
-- a consumer follows, by chunked_subscribe and chunked_start, so that polls never make one (on a
-- Citus cluster, where a start does not know the consumers, by the first poll that reaches it).
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

-- (0.5) The ids a map remembers, to tell a retried append from a new one: one row per record
-- appended with an id, among the map's newest id_window records (pruned when a chunk is
-- archived: up to one chunk more are kept) or, with id_window NULL, among all it keeps.
-- Retention, trims and drops remove the rows of the records they remove.
CREATE TABLE chunked_map.record_id (
    map text   COLLATE "C" NOT NULL,
    id  text   COLLATE "C" NOT NULL,
    seq bigint NOT NULL,
    CONSTRAINT record_id_pkey PRIMARY KEY (map, id)
);
CREATE INDEX record_id_seq ON chunked_map.record_id (map, seq);

-- A random key of this installation, for what every role can see and must not be able to link
-- to a map's name: the keys of the locks on map names (src/name_lock.rs), which pg_locks shows.
-- Readable by the owner only; not dumped (a restored database gets a key of its own).
CREATE TABLE chunked_map.installation (
    secret bytea NOT NULL
);
INSERT INTO chunked_map.installation (secret)
VALUES (pg_catalog.uuid_send(pg_catalog.gen_random_uuid()) || pg_catalog.uuid_send(pg_catalog.gen_random_uuid()));

-- pg_dump / pg_restore carry every map.
SELECT pg_catalog.pg_extension_config_dump('chunked_map.map_state', '');
SELECT pg_catalog.pg_extension_config_dump('chunked_map.current_record', '');
SELECT pg_catalog.pg_extension_config_dump('chunked_map.archived_chunk', '');
SELECT pg_catalog.pg_extension_config_dump('chunked_map.consumer', '');
SELECT pg_catalog.pg_extension_config_dump('chunked_map.consumer_position', '');
SELECT pg_catalog.pg_extension_config_dump('chunked_map.map_incarnation', '');
SELECT pg_catalog.pg_extension_config_dump('chunked_map.record_id', '');
