-- The scenarios of message-db 1.3's test/ scripts, in message-db's API alone: run by
-- tests/cluster/tests/message_db.rs against message-db itself (installed from npm)
-- and against chunked_map_message_store, on the same server, and the outputs compared. Ids are
-- fixed; times are shown only as present; global positions only by their order (they may
-- differ: message-db's come from a sequence that a failed insert also advances).
\set VERBOSITY terse
\set SHOW_CONTEXT never
SET search_path = message_store, public;
SELECT message_store_version();

\echo -- hash-64, category, is_category, id, cardinal-id, acquire-lock
SELECT hash_64('someStream-123'), hash_64(NULL);
SELECT category('someStream-123'), category('someStream'), category('someStream:command-1+2');
SELECT is_category('someStream-123'), is_category('someStream'), is_category(NULL);
SELECT id('someStream-123'), id('someStream'), id('someStream-123+456'), id(NULL);
SELECT cardinal_id('someStream-123'), cardinal_id('someStream'), cardinal_id('someStream-123+456');
SELECT acquire_lock('someStream-123') = hash_64('someStream');

\echo -- write-message, expected-version, expected-version-error
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
SELECT write_message('00000000-0000-4000-8000-000000000001', 'account-1', 'Opened', '{}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT write_message('00000000-0000-4000-8000-000000000001', 'account-9', 'Opened', '{}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT write_message('00000000-0000-4000-8000-000000000007', NULL, 'Opened', '{}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT write_message('00000000-0000-4000-8000-000000000008', 'account-2', NULL, '{}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT write_message('00000000-0000-4000-8000-000000000009', 'account-3', 'Opened', NULL);
-- (where more than one thing is wrong: the expected version is compared first, then the id's
-- form, then a read-only transaction refuses, then the values the table requires, in the order
-- of its columns)
SELECT write_message(NULL, NULL, NULL, '{}', NULL, 5);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT write_message('not-a-uuid', NULL, 'Opened', '{}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT write_message(NULL, NULL, NULL, '{}', NULL, -1);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT write_message(NULL, 'account-5', NULL, '{}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
BEGIN READ ONLY;
SELECT write_message('not-a-uuid', 'account-1', 'Opened', '{}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN READ ONLY;
SELECT write_message(NULL, NULL, NULL, '{}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT write_message('00000000-0000-4000-8000-000000000010', 'transfer-7', 'Started', '{"to": "account-1"}', '{"correlationStreamName": "account-1"}');
SELECT write_message('00000000-0000-4000-8000-000000000011', 'account-4+a', 'Opened', '{}');
SELECT write_message('00000000-0000-4000-8000-000000000012', 'account-4+b', 'Opened', '{}', '"just a string"');
-- (in a read-only transaction: refused, after the expected version was compared)
BEGIN READ ONLY;
SELECT write_message('00000000-0000-4000-8000-000000000030', 'account-1', 'Opened', '{}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN READ ONLY;
SELECT write_message('00000000-0000-4000-8000-000000000031', 'account-1', 'Opened', '{}', NULL, 99);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN READ ONLY;
SELECT write_message('00000000-0000-4000-8000-000000000032', 'account-77', 'Opened', '{}', NULL, -1);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
ROLLBACK;

\echo -- stream-version
SELECT stream_version('account-1'), stream_version('account-2'), stream_version('account-99');

\echo -- get-stream-messages, batch_size limited and unlimited, error-not-stream-name
SELECT id, stream_name, type, position, data, metadata, time IS NOT NULL AS has_time
FROM get_stream_messages('account-1');
SELECT position, data FROM get_stream_messages('account-1', 1);
SELECT position, data FROM get_stream_messages('account-1', 0, 2);
SELECT position FROM get_stream_messages('account-1', 0, -1);
SELECT id, data, metadata FROM get_stream_messages('account-3');
SELECT id, data, metadata FROM get_stream_messages('account-4+b');
SELECT count(*) FROM get_stream_messages('account-99');
-- edge values: a negative position, a batch size below -1, NULLs for the defaults
SELECT position FROM get_stream_messages('account-1', -5, 2);
SELECT position FROM get_stream_messages('account-1', 0, -2);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT count(*) FROM get_stream_messages('account-1', NULL, NULL);
SELECT count(*) FROM get_stream_messages('account-1', 1, 9223372036854775807);
SELECT count(*) FROM get_category_messages('account', 1, -2);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT count(*) FROM get_category_messages('account', -3, 2);
SELECT count(*) FROM get_category_messages('account', NULL, NULL);
SELECT * FROM get_stream_messages('account');
\echo SQLSTATE :LAST_ERROR_SQLSTATE

\echo -- get-category-messages, batch_size, error-not-category
SELECT stream_name, type, position, dense_rank() OVER (ORDER BY global_position) AS nth
FROM get_category_messages('account');
SELECT stream_name, position FROM get_category_messages('account', 1, 2);
SELECT count(*) FROM get_category_messages('account', 1, -1);
SELECT * FROM get_category_messages('account-1');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- from the global position after the second message of the category
SELECT stream_name, position
FROM get_category_messages('account', (SELECT global_position + 1 FROM get_category_messages('account', 1, 2) ORDER BY global_position DESC LIMIT 1));

\echo -- correlated, error-stream-name
SELECT stream_name, position FROM get_category_messages('account', 1, 1000, 'transfer');
SELECT stream_name, position FROM get_category_messages('transfer', 1, 1000, 'account');
SELECT * FROM get_category_messages('account', 1, 1000, 'transfer-7');
\echo SQLSTATE :LAST_ERROR_SQLSTATE

\echo -- consumer-group, correlated, and its six errors
SELECT m.member, r.stream_name, r.position
FROM generate_series(0, 1) AS m(member),
     LATERAL get_category_messages('account', 1, 1000, NULL, m.member, 2) AS r
ORDER BY m.member, r.global_position;
SELECT m.member, r.stream_name, r.position
FROM generate_series(0, 2) AS m(member),
     LATERAL get_category_messages('account', 1, 1000, 'transfer', m.member, 3) AS r
ORDER BY m.member, r.global_position;
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
-- a group larger than a smallint, on a category with messages and on one without
SELECT * FROM get_category_messages('account', 1, 1000, NULL, 0, 40000);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM get_category_messages('noSuchCategory', 1, 1000, NULL, 0, 40000);
\echo SQLSTATE :LAST_ERROR_SQLSTATE

\echo -- condition: error-not-activated, error-deactivated, condition, condition-correlated
SELECT * FROM get_stream_messages('account-1', 0, 1000, 'type = ''Deposited''');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM get_category_messages('account', 1, 1000, NULL, NULL, NULL, 'type = ''Deposited''');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SET message_store.sql_condition = off;
SELECT * FROM get_stream_messages('account-1', 0, 1000, 'type = ''Deposited''');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM get_category_messages('account', 1, 1000, NULL, NULL, NULL, 'type = ''Deposited''');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SET message_store.sql_condition = on;
SELECT stream_name, position FROM get_stream_messages('account-1', 0, 1000, 'type = ''Deposited''');
SELECT stream_name, position FROM get_stream_messages('account-1', 0, 1, 'messages.position > 0');
SELECT stream_name, position FROM get_category_messages('account', 1, 1000, NULL, NULL, NULL, 'type = ''Opened''');
SELECT stream_name, position FROM get_category_messages('account', 1, 1000, 'transfer', NULL, NULL, 'messages.position > 0');
SELECT stream_name, position FROM get_category_messages('account', 1, 2, NULL, 0, 2, 'type = ''Opened''');
RESET message_store.sql_condition;

\echo -- get-last-stream-message, type
SELECT stream_name, type, position, data FROM get_last_stream_message('account-1');
SELECT stream_name, type, position, data FROM get_last_stream_message('account-1', 'Opened');
SELECT stream_name, type, position FROM get_last_stream_message('account-1', 'Closed');
SELECT count(*) FROM get_last_stream_message('account-99');

\echo -- reports: messages and the six summaries
SELECT dense_rank() OVER (ORDER BY global_position) AS nth, position, time IS NOT NULL AS has_time,
       stream_name, type, data, metadata, id
FROM messages ORDER BY global_position;
SELECT * FROM category_type_summary;
SELECT * FROM stream_summary;
SELECT * FROM stream_type_summary;
SELECT * FROM type_category_summary;
SELECT * FROM type_stream_summary;
SELECT * FROM type_summary;

\echo -- one transaction writing two streams of a category: read in the order written
BEGIN;
SELECT write_message('00000000-0000-4000-8000-000000000020', 'order-2', 'Placed', '{}');
SELECT write_message('00000000-0000-4000-8000-000000000021', 'order-1', 'Placed', '{}');
SELECT write_message('00000000-0000-4000-8000-000000000022', 'order-2', 'Paid', '{}');
COMMIT;
SELECT stream_name, type FROM get_category_messages('order');
