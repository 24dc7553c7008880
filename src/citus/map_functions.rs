//! The functions whose first argument is the map: distributed by it (`distribute`), and the
//! calls the NULL-map guard looks at (`null_map_guard`). A function of that kind is added here
//! (and to `sql/api.sql` and the grant recipes of docs/security.md).

/// Every function whose first argument is the map.
pub const MAP_FUNCTIONS: [&str; 20] = [
    "chunked_map.chunked_start(text, integer)",
    "chunked_map.chunked_register(text, jsonb)",
    "chunked_map.chunked_register(text, jsonb, bigint)",
    "chunked_map.chunked_register_many(text, jsonb[])",
    "chunked_map.chunked_register_once(text, jsonb, text, bigint)",
    "chunked_map.chunked_register_many_once(text, jsonb[], text[])",
    "chunked_map.chunked_register_with_id(text, jsonb, text, timestamptz)",
    "chunked_map.chunked_page(text, text)",
    "chunked_map.chunked_records(text, text)",
    "chunked_map.chunked_read(text, bigint, integer)",
    "chunked_map.chunked_get(text, bigint)",
    "chunked_map.chunked_get_by_id(text, text)",
    "chunked_map.chunked_info(text)",
    "chunked_map.chunked_set_chunk_size(text, integer)",
    "chunked_map.chunked_set_notify(text, boolean)",
    "chunked_map.chunked_verify(text)",
    "chunked_map.chunked_drop(text)",
    "chunked_map.chunked_trim(text, bigint)",
    "chunked_map.chunked_set_retention(text, bigint, interval)",
    "chunked_map.chunked_set_id_window(text, bigint)",
];
