// SPDX-License-Identifier: GPL-2.0

//! A key table's XArray (`keys`): slots handed out cyclically in a range of
//! indices, each holding a pointer the table owns, read under RCU with no
//! lock. The kernel crate's `XArray` owns its entries and has neither
//! cyclic allocation nor RCU lookups, so this is a thin shim of its own over
//! `include/oxe_helpers.c`, which also keeps freed slots near the cursor so
//! that churn does not free and allocate nodes.

use core::ffi::c_void;
use core::ptr::NonNull;

use kernel::prelude::*;
use kernel::sync::rcu;
use kernel::types::Opaque;

use crate::bindings as b;

#[pin_data(PinnedDrop)]
pub(crate) struct SlotArray {
    #[pin]
    xa: Opaque<b::xarray>,
    /// The next index to try, the allocation round and the block of the
    /// last index handed out, which only `oxe_xa_reserve_cyclic` and
    /// `oxe_xa_retire` touch, under the XArray's lock.
    cursor: Opaque<[u32; 3]>,
    min: u32,
    max: u32,
}

// The entries are plain pointers, whose meaning is the owner's.
// SAFETY: the XArray is internally locked, and so is `cursor` (by it).
unsafe impl Send for SlotArray {}
// SAFETY: as above.
unsafe impl Sync for SlotArray {}

impl SlotArray {
    /// An empty array handing out the indices `min..=max`.
    pub(crate) fn new(min: u32, max: u32) -> impl PinInit<Self, Error> {
        try_pin_init!(SlotArray {
            // SAFETY: `slot` is valid for the XArray to be initialised in.
            xa <- Opaque::ffi_init(|slot| unsafe { b::oxe_xa_init(slot) }),
            cursor: Opaque::new([min, 0, u32::MAX]),
            min,
            max,
        }? Error)
    }

    fn xa(&self) -> *mut b::xarray {
        self.xa.get()
    }

    /// Reserves the next free index after the last one handed out, going
    /// around to `min` when none is left above: the index and the number of
    /// times allocation went around. The slot reads as empty until `fill`.
    /// ENOSPC when every index is taken.
    pub(crate) fn reserve(&self) -> Result<(u32, u32)> {
        let (mut index, mut round) = (0u32, 0u32);
        // SAFETY: the XArray is initialised; `cursor` is only touched under its lock.
        let err = unsafe {
            b::oxe_xa_reserve_cyclic(
                self.xa(),
                self.min,
                self.max,
                self.cursor.get().cast(),
                &mut index,
                &mut round,
            )
        };
        match err {
            0 => Ok((index, round)),
            e if e == EBUSY.to_errno() => Err(ENOSPC),
            e => Err(Error::from_errno(e)),
        }
    }

    /// Fills the slot `reserve` gave: lookups find `entry` from now on. On
    /// an error the reservation is given back.
    pub(crate) fn fill(&self, index: u32, entry: NonNull<c_void>) -> Result {
        // Filling a reserved slot allocates nothing.
        // SAFETY: the XArray is initialised; a pointer to an object is a valid entry.
        let old = unsafe { b::xa_store(self.xa(), index as usize, entry.as_ptr(), b::GFP_KERNEL) };
        // SAFETY: `old` is what xa_store returned.
        let err = unsafe { b::oxe_xa_err(old) };
        if err != 0 {
            self.retire(index);
            return Err(Error::from_errno(err));
        }
        Ok(())
    }

    /// Frees slot `index`: lookups no longer find what it held.
    pub(crate) fn retire(&self, index: u32) {
        // SAFETY: the XArray is initialised; `cursor` is read under its lock.
        unsafe { b::oxe_xa_retire(self.xa(), index, self.cursor.get().cast()) };
    }

    /// What slot `index` holds, if filled. The pointer is only known valid
    /// for as long as `_rcu` is held and the owner's rules say so.
    pub(crate) fn load(&self, index: u32, _rcu: &rcu::Guard) -> Option<NonNull<c_void>> {
        if !(self.min..=self.max).contains(&index) {
            return None;
        }
        // SAFETY: an RCU-protected load from an initialised XArray.
        let entry = unsafe { b::xa_load(self.xa(), index as usize) };
        // A retired slot kept near the cursor holds a value entry.
        // SAFETY: a bit test on an entry pointer.
        if unsafe { b::oxe_xa_is_value(entry) } {
            return None;
        }
        NonNull::new(entry)
    }
}

#[pinned_drop]
impl PinnedDrop for SlotArray {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: initialised in `new`; no user is left.
        unsafe { b::xa_destroy(self.xa()) };
    }
}
