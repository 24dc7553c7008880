-- Stored history cannot be added to, changed or removed by direct DML except by the tables'
-- owner (the API functions run as the owner). Statement-level: they fire once per statement.
-- Citus rejects triggers on distributed tables unless citus.enable_unsafe_triggers is on: see
-- the README.
CREATE TRIGGER archived_chunk_is_immutable
    BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON chunked_map.archived_chunk
    FOR EACH STATEMENT EXECUTE FUNCTION chunked_map.chunked_forbid_rewrite();
CREATE TRIGGER current_record_is_append_only
    BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON chunked_map.current_record
    FOR EACH STATEMENT EXECUTE FUNCTION chunked_map.chunked_forbid_rewrite();
CREATE TRIGGER map_state_is_kept
    BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON chunked_map.map_state
    FOR EACH STATEMENT EXECUTE FUNCTION chunked_map.chunked_forbid_rewrite();
-- (0.5) the ids maps remember: a forged row would make an append of that id append nothing
CREATE TRIGGER record_id_is_kept
    BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON chunked_map.record_id
    FOR EACH STATEMENT EXECUTE FUNCTION chunked_map.chunked_forbid_rewrite();
-- the installation's key, which a role allowed to write every table (pg_write_all_data) could
-- otherwise replace under running backends
CREATE TRIGGER installation_is_kept
    BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON chunked_map.installation
    FOR EACH STATEMENT EXECUTE FUNCTION chunked_map.chunked_forbid_rewrite();

-- Nor can code be attached to them: a role granted TRIGGER on a storage table (part of ALL)
-- could add a trigger that the functions, running as the owner, would fire; one granted
-- REFERENCES could point a foreign key at map_state and block chunked_drop. Both are refused at
-- the end of the command, for anyone but the tables' owner (or a member of it), with the same
-- 42501 as direct DML.
--
-- The event trigger runs for every role's CREATE TABLE, ALTER TABLE, CREATE TRIGGER and CREATE
-- SCHEMA in the database, as that role: it reads only catalogs every role may read, and knows the storage
-- tables as the tables that belong to the extension (pg_depend), never by their names, whose
-- lookup needs USAGE on the schema chunked_map. For anything but the storage tables it does
-- nothing, says nothing and raises nothing.
CREATE FUNCTION chunked_map.chunked_forbid_attachments() RETURNS event_trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    command record;
    target oid;
    owner oid;
BEGIN
    FOR command IN SELECT * FROM pg_catalog.pg_event_trigger_ddl_commands() LOOP
        target := NULL;
        IF command.command_tag = 'CREATE TRIGGER' THEN
            SELECT t.tgrelid INTO target FROM pg_catalog.pg_trigger AS t WHERE t.oid = command.objid;
        ELSIF command.classid = 'pg_catalog.pg_class'::pg_catalog.regclass THEN
            -- a foreign key to a storage table, if the table has one
            SELECT c.confrelid INTO target FROM pg_catalog.pg_constraint AS c
            JOIN pg_catalog.pg_depend AS d
              ON d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objid = c.confrelid
            WHERE c.conrelid = command.objid AND c.contype = 'f'
              AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND d.deptype = 'e'
              AND d.refobjid = (SELECT e.oid FROM pg_catalog.pg_extension AS e WHERE e.extname = 'chunked_map')
            LIMIT 1;
        END IF;
        -- only the extension's own tables (a trigger elsewhere is none of its business)
        CONTINUE WHEN target IS NULL OR NOT EXISTS (
            SELECT FROM pg_catalog.pg_depend AS d
            WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objid = target
              AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND d.deptype = 'e'
              AND d.refobjid = (SELECT e.oid FROM pg_catalog.pg_extension AS e WHERE e.extname = 'chunked_map'));
        SELECT c.relowner INTO owner FROM pg_catalog.pg_class AS c WHERE c.oid = target;
        IF NOT pg_catalog.pg_has_role(current_user, owner, 'USAGE') THEN
            RAISE EXCEPTION '% % is not allowed: chunked_map history is append-only',
                    CASE command.command_tag WHEN 'CREATE TRIGGER' THEN 'CREATE TRIGGER on'
                                             ELSE 'a foreign key to' END,
                    target::pg_catalog.regclass
                USING ERRCODE = 'insufficient_privilege',
                      DETAIL = 'Only the owner of the extension''s tables may attach triggers or foreign keys to them.';
        END IF;
    END LOOP;
END
$$;
-- (CREATE SCHEMA: a schema's own CREATE TABLE and CREATE TRIGGER elements come with its tag)
CREATE EVENT TRIGGER chunked_map_attachments ON ddl_command_end
    WHEN TAG IN ('CREATE TRIGGER', 'CREATE TABLE', 'ALTER TABLE', 'CREATE SCHEMA')
    EXECUTE FUNCTION chunked_map.chunked_forbid_attachments();
