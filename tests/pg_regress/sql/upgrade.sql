-- ALTER EXTENSION chunked_map UPDATE on a database holding what the 0.2.0 build wrote
-- (tests/fixtures): every page that build served reads byte-identical after the upgrade, and
-- appends go on where it left off. (tests/cluster/tests/upgrade.rs also upgrades from 0.1.0
-- and compares the upgraded catalog with a fresh install's.)
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS chunked_map CASCADE;
RESET client_min_messages;
CREATE EXTENSION chunked_map VERSION '0.2.0';
\i ../fixtures/chunked_map-0.2.0-data.sql
SET search_path = chunked_map, public;
SELECT extversion FROM pg_extension WHERE extname = 'chunked_map';

-- until the update, the new library refuses to run against the old tables, and says why
SELECT chunked_page('subs');
\echo SQLSTATE :LAST_ERROR_SQLSTATE

ALTER EXTENSION chunked_map UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'chunked_map';

-- every page 0.2.0 served, byte for byte but for what 0.5 adds: each record's "at" and "id",
-- null for a record appended before 0.5 (its time is not known, it has no id)
CREATE FUNCTION pg_temp.as_served_by_0_5(page text) RETURNS text
LANGUAGE sql AS $$
    SELECT jsonb_set(page::jsonb, '{records}', coalesce(
               (SELECT jsonb_agg(r.record || '{"at": null, "id": null}' ORDER BY r.i)
                FROM jsonb_array_elements(page::jsonb -> 'records') WITH ORDINALITY AS r(record, i)),
               '[]'))::text
$$;
\set pages `cat ../fixtures/chunked_map-0.2.0-pages.json`
SELECT count(*) AS pages,
       count(*) FILTER (WHERE chunked_page(p ->> 'map', p ->> 'token')::text = pg_temp.as_served_by_0_5(p ->> 'page')) AS identical
FROM jsonb_array_elements(:'pages'::jsonb) AS p;

-- the state row now holds the next sequence and the current chunk's bytes, as 0.2.0 derived them
SELECT s.map, s.next_seq, s.current_first_seq, s.current_bytes > 0 AS has_bytes,
       chunked_verify(s.map) -> 'consistent' AS consistent
FROM chunked_map.map_state AS s ORDER BY s.map COLLATE "C";

-- appends continue at the next sequence, rolling over as before; old pages stay as they were
SELECT chunked_register('full', '{"f": 9}');
SELECT chunked_register('subs', '{"n": 24}', 23);
SELECT count(*) FROM chunked_register_many('many', ARRAY(SELECT jsonb_build_object('m', n) FROM generate_series(41, 50) AS n));
SELECT chunked_register('empty', '{}');
SELECT chunked_register('café ☕', '"more"');
SELECT p ->> 'map' AS map, p ->> 'token' AS token
FROM jsonb_array_elements(:'pages'::jsonb) AS p
WHERE p ->> 'token' <> 'current'
  AND chunked_page(p ->> 'map', p ->> 'token')::text IS DISTINCT FROM pg_temp.as_served_by_0_5(p ->> 'page');
SELECT chunked_info('full');
SELECT seq, payload, at IS NOT NULL AS has_time, id FROM chunked_read('many', 33, 20);
SELECT s.map, chunked_verify(s.map) -> 'consistent' AS consistent
FROM chunked_map.map_state AS s ORDER BY s.map COLLATE "C";

-- direct INSERT is now refused to anyone but the owner
CREATE ROLE chunked_map_upgrade_intruder;
GRANT USAGE ON SCHEMA chunked_map TO chunked_map_upgrade_intruder;
GRANT ALL ON ALL TABLES IN SCHEMA chunked_map TO chunked_map_upgrade_intruder;
SET ROLE chunked_map_upgrade_intruder;
INSERT INTO chunked_map.current_record VALUES ('subs', 999, '{}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
RESET ROLE;
DROP OWNED BY chunked_map_upgrade_intruder;
DROP ROLE chunked_map_upgrade_intruder;

-- (0.5) the grants of what the update makes anew or adds, from a database of 0.4.1: a role that
-- could select from chunked_map.consumers may call chunked_consumers() behind it (PUBLIC may
-- not); one granted chunked_poll with the grant option keeps both
SET client_min_messages = warning;
DROP EXTENSION chunked_map CASCADE;
RESET client_min_messages;
CREATE EXTENSION chunked_map VERSION '0.4.1';
CREATE ROLE chunked_map_upgrade_watcher;
GRANT USAGE ON SCHEMA chunked_map TO chunked_map_upgrade_watcher;
GRANT SELECT ON chunked_map.consumers TO chunked_map_upgrade_watcher;
GRANT EXECUTE ON FUNCTION chunked_map.chunked_poll(text, integer, integer, integer)
    TO chunked_map_upgrade_watcher WITH GRANT OPTION;
ALTER EXTENSION chunked_map UPDATE;
SELECT has_function_privilege('chunked_map_upgrade_watcher', 'chunked_map.chunked_consumers()', 'EXECUTE') AS consumers_callable,
       has_function_privilege('chunked_map_upgrade_watcher', 'chunked_map.chunked_poll(text, integer, integer, integer)', 'EXECUTE WITH GRANT OPTION') AS poll_grantable,
       has_function_privilege('public', 'chunked_map.chunked_consumers()', 'EXECUTE') AS public_callable;
SELECT chunked_subscribe('watched');
SET ROLE chunked_map_upgrade_watcher;
SELECT consumer, category, maps_behind, records_behind FROM chunked_map.consumers;
RESET ROLE;
DROP OWNED BY chunked_map_upgrade_watcher;
DROP ROLE chunked_map_upgrade_watcher;
