-- In a database whose encoding is not UTF8, CREATE EXTENSION refuses with a
-- clear error (map names, tokens and messages are UTF-8 in the library) instead of installing
-- and then failing on every non-ASCII name.
\set VERBOSITY default
-- (no CONTEXT: PostgreSQL 18 adds the extension script's file name and line to it, which is not
-- what this file tests)
\set SHOW_CONTEXT never
\set regress_db :DBNAME
CREATE DATABASE chunked_map_latin1 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0;
\c chunked_map_latin1
SELECT getdatabaseencoding();
CREATE EXTENSION chunked_map;
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT count(*) AS installed FROM pg_extension WHERE extname = 'chunked_map';
SELECT count(*) AS schemas FROM pg_namespace WHERE nspname = 'chunked_map';
\c :regress_db
DROP DATABASE chunked_map_latin1;
