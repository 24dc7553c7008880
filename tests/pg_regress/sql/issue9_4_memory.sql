-- Issue 9, finding 4: a call's memory is freed when its result has been used. 20,000 page
-- reads (current and archived, as jsonb and as rows) and 20,000 forward reads in one
-- transaction leave the transaction's memory as it was; 20,000 appends in one transaction hold
-- only what PostgreSQL itself keeps for a row rewritten many times in one transaction (its
-- "combo command ids", about 100 bytes per append), under 4 MB in all.
\i setup.psql
SELECT chunked_start('mem', 100);
SELECT count(*) FROM chunked_register_many('mem',
    ARRAY(SELECT jsonb_build_object('i', i, 'pad', repeat('x', 100)) FROM generate_series(1, 10050) AS i));
CREATE FUNCTION pg_temp.transaction_memory() RETURNS bigint LANGUAGE sql AS $$
    SELECT sum(total_bytes)::bigint FROM pg_backend_memory_contexts
    WHERE name = 'TopTransactionContext' OR parent = 'TopTransactionContext'
$$;

BEGIN;
CREATE TEMP TABLE before_reads ON COMMIT DROP AS SELECT pg_temp.transaction_memory() AS bytes;
SELECT count(chunked_page('mem', CASE WHEN i % 10 = 0 THEN 'current' ELSE lpad((1 + (i % 100) * 100)::text, 20, '0') END))
FROM generate_series(1, 20000) AS i;
SELECT sum((SELECT count(*) FROM chunked_records('mem', lpad((1 + (i % 100) * 100)::text, 20, '0'))))
FROM generate_series(1, 2000) AS i;
SELECT sum((SELECT count(*) FROM chunked_read('mem', (i * 37) % 10000, 100)))
FROM generate_series(1, 2000) AS i;
SELECT count(chunked_info('mem')), count(chunked_get('mem', i)) FROM generate_series(1, 5000) AS i;
SELECT pg_temp.transaction_memory() - b.bytes < 16384 AS reads_grew_under_16kb
FROM before_reads AS b;
COMMIT;

BEGIN;
SELECT count(chunked_register('mem', '{"a": 1}')) FROM generate_series(1, 20000);
SELECT pg_temp.transaction_memory() < 4 * 1024 * 1024 AS appends_under_4mb;
COMMIT;
SELECT chunked_verify('mem') -> 'consistent' AS consistent;
