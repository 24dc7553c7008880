-- A chunk is full at chunk_size records or at chunked_map.max_chunk_bytes
-- payload bytes, so no page and no rollover ever reaches a PostgreSQL size limit. (The full-size
-- case, 300 payloads of 1 MiB, is tests/cluster/tests/size.rs.) Small limits here, same rules.
\i setup.psql
\set VERBOSITY default

SHOW chunked_map.max_chunk_bytes;
-- the largest accepted value keeps a page's jsonb under PostgreSQL's 256 MiB
SET chunked_map.max_chunk_bytes = '129MB';
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SET chunked_map.max_chunk_bytes = '128MB';

-- payloads of 1,000 bytes (binary jsonb), chunks of at most 10 records or 3,000 bytes
SET chunked_map.max_chunk_bytes = 3000;
SELECT chunked_start('bytes', 10);
CREATE TEMP TABLE payload AS SELECT jsonb_build_object('b', repeat('x', 987)) AS p;
SELECT pg_column_size(p) - 4 AS payload_bytes FROM payload;
SELECT count(chunked_register('bytes', p)) FROM payload, generate_series(1, 10) AS n;
-- three records per chunk (exactly 3,000 bytes): the fourth would take it over
SELECT depth, page ->> 'page_token' AS token,
       jsonb_array_length(page -> 'records') AS records,
       page ->> 'next_page_token' AS next
FROM pg_temp.pages('bytes') ORDER BY depth;
SELECT chunked_info('bytes') - 'map';
SELECT a.first_seq, a.chunk_size, cardinality(a.payloads) AS records
FROM chunked_map.archived_chunk AS a WHERE a.map = 'bytes' ORDER BY a.first_seq;
SELECT chunked_get('bytes', 4) -> 'seq' AS seq4, chunked_get('bytes', 10) -> 'seq' AS seq10,
       chunked_get('bytes', 9) -> 'payload' = p AS same_payload FROM payload;
SELECT chunked_verify('bytes') -> 'consistent' AS consistent;

-- a record larger than the chunk limit can never be stored: the payload limit is capped by it
SELECT chunked_register('bytes', jsonb_build_object('b', repeat('x', 3000)));
\echo SQLSTATE :LAST_ERROR_SQLSTATE

-- a batch is cut the same way; full chunks go straight to the archive
SELECT count(*) FROM chunked_register_many('bytes', ARRAY(SELECT p FROM payload, generate_series(11, 20) AS n));
SELECT depth, page ->> 'page_token' AS token, jsonb_array_length(page -> 'records') AS records
FROM pg_temp.pages('bytes') ORDER BY depth;
SELECT chunked_verify('bytes') -> 'consistent' AS consistent;

-- lowering the limit below what the current chunk holds (10,000 bytes): the next rollover
-- archives it in pieces that each fit (two records, 2,000 bytes), chained like any other chunks
SET chunked_map.max_chunk_bytes = 100000;
SELECT chunked_start('lowered', 10);
SELECT count(chunked_register('lowered', p)) FROM payload, generate_series(1, 10) AS n;
SET chunked_map.max_chunk_bytes = 2500;
SELECT chunked_register('lowered', '{"n": 11}');
SELECT depth, page ->> 'page_token' AS token,
       (SELECT array_agg((r ->> 'seq')::int) FROM jsonb_array_elements(page -> 'records') AS r) AS seqs,
       page ->> 'next_page_token' AS next
FROM pg_temp.pages('lowered') ORDER BY depth;
SELECT chunked_verify('lowered') -> 'consistent' AS consistent;
SELECT seq FROM chunked_read('lowered', 0, 100);
RESET chunked_map.max_chunk_bytes;
