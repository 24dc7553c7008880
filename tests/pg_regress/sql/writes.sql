-- Optimistic appends and batch appends.
\i setup.psql
\set VERBOSITY default

-- chunked_register(map, payload, expected_last_seq): appends only after that sequence
SELECT chunked_start('m', 2);
SELECT chunked_register('m', '{"try": 1}', 0);
SELECT chunked_register('m', '{"try": 2}', 1);
-- a client that retries after an ambiguous commit learns that its append happened
SELECT chunked_register('m', '{"try": 2}', 1);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_register('m', '{"try": 3}', 5);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_register('m', '{"try": 3}', 2);
SELECT chunked_register('m', '{"try": 4}', NULL);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_register('nobody', '{}', 0);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT seq, payload, id FROM chunked_records('m');

-- chunked_register_many: in order, contiguous, across as many rollovers as it fills
SELECT chunked_start('batch', 3);
SELECT chunked_register_many('batch', ARRAY['{"n": 1}', '{"n": 2}']::jsonb[]);
SELECT chunked_register_many('batch', ARRAY(SELECT jsonb_build_object('n', n) FROM generate_series(3, 10) AS n));
SELECT chunked_register_many('batch', ARRAY[]::jsonb[]);
SELECT chunked_register('batch', '{"n": 11}');
SELECT depth, page ->> 'page_token' AS token,
       (SELECT array_agg((r -> 'payload' ->> 'n')::int) FROM jsonb_array_elements(page -> 'records') AS r) AS n
FROM pg_temp.pages('batch') ORDER BY depth;
SELECT chunked_verify('batch');
-- a bad element changes nothing
SELECT chunked_register_many('batch', ARRAY['{}', NULL]::jsonb[]);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SET chunked_map.max_payload_bytes = 64;
SELECT chunked_register_many('batch', ARRAY['{}', jsonb_build_object('x', repeat('x', 100))]);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
RESET chunked_map.max_payload_bytes;
SELECT chunked_register_many('batch', NULL);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_register_many('nobody', ARRAY['{}']::jsonb[]);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_info('batch') -> 'next_seq' AS next_seq;

-- a dropped map started again in the same session begins again at 1
SELECT chunked_drop('m');
SELECT chunked_drop('m');
SELECT chunked_start('m', 2);
SELECT chunked_register('m', '{}');
SELECT chunked_verify('m') -> 'consistent' AS consistent;

-- one transaction starts 1,000 maps (each holds the lock of its name until the transaction ends:
-- PostgreSQL's lock table, 64 per connection by default, is what bounds it; docs/sizes.md)
SELECT count(*) FILTER (WHERE chunked_start('many-' || n, 2)) AS started FROM generate_series(1, 1000) AS n;
SELECT count(*) AS dropped FROM generate_series(1, 1000) AS n WHERE chunked_drop('many-' || n);
