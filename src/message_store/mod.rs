//! (0.5) The message store's write (`chunked_map_message_store`, docs/message-db.md): a message
//! appended to its stream and indexed, in one call of this library, with no PL/pgSQL and no `SET`
//! clause on the way (what the PL/pgSQL write cost beyond its append and index row: its own
//! statements and its settings, docs/message-db.md, "What it costs"). The index row is written
//! through the table's and its indexes' access methods where it can be, by a statement otherwise.
//!
//! - `api`: the store's SQL functions that are C functions of this library;
//! - `index_row`: a message's row of `message_index`, directly or by its statement;
//! - `statements`: the store's SQL statements, which name its tables (not `statements`, whose
//!   statements are prepared in every database, with or without the store).
//!
//! A message is a record of its stream, appended with its id kept (`append::RecordId::Kept`), its
//! payload `{"type", "data", "metadata"}` ([`payload`]); then its row of `message_index`, with its
//! order key (`order`), taken after the append. The stream's writers wait for each other as long
//! as the stream's lock is held, as message-db's writers of a category do.

pub mod api;
mod index_row;
pub(crate) mod statements;

use pgrx::pg_sys;

use crate::append::{self, RecordId};
use crate::guc;
use crate::input::MapName;
use crate::jsonb::{Jsonb, Member};
use crate::order;
use crate::pg::boundary::{catching, OrRethrow};
use crate::pg::fmgr::CallerMemory;
use crate::pg::raw;

/// One message to write, its values checked: every value message-db's table requires is there,
/// its id in the canonical form of a uuid ([`MessageId`]).
pub struct Message<'a, 'fcx> {
    pub id: MessageId,
    pub stream: MapName<'a>,
    pub message_type: &'a str,
    pub data: Option<Jsonb<'fcx>>,
    pub metadata: Option<Jsonb<'fcx>>,
}

/// A message's id: a uuid, written as PostgreSQL writes one (`uuid_out`: lower case, with
/// hyphens), whatever form it was given in; and the uuid itself, a datum in the memory that was
/// current when it was read (the call's).
pub struct MessageId {
    canonical: String,
    uuid: pg_sys::Datum,
}

impl MessageId {
    /// `text` read as a uuid, as message-db's insert casts it: PostgreSQL's own `uuid_in`, and
    /// its error (22P02) for what is not one.
    pub fn parse(text: &str) -> MessageId {
        let text = std::ffi::CString::new(text).unwrap_or_else(|_| {
            crate::pg::boundary::internal("a text argument with a NUL byte".to_owned())
        });
        let text = text.as_ptr();
        // SAFETY: uuid_in reads a NUL-terminated string and returns a new uuid in the current
        // memory context, which uuid_out reads and writes out as a new NUL-terminated string;
        // both are freed with the call's memory. uuid_in raises 22P02 for what is not a uuid,
        // caught and rethrown whole.
        let (uuid, canonical) = unsafe {
            catching(|| {
                let uuid = raw::DirectFunctionCall1Coll(
                    Some(raw::uuid_in),
                    pg_sys::InvalidOid,
                    pg_sys::Datum::from(text),
                );
                let canonical =
                    raw::DirectFunctionCall1Coll(Some(raw::uuid_out), pg_sys::InvalidOid, uuid);
                (uuid, canonical)
            })
        }
        .or_rethrow();
        // SAFETY: uuid_out's result, a NUL-terminated ASCII string.
        let canonical = unsafe { std::ffi::CStr::from_ptr(canonical.cast_mut_ptr()) };
        MessageId {
            canonical: canonical.to_string_lossy().into_owned(),
            uuid,
        }
    }

    pub fn as_str(&self) -> &str {
        &self.canonical
    }
}

/// A message's record payload: `{"type", "data", "metadata"}`, a key left out where the value is
/// SQL NULL (`type` is JSON null where it is NULL). The one place of the rule: `write` and the
/// SQL function `message_store.message_payload` both make it here. In the caller's memory.
pub fn payload<'fcx>(
    memory: CallerMemory<'fcx>,
    message_type: Option<&str>,
    data: Option<Jsonb<'_>>,
    metadata: Option<Jsonb<'_>>,
) -> Jsonb<'fcx> {
    let message_type = message_type.map_or(Member::Null, Member::String);
    let members: Vec<(&str, Member<'_, '_>)> = [
        Some(("type", message_type)),
        data.map(|data| ("data", Member::Value(data))),
        metadata.map(|metadata| ("metadata", Member::Value(metadata))),
    ]
    .into_iter()
    .flatten()
    .collect();
    memory.jsonb_object(&members)
}

/// Writes `message`: appended to its stream (started by it where it does not exist), then its
/// index row; its position in the stream. `at`: the record's time where the writer knows it (a
/// message moved over from message-db), `None` for the transaction's start.
pub fn write(memory: CallerMemory<'_>, message: &Message<'_, '_>, at: Option<i64>) -> i64 {
    let payload = payload(
        memory,
        Some(message.message_type),
        message.data,
        message.metadata,
    );
    let id = message.id.as_str();
    let appended = guc::waiting_as_long_as_held(|| {
        append::append(message.stream, payload, None, Some(RecordId::Kept(id)), at)
    });
    let position = appended.seq - 1;
    let key = order::order_key();
    let correlation_category = correlation_category(message.metadata);
    index_row::write(index_row::IndexRow {
        stream: message.stream.as_str(),
        position,
        message_type: message.message_type,
        correlation_category: correlation_category.as_deref(),
        id: message.id.as_str(),
        uuid: message.id.uuid,
        key,
        record: appended.record,
    });
    position
}

/// The category of the stream a message's metadata says it correlates with (what
/// `get_category_messages`' `correlation` filters on): its `correlationStreamName` as `->>`
/// reads it (PostgreSQL's own `jsonb_object_field_text`: NULL where the metadata is not an
/// object, has no such key or has JSON null there), to its first `-` (message-db's category,
/// `split_part(name, '-', 1)`: the whole name where it has none).
pub fn correlation_category(metadata: Option<Jsonb<'_>>) -> Option<String> {
    let metadata = metadata?;
    // SAFETY: jsonb_object_field_text reads a jsonb and a text datum, both valid for the call,
    // and returns a new text in the current memory context, or NULL.
    let name: Option<String> = unsafe {
        pgrx::fcinfo::direct_function_call(
            pg_sys::jsonb_object_field_text,
            &[
                Some(metadata.datum()),
                pgrx::IntoDatum::into_datum("correlationStreamName"),
            ],
        )
    };
    name.map(|name| match name.split_once('-') {
        Some((category, _)) => category.to_owned(),
        None => name,
    })
}

/// A `write_message` call's arguments as they came, for the checked write.
pub struct Unchecked<'a, 'fcx> {
    pub id: Option<&'a str>,
    pub stream: Option<&'a str>,
    pub message_type: Option<&'a str>,
    pub data: Option<Jsonb<'fcx>>,
    pub metadata: Option<Jsonb<'fcx>>,
    pub expected_version: Option<i64>,
}

/// message-db's checked write (`message_store.write_message_checked`, PL/pgSQL), for every call
/// of `write_message` the library does not write itself: the expected version compared, then
/// the refusals, in message-db's order, then the write ([`write`], through
/// `message_store.append_message`). Its waits for a stream's lock or its start last as long as
/// they are held, as the write's do (the checked write sets nothing itself).
pub fn write_checked(call: &Unchecked<'_, '_>) -> i64 {
    guc::waiting_as_long_as_held(|| statements::write_checked(call))
}
