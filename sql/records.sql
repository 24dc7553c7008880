-- chunked_records: chunked_page as rows, newest first, for joins and psql. Same arguments,
-- same errors (it is chunked_page underneath).
CREATE FUNCTION chunked_map.chunked_records(map text, page_token text DEFAULT 'current')
RETURNS TABLE (seq bigint, payload jsonb)
LANGUAGE sql STABLE PARALLEL SAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT (r.record ->> 'seq')::bigint, r.record -> 'payload'
    FROM jsonb_array_elements(chunked_map.chunked_page(map, page_token) -> 'records')
         WITH ORDINALITY AS r(record, position)
    ORDER BY r.position
$$;
