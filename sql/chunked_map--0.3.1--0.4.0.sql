-- chunked_map 0.3.1 -> 0.4.0: retention (chunked_trim, chunked_set_retention,
-- chunked_apply_retention) and the feed across maps (chunked_subscribe, chunked_poll, ...).
-- Nothing stored changes: archived chunks keep their rows and payloads, so every page reads
-- byte-identical after the update. Chunks archived by 0.3 get the time of this update as their
-- archiving time: an age limit counts from the update for them, so the update itself never
-- removes anything. tests/cluster/tests/upgrade.rs checks that an updated database ends up with
-- exactly the catalog of a fresh 0.4.0 install.
-- On a Citus cluster, call chunked_map.chunked_distribute() again afterwards: it distributes
-- the new functions (and the feed's tables stay on the coordinator, see docs/citus.md).
\echo Use "ALTER EXTENSION chunked_map UPDATE TO '0.4.0'" to load this file. \quit

-- Retention: the oldest sequence kept, and the policy.
ALTER TABLE chunked_map.map_state
    ADD COLUMN oldest_seq bigint NOT NULL DEFAULT 1,
    ADD COLUMN retain_records bigint,
    ADD COLUMN retain_age interval,
    ADD COLUMN followed boolean NOT NULL DEFAULT false;

-- When each chunk was archived. now() is evaluated once: existing rows get it without the table
-- being rewritten; chunks archived from now on get the clock at their archiving.
ALTER TABLE chunked_map.archived_chunk
    ADD COLUMN archived_at timestamptz NOT NULL DEFAULT pg_catalog.now();
ALTER TABLE chunked_map.archived_chunk
    ALTER COLUMN archived_at SET DEFAULT pg_catalog.clock_timestamp();

CREATE FUNCTION chunked_map.chunked_trim(map text, before_seq bigint)
RETURNS bigint
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_trim_wrapper';

CREATE FUNCTION chunked_map.chunked_set_retention(map text, max_records bigint DEFAULT NULL, max_age interval DEFAULT NULL)
RETURNS void
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_set_retention_wrapper';

CREATE FUNCTION chunked_map.chunked_apply_retention(map text DEFAULT NULL)
RETURNS bigint
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'chunked_apply_retention_wrapper';

REVOKE EXECUTE ON FUNCTION chunked_map.chunked_trim(text, bigint),
    chunked_map.chunked_set_retention(text, bigint, interval),
    chunked_map.chunked_apply_retention(text) FROM PUBLIC;
