-- A payload's size is the larger of its binary jsonb size and the length of its JSON text, and
-- the text's length is computed from the value without writing the text: for every kind of
-- value it is exactly what jsonb::text gives, and 9,000 numbers of 131,072 characters each
-- (2.6 KB stored, over a gigabyte of text) are refused at once with 54000, not after rendering
-- a gigabyte.
\i setup.psql
SELECT chunked_start('m');
SET chunked_map.max_payload_bytes = 1;
CREATE TEMP TABLE corpus (v jsonb);
INSERT INTO corpus VALUES ('1e131071'), ('-1e-400'), ('0'), ('-0.0'), ('0.000'),
    ('123456789012345678901234567890'), ('-12.5'), ('1.50'), ('"a\"b\\c\n\t\u0001\u001f é ☕"'),
    ('{"a": [1, 2, {"b": null}], "c": {}, "d": []}'), ('[[], {}, [[]], "x", true, false, null]'),
    ('{}'), ('[]'), ('true'), ('false'), ('null'), ('""'), ('{"k": "v", "k2": {"n": [1e10, 2.000001, -3]}}'),
    ('[1e131071, 2]'), (('"' || repeat('x', 1000) || '"')::jsonb),
    (jsonb_build_object('e', chr(1) || chr(31) || '"', 'u', '☕', '"quoted key"', 1));
INSERT INTO corpus SELECT jsonb_agg(i * 1.5) FROM generate_series(1, 1000) AS i;
INSERT INTO corpus SELECT ('9' || repeat('0', i % 50) || '.1' || repeat('0', i % 7))::jsonb FROM generate_series(1, 200) AS i;
INSERT INTO corpus SELECT ('-0.' || repeat('0', i) || '1')::jsonb FROM generate_series(1, 40) AS i;
INSERT INTO corpus SELECT (i::numeric * 10 ^ (i % 20) - 10 ^ (i % 9))::text::jsonb FROM generate_series(1, 100) AS i;
-- containers wide enough that every 32nd JEntry holds an end offset instead of a length: an
-- object of 100 keys, arrays of 100 arrays and of 10,000 empty arrays
INSERT INTO corpus SELECT jsonb_object_agg('k' || i, repeat(chr(1), i % 3)) FROM generate_series(1, 100) AS i;
INSERT INTO corpus SELECT jsonb_agg(jsonb_build_array('x' || i, i % 2 = 0, NULL)) FROM generate_series(1, 100) AS i;
INSERT INTO corpus SELECT jsonb_agg('[]'::jsonb) FROM generate_series(1, 10000) AS i;
-- the size each refusal names, against the text PostgreSQL writes (and the binary size of the
-- value as built, uncompressed)
-- (`append`: a statement appending to m, given `v` as $1)
CREATE FUNCTION pg_temp.refused_size_of(append text, v jsonb) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    message text;
BEGIN
    EXECUTE append USING v;
    RETURN NULL;
EXCEPTION WHEN program_limit_exceeded THEN
    GET STACKED DIAGNOSTICS message = MESSAGE_TEXT;
    RETURN substring(message FROM 'payload of (\d+) bytes')::bigint;
END
$$;
CREATE FUNCTION pg_temp.refused_size(v jsonb) RETURNS bigint LANGUAGE sql
    RETURN pg_temp.refused_size_of('SELECT chunked_register(''m'', $1)', v);
SELECT count(*) AS values,
       count(*) FILTER (WHERE pg_temp.refused_size(v)
                              = greatest(octet_length(v::text), pg_column_size(v::text::jsonb) - 4)) AS sized_exactly
FROM corpus;
-- the same values as an array item and as an object's value, beside a string of control
-- characters long enough that the text (6 bytes each) outweighs the binary size (1 byte each):
-- the size named is then the text's length alone, so a text measure one byte off for any kind
-- of value shows here even where the binary size hid it above
SELECT count(*) AS values,
       count(*) FILTER (WHERE pg_temp.refused_size(in_array) = octet_length(in_array::text)) AS array_item_text_exact,
       count(*) FILTER (WHERE pg_temp.refused_size(in_object) = octet_length(in_object::text)) AS object_value_text_exact
FROM (SELECT jsonb_build_array(v, padding) AS in_array,
             jsonb_build_object('key "' || chr(2) || '"', v, 'padding', padding) AS in_object
      FROM (SELECT v, repeat(chr(1), pg_column_size(v::text::jsonb) + 100) AS padding FROM corpus) AS c) AS wrapped;
-- a payload passed as stored, compressed or out of line, is measured as the same value in memory
CREATE TEMP TABLE stored_compressed (v jsonb);
CREATE TEMP TABLE stored_out_of_line (v jsonb);
ALTER TABLE stored_out_of_line ALTER v SET STORAGE EXTERNAL;
INSERT INTO stored_compressed SELECT jsonb_agg(repeat(chr(1), 50) || i) FROM generate_series(1, 2000) AS i;
INSERT INTO stored_out_of_line SELECT v::text::jsonb FROM stored_compressed;
-- (the value read from the table by the appending statement itself, as stored)
CREATE FUNCTION pg_temp.refused_size_as_stored(stored regclass) RETURNS bigint LANGUAGE sql
    RETURN pg_temp.refused_size_of(format('SELECT chunked_register(''m'', v) FROM %s', stored), NULL);
SELECT 'stored_compressed' AS stored, pg_column_compression(v) IS NOT NULL AS compressed,
       pg_temp.refused_size_as_stored('stored_compressed') = octet_length(v::text) AS text_exact
FROM stored_compressed
UNION ALL
SELECT 'stored_out_of_line', pg_column_compression(v) IS NOT NULL,
       pg_temp.refused_size_as_stored('stored_out_of_line') = octet_length(v::text)
FROM stored_out_of_line;
\set VERBOSITY default
SELECT chunked_register('m', (SELECT jsonb_agg('1e131071'::jsonb) FROM generate_series(1, 9000)));
\echo :LAST_ERROR_SQLSTATE
