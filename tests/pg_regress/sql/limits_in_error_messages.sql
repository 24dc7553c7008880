-- Limits as error messages show them (the waits behind them are isolation specs): a huge
-- malformed token is quoted cut in its error, and the payload limit counts the binary jsonb
-- size, which for arrays of small numbers is several times the JSON text.
\i setup.psql
\set VERBOSITY default
SELECT chunked_start('m');

-- a malformed token of 100,000 characters: the message quotes 40 and says how long it was
SELECT chunked_page('m', repeat('7', 100000));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT seq, payload, id FROM chunked_records('m', repeat('x', 41));
\echo SQLSTATE :LAST_ERROR_SQLSTATE

-- 1,000 small numbers: 3,000 characters of JSON text, four times as many bytes of jsonb
CREATE TEMP TABLE numbers AS
    SELECT jsonb_agg(1) AS p FROM generate_series(1, 1000);
SELECT length(p::text) AS text_length, pg_column_size(p::text::jsonb) - 4 AS jsonb_bytes FROM numbers;
SET chunked_map.max_payload_bytes = 4096;
-- under the limit as text, over it as jsonb: refused, with the jsonb size
SELECT chunked_register('m', p) FROM numbers;
\echo SQLSTATE :LAST_ERROR_SQLSTATE
RESET chunked_map.max_payload_bytes;
SELECT chunked_register('m', p) FROM numbers;
