-- chunked_map_message_store (0.5): message-db 1.3's interface on maps. First message-db's own
-- scenarios, the file tests/cluster/tests/message_db.rs also runs against message-db 1.3 itself
-- (the two transcripts must be the same), then what only chunked_map shows: global positions as
-- given, the maps behind the streams, privileges, retention, trims and the feed.
\i setup.psql
CREATE EXTENSION chunked_map_message_store;
\i ../message_db/scenarios.sql
\set VERBOSITY default
\set SHOW_CONTEXT errors

-- global positions as given: one after the other, in the order of the writes' keys
SELECT stream_name, type, position, global_position FROM get_category_messages('account');
SELECT stream_name, position, global_position FROM get_stream_messages('account-1');

-- a stream is a map: its records carry the message's id and time, and the feed and retention see
-- it as any map
SELECT seq, payload, at IS NOT NULL AS has_time, id FROM chunked_map.chunked_read('account-1', 0, 10);

-- the role message-db's clients use can do what they do, and nothing of chunked_map's
SET ROLE message_store;
SELECT write_message('00000000-0000-4000-8000-000000000013', 'account-5', 'Opened', '{}');
SELECT stream_name, position FROM get_category_messages('account', 8);
SELECT stream_version('account-5'), stream_version('account-1');
SELECT chunked_map.chunked_read('account-5', 0, 10);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT count(*) FROM message_store.message_index;
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- (nor the write under write_message's checks, with or without a time, nor the checked write)
SELECT append_message('00000000-0000-4000-8000-000000000113', 'account-5', 'Opened', '{}', NULL, NULL);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT write_message_checked('00000000-0000-4000-8000-000000000113', 'account-5', 'Opened', '{}', NULL, 1);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
RESET ROLE;
-- what only the message store calls is the owner's: the append whose ids the map does not
-- remember, the order key, the numbering lock, the next id; a role that may use the schema (as a
-- writer of maps does) still cannot call them; nor, in the store's schema, the writes' error of a
-- missing value (granted to message_store only, as the functions it calls)
CREATE ROLE message_store_probe;
GRANT USAGE ON SCHEMA chunked_map, message_store TO message_store_probe;
SET ROLE message_store_probe;
SELECT message_store.refuse_missing_value('id');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT message_store.append_message('00000000-0000-4000-8009-000000000003', 'probe-1', 'Opened', '{}', NULL, NULL);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT message_store.write_message_checked('00000000-0000-4000-8009-000000000004', 'probe-1', 'Opened', '{}', NULL, -1);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- (write_message itself, with an expected version and without, before it starts or locks anything)
SELECT message_store.write_message('00000000-0000-4000-8009-000000000001', 'probe-1', 'Opened', '{}', NULL, -1);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT message_store.write_message('00000000-0000-4000-8009-000000000002', 'account-5', 'Opened', '{}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_map.chunked_register_with_id('account-5', '{}', 'x');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_map.chunked_order_key();
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_map.chunked_try_numbering_lock();
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_map.chunked_next_transaction_id();
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- (nor what the store's functions read as the owner: a stream's version from its map's state,
-- a stream's batch, the numbering and its state; so a read, which numbers first, is refused too)
SELECT message_store.newest_position('account-5');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT count(*) FROM message_store.stream_batch('account-5', 0, 10);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT message_store.number_messages();
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT count(*) FROM message_store.numbering_state;
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT count(*) FROM message_store.get_stream_messages('account-5');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT count(*) AS probe_streams_started FROM chunked_map.map_state WHERE map = 'probe-1';
REVOKE USAGE ON SCHEMA chunked_map, message_store FROM message_store_probe;
DROP ROLE message_store_probe;
-- the owner's append with a kept id starts a map it finds absent and answers where it wrote the
-- record when it wrote it directly (the record's row, read by the next statement), no address
-- when by SQL; one row, also as a value
CREATE TEMPORARY TABLE kept AS
SELECT * FROM chunked_map.chunked_register_with_id('kept-1', '{"n": 1}', 'k1');
INSERT INTO kept SELECT * FROM chunked_map.chunked_register_with_id('kept-1', '{"n": 2}', 'k2');
SELECT k.seq, c.seq = k.seq AS the_records_address
FROM kept AS k
LEFT JOIN chunked_map.current_record AS c ON c.ctid = k.record AND c.map = 'kept-1'
ORDER BY k.seq;
SET chunked_map.direct_append = off;
SELECT seq, record FROM chunked_map.chunked_register_with_id('kept-1', '{"n": 3}', 'k3');
RESET chunked_map.direct_append;
SELECT (chunked_map.chunked_register_with_id('kept-1', '{"n": 4}', 'k4')).seq;
DROP TABLE kept;
SELECT seq, payload, id FROM chunked_map.chunked_read('kept-1', 0, 10);
SELECT chunked_map.chunked_drop('kept-1');
-- a time given is the record's, written directly or by SQL, kept when its chunk is archived;
-- none (NULL), the transaction's start, as every append's
SELECT chunked_map.chunked_start('kept-2', 2);
SELECT seq FROM chunked_map.chunked_register_with_id('kept-2', '{"n": 1}', 'k1', '2020-01-02 03:04:05.678901+00');
SET chunked_map.direct_append = off;
SELECT seq FROM chunked_map.chunked_register_with_id('kept-2', '{"n": 2}', 'k2', '2019-12-31 23:59:59.999999-01');
RESET chunked_map.direct_append;
BEGIN;
SELECT seq FROM chunked_map.chunked_register_with_id('kept-2', '{"n": 3}', 'k3', NULL);
SELECT seq, at = pg_catalog.now() AS the_transactions_start
FROM chunked_map.chunked_read('kept-2', 2, 10);
COMMIT;
SELECT seq FROM chunked_map.chunked_register_with_id('kept-2', '{"n": 4}', 'k4', '1999-01-01 00:00:00+00');
SELECT a.first_seq, t.at AT TIME ZONE 'UTC' AS at_utc
FROM chunked_map.archived_chunk AS a, LATERAL pg_catalog.unnest(a.ats) WITH ORDINALITY AS t(at, i)
WHERE a.map = 'kept-2' ORDER BY a.first_seq, t.i;
SELECT seq, at AT TIME ZONE 'UTC' AS at_utc FROM chunked_map.chunked_read('kept-2', 0, 10) WHERE seq <> 3;
-- max_age counts from the time given: the archived chunk of 2019 and 2020 goes, though it was
-- appended a moment ago
SELECT chunked_map.chunked_set_retention('kept-2', NULL, '1 day');
SELECT chunked_map.chunked_apply_retention('kept-2') AS records_removed;
SELECT seq FROM chunked_map.chunked_read('kept-2', 0, 10);
SELECT chunked_map.chunked_drop('kept-2');
-- a time given must be finite and of the common era, what a page can print and retention can
-- count from (22023, before anything is written)
SELECT chunked_map.chunked_register_with_id('kept-3', '{}', 'k1', 'infinity');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_map.chunked_register_with_id('kept-3', '{}', 'k1', '-infinity');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_map.chunked_register_with_id('kept-3', '{}', 'k1', '0001-12-31 23:59:59.999999+00 BC');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT seq FROM chunked_map.chunked_register_with_id('kept-3', '{}', 'k1', '0001-01-01 00:00:00+00');
SELECT chunked_map.chunked_get('kept-3', 1) -> 'at' AS at;
SELECT chunked_map.chunked_drop('kept-3');

-- an id written before fails on messages_id after the append: the savepoint the error ends
-- takes the append with it, and the stream goes on at the next position
BEGIN;
SELECT message_store.write_message('00000000-0000-4000-8000-000000000014', 'retry-1', 'Opened', '{}');
SAVEPOINT retry;
\set VERBOSITY terse
SELECT message_store.write_message('00000000-0000-4000-8000-000000000014', 'retry-1', 'Opened', '{}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set VERBOSITY default
ROLLBACK TO SAVEPOINT retry;
SELECT message_store.write_message('00000000-0000-4000-8000-000000000015', 'retry-1', 'Deposited', '{}');
COMMIT;
SELECT seq, payload, id FROM chunked_map.chunked_read('retry-1', 0, 10);

-- a message moved over from message-db keeps its time (import_message, the import recipe's
-- writer), as UTC; only the owner may give messages a time: not message-db's client role
SELECT message_store.import_message('00000000-0000-4000-8000-000000000016', 'imported-1', 'Opened',
                                    '{"a": 1}', NULL, '2020-01-02 03:04:05.678901');
SELECT message_store.import_message('00000000-0000-4000-8000-000000000017', 'imported-1', 'Closed',
                                    NULL, '{"m": 1}', '2020-01-03 00:00:00');
SELECT id, position, type, data, metadata, time FROM message_store.get_stream_messages('imported-1');
SELECT time FROM message_store.messages WHERE stream_name = 'imported-1' ORDER BY position;
SELECT message_store.import_message('00000000-0000-4000-8000-000000000018', 'imported-1', 'Closed',
                                    NULL, NULL, NULL);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SET ROLE message_store;
SELECT message_store.import_message('00000000-0000-4000-8000-000000000018', 'imported-1', 'Closed',
                                    NULL, NULL, '2020-01-04 00:00:00');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
RESET ROLE;
-- (and granted by mistake, it runs as its caller: what it calls stays the owner's)
GRANT EXECUTE ON FUNCTION message_store.import_message(varchar, varchar, varchar, jsonb, jsonb, timestamp)
    TO message_store;
SET ROLE message_store;
SELECT message_store.import_message('00000000-0000-4000-8000-000000000018', 'imported-1', 'Closed',
                                    NULL, NULL, '2020-01-04 00:00:00');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
RESET ROLE;
REVOKE EXECUTE ON FUNCTION message_store.import_message(varchar, varchar, varchar, jsonb, jsonb, timestamp)
    FROM message_store;
SELECT count(*) AS imported FROM message_store.message_index WHERE stream_name = 'imported-1';
-- (the map does not remember message ids: the store's index keeps them unique)
SELECT count(*) AS ids_the_map_remembers FROM chunked_map.record_id WHERE map = 'retry-1';
SELECT position, type FROM message_store.get_stream_messages('retry-1');

-- a read-only transaction (or a hot standby) reads what was numbered, and numbers nothing
BEGIN READ ONLY;
SELECT count(*) FROM message_store.get_category_messages('account');
SELECT count(*) FROM message_store.get_stream_messages('account-1');
COMMIT;
-- a message's payload is what jsonb_build_object makes of its type, data and metadata, byte for
-- byte, a key left out where its value is SQL NULL (type: JSON null): numbers as they were given,
-- scalars, nested values, keys in jsonb's order; and it is what write_message appends
SELECT p.t, message_store.message_payload(p.t, p.d, p.m) AS payload,
       pg_catalog.jsonb_send(message_store.message_payload(p.t, p.d, p.m))
         = pg_catalog.jsonb_send(CASE WHEN p.m IS NULL AND p.d IS NULL THEN pg_catalog.jsonb_build_object('type', p.t)
                                      WHEN p.m IS NULL THEN pg_catalog.jsonb_build_object('type', p.t, 'data', p.d)
                                      WHEN p.d IS NULL THEN pg_catalog.jsonb_build_object('type', p.t, 'metadata', p.m)
                                      ELSE pg_catalog.jsonb_build_object('type', p.t, 'data', p.d, 'metadata', p.m) END)
         AS same_as_jsonb_build_object
FROM (VALUES ('A', '{"zz": 1e40, "a": [1, {"x": null}], "b": 1.50}'::jsonb, '{"correlationStreamName": "x-1"}'::jsonb),
             ('B', NULL, NULL),
             ('C', '"s"', '12345678901234567890123456789.000'),
             (NULL, 'true', NULL),
             ('D', NULL, '[]'),
             ('é "q" \ 	', '{}', 'null')) AS p(t, d, m);
SELECT message_store.write_message('00000000-0000-4000-8000-000000000019', 'payload-1', 'A',
                                   '{"zz": 1e40, "b": 1.50}', '{"correlationStreamName": "x-1"}');
SELECT r.payload = message_store.message_payload('A', '{"zz": 1e40, "b": 1.50}', '{"correlationStreamName": "x-1"}')
       AS appended_as_built, r.payload
FROM chunked_map.chunked_read('payload-1', 0, 10) AS r;
-- an id is required, as message-db's column is
SELECT message_store.write_message(NULL, 'account-6', 'Opened', '{}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- write_message's argument defaults are stored as they are, not compressed with its source: a
-- call that leaves arguments out, as clients' calls do, would decompress them every time
SELECT pg_catalog.pg_column_compression(p.proargdefaults) IS NOT NULL AS defaults_compressed
FROM pg_catalog.pg_proc AS p
WHERE p.oid = 'message_store.write_message(varchar, varchar, varchar, jsonb, jsonb, bigint)'::pg_catalog.regprocedure;
-- a condition sees the caller's search_path, as message-db's does
SET message_store.sql_condition = on;
SELECT stream_name, position FROM message_store.get_category_messages('account', 1, 1000, NULL, NULL, NULL, 'cardinal_id(stream_name) = ''4''');
-- (as message-db's clients' role too: the relation a condition reads is granted to it)
SET ROLE message_store;
SELECT stream_name, position FROM message_store.get_category_messages('account', 1, 2, NULL, NULL, NULL, 'type = ''Deposited''');
RESET ROLE;
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
-- a stream's map is a consistent map, its records' ids the messages'
SELECT chunked_map.chunked_verify('big-0') -> 'consistent' AS consistent, chunked_map.chunked_verify('big-0') -> 'problems' AS problems;
SELECT count(*) AS records_with_their_message_id
FROM chunked_map.chunked_read('big-0', 0, 1000) AS r
JOIN message_store.message_index AS i ON i.stream_name = 'big-0' AND i.position = r.seq - 1 AND i.id::text = r.id;
SELECT position, data FROM message_store.get_stream_messages('big-0', 97, 5);
-- each message keeps the address its record was written at (written directly, every one here):
-- the record's row is there while its chunk is current
SELECT count(*) FILTER (WHERE c.ctid IS NOT NULL) AS current_records_at_their_address,
       (SELECT count(*) FROM chunked_map.current_record AS r WHERE r.map = 'big-1') AS current_records
FROM message_store.message_index AS i
LEFT JOIN chunked_map.current_record AS c
       ON c.ctid = i.record AND c.map = i.stream_name AND c.seq = i.position + 1
WHERE i.stream_name = 'big-1';
-- an address that holds another record now (as once an archived chunk's rows are vacuumed and
-- their space reused) is passed over: each message still reads its own record, from the current
-- chunk or its archived one
UPDATE message_store.message_index
SET record = (SELECT c.ctid FROM chunked_map.current_record AS c WHERE c.map = 'big-1' ORDER BY c.seq DESC LIMIT 1)
WHERE stream_name = 'big-0';
-- every message of the category, its data the record's (n: 2 × position + stream)
SELECT count(*) AS messages,
       count(*) FILTER (WHERE (data::jsonb ->> 'n')::int = 2 * position + cardinal_id(stream_name)::int) AS own_data,
       count(DISTINCT global_position) AS positions
FROM message_store.get_category_messages('big', 1, -1);
-- from a global position in the middle, a batch crossing both streams' chunks
SELECT stream_name, position, data
FROM message_store.get_category_messages('big', (SELECT global_position FROM message_store.message_index WHERE stream_name = 'big-1' AND position = 98), 6);
-- chunks that max_chunk_bytes ended before chunk_size records: a current record's sequence is
-- within the size the newest archived chunk was started with, yet not in it; with every address
-- stale, each message still reads its own record (the archived chunk's, else the current one's)
SET chunked_map.max_chunk_bytes = 1000;
SELECT count(message_store.write_message(pg_catalog.format('00000000-0000-4000-8009-%s', pg_catalog.lpad(n::text, 12, '0')),
                                         'short-0', 'Counted',
                                         pg_catalog.jsonb_build_object('n', n, 'pad', pg_catalog.repeat('x', 200))))
FROM pg_catalog.generate_series(0, 11) AS n;
RESET chunked_map.max_chunk_bytes;
SELECT a.first_seq, a.chunk_size, pg_catalog.cardinality(a.payloads) AS records
FROM chunked_map.archived_chunk AS a WHERE a.map = 'short-0' ORDER BY a.first_seq;
UPDATE message_store.message_index
SET record = (SELECT c.ctid FROM chunked_map.current_record AS c WHERE c.map = 'big-1' ORDER BY c.seq DESC LIMIT 1)
WHERE stream_name = 'short-0';
SELECT position, (data::jsonb ->> 'n')::int AS n
FROM message_store.get_category_messages('short', 1, -1) ORDER BY position;
-- (a stream batch reads those chunks as they are, across each end, from any position)
SELECT position, (data::jsonb ->> 'n')::int AS n FROM message_store.get_stream_messages('short-0', 0, 5);
SELECT position, (data::jsonb ->> 'n')::int AS n FROM message_store.get_stream_messages('short-0', 5, 5);
SELECT count(*) AS messages, count(*) FILTER (WHERE (data::jsonb ->> 'n')::int = position) AS own_data
FROM message_store.get_stream_messages('short-0', 0, -1);
-- and with no address at all (an append by SQL gives none)
UPDATE message_store.message_index SET record = NULL WHERE stream_name = 'short-0';
SELECT count(*) AS messages, count(*) FILTER (WHERE (data::jsonb ->> 'n')::int = position) AS own_data
FROM message_store.get_category_messages('short', 1, -1);
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

-- a map chunked_map's own functions appended to is not a stream: write_message refuses it
-- (42809, chunked_map's own error), and appends nothing; the direct write and the SQL one alike
SELECT chunked_map.chunked_start('plain-1');
SELECT chunked_map.chunked_register('plain-1', '{"x": 1}');
SELECT message_store.write_message('00000000-0000-4000-8000-000000000023', 'plain-1', 'Opened', '{}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SET chunked_map.direct_append = off;
SELECT message_store.write_message('00000000-0000-4000-8000-000000000023', 'plain-1', 'Opened', '{}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
RESET chunked_map.direct_append;
SELECT seq, payload FROM chunked_map.chunked_read('plain-1', 0, 10);
-- nor has it a version (message-db's stream with no message has none)
SELECT message_store.stream_version('plain-1') IS NULL AS plain_map_has_no_version;

-- a stream takes no other append: not chunked_map's appends, one record or a batch, with an id
-- or without, directly or by SQL; it is left as it was
SELECT message_store.write_message('00000000-0000-4000-8000-000000000025', 'kept-1', 'Opened', '{}');
SELECT chunked_map.chunked_register('kept-1', '{"x": 1}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_map.chunked_register('kept-1', '{"x": 1}', 1);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- (an expectation already out of date too: the stream's refusal first, not the mismatch's 23000)
SELECT chunked_map.chunked_register('kept-1', '{"x": 1}', 0);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM chunked_map.chunked_register_once('kept-1', '{"x": 1}', 'an-id');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_map.chunked_register_many('kept-1', ARRAY['{"x": 1}']::jsonb[]);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM chunked_map.chunked_register_many_once('kept-1', ARRAY['{"x": 1}']::jsonb[], ARRAY['an-id']);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SET chunked_map.direct_append = off;
SELECT chunked_map.chunked_register('kept-1', '{"x": 1}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
RESET chunked_map.direct_append;
-- (the refusal also where this transaction already holds the stream: after a message of its own)
BEGIN;
SELECT message_store.write_message('00000000-0000-4000-8000-000000000026', 'kept-1', 'Opened', '{}');
SELECT chunked_map.chunked_register('kept-1', '{"x": 1}');
ROLLBACK;
SELECT seq, payload ->> 'type' AS type FROM chunked_map.chunked_read('kept-1', 0, 10);
SELECT map, message_stream FROM chunked_map.map_state
WHERE map IN ('plain-1', 'kept-1') ORDER BY map;
-- chunked_info says which maps are streams
SELECT chunked_map.chunked_info('kept-1') -> 'message_stream' AS stream_1,
       chunked_map.chunked_info('plain-1') ? 'message_stream' AS plain_1_says;

-- a map started but never written is written like a new stream, and becomes one with its first
-- message (by SQL too); its writer's rollback leaves it a map of either kind
SELECT chunked_map.chunked_start('empty-1');
SELECT chunked_map.chunked_start('empty-2');
SELECT chunked_map.chunked_start('empty-3');
SELECT message_store.stream_version('empty-1') IS NULL AS started_map_has_no_version;
SELECT message_store.write_message('00000000-0000-4000-8000-000000000027', 'empty-1', 'Opened', '{}');
SELECT message_store.stream_version('empty-1') AS version_after_its_first_message;
SET chunked_map.direct_append = off;
SELECT message_store.write_message('00000000-0000-4000-8000-000000000028', 'empty-2', 'Opened', '{}');
RESET chunked_map.direct_append;
SELECT chunked_map.chunked_register('empty-2', '{"x": 1}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
BEGIN;
SELECT message_store.write_message('00000000-0000-4000-8000-000000000029', 'empty-3', 'Opened', '{}');
ROLLBACK;
SELECT chunked_map.chunked_register('empty-3', '{"x": 1}');
SELECT map, message_stream FROM chunked_map.map_state
WHERE map IN ('empty-1', 'empty-2', 'empty-3') ORDER BY map;

-- a record the owner appends with chunked_register_with_id itself is taken for a message: the map
-- becomes a stream, and stream reads pass over the position, which has no message
SELECT seq FROM chunked_map.chunked_register_with_id('direct-1', '{"type": "Fake"}', 'not-a-message');
SELECT message_store.write_message('00000000-0000-4000-8000-000000000030', 'direct-1', 'Opened', '{}');
SELECT position, type FROM message_store.get_stream_messages('direct-1');
SELECT message_store.stream_version('direct-1');
SELECT chunked_map.chunked_info('direct-1') -> 'message_stream' AS stream;

-- a write with an expected version reads the stream's state once, locking it as it reads its
-- version, and its append finds the lock its own; a write without one reads it in its append
-- only. Each the first write of its transaction (a later one's append finds the state row at the
-- address the first left), counted as the transaction's statistics show scans of
-- chunked_map.map_state
CREATE TEMP VIEW state_scans AS
SELECT coalesce(t.seq_scan, 0) + coalesce(t.idx_scan, 0) AS n
FROM pg_catalog.pg_stat_xact_user_tables AS t
WHERE t.schemaname = 'chunked_map' AND t.relname = 'map_state';
BEGIN;
SELECT n AS scans_before FROM pg_temp.state_scans \gset
SELECT message_store.write_message('00000000-0000-4000-8003-000000000001', 'direct-1', 'Deposited', '{}', NULL, 1) AS position;
SELECT n - :scans_before AS state_scans_with_a_version FROM pg_temp.state_scans;
ROLLBACK;
BEGIN;
SELECT n AS scans_before FROM pg_temp.state_scans \gset
SELECT message_store.write_message('00000000-0000-4000-8003-000000000002', 'direct-1', 'Deposited', '{}') AS position;
SELECT n - :scans_before AS state_scans_without_a_version FROM pg_temp.state_scans;
ROLLBACK;
DROP VIEW pg_temp.state_scans;

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

-- the last global position given is kept in one row, moved by every numbering: numbering goes
-- on from it (not from what the messages have); without it (a row deleted by hand), after the
-- greatest position the messages have
SELECT count(*) FROM message_store.get_category_messages('tail');
SELECT s.last_global_position = max(i.global_position) AS kept, count(*) - count(i.global_position) AS unnumbered
FROM message_store.numbering_state AS s, message_store.message_index AS i GROUP BY s.last_global_position;
UPDATE message_store.numbering_state SET last_global_position = last_global_position + 10;
SELECT message_store.write_message('00000000-0000-4000-8003-000000000001', 'tail-3', 'Opened', '{}');
SELECT count(*) FROM message_store.get_category_messages('tail');
SELECT m.global_position - (SELECT max(i.global_position) FROM message_store.message_index AS i
                            WHERE i.stream_name <> 'tail-3') AS after_the_greatest
FROM message_store.get_stream_messages('tail-3') AS m;
DELETE FROM message_store.numbering_state;
SELECT message_store.write_message('00000000-0000-4000-8003-000000000000', 'tail-2', 'Opened', '{}');
SELECT count(*) FROM message_store.get_category_messages('tail');
SELECT m.global_position - (SELECT max(i.global_position) FROM message_store.message_index AS i
                            WHERE i.stream_name <> 'tail-2') AS after_the_greatest,
       (SELECT s.last_global_position FROM message_store.numbering_state AS s) = m.global_position AS kept
FROM message_store.get_stream_messages('tail-2') AS m;

-- a backlog (readers away, or a writer holding the numbering back) is numbered 10,000 messages a
-- read, the first in key order (here one transaction's: write order), so that a read takes a
-- bounded time; the next read numbers the rest, after them
SELECT message_store.number_messages() AS before_the_backlog;
-- (no vacuum removes the index entries the numbering leaves, for the look counted below)
ALTER TABLE message_store.message_index SET (autovacuum_enabled = off);
SELECT count(message_store.write_message(gen_random_uuid()::varchar, 'backlog-' || (g % 7), 'Piled',
                                         pg_catalog.jsonb_build_object('n', g)))
FROM generate_series(1, 10005) AS g;
-- (a read that numbered and rolled back: the next read gives the same messages the same positions)
BEGIN;
SELECT count(*) AS read_at_first,
       pg_catalog.md5(pg_catalog.string_agg(id || ':' || global_position, ',' ORDER BY global_position)) AS first_try
FROM message_store.get_category_messages('backlog', 1, -1) \gset
ROLLBACK;
\echo read at first: :read_at_first
SELECT count(*) AS read_again,
       pg_catalog.md5(pg_catalog.string_agg(id || ':' || global_position, ',' ORDER BY global_position)) = :'first_try' AS same_positions
FROM message_store.get_category_messages('backlog', 1, -1);
SELECT message_store.number_messages() AS numbered_next;
-- (the numbering's statement reads the waiting messages in its order off their index, and stops
-- after 10,000, also where they share a key, as one transaction's do)
SET enable_seqscan = off;
SET enable_sort = off;
EXPLAIN (COSTS OFF)
SELECT i.ctid FROM message_store.message_index AS i
WHERE i.global_position IS NULL AND i.writer >= '1'::xid8 AND i.writer < '1000000'::xid8
ORDER BY i.writer, i.write_order LIMIT 10000;
RESET enable_seqscan;
RESET enable_sort;
SELECT count(*) AS read_then FROM message_store.get_category_messages('backlog', 1, -1);
SELECT count(*) AS messages,
       max(global_position) - min(global_position) + 1 AS positions_spanned,
       count(*) FILTER (WHERE by_position <> by_write) AS out_of_write_order
FROM (SELECT global_position,
             pg_catalog.row_number() OVER (ORDER BY global_position) AS by_position,
             pg_catalog.row_number() OVER (ORDER BY write_order) AS by_write
      FROM message_store.message_index WHERE category(stream_name) = 'backlog') AS m;
-- a read that finds nothing waiting looks at the index of waiting messages from the bound the
-- last numbering left (numbering_state), not through the entries of the 10,005 messages it
-- numbered, which stay in that index until a vacuum: pages of the index read by the look, and
-- by the same look from the start (counted by the backend's statistics of its transaction)
BEGIN;
SELECT pg_catalog.pg_stat_get_xact_blocks_fetched('message_store.messages_unnumbered'::regclass) AS pages_before \gset
SELECT message_store.number_messages() AS nothing_waits;
SELECT pg_catalog.pg_stat_get_xact_blocks_fetched('message_store.messages_unnumbered'::regclass) - :pages_before <= 3
       AS from_the_bound_three_pages_at_most,
       pg_catalog.pg_stat_get_xact_blocks_fetched('message_store.messages_unnumbered'::regclass) AS pages_before \gset
SELECT :'from_the_bound_three_pages_at_most' AS from_the_bound_three_pages_at_most;
-- (the same look from the start: with the bound not trusted, as another server's; rolled back)
UPDATE message_store.numbering_state SET server_started = server_started - interval '1 day';
SELECT message_store.number_messages() AS nothing_waits;
SELECT pg_catalog.pg_stat_get_xact_blocks_fetched('message_store.messages_unnumbered'::regclass) - :pages_before >= 20
       AS from_the_start_twenty_pages_at_least;
ROLLBACK;
ALTER TABLE message_store.message_index RESET (autovacuum_enabled);
-- a category batch walks its category's index in global position order, in a generic plan (the
-- one a function's statement ends up with: its position is a parameter) as in a custom one,
-- reading as many of its entries as the batch holds: the index holds the messages that have a
-- position only, and a plan that could not use it, or that sorted what it found there, would
-- read the whole category from the position on. (Counted by the backend's statistics of its
-- transaction: the batch's messages, the index's scans and the entries they read.)
CREATE FUNCTION pg_temp.category_index_use(condition varchar DEFAULT NULL)
RETURNS TABLE (messages bigint, index_scans bigint, index_entries_read bigint)
LANGUAGE plpgsql AS $$
DECLARE
    _index constant pg_catalog.regclass := 'message_store.messages_category';
    _scans bigint := pg_catalog.pg_stat_get_xact_numscans(_index);
    _entries bigint := pg_catalog.pg_stat_get_xact_tuples_returned(_index);
BEGIN
    SELECT count(*) INTO messages
    FROM message_store.get_category_messages('backlog', 5000, 100, NULL, NULL, NULL, category_index_use.condition);
    index_scans := pg_catalog.pg_stat_get_xact_numscans(_index) - _scans;
    index_entries_read := pg_catalog.pg_stat_get_xact_tuples_returned(_index) - _entries;
    RETURN NEXT;
END;
$$;
SET plan_cache_mode = force_generic_plan;
SELECT 'generic plan' AS batch, * FROM pg_temp.category_index_use();
SET plan_cache_mode = force_custom_plan;
SELECT 'custom plan' AS batch, * FROM pg_temp.category_index_use();
RESET plan_cache_mode;
-- (and so does a read with a condition, message-db's SQL of its own)
SET message_store.sql_condition = on;
SELECT 'condition' AS batch, * FROM pg_temp.category_index_use('position >= 0');
RESET message_store.sql_condition;

-- a stream batch reads the stream's records 10,000 at a time and joins each slice with the same
-- slice of the stream's index, in a statement of its own whose one plan serves every call: each
-- slice's archived chunks are looked up once (two scans of their index a slice: the chunk holding
-- the slice's first record, then the chunks from it on), and the index entries it reads are the
-- batch's, whatever its size: at most two a message (a message numbered since the last vacuum has
-- two, its row before the numbering and after). (A plan of all the slices at once that joined
-- each slice with the batch's whole range read those entries once a slice, 3 times here; another
-- read the records once an index entry.)
SELECT count(message_store.write_message(gen_random_uuid()::varchar, 'sliced-1', 'Piled',
                                         pg_catalog.jsonb_build_object('n', g)))
FROM generate_series(1, 25000) AS g;
-- (one transaction's messages share a key: each numbering leaves its bound at that key, not
-- past it, and the next one numbers the rest)
SELECT message_store.number_messages() AS numbered_first, message_store.number_messages() AS numbered_next,
       message_store.number_messages() AS numbered_last, message_store.number_messages() AS numbered_after;
CREATE FUNCTION pg_temp.stream_index_use("position" bigint, batch_size bigint)
RETURNS TABLE (messages bigint, first_position bigint, last_position bigint, in_order boolean,
               own_data boolean, archive_index_scans bigint, two_index_entries_a_message_at_most boolean)
LANGUAGE plpgsql AS $$
DECLARE
    _index constant pg_catalog.regclass := 'message_store.messages_stream';
    _chunks constant pg_catalog.regclass := 'chunked_map.archived_chunk_pkey';
    _entries bigint := pg_catalog.pg_stat_get_xact_tuples_returned(_index);
    _scans bigint := pg_catalog.pg_stat_get_xact_numscans(_chunks);
BEGIN
    SELECT count(*), min(m.position), max(m.position),
           pg_catalog.bool_and(m.position = m.first + m.n - 1),
           pg_catalog.bool_and((m.data::jsonb ->> 'n')::bigint = m.position + 1)
    INTO messages, first_position, last_position, in_order, own_data
    FROM (SELECT b.position, b.data, pg_catalog.row_number() OVER () AS n,
                 pg_catalog.first_value(b.position) OVER () AS first
          FROM message_store.get_stream_messages('sliced-1', stream_index_use.position,
                                                 stream_index_use.batch_size) AS b) AS m;
    archive_index_scans := pg_catalog.pg_stat_get_xact_numscans(_chunks) - _scans;
    two_index_entries_a_message_at_most :=
        pg_catalog.pg_stat_get_xact_tuples_returned(_index) - _entries <= 2 * messages;
    RETURN NEXT;
END;
$$;
SELECT 'whole stream' AS batch, * FROM pg_temp.stream_index_use(0, -1);
SELECT 'from a position' AS batch, * FROM pg_temp.stream_index_use(5, -1);
SELECT 'two slices' AS batch, * FROM pg_temp.stream_index_use(5, 20000);
SELECT 'the last thousand' AS batch, * FROM pg_temp.stream_index_use(24000, 1000);
SELECT 'past the end' AS batch, * FROM pg_temp.stream_index_use(24990, 1000);
-- (and where the planner hashes the index's entries, with a work_mem they do not fit in: a hash
-- of the batch's whole range, in batches, would be built again for each slice, and its entries
-- read each time; one that fits is kept from slice to slice. In a plan made again for the test.)
SET enable_mergejoin = off;
SET work_mem = '64kB';
DISCARD PLANS;
SELECT 'whole stream, hashed in batches' AS batch, * FROM pg_temp.stream_index_use(0, -1);
SELECT 'from a position, hashed in batches' AS batch, * FROM pg_temp.stream_index_use(5, -1);
RESET enable_mergejoin;
RESET work_mem;
DISCARD PLANS;
-- (a trim that leaves archived chunks: a batch from the start reads from the oldest kept record,
-- its own data, into the next chunks)
SELECT chunked_map.chunked_trim('sliced-1', 5001);
SELECT 'trimmed, from the start' AS batch, * FROM pg_temp.stream_index_use(0, 250);
SELECT position, (data::jsonb ->> 'n')::int AS n FROM message_store.get_stream_messages('sliced-1', 0, 2);

-- after a restore into another cluster, messages that had no position keep keys from the old
-- cluster's transaction ids (here: as ids far ahead of this cluster's leave them) and are not
-- numbered; the owner's step in docs/message-db.md makes them final, numbered in write order
SELECT message_store.write_message('00000000-0000-4000-8004-000000000001', 'restored-1', 'Opened', '{}');
SELECT message_store.write_message('00000000-0000-4000-8004-000000000002', 'restored-2', 'Opened', '{}');
UPDATE message_store.message_index SET writer = '4294967296000'::xid8 WHERE category(stream_name) = 'restored';
SELECT count(*) AS read_before FROM message_store.get_category_messages('restored');
BEGIN;
UPDATE message_store.message_index SET writer = '1'::xid8 WHERE global_position IS NULL;
UPDATE message_store.numbering_state SET unnumbered_from = '0';
COMMIT;
SELECT stream_name, position, global_position IS NOT NULL AS numbered
FROM message_store.get_category_messages('restored') ORDER BY global_position;
-- (the owner's step moves the numbering's bound back too: keys moved below the bound that this
-- server's last numbering left are otherwise never looked at)
SELECT message_store.write_message('00000000-0000-4000-8004-000000000011', 'restored-11', 'Opened', '{}');
UPDATE message_store.message_index SET writer = '4294967296000'::xid8 WHERE stream_name = 'restored-11';
SELECT message_store.write_message('00000000-0000-4000-8004-000000000012', 'restored-12', 'Opened', '{}');
SELECT stream_name FROM message_store.get_category_messages('restored') ORDER BY global_position;
UPDATE message_store.message_index SET writer = '1'::xid8 WHERE global_position IS NULL;
SELECT stream_name AS without_the_bound_moved
FROM message_store.get_category_messages('restored') ORDER BY global_position;
UPDATE message_store.numbering_state SET unnumbered_from = '0';
SELECT stream_name AS with_the_bound_moved
FROM message_store.get_category_messages('restored') ORDER BY global_position;
-- a bound written while another server ran (a copy restored here, or this one before a
-- restart) is not trusted: a read looks from the start, and numbers what waits below it
UPDATE message_store.numbering_state
SET unnumbered_from = '4294967296000', server_started = server_started - interval '1 day';
SELECT message_store.write_message('00000000-0000-4000-8004-000000000013', 'restored-13', 'Opened', '{}');
SELECT stream_name AS under_another_servers_bound
FROM message_store.get_category_messages('restored') ORDER BY global_position;
-- (the same bound, as this server's, would hide a message: the read above saw the guard)
SELECT message_store.write_message('00000000-0000-4000-8004-000000000014', 'restored-14', 'Opened', '{}');
UPDATE message_store.numbering_state
SET unnumbered_from = '4294967296000', server_started = pg_catalog.pg_postmaster_start_time();
SELECT stream_name AS under_this_servers_bound_ahead
FROM message_store.get_category_messages('restored') ORDER BY global_position;
UPDATE message_store.numbering_state SET unnumbered_from = '0';
SELECT stream_name AS with_the_bound_moved
FROM message_store.get_category_messages('restored') ORDER BY global_position;
-- the bound is never above the numbering's own transaction id + 1 (ids given after it can be
-- given again after a crash, where its commit, holding the bound, reached the disk): here the
-- reader's transaction took its id, then two subtransactions of it took theirs, then it numbered
SELECT message_store.write_message('00000000-0000-4000-8004-000000000015', 'restored-15', 'Opened', '{}');
BEGIN;
SELECT pg_catalog.pg_current_xact_id() AS reader_id \gset
SAVEPOINT first_id;
CREATE TEMPORARY TABLE ids_taken (n integer);
RELEASE SAVEPOINT first_id;
SAVEPOINT second_id;
INSERT INTO ids_taken VALUES (1);
RELEASE SAVEPOINT second_id;
SELECT count(*) AS numbered FROM message_store.get_category_messages('restored');
SELECT n.unnumbered_from = (:'reader_id'::text::bigint + 1)::text::xid8 AS bound_at_the_readers_id_and_one,
       chunked_map.chunked_next_transaction_id() > :'reader_id'::text::bigint + 2 AS ids_given_since
FROM message_store.numbering_state AS n;
COMMIT;
-- clients that read messages by global position alone number first themselves (the view numbers
-- nothing): the numbering is granted to message-db's clients' role
SELECT message_store.write_message('00000000-0000-4000-8004-000000000003', 'restored-3', 'Opened', '{}');
SET ROLE message_store;
SELECT count(*) AS unnumbered_in_the_view FROM message_store.messages WHERE global_position IS NULL;
SELECT message_store.number_messages() AS numbered_by_the_client;
SELECT count(*) AS unnumbered_in_the_view FROM message_store.messages WHERE global_position IS NULL;
RESET ROLE;
-- the numbering turns hash and merge joins off for its own statement only: the caller's settings
-- are as they were after it, in the same transaction
SELECT message_store.write_message('00000000-0000-4000-8004-000000000004', 'restored-4', 'Opened', '{}');
BEGIN;
SELECT message_store.number_messages() AS numbered;
SHOW enable_hashjoin;
SHOW enable_mergejoin;
COMMIT;
SELECT message_store.write_message('00000000-0000-4000-8004-000000000005', 'restored-5', 'Opened', '{}');
BEGIN;
SET LOCAL enable_hashjoin = off;
SELECT message_store.number_messages() AS numbered;
SHOW enable_hashjoin;
SHOW enable_mergejoin;
COMMIT;
-- the store dropped, its streams stay (they are chunked_map's maps): a new store refuses to start
-- over them, whose messages it could not read and whose ids it would take again; once they are
-- dropped, it starts
DROP EXTENSION chunked_map_message_store;
SELECT count(*) AS streams_left FROM chunked_map.map_state WHERE message_stream;
-- (its context, the script's statement, is printed from PostgreSQL 16 on: left out)
\set SHOW_CONTEXT never
CREATE EXTENSION chunked_map_message_store;
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set SHOW_CONTEXT errors
SELECT count(chunked_map.chunked_drop(map)) AS dropped FROM chunked_map.map_state WHERE message_stream;
CREATE EXTENSION chunked_map_message_store;
SELECT message_store.write_message('00000000-0000-4000-8004-000000000005', 'restored-5', 'Opened', '{}');
