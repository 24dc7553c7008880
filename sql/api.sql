-- The SQL functions (their C side is src/api.rs). Every one is SECURITY DEFINER and none is
-- STRICT (a NULL argument raises 22004, but where NULL has a meaning: a retention limit, every
-- map for chunked_apply_retention, every map for chunked_subscribe's category, the whole kept
-- history for chunked_set_id_window, no expectation for chunked_register_once, a record without
-- an id in chunked_register_many_once's ids); reads are STABLE PARALLEL SAFE,
-- writes VOLATILE PARALLEL UNSAFE. Nobody but the owner may call them until granted
-- (sql/finalize.sql revokes EXECUTE from PUBLIC; sql/grants/ has the recipes).

CREATE FUNCTION chunked_map.chunked_start(map text, chunk_size integer DEFAULT 100)
RETURNS boolean
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_start_wrapper';

CREATE FUNCTION chunked_map.chunked_register(map text, payload jsonb)
RETURNS bigint
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_register_wrapper';

CREATE FUNCTION chunked_map.chunked_register(map text, payload jsonb, expected_last_seq bigint)
RETURNS bigint
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_register_if_last_wrapper';

CREATE FUNCTION chunked_map.chunked_register_many(map text, payloads jsonb[])
RETURNS SETOF bigint
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_register_many_wrapper';

-- (0.5) Appends with an id the map remembers: a second append of an id it remembers appends
-- nothing and returns the first one's sequence, with duplicate = true.
CREATE FUNCTION chunked_map.chunked_register_once(map text, payload jsonb, id text, expected_last_seq bigint DEFAULT NULL)
RETURNS TABLE (seq bigint, duplicate boolean)
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_register_once_wrapper';

-- (0.5) Appends with an id the map does not remember (never looked up: chunked_register_once
-- does not find it), kept with the record only: for a writer that keeps its ids unique itself,
-- the message store (docs/message-db.md). Owner-only, like every function. A map that does not
-- exist is started (chunks of 100), as chunked_start would. at: the record's time where its
-- writer knows it (a message moved over from message-db); NULL: the transaction's start, as
-- every append's. Answers the record's sequence and,
-- when it was written directly, its address in current_record (NULL otherwise): a hint its
-- reader checks, the row leaving when its chunk is archived.
CREATE FUNCTION chunked_map.chunked_register_with_id(map text, payload jsonb, id text,
                                                     at timestamptz DEFAULT NULL,
                                                     OUT seq bigint, OUT record tid)
RETURNS record
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_register_with_id_wrapper';

CREATE FUNCTION chunked_map.chunked_register_many_once(map text, payloads jsonb[], ids text[])
RETURNS TABLE (seq bigint, duplicate boolean)
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_register_many_once_wrapper';

CREATE FUNCTION chunked_map.chunked_page(map text, page_token text DEFAULT 'current')
RETURNS jsonb
STABLE SECURITY DEFINER PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_page_wrapper';

CREATE FUNCTION chunked_map.chunked_records(map text, page_token text DEFAULT 'current')
RETURNS TABLE (seq bigint, payload jsonb, at timestamptz, id text)
STABLE SECURITY DEFINER PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_records_wrapper';

CREATE FUNCTION chunked_map.chunked_read(map text, after_seq bigint DEFAULT 0, max_records integer DEFAULT 100)
RETURNS TABLE (seq bigint, payload jsonb, at timestamptz, id text)
STABLE SECURITY DEFINER PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_read_wrapper';

CREATE FUNCTION chunked_map.chunked_get(map text, seq bigint)
RETURNS jsonb
STABLE SECURITY DEFINER PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_get_wrapper';

CREATE FUNCTION chunked_map.chunked_get_by_id(map text, id text)
RETURNS jsonb
STABLE SECURITY DEFINER PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_get_by_id_wrapper';

CREATE FUNCTION chunked_map.chunked_info(map text)
RETURNS jsonb
STABLE SECURITY DEFINER PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_info_wrapper';

CREATE FUNCTION chunked_map.chunked_set_chunk_size(map text, chunk_size integer)
RETURNS void
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_set_chunk_size_wrapper';

CREATE FUNCTION chunked_map.chunked_set_notify(map text, enabled boolean)
RETURNS void
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_set_notify_wrapper';

CREATE FUNCTION chunked_map.chunked_verify(map text)
RETURNS jsonb
STABLE SECURITY DEFINER PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_verify_wrapper';

CREATE FUNCTION chunked_map.chunked_drop(map text)
RETURNS boolean
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_drop_wrapper';

CREATE FUNCTION chunked_map.chunked_trim(map text, before_seq bigint)
RETURNS bigint
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_trim_wrapper';

CREATE FUNCTION chunked_map.chunked_set_retention(map text, max_records bigint DEFAULT NULL, max_age interval DEFAULT NULL)
RETURNS void
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_set_retention_wrapper';

CREATE FUNCTION chunked_map.chunked_apply_retention(map text DEFAULT NULL)
RETURNS bigint
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_apply_retention_wrapper';

CREATE FUNCTION chunked_map.chunked_set_id_window(map text, max_records bigint)
RETURNS void
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_set_id_window_wrapper';

-- (0.5) What the message store (chunked_map_message_store, docs/message-db.md) orders its writes
-- by: the transaction id assigned next, read now (not from a snapshot); a write's order key (the
-- database's writers' mark taken until the transaction ends, its id, then the next id); and the
-- lock one numbering holds at a time (false at once when another holds it). The two locks are
-- in a lock space no SQL function can take. Owner-only, like every function.
CREATE FUNCTION chunked_map.chunked_next_transaction_id()
RETURNS bigint
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_next_transaction_id_wrapper';

CREATE FUNCTION chunked_map.chunked_order_key()
RETURNS bigint
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_order_key_wrapper';

CREATE FUNCTION chunked_map.chunked_try_numbering_lock()
RETURNS boolean
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_try_numbering_lock_wrapper';

CREATE FUNCTION chunked_map.chunked_subscribe(consumer text, category text DEFAULT NULL, from_start boolean DEFAULT true)
RETURNS boolean
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_subscribe_wrapper';

CREATE FUNCTION chunked_map.chunked_unsubscribe(consumer text)
RETURNS boolean
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_unsubscribe_wrapper';

CREATE FUNCTION chunked_map.chunked_poll(consumer text, max_records integer DEFAULT 100, member integer DEFAULT 0, group_size integer DEFAULT 1)
RETURNS TABLE (map text, seq bigint, payload jsonb, trimmed boolean, at timestamptz, id text)
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_poll_wrapper';

-- Every consumer of the feed and what it has not had yet: maps and records of its category
-- after its positions, and when the oldest move it has not passed was recorded (NULL: none, or
-- only history it is still catching up on; always on a Citus cluster, which records no moves).
-- It reads every map of each consumer's category: a tool for monitoring, not for every poll.
-- (0.5) A function run as its owner, behind the view: on a Citus cluster the view's queries on
-- the workers would run as the caller, whom the tables are not granted to. Granted like the
-- functions (the consumer recipe: the view and this function).
CREATE FUNCTION chunked_map.chunked_consumers()
RETURNS TABLE (consumer text, category text, from_start boolean, maps_behind bigint, records_behind bigint, oldest_unread_move_at timestamptz)
STABLE SECURITY DEFINER PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
LANGUAGE plpgsql AS $$
DECLARE
    c record;
    oldest timestamptz;
BEGIN
    -- one consumer at a time: on a Citus cluster the statement below joins the maps with their
    -- positions on every worker (colocated), and the consumers stay on the coordinator
    FOR c IN SELECT k.consumer, k.category, k.from_start FROM chunked_map.consumer AS k LOOP
        oldest := NULL;
        -- moves are recorded on a single node only (a cluster has none)
        IF EXISTS (SELECT 1 FROM chunked_map.map_change) THEN
            SELECT min(m.at) INTO oldest
            FROM chunked_map.map_change AS m
            JOIN chunked_map.map_state AS ms ON ms.map = m.map
            LEFT JOIN chunked_map.consumer_position AS mp
                   ON mp.consumer = c.consumer AND mp.map = m.map AND mp.incarnation = ms.incarnation
            WHERE (c.category IS NULL OR c.category = split_part(m.map, '-', 1))
              AND ms.next_seq - 1 > coalesce(mp.seq, 0);
        END IF;
        RETURN QUERY
        SELECT c.consumer, c.category, c.from_start,
               count(s.map) FILTER (WHERE s.next_seq - 1 > coalesce(p.seq, 0)),
               coalesce(sum(greatest(s.next_seq - 1 - greatest(coalesce(p.seq, 0), s.oldest_seq - 1), 0)), 0)::bigint,
               oldest
        FROM chunked_map.map_state AS s
        -- a position left from a dropped map of the name (another incarnation) counts as none
        LEFT JOIN chunked_map.consumer_position AS p
               ON p.map = s.map AND p.consumer = c.consumer AND p.incarnation = s.incarnation
        WHERE c.category IS NULL OR c.category = split_part(s.map, '-', 1);
    END LOOP;
END
$$;

CREATE VIEW chunked_map.consumers AS
-- (the names in the consumers' collation, as the view of 0.4 had them)
SELECT c.consumer COLLATE "C" AS consumer, c.category COLLATE "C" AS category, c.from_start,
       c.maps_behind, c.records_behind, c.oldest_unread_move_at
FROM chunked_map.chunked_consumers() AS c;

CREATE FUNCTION chunked_map.chunked_distribute()
RETURNS void
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_distribute_wrapper';

-- The history trigger's function (src/immutability.rs; the triggers are in sql/protect.sql).
CREATE FUNCTION chunked_map.chunked_forbid_rewrite()
RETURNS trigger
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_forbid_rewrite_wrapper';
