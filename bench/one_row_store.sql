-- The floor of bench/message_db.sh: the least a message store can write for a message and
-- still do what chunked_map_message_store's write does for readers, in a database of its own.
-- Not a store anyone should use (no reads, no checks, no errors): a yardstick for how far a
-- different storage layout could take the write.
--
-- Per write: the stream's row updated (its version, a heap-only update), the message's one row
-- inserted with two index entries (the stream and position, the unique id), and the order key
-- that lets global positions be given after commit without writers of a category waiting for
-- each other (chunked_map.chunked_order_key(): the writers' mark, then the next transaction id).
-- What it leaves out of chunked_map_message_store's write: the record kept apart from its index
-- row (a second row and index entry), and the record written again, with its chunk, when the
-- chunk is archived (a delete a write).
--
-- The same function signature as message-db's, in schema message_store, so the bench's fill and
-- pgbench scripts run on it unchanged.
CREATE EXTENSION chunked_map;

CREATE SCHEMA message_store;
CREATE SEQUENCE message_store.write_order;
-- (room on each page for the heap-only updates of its rows)
CREATE TABLE message_store.streams (
    stream_name text   COLLATE "C" PRIMARY KEY,
    version     bigint NOT NULL
) WITH (fillfactor = 50);
CREATE TABLE message_store.messages (
    stream_name     text      COLLATE "C" NOT NULL,
    position        bigint    NOT NULL,
    type            text      NOT NULL,
    id              uuid      NOT NULL,
    writer          xid8      NOT NULL,
    write_order     bigint    NOT NULL DEFAULT pg_catalog.nextval('message_store.write_order'),
    global_position bigint,
    data            jsonb,
    metadata        jsonb,
    time            timestamp NOT NULL DEFAULT (pg_catalog.now() AT TIME ZONE 'utc'),
    CONSTRAINT messages_stream PRIMARY KEY (stream_name, position)
);
CREATE UNIQUE INDEX messages_id ON message_store.messages (id);

CREATE FUNCTION message_store.write_message(
  id varchar,
  stream_name varchar,
  "type" varchar,
  data jsonb,
  metadata jsonb DEFAULT NULL,
  expected_version bigint DEFAULT NULL
)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    _position bigint;
BEGIN
    UPDATE message_store.streams AS s SET version = s.version + 1
    WHERE s.stream_name = write_message.stream_name
    RETURNING s.version INTO _position;
    IF NOT FOUND THEN
        INSERT INTO message_store.streams AS s VALUES (write_message.stream_name, 0)
        ON CONFLICT (stream_name) DO UPDATE SET version = s.version + 1
        RETURNING s.version INTO _position;
    END IF;
    INSERT INTO message_store.messages (stream_name, position, type, id, writer, data, metadata)
    VALUES (write_message.stream_name, _position, write_message."type", write_message.id::uuid,
            chunked_map.chunked_order_key()::text::xid8, write_message.data, write_message.metadata);
    RETURN _position;
END;
$$;

-- (the bench checks that the writes it counted are all in their stream)
CREATE FUNCTION message_store.stream_version(stream_name varchar)
RETURNS bigint
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT s.version FROM message_store.streams AS s WHERE s.stream_name = $1
$$;
