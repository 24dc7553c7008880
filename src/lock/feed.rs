//! The feed's lock (see `name_lock` and `feed`): starts take it shared, subscriptions and their
//! removal exclusively, so that no map is started unfollowed by a subscription it could not see;
//! and what the caller is told when it is held.

use crate::error::{ChunkedError, Held};
use crate::guc;
use crate::input::{ConsumerName, MapName};
use crate::name_lock::{self, FeedLock, Wait};
use crate::pg::boundary::OrRethrow;

use super::refusal::waiting_up_to;

/// Takes the feed's lock for a start of `map` (see `feed`): shared with other starts, held
/// while a consumer is being subscribed or unsubscribed: then 40001 at once, or a wait up to
/// `chunked_map.lock_timeout`.
pub fn lock_feed_for_start(map: MapName<'_>) {
    if name_lock::lock_feed(FeedLock::Start, Wait::Never).or_rethrow() {
        return;
    }
    match guc::lock_timeout_ms() {
        None => start_while_subscribing(map, Held::Now),
        Some(ms) => {
            waiting_up_to(
                ms,
                ms,
                || name_lock::lock_feed(FeedLock::Start, Wait::UpToLockTimeout),
                |held| start_while_subscribing(map, held),
            );
        }
    }
}

/// Takes the feed's lock for a subscription or its removal (see `feed`): while a map is being
/// started (or another consumer subscribed), 40001 at once, or a wait up to
/// `chunked_map.lock_timeout`.
pub fn lock_feed_exclusive(consumer: ConsumerName<'_>) {
    if name_lock::lock_feed(FeedLock::Subscription, Wait::Never).or_rethrow() {
        return;
    }
    let busy = || -> bool {
        ChunkedError::FeedBusy {
            consumer: consumer.as_str().to_owned(),
        }
        .raise()
    };
    match guc::lock_timeout_ms() {
        None => {
            busy();
        }
        Some(ms) => {
            waiting_up_to(
                ms,
                ms,
                || name_lock::lock_feed(FeedLock::Subscription, Wait::UpToLockTimeout),
                |_| busy(),
            );
        }
    }
}

fn start_while_subscribing(map: MapName<'_>, held: Held) -> ! {
    ChunkedError::StartWhileSubscribing {
        map: map.as_str().to_owned(),
        held,
    }
    .raise()
}
