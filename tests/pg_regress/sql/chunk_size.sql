-- Chunk size is part of the stored layout: chunks keep the size they were started with, and
-- paging across chunks of different sizes needs no arithmetic on tokens.
\i setup.psql
\set VERBOSITY default

SELECT chunked_start('m', 100);
SELECT count(chunked_register('m', jsonb_build_object('n', n))) FROM generate_series(1, 150) AS n;
-- the current chunk (101..150) holds records: it keeps size 100; chunks after it get 7
SELECT chunked_set_chunk_size('m', 7);
SELECT chunked_info('m');
SELECT count(chunked_register('m', '{}')) FROM generate_series(151, 215);
SELECT chunked_set_chunk_size('m', 250);
SELECT count(chunked_register('m', '{}')) FROM generate_series(216, 700);
SELECT chunked_set_chunk_size('m', 1);
SELECT count(chunked_register('m', '{}')) FROM generate_series(701, 725);
SELECT chunked_info('m');

-- every page from current to the oldest: its token, size and range; every record once
SELECT depth, page ->> 'page_token' AS token,
       jsonb_array_length(page -> 'records') AS records,
       page -> 'records' -> 0 -> 'seq' AS newest,
       page -> 'records' -> -1 -> 'seq' AS oldest,
       page ->> 'next_page_token' AS next
FROM pg_temp.pages('m') ORDER BY depth;

-- every archived token is the first sequence of its chunk
SELECT count(*) AS pages,
       sum(jsonb_array_length(page -> 'records')) AS records,
       bool_and(page ->> 'page_token' = 'current'
                OR (page ->> 'page_token')::bigint = (page -> 'records' -> -1 ->> 'seq')::bigint)
           AS tokens_are_first_sequences
FROM pg_temp.pages('m');

-- an empty current chunk takes the new size at once
SELECT chunked_start('fresh', 10);
SELECT chunked_set_chunk_size('fresh', 2);
SELECT chunked_register('fresh', '{}') FROM generate_series(1, 3);
SELECT chunked_info('fresh');
SELECT chunked_verify('m') ->> 'consistent' AS m_consistent,
       chunked_verify('fresh') ->> 'consistent' AS fresh_consistent;

-- errors
SELECT chunked_set_chunk_size('m', 0);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_set_chunk_size('m', 10001);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_set_chunk_size('m', NULL);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_set_chunk_size(NULL, 5);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_set_chunk_size('nobody', 5);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
