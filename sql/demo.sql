-- chunked_map demo: a map of subscribers, appended across rollovers, paged back by token.
\pset footer off
\set QUIET on
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS chunked_map CASCADE;
RESET client_min_messages;
CREATE EXTENSION chunked_map;
\set QUIET off
\echo
\echo '-- Start a map whose chunks hold 3 records (the default is 100). Starting twice is harmless.'
SELECT chunked_map.chunked_start('subscribers', 3);
SELECT chunked_map.chunked_start('subscribers', 3);

\echo '-- Append 7 records: the 4th and the 7th find the current chunk full and archive it.'
SELECT chunked_map.chunked_register('subscribers', jsonb_build_object('email', 'user' || i || '@example.com')) AS seq
FROM generate_series(1, 7) AS i;

\echo '-- The current page: newest first, and the token of the next older page.'
SELECT chunked_map.chunked_page('subscribers');

\echo '-- An archived page, by its token: the first sequence of the chunk, 20 digits.'
SELECT chunked_map.chunked_page('subscribers', '00000000000000000004');

\echo '-- Follow next_page_token until it is null: every record once, newest first.'
WITH RECURSIVE walk AS (
    SELECT chunked_map.chunked_page('subscribers') AS page
    UNION ALL
    SELECT chunked_map.chunked_page('subscribers', page ->> 'next_page_token')
    FROM walk WHERE page ->> 'next_page_token' IS NOT NULL
)
SELECT page ->> 'page_token' AS page_token,
       (SELECT string_agg(r ->> 'seq', ',') FROM jsonb_array_elements(page -> 'records') AS r) AS seqs,
       page ->> 'next_page_token' AS next_page_token
FROM walk;

\echo '-- Chunk size is part of the stored layout: new chunks take the new size, old ones keep theirs.'
SELECT chunked_map.chunked_set_chunk_size('subscribers', 5);
SELECT count(chunked_map.chunked_register('subscribers', jsonb_build_object('email', 'user' || i || '@example.com')))
       AS appended
FROM generate_series(8, 20) AS i;
SELECT r.seq, r.payload ->> 'email' AS email FROM chunked_map.chunked_records('subscribers') AS r;
WITH RECURSIVE walk AS (
    SELECT chunked_map.chunked_page('subscribers') AS page
    UNION ALL
    SELECT chunked_map.chunked_page('subscribers', page ->> 'next_page_token')
    FROM walk WHERE page ->> 'next_page_token' IS NOT NULL
)
SELECT page ->> 'page_token' AS page_token,
       jsonb_array_length(page -> 'records') AS records,
       page ->> 'next_page_token' AS next_page_token
FROM walk;
SELECT chunked_map.chunked_info('subscribers');
SELECT chunked_map.chunked_get('subscribers', 5);

\echo '-- Errors name what is wrong, with a SQLSTATE a client can act on.'
\set ON_ERROR_STOP off
\set VERBOSITY verbose
SELECT chunked_map.chunked_page('subscribers', '101');
SELECT chunked_map.chunked_page('subscribers', '00000000000000000002');
SELECT chunked_map.chunked_register('nobody', '{}');
\set ON_ERROR_STOP on
