-- chunked_map_message_store (0.5): message-db 1.3's interface on maps, as one session sees it,
-- scenario by scenario as message-db's own test/ scripts run them (write, expected version,
-- stream and category reads with batch sizes, correlation, consumer groups and their errors,
-- conditions, the last message, the version, the hash and name functions, the summary views).
-- Ids are fixed; times are shown only as present.
\i setup.psql
CREATE EXTENSION chunked_map_message_store;
SET search_path = message_store, public;
SELECT message_store_version();

-- the pure functions, as message-db computes them
SELECT hash_64('someStream-123'), hash_64(NULL);
SELECT category('someStream-123'), category('someStream'), category('someStream:command-1+2');
SELECT is_category('someStream-123'), is_category('someStream'), is_category(NULL);
SELECT id('someStream-123'), id('someStream'), id('someStream-123+456');
SELECT cardinal_id('someStream-123'), cardinal_id('someStream'), cardinal_id('someStream-123+456');
SELECT acquire_lock('someStream-123') = hash_64('someStream');

-- writing: positions from 0, the expected version (-1: no stream), message-db's errors
SELECT write_message('00000000-0000-4000-8000-000000000001', 'account-1', 'Opened', '{"amount": 0}');
SELECT write_message('00000000-0000-4000-8000-000000000002', 'account-1', 'Deposited', '{"amount": 10}', '{"correlationStreamName": "transfer-7"}');
SELECT write_message('00000000-0000-4000-8000-000000000003', 'account-1', 'Deposited', '{"amount": 5}', NULL, 1);
SELECT write_message('00000000-0000-4000-8000-000000000004', 'account-1', 'Deposited', '{"amount": 5}', NULL, 1);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT write_message('00000000-0000-4000-8000-000000000005', 'account-2', 'Opened', '{"amount": 0}', NULL, -1);
SELECT write_message('00000000-0000-4000-8000-000000000006', 'account-2', 'Opened', '{"amount": 0}', NULL, -1);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT write_message('not-a-uuid', 'account-3', 'Opened', '{}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- (the version is checked before the id's form)
SELECT write_message('not-a-uuid', 'account-1', 'Opened', '{}', NULL, 99);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- an id is unique over the whole store, as message-db's messages_id index has it
SELECT write_message('00000000-0000-4000-8000-000000000001', 'account-1', 'Opened', '{}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT write_message('00000000-0000-4000-8000-000000000001', 'account-9', 'Opened', '{}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT write_message('00000000-0000-4000-8000-000000000007', NULL, 'Opened', '{}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT write_message('00000000-0000-4000-8000-000000000008', 'account-2', NULL, '{}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT write_message('00000000-0000-4000-8000-000000000009', 'account-3', 'Opened', NULL);
SELECT write_message('00000000-0000-4000-8000-000000000010', 'transfer-7', 'Started', '{"to": "account-1"}', '{"correlationStreamName": "account-1"}');
SELECT write_message('00000000-0000-4000-8000-000000000011', 'account-4+a', 'Opened', '{}');
SELECT write_message('00000000-0000-4000-8000-000000000012', 'account-4+b', 'Opened', '{}');
SELECT stream_version('account-1'), stream_version('account-2'), stream_version('account-99');

-- a stream, from a position, in batches
SELECT id, stream_name, type, position, global_position, data, metadata, time IS NOT NULL AS has_time
FROM get_stream_messages('account-1');
SELECT position, data FROM get_stream_messages('account-1', 1);
SELECT position, data FROM get_stream_messages('account-1', 0, 2);
SELECT position FROM get_stream_messages('account-1', 0, -1);
SELECT count(*) FROM get_stream_messages('account-99');
-- edge values: a negative position, a batch size below -1, NULLs for the defaults
\set VERBOSITY terse
SELECT position FROM get_stream_messages('account-1', -5, 2);
SELECT position FROM get_stream_messages('account-1', 0, -2);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT count(*) FROM get_stream_messages('account-1', NULL, NULL);
SELECT count(*) FROM get_stream_messages('account-1', 1, 9223372036854775807);
SELECT count(*) FROM get_category_messages('account', 1, -2);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT count(*) FROM get_category_messages('account', -3, 2);
SELECT count(*) FROM get_category_messages('account', NULL, NULL);
\set VERBOSITY default
SELECT * FROM get_stream_messages('account');
\echo SQLSTATE :LAST_ERROR_SQLSTATE

-- a category, by global position, in batches
SELECT stream_name, type, position, global_position FROM get_category_messages('account');
SELECT stream_name, position, global_position FROM get_category_messages('account', 3);
SELECT stream_name, position, global_position FROM get_category_messages('account', 1, 2);
SELECT count(*) FROM get_category_messages('account', 1, -1);
SELECT * FROM get_category_messages('account-1');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- correlated: by the category of metadata's correlationStreamName
SELECT stream_name, position FROM get_category_messages('account', 1, 1000, 'transfer');
SELECT stream_name, position FROM get_category_messages('transfer', 1, 1000, 'account');
SELECT * FROM get_category_messages('account', 1, 1000, 'transfer-7');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- consumer groups: by hash_64 of the cardinal id, as message-db (account-4+a and account-4+b
-- go to one member)
SELECT m.member, r.stream_name, r.position
FROM generate_series(0, 1) AS m(member),
     LATERAL get_category_messages('account', 1, 1000, NULL, m.member, 2) AS r
ORDER BY r.global_position;
SELECT stream_name, abs(hash_64(cardinal_id(stream_name))) % 2 AS member
FROM (VALUES ('account-1'), ('account-2'), ('account-3'), ('account-4+a'), ('account-4+b')) AS s(stream_name);
SELECT * FROM get_category_messages('account', 1, 1000, NULL, 1, NULL);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM get_category_messages('account', 1, 1000, NULL, NULL, 2);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM get_category_messages('account', 1, 1000, NULL, 0, 0);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM get_category_messages('account', 1, 1000, NULL, -1, 2);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM get_category_messages('account', 1, 1000, NULL, 2, 2);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM get_category_messages('account', 1, 1000, NULL, 3, 2);
\echo SQLSTATE :LAST_ERROR_SQLSTATE

-- conditions: only where message_store.sql_condition is on
SELECT * FROM get_stream_messages('account-1', 0, 1000, 'type = ''Deposited''');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SET message_store.sql_condition = off;
SELECT * FROM get_category_messages('account', 1, 1000, NULL, NULL, NULL, 'type = ''Deposited''');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SET message_store.sql_condition = on;
SELECT stream_name, position FROM get_stream_messages('account-1', 0, 1000, 'type = ''Deposited''');
SELECT stream_name, position FROM get_category_messages('account', 1, 1000, NULL, NULL, NULL, 'type = ''Opened''');
SELECT stream_name, position FROM get_category_messages('account', 1, 1000, 'transfer', NULL, NULL, 'messages.position > 0');
RESET message_store.sql_condition;

-- the last message, of a type
SELECT stream_name, type, position FROM get_last_stream_message('account-1');
SELECT stream_name, type, position FROM get_last_stream_message('account-1', 'Opened');
SELECT count(*) FROM get_last_stream_message('account-99');

-- the relation and the reports
SELECT global_position, position, time IS NOT NULL AS has_time, stream_name, type, data, metadata, id
FROM messages ORDER BY global_position;
SELECT * FROM category_type_summary;
SELECT * FROM stream_summary;
SELECT * FROM stream_type_summary;
SELECT * FROM type_category_summary;
SELECT * FROM type_stream_summary;
SELECT * FROM type_summary;

-- a stream is a map: its records carry the message's id and time, and the feed and retention see
-- it as any map
SELECT seq, payload, at IS NOT NULL AS has_time, id FROM chunked_map.chunked_read('account-1', 0, 10);

-- the role message-db's clients use can do what they do, and nothing of chunked_map's
SET ROLE message_store;
SELECT write_message('00000000-0000-4000-8000-000000000013', 'account-5', 'Opened', '{}');
SELECT stream_name, position FROM get_category_messages('account', 8);
SELECT chunked_map.chunked_read('account-5', 0, 10);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT count(*) FROM message_store.message_index;
\echo SQLSTATE :LAST_ERROR_SQLSTATE
RESET ROLE;

-- a read-only transaction (or a hot standby) reads what was numbered, and numbers nothing
BEGIN READ ONLY;
SELECT count(*) FROM message_store.get_category_messages('account');
SELECT count(*) FROM message_store.get_stream_messages('account-1');
COMMIT;
-- an id is required, as message-db's column is
SELECT message_store.write_message(NULL, 'account-6', 'Opened', '{}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- a condition sees the caller's search_path, as message-db's does
SET message_store.sql_condition = on;
SELECT stream_name, position FROM message_store.get_category_messages('account', 1, 1000, NULL, NULL, NULL, 'cardinal_id(stream_name) = ''4''');
RESET message_store.sql_condition;
-- a stream whose map was dropped: its messages are gone from reads, the others stay
SELECT chunked_map.chunked_drop('account-3');
SELECT stream_name, position FROM message_store.get_category_messages('account');

-- messages whose records are in archived chunks (a stream's map has chunks of 100): reads across
-- chunk boundaries give each message its own record
DO $$
BEGIN
    FOR n IN 0 .. 249 LOOP
        PERFORM message_store.write_message(pg_catalog.format('00000000-0000-4000-8001-%s', pg_catalog.lpad(n::text, 12, '0')),
                                            'big-' || (n % 2), 'Counted', pg_catalog.jsonb_build_object('n', n));
    END LOOP;
END
$$;
SELECT archived_chunks, oldest_seq, next_seq FROM chunked_map.map_state WHERE map = 'big-0';
SELECT position, data FROM message_store.get_stream_messages('big-0', 97, 5);
-- every message of the category, its data the record's (n: 2 × position + stream)
SELECT count(*) AS messages,
       count(*) FILTER (WHERE (data::jsonb ->> 'n')::int = 2 * position + cardinal_id(stream_name)::int) AS own_data,
       count(DISTINCT global_position) AS positions
FROM message_store.get_category_messages('big', 1, -1);
-- from a global position in the middle, a batch crossing both streams' chunks
SELECT stream_name, position, data
FROM message_store.get_category_messages('big', (SELECT global_position FROM message_store.message_index WHERE stream_name = 'big-1' AND position = 98), 6);
-- a trim: reads go on past what it removed (a category batch never stops at it), positions stay
SELECT chunked_map.chunked_trim('big-0', 101);
SELECT position FROM message_store.get_stream_messages('big-0', 0, 3);
SELECT stream_name, position
FROM message_store.get_category_messages('big', 1, 4);
SELECT stream_version('big-0'), (SELECT position FROM get_last_stream_message('big-0'));
-- retention as on any map: the oldest archived chunk goes
SELECT chunked_map.chunked_set_retention('big-1', max_records => 20);
SELECT chunked_map.chunked_apply_retention('big-1');
SELECT position FROM message_store.get_stream_messages('big-1', 0, 2);
SELECT count(*) FROM message_store.get_category_messages('big', 1, -1);
-- the feed follows streams as maps: a consumer of the category gets each message's record
SELECT chunked_map.chunked_subscribe('big-reader', 'big');
SELECT count(*) AS records, count(DISTINCT (map, seq)) AS distinct_records,
       count(*) FILTER (WHERE payload ->> 'type' = 'Counted') AS messages
FROM chunked_map.chunked_poll('big-reader', 1000);
SELECT message_store.write_message('00000000-0000-4000-8001-999999999999', 'big-1', 'Counted', '{"n": 250}');
SELECT map, seq, payload ->> 'type', id FROM chunked_map.chunked_poll('big-reader', 1000);
SELECT chunked_map.chunked_unsubscribe('big-reader');

-- one transaction writing two streams of a category: read in the order written (message-db's)
BEGIN;
SELECT message_store.write_message('00000000-0000-4000-8000-000000000020', 'order-2', 'Placed', '{}');
SELECT message_store.write_message('00000000-0000-4000-8000-000000000021', 'order-1', 'Placed', '{}');
SELECT message_store.write_message('00000000-0000-4000-8000-000000000022', 'order-2', 'Paid', '{}');
COMMIT;
SELECT stream_name, type FROM message_store.get_category_messages('order');

-- a map chunked_map's own functions appended to is not a stream: write_message refuses it, and
-- appends nothing
SELECT chunked_map.chunked_start('plain-1');
SELECT chunked_map.chunked_register('plain-1', '{"x": 1}');
SELECT message_store.write_message('00000000-0000-4000-8000-000000000023', 'plain-1', 'Opened', '{}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT seq, payload FROM chunked_map.chunked_read('plain-1', 0, 10);

-- the last message of a type whose record a trim removed: none (not a newer one of another type)
SELECT message_store.write_message('00000000-0000-4000-8002-000000000000', 'tail-1', 'Opened', '{}');
DO $$
BEGIN
    FOR n IN 1 .. 150 LOOP
        PERFORM message_store.write_message(pg_catalog.format('00000000-0000-4000-8002-%s', pg_catalog.lpad(n::text, 12, '0')),
                                            'tail-1', 'Deposited', pg_catalog.jsonb_build_object('n', n));
    END LOOP;
END
$$;
SELECT chunked_map.chunked_trim('tail-1', 101);
SELECT count(*) FROM message_store.get_last_stream_message('tail-1', 'Opened');
SELECT type, position FROM message_store.get_last_stream_message('tail-1', 'Deposited');
