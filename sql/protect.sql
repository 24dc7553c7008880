-- Stored history cannot be added to, changed or removed by direct DML except by the tables'
-- owner (the API functions run as the owner). Statement-level: they fire once per statement.
-- Citus rejects triggers on distributed tables unless citus.enable_unsafe_triggers is on: see
-- the README.
CREATE TRIGGER archived_chunk_is_immutable
    BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON chunked_map.archived_chunk
    FOR EACH STATEMENT EXECUTE FUNCTION chunked_map.chunked_forbid_rewrite();
CREATE TRIGGER current_record_is_append_only
    BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON chunked_map.current_record
    FOR EACH STATEMENT EXECUTE FUNCTION chunked_map.chunked_forbid_rewrite();
CREATE TRIGGER map_state_is_kept
    BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON chunked_map.map_state
    FOR EACH STATEMENT EXECUTE FUNCTION chunked_map.chunked_forbid_rewrite();
