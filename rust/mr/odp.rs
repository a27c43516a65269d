// SPDX-License-Identifier: GPL-2.0

//! On-demand paging: a user MR with no pins. The pages are found when the
//! data path touches them (`hmm_range_fault`, in the QP's task, which may
//! sleep) and forgotten when the mm invalidates them; every copy runs under
//! the lock the invalidation takes, so a page is never used after the mm
//! took it away, and an address no longer mapped is an access error.
//!
//! The notifier and the page list are the core's `ib_umem_odp`, as rdma_rxe
//! and mlx5 use it, rather than an MTT of oxe's own: the interval
//! notifier's sequence protocol, the retry on a concurrent invalidation and
//! the lockdep annotations for reclaim are subtle, and the core's are the
//! ones every ODP driver shares (and fixes). Its page list has one entry
//! per page of the range, which is what oxe's walk needs; oxe has no DMA
//! mapping to keep (virtual DMA). The C side is `include/oxe_odp.c`.

use core::cell::UnsafeCell;
use core::ptr::NonNull;

use kernel::error::{from_err_ptr, to_result};
use kernel::prelude::*;

use crate::bindings as b;

/// Whether the kernel has ODP (`CONFIG_INFINIBAND_ON_DEMAND_PAGING`).
pub(crate) fn enabled() -> bool {
    // SAFETY: reads a constant.
    unsafe { b::oxe_odp_enabled() }
}

/// The core's ODP umem of one MR: released on drop.
pub(crate) struct Odp(NonNull<b::ib_umem_odp>);

// SAFETY: the umem is used only through the C helpers, which lock it (the
// page list) or only read fields fixed at creation.
unsafe impl Send for Odp {}
// SAFETY: as above.
unsafe impl Sync for Odp {}

/// Why pages could not be had.
#[derive(Debug)]
pub(crate) enum Fault {
    /// Not all present, and not to be faulted in (PREFETCH_NO_FAULT).
    Missing,
    /// Not mapped, or not writable for a write, or outside the MR.
    Error(Error),
}

impl Odp {
    /// `[start, start + length)` of the calling process, not pinned.
    ///
    /// # Safety
    ///
    /// `dev` is a live, registered device; called in the context of the
    /// process that registers (the umem keeps `current->mm`).
    pub(crate) unsafe fn new(
        dev: *mut b::ib_device,
        start: u64,
        length: u64,
        access: u32,
    ) -> Result<Odp> {
        // SAFETY: per the function's contract.
        let p = from_err_ptr(unsafe { b::oxe_odp_get(dev, start, length, access as i32) })?;
        NonNull::new(p).map(Odp).ok_or(ENOMEM)
    }

    /// Runs `f` with the pages of `[va, va + len)` present (writable if
    /// `write`), faulting them in if `fault`; `f` gets the frame of each
    /// address it asks for. The pages stay as they are until `f` returns:
    /// an invalidation waits for it.
    pub(crate) fn with_pages<R>(
        &self,
        va: u64,
        len: u64,
        write: bool,
        fault: bool,
        f: impl FnOnce(&Present<'_>) -> R,
    ) -> Result<R, Fault> {
        // SAFETY: a live umem; the helper checks the range.
        let r = unsafe { b::oxe_odp_lock(self.0.as_ptr(), va, len, write, fault) };
        if r == -(b::EAGAIN as i32) {
            return Err(Fault::Missing);
        }
        to_result(r).map_err(Fault::Error)?;
        let present = Present {
            odp: self,
            start: va,
            len,
        };
        let out = f(&present);
        // SAFETY: locked by the successful oxe_odp_lock above.
        unsafe { b::oxe_odp_unlock(self.0.as_ptr()) };
        Ok(out)
    }
}

impl Drop for Odp {
    fn drop(&mut self) {
        // SAFETY: ours, and nothing uses it any more (the MR is released).
        unsafe { b::oxe_odp_release(self.0.as_ptr()) };
    }
}

/// An MR's umem, released by deregistration (in process context: removing
/// the notifier may sleep, which the MR's RCU free may not) once the last
/// reference is gone.
pub(crate) struct OdpCell(UnsafeCell<Option<Odp>>);

// SAFETY: shared reads only, until `release`, which excludes them.
unsafe impl Sync for OdpCell {}
// SAFETY: `Odp` is `Send`.
unsafe impl Send for OdpCell {}

impl OdpCell {
    pub(crate) fn new(odp: Odp) -> Self {
        OdpCell(UnsafeCell::new(Some(odp)))
    }

    /// The umem, `None` once released.
    pub(crate) fn get(&self) -> Option<&Odp> {
        // SAFETY: written only by `release`, whose caller guarantees that no
        // one else reads it any more.
        unsafe { (*self.0.get()).as_ref() }
    }

    /// Releases the umem now: the notifier goes, nothing of the process's
    /// memory is reachable any more.
    ///
    /// # Safety
    ///
    /// No one else uses the cell, now or later, but to drop it: the MR has
    /// no reference left but the caller's.
    pub(crate) unsafe fn release(&self) {
        // SAFETY: per the function's contract, this is the only access.
        drop(unsafe { (*self.0.get()).take() });
    }
}

/// The pages of a locked range.
pub(crate) struct Present<'a> {
    odp: &'a Odp,
    start: u64,
    len: u64,
}

impl Present<'_> {
    /// The frame of the page holding `va`, which must lie in the range.
    pub(crate) fn pfn(&self, va: u64) -> Option<u64> {
        let off = va.checked_sub(self.start)?;
        if off >= self.len.max(1) {
            return None;
        }
        // SAFETY: `va` is in the range locked present.
        Some(unsafe { b::oxe_odp_pfn(self.odp.0.as_ptr(), va) } as u64)
    }
}
