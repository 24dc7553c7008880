-- Recipe: a group role that can start maps and append to them, and nothing else (add
-- chunked_map_reader to read too). Grant it to login roles: GRANT chunked_map_writer TO app;
CREATE ROLE chunked_map_writer NOLOGIN;
GRANT USAGE ON SCHEMA chunked_map TO chunked_map_writer;
GRANT EXECUTE ON FUNCTION
    chunked_map.chunked_start(text, integer),
    chunked_map.chunked_register(text, jsonb),
    chunked_map.chunked_register(text, jsonb, bigint),
    chunked_map.chunked_register_many(text, jsonb[]),
    chunked_map.chunked_register_once(text, jsonb, text, bigint),
    chunked_map.chunked_register_many_once(text, jsonb[], text[])
TO chunked_map_writer;
