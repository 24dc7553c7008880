//! The lock on a map's *name*, which `chunked_start` and `chunked_drop` take (a start has no
//! state row to lock yet): transaction-scoped, in a lock space of the extension's own.
//!
//! It is a PostgreSQL advisory-method lock whose tag no SQL function can make: the advisory
//! lock functions (`pg_advisory_lock` and the rest) build tags whose fourth field is 1 or 2,
//! and this one's is [`LOCK_SPACE`]. So no role can take, hold or release it but through the
//! extension's functions: a role with no grant cannot block starts and drops. The tag's keys
//! are a keyed hash (SipHash-2-4) of the map's name under a random key of the installation
//! (`chunked_map.installation`, readable by its owner only), so what `pg_locks` shows to every
//! role tells nothing of which names are being started or dropped. Two names whose 64-bit
//! hashes collide share a lock (a start or drop of one then meets 40001 while the other's is
//! open: retrying succeeds).

use std::cell::Cell;
use std::hash::Hasher;

use pgrx::pg_sys;
use siphasher::sip::SipHasher24;

use crate::input::MapName;
use crate::pg::boundary::{catching, PgError};
use crate::pg::raw;
use crate::pg::spi::Session;
use crate::statements::writes;

/// The fourth field of the tag: neither 1 nor 2, the values of PostgreSQL's own advisory locks.
const LOCK_SPACE: u16 = 0x434d;
/// The fourth field of the feed's lock (one per database): another value no SQL function makes.
const FEED_LOCK_SPACE: u16 = 0x434e;
/// The fourth field of the message store's order locks (two per database): another value still.
/// `chunked_map_message_store` finds the writers' mark in `pg_locks` by it (objsubid 17231).
const ORDER_LOCK_SPACE: u16 = 0x434f;

thread_local! {
    /// The installation's key, and the extension (its `pg_extension` oid) it belongs to.
    static KEY: Cell<Option<(pg_sys::Oid, [u64; 2])>> = const { Cell::new(None) };
}

/// How a lock is asked for.
#[derive(Debug, Clone, Copy)]
pub enum Wait {
    /// Not at all: `false` when another transaction holds it.
    Never,
    /// Up to the server's `lock_timeout` (which the caller sets), then PostgreSQL's 55P03.
    UpToLockTimeout,
}

/// Takes the name's lock until the end of the transaction; `Ok(false)` when it is held and
/// `wait` is [`Wait::Never`].
pub fn lock(session: &Session, map: MapName<'_>, wait: Wait) -> Result<bool, PgError> {
    acquire(&tag(session, map), pg_sys::ExclusiveLock, wait)
}

/// Whether no other transaction holds the name's lock: takes it shared and gives it back at
/// once (concurrent probes never conflict with each other).
pub fn probe(session: &Session, map: MapName<'_>, wait: Wait) -> Result<bool, PgError> {
    let tag = tag(session, map);
    if !acquire(&tag, pg_sys::ShareLock, wait)? {
        return Ok(false);
    }
    let tag_ptr = std::ptr::from_ref(&tag);
    // SAFETY: releases the shared lock just taken, with the same tag and mode.
    unsafe { catching(|| raw::LockRelease(tag_ptr, pg_sys::ShareLock as i32, false)) }?;
    Ok(true)
}

/// Who takes the feed's lock (see `feed`): a start of a map, shared (starts never conflict with
/// each other), or a subscription, exclusive.
#[derive(Debug, Clone, Copy)]
pub enum FeedLock {
    Start,
    Subscription,
}

/// Takes the feed's lock until the end of the transaction; `Ok(false)` when it is held and
/// `wait` is [`Wait::Never`].
pub fn lock_feed(who: FeedLock, wait: Wait) -> Result<bool, PgError> {
    let tag = pg_sys::LOCKTAG {
        // SAFETY: reading the id of the database this backend is connected to.
        locktag_field1: unsafe { pg_sys::MyDatabaseId }.to_u32(),
        locktag_field2: 0,
        locktag_field3: 0,
        locktag_field4: FEED_LOCK_SPACE,
        locktag_type: pg_sys::LockTagType::LOCKTAG_ADVISORY as u8,
        locktag_lockmethodid: pg_sys::USER_LOCKMETHOD as u8,
    };
    let mode = match who {
        FeedLock::Start => pg_sys::ShareLock,
        FeedLock::Subscription => pg_sys::ExclusiveLock,
    };
    acquire(&tag, mode, wait)
}

/// The message store's order locks (docs/message-db.md), one of each per database.
#[derive(Debug, Clone, Copy)]
pub enum OrderLock {
    /// Held shared by every transaction that wrote a message, until it ends: marks never
    /// conflict with each other, and nothing else takes this lock, so taking it never waits.
    WritersMark,
    /// Held by one numbering of messages at a time, until its transaction ends.
    Numbering,
}

/// Takes an order lock until the end of the transaction; `Ok(false)` when the numbering lock is
/// held by another transaction (it is never waited for).
pub fn lock_order(which: OrderLock) -> Result<bool, PgError> {
    let (key, mode) = match which {
        OrderLock::WritersMark => (0, pg_sys::ShareLock),
        OrderLock::Numbering => (1, pg_sys::ExclusiveLock),
    };
    let tag = pg_sys::LOCKTAG {
        // SAFETY: reading the id of the database this backend is connected to.
        locktag_field1: unsafe { pg_sys::MyDatabaseId }.to_u32(),
        locktag_field2: key,
        locktag_field3: 0,
        locktag_field4: ORDER_LOCK_SPACE,
        locktag_type: pg_sys::LockTagType::LOCKTAG_ADVISORY as u8,
        locktag_lockmethodid: pg_sys::USER_LOCKMETHOD as u8,
    };
    acquire(&tag, mode, Wait::Never)
}

fn acquire(tag: &pg_sys::LOCKTAG, mode: u32, wait: Wait) -> Result<bool, PgError> {
    let dont_wait = matches!(wait, Wait::Never);
    let tag_ptr = std::ptr::from_ref(tag);
    // SAFETY: a valid advisory-method tag; a transaction lock (released at its end). Waiting
    // may raise 55P03 (lock_timeout), 40P01 (deadlock) or a cancel, returned to the caller.
    let result = unsafe { catching(|| raw::LockAcquire(tag_ptr, mode as i32, false, dont_wait)) }?;
    Ok(result != pg_sys::LockAcquireResult::LOCKACQUIRE_NOT_AVAIL)
}

fn tag(session: &Session, map: MapName<'_>) -> pg_sys::LOCKTAG {
    let [k0, k1] = key(session);
    let mut hasher = SipHasher24::new_with_keys(k0, k1);
    hasher.write(map.as_str().as_bytes());
    let hash = hasher.finish();
    pg_sys::LOCKTAG {
        // SAFETY: reading the id of the database this backend is connected to.
        locktag_field1: unsafe { pg_sys::MyDatabaseId }.to_u32(),
        locktag_field2: (hash >> 32) as u32,
        locktag_field3: hash as u32,
        locktag_field4: LOCK_SPACE,
        locktag_type: pg_sys::LockTagType::LOCKTAG_ADVISORY as u8,
        locktag_lockmethodid: pg_sys::USER_LOCKMETHOD as u8,
    }
}

/// The installation's key, read once per backend (and again if the extension was dropped and
/// created since: it then has another oid, and another key).
fn key(session: &Session) -> [u64; 2] {
    // SAFETY: a catalog lookup by name, which raises nothing when missing.
    let extension = unsafe { pg_sys::get_extension_oid(c"chunked_map".as_ptr(), true) };
    if let Some((oid, key)) = KEY.with(Cell::get) {
        if oid == extension {
            return key;
        }
    }
    let secret = writes::installation_secret(session);
    let word = |at: usize| {
        let mut bytes = [0_u8; 8];
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte = secret.get(at + i).copied().unwrap_or(0);
        }
        u64::from_le_bytes(bytes)
    };
    let key = [word(0), word(8)];
    KEY.with(|cell| cell.set(Some((extension, key))));
    key
}
