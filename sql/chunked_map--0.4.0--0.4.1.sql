-- chunked_map 0.4.0 -> 0.4.1: the SQL functions no longer pin search_path with a SET clause
-- (PostgreSQL saves and restores the setting on every call, about 15k instructions, whether or
-- not the call runs any SQL). The library sets search_path = pg_catalog, pg_temp around every
-- statement it runs, and the direct append runs none. The view chunked_map.consumers counts a
-- position left from a dropped map of the name (another incarnation) as none.
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

CREATE OR REPLACE VIEW chunked_map.consumers AS
SELECT c.consumer, c.category, c.from_start,
       count(s.map) FILTER (WHERE s.next_seq - 1 > coalesce(p.seq, 0)) AS maps_behind,
       coalesce(sum(greatest(s.next_seq - 1 - greatest(coalesce(p.seq, 0), s.oldest_seq - 1), 0)), 0)::bigint AS records_behind,
       (SELECT pg_catalog.min(m.at)
        FROM chunked_map.map_change AS m
        JOIN chunked_map.map_state AS ms ON ms.map = m.map
        LEFT JOIN chunked_map.consumer_position AS mp
               ON mp.consumer = c.consumer AND mp.map = m.map AND mp.incarnation = ms.incarnation
        WHERE (c.category IS NULL OR c.category = pg_catalog.split_part(m.map, '-', 1))
          AND ms.next_seq - 1 > coalesce(mp.seq, 0)) AS oldest_unread_move_at
FROM chunked_map.consumer AS c
LEFT JOIN chunked_map.map_state AS s
       ON c.category IS NULL OR c.category = pg_catalog.split_part(s.map, '-', 1)
-- a position left from a dropped map of the name (another incarnation) counts as none
LEFT JOIN chunked_map.consumer_position AS p
       ON p.consumer = c.consumer AND p.map = s.map AND p.incarnation = s.incarnation
GROUP BY c.consumer, c.category, c.from_start;
