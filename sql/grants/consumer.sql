-- Recipe (0.4): a group role that can consume the feed across maps (subscribe, poll,
-- unsubscribe, and see the consumers' lag) and nothing else. Grant it to the login roles of the
-- consumers: GRANT chunked_map_consumer TO app_projection;
-- Consumers are not isolated from each other: a role granted this can subscribe to every map
-- (category NULL) and read them all, poll (and acknowledge) or unsubscribe any consumer, and see
-- them all in chunked_map.consumers. Grant it to roles trusted with every map.
CREATE ROLE chunked_map_consumer NOLOGIN;
GRANT USAGE ON SCHEMA chunked_map TO chunked_map_consumer;
GRANT EXECUTE ON FUNCTION
    chunked_map.chunked_subscribe(text, text, boolean),
    chunked_map.chunked_poll(text, integer, integer, integer),
    chunked_map.chunked_unsubscribe(text)
TO chunked_map_consumer;
GRANT SELECT ON chunked_map.consumers TO chunked_map_consumer;
GRANT EXECUTE ON FUNCTION chunked_map.chunked_consumers() TO chunked_map_consumer;
