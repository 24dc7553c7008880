-- Every error of the contract's error table (docs/contract.md), with its SQLSTATE, and proof that a bad call changes nothing.
\i setup.psql
\set VERBOSITY default
SELECT chunked_start('subs', 2);
SELECT chunked_register('subs', '{"n": 1}') FROM generate_series(1, 3);
CREATE TEMP TABLE before AS
    SELECT (SELECT string_agg(s::text, ';') FROM chunked_map.map_state AS s) AS state,
           (SELECT string_agg(c::text, ';' ORDER BY c.seq) FROM chunked_map.current_record AS c) AS current,
           (SELECT string_agg(a::text, ';' ORDER BY a.first_seq) FROM chunked_map.archived_chunk AS a) AS archived;

-- 42704: a map that was never started
SELECT chunked_register('nobody', '{}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_page('nobody');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_page('nobody', '00000000000000000001');
\echo SQLSTATE :LAST_ERROR_SQLSTATE

-- 22023: a token that is neither 'current' nor exactly 20 decimal digits
SELECT chunked_page('subs', 'CURRENT');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_page('subs', '1');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_page('subs', '0000000000000000001');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_page('subs', '000000000000000000001');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_page('subs', '-0000000000000000001');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_page('subs', ' 0000000000000000001');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_page('subs', '٠٠٠٠٠٠٠٠٠٠٠٠٠٠٠٠٠٠٠١');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_page('subs', '');
\echo SQLSTATE :LAST_ERROR_SQLSTATE

-- 42704: a well-formed token that names no archived chunk of the map
SELECT chunked_page('subs', '00000000000000000002');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_page('subs', '00000000000000000003');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_page('subs', '00000000000000000000');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_page('subs', '99999999999999999999');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_start('other');
SELECT chunked_page('other', '00000000000000000001');
\echo SQLSTATE :LAST_ERROR_SQLSTATE

-- 22004: NULL for any argument
SELECT chunked_start(NULL);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_start('subs', NULL);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_register(NULL, '{}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_register('subs', NULL);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_page(NULL);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_page('subs', NULL);
\echo SQLSTATE :LAST_ERROR_SQLSTATE

-- 22023: an empty map name, or one longer than 200 bytes
SELECT chunked_start('');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_start(repeat('x', 201));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_register(repeat('é', 101), '{}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_page('');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_start(repeat('x', 200));

-- 22023: chunk_size outside 1..10000
SELECT chunked_start('sizes', 0);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_start('sizes', -5);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_start('sizes', 10001);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_start('sizes', 10000);

-- 54000: a payload larger than chunked_map.max_payload_bytes (default 1 MiB)
SHOW chunked_map.max_payload_bytes;
SELECT chunked_register('subs', jsonb_build_object('blob', repeat('x', 1048576)));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SET chunked_map.max_payload_bytes = '1kB';
SELECT chunked_register('subs', jsonb_build_object('blob', repeat('x', 1100)));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- exactly at the limit is accepted
SET chunked_map.max_payload_bytes = 1116;
SELECT chunked_register('sizes', jsonb_build_object('blob', repeat('x', 1100)));
RESET chunked_map.max_payload_bytes;
-- measured as the larger of its stored form and its JSON text: a number whose text is 128 KiB
-- takes a few bytes stored, and 8 of them in one payload would be 1 MiB of text on every read
SELECT pg_column_size('1e131071'::jsonb) AS stored_bytes, octet_length('1e131071'::jsonb::text) AS text_bytes;
SELECT chunked_register('subs', (SELECT jsonb_agg('1e131071'::jsonb) FROM generate_series(1, 8)));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_register('sizes', (SELECT jsonb_agg('1e131071'::jsonb) FROM generate_series(1, 7))) > 0 AS accepted;
-- and an escaped control character counts six bytes of text
SET chunked_map.max_payload_bytes = '1kB';
SELECT chunked_register('subs', jsonb_build_array(repeat(chr(1), 200)));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
RESET chunked_map.max_payload_bytes;

-- 55000: chunked_distribute where Citus is not installed (tests/cluster/tests/citus.rs runs it
-- on a Citus cluster: scripts/test-citus.sh)
SELECT chunked_map.chunked_distribute();
\echo SQLSTATE :LAST_ERROR_SQLSTATE

-- 40001 (concurrent appends) needs two sessions: tests/cluster/tests/concurrency.rs.

-- none of the failed calls changed the map (the accepted calls above wrote to 'sizes' only)
SELECT (SELECT string_agg(s::text, ';') FROM chunked_map.map_state AS s WHERE s.map = 'subs') = b.state
           AS state_unchanged,
       (SELECT string_agg(c::text, ';' ORDER BY c.seq) FROM chunked_map.current_record AS c
        WHERE c.map = 'subs') = b.current
           AS current_unchanged,
       (SELECT string_agg(a::text, ';' ORDER BY a.first_seq) FROM chunked_map.archived_chunk AS a
        WHERE a.map = 'subs') = b.archived
           AS archived_unchanged
FROM before AS b;
SELECT chunked_register('subs', '{}');
