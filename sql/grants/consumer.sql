-- Recipe (0.4): a group role that can consume the feed across maps (subscribe, poll,
-- unsubscribe, and see the consumers' lag) and nothing else. Grant it to the login roles of the
-- consumers: GRANT chunked_map_consumer TO app_projection;
-- A consumer reads every map of the category it subscribes to: grant it only where such a role
-- may read those maps.
CREATE ROLE chunked_map_consumer NOLOGIN;
GRANT USAGE ON SCHEMA chunked_map TO chunked_map_consumer;
GRANT EXECUTE ON FUNCTION
    chunked_map.chunked_subscribe(text, text, boolean),
    chunked_map.chunked_poll(text, integer, integer, integer),
    chunked_map.chunked_unsubscribe(text)
TO chunked_map_consumer;
GRANT SELECT ON chunked_map.consumers TO chunked_map_consumer;
