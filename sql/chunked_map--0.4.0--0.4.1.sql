-- chunked_map 0.4.0 -> 0.4.1: the SQL functions no longer pin search_path with a SET clause
-- (PostgreSQL saves and restores the setting on every call, about 15k instructions, whether or
-- not the call runs any SQL). The library sets search_path = pg_catalog, pg_temp around every
-- statement it runs, and the direct append runs none; nothing else changes.
\echo Use "ALTER EXTENSION chunked_map UPDATE TO '0.4.1'" to load this file. \quit

ALTER FUNCTION chunked_map.chunked_start(text, integer) RESET search_path;
ALTER FUNCTION chunked_map.chunked_register(text, jsonb) RESET search_path;
ALTER FUNCTION chunked_map.chunked_register(text, jsonb, bigint) RESET search_path;
ALTER FUNCTION chunked_map.chunked_register_many(text, jsonb[]) RESET search_path;
ALTER FUNCTION chunked_map.chunked_page(text, text) RESET search_path;
ALTER FUNCTION chunked_map.chunked_records(text, text) RESET search_path;
ALTER FUNCTION chunked_map.chunked_read(text, bigint, integer) RESET search_path;
ALTER FUNCTION chunked_map.chunked_get(text, bigint) RESET search_path;
ALTER FUNCTION chunked_map.chunked_info(text) RESET search_path;
ALTER FUNCTION chunked_map.chunked_set_chunk_size(text, integer) RESET search_path;
ALTER FUNCTION chunked_map.chunked_set_notify(text, boolean) RESET search_path;
ALTER FUNCTION chunked_map.chunked_verify(text) RESET search_path;
ALTER FUNCTION chunked_map.chunked_drop(text) RESET search_path;
ALTER FUNCTION chunked_map.chunked_trim(text, bigint) RESET search_path;
ALTER FUNCTION chunked_map.chunked_set_retention(text, bigint, interval) RESET search_path;
ALTER FUNCTION chunked_map.chunked_apply_retention(text) RESET search_path;
ALTER FUNCTION chunked_map.chunked_subscribe(text, text, boolean) RESET search_path;
ALTER FUNCTION chunked_map.chunked_unsubscribe(text) RESET search_path;
ALTER FUNCTION chunked_map.chunked_poll(text, integer, integer, integer) RESET search_path;
ALTER FUNCTION chunked_map.chunked_distribute() RESET search_path;
