//! The message store's statements: they name its tables (schema `message_store`), so they are
//! prepared only where the store is installed, by its functions' first calls (not in the list of
//! `statement_list`, which a database without the store prepares whole).

use super::index_row::IndexRow;
use super::Unchecked;
use crate::pg::spi::{Int8, JsonbValue, NotNull, Text, Tid};
use crate::statements;

statements! {
    /// A message's row of `message_index` ([`super::index_row`], which computes every value):
    /// stream `$1`, position `$2`, type `$3`, correlation category `$4`, id `$5`, order key `$6`,
    /// its record's address `$7` (NULL where the append went by SQL), and the next of the
    /// sequence `write_order`.
    pub INDEX_MESSAGE: Statement<(Text, Int8, Text, Text, Text, Int8, Tid), ()> = write(
        "INSERT INTO message_store.message_index
             (stream_name, position, type, correlation_category, id, writer, write_order, record)
         VALUES ($1, $2, $3, $4, $5::uuid, $6::text::xid8,
                 pg_catalog.nextval('message_store.write_order'), $7)"
    );

    /// message-db's checked write (`message_store.write_message_checked`, PL/pgSQL): the
    /// expected version, then the refusals, in message-db's order; it writes through
    /// `message_store.append_message`, that is [`super::write`].
    pub WRITE_CHECKED: Statement<(Text, Text, Text, JsonbValue, JsonbValue, Int8), (NotNull<Int8>,)> = write(
        "SELECT message_store.write_message_checked($1, $2, $3, $4, $5, $6)"
    );
}

/// [`INDEX_MESSAGE`].
pub fn index_message(row: IndexRow<'_>) {
    statements::connect(|session| {
        session.run(
            &INDEX_MESSAGE,
            (
                row.stream,
                row.position,
                row.message_type,
                row.correlation_category,
                row.id,
                row.key,
                row.record,
            ),
        );
    });
}

/// [`WRITE_CHECKED`]: the position written at.
pub fn write_checked(call: &Unchecked<'_, '_>) -> i64 {
    statements::connect(|session| {
        let arguments = (
            call.id,
            call.stream,
            call.message_type,
            call.data,
            call.metadata,
            call.expected_version,
        );
        match session.run(&WRITE_CHECKED, arguments).first() {
            Some((position,)) => position,
            None => crate::pg::boundary::internal(
                "message_store.write_message_checked returned no row".to_owned(),
            ),
        }
    })
}
