-- Recipe: a group role that can read maps (pages, rows, forward reads, single records, info)
-- and nothing else. Grant it to login roles: GRANT chunked_map_reader TO app_reader;
CREATE ROLE chunked_map_reader NOLOGIN;
GRANT USAGE ON SCHEMA chunked_map TO chunked_map_reader;
GRANT EXECUTE ON FUNCTION
    chunked_map.chunked_page(text, text),
    chunked_map.chunked_records(text, text),
    chunked_map.chunked_read(text, bigint, integer),
    chunked_map.chunked_get(text, bigint),
    chunked_map.chunked_get_by_id(text, text),
    chunked_map.chunked_info(text)
TO chunked_map_reader;
