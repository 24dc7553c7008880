-- Access goes through the functions only: nobody but the owner may call them until granted
-- (README: the reader and writer recipes), and the tables are granted to nobody.
REVOKE ALL ON ALL TABLES IN SCHEMA chunked_map FROM PUBLIC;
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA chunked_map FROM PUBLIC;
