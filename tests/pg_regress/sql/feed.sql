-- The feed across maps (0.4), as one session sees it: consumers of a category, polls that
-- acknowledge by committing, members of a group, trimmed records reported, and the errors.
-- (Orderings between sessions are isolation specs: tests/isolation/specs/feed_*.)
\i setup.psql
\set VERBOSITY default

SELECT chunked_start(m, 3) FROM unnest(ARRAY['order-1', 'order-2', 'account-1', 'order']) AS m;
SELECT chunked_register('order-1', '{"n": 1}'), chunked_register('order-1', '{"n": 2}'),
       chunked_register('account-1', '{"n": 1}'), chunked_register('order', '{"n": 1}');

-- from the start: every record a map of the category holds, each map's in order
SELECT chunked_subscribe('orders', 'order');
SELECT chunked_subscribe('orders', 'order');
SELECT chunked_subscribe('everything', NULL, from_start => false);
SELECT * FROM chunked_map.consumers ORDER BY consumer;
SELECT map, seq, payload, trimmed, id FROM chunked_poll('orders');
-- nothing new: nothing
SELECT map, seq, payload, trimmed, id FROM chunked_poll('orders');
-- maps of other categories are not delivered; maps started later are
SELECT chunked_register('account-1', '{"n": 2}');
SELECT chunked_start('order-3');
SELECT chunked_register('order-3', '{"n": 1}'), chunked_register('order-2', '{"n": 1}');
SELECT map, seq, payload, trimmed, id FROM chunked_poll('orders');
-- a consumer from the newest: only what came after its subscription, of every category
SELECT map, seq, payload, trimmed, id FROM chunked_poll('everything') ORDER BY map, seq;

-- a poll is acknowledged by its transaction's commit: rolled back, it is handed out again
SELECT chunked_register('order-1', '{"n": 3}');
BEGIN;
SELECT map, seq, payload, trimmed, id FROM chunked_poll('orders');
ROLLBACK;
BEGIN;
SELECT map, seq, payload, trimmed, id FROM chunked_poll('orders');
COMMIT;
SELECT map, seq, payload, trimmed, id FROM chunked_poll('orders');
-- an append that rolled back is never delivered
BEGIN;
SELECT chunked_register('order-1', '{"rolled": "back"}');
ROLLBACK;
SELECT map, seq, payload, trimmed, id FROM chunked_poll('orders');

-- at most max_records at a time, the rest on the next poll; rollovers and batches included
SELECT count(*) FROM chunked_register_many('order-2', ARRAY(SELECT jsonb_build_object('n', n) FROM generate_series(2, 8) AS n));
SELECT map, seq, payload, trimmed, id FROM chunked_poll('orders', 4);
SELECT map, seq, payload, trimmed, id FROM chunked_poll('orders', 4);
SELECT map, seq, payload, trimmed, id FROM chunked_poll('orders', 4);

-- a group of two: each map belongs to one member (a stable hash of its name)
SELECT chunked_subscribe('pair', 'order');
SELECT map, count(*) AS records FROM chunked_poll('pair', 100, 0, 2) GROUP BY map ORDER BY map;
SELECT map, count(*) AS records FROM chunked_poll('pair', 100, 1, 2) GROUP BY map ORDER BY map;
SELECT chunked_register(m, '{"later": true}') FROM unnest(ARRAY['order-1', 'order-2', 'order-3', 'order']) AS m;
SELECT map, seq FROM chunked_poll('pair', 100, 0, 2) ORDER BY map;
SELECT map, seq FROM chunked_poll('pair', 100, 1, 2) ORDER BY map;
-- another group size: nothing acknowledged is delivered again
SELECT chunked_register('order-1', '{"resized": true}');
SELECT map, seq FROM chunked_poll('pair', 100, 0, 3)
UNION ALL SELECT map, seq FROM chunked_poll('pair', 100, 1, 3)
UNION ALL SELECT map, seq FROM chunked_poll('pair', 100, 2, 3) ORDER BY map, seq;

-- records trimmed before the consumer had them: a row with a NULL payload says so (the
-- sequence of the last record that went), never a silent skip
SELECT map, seq, payload, trimmed, id FROM chunked_poll('orders');
SELECT count(*) FROM chunked_register_many('order-2', ARRAY(SELECT jsonb_build_object('n', n) FROM generate_series(10, 16) AS n));
SELECT chunked_trim('order-2', 14);
SELECT map, seq, payload, trimmed, id FROM chunked_poll('orders');

-- a dropped map takes its positions with it; started again, it is read from its start
SELECT chunked_drop('order-3');
SELECT chunked_start('order-3');
SELECT chunked_register('order-3', '{"again": true}');
SELECT map, seq, payload, trimmed, id FROM chunked_poll('orders');

-- unsubscribing: polls are 42704, positions gone; maps nobody follows any more are unfollowed
SELECT chunked_unsubscribe('orders');
SELECT chunked_unsubscribe('orders');
SELECT map, seq, payload, trimmed, id FROM chunked_poll('orders');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT count(*) AS positions FROM chunked_map.consumer_position WHERE consumer = 'orders';
SELECT chunked_unsubscribe('pair'), chunked_unsubscribe('everything');
SELECT count(*) FILTER (WHERE followed) AS followed, count(*) AS maps FROM chunked_map.map_state;
SELECT count(*) AS moves FROM chunked_map.map_change;

-- arguments
SELECT chunked_subscribe(NULL);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_subscribe('');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_subscribe('c', 'order-1');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_subscribe('c', '');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_subscribe('c', 'order', NULL);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT chunked_subscribe('c', 'order');
SELECT map, seq, payload, trimmed, id FROM chunked_poll('c', 0);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT map, seq, payload, trimmed, id FROM chunked_poll('c', 10, 2, 2);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT map, seq, payload, trimmed, id FROM chunked_poll('c', 10, -1, 2);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT map, seq, payload, trimmed, id FROM chunked_poll('c', 10, 0, 0);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT map, seq, payload, trimmed, id FROM chunked_poll('c', 10, 0, 1025);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT map, seq, payload, trimmed, id FROM chunked_poll('nobody');
\echo SQLSTATE :LAST_ERROR_SQLSTATE

-- a role without grants can do nothing of it, nor learn which consumers exist
CREATE ROLE chunked_map_regress_nobody;
SET ROLE chunked_map_regress_nobody;
SELECT * FROM chunked_map.chunked_poll('c');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM chunked_map.consumers;
\echo SQLSTATE :LAST_ERROR_SQLSTATE
RESET ROLE;
DROP ROLE chunked_map_regress_nobody;

-- a transaction that appends to a map, subscribes a consumer of its category, then appends
-- again: the subscription made the map followed in that transaction, and the second append
-- records the map's move, so the record is delivered
SELECT chunked_start('late-1');
BEGIN;
SELECT chunked_register('late-1', '{"n": 1}');
SELECT chunked_subscribe('late', 'late', from_start => false);
SELECT chunked_register('late-1', '{"n": 2}');
COMMIT;
SELECT map, seq, payload, trimmed, id FROM chunked_poll('late');

-- a map dropped and started again: what the consumer read of the dropped map does not count
-- for the new one, in chunked_map.consumers too
SELECT chunked_register('late-1', '{"n": 3}');
SELECT map, seq, payload, trimmed, id FROM chunked_poll('late');
SELECT chunked_drop('late-1');
SELECT chunked_start('late-1');
SELECT chunked_register('late-1', '{"n": "new"}');
SELECT consumer, maps_behind, records_behind FROM chunked_map.consumers WHERE consumer = 'late';
SELECT map, seq, payload, trimmed, id FROM chunked_poll('late');
