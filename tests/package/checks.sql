-- Run by tests/package/run.sh after ALTER EXTENSION chunked_map UPDATE on 0.1.0's data: prints
-- one line per check, which the script compares.
SELECT 'updated to ' || extversion FROM pg_extension WHERE extname = 'chunked_map';
\set pages `cat /var/tmp/cm/chunked_map-0.1.0-pages.json`
SELECT 'pages byte-identical: '
       || count(*) FILTER (WHERE chunked_map.chunked_page(p ->> 'map', p ->> 'token')::text = p ->> 'page')
       || ' of ' || count(*)
FROM jsonb_array_elements(:'pages'::jsonb) AS p;
SELECT 'appended after the update: ' || chunked_map.chunked_register('audit', '{"after": "update"}');
SELECT 'consistent: ' || string_agg(s.map || ' ' || (chunked_map.chunked_verify(s.map) ->> 'consistent'), ', ' ORDER BY s.map)
FROM chunked_map.map_state AS s;
