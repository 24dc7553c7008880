-- A map, appended across chunk boundaries and paged back from 'current' to the oldest chunk.
\i setup.psql

-- starting creates the map once; starting again changes nothing
SELECT chunked_start('subs', 3);
SELECT chunked_start('subs', 3);
SELECT chunked_start('subs', 50);

-- an empty map: no records, no older page
SELECT pg_temp.timeless(chunked_page('subs'));

-- three appends fill the first chunk; it stays current while full
SELECT chunked_register('subs', jsonb_build_object('email', 'a@example.com'));
SELECT chunked_register('subs', '"b@example.com"');
SELECT chunked_register('subs', '{"email": "c@example.com", "tags": ["x", "y"]}');
SELECT pg_temp.timeless(chunked_page('subs', 'current'));

-- the fourth append finds it full: archived as 00000000000000000001, seq 4 starts a new chunk
SELECT chunked_register('subs', '{"email": "d@example.com"}');
SELECT pg_temp.timeless(chunked_page('subs'));
SELECT pg_temp.timeless(chunked_page('subs', '00000000000000000001'));

-- more appends, across two more rollovers
SELECT chunked_register('subs', jsonb_build_object('n', n)) FROM generate_series(5, 10) AS n;

-- walk the tokens from current to the oldest chunk: every record once, newest first
SELECT depth,
       page ->> 'page_token' AS page_token,
       (SELECT array_agg((r ->> 'seq')::bigint) FROM jsonb_array_elements(page -> 'records') AS r) AS seqs,
       page ->> 'next_page_token' AS next_page_token
FROM pg_temp.pages('subs') ORDER BY depth;

-- an archived page reads byte-identical whatever is appended later
CREATE TEMP TABLE first_read AS
    SELECT pg_temp.timeless(chunked_page('subs', '00000000000000000004'))::text AS page;
SELECT chunked_register('subs', '{}') FROM generate_series(1, 7);
SELECT pg_temp.timeless(chunked_page('subs', '00000000000000000004'))::text = page AS identical FROM first_read;

-- maps are independent: their own sequences and chunk sizes
SELECT chunked_start('audit');
SELECT chunked_register('audit', '{"event": "login"}');
SELECT pg_temp.timeless(chunked_page('audit'));
SELECT pg_temp.timeless(chunked_page('subs')) -> 'records' -> 0 -> 'seq' AS newest_subs_seq;

-- every JSON type survives exactly, including numbers beyond double precision
SELECT chunked_start('types', 2);
SELECT chunked_register('types', v::jsonb)
FROM unnest(ARRAY['null', 'true', '12345678901234567890.000000000000000001', '"é ✓ 日本"',
                  '[]', '{"nested": {"a": [1, {"b": null}]}}']) WITH ORDINALITY AS t(v, i)
ORDER BY i;
-- two archived chunks of 2, and the full current chunk 5..6
SELECT p.token, r.record
FROM unnest(ARRAY['current', '00000000000000000003', '00000000000000000001'])
         WITH ORDINALITY AS p(token, i)
CROSS JOIN LATERAL jsonb_array_elements(pg_temp.timeless(chunked_page('types', p.token)) -> 'records')
         WITH ORDINALITY AS r(record, j)
ORDER BY p.i, r.j;
