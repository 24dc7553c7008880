-- (0.5) Every record says when it was appended, and may carry an id its writer gave it: an
-- append of an id the map remembers appends nothing and answers with the first record's
-- sequence.
\i setup.psql
\set VERBOSITY default

-- a record's time is its transaction's start (now()), the same in pages, rows and reads
SELECT chunked_start('t', 3);
BEGIN;
SELECT chunked_register('t', '{"n": 1}');
SELECT chunked_register('t', '{"n": 2}');
SELECT bool_and(at = now()) AS at_is_now, count(*) FROM chunked_records('t');
SELECT bool_and(r ->> 'at' = to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')) AS page_says_now
FROM jsonb_array_elements(chunked_page('t') -> 'records') AS r;
COMMIT;
-- written through SQL (as on Citus), the same time
BEGIN;
SET LOCAL chunked_map.direct_append = off;
SELECT chunked_register('t', '{"n": 3}');
SELECT * FROM chunked_register_once('t', '{"n": 4}', 'sql-written');
SELECT seq, at = now() AS at_is_now, id FROM chunked_read('t', 2, 10);
ROLLBACK;

-- pages write times in UTC whatever the session's time zone and date style, so a page reads
-- byte-identical in every session; rows are timestamptz, shown in the session's zone
SELECT chunked_register_many('t', ARRAY['{"n": 3}', '{"n": 4}']::jsonb[]);
CREATE TEMP TABLE page_in_utc AS SELECT chunked_page('t', '00000000000000000001')::text AS page;
SET TIME ZONE 'Asia/Kolkata';
SET DateStyle = 'SQL, DMY';
SELECT chunked_page('t', '00000000000000000001')::text = page AS identical FROM page_in_utc;
SELECT (chunked_page('t', '00000000000000000001') -> 'records' -> 0 ->> 'at') ~ '^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$' AS iso_utc;
SELECT seq, at = (chunked_get('t', seq) ->> 'at')::timestamptz AS same_time
FROM chunked_read('t', 0, 10);
RESET TIME ZONE;
RESET DateStyle;

-- max_age counts from a chunk's newest record, not from when the chunk was archived: records
-- appended in a transaction that ended over a second ago, archived just now, are past an age of
-- one second (before 0.5 the chunk's archiving would have kept them)
SELECT chunked_start('aged', 2);
SELECT chunked_register_many('aged', ARRAY['{"old": 1}', '{"old": 2}']::jsonb[]);
SELECT pg_sleep(1.2);
SELECT chunked_register('aged', '{"new": 3}');
SELECT chunked_set_retention('aged', max_age => '1 second');
SELECT chunked_apply_retention('aged');
SELECT seq, payload FROM chunked_read('aged', 0, 10);

-- an id: the first append of it appends, the next ones answer with its sequence
SELECT chunked_start('orders', 2);
SELECT * FROM chunked_register_once('orders', '{"order": 17}', 'order-17-created');
SELECT * FROM chunked_register_once('orders', '{"order": 17, "retried": true}', 'order-17-created');
SELECT * FROM chunked_register_once('orders', '{"order": 18}', 'order-18-created');
SELECT * FROM chunked_register_once('orders', '{"order": 17}', 'order-17-created');
SELECT seq, payload, id FROM chunked_read('orders', 0, 10);
SELECT pg_temp.timeless(chunked_get_by_id('orders', 'order-17-created'));
SELECT pg_temp.timeless(chunked_page('orders'));

-- with an expectation: a retry whose first attempt committed is a duplicate, not a mismatch;
-- a new id is checked against the expectation
SELECT * FROM chunked_register_once('orders', '{"order": 19}', 'order-19-created', 2);
SELECT * FROM chunked_register_once('orders', '{"order": 19}', 'order-19-created', 2);
SELECT * FROM chunked_register_once('orders', '{"order": 20}', 'order-20-created', 2);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM chunked_register_once('orders', '{"order": 20}', 'order-20-created', 3);
SELECT * FROM chunked_register_once('orders', '{"order": 21}', 'order-21-created', NULL);

-- an id remembered across rollovers (chunk size 2: two chunks archived since order-17)
SELECT chunked_info('orders') -> 'archived_chunks' AS archived_chunks;
SELECT * FROM chunked_register_once('orders', '{}', 'order-17-created');

-- a rolled-back append leaves no id behind
BEGIN;
SELECT * FROM chunked_register_once('orders', '{"order": 22}', 'order-22-created');
ROLLBACK;
SELECT * FROM chunked_register_once('orders', '{"order": 22}', 'order-22-created');

-- a batch: ids the map remembers, and ids repeated inside the batch, append nothing; NULL: no id
SELECT * FROM chunked_register_many_once('orders',
    ARRAY['{"b": 1}', '{"b": 2}', '{"b": 3}', '{"b": 4}', '{"b": 5}', '{"b": 6}']::jsonb[],
    ARRAY['batch-a', NULL, 'order-18-created', 'batch-a', NULL, 'batch-b']);
SELECT seq, payload, id FROM chunked_read('orders', 6, 10);
SELECT * FROM chunked_register_many_once('orders', '{}'::jsonb[], '{}'::text[]);

-- the window: the ids of the map's newest id_window records are remembered; older ones are
-- forgotten when a chunk is archived (so up to one chunk more is remembered)
SELECT chunked_start('w', 2);
SELECT chunked_set_id_window('w', 3);
SELECT chunked_info('w') -> 'id_window' AS id_window;
SELECT count(*) FROM generate_series(1, 6) AS i,
     LATERAL chunked_register_once('w', jsonb_build_object('i', i), 'w-' || i);
-- records 1..6, chunks archived at 3 and 5: ids of records below 5 - 3 = 2 forgotten
SELECT r.id, r.seq FROM chunked_map.record_id AS r WHERE r.map = 'w' ORDER BY r.seq;
-- w-2, at the window's edge, is still remembered; w-1, past it, is appended again
SELECT * FROM chunked_register_once('w', '{"again": 2}', 'w-2');
SELECT * FROM chunked_register_once('w', '{"again": 1}', 'w-1');
-- a smaller window forgets at once what falls out of it
SELECT chunked_set_id_window('w', 1);
SELECT r.id, r.seq FROM chunked_map.record_id AS r WHERE r.map = 'w' ORDER BY r.seq;
-- NULL: every record the map keeps, from then on; an id already forgotten stays forgotten
SELECT chunked_set_id_window('w', NULL);
SELECT chunked_info('w') -> 'id_window' AS id_window;
SELECT chunked_get_by_id('w', 'w-3');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT count(*) FROM generate_series(9, 12) AS i,
     LATERAL chunked_register_once('w', jsonb_build_object('i', i), 'w-' || i);
SELECT r.id, r.seq FROM chunked_map.record_id AS r WHERE r.map = 'w' ORDER BY r.seq;

-- nobody but the owner writes the ids a map remembers (a forged one would make an append of
-- that id append nothing): not even a role that may write every table
CREATE ROLE id_forger;
GRANT pg_write_all_data TO id_forger;
SET ROLE id_forger;
INSERT INTO chunked_map.record_id (map, id, seq) VALUES ('w', 'future-id', 1);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
DELETE FROM chunked_map.record_id;
\echo SQLSTATE :LAST_ERROR_SQLSTATE
RESET ROLE;
DROP ROLE id_forger;

-- a trimmed record's id is forgotten with it, and nothing else
SELECT chunked_start('trimmed', 2);
SELECT count(*) FROM generate_series(1, 5) AS i,
     LATERAL chunked_register_once('trimmed', jsonb_build_object('i', i), 'tr-' || i);
SELECT chunked_trim('trimmed', 3);
SELECT r.id, r.seq FROM chunked_map.record_id AS r WHERE r.map = 'trimmed' ORDER BY r.seq;
SELECT * FROM chunked_register_once('trimmed', '{"i": 1}', 'tr-1');
SELECT * FROM chunked_register_once('trimmed', '{"i": 3}', 'tr-3');
SELECT chunked_get_by_id('trimmed', 'tr-2');
\echo SQLSTATE :LAST_ERROR_SQLSTATE

-- a drop forgets the map's ids; a map started again under the name remembers none
SELECT chunked_drop('trimmed');
SELECT count(*) FROM chunked_map.record_id AS r WHERE r.map = 'trimmed';
SELECT chunked_start('trimmed', 2);
SELECT * FROM chunked_register_once('trimmed', '{"i": 3}', 'tr-3');

-- ids at the limit: 1 to 256 bytes
SELECT (chunked_register_once('orders', '{}', repeat('x', 256))).duplicate;
SELECT (chunked_register_once('orders', '{}', repeat('é', 128))).duplicate;
SELECT * FROM chunked_register_once('orders', '{}', repeat('x', 257));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM chunked_register_once('orders', '{}', '');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM chunked_register_many_once('orders', ARRAY['{}']::jsonb[], ARRAY[repeat('y', 257)]);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- a batch names the element whose id is wrong by its position, counted from 1, whatever its neighbours
SELECT * FROM chunked_register_many_once('orders', ARRAY['{}', '{}', '{}']::jsonb[], ARRAY['a', NULL, '']);
\echo SQLSTATE :LAST_ERROR_SQLSTATE

-- every argument's errors
SELECT * FROM chunked_register_once('orders', '{}', NULL);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM chunked_register_once('orders', NULL, 'x');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM chunked_register_once(NULL, '{}', 'x');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM chunked_register_once('nobody', '{}', 'x');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM chunked_register_many_once('orders', ARRAY['{}', '{}']::jsonb[], ARRAY['x']);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM chunked_register_many_once('orders', ARRAY['{}']::jsonb[], NULL);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM chunked_register_many_once('orders', ARRAY['{}', NULL]::jsonb[], ARRAY['x', 'y']);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_get_by_id('orders', 'never-given');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_get_by_id('nobody', 'x');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_get_by_id('orders', NULL);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_set_id_window('orders', 0);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_set_id_window('nobody', 5);
\echo SQLSTATE :LAST_ERROR_SQLSTATE

-- the feed delivers each record's time and id
SELECT chunked_subscribe('sink', 'fed');
SELECT chunked_start('fed-1');
BEGIN;
SELECT * FROM chunked_register_once('fed-1', '{"f": 1}', 'f-1');
SELECT chunked_register('fed-1', '{"f": 2}');
COMMIT;
SELECT map, seq, payload, trimmed, at IS NOT NULL AND at <= now() AS has_time, id FROM chunked_poll('sink');
