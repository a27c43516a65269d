// SPDX-License-Identifier: GPL-2.0

//! The key table: key index -> registration, an XArray per device.
//!
//! Readers (the data path) look keys up under RCU with no lock, and take a
//! reference only if the registration is still live. Indices are handed out
//! cyclically and the tag is the allocation round (`key`), so a stale key
//! never matches the next tenant of its index. Freed slots near the
//! allocation cursor stay in the XArray for a while, as entries lookups take
//! for empty, so that churn does not free and allocate its nodes each time
//! (`oxe_xa_reserve_cyclic`); the table's memory follows the live keys.

use core::ptr::NonNull;

use kernel::prelude::*;
use kernel::sync::atomic::{ordering, Atomic};
use kernel::sync::{rcu, Completion};

use crate::ib::xarray::SlotArray;
use crate::key;

/// Something a key can name. The table holds one reference on each entry.
///
/// # Safety
///
/// `try_get` must only succeed while the object is live; the object must
/// stay live while a reference is held, and its memory valid for an RCU
/// grace period after it was removed.
pub(crate) unsafe trait Keyed {
    /// The key the object answers to now.
    fn key(&self) -> u32;
    /// Takes a reference unless the count has already reached zero.
    fn try_get(&self) -> bool;
    /// Drops a reference (`try_get`'s or the table's).
    fn put(&self);
}

/// The reference count of a keyed object (an MR, a window): the table's
/// reference plus one per data-path user. Once it hit zero no lookup takes
/// one again, and the owner's `wait` returns.
#[pin_data]
pub(crate) struct Refs {
    count: Atomic<i32>,
    #[pin]
    released: Completion,
}

impl Refs {
    /// One reference: the table's.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Refs {
            count: Atomic::new(1),
            released <- Completion::new(),
        })
    }

    /// Takes a reference unless the count already reached zero.
    pub(crate) fn try_get(&self) -> bool {
        let mut cur = self.count.load(ordering::Relaxed);
        while cur > 0 {
            match self.count.cmpxchg(cur, cur + 1, ordering::Acquire) {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
        false
    }

    /// Drops a reference; the last one wakes `wait`.
    pub(crate) fn put(&self) {
        if self.count.fetch_sub(1, ordering::Release) == 1 {
            self.released.complete_all();
        }
    }

    /// Drops the table's reference, once the key is gone, and waits until
    /// the data path's are gone too (as `put`, only the owner of that
    /// reference may call it). When none is held, as is usual, that is one
    /// atomic operation: the completion is only for a waiter.
    pub(crate) fn put_and_wait(&self) {
        // Full: the data path's last writes happen before our return.
        if self.count.fetch_sub(1, ordering::Full) != 1 {
            self.released.wait_for_completion();
        }
    }
}

/// One reference on a keyed object, dropped with it.
pub(crate) struct KeyRef<T: Keyed> {
    obj: NonNull<T>,
}

// SAFETY: a counted reference, like `Arc<T>`: sendable and shareable when the object itself is.
unsafe impl<T: Keyed + Send + Sync> Send for KeyRef<T> {}
// SAFETY: as above.
unsafe impl<T: Keyed + Send + Sync> Sync for KeyRef<T> {}

impl<T: Keyed> KeyRef<T> {
    /// Takes over a reference the caller holds on `obj`.
    ///
    /// # Safety
    ///
    /// The caller owns one reference on the live `obj` (the table's, once
    /// the object is removed, or one taken by `try_get`) and gives it up.
    pub(crate) unsafe fn from_raw(obj: *mut T) -> Self {
        KeyRef {
            // SAFETY: a live object is not at NULL.
            obj: unsafe { NonNull::new_unchecked(obj) },
        }
    }
}

impl<T: Keyed> KeyRef<T> {
    /// Another reference on the same object (never fails: ours keeps the
    /// count above zero).
    pub(crate) fn try_clone(&self) -> Option<Self> {
        if !self.try_get() {
            return None;
        }
        // SAFETY: `try_get` took a reference, which the new `KeyRef` owns.
        Some(unsafe { KeyRef::from_raw(self.obj.as_ptr()) })
    }
}

impl<T: Keyed> core::ops::Deref for KeyRef<T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: the reference keeps the object live (the `Keyed` contract).
        unsafe { self.obj.as_ref() }
    }
}

impl<T: Keyed> Drop for KeyRef<T> {
    fn drop(&mut self) {
        T::put(self);
    }
}

#[pin_data]
pub(crate) struct KeyTable<T: Keyed> {
    #[pin]
    slots: SlotArray,
    _t: core::marker::PhantomData<*const T>,
}

// Entries are `Keyed` objects, whose lifetime rules the trait gives.
// SAFETY: the slot array is internally locked.
unsafe impl<T: Keyed> Send for KeyTable<T> {}
// SAFETY: as above.
unsafe impl<T: Keyed> Sync for KeyTable<T> {}

impl<T: Keyed> KeyTable<T> {
    /// A table handing out the indices `min..=max`.
    pub(crate) fn new(min: u32, max: u32) -> impl PinInit<Self, Error> {
        try_pin_init!(KeyTable {
            slots <- SlotArray::new(min, max),
            _t: core::marker::PhantomData,
        }? Error)
    }

    /// Publishes a new entry. `make` gets the key and returns the object,
    /// complete, to publish under it (the table takes over one reference).
    pub(crate) fn insert(&self, make: impl FnOnce(u32) -> NonNull<T>) -> Result<u32> {
        let (index, round) = self.slots.reserve()?;
        let k = key::make(index, key::round_tag(round));
        self.slots.fill(index, make(k).cast())?;
        Ok(k)
    }

    /// Retires `k`: its index is free again. The caller then drops the
    /// table's reference, once lookups can no longer find the object.
    pub(crate) fn remove(&self, k: u32) {
        self.slots.retire(key::index(k));
    }

    /// Looks `k` up with no lock and returns the object with a reference
    /// taken, if `k` names a live entry with this very tag.
    pub(crate) fn get(&self, k: u32) -> Option<KeyRef<T>> {
        self.find(key::index(k), |t| t.key() == k)
    }

    /// The live entry at the index of `k`, whatever its tag: for fast
    /// registration, which gives the MR a new tag.
    pub(crate) fn get_index(&self, k: u32) -> Option<KeyRef<T>> {
        self.find(key::index(k), |_| true)
    }

    fn find(&self, index: u32, ok: impl FnOnce(&T) -> bool) -> Option<KeyRef<T>> {
        let guard = rcu::read_lock();
        let obj = self.slots.load(index, &guard)?.cast::<T>();
        // A live entry's memory stays valid for an RCU grace period after its
        // removal (the `Keyed` contract).
        // SAFETY: we are inside an RCU read-side section.
        let t = unsafe { obj.as_ref() };
        // SAFETY: `try_get` took a reference, which the `KeyRef` owns.
        (ok(t) && t.try_get()).then(|| unsafe { KeyRef::from_raw(obj.as_ptr()) })
    }
}
