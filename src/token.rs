//! Page tokens: parsing what a caller sends and formatting what the extension stores.
//!
//! A token is `current`, or the first sequence number of an archived chunk written as exactly
//! [`TOKEN_DIGITS`] ASCII decimal digits, zero-padded. Validity never depends on a chunk size:
//! whether a well-formed token names a chunk is a question for the store, not for arithmetic.
//! Depends on nothing else of the extension (the cluster tests use it as it is).

/// Digits in an archived chunk's token.
pub const TOKEN_DIGITS: usize = 20;
/// The token of a map's current (mutable) chunk.
pub const CURRENT: &str = "current";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageToken {
    Current,
    /// An archived chunk whose first sequence is this value. `None` when the 20 digits are
    /// well-formed but exceed the largest sequence a map can hold (`i64::MAX`): such a token is
    /// valid in form and names no chunk.
    Archived(Option<i64>),
}

/// A token that is neither `current` nor [`TOKEN_DIGITS`] ASCII decimal digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed;

/// Longest part of a malformed token quoted back in its error.
const QUOTED_CHARS: usize = 40;

/// A malformed token as its error quotes it: a long one is cut, with its length said, so that
/// the error stays readable whatever the caller sent.
pub fn quoted(token: &str) -> String {
    let chars = token.chars().count();
    if chars <= QUOTED_CHARS {
        format!("\"{token}\"")
    } else {
        let start: String = token.chars().take(QUOTED_CHARS).collect();
        format!("\"{start}...\" ({chars} characters)")
    }
}

impl PageToken {
    pub fn parse(token: &str) -> Result<PageToken, Malformed> {
        if token == CURRENT {
            return Ok(PageToken::Current);
        }
        if token.len() != TOKEN_DIGITS || !token.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Malformed);
        }
        // 20 digits always fit in a u128; values above i64::MAX cannot be a sequence.
        let value: u128 = token
            .bytes()
            .fold(0, |acc, b| acc * 10 + u128::from(b - b'0'));
        Ok(PageToken::Archived(i64::try_from(value).ok()))
    }
}

/// The token of the archived chunk whose first sequence is `first_seq`.
pub fn archived_token(first_seq: i64) -> String {
    format!("{first_seq:0width$}", width = TOKEN_DIGITS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn current_is_a_token() {
        assert_eq!(PageToken::parse("current"), Ok(PageToken::Current));
    }

    #[test]
    fn twenty_digits_name_an_archived_chunk_by_its_first_sequence() {
        assert_eq!(
            PageToken::parse("00000000000000000001"),
            Ok(PageToken::Archived(Some(1)))
        );
        assert_eq!(
            PageToken::parse("00000000000000000101"),
            Ok(PageToken::Archived(Some(101)))
        );
        assert_eq!(
            PageToken::parse("00000000000000000000"),
            Ok(PageToken::Archived(Some(0)))
        );
        assert_eq!(
            PageToken::parse("09223372036854775807"),
            Ok(PageToken::Archived(Some(i64::MAX)))
        );
    }

    #[test]
    fn well_formed_tokens_beyond_the_largest_sequence_name_no_chunk() {
        assert_eq!(
            PageToken::parse("09223372036854775808"),
            Ok(PageToken::Archived(None))
        );
        assert_eq!(
            PageToken::parse("99999999999999999999"),
            Ok(PageToken::Archived(None))
        );
    }

    #[test]
    fn anything_else_is_malformed() {
        let bad = [
            "",
            "Current",
            "CURRENT",
            " current",
            "current ",
            "1",
            "101",
            "0000000000000000101",   // 19 digits
            "000000000000000000101", // 21 digits
            "+0000000000000000101",
            "-0000000000000000101",
            " 0000000000000000101",
            "0000000000000000101 ",
            "000000000000000001O1", // letter O
            "0000000000000000010\t",
            "٠٠٠٠٠٠٠٠٠٠٠٠٠٠٠٠٠١٠١",                     // Arabic-Indic digits
            "０００００００００００００００００１０１", // full-width digits
            "0x000000000000000065",
            "1e000000000000000001",
        ];
        for token in bad {
            assert_eq!(PageToken::parse(token), Err(Malformed), "{token:?}");
        }
    }

    #[test]
    fn archived_tokens_are_zero_padded_to_twenty_digits() {
        assert_eq!(archived_token(1), "00000000000000000001");
        assert_eq!(archived_token(101), "00000000000000000101");
        assert_eq!(archived_token(i64::MAX), "09223372036854775807");
    }

    #[test]
    fn formatting_and_parsing_round_trip() {
        for seq in [1, 7, 100, 101, 12_345, 10_000_001, i64::MAX] {
            assert_eq!(
                PageToken::parse(&archived_token(seq)),
                Ok(PageToken::Archived(Some(seq)))
            );
        }
    }
}
