//! Which maps to announce, on which channel, and up to which sequence. A committing transaction
//! that appended to a map whose notifications are on *at its commit* sends one notification on
//! the map's channel with the newest sequence it appended and kept. The decision is the
//! commit's: the transaction holds the lock of every map it appended to, so only it can change
//! their notification setting until then, and it records here what it appended (from what the
//! appends reported) and every change of the setting it makes (from `chunked_set_notify`, which
//! also finds out whether the transaction appended to the map before turning notifications on).
//! Nothing is read at commit, where the caller's role and `search_path` would apply.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ffi::CString;

use pgrx::pg_sys;

use super::subtransaction::{self, Made};
use crate::pg::boundary::{catching, OrRethrow};
use crate::pg::raw;

/// What a commit sends for one map: its newest sequence, on the map's channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Announcement {
    pub channel: String,
    pub last_seq: i64,
}

/// An announcement and the extension (its `pg_extension` oid) whose map it is: an extension
/// dropped and created again in the same transaction has another oid, and none of the old one's
/// maps.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pending {
    announcement: Announcement,
    extension: pg_sys::Oid,
}

thread_local! {
    /// Per map this transaction may announce: what its commit would send (`None`: nothing, the
    /// map's notifications were turned off or it was dropped), by subtransaction (innermost
    /// last).
    static TO_ANNOUNCE: RefCell<BTreeMap<String, Vec<Made<Option<Pending>>>>> =
        const { RefCell::new(BTreeMap::new()) };
}

/// Announce `map` when this transaction commits (unless the subtransaction that asked rolls
/// back, or the transaction turns the map's notifications off before then).
pub fn announce_at_commit(map: &str, announcement: Announcement) {
    let extension = extension_oid();
    push_announcement(
        map,
        Some(Pending {
            announcement,
            extension,
        }),
        true,
    );
}

/// The map's notifications were turned off: its commit announces nothing of it, unless the
/// subtransaction that turned them off rolls back.
pub fn announce_nothing(map: &str) {
    push_announcement(map, None, false);
}

fn push_announcement(map: &str, announcement: Option<Pending>, create: bool) {
    let by = subtransaction::current();
    TO_ANNOUNCE.with(|maps| {
        let mut maps = maps.borrow_mut();
        let stack = match maps.get_mut(map) {
            Some(stack) => stack,
            None if create => maps.entry(map.to_owned()).or_default(),
            None => return,
        };
        match stack.last_mut() {
            Some(top) if top.by == by => top.what = announcement,
            _ => stack.push(Made {
                what: announcement,
                by,
            }),
        }
    });
}

/// What this transaction's commit sends now, by map: what it announced of the extension as it
/// is installed now (none once it was dropped).
pub fn announcements() -> Vec<(String, Announcement)> {
    let pending: Vec<(String, Pending)> = TO_ANNOUNCE.with(|maps| {
        maps.borrow()
            .iter()
            .filter_map(|(map, stack)| Some((map.clone(), stack.last()?.what.clone()?)))
            .collect()
    });
    // Every process's transactions end here, also those of processes that have no database
    // (the autovacuum launcher): the catalog is looked at only when there is something to send.
    if pending.is_empty() {
        return Vec::new();
    }
    let extension = extension_oid();
    pending
        .into_iter()
        .filter(|(_, pending)| extension != pg_sys::InvalidOid && pending.extension == extension)
        .map(|(map, pending)| (map, pending.announcement))
        .collect()
}

pub fn forget_everything() {
    TO_ANNOUNCE.with(|maps| maps.borrow_mut().clear());
}

/// A subtransaction rolled back: what it (or a subtransaction of it) asked is gone.
pub fn subtransaction_aborted(subtransaction: pg_sys::SubTransactionId) {
    TO_ANNOUNCE.with(|maps| {
        let mut maps = maps.borrow_mut();
        for stack in maps.values_mut() {
            stack.retain(|made| made.by < subtransaction);
        }
        maps.retain(|_, stack| !stack.is_empty());
    });
}

/// A subtransaction committed: what it asked is its parent's now.
pub fn subtransaction_committed(
    subtransaction: pg_sys::SubTransactionId,
    parent: pg_sys::SubTransactionId,
) {
    TO_ANNOUNCE.with(|maps| {
        for stack in maps.borrow_mut().values_mut() {
            let newest = stack
                .iter()
                .rev()
                .find(|made| made.by >= subtransaction)
                .cloned();
            stack.retain(|made| made.by < subtransaction);
            if let Some(newest) = newest {
                match stack.last_mut() {
                    Some(top) if top.by == parent => top.what = newest.what,
                    _ => stack.push(Made {
                        what: newest.what,
                        by: parent,
                    }),
                }
            }
        }
    });
}

/// Sends one notification per map this transaction announces (none when it dropped the
/// extension, and with it every map).
pub fn announce() {
    let announcements = announcements();
    for (map, Announcement { channel, last_seq }) in announcements {
        let payload = serde_json::json!({"map": map, "last_seq": last_seq}).to_string();
        // a channel the extension made and a JSON text: neither holds a NUL byte
        let (Ok(channel), Ok(payload)) = (CString::new(channel), CString::new(payload)) else {
            crate::pg::boundary::internal(format!(
                "a notification of map \"{map}\" with a NUL byte"
            ));
        };
        let (channel_ptr, payload_ptr) = (channel.as_ptr(), payload.as_ptr());
        // SAFETY: NUL-terminated strings that outlive the call, which copies them; an error it
        // raises (a full notification queue) goes on as PostgreSQL raised it.
        unsafe { catching(|| raw::Async_Notify(channel_ptr, payload_ptr)) }.or_rethrow();
    }
}

/// The extension as it is installed in this database now (`InvalidOid`: not installed), from the
/// catalog (no SQL).
fn extension_oid() -> pg_sys::Oid {
    // SAFETY: a catalog lookup by name inside the transaction, which raises nothing when missing.
    unsafe { pg_sys::get_extension_oid(c"chunked_map".as_ptr(), true) }
}
