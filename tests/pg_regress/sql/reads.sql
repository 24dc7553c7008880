-- chunked_info, chunked_records, chunked_get: reading a map without walking it.
\i setup.psql
\set VERBOSITY default

SELECT chunked_start('m', 4);
SELECT chunked_info('m');
SELECT chunked_register('m', jsonb_build_object('n', n)) FROM generate_series(1, 10) AS n;
SELECT chunked_info('m');

-- a page as rows, newest first
SELECT seq, payload, id FROM chunked_records('m');
SELECT seq, payload, id FROM chunked_records('m', '00000000000000000005');
SELECT r.seq, r.payload ->> 'n' AS n
FROM chunked_records('m', '00000000000000000001') AS r
WHERE r.seq > 1;

-- one record by its sequence, from an archived chunk or the current one
SELECT pg_temp.timeless(chunked_get('m', 1)), pg_temp.timeless(chunked_get('m', 4)), pg_temp.timeless(chunked_get('m', 5)), pg_temp.timeless(chunked_get('m', 10));
SELECT s, chunked_get('m', s) -> 'payload' ->> 'n' = s::text AS found
FROM generate_series(1, 10) AS s;

-- errors: the same as chunked_page for records; a sequence never assigned is 42704
SELECT seq, payload, id FROM chunked_records('m', '3');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT seq, payload, id FROM chunked_records('m', '00000000000000000002');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT seq, payload, id FROM chunked_records('nobody');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT seq, payload, id FROM chunked_records(NULL);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT pg_temp.timeless(chunked_get('m', 0));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT pg_temp.timeless(chunked_get('m', 11));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT pg_temp.timeless(chunked_get('m', -1));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT pg_temp.timeless(chunked_get('m', NULL));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT pg_temp.timeless(chunked_get('nobody', 1));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_info('nobody');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_info(NULL);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_info('');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
