//! The SQL functions. Thin: they check their arguments and call the write or read path.
//!
//! Each is declared twice, on purpose and side by side with the other declarations of its kind:
//! here, the C function (its symbol, `<name>_wrapper`, is what `sql/api.sql` names), and in
//! `sql/api.sql`, the SQL definition (argument names and defaults, volatility, parallel safety,
//! `SECURITY DEFINER`; the statements they run set their own `search_path`, see
//! `statements::connect`). None is STRICT: a NULL argument raises 22004
//! instead of quietly returning NULL. Callers are granted EXECUTE on functions, never
//! privileges on the storage tables.

use crate::append::{self, RecordId};
use crate::error::OrRaise;
use crate::feed;
use crate::input::{self, required, ConsumerName, MapName};
use crate::order;
use crate::read;
use crate::retention;
use crate::sql_function;
use crate::statements::reads::Record;

// Starts a map; `false` (and no change) when it already exists.
sql_function!(
    pg_finfo_chunked_start_wrapper,
    chunked_start_wrapper,
    |call| {
        call.writes(c"chunked_start()");
        let map = MapName::parse(call.text(0)).or_raise();
        let chunk_size = input::chunk_size(call.int4(1)).or_raise();
        call.returns_boolean(append::start(map, chunk_size))
    }
);

// Appends one record; returns its sequence number.
sql_function!(
    pg_finfo_chunked_register_wrapper,
    chunked_register_wrapper,
    |call| {
        call.writes(c"chunked_register()");
        let map = MapName::parse(call.text(0)).or_raise();
        let payload = required(call.jsonb(1), "payload").or_raise();
        call.returns_bigint(append::append(map, payload, None, None, None).seq)
    }
);

// Appends one record only if the map's newest sequence is `expected_last_seq` (0 for an empty
// map); otherwise 23000 naming both, which retrying cannot change.
sql_function!(
    pg_finfo_chunked_register_if_last_wrapper,
    chunked_register_if_last_wrapper,
    |call| {
        call.writes(c"chunked_register()");
        let map = MapName::parse(call.text(0)).or_raise();
        let payload = required(call.jsonb(1), "payload").or_raise();
        let expected = required(call.int8(2), "expected_last_seq").or_raise();
        call.returns_bigint(append::append(map, payload, Some(expected), None, None).seq)
    }
);

// (0.5) Appends one record with an id: while the map remembers the id, appends nothing and
// returns the sequence it was appended as; one row `(seq, duplicate)`. With
// `expected_last_seq` (NULL: none), only if the map's newest sequence is that.
sql_function!(
    pg_finfo_chunked_register_once_wrapper,
    chunked_register_once_wrapper,
    |call| {
        call.writes(c"chunked_register_once()");
        let map = MapName::parse(call.text(0)).or_raise();
        let payload = required(call.jsonb(1), "payload").or_raise();
        let id = input::record_id(required(call.text(2), "id").or_raise()).or_raise();
        let registered = append::append(map, payload, call.int8(3), Some(RecordId::Once(id)), None);
        call.returns_rows(std::iter::once(registered_row(registered)))
    }
);

// (0.5) Appends one record carrying an id the map does not remember (no lookup, nothing kept
// but the record's own id): its caller keeps ids unique — the message store, whose index of
// message ids does. Owner-only: `chunked_register_once` does not find these ids. A map that
// does not exist is started (chunks of 100), as a stream is by its first message. `at`: the
// record's time, where its writer knows it (a message moved over from message-db keeps its
// own); NULL: the transaction's start, as every append. One row
// `(seq, record)`: the record's address in `current_record` when it was written directly (NULL
// when by SQL), which its reader may use to find it again without the index (checking it).
sql_function!(
    pg_finfo_chunked_register_with_id_wrapper,
    chunked_register_with_id_wrapper,
    |call| {
        call.writes(c"chunked_register_with_id()");
        let map = MapName::parse(call.text(0)).or_raise();
        let payload = required(call.jsonb(1), "payload").or_raise();
        let id = input::record_id(required(call.text(2), "id").or_raise()).or_raise();
        let at = input::record_time(call.timestamptz(3)).or_raise();
        let registered = append::append(map, payload, None, Some(RecordId::Kept(id)), at);
        let record = registered.record.map(|tid| call.memory().tid(tid));
        call.returns_row([Some(pgrx::pg_sys::Datum::from(registered.seq)), record])
    }
);

// Appends every payload in order, under one lock; returns their (contiguous) sequences.
sql_function!(
    pg_finfo_chunked_register_many_wrapper,
    chunked_register_many_wrapper,
    |call| {
        call.writes(c"chunked_register_many()");
        let map = MapName::parse(call.text(0)).or_raise();
        let payloads = required(call.jsonb_array(1), "payloads").or_raise();
        let registered = append::append_many(map, payloads);
        call.returns_values(
            pgrx::pg_sys::INT8OID,
            registered
                .into_iter()
                .map(|registered| pgrx::pg_sys::Datum::from(registered.seq)),
        )
    }
);

// (0.5) Appends every payload with its id (NULL: none), in order, under one lock; a payload
// whose id the map remembers, or an earlier payload of the batch has, appends nothing. Rows
// `(seq, duplicate)`, one per payload.
sql_function!(
    pg_finfo_chunked_register_many_once_wrapper,
    chunked_register_many_once_wrapper,
    |call| {
        call.writes(c"chunked_register_many_once()");
        let map = MapName::parse(call.text(0)).or_raise();
        let payloads = required(call.jsonb_array(1), "payloads").or_raise();
        let ids = required(call.text_array(2), "ids").or_raise();
        let ids = input::record_ids(&ids).or_raise();
        let registered = append::append_many_once(map, payloads, &ids);
        call.returns_rows(registered.into_iter().map(registered_row))
    }
);

// One page of a map, newest record first, with the token of the next older page.
sql_function!(
    pg_finfo_chunked_page_wrapper,
    chunked_page_wrapper,
    |call| {
        let map = MapName::parse(call.text(0)).or_raise();
        let token = required(call.text(1), "page_token").or_raise();
        call.returns_jsonb(read::page(call.memory(), map, token))
    }
);

// The same page as rows `(seq, payload, at, id)`, newest first.
sql_function!(
    pg_finfo_chunked_records_wrapper,
    chunked_records_wrapper,
    |call| {
        let map = MapName::parse(call.text(0)).or_raise();
        let token = required(call.text(1), "page_token").or_raise();
        let records = read::page_records(call.memory(), map, token);
        call.returns_rows_with_nulls(records.into_iter().map(record_row))
    }
);

// Records with a sequence above `after_seq`, oldest first, at most `max_records`.
sql_function!(
    pg_finfo_chunked_read_wrapper,
    chunked_read_wrapper,
    |call| {
        let map = MapName::parse(call.text(0)).or_raise();
        let after_seq = input::after_seq(call.int8(1)).or_raise();
        let max_records = input::max_records(call.int4(2)).or_raise();
        let records = read::forward(call.memory(), map, after_seq, max_records);
        call.returns_rows_with_nulls(records.into_iter().map(record_row))
    }
);

// One record, `{"at": ..., "id": ..., "seq": n, "payload": ...}`, by its sequence number.
sql_function!(pg_finfo_chunked_get_wrapper, chunked_get_wrapper, |call| {
    let map = MapName::parse(call.text(0)).or_raise();
    let seq = required(call.int8(1), "seq").or_raise();
    call.returns_jsonb(read::get(call.memory(), map, seq))
});

// (0.5) One record by its id, while the map remembers it.
sql_function!(
    pg_finfo_chunked_get_by_id_wrapper,
    chunked_get_by_id_wrapper,
    |call| {
        let map = MapName::parse(call.text(0)).or_raise();
        let id = input::record_id(required(call.text(1), "id").or_raise()).or_raise();
        call.returns_jsonb(read::get_by_id(call.memory(), map, id))
    }
);

// The map's summary, from its state row alone.
sql_function!(
    pg_finfo_chunked_info_wrapper,
    chunked_info_wrapper,
    |call| {
        let map = MapName::parse(call.text(0)).or_raise();
        call.returns_jsonb(read::info(call.memory(), map))
    }
);

// Changes the size of chunks started after the call.
sql_function!(
    pg_finfo_chunked_set_chunk_size_wrapper,
    chunked_set_chunk_size_wrapper,
    |call| {
        call.writes(c"chunked_set_chunk_size()");
        let map = MapName::parse(call.text(0)).or_raise();
        let chunk_size = input::chunk_size(call.int4(1)).or_raise();
        append::set_chunk_size(map, chunk_size);
        call.returns_void()
    }
);

// While enabled, every committed transaction that appended to the map sends one notification
// on the map's own channel.
sql_function!(
    pg_finfo_chunked_set_notify_wrapper,
    chunked_set_notify_wrapper,
    |call| {
        call.writes(c"chunked_set_notify()");
        let map = MapName::parse(call.text(0)).or_raise();
        let enabled = required(call.boolean(1), "enabled").or_raise();
        append::set_notify(map, enabled);
        call.returns_void()
    }
);

// Removes a whole map, its history included; `false` when there was no such map.
sql_function!(
    pg_finfo_chunked_drop_wrapper,
    chunked_drop_wrapper,
    |call| {
        call.writes(c"chunked_drop()");
        let map = MapName::parse(call.text(0)).or_raise();
        call.returns_boolean(append::drop_map(map))
    }
);

// (0.4) Removes the archived chunks all of whose records are below `before_seq`; returns how
// many records went.
sql_function!(
    pg_finfo_chunked_trim_wrapper,
    chunked_trim_wrapper,
    |call| {
        call.writes(c"chunked_trim()");
        let map = MapName::parse(call.text(0)).or_raise();
        let before_seq = required(call.int8(1), "before_seq").or_raise();
        call.returns_bigint(retention::trim(map, before_seq))
    }
);

// (0.4) Sets the map's retention policy; NULL limits are no limit.
sql_function!(
    pg_finfo_chunked_set_retention_wrapper,
    chunked_set_retention_wrapper,
    |call| {
        call.writes(c"chunked_set_retention()");
        let map = MapName::parse(call.text(0)).or_raise();
        retention::set_retention(map, call.int8(1), call.interval(2));
        call.returns_void()
    }
);

// (0.5) Sets how many of its newest records' ids the map remembers (NULL: all it keeps).
sql_function!(
    pg_finfo_chunked_set_id_window_wrapper,
    chunked_set_id_window_wrapper,
    |call| {
        call.writes(c"chunked_set_id_window()");
        let map = MapName::parse(call.text(0)).or_raise();
        let window = input::id_window(call.int8(1)).or_raise();
        append::set_id_window(map, window);
        call.returns_void()
    }
);

// (0.4) Applies the retention policy of one map, or of every map that has one (NULL).
sql_function!(
    pg_finfo_chunked_apply_retention_wrapper,
    chunked_apply_retention_wrapper,
    |call| {
        call.writes(c"chunked_apply_retention()");
        let map = call.text(0).map(|map| MapName::parse(Some(map)).or_raise());
        call.returns_bigint(retention::apply(map))
    }
);

// (0.4) Creates a consumer of the feed that follows every map of `category` (NULL: every map),
// maps started later included; `false` when it exists.
sql_function!(
    pg_finfo_chunked_subscribe_wrapper,
    chunked_subscribe_wrapper,
    |call| {
        call.writes(c"chunked_subscribe()");
        let consumer = ConsumerName::parse(call.text(0)).or_raise();
        let from_start = required(call.boolean(2), "from_start").or_raise();
        call.returns_boolean(feed::subscribe(consumer, call.text(1), from_start))
    }
);

// (0.4) Removes a consumer and its positions; `false` when there was none.
sql_function!(
    pg_finfo_chunked_unsubscribe_wrapper,
    chunked_unsubscribe_wrapper,
    |call| {
        call.writes(c"chunked_unsubscribe()");
        let consumer = ConsumerName::parse(call.text(0)).or_raise();
        call.returns_boolean(feed::unsubscribe(consumer))
    }
);

// (0.4) The next records the consumer (its member `member` of `group_size`) has not had, rows
// `(map, seq, payload, trimmed, at, id)` (0.5: with the record's time and id); acknowledged by the caller's commit. A row with `trimmed`
// true (and a NULL payload): records up to `seq` were trimmed before the consumer had them.
sql_function!(
    pg_finfo_chunked_poll_wrapper,
    chunked_poll_wrapper,
    |call| {
        call.writes(c"chunked_poll()");
        let consumer = ConsumerName::parse(call.text(0)).or_raise();
        let max_records = input::max_records(call.int4(1)).or_raise();
        let group = input::group(call.int4(2), call.int4(3)).or_raise();
        let delivered = feed::poll(call.memory(), consumer, max_records, group);
        call.returns_rows_with_nulls(delivered.into_iter().map(|row| {
            let trimmed = row.payload.is_none();
            [
                pgrx::IntoDatum::into_datum(row.map.as_str()),
                Some(pgrx::pg_sys::Datum::from(row.seq)),
                row.payload.map(|payload| payload.datum()),
                Some(pgrx::pg_sys::Datum::from(trimmed)),
                row.at.map(pgrx::pg_sys::Datum::from),
                row.id
                    .and_then(|id| pgrx::IntoDatum::into_datum(id.as_str())),
            ]
        }))
    }
);

// Checks a map's storage and reports what it finds.
sql_function!(
    pg_finfo_chunked_verify_wrapper,
    chunked_verify_wrapper,
    |call| {
        let map = MapName::parse(call.text(0)).or_raise();
        call.returns_json(&crate::verify::verify(map))
    }
);

// On a Citus coordinator: distributes the storage tables and the map functions by map.
sql_function!(
    pg_finfo_chunked_distribute_wrapper,
    chunked_distribute_wrapper,
    |call| {
        call.writes(c"chunked_distribute()");
        let distributed = crate::citus::distribute::distribute();
        pgrx::notice!(
            "chunked_map: distributed {} tables and {} functions now (the others were already)",
            distributed.tables,
            distributed.functions
        );
        call.returns_void()
    }
);

// (0.5) The transaction id PostgreSQL assigns next, read now from the shared counter rather than
// from a snapshot: where the message store's numbering looks from (`chunked_map_message_store`,
// docs/message-db.md).
sql_function!(
    pg_finfo_chunked_next_transaction_id_wrapper,
    chunked_next_transaction_id_wrapper,
    |call| call.returns_bigint(order::next_transaction_id())
);

// (0.5) The order key of a write to the message store: takes the database's writers' mark until
// the transaction ends, gives the transaction its id if it has none yet, then reads the id
// assigned next — in this order, which the numbering's proof rests on (docs/message-db.md).
sql_function!(
    pg_finfo_chunked_order_key_wrapper,
    chunked_order_key_wrapper,
    |call| {
        call.writes(c"chunked_order_key()");
        call.returns_bigint(order::order_key())
    }
);

// (0.5) Takes the database's numbering lock of the message store until the transaction ends;
// false, at once, when another transaction holds it.
sql_function!(
    pg_finfo_chunked_try_numbering_lock_wrapper,
    chunked_try_numbering_lock_wrapper,
    |call| call.returns_boolean(order::try_numbering_lock())
);

/// A record as a row `(seq, payload, at, id)`.
fn record_row(record: Record<'_>) -> [Option<pgrx::pg_sys::Datum>; 4] {
    [
        Some(pgrx::pg_sys::Datum::from(record.seq)),
        Some(record.payload.datum()),
        record.at.map(pgrx::pg_sys::Datum::from),
        record
            .id
            .and_then(|id| pgrx::IntoDatum::into_datum(id.as_str())),
    ]
}

/// An append's answer as a row `(seq, duplicate)`.
fn registered_row(registered: append::Registered) -> [pgrx::pg_sys::Datum; 2] {
    [
        pgrx::pg_sys::Datum::from(registered.seq),
        pgrx::pg_sys::Datum::from(registered.duplicate),
    ]
}
