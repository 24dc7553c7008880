-- A call's memory is freed when its result has been used. 20,000 page
-- reads (current and archived, as jsonb and as rows) and 20,000 forward reads in one
-- transaction leave the transaction's memory as it was; 20,000 appends in one transaction hold
-- only what PostgreSQL itself keeps for a row rewritten many times in one transaction (its
-- "combo command ids", about 100 bytes per append), under 4 MB in all.
\i setup.psql
SELECT chunked_start('mem', 100);
SELECT count(*) FROM chunked_register_many('mem',
    ARRAY(SELECT jsonb_build_object('i', i, 'pad', repeat('x', 100)) FROM generate_series(1, 10050) AS i));
-- TopTransactionContext and its children: by the parent's name up to PostgreSQL 17, by the
-- contexts' paths from 18 on (which has no parent column)
CREATE FUNCTION pg_temp.transaction_memory() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    bytes bigint;
BEGIN
    IF EXISTS (SELECT FROM pg_attribute
               WHERE attrelid = 'pg_catalog.pg_backend_memory_contexts'::regclass
                 AND attname = 'parent') THEN
        EXECUTE $q$SELECT sum(total_bytes)::bigint FROM pg_backend_memory_contexts
                   WHERE name = 'TopTransactionContext' OR parent = 'TopTransactionContext'$q$
        INTO bytes;
    ELSE
        EXECUTE $q$WITH top AS (SELECT level, path[level] AS id FROM pg_backend_memory_contexts
                                WHERE name = 'TopTransactionContext')
                   SELECT sum(c.total_bytes)::bigint FROM pg_backend_memory_contexts AS c, top
                   WHERE c.name = 'TopTransactionContext'
                      OR (c.level = top.level + 1 AND c.path[top.level] = top.id)$q$
        INTO bytes;
    END IF;
    RETURN bytes;
END
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

-- Errors PostgreSQL raises inside the extension's calls (here its 25006 in a read-only
-- transaction), caught in savepoints 20,000 times, leave no memory behind either: each copy is
-- freed with the savepoint it aborts.
CREATE FUNCTION pg_temp.growth_after_refused_appends(n integer) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    before bigint;
BEGIN
    FOR round IN 1..2 LOOP
        IF round = 2 THEN
            before := pg_temp.transaction_memory();
        END IF;
        FOR i IN 1..CASE WHEN round = 1 THEN 100 ELSE n END LOOP
            BEGIN
                PERFORM chunked_register('mem', '{}');
            EXCEPTION WHEN read_only_sql_transaction THEN
                NULL;
            END;
        END LOOP;
    END LOOP;
    RETURN pg_temp.transaction_memory() - before;
END
$$;
BEGIN READ ONLY;
SELECT pg_temp.growth_after_refused_appends(20000) < 65536 AS caught_errors_grew_under_64kb;
ROLLBACK;
