-- chunked_map 0.1.0 -> 0.2.0. The stored layout does not change: 0.1.0 already stored each
-- chunk's size and the token of the chunk before it. This adds functions and the triggers that
-- keep history from being rewritten. tests/cluster/tests/upgrade.rs checks that an upgraded
-- database ends up with exactly the catalog of a fresh 0.2.0 install.
\echo Use "ALTER EXTENSION chunked_map UPDATE TO '0.2.0'" to load this file. \quit

CREATE FUNCTION chunked_map.chunked_register(map text, payload jsonb, expected_last_seq bigint)
RETURNS bigint
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_register_if_last_wrapper';

CREATE FUNCTION chunked_map.chunked_register_many(map text, payloads jsonb[])
RETURNS SETOF bigint
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_register_many_wrapper';

CREATE FUNCTION chunked_map.chunked_set_chunk_size(map text, chunk_size integer)
RETURNS void
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_set_chunk_size_wrapper';

CREATE FUNCTION chunked_map.chunked_info(map text)
RETURNS jsonb
STABLE SECURITY DEFINER PARALLEL SAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_info_wrapper';

CREATE FUNCTION chunked_map.chunked_get(map text, seq bigint)
RETURNS jsonb
STABLE SECURITY DEFINER PARALLEL SAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_get_wrapper';

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

CREATE FUNCTION chunked_map.chunked_drop(map text)
RETURNS boolean
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_drop_wrapper';

CREATE FUNCTION chunked_map.chunked_verify(map text)
RETURNS jsonb
STABLE SECURITY DEFINER PARALLEL SAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_verify_wrapper';

CREATE FUNCTION chunked_map.chunked_forbid_rewrite()
RETURNS trigger
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_forbid_rewrite_wrapper';

CREATE TRIGGER archived_chunk_is_immutable
    BEFORE UPDATE OR DELETE OR TRUNCATE ON chunked_map.archived_chunk
    FOR EACH STATEMENT EXECUTE FUNCTION chunked_map.chunked_forbid_rewrite();
CREATE TRIGGER current_record_is_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON chunked_map.current_record
    FOR EACH STATEMENT EXECUTE FUNCTION chunked_map.chunked_forbid_rewrite();
CREATE TRIGGER map_state_is_kept
    BEFORE UPDATE OR DELETE OR TRUNCATE ON chunked_map.map_state
    FOR EACH STATEMENT EXECUTE FUNCTION chunked_map.chunked_forbid_rewrite();

REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA chunked_map FROM PUBLIC;
