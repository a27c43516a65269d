// SPDX-License-Identifier: GPL-2.0

//! What an SRQ touches of the core's `ib_srq`: its events.

use core::ptr::NonNull;

use crate::bindings as b;

/// The core's `ib_srq` of an SRQ, for raising its events.
#[derive(Clone, Copy)]
pub(crate) struct SrqHandle(NonNull<b::ib_srq>);

impl SrqHandle {
    /// # Safety
    ///
    /// `ib` is the `ib_srq` of an SRQ being created; it stays valid until
    /// its `destroy_srq` returns, after which the SRQ raises no event (the
    /// core destroys an SRQ only once no QP uses it).
    pub(crate) unsafe fn new(ib: NonNull<b::ib_srq>) -> Self {
        SrqHandle(ib)
    }

    /// Raises an asynchronous event on the SRQ (its owner's event handler).
    pub(crate) fn event(self, event: b::ib_event_type) {
        // SAFETY: a live ib_srq (see `new`); the handler takes its own locks.
        unsafe { b::oxe_srq_event(self.0.as_ptr(), event) };
    }
}

// SAFETY: an address the core keeps valid while the SRQ is in use (above); the core's event handlers may be called from any thread.
unsafe impl Send for SrqHandle {}
// SAFETY: as above; `&SrqHandle` only raises events.
unsafe impl Sync for SrqHandle {}
