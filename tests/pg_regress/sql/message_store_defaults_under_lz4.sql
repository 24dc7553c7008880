-- write_message's argument defaults are stored as they are also where the store is created
-- with default_toast_compression = lz4, which compresses the function's source less than pglz:
-- the catalog row must still fit in 2 kB with the defaults uncompressed, or every call that
-- leaves arguments out decompresses them (message_store.sql checks the same under pglz). A
-- server built without lz4 refuses the setting (message_store_defaults_under_lz4_1.out): the
-- store is then made with pglz, and the same is checked of it.
\i setup.psql
SET default_toast_compression = lz4;
CREATE EXTENSION chunked_map_message_store;
SELECT pg_catalog.pg_column_compression(p.prosrc) AS source_compression,
       pg_catalog.pg_column_compression(p.proargdefaults) IS NOT NULL AS defaults_compressed
FROM pg_catalog.pg_proc AS p
WHERE p.oid = 'message_store.write_message(varchar, varchar, varchar, jsonb, jsonb, bigint)'::pg_catalog.regprocedure;
RESET default_toast_compression;
DROP EXTENSION chunked_map_message_store;
