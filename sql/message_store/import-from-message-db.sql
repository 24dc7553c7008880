-- Recipe: move a message-db 1.3 database's messages into chunked_map_message_store
-- (docs/message-db.md, "Moving a message-db database over"). Run as the extension's owner in
-- the new database, after copying message-db's table into message_db_import.messages:
--
--   in message-db's database (times as ISO text, read back the same whatever DateStyle says):
--     SET datestyle = 'ISO, YMD';
--     \copy (SELECT global_position, position, time, stream_name, type, data, metadata, id FROM message_store.messages) TO 'messages.copy'
--   in the new one:
--     SET datestyle = 'ISO, YMD';
--     CREATE SCHEMA message_db_import;
--     CREATE TABLE message_db_import.messages (global_position bigint, position bigint,
--         time timestamp, stream_name text, type text, data jsonb, metadata jsonb, id uuid);
--     \copy message_db_import.messages FROM 'messages.copy'
--     \i import-from-message-db.sql
--
-- Every message is written again (message_store.import_message: as write_message writes it, with
-- the time it has in message-db), in message-db's global position order, committing every 500
-- (a stream's first message locks its name until the commit: at most 500 new streams a
-- transaction), and given its global position after each commit, as a reader would (so that
-- the first reader after the import does not number them all at once). Ids, streams,
-- positions, types, data, metadata and times are kept; global positions are given anew in the
-- same order. A stream that does not start at position 0 (message-db's
-- messages deleted by hand) stops the import with the stream named. Run again after a stop, it
-- goes on where the committed part ended: messages whose id is already in the store are passed
-- over.
DO $$
DECLARE
    m record;
    n bigint := 0;
    _position bigint;
BEGIN
    FOR m IN SELECT i.id, i.stream_name, i.type, i.data, i.metadata, i.time, i.position
             FROM message_db_import.messages AS i
             WHERE NOT EXISTS (SELECT 1 FROM message_store.message_index AS x WHERE x.id = i.id)
             ORDER BY i.global_position LOOP
        _position := message_store.import_message(m.id::varchar, m.stream_name, m.type, m.data,
                                                  m.metadata, m.time);
        IF _position <> m.position THEN
            RAISE EXCEPTION 'stream % has message % at position %, written at %',
                m.stream_name, m.id, m.position, _position;
        END IF;
        n := n + 1;
        IF n % 500 = 0 THEN
            COMMIT;
            PERFORM message_store.number_messages();
            COMMIT;
        END IF;
    END LOOP;
    COMMIT;
    -- (a numbering gives at most 10,000 positions: until one numbers none)
    LOOP
        EXIT WHEN message_store.number_messages() = 0;
        COMMIT;
    END LOOP;
END
$$;
