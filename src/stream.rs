//! (0.5) Streams of the message store (`chunked_map_message_store`): maps every record of which
//! was appended by `chunked_register_with_id`, its id kept by its writer (the store's index of
//! message ids keeps them unique). A message's position in its stream is its record's sequence
//! less one, so a stream takes no other append, and a message goes to no map that holds other
//! records. A map becomes a stream with its first record, a message, in the same update of its
//! state row that appends it; one that ever held another record never does.
//!
//! The one rule, which both ways of writing apply: the direct write declines where it does not
//! admit the record (`direct_append`), and the append raises the refusal under the map's lock
//! (`append`).

use crate::error::ChunkedError;

/// What the rule says of one append to a map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// The map stays what it is.
    Admitted,
    /// The map's first record, a message: the map becomes a stream.
    MakesStream,
    /// A message to a map that holds (or held) other records.
    HoldsOtherRecords,
    /// Another append to a stream.
    IsStream,
}

/// The rule, for an append of a `message` (or another record) to a map that `is_stream` (or
/// not), whose next record would have sequence `next_seq` (1: it never held a record).
pub fn admission(is_stream: bool, next_seq: i64, message: bool) -> Admission {
    match (message, is_stream) {
        (true, true) | (false, false) => Admission::Admitted,
        (true, false) if next_seq == 1 => Admission::MakesStream,
        (true, false) => Admission::HoldsOtherRecords,
        (false, true) => Admission::IsStream,
    }
}

impl Admission {
    /// Raises the refusal, if this is one; otherwise whether the append makes `map` a stream.
    pub fn or_raise(self, map: &str) -> bool {
        match self {
            Admission::Admitted => false,
            Admission::MakesStream => true,
            Admission::HoldsOtherRecords => ChunkedError::HoldsOtherRecords {
                map: map.to_owned(),
            }
            .raise(),
            Admission::IsStream => ChunkedError::IsStream {
                map: map.to_owned(),
            }
            .raise(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_makes_a_map_that_never_held_a_record_a_stream() {
        assert_eq!(admission(false, 1, true), Admission::MakesStream);
    }

    #[test]
    fn a_message_goes_to_a_stream_as_it_is() {
        assert_eq!(admission(true, 1, true), Admission::Admitted);
        assert_eq!(admission(true, 500, true), Admission::Admitted);
    }

    #[test]
    fn a_message_is_refused_by_a_map_that_held_other_records() {
        assert_eq!(admission(false, 2, true), Admission::HoldsOtherRecords);
    }

    #[test]
    fn another_record_is_refused_by_a_stream_even_an_empty_one() {
        assert_eq!(admission(true, 1, false), Admission::IsStream);
        assert_eq!(admission(true, 7, false), Admission::IsStream);
    }

    #[test]
    fn other_records_go_to_other_maps_as_they_are() {
        assert_eq!(admission(false, 1, false), Admission::Admitted);
        assert_eq!(admission(false, 9, false), Admission::Admitted);
    }
}
