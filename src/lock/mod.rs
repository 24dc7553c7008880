//! The extension's locks, a module each, and what a writer is told when one is held:
//!
//! - [`map`]: a map's lock, the row lock on its state row, which every write takes;
//! - [`name`]: the lock of a map's name, which starts and drops take;
//! - [`feed`]: the feed's lock, which starts share and subscriptions take alone;
//! - `refusal`: the errors (40001 and its details) and the one place a wait's timeout or
//!   deadlock is relabelled.

pub mod feed;
pub mod map;
pub mod name;
mod refusal;

pub use feed::{lock_feed_exclusive, lock_feed_for_start};
pub use map::{lock_existing_map, lock_map_for_drop, uses_transaction_snapshot};
pub use name::{lock_name, probe_name};
