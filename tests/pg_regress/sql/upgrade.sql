-- ALTER EXTENSION chunked_map UPDATE on a database holding 0.1.0 data.
-- (tests/cluster/tests/upgrade.rs compares the upgraded catalog with a fresh 0.2.0 install.)
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS chunked_map CASCADE;
RESET client_min_messages;
CREATE EXTENSION chunked_map VERSION '0.1.0';
SET search_path = chunked_map, public;
SELECT extversion FROM pg_extension WHERE extname = 'chunked_map';
SELECT chunked_start('old', 3);
SELECT count(chunked_register('old', jsonb_build_object('n', n))) FROM generate_series(1, 8) AS n;
CREATE TEMP TABLE pages_before AS
    SELECT t.token, chunked_page('old', t.token)::text AS page
    FROM unnest(ARRAY['current', '00000000000000000004', '00000000000000000001']) AS t(token);
SELECT count(*) FROM pg_proc WHERE proname = 'chunked_info';

ALTER EXTENSION chunked_map UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'chunked_map';
SELECT t.token, chunked_page('old', t.token)::text = t.page AS identical FROM pages_before AS t;
SELECT chunked_info('old');
SELECT chunked_get('old', 2), chunked_get('old', 8);
SELECT * FROM chunked_records('old', '00000000000000000004');
SELECT chunked_verify('old');
SELECT chunked_set_chunk_size('old', 2);
SELECT chunked_register('old', '{"n": 9}', 8);
SELECT chunked_register_many('old', ARRAY['{"n": 10}', '{"n": 11}', '{"n": 12}']::jsonb[]);
SELECT t.token, chunked_page('old', t.token)::text = t.page AS identical FROM pages_before AS t
WHERE t.token <> 'current';
SELECT chunked_verify('old') -> 'consistent' AS consistent;
