-- Run by tests/package/run.sh after ALTER EXTENSION chunked_map UPDATE on 0.1.0's data: prints
-- one line per check, which the script compares.
SELECT 'updated to ' || extversion FROM pg_extension WHERE extname = 'chunked_map';
\set pages `cat /var/tmp/cm/chunked_map-0.1.0-pages.json`
-- byte-identical but for what 0.5 adds to each record: "at" and "id", null for records from before
CREATE FUNCTION pg_temp.as_served_by_0_5(page text) RETURNS text
LANGUAGE sql AS $$
    SELECT jsonb_set(page::jsonb, '{records}', coalesce(
               (SELECT jsonb_agg(r.record || '{"at": null, "id": null}' ORDER BY r.i)
                FROM jsonb_array_elements(page::jsonb -> 'records') WITH ORDINALITY AS r(record, i)),
               '[]'))::text
$$;
SELECT 'pages byte-identical: '
       || count(*) FILTER (WHERE chunked_map.chunked_page(p ->> 'map', p ->> 'token')::text
                                 = pg_temp.as_served_by_0_5(p ->> 'page'))
       || ' of ' || count(*)
FROM jsonb_array_elements(:'pages'::jsonb) AS p;
SELECT 'appended after the update: ' || chunked_map.chunked_register('audit', '{"after": "update"}');
SELECT 'consistent: ' || string_agg(s.map || ' ' || (chunked_map.chunked_verify(s.map) ->> 'consistent'), ', ' ORDER BY s.map)
FROM chunked_map.map_state AS s;
