-- chunked_map 0.3.0 -> 0.3.1: a good guest. Installing the extension changes nothing for roles
-- that were never granted anything of it (src/ and README, "What the extension does outside its
-- schema"):
-- - the event trigger knows the storage tables by their membership of the extension, not by
--   names whose lookup needs USAGE on the schema (ordinary roles could not create tables);
-- - each map announces its commits on a channel of its own, whose name no role can guess
--   (notify_channel; a map whose notifications are on gets one now);
-- - the lock on a map's name lives in a lock space of the extension's own, under keys no role
--   can link to a name (the installation's random key).
-- The functions keep their C symbols; archived chunks are not touched, so every page reads
-- byte-identical after the update. tests/cluster/tests/upgrade.rs checks that an updated
-- database ends up with exactly the catalog of a fresh 0.3.1 install.
\echo Use "ALTER EXTENSION chunked_map UPDATE TO '0.3.1'" to load this file. \quit

ALTER TABLE chunked_map.map_state ADD COLUMN notify_channel text;
UPDATE chunked_map.map_state
SET notify_channel = 'chunked_map_' || pg_catalog.replace(pg_catalog.gen_random_uuid()::text, '-', '')
WHERE notify;

CREATE TABLE chunked_map.installation (
    secret bytea NOT NULL
);
INSERT INTO chunked_map.installation (secret)
VALUES (pg_catalog.uuid_send(pg_catalog.gen_random_uuid()) || pg_catalog.uuid_send(pg_catalog.gen_random_uuid()));
REVOKE ALL ON chunked_map.installation FROM PUBLIC;
CREATE TRIGGER installation_is_kept
    BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON chunked_map.installation
    FOR EACH STATEMENT EXECUTE FUNCTION chunked_map.chunked_forbid_rewrite();

-- None of the functions is STRICT (chunked_distribute was, with no argument to be NULL).
ALTER FUNCTION chunked_map.chunked_distribute() CALLED ON NULL INPUT;

CREATE OR REPLACE FUNCTION chunked_map.chunked_forbid_attachments() RETURNS event_trigger
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
-- A schema's own CREATE TABLE and CREATE TRIGGER elements come with CREATE SCHEMA's tag.
DROP EVENT TRIGGER chunked_map_attachments;
CREATE EVENT TRIGGER chunked_map_attachments ON ddl_command_end
    WHEN TAG IN ('CREATE TRIGGER', 'CREATE TABLE', 'ALTER TABLE', 'CREATE SCHEMA')
    EXECUTE FUNCTION chunked_map.chunked_forbid_attachments();
