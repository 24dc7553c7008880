//! When a chunk is full, and how a batch of payloads is cut into chunks. Pure Rust: the rules,
//! without the database.
//!
//! A chunk is full when it holds its size in records, or when the next record would take its
//! payload bytes over `chunked_map.max_chunk_bytes`; a chunk always takes at least one record.

use std::ops::Range;

/// A map's current chunk, as the holder of the map's lock sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CurrentChunk {
    pub first_seq: i64,
    pub next_seq: i64,
    /// The size it was started with.
    pub size: i32,
    /// Payload bytes it holds.
    pub bytes: i64,
}

impl CurrentChunk {
    pub fn records(&self) -> i64 {
        self.next_seq - self.first_seq
    }

    /// Whether a record of `bytes` bytes still goes into this chunk.
    pub fn fits(&self, bytes: usize, max_chunk_bytes: usize) -> bool {
        let records = self.records();
        records < i64::from(self.size)
            && (records == 0 || total(self.bytes, bytes) <= as_i64(max_chunk_bytes))
    }
}

/// Where the payloads of one `chunked_register_many` go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// `payloads[..fill]` go into the current chunk.
    pub fill: usize,
    /// The rest, cut into chunks of the map's chunk size (and byte limit). When there are any,
    /// the current chunk is full and is archived first; then every chunk but the last is full
    /// and is archived as it is, and the last becomes the new current chunk (a full chunk stays
    /// current until an append finds it full).
    pub chunks: Vec<Range<usize>>,
}

/// Plans a batch of payloads of the given sizes, appended to `current`; new chunks take
/// `chunk_size` records at most.
pub fn plan_batch(
    current: &CurrentChunk,
    chunk_size: i32,
    sizes: &[usize],
    max_chunk_bytes: usize,
) -> Batch {
    let mut chunk = *current;
    let mut fill = 0;
    while fill < sizes.len() && chunk.fits(sizes[fill], max_chunk_bytes) {
        chunk.next_seq += 1;
        chunk.bytes = total(chunk.bytes, sizes[fill]);
        fill += 1;
    }
    let records = usize::try_from(chunk_size).unwrap_or(1).max(1);
    let chunks = cut(&sizes[fill..], records, max_chunk_bytes)
        .into_iter()
        .map(|range| range.start + fill..range.end + fill)
        .collect();
    Batch { fill, chunks }
}

/// Cuts records of the given sizes, in order, into chunks of at most `max_records` records and
/// `max_chunk_bytes` bytes, each of at least one record.
pub fn cut(sizes: &[usize], max_records: usize, max_chunk_bytes: usize) -> Vec<Range<usize>> {
    let mut chunks = Vec::new();
    let mut start = 0;
    let mut bytes = 0_usize;
    for (index, size) in sizes.iter().enumerate() {
        let records = index - start;
        let full = records > 0
            && (records >= max_records || bytes.saturating_add(*size) > max_chunk_bytes);
        if full {
            chunks.push(start..index);
            start = index;
            bytes = 0;
        }
        bytes = bytes.saturating_add(*size);
    }
    if start < sizes.len() {
        chunks.push(start..sizes.len());
    }
    chunks
}

fn as_i64(bytes: usize) -> i64 {
    i64::try_from(bytes).unwrap_or(i64::MAX)
}

fn total(bytes: i64, more: usize) -> i64 {
    bytes.saturating_add(as_i64(more))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(first_seq: i64, next_seq: i64, size: i32, bytes: i64) -> CurrentChunk {
        CurrentChunk {
            first_seq,
            next_seq,
            size,
            bytes,
        }
    }

    #[test]
    fn a_chunk_is_full_at_its_size_in_records() {
        assert!(chunk(1, 1, 3, 0).fits(10, 1000));
        assert!(chunk(1, 3, 3, 20).fits(10, 1000));
        assert!(!chunk(1, 4, 3, 30).fits(10, 1000));
    }

    #[test]
    fn a_chunk_is_full_when_the_next_record_would_pass_the_byte_limit() {
        assert!(chunk(1, 2, 100, 600).fits(400, 1000));
        assert!(!chunk(1, 2, 100, 600).fits(401, 1000));
    }

    #[test]
    fn an_empty_chunk_takes_a_record_of_any_size() {
        assert!(chunk(5, 5, 100, 0).fits(5000, 1000));
    }

    #[test]
    fn cut_respects_both_limits_and_never_makes_an_empty_chunk() {
        assert_eq!(cut(&[1, 1, 1, 1, 1], 2, 100), vec![0..2, 2..4, 4..5]);
        assert_eq!(cut(&[60, 60, 30, 10, 70], 10, 100), vec![0..1, 1..4, 4..5]);
        assert_eq!(cut(&[500, 1, 500], 10, 100), vec![0..1, 1..2, 2..3]);
        assert_eq!(cut(&[], 10, 100), Vec::<Range<usize>>::new());
    }

    #[test]
    fn a_batch_that_fits_goes_into_the_current_chunk() {
        let batch = plan_batch(&chunk(1, 3, 5, 20), 5, &[10, 10, 10], 1000);
        assert_eq!(
            batch,
            Batch {
                fill: 3,
                chunks: vec![]
            }
        );
    }

    #[test]
    fn a_batch_fills_the_current_chunk_then_cuts_the_rest_at_the_map_size() {
        // current chunk 1..=3 of size 4: one more fits; then chunks of the map's size 3
        let batch = plan_batch(&chunk(1, 4, 4, 30), 3, &[10; 8], 1000);
        assert_eq!(
            batch,
            Batch {
                fill: 1,
                chunks: vec![1..4, 4..7, 7..8]
            }
        );
    }

    #[test]
    fn a_full_current_chunk_takes_nothing_of_the_batch() {
        let batch = plan_batch(&chunk(1, 3, 2, 20), 2, &[10, 10], 1000);
        assert_eq!(
            batch,
            Batch {
                fill: 0,
                chunks: std::iter::once(0..2).collect()
            }
        );
    }

    #[test]
    fn a_batch_is_cut_by_bytes_too() {
        let batch = plan_batch(&chunk(1, 1, 100, 0), 100, &[400, 400, 400, 400], 1000);
        assert_eq!(
            batch,
            Batch {
                fill: 2,
                chunks: std::iter::once(2..4).collect()
            }
        );
    }
}
