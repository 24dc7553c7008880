//! The message store's SQL functions that are C functions of this library, declared by the
//! store's own script (`sql/message_store/chunked_map_message_store--*.sql`, `MODULE_PATHNAME`
//! being this library there too). Thin, as `crate::api`'s: arguments in, one call, result out.

use pgrx::pg_sys;

use super::{payload, write, write_checked, Message, MessageId, Unchecked};
use crate::error::OrRaise;
use crate::input::{self, required, MapName};
use crate::sql_function;

// message-db's write_message. The write of a message with no expected version, by a transaction
// that may write, with every value message-db's table requires, is this library's alone (the id
// read as a uuid first, as message-db casts it before its insert); every other call is the
// checked write's (`message_store.write_message_checked`), which compares the expected version,
// then refuses as message-db does, in message-db's order, and writes as this does.
sql_function!(
    pg_finfo_message_store_write_message_wrapper,
    message_store_write_message_wrapper,
    |call| {
        let (id, stream, message_type) = (call.varchar(0), call.varchar(1), call.varchar(2));
        let (data, metadata, expected_version) = (call.jsonb(3), call.jsonb(4), call.int8(5));
        let position = match (id, stream, message_type, expected_version) {
            (Some(id), Some(stream), Some(message_type), None) if !read_only() => {
                let id = MessageId::parse(id);
                let stream = MapName::parse(Some(stream)).or_raise();
                let message = Message {
                    id,
                    stream,
                    message_type,
                    data,
                    metadata,
                };
                write(call.memory(), &message, None)
            }
            _ => write_checked(&Unchecked {
                id,
                stream,
                message_type,
                data,
                metadata,
                expected_version,
            }),
        };
        call.returns_bigint(position)
    }
);

// The write of a message whose values were checked (by message_store.write_message_checked and
// message_store.import_message): appended and indexed; its position. `time`: the record's time
// (a message moved over from message-db keeps its own), NULL for the transaction's start.
sql_function!(
    pg_finfo_message_store_append_message_wrapper,
    message_store_append_message_wrapper,
    |call| {
        call.writes(c"message_store.append_message()");
        let id = MessageId::parse(required(call.text(0), "id").or_raise());
        let stream = MapName::parse(call.varchar(1)).or_raise();
        let message_type = required(call.varchar(2), "type").or_raise();
        let at = input::record_time(call.timestamptz(5)).or_raise();
        let message = Message {
            id,
            stream,
            message_type,
            data: call.jsonb(3),
            metadata: call.jsonb(4),
        };
        call.returns_bigint(write(call.memory(), &message, at))
    }
);

// A message's record payload (see `payload`): what write_message appends, for a reader who wants
// to see it, or a benchmark to append it alone.
sql_function!(
    pg_finfo_message_store_message_payload_wrapper,
    message_store_message_payload_wrapper,
    |call| {
        call.returns_jsonb(payload(
            call.memory(),
            call.varchar(0),
            call.jsonb(1),
            call.jsonb(2),
        ))
    }
);

/// Whether this transaction is read-only (also on a standby, where every transaction is).
fn read_only() -> bool {
    // SAFETY: a plain bool of this backend (one thread), set when the transaction started and
    // changed only by SET TRANSACTION, never while a function runs.
    unsafe { pg_sys::XactReadOnly }
}
