-- chunked_map 0.4.1 -> 0.5.0: records say when they were appended and may carry an id.
-- - current_record gets at (the appending transaction's start) and id; archived_chunk gets the
--   same per record (ats, ids). Records appended before the update have no time (NULL: not
--   known) and no id; their pages gain the keys "at" and "id", null, and are otherwise the same.
-- - record_id remembers, per map, the ids of its newest id_window records (map_state.id_window,
--   10000 by default; NULL: every record it keeps).
-- - map_state.message_stream marks a stream of the message store (chunked_map_message_store),
--   which takes no other append; no map is one before the update.
-- - chunked_records, chunked_read and chunked_poll return two more columns (at, id): they are
--   made anew, and the EXECUTE privileges granted on them are granted again on the new ones.
-- - New: chunked_register_once, chunked_register_many_once, chunked_get_by_id,
--   chunked_set_id_window.
\echo Use "ALTER EXTENSION chunked_map UPDATE TO '0.5.0'" to load this file. \quit

-- On a Citus cluster the storage tables are distributed, and Citus carries an ALTER TABLE of one
-- to the workers as the text of the statement, which within an extension's script is the whole
-- script (refused: "cannot insert multiple commands into a prepared statement"): each is run by
-- EXECUTE, its own text. The workers run this script too (Citus carries the update to them), so
-- a column may be there already when the coordinator's ALTER reaches them: IF NOT EXISTS.
DO $$ BEGIN EXECUTE 'ALTER TABLE chunked_map.map_state ADD COLUMN IF NOT EXISTS id_window bigint DEFAULT 10000, ADD COLUMN IF NOT EXISTS message_stream boolean NOT NULL DEFAULT false'; END $$;
DO $$ BEGIN EXECUTE 'ALTER TABLE chunked_map.current_record ADD COLUMN IF NOT EXISTS at timestamptz, ADD COLUMN IF NOT EXISTS id text COLLATE "C"'; END $$;
DO $$ BEGIN EXECUTE 'ALTER TABLE chunked_map.archived_chunk ADD COLUMN IF NOT EXISTS ats timestamptz[], ADD COLUMN IF NOT EXISTS ids text[] COLLATE "C"'; END $$;
DO $$
BEGIN
    IF 'lz4' = ANY (SELECT pg_catalog.unnest(enumvals) FROM pg_catalog.pg_settings
                    WHERE name = 'default_toast_compression') THEN
        ALTER TABLE chunked_map.archived_chunk ALTER COLUMN ats SET COMPRESSION lz4,
                                               ALTER COLUMN ids SET COMPRESSION lz4;
    END IF;
END
$$;

CREATE TABLE chunked_map.record_id (
    map text   COLLATE "C" NOT NULL,
    id  text   COLLATE "C" NOT NULL,
    seq bigint NOT NULL,
    CONSTRAINT record_id_pkey PRIMARY KEY (map, id)
);
CREATE INDEX record_id_seq ON chunked_map.record_id (map, seq);
SELECT pg_catalog.pg_extension_config_dump('chunked_map.record_id', '');
REVOKE ALL ON chunked_map.record_id FROM PUBLIC;
-- a forged row would make an append of that id append nothing: only the owner writes it
CREATE TRIGGER record_id_is_kept
    BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON chunked_map.record_id
    FOR EACH STATEMENT EXECUTE FUNCTION chunked_map.chunked_forbid_rewrite();

-- The functions whose rows get two more columns: their grants, kept to be given again (with
-- the grant option where it was given; the grantor is the extension's owner now).
-- (Kept in a setting of this transaction, not a temporary table: on a Citus cluster the update
-- runs on every node in a transaction that is prepared, which a temporary object forbids.)
SELECT pg_catalog.set_config('chunked_map_update.grants', coalesce(pg_catalog.jsonb_agg(g)::text, '[]'), true)
FROM (
    SELECT p.proname::text AS function, a.grantee, a.is_grantable
    FROM pg_catalog.pg_proc AS p
    CROSS JOIN LATERAL pg_catalog.aclexplode(p.proacl) AS a
    WHERE p.pronamespace = 'chunked_map'::pg_catalog.regnamespace
      AND p.proname IN ('chunked_records', 'chunked_read', 'chunked_poll')
      AND a.privilege_type = 'EXECUTE'
      AND a.grantee <> p.proowner
) AS g;

DROP FUNCTION chunked_map.chunked_records(text, text);
DROP FUNCTION chunked_map.chunked_read(text, bigint, integer);
DROP FUNCTION chunked_map.chunked_poll(text, integer, integer, integer);

CREATE FUNCTION chunked_map.chunked_records(map text, page_token text DEFAULT 'current')
RETURNS TABLE (seq bigint, payload jsonb, at timestamptz, id text)
STABLE SECURITY DEFINER PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_records_wrapper';

CREATE FUNCTION chunked_map.chunked_read(map text, after_seq bigint DEFAULT 0, max_records integer DEFAULT 100)
RETURNS TABLE (seq bigint, payload jsonb, at timestamptz, id text)
STABLE SECURITY DEFINER PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_read_wrapper';

CREATE FUNCTION chunked_map.chunked_poll(consumer text, max_records integer DEFAULT 100, member integer DEFAULT 0, group_size integer DEFAULT 1)
RETURNS TABLE (map text, seq bigint, payload jsonb, trimmed boolean, at timestamptz, id text)
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_poll_wrapper';

CREATE FUNCTION chunked_map.chunked_register_once(map text, payload jsonb, id text, expected_last_seq bigint DEFAULT NULL)
RETURNS TABLE (seq bigint, duplicate boolean)
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_register_once_wrapper';

CREATE FUNCTION chunked_map.chunked_register_many_once(map text, payloads jsonb[], ids text[])
RETURNS TABLE (seq bigint, duplicate boolean)
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_register_many_once_wrapper';

CREATE FUNCTION chunked_map.chunked_get_by_id(map text, id text)
RETURNS jsonb
STABLE SECURITY DEFINER PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_get_by_id_wrapper';

CREATE FUNCTION chunked_map.chunked_set_id_window(map text, max_records bigint)
RETURNS void
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_set_id_window_wrapper';

REVOKE EXECUTE ON FUNCTION chunked_map.chunked_records(text, text),
    chunked_map.chunked_read(text, bigint, integer),
    chunked_map.chunked_poll(text, integer, integer, integer),
    chunked_map.chunked_register_once(text, jsonb, text, bigint),
    chunked_map.chunked_register_many_once(text, jsonb[], text[]),
    chunked_map.chunked_get_by_id(text, text),
    chunked_map.chunked_set_id_window(text, bigint) FROM PUBLIC;

DO $$
DECLARE
    granted record;
BEGIN
    FOR granted IN
        SELECT g.function, g.grantee, g.is_grantable
        FROM pg_catalog.jsonb_to_recordset(pg_catalog.current_setting('chunked_map_update.grants')::jsonb)
             AS g(function text, grantee oid, is_grantable boolean)
    LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION chunked_map.%s TO %s%s',
            CASE granted.function
                WHEN 'chunked_records' THEN 'chunked_records(text, text)'
                WHEN 'chunked_read' THEN 'chunked_read(text, bigint, integer)'
                ELSE 'chunked_poll(text, integer, integer, integer)'
            END,
            CASE WHEN granted.grantee = 0 THEN 'PUBLIC'
                 ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(granted.grantee)) END,
            CASE WHEN granted.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
END
$$;

-- (0.5) chunked_map.consumers reads through a function run as its owner (on a Citus cluster the
-- view's queries on the workers would run as the caller). A role that may select from the view
-- may call the function.
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

CREATE OR REPLACE VIEW chunked_map.consumers AS
-- (the names in the consumers' collation, as the view of 0.4 had them)
SELECT c.consumer COLLATE "C" AS consumer, c.category COLLATE "C" AS category, c.from_start,
       c.maps_behind, c.records_behind, c.oldest_unread_move_at
FROM chunked_map.chunked_consumers() AS c;

REVOKE EXECUTE ON FUNCTION chunked_map.chunked_consumers() FROM PUBLIC;

DO $$
DECLARE
    granted record;
BEGIN
    FOR granted IN
        SELECT a.grantee, a.is_grantable
        FROM pg_catalog.pg_class AS v, pg_catalog.aclexplode(v.relacl) AS a
        WHERE v.oid = 'chunked_map.consumers'::pg_catalog.regclass AND a.privilege_type = 'SELECT'
          AND a.grantee <> v.relowner
    LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION chunked_map.chunked_consumers() TO %s%s',
            CASE WHEN granted.grantee = 0 THEN 'PUBLIC'
                 ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(granted.grantee)) END,
            CASE WHEN granted.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
END
$$;

-- (0.5) What the message store (chunked_map_message_store) orders its writes by (sql/api.sql).
-- Owner-only, like every function.
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
-- (0.5) An append whose id the map does not remember: the message store keeps its ids unique.
CREATE FUNCTION chunked_map.chunked_register_with_id(map text, payload jsonb, id text,
                                                     at timestamptz DEFAULT NULL,
                                                     OUT seq bigint, OUT record tid)
RETURNS record
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_register_with_id_wrapper';
REVOKE EXECUTE ON FUNCTION chunked_map.chunked_next_transaction_id(),
                           chunked_map.chunked_order_key(),
                           chunked_map.chunked_try_numbering_lock(),
                           chunked_map.chunked_register_with_id(text, jsonb, text, timestamptz) FROM PUBLIC;
