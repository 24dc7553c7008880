-- chunked_map_message_store 0.5.0: message-db 1.3's interface (Eventide's message store) on
-- chunked_map's storage (docs/message-db.md). A stream is a map of the same name; a message is a
-- record of it, its payload {"type", "data", "metadata"} (a key left out where the value is SQL
-- NULL), its id the record's id, its time the record's; a stream's position is the record's
-- sequence - 1. message_index keeps, per message, what reads by category and the summary views
-- need, and its global position once it is given (below).
--
-- The functions, types and views that make the interface follow message-db 1.3's (MIT License,
-- Copyright (c) The Eventide Project): the same names, arguments, defaults, result types and
-- error messages; the pure functions (hash_64, category, id, cardinal_id, is_category) compute
-- what message-db's do, so a mixed fleet agrees on categories and consumer groups.
--
-- Global positions. message-db takes pg_advisory_xact_lock(hash_64(category)) in every write,
-- so every writer of a category waits for every other until it commits. Here writers never wait
-- for each other (but for writers of the same stream); a message is given its global position
-- after its commit, by the reads (number_messages), in an order no later commit can overtake:
-- every write marks its transaction (chunked_map.chunked_order_key: a shared lock no SQL can
-- take otherwise, which never waits) and records an order key, the transaction id PostgreSQL
-- assigns next, read after the mark and after its own id; a read gives positions, in key order, to the messages whose key is below the least of
-- that next id and the id of every transaction holding the mark. Such a message committed before
-- the read looked, and no message can ever get a key below it: numbering the same messages again
-- (a read that rolled back) gives them the same positions. See docs/message-db.md.
\echo Use "CREATE EXTENSION chunked_map_message_store" to load this file. \quit

-- Not on distributed maps (Citus, chunked_map.chunked_distribute()): messages are numbered on
-- one node, from that node's transaction ids, and message_index is a table of the node a write
-- runs on, where the streams would be spread over the workers (docs/citus.md). chunked_distribute
-- refuses a database with the message store in turn. Each takes the same lock before it looks,
-- so that they look at each other one at a time, and looks in a snapshot taken after the lock
-- (READ COMMITTED: a transaction's snapshot can predate the lock, and miss a distribution
-- committed meanwhile).
DO $guard$
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        IF pg_catalog.current_setting('transaction_isolation') NOT IN ('read committed', 'read uncommitted') THEN
            RAISE EXCEPTION USING
                ERRCODE = 'feature_not_supported',
                MESSAGE = 'where Citus is installed, the message store is created under READ COMMITTED',
                DETAIL = pg_catalog.format('This transaction is %s.', pg_catalog.upper(pg_catalog.current_setting('transaction_isolation'))),
                HINT = 'Run CREATE EXTENSION chunked_map_message_store in a READ COMMITTED transaction: it checks that the maps are not distributed as of after its lock.';
        END IF;
        LOCK TABLE chunked_map.map_state IN SHARE ROW EXCLUSIVE MODE;
        IF EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition AS p
                   WHERE p.logicalrelid OPERATOR(pg_catalog.=) 'chunked_map.map_state'::pg_catalog.regclass) THEN
            RAISE EXCEPTION USING
                ERRCODE = 'feature_not_supported',
                MESSAGE = 'the message store does not run on distributed maps',
                DETAIL = 'chunked_map''s storage in this database is distributed by Citus (chunked_map.chunked_distribute()).',
                HINT = 'Create the message store in a database whose maps are not distributed: it runs on one node.';
        END IF;
    END IF;
END
$guard$;

-- Not where streams of an earlier store are left (maps whose records are messages: the store was
-- dropped, its index of messages with it, and the maps kept, as chunked_map's data they are):
-- their messages would be in no read, their versions would count them, and their ids would be
-- free to be written again. A dump restores the store before its data: no stream is there yet.
DO $leftover$
BEGIN
    IF EXISTS (SELECT 1 FROM chunked_map.map_state AS s WHERE s.message_stream) THEN
        RAISE EXCEPTION USING
            ERRCODE = 'object_not_in_prerequisite_state',
            MESSAGE = 'this database holds streams of a message store that was dropped',
            DETAIL = pg_catalog.format('%s maps of chunked_map hold messages, and no index of them is left.',
                                       (SELECT pg_catalog.count(*) FROM chunked_map.map_state AS s WHERE s.message_stream)),
            HINT = 'Drop those maps first (chunked_map.chunked_drop(map) for each map of chunked_map.map_state whose message_stream is true), or restore the store from a dump of its database.';
    END IF;
END
$leftover$;

-- The role message-db's clients connect as (as message-db's installer makes it); kept if there.
DO $$
BEGIN
    CREATE ROLE message_store WITH LOGIN;
EXCEPTION WHEN duplicate_object THEN
    NULL;
END
$$;

CREATE TYPE message_store.message AS (
    id varchar,
    stream_name varchar,
    type varchar,
    position bigint,
    global_position bigint,
    data varchar,
    metadata varchar,
    time timestamp
);

-- Per message: where it is (its stream and position, and where its record was written: a hint,
-- see record_at), what reads by category filter on, its id (unique, as in message-db: the index
-- keeps message-db's name, and so its error), its order key (the writer's, see above) and its
-- global position, NULL until given.
CREATE SEQUENCE message_store.write_order;
CREATE TABLE message_store.message_index (
    stream_name          text   COLLATE "C" NOT NULL,
    position             bigint NOT NULL,
    type                 text   NOT NULL,
    correlation_category text   COLLATE "C",
    id                   uuid   NOT NULL,
    writer               xid8   NOT NULL,
    -- the order of writes with one key (the next transaction id moves only when a transaction
    -- gets an id: the writes of one transaction, and a write made after another transaction's
    -- on a quiet server, can share it), kept in write order
    write_order          bigint NOT NULL DEFAULT pg_catalog.nextval('message_store.write_order'),
    global_position      bigint,
    -- the record's address in chunked_map.current_record when it was written (NULL where the
    -- append went by SQL): checked by every read, never trusted
    record               tid,
    CONSTRAINT messages_stream PRIMARY KEY (stream_name, position)
);
CREATE UNIQUE INDEX messages_id ON message_store.message_index (id);
-- The category's messages in global position order, once they have one: the numbering makes
-- the entry (its update of global_position writes a new row version), so a write makes none
-- (9,100 instructions a write less). The category batch's plan, generic too (its position a
-- parameter: `global_position >= $2` implies the index's predicate), walks it in order with
-- sorting off (category_batch; tests/pg_regress/sql/message_store.sql checks that it does; with
-- sorting on, a generic plan once sorted the whole category, 46 ms where this took 10). No index
-- of the global position alone: a category batch then has one index to choose (the planner took
-- one of every global position, filtering out the other categories' messages, 3 times slower
-- here), and a write one index entry fewer; the last position given is kept in numbering_state.
CREATE INDEX messages_category ON message_store.message_index
    (pg_catalog.split_part(stream_name, '-', 1), global_position) WHERE global_position IS NOT NULL;
-- The messages waiting for a global position, in the order a numbering takes them: the first
-- 10,000 are read off the index, also when one transaction's thousands of messages share a key
-- (ordered by the key alone, each numbering sorted the whole group: ranking the first 10,000 of
-- a group of 300,000 took 41.6 ms, 8.0 ms off this index).
CREATE INDEX messages_unnumbered ON message_store.message_index (writer, write_order) WHERE global_position IS NULL;

-- The last global position given, one row written by the first numbering and moved by each
-- under its lock (dumped with the messages; made empty, so that a restore brings its own row).
-- And where the messages waiting for a position start in messages_unnumbered: no message waiting
-- now, or written later, has a key below unnumbered_from. A numbering leaves the entries of the
-- messages it numbered in that index until a vacuum removes them, at the start of the index,
-- where every read looks first whether anything waits: started at unnumbered_from, a look
-- passes none of them (from the start, it passed every one numbered since the last vacuum: 78
-- pages and 0.4 ms after 20,000 messages). The bound holds for this server's transaction ids
-- only: it is used while the server that wrote it (server_started) runs; after a restart, or
-- in a copy restored elsewhere, whose transaction ids may be below it, a read looks from the
-- start until the next numbering writes the bound again. And it is never above the writing
-- numbering's own transaction id + 1: the server's recovery from a crash (the same server
-- start) gives again the ids given since the last one whose WAL reached the disk, and that
-- numbering's commit record, which holds the bound, did.
CREATE TABLE message_store.numbering_state (
    one                  boolean     NOT NULL DEFAULT true PRIMARY KEY CHECK (one),
    last_global_position bigint      NOT NULL,
    unnumbered_from      xid8        NOT NULL,
    server_started       timestamptz NOT NULL
);

SELECT pg_catalog.pg_extension_config_dump('message_store.message_index', '');
SELECT pg_catalog.pg_extension_config_dump('message_store.write_order', '');
SELECT pg_catalog.pg_extension_config_dump('message_store.numbering_state', '');

-- ---- message-db's pure functions: the same results, NULL included ----

CREATE FUNCTION message_store.hash_64(value varchar)
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN pg_catalog.left('x' || pg_catalog.md5(value), 17)::bit(64)::bigint;

CREATE FUNCTION message_store.category(stream_name varchar)
RETURNS varchar
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN pg_catalog.split_part(stream_name, '-', 1);

-- (message-db's is_category answers true for NULL)
CREATE FUNCTION message_store.is_category(stream_name varchar)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN NOT coalesce(pg_catalog.strpos(stream_name, '-') <> 0, false);

CREATE FUNCTION message_store.id(stream_name varchar)
RETURNS varchar
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN pg_catalog.strpos(stream_name, '-') = 0 THEN NULL
            ELSE pg_catalog.substr(stream_name, pg_catalog.strpos(stream_name, '-') + 1) END;

CREATE FUNCTION message_store.cardinal_id(stream_name varchar)
RETURNS varchar
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN pg_catalog.split_part(message_store.id(stream_name), '+', 1);

CREATE FUNCTION message_store.message_store_version()
RETURNS varchar
LANGUAGE sql VOLATILE
RETURN '1.3.0';

-- message-db's write lock of a category, for clients that take it themselves; write_message
-- does not (writers of a category do not wait for each other here).
CREATE FUNCTION message_store.acquire_lock(stream_name varchar)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    _category_name_hash bigint;
BEGIN
    _category_name_hash := message_store.hash_64(message_store.category(acquire_lock.stream_name));
    PERFORM pg_catalog.pg_advisory_xact_lock(_category_name_hash);
    RETURN _category_name_hash;
END;
$$;

-- A message's record payload: {"type", "data", "metadata"}, a key left out where the value is
-- SQL NULL: what write_message appends (chunked_map's library makes it, for both: the rule's one
-- place is src/message_store/mod.rs).
CREATE FUNCTION message_store.message_payload("type" varchar, data jsonb, metadata jsonb)
RETURNS jsonb
LANGUAGE c STABLE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'message_store_message_payload_wrapper';

-- ---- what runs as the extension's owner (the maps are the owner's): granted to message_store,
-- ---- never to PUBLIC (but import_message: the owner's own, run as its caller) ----

-- message-db's error for a message without a value its table requires (raised by
-- write_message_checked and import_message).
CREATE FUNCTION message_store.refuse_missing_value("column" text)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION USING
        ERRCODE = 'not_null_violation',
        MESSAGE = pg_catalog.format('null value in column "%s" of relation "messages" violates not-null constraint',
                                    refuse_missing_value."column"),
        SCHEMA = 'message_store', TABLE = 'messages', COLUMN = refuse_missing_value."column";
END;
$$;

-- The write of a message whose values were checked (write_message's, import_message's): its
-- record appended to its stream (a stream that does not exist is started by it; the stream's
-- writers wait for each other here, as long as the lock is held), then its index row and its
-- order key: the writers' mark, never waiting, then the next transaction id. `time`: the
-- record's time, NULL for the transaction's start (message-db's: a message moved over keeps its
-- own). The record keeps the message's id, which the map does not remember (no lookup): an id
-- written before, to this stream or another, fails on messages_id (message-db's error), and the
-- append goes with the transaction (or savepoint) the error ends. A C function of chunked_map's
-- library (src/message_store/). As its caller: write_message's and import_message's owner.
CREATE FUNCTION message_store.append_message(
  id text,
  stream_name varchar,
  "type" varchar,
  data jsonb,
  metadata jsonb,
  "time" timestamptz
)
RETURNS bigint
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'message_store_append_message_wrapper';

-- message-db's write_message: a C function of chunked_map's library (src/message_store/), as the
-- extension's owner (the maps are the owner's; it runs no SQL of the caller's and none with the
-- caller's search_path). The write of a message with no expected version, by a transaction that
-- may write, with a stream name, a type and an id, is the library's: the id read as a uuid
-- (message-db casts it before its insert), then append_message's write. Every other call is
-- write_message_checked's, below, which compares the expected version, then refuses as
-- message-db does, in message-db's order. No PL/pgSQL and no SET clause on the way of the
-- unversioned write: its writers of one stream wait for each other as long as the lock is held
-- all the same (the library's own rule; statement_timeout bounds the wait).
-- A stream is a map of messages only, its positions its records' sequences less one: the append
-- refuses a map holding records chunked_map's own functions appended (42809), and their appends
-- refuse a stream (chunked_map's src/stream.rs; the map's state row says which it is, so the
-- rule costs no lookup).
CREATE FUNCTION message_store.write_message(
  id varchar,
  stream_name varchar,
  "type" varchar,
  data jsonb,
  metadata jsonb DEFAULT NULL,
  expected_version bigint DEFAULT NULL
)
RETURNS bigint
LANGUAGE c VOLATILE SECURITY DEFINER
AS 'MODULE_PATHNAME', 'message_store_write_message_wrapper';

-- write_message with an expected version, in a read-only transaction, or without a stream name,
-- a type or an id. Called by write_message alone, so as the extension's owner, by a statement
-- that runs with search_path pg_catalog, pg_temp, and waiting for a stream's lock or its start
-- as long as it is held (the write's rule, which covers what it calls): so it sets neither
-- itself, which would cost every versioned write two settings changed and restored. Not
-- SECURITY DEFINER: granted by mistake it runs as its caller, to whom append_message is not
-- granted. Its steps:
-- (1) The expected version, first, as message-db compares it (before anything of the message
--     is looked at; a stream named NULL has version -1 there). In a read-only transaction, or
--     for a NULL name, nothing is started or locked: the version as it is. Otherwise the stream
--     is locked and its version read (the position of its newest record), in one statement;
--     where it does not exist, it is started by its first message (writers of the stream wait
--     for its start), then locked and read. A stream not there is version -1, also where a drop
--     committed between its start and that read (READ COMMITTED: another transaction started
--     it, then a drop waited for by the read removed it).
-- (2) Then, in message-db's order: the id's form (message-db casts it before its insert), the
--     refusal in a read-only transaction or on a standby (its insert's, before any value is
--     looked at), and the values its table requires (in the order of its columns).
-- (3) The write: append_message's.
CREATE FUNCTION message_store.write_message_checked(
  id varchar,
  stream_name varchar,
  "type" varchar,
  data jsonb,
  metadata jsonb,
  expected_version bigint
)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    _message_id pg_catalog.uuid;
    _next_seq bigint;
    _read_only boolean := pg_catalog.current_setting('transaction_read_only') = 'on';
BEGIN
    -- (1)
    IF write_message_checked.expected_version IS NOT NULL THEN
        IF _read_only OR write_message_checked.stream_name IS NULL THEN
            SELECT s.next_seq INTO _next_seq
            FROM chunked_map.map_state AS s WHERE s.map = write_message_checked.stream_name;
        ELSE
            SELECT s.next_seq INTO _next_seq
            FROM chunked_map.map_state AS s WHERE s.map = write_message_checked.stream_name FOR NO KEY UPDATE;
            IF NOT FOUND THEN
                PERFORM chunked_map.chunked_start(write_message_checked.stream_name);
                SELECT s.next_seq INTO _next_seq
                FROM chunked_map.map_state AS s WHERE s.map = write_message_checked.stream_name FOR NO KEY UPDATE;
            END IF;
        END IF;
        _next_seq := coalesce(_next_seq, 1);
        IF write_message_checked.expected_version <> _next_seq - 2 THEN
            RAISE EXCEPTION
                'Wrong expected version: % (Stream: %, Stream Version: %)',
                write_message_checked.expected_version,
                write_message_checked.stream_name,
                _next_seq - 2;
        END IF;
    END IF;
    -- (2)
    _message_id := write_message_checked.id::pg_catalog.uuid;
    IF _read_only THEN
        RAISE EXCEPTION USING
            ERRCODE = 'read_only_sql_transaction',
            MESSAGE = 'cannot execute INSERT in a read-only transaction';
    END IF;
    IF write_message_checked.stream_name IS NULL OR write_message_checked."type" IS NULL OR write_message_checked.id IS NULL THEN
        PERFORM message_store.refuse_missing_value(CASE WHEN write_message_checked.stream_name IS NULL THEN 'stream_name'
                                                        WHEN write_message_checked."type" IS NULL THEN 'type' ELSE 'id' END);
    END IF;
    -- (3)
    RETURN message_store.append_message(_message_id::text, write_message_checked.stream_name,
                                        write_message_checked."type", write_message_checked.data,
                                        write_message_checked.metadata, NULL);
END;
$$;

-- A message moved over from another message store (sql/message_store/import-from-message-db.sql):
-- written as write_message writes it (no expected version; append_message), its record given
-- the time the message has there (message-db's time: UTC) instead of the transaction's.
-- Owner-only: a writer that could give its messages any time could backdate them; and not
-- SECURITY DEFINER, so that granted by mistake it still runs as its caller, to whom
-- append_message is not granted.
CREATE FUNCTION message_store.import_message(
  id varchar,
  stream_name varchar,
  "type" varchar,
  data jsonb,
  metadata jsonb,
  "time" timestamp
)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF import_message.stream_name IS NULL OR import_message."type" IS NULL OR import_message.id IS NULL
       OR import_message."time" IS NULL THEN
        PERFORM message_store.refuse_missing_value(CASE WHEN import_message.stream_name IS NULL THEN 'stream_name'
                                                        WHEN import_message."type" IS NULL THEN 'type'
                                                        WHEN import_message.id IS NULL THEN 'id' ELSE 'time' END);
    END IF;
    RETURN message_store.append_message(import_message.id, import_message.stream_name,
                                        import_message."type", import_message.data,
                                        import_message.metadata, import_message."time" AT TIME ZONE 'UTC');
END;
$$;

-- Gives global positions to what can have them now (see the top of this file); how many. In
-- READ COMMITTED only (each statement its own snapshot, taken after the writers were looked
-- at); one numbering at a time (another one under way: nothing, at once).
CREATE FUNCTION message_store.number_messages()
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- (set here so that the numbering's statement can turn them off for itself: a setting changed
-- in a function that sets it is back to the caller's at the function's end)
SET enable_hashjoin = on
SET enable_mergejoin = on
AS $$
DECLARE
    _numbered bigint;
    _from xid8;
    _waiting xid8;
    _last_key xid8;
    _next bigint;
    _horizon bigint;
    _ranked bigint;
    _count bigint;
BEGIN
    -- (READ UNCOMMITTED is READ COMMITTED in PostgreSQL; a read-only transaction, or a hot
    -- standby, reads what was numbered)
    IF pg_catalog.current_setting('transaction_isolation') NOT IN ('read committed', 'read uncommitted')
       OR pg_catalog.current_setting('transaction_read_only') = 'on' THEN
        RETURN 0;
    END IF;
    -- The bound below which no message waits (see numbering_state: this server's, else none),
    -- and the least key waiting from it. Nothing waits: no lock, no transaction id. (The least
    -- key, not EXISTS: the planner then takes the index of unnumbered messages even where the
    -- statistics say every message is.) The bound serves the numbering below too: a bound, once
    -- true, stays true, and one a numbering moved meanwhile is only higher.
    SELECT b.bound,
           (SELECT pg_catalog.min(i.writer) FROM message_store.message_index AS i
            WHERE i.global_position IS NULL AND i.writer >= b.bound)
    INTO _from, _waiting
    FROM (SELECT coalesce((SELECT n.unnumbered_from FROM message_store.numbering_state AS n
                           WHERE n.server_started = pg_catalog.pg_postmaster_start_time()),
                          '0'::xid8) AS bound) AS b;
    IF _waiting IS NULL THEN
        RETURN 0;
    END IF;
    IF NOT chunked_map.chunked_try_numbering_lock() THEN
        RETURN 0;
    END IF;
    -- This transaction's own id first (the numbering writes anyway): the next id, read after it,
    -- is then past the key of every write that ended before, so all of them can be numbered
    -- (without it, a key equal to the next id could still be given to a later write).
    PERFORM pg_catalog.pg_current_xact_id();
    SELECT n.last_global_position INTO _numbered FROM message_store.numbering_state AS n;
    IF NOT FOUND THEN
        -- the first numbering (or the row was deleted): from what the messages have
        _numbered := coalesce((SELECT pg_catalog.max(i.global_position) FROM message_store.message_index AS i), 0);
    END IF;
    -- first the next id, then the writers: a writer that marks itself after this has a key at or
    -- above it
    _next := chunked_map.chunked_next_transaction_id();
    WITH locks AS MATERIALIZED (
        SELECT l.locktype, l.database, l.classid, l.objid, l.objsubid, l.transactionid,
               l.virtualtransaction, l.mode, l.granted
        FROM pg_catalog.pg_locks AS l
    ), writers AS (
        SELECT t.transactionid::text::bigint AS xid32
        FROM locks AS m
        JOIN locks AS t ON t.virtualtransaction = m.virtualtransaction
                       AND t.locktype = 'transactionid' AND t.mode = 'ExclusiveLock' AND t.granted
        -- (the writers' mark: chunked_map's order lock space, src/name_lock.rs)
        WHERE m.locktype = 'advisory' AND m.classid = 0 AND m.objid = 0
          AND m.objsubid = 17231 AND m.mode = 'ShareLock' AND m.granted
          AND m.database = (SELECT d.oid FROM pg_catalog.pg_database AS d
                            WHERE d.datname = pg_catalog.current_database())
        UNION ALL
        SELECT p.transaction::text::bigint FROM pg_catalog.pg_prepared_xacts AS p
        WHERE p.database = pg_catalog.current_database()
    ), behind AS (
        -- how far each id is below the next one, modulo 2^32: an id assigned since the next one
        -- was read (0, or "ahead": above 2^31) is at or above it, and bounds nothing
        SELECT ((_next % 4294967296) - w.xid32 + 4294967296) % 4294967296 AS distance
        FROM writers AS w
    )
    SELECT LEAST(_next, pg_catalog.min(_next - b.distance))
    INTO _horizon
    FROM behind AS b
    WHERE b.distance BETWEEN 1 AND 2147483648;
    -- Each row found again by its address (a TID scan: ≈14% less per message than a descent of
    -- the primary key, with the count of rows ranked that the check below needs). Only this
    -- statement, under the numbering lock, updates message_index: a row ranked is still where
    -- the scan found it, unless the owner changed it by hand meanwhile. Then the scan, after
    -- waiting for that change, finds the address no longer holds the row and does not update
    -- it: fewer rows updated than ranked, and the positions would no longer follow the ranking
    -- (nor a stream's order), so the numbering fails with 40001 and gives no position; the
    -- reader's next try numbers everything in order. (A PostgreSQL whose TID scan does not
    -- recheck the address after the wait, 16.2 for one, updates the row's new version in its
    -- place instead: as many rows updated as ranked, in order, no error.)
    -- At most 10,000 a numbering, the first in key order: a read after a backlog (readers away,
    -- a writer or a prepared transaction holding the horizon back) takes a bounded time instead
    -- of failing at its client's statement_timeout, rolling back, and failing again at the next
    -- read; the next reads number the rest. The first 10,000 in key order are the same messages
    -- again if this numbering rolls back: the messages final at a later look add keys at or
    -- above this horizon, after them.
    -- The joins that would read the whole table are turned off for this statement, so that each
    -- row is found by its address: estimating 10,000 rows ranked, the planner hashed them and
    -- read every message to find them (166 ms of a 391 ms numbering on a store of 600,000
    -- messages), once for every 10,000 of a backlog.
    PERFORM pg_catalog.set_config('enable_hashjoin', 'off', true);
    PERFORM pg_catalog.set_config('enable_mergejoin', 'off', true);
    WITH ranked AS MATERIALIZED (
        SELECT f.row, f.writer,
               _numbered + pg_catalog.row_number() OVER (ORDER BY f.writer, f.write_order) AS global_position
        FROM (SELECT i.ctid AS row, i.writer, i.write_order
              FROM message_store.message_index AS i
              WHERE i.global_position IS NULL AND i.writer >= _from AND i.writer < _horizon::text::xid8
              ORDER BY i.writer, i.write_order
              LIMIT 10000) AS f
    ), numbered AS (
        UPDATE message_store.message_index AS i SET global_position = r.global_position
        FROM ranked AS r
        WHERE i.ctid = r.row
        RETURNING 1
    )
    SELECT (SELECT pg_catalog.count(*) FROM ranked), (SELECT pg_catalog.count(*) FROM numbered),
           (SELECT pg_catalog.max(r.writer) FROM ranked AS r)
    INTO _ranked, _count, _last_key;
    IF _count <> _ranked THEN
        RAISE EXCEPTION USING
            ERRCODE = 'serialization_failure',
            MESSAGE = 'could not give global positions due to a concurrent update of message_store.message_index',
            HINT = 'The transaction might succeed if retried.';
    END IF;
    IF _count > 0 THEN
        -- the new bound: every message below the horizon was numbered, or (10,000 numbered)
        -- those left have keys at or above the last one numbered; not above this transaction's
        -- id + 1 (ids given after it can be given again after a crash, see numbering_state); and
        -- a bound, once true, stays true (no message can later get a key below a horizon)
        INSERT INTO message_store.numbering_state AS n
            (last_global_position, unnumbered_from, server_started)
        VALUES (_numbered + _count,
                GREATEST(_from, LEAST(CASE WHEN _count < 10000 THEN _horizon::text::xid8 ELSE _last_key END,
                                      (pg_catalog.pg_current_xact_id()::text::bigint + 1)::text::xid8)),
                pg_catalog.pg_postmaster_start_time())
        ON CONFLICT (one) DO UPDATE SET last_global_position = excluded.last_global_position,
                                        unnumbered_from = excluded.unnumbered_from,
                                        server_started = excluded.server_started;
    END IF;
    RETURN _count;
END;
$$;

-- The record behind a message: its payload and time, read from chunked_map's storage (no
-- function call per message: a category batch reads a record of each of up to a thousand maps).
-- It knows the storage's layout (sql/bootstrap.sql: current_record, and archived_chunk's layout
-- 1, the record with sequence first_seq + i - 1 at index i): chunked_map and this extension ship
-- together, and a new layout must change this function too. No row for a record the map no
-- longer holds (retention, a trim, a drop). Called by the owner's functions only; neither
-- SECURITY DEFINER nor SET, so that the planner inlines it into their statements.
--
-- `record`, the address the append wrote the record at, is tried first (one page read where the
-- index costs a descent of its tree: half a category batch's time): the row there is the record
-- only if it is the stream's, at its sequence (current_record's rows are never updated, only
-- inserted and deleted). Where it is not, the record was archived, most often (a stream longer
-- than its chunk size holds most of its records in archived chunks): the stream's archived
-- chunk that starts at or before the sequence is looked up next, and read only if the sequence
-- can be in it (a chunk holds chunk_size records at most; fewer when max_chunk_bytes filled it,
-- hence the test that the element exists). Last, the current chunk by the key (the address now
-- holds another row, the table was restored elsewhere). A message with no address (its append
-- went by SQL: on Citus, with chunked_map.direct_append off) is looked up by the key first, as
-- most of a stream's records are then just as likely current. A record is in one of the two
-- tables in any snapshot (archiving moves it in one transaction), so the order of the tries
-- changes only their cost: archived first, a category batch over archived records takes
-- 10-13 ms instead of 16 (1,000 records of 1,000 streams, chunks of 100, same data).
CREATE FUNCTION message_store.record_at(stream_name text, "position" bigint, record tid)
RETURNS TABLE (payload jsonb, at timestamptz)
LANGUAGE sql STABLE
AS $$
    -- where the append wrote it (with no address: the current chunk by the key); then an
    -- archived chunk (each array detoasted once: OFFSET 0 keeps the subscripts from being
    -- computed twice); then the current chunk by the key
    SELECT r.payload, r.at
    FROM (SELECT c.payload, c.at FROM chunked_map.current_record AS c
          WHERE c.ctid = $3 AND c.map = $1 AND c.seq = $2 + 1
          UNION ALL
          SELECT c.payload, c.at FROM chunked_map.current_record AS c
          WHERE $3 IS NULL AND c.map = $1 AND c.seq = $2 + 1
          UNION ALL
          SELECT e.payload, e.at
          FROM (SELECT a.payloads[$2 + 2 - a.first_seq] AS payload, a.ats[$2 + 2 - a.first_seq] AS at
                FROM (SELECT f.first_seq, f.chunk_size, f.payloads, f.ats
                      FROM chunked_map.archived_chunk AS f
                      WHERE f.map = $1 AND f.first_seq <= $2 + 1
                      ORDER BY f.first_seq DESC LIMIT 1) AS a
                WHERE $2 + 1 < a.first_seq + a.chunk_size
                OFFSET 0) AS e
          WHERE e.payload IS NOT NULL
          UNION ALL
          SELECT c.payload, c.at FROM chunked_map.current_record AS c
          WHERE $3 IS NOT NULL AND c.map = $1 AND c.seq = $2 + 1) AS r
    LIMIT 1
$$;

-- The body of one message (data, metadata, time), or no row (a message whose record retention
-- or a trim removed, or not a message of this store).
CREATE FUNCTION message_store.message_body(stream_name text, "position" bigint)
RETURNS TABLE (data jsonb, metadata jsonb, "time" timestamp)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT r.payload -> 'data', r.payload -> 'metadata', (r.at AT TIME ZONE 'UTC')::timestamp
    FROM message_store.message_index AS i
    CROSS JOIN LATERAL message_store.record_at(i.stream_name, i.position, i.record) AS r
    WHERE i.stream_name = $1 AND i.position = $2
$$;

-- Messages of a stream from a position, at most batch_size (-1: all), in position order: as
-- message-db's (position >= the one asked, LIMIT batch_size: below -1 is PostgreSQL's 2201W), of
-- the messages the stream still holds. 10,000 at a time, each slice a statement of its own,
-- returned in order: the slice's records, from its archived chunks and its current chunk, joined
-- with the same range of the stream's index.
-- The records are read from chunked_map's storage as chunked_read reads them (its statement
-- READ_FORWARD, src/statements/reads.rs; archived_chunk's layout 1, the record with sequence
-- first_seq + i - 1 at index i, as record_at knows it): chunked_map and this extension ship
-- together, and a new layout must change this function too. Read through chunked_read, 1,000
-- messages at the end of a stream of 100,000 took 2.11-2.19 ms, 1.4-1.7 this way (its records
-- copied three times between SPI, Rust and the result; pgbench, scratch); and chunked_read's
-- statements, kept for the whole session, would have been planned under this function's
-- settings.
-- One plan for every call (generic): planned again at each call, as PostgreSQL did for the
-- positions' sake, a read of a few messages took 0.35 ms (pgbench), 0.23 with one plan. A
-- generic plan does not know how many records and index rows a slice holds, and so must not
-- depend on it: one statement a slice, no loop of slices in the plan for it to put a join inside
-- (a generic plan of all slices at once hashed the batch's range once a slice, 0.55 s for a
-- stream of 100,000; another, estimating one index row, read the records once an index row);
-- no nested loop but the records' own (the arrays of a chunk, lateral): a hash or a merge join,
-- in time proportional to the slice. No JIT: estimating a thousand slices of a thousand records,
-- a generic plan compiled itself for 135 ms to read a thousand messages.
CREATE FUNCTION message_store.stream_batch(stream_name varchar, "position" bigint, batch_size bigint)
RETURNS SETOF message_store.message
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
SET enable_nestloop = off
SET jit = off
AS $$
DECLARE
    _first bigint;
    _last bigint;
    _end bigint;
    _current bigint;
BEGIN
    IF stream_batch.batch_size < -1 THEN
        PERFORM 1 LIMIT stream_batch.batch_size;
    END IF;
    -- from the position asked, or the oldest the map holds (none for a dropped map)
    -- (and where the current chunk starts: a slice after it reads no archived chunk)
    SELECT GREATEST(stream_batch.position, s.oldest_seq - 1, 0), s.next_seq - 2, s.current_first_seq
    INTO _first, _last, _current
    FROM chunked_map.map_state AS s WHERE s.map = stream_batch.stream_name;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF stream_batch.batch_size <> -1 AND stream_batch.batch_size <= _last - _first THEN
        _last := _first + stream_batch.batch_size - 1;
    END IF;
    WHILE _first <= _last LOOP
        _end := LEAST(_first + 9999, _last);
        -- (the archived chunks from the newest one starting at or before the slice's first
        -- record, unless that record is in the current chunk, and the current chunk: a record
        -- is in one of them in any snapshot; then the index's range)
        RETURN QUERY
        SELECT i.id::varchar, i.stream_name::varchar, i.type::varchar, i.position, i.global_position,
               (r.payload -> 'data')::varchar, (r.payload -> 'metadata')::varchar,
               (r.at AT TIME ZONE 'UTC')::timestamp
        FROM (SELECT a.first_seq + p.i - 2 AS position, p.payload, p.at
              FROM chunked_map.archived_chunk AS a
              CROSS JOIN LATERAL unnest(a.payloads, a.ats) WITH ORDINALITY AS p(payload, at, i)
              WHERE _first + 1 < _current
                AND a.map = stream_batch.stream_name
                AND a.first_seq >= coalesce(
                        (SELECT b.first_seq FROM chunked_map.archived_chunk AS b
                         WHERE b.map = stream_batch.stream_name AND b.first_seq <= _first + 1
                         ORDER BY b.first_seq DESC LIMIT 1), 0)
                AND a.first_seq <= _end + 1
              UNION ALL
              SELECT c.seq - 1, c.payload, c.at
              FROM chunked_map.current_record AS c
              WHERE c.map = stream_batch.stream_name AND c.seq BETWEEN _first + 1 AND _end + 1) AS r
        JOIN message_store.message_index AS i
          ON i.stream_name = stream_batch.stream_name AND i.position = r.position
        WHERE i.position BETWEEN _first AND _end
        ORDER BY i.position;
        _first := _end + 1;
    END LOOP;
END;
$$;

-- Messages of a category from a global position, at most batch_size (-1: all), in global
-- position order; correlation and consumer group as message-db filters them; over the messages
-- the streams still hold (a batch never stops at messages retention or a trim removed).
CREATE FUNCTION message_store.category_batch(category varchar, "position" bigint, batch_size bigint,
                                             correlation varchar, consumer_group_member bigint,
                                             consumer_group_size bigint)
RETURNS SETOF message_store.message
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- The one plan that reads a batch in time proportional to the batch: the category's index in
-- global position order, stopping when the batch is full. The plan cached for the function's
-- statement is generic (position, filters and batch size are parameters), and with the filters'
-- selectivity unknown the planner would otherwise take every message of the category from the
-- position on, read each one's record and sort them (27 ms where this takes 6, a category of
-- 10,000; proportional to the category, not the batch).
SET enable_sort = off
SET enable_bitmapscan = off
SET enable_memoize = off
AS $$
BEGIN
    -- (in global position order from the index, each message's record read as it comes, until
    -- the batch is full: a message whose record is gone is passed over)
    RETURN QUERY
    SELECT i.id::varchar, i.stream_name::varchar, i.type::varchar, i.position, i.global_position,
           (r.payload -> 'data')::varchar, (r.payload -> 'metadata')::varchar,
           (r.at AT TIME ZONE 'UTC')::timestamp
    FROM message_store.message_index AS i
    CROSS JOIN LATERAL message_store.record_at(i.stream_name, i.position, i.record) AS r
    WHERE pg_catalog.split_part(i.stream_name, '-', 1) = category_batch.category
      AND i.global_position >= category_batch.position
      AND (category_batch.correlation IS NULL
           OR i.correlation_category = category_batch.correlation)
      AND (category_batch.consumer_group_size IS NULL
           OR pg_catalog.mod(@ message_store.hash_64(message_store.cardinal_id(i.stream_name)),
                             category_batch.consumer_group_size::smallint)
              = category_batch.consumer_group_member)
    ORDER BY i.global_position
    LIMIT CASE WHEN category_batch.batch_size = -1 THEN NULL ELSE category_batch.batch_size END;
END;
$$;

-- The newest message of a stream (of a type), or none: the stream's index from its end, and the
-- message's record read as a category batch reads it (record_at). One statement whose plan is
-- cached: where it read through stream_batch, whose plan was then made again for every call
-- (its row counts depend on the positions), it cost 1.2 million instructions a call.
CREATE FUNCTION message_store.last_message(stream_name varchar, type varchar)
RETURNS SETOF message_store.message
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY
    SELECT i.id::varchar, i.stream_name::varchar, i.type::varchar, i.position, i.global_position,
           (r.payload -> 'data')::varchar, (r.payload -> 'metadata')::varchar,
           (r.at AT TIME ZONE 'UTC')::timestamp
    FROM (SELECT n.id, n.stream_name, n.type, n.position, n.global_position, n.record
          FROM message_store.message_index AS n
          WHERE n.stream_name = last_message.stream_name
            AND (last_message.type IS NULL OR n.type = last_message.type)
          ORDER BY n.position DESC
          LIMIT 1) AS i
    CROSS JOIN LATERAL message_store.record_at(i.stream_name, i.position, i.record) AS r;
END;
$$;

-- A stream's version: the position of its newest message, NULL for a stream with none (a map
-- of another kind, or started and never written, is no stream). What write_message compares an
-- expected version with (the map's newest sequence less one), read from the map's state row: no
-- message read.
CREATE FUNCTION message_store.newest_position(stream_name varchar)
RETURNS bigint
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT s.next_seq - 2 FROM chunked_map.map_state AS s
            WHERE s.map = newest_position.stream_name AND s.message_stream);
END;
$$;
-- ---- message-db's relation and views ----

-- Every message, as message-db's table has them (global_position NULL until given): for clients
-- and reports that select from it. One body read per row: a report, not a hot path.
CREATE VIEW message_store.messages AS
SELECT i.global_position, i.position, b."time", i.stream_name, i.type, b.data, b.metadata, i.id
FROM message_store.message_index AS i
CROSS JOIN LATERAL message_store.message_body(i.stream_name, i.position) AS b;

CREATE VIEW message_store.category_type_summary AS
  WITH
    type_count AS (
      SELECT message_store.category(stream_name) AS category, type, COUNT(id) AS message_count
      FROM message_store.message_index
      GROUP BY category, type
    ),
    total_count AS (
      SELECT COUNT(id)::decimal AS total_count FROM message_store.message_index
    )
  SELECT category, type, message_count,
         ROUND((message_count / total_count)::decimal * 100, 2) AS percent
  FROM type_count, total_count
  ORDER BY category, type;

CREATE VIEW message_store.stream_summary AS
  WITH
    stream_count AS (
      SELECT stream_name, COUNT(id) AS message_count
      FROM message_store.message_index
      GROUP BY stream_name
    ),
    total_count AS (
      SELECT COUNT(id)::decimal AS total_count FROM message_store.message_index
    )
  SELECT stream_name, message_count,
         ROUND((message_count / total_count)::decimal * 100, 2) AS percent
  FROM stream_count, total_count
  ORDER BY stream_name;

CREATE VIEW message_store.stream_type_summary AS
  WITH
    type_count AS (
      SELECT stream_name, type, COUNT(id) AS message_count
      FROM message_store.message_index
      GROUP BY stream_name, type
    ),
    total_count AS (
      SELECT COUNT(id)::decimal AS total_count FROM message_store.message_index
    )
  SELECT stream_name, type, message_count,
         ROUND((message_count / total_count)::decimal * 100, 2) AS percent
  FROM type_count, total_count
  ORDER BY stream_name, type;

CREATE VIEW message_store.type_category_summary AS
  WITH
    type_count AS (
      SELECT type, message_store.category(stream_name) AS category, COUNT(id) AS message_count
      FROM message_store.message_index
      GROUP BY type, category
    ),
    total_count AS (
      SELECT COUNT(id)::decimal AS total_count FROM message_store.message_index
    )
  SELECT type, category, message_count,
         ROUND((message_count / total_count)::decimal * 100, 2) AS percent
  FROM type_count, total_count
  ORDER BY type, category;

CREATE VIEW message_store.type_stream_summary AS
  WITH
    type_count AS (
      SELECT type, stream_name, COUNT(id) AS message_count
      FROM message_store.message_index
      GROUP BY type, stream_name
    ),
    total_count AS (
      SELECT COUNT(id)::decimal AS total_count FROM message_store.message_index
    )
  SELECT type, stream_name, message_count,
         ROUND((message_count / total_count)::decimal * 100, 2) AS percent
  FROM type_count, total_count
  ORDER BY type, stream_name;

CREATE VIEW message_store.type_summary AS
  WITH
    type_count AS (
      SELECT type, COUNT(id) AS message_count
      FROM message_store.message_index
      GROUP BY type
    ),
    total_count AS (
      SELECT COUNT(id)::decimal AS total_count FROM message_store.message_index
    )
  SELECT type, message_count,
         ROUND((message_count / total_count)::decimal * 100, 2) AS percent
  FROM type_count, total_count
  ORDER BY type;

-- ---- message-db's functions: as the caller (a condition is the caller's SQL) ----

CREATE FUNCTION message_store.stream_version(stream_name varchar)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN message_store.newest_position(stream_version.stream_name);
END;
$$;
CREATE FUNCTION message_store.get_stream_messages(
  stream_name varchar,
  "position" bigint DEFAULT 0,
  batch_size bigint DEFAULT 1000,
  condition varchar DEFAULT NULL
)
RETURNS SETOF message_store.message
LANGUAGE plpgsql VOLATILE
-- (no search_path of its own: a condition is the caller's SQL, on the caller's path; every
-- name here is qualified but for pg_catalog's)
AS $$
DECLARE
  _command text;
BEGIN
  IF message_store.is_category(get_stream_messages.stream_name) THEN
    RAISE EXCEPTION
      'Must be a stream name: %',
      get_stream_messages.stream_name;
  END IF;

  position := COALESCE(position, 0);
  batch_size := COALESCE(batch_size, 1000);

  PERFORM message_store.number_messages();

  IF get_stream_messages.condition IS NULL THEN
    RETURN QUERY SELECT * FROM message_store.stream_batch(get_stream_messages.stream_name,
                                                          get_stream_messages.position,
                                                          get_stream_messages.batch_size);
    RETURN;
  END IF;

  IF current_setting('message_store.sql_condition', true) IS NULL OR
      current_setting('message_store.sql_condition', true) = 'off' THEN
    RAISE EXCEPTION
      'Retrieval with SQL condition is not activated';
  END IF;

  _command := '
    SELECT
      id::varchar,
      stream_name::varchar,
      type::varchar,
      position::bigint,
      global_position::bigint,
      data::varchar,
      metadata::varchar,
      time::timestamp
    FROM
      message_store.messages AS messages
    WHERE
      stream_name = $1 AND
      position >= $2 AND
      (%s)
    ORDER BY
      position ASC';
  _command := format(_command, get_stream_messages.condition);
  IF get_stream_messages.batch_size != -1 THEN
    _command := _command || '
      LIMIT
        $3';
  END IF;

  RETURN QUERY EXECUTE _command USING
    get_stream_messages.stream_name,
    get_stream_messages.position,
    get_stream_messages.batch_size;
END;
$$;

CREATE FUNCTION message_store.get_category_messages(
  category varchar,
  "position" bigint DEFAULT 1,
  batch_size bigint DEFAULT 1000,
  correlation varchar DEFAULT NULL,
  consumer_group_member bigint DEFAULT NULL,
  consumer_group_size bigint DEFAULT NULL,
  condition varchar DEFAULT NULL
)
RETURNS SETOF message_store.message
LANGUAGE plpgsql VOLATILE
-- (no search_path of its own: a condition is the caller's SQL, on the caller's path; every
-- name here is qualified but for pg_catalog's)
AS $$
DECLARE
  _command text;
BEGIN
  IF NOT message_store.is_category(get_category_messages.category) THEN
    RAISE EXCEPTION
      'Must be a category: %',
      get_category_messages.category;
  END IF;

  position := COALESCE(position, 1);
  batch_size := COALESCE(batch_size, 1000);

  IF get_category_messages.correlation IS NOT NULL THEN
    IF position('-' IN get_category_messages.correlation) > 0 THEN
      RAISE EXCEPTION
        'Correlation must be a category (Correlation: %)',
        get_category_messages.correlation;
    END IF;
  END IF;

  IF (get_category_messages.consumer_group_member IS NOT NULL AND
      get_category_messages.consumer_group_size IS NULL) OR
      (get_category_messages.consumer_group_member IS NULL AND
      get_category_messages.consumer_group_size IS NOT NULL) THEN

    RAISE EXCEPTION
      'Consumer group member and size must be specified (Consumer Group Member: %, Consumer Group Size: %)',
      get_category_messages.consumer_group_member,
      get_category_messages.consumer_group_size;
  END IF;

  IF get_category_messages.consumer_group_member IS NOT NULL AND
      get_category_messages.consumer_group_size IS NOT NULL THEN

    IF get_category_messages.consumer_group_size < 1 THEN
      RAISE EXCEPTION
        'Consumer group size must not be less than 1 (Consumer Group Member: %, Consumer Group Size: %)',
        get_category_messages.consumer_group_member,
        get_category_messages.consumer_group_size;
    END IF;

    IF get_category_messages.consumer_group_member < 0 THEN
      RAISE EXCEPTION
        'Consumer group member must not be less than 0 (Consumer Group Member: %, Consumer Group Size: %)',
        get_category_messages.consumer_group_member,
        get_category_messages.consumer_group_size;
    END IF;

    IF get_category_messages.consumer_group_member >= get_category_messages.consumer_group_size THEN
      RAISE EXCEPTION
        'Consumer group member must be less than the group size (Consumer Group Member: %, Consumer Group Size: %)',
        get_category_messages.consumer_group_member,
        get_category_messages.consumer_group_size;
    END IF;
  END IF;

  PERFORM message_store.number_messages();

  IF get_category_messages.condition IS NULL THEN
    -- (message-db passes the size as a smallint, out of range or not whatever the category holds)
    PERFORM get_category_messages.consumer_group_size::smallint;
    RETURN QUERY SELECT * FROM message_store.category_batch(
      get_category_messages.category,
      get_category_messages.position,
      get_category_messages.batch_size,
      get_category_messages.correlation,
      get_category_messages.consumer_group_member,
      get_category_messages.consumer_group_size);
    RETURN;
  END IF;

  IF current_setting('message_store.sql_condition', true) IS NULL OR
      current_setting('message_store.sql_condition', true) = 'off' THEN
    RAISE EXCEPTION
      'Retrieval with SQL condition is not activated';
  END IF;

  -- (the category as the index messages_category has it, so that the read walks that index:
  -- message_store.category(stream_name), once inlined, is another expression to the planner)
  _command := '
    SELECT
      id::varchar,
      stream_name::varchar,
      type::varchar,
      position::bigint,
      global_position::bigint,
      data::varchar,
      metadata::varchar,
      time::timestamp
    FROM
      message_store.messages AS messages
    WHERE
      pg_catalog.split_part(stream_name, ''-'', 1) = $1 AND
      global_position >= $2';
  IF get_category_messages.correlation IS NOT NULL THEN
    _command := _command || ' AND
      message_store.category(metadata->>''correlationStreamName'') = $4';
  END IF;
  IF get_category_messages.consumer_group_member IS NOT NULL THEN
    _command := _command || ' AND
      MOD(@message_store.hash_64(message_store.cardinal_id(stream_name)), $6) = $5';
  END IF;
  _command := _command || ' AND
      (%s)';
  _command := format(_command, get_category_messages.condition);
  _command := _command || '
    ORDER BY
      global_position ASC';
  IF get_category_messages.batch_size != -1 THEN
    _command := _command || '
      LIMIT
        $3';
  END IF;

  RETURN QUERY EXECUTE _command USING
    get_category_messages.category,
    get_category_messages.position,
    get_category_messages.batch_size,
    get_category_messages.correlation,
    get_category_messages.consumer_group_member,
    get_category_messages.consumer_group_size::smallint;
END;
$$;

CREATE FUNCTION message_store.get_last_stream_message(
  stream_name varchar,
  "type" varchar DEFAULT NULL
)
RETURNS SETOF message_store.message
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  PERFORM message_store.number_messages();
  RETURN QUERY SELECT * FROM message_store.last_message(get_last_stream_message.stream_name,
                                                        get_last_stream_message."type");
END;
$$;

-- ---- privileges: message-db's, and nothing of the owner's to anyone else ----

REVOKE ALL ON ALL TABLES IN SCHEMA message_store FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION
    message_store.write_message(varchar, varchar, varchar, jsonb, jsonb, bigint),
    message_store.write_message_checked(varchar, varchar, varchar, jsonb, jsonb, bigint),
    message_store.append_message(text, varchar, varchar, jsonb, jsonb, timestamptz),
    message_store.import_message(varchar, varchar, varchar, jsonb, jsonb, timestamp),
    message_store.refuse_missing_value(text),
    message_store.number_messages(),
    message_store.record_at(text, bigint, tid),
    message_store.message_body(text, bigint),
    message_store.stream_batch(varchar, bigint, bigint),
    message_store.category_batch(varchar, bigint, bigint, varchar, bigint, bigint),
    message_store.last_message(varchar, varchar),
    message_store.newest_position(varchar)
FROM PUBLIC;
GRANT USAGE ON SCHEMA message_store TO message_store;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA message_store TO message_store;
-- (but the import's and the checked write's and their write's: the owner's only)
REVOKE EXECUTE ON FUNCTION
    message_store.write_message_checked(varchar, varchar, varchar, jsonb, jsonb, bigint),
    message_store.append_message(text, varchar, varchar, jsonb, jsonb, timestamptz),
    message_store.import_message(varchar, varchar, varchar, jsonb, jsonb, timestamp)
FROM message_store;
GRANT SELECT ON
    message_store.messages,
    message_store.category_type_summary,
    message_store.stream_summary,
    message_store.stream_type_summary,
    message_store.type_category_summary,
    message_store.type_stream_summary,
    message_store.type_summary
TO message_store;
