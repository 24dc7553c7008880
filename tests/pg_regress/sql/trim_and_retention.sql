-- Shedding history (0.4): chunked_trim removes whole archived chunks below a sequence, the
-- retention policy removes them as chunks are archived, and readers meet a trimmed chunk or
-- record as an error of its own, never as a silent gap.
\i setup.psql
\set VERBOSITY default
-- the map's chunks as stored: first sequence, records, and the token of the chunk before
CREATE FUNCTION pg_temp.chunks(m text) RETURNS TABLE (first_seq bigint, records integer, prev_token text)
LANGUAGE sql AS $$
    SELECT a.first_seq, cardinality(a.payloads), a.prev_token
    FROM chunked_map.archived_chunk AS a WHERE a.map = m ORDER BY a.first_seq
$$;
CREATE FUNCTION pg_temp.seqs(m text) RETURNS bigint[]
LANGUAGE sql AS $$
    SELECT array_agg(seq ORDER BY seq) FROM chunked_map.chunked_read(m, 0, 10000)
$$;

-- 23 records in chunks of 5: archived 1..5, 6..10, 11..15, 16..20; current 21..23
SELECT chunked_start('t', 5);
SELECT count(*) FROM chunked_register_many('t', ARRAY(SELECT jsonb_build_object('n', n) FROM generate_series(1, 23) AS n));

-- whole chunks only: 12 is in 11..15, so 1..10 go and 11..15 stays
SELECT chunked_trim('t', 12);
SELECT * FROM pg_temp.chunks('t');
SELECT pg_temp.seqs('t');
-- the oldest kept page has no older page; the newest pages are untouched
SELECT pg_temp.timeless(chunked_page('t', '00000000000000000011'));
SELECT chunked_page('t') ->> 'next_page_token' AS next;
-- what readers are told about what went
SELECT pg_temp.timeless(chunked_page('t', '00000000000000000001'));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT seq, payload, id FROM chunked_records('t', '00000000000000000006');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- a well-formed token that never named a chunk, below the oldest: trimmed too (it cannot be told apart)
SELECT pg_temp.timeless(chunked_page('t', '00000000000000000003'));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- after the oldest it is the usual error
SELECT pg_temp.timeless(chunked_page('t', '00000000000000000012'));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT pg_temp.timeless(chunked_get('t', 10));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT pg_temp.timeless(chunked_get('t', 11));
SELECT pg_temp.timeless(chunked_get('t', 0));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- a forward read from before the oldest starts at it: the gap shows (11 is not 1)
SELECT seq FROM chunked_read('t', 0, 3);
SELECT chunked_info('t');
SELECT chunked_verify('t');

-- nothing below the oldest, or below the chunk that holds before_seq: nothing goes
SELECT chunked_trim('t', 5);
SELECT chunked_trim('t', 11);
SELECT chunked_trim('t', 15);
-- up into the current chunk: every archived chunk goes, the current chunk stays
SELECT chunked_trim('t', 1000000);
SELECT * FROM pg_temp.chunks('t');
SELECT pg_temp.seqs('t');
SELECT chunked_page('t') ->> 'next_page_token' AS next;
SELECT chunked_info('t') - 'map';
SELECT chunked_verify('t') ->> 'consistent' AS consistent;
-- sequences are never reused: appends go on after the trim
SELECT chunked_register('t', '{"n": 24}');
SELECT count(*) FROM chunked_register_many('t', ARRAY(SELECT jsonb_build_object('n', n) FROM generate_series(25, 31) AS n));
SELECT * FROM pg_temp.chunks('t');
SELECT chunked_verify('t') ->> 'consistent' AS consistent;

-- arguments
SELECT chunked_trim('t', NULL);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_trim('nobody', 5);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_set_retention('t', 0);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_set_retention('t', max_age => '0 seconds');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_set_retention('t', max_age => '1 day -1 hour');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_set_retention('nobody', 10);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_apply_retention('nobody');
\echo SQLSTATE :LAST_ERROR_SQLSTATE

-- retention by records: the newest 12 are always kept, and whole chunks only; applied by the
-- write that archives a chunk
SELECT chunked_start('r', 5);
SELECT chunked_set_retention('r', max_records => 12);
SELECT chunked_info('r') -> 'retention' AS retention;
SELECT chunked_register('r', jsonb_build_object('n', n)) FROM generate_series(1, 40) AS n OFFSET 39;
-- applied at each rollover: the last one (the append of 36) kept the newest 12 then, 24..35, so
-- the chunk 21..25 that holds 24 stays (between rollovers a map holds up to a chunk more)
SELECT * FROM pg_temp.chunks('r');
SELECT (chunked_info('r') ->> 'oldest_seq')::bigint AS oldest, (chunked_info('r') ->> 'total_records')::bigint AS kept;
SELECT chunked_verify('r') ->> 'consistent' AS consistent;
-- a batch that archives many chunks removes as many (and one more)
SELECT count(*) FROM chunked_register_many('r', ARRAY(SELECT jsonb_build_object('n', n) FROM generate_series(41, 100) AS n));
SELECT * FROM pg_temp.chunks('r');
SELECT chunked_verify('r') ->> 'consistent' AS consistent;
-- a larger limit removes nothing more; clearing the policy stops it
SELECT chunked_set_retention('r', 1000);
SELECT chunked_apply_retention('r');
SELECT chunked_set_retention('r');
SELECT chunked_info('r') ? 'retention' AS has_retention;
SELECT chunked_register('r', jsonb_build_object('n', n)) FROM generate_series(101, 120) AS n OFFSET 19;
SELECT count(*) AS chunks FROM pg_temp.chunks('r');

-- retention by age: chunks archived longer ago than max_age go, oldest first; age is per chunk
-- (the time it was archived). Backdate three chunks as if archived 100, 50 and 2 days ago.
SELECT chunked_start('a', 2);
SELECT count(*) FROM chunked_register_many('a', ARRAY(SELECT jsonb_build_object('n', n) FROM generate_series(1, 9) AS n));
UPDATE chunked_map.archived_chunk SET archived_at = now() - interval '100 days' WHERE map = 'a' AND first_seq = 1;
UPDATE chunked_map.archived_chunk SET archived_at = now() - interval '50 days' WHERE map = 'a' AND first_seq = 3;
UPDATE chunked_map.archived_chunk SET archived_at = now() - interval '2 days' WHERE map = 'a' AND first_seq = 5;
SELECT chunked_set_retention('a', max_age => '30 days');
-- setting the policy removes nothing by itself
SELECT count(*) AS chunks FROM pg_temp.chunks('a');
SELECT chunked_apply_retention('a');
SELECT * FROM pg_temp.chunks('a');
-- both limits: a chunk goes when either says so. By age only (5..6 was archived 2 days ago):
SELECT chunked_set_retention('a', 100, '1 day');
SELECT chunked_apply_retention('a');
SELECT * FROM pg_temp.chunks('a');
-- by records only (the newest one is 9: all of 7..8 is older):
SELECT chunked_set_retention('a', 1, '1000 days');
SELECT chunked_apply_retention('a');
SELECT * FROM pg_temp.chunks('a');
SELECT pg_temp.seqs('a');
SELECT chunked_verify('a') ->> 'consistent' AS consistent;

-- chunked_apply_retention(NULL): every map with a policy
SELECT chunked_start('b1', 2);
SELECT chunked_start('b2', 2);
SELECT count(*) FROM unnest(ARRAY['b1', 'b2']) AS m,
    LATERAL chunked_register_many(m, ARRAY(SELECT jsonb_build_object('n', n) FROM generate_series(1, 9) AS n));
SELECT chunked_set_retention('b1', 2);
SELECT chunked_apply_retention();
SELECT m, (chunked_info(m) ->> 'oldest_seq')::bigint AS oldest FROM unnest(ARRAY['b1', 'b2']) AS m;

-- history stays append-only: nobody but the functions removes a chunk
CREATE ROLE chunked_map_regress_trimmer;
GRANT USAGE ON SCHEMA chunked_map TO chunked_map_regress_trimmer;
GRANT ALL ON chunked_map.archived_chunk TO chunked_map_regress_trimmer;
SET ROLE chunked_map_regress_trimmer;
DELETE FROM chunked_map.archived_chunk WHERE map = 'b2';
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- and trimming is the owner's until granted
SELECT chunked_map.chunked_trim('b2', 5);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
RESET ROLE;
DROP OWNED BY chunked_map_regress_trimmer;
DROP ROLE chunked_map_regress_trimmer;

-- an age limit longer than any timestamp can count (300,000 years) never overflows: appends and
-- chunked_apply_retention go on, and nothing is old enough
SELECT chunked_start('ancient', 2);
SELECT chunked_set_retention('ancient', max_age => '300000 years');
SELECT count(*) FROM chunked_register_many('ancient', ARRAY(SELECT jsonb_build_object('n', n) FROM generate_series(1, 9) AS n));
SELECT chunked_apply_retention('ancient'), chunked_apply_retention();
SELECT (chunked_info('ancient') ->> 'oldest_seq')::bigint AS oldest;
