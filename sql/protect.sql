-- Stored history cannot be changed or removed by direct DML except by the tables' owner (the
-- API functions run as the owner). Statement-level, so they fire once per statement, and never
-- on the append path's INSERT. Citus rejects triggers on distributed tables unless
-- citus.enable_unsafe_triggers is on: see the README.
CREATE TRIGGER archived_chunk_is_immutable
    BEFORE UPDATE OR DELETE OR TRUNCATE ON chunked_map.archived_chunk
    FOR EACH STATEMENT EXECUTE FUNCTION chunked_map.chunked_forbid_rewrite();
CREATE TRIGGER current_record_is_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON chunked_map.current_record
    FOR EACH STATEMENT EXECUTE FUNCTION chunked_map.chunked_forbid_rewrite();
CREATE TRIGGER map_state_is_kept
    BEFORE UPDATE OR DELETE OR TRUNCATE ON chunked_map.map_state
    FOR EACH STATEMENT EXECUTE FUNCTION chunked_map.chunked_forbid_rewrite();
