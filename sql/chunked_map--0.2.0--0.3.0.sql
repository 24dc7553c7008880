-- chunked_map 0.2.0 -> 0.3.0. The state row becomes the truth about each map's current chunk
-- (its next sequence and payload bytes, advanced by every append under the map's lock), direct
-- INSERT joins the guarded DML, chunked_records reads rows without building a page, and
-- chunked_read / chunked_set_notify arrive. Archived chunks are not touched: every page reads
-- byte-identical after the upgrade. tests/cluster/tests/upgrade.rs checks that an upgraded
-- database ends up with exactly the catalog of a fresh 0.3.0 install.
\echo Use "ALTER EXTENSION chunked_map UPDATE TO '0.3.0'" to load this file. \quit

-- Map names, tokens and messages are UTF-8 in the library (see bootstrap.sql).
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

-- The next sequence is what 0.2.0 derived: one past the newest record of the current chunk.
-- A payload's bytes are what an append counts: the larger of its binary jsonb size (a value
-- parsed from its own text has exactly the stored value's binary form) and its text's length.
ALTER TABLE chunked_map.map_state
    ADD COLUMN next_seq bigint,
    ADD COLUMN current_bytes bigint NOT NULL DEFAULT 0,
    ADD COLUMN notify boolean NOT NULL DEFAULT false;
UPDATE chunked_map.map_state AS s
SET next_seq = c.next_seq, current_bytes = c.bytes
FROM (SELECT m.map,
             coalesce(max(r.seq) + 1, m.current_first_seq) AS next_seq,
             coalesce(sum(GREATEST(pg_catalog.pg_column_size(r.payload::text::jsonb) - 4,
                              pg_catalog.octet_length(r.payload::text))), 0) AS bytes
      FROM chunked_map.map_state AS m
      LEFT JOIN chunked_map.current_record AS r ON r.map = m.map AND r.seq >= m.current_first_seq
      GROUP BY m.map, m.current_first_seq) AS c
WHERE c.map = s.map;
-- Every append now writes the state row, and PostgreSQL prepares a table's CHECK expressions
-- anew in every statement that writes it: the ranges move to the functions (which enforced them
-- already) and chunked_verify. HOT updates want room on the row's page.
ALTER TABLE chunked_map.map_state
    ALTER COLUMN next_seq SET NOT NULL,
    DROP CONSTRAINT map_state_map_check,
    DROP CONSTRAINT map_state_chunk_size_check,
    DROP CONSTRAINT map_state_current_chunk_size_check,
    DROP CONSTRAINT map_state_current_first_seq_check,
    SET (fillfactor = 70);

-- chunked_records reads rows itself (also the rows of a chunk too large for one jsonb page).
CREATE OR REPLACE FUNCTION chunked_map.chunked_records(map text, page_token text DEFAULT 'current')
RETURNS TABLE (seq bigint, payload jsonb)
STABLE SECURITY DEFINER PARALLEL SAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_records_wrapper';

CREATE FUNCTION chunked_map.chunked_read(map text, after_seq bigint DEFAULT 0, max_records integer DEFAULT 100)
RETURNS TABLE (seq bigint, payload jsonb)
STABLE SECURITY DEFINER PARALLEL SAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_read_wrapper';

CREATE FUNCTION chunked_map.chunked_set_notify(map text, enabled boolean)
RETURNS void
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_set_notify_wrapper';

-- Scale-out on Citus (owner-only, like every function until granted).
CREATE FUNCTION chunked_map.chunked_distribute()
RETURNS void
STRICT VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_distribute_wrapper';

-- Direct INSERT by anyone but the owner is refused like UPDATE, DELETE and TRUNCATE.
DROP TRIGGER archived_chunk_is_immutable ON chunked_map.archived_chunk;
DROP TRIGGER current_record_is_append_only ON chunked_map.current_record;
DROP TRIGGER map_state_is_kept ON chunked_map.map_state;
CREATE TRIGGER archived_chunk_is_immutable
    BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON chunked_map.archived_chunk
    FOR EACH STATEMENT EXECUTE FUNCTION chunked_map.chunked_forbid_rewrite();
CREATE TRIGGER current_record_is_append_only
    BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON chunked_map.current_record
    FOR EACH STATEMENT EXECUTE FUNCTION chunked_map.chunked_forbid_rewrite();
CREATE TRIGGER map_state_is_kept
    BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON chunked_map.map_state
    FOR EACH STATEMENT EXECUTE FUNCTION chunked_map.chunked_forbid_rewrite();

-- Nor can code be attached to them: a role granted TRIGGER on a storage table (part of ALL)
-- could add a trigger that the functions, running as the owner, would fire; one granted
-- REFERENCES could point a foreign key at map_state and block chunked_drop. Both are refused at
-- the end of the command, for anyone but the tables' owner (or a member of it), with the same
-- 42501 as direct DML.
CREATE FUNCTION chunked_map.chunked_forbid_attachments() RETURNS event_trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    command record;
    target regclass;
    owner oid;
BEGIN
    FOR command IN SELECT * FROM pg_catalog.pg_event_trigger_ddl_commands() LOOP
        target := NULL;
        IF command.command_tag = 'CREATE TRIGGER' THEN
            SELECT t.tgrelid INTO target FROM pg_catalog.pg_trigger AS t WHERE t.oid = command.objid;
        ELSIF command.classid = 'pg_catalog.pg_class'::regclass THEN
            SELECT c.confrelid INTO target FROM pg_catalog.pg_constraint AS c
            WHERE c.conrelid = command.objid AND c.contype = 'f'
              AND c.confrelid IN ('chunked_map.map_state'::regclass, 'chunked_map.current_record'::regclass,
                                  'chunked_map.archived_chunk'::regclass)
            LIMIT 1;
        END IF;
        IF target IN ('chunked_map.map_state'::regclass, 'chunked_map.current_record'::regclass,
                      'chunked_map.archived_chunk'::regclass) THEN
            SELECT c.relowner INTO owner FROM pg_catalog.pg_class AS c WHERE c.oid = target;
            IF NOT pg_catalog.pg_has_role(current_user, owner, 'USAGE') THEN
                RAISE EXCEPTION '% % is not allowed: chunked_map history is append-only',
                        CASE command.command_tag WHEN 'CREATE TRIGGER' THEN 'CREATE TRIGGER on'
                                                 ELSE 'a foreign key to' END,
                        target
                    USING ERRCODE = 'insufficient_privilege',
                          DETAIL = 'Only the owner of the extension''s tables may attach triggers or foreign keys to them.';
            END IF;
        END IF;
    END LOOP;
END
$$;
CREATE EVENT TRIGGER chunked_map_attachments ON ddl_command_end
    WHEN TAG IN ('CREATE TRIGGER', 'CREATE TABLE', 'ALTER TABLE')
    EXECUTE FUNCTION chunked_map.chunked_forbid_attachments();

REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA chunked_map FROM PUBLIC;
