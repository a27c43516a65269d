// SPDX-License-Identifier: GPL-2.0

//! What a QP touches of the core: its `ib_qp` (events, kernel work
//! completions) and the core's table of QP state transitions.

use core::ptr::NonNull;

use crate::bindings as b;

/// The core's `ib_qp` of a QP, for its events and for kernel work
/// completions (`ib_wc.qp`). The core frees it only after `destroy_qp`,
/// which waits for every task of the QP that could use it.
#[derive(Clone, Copy)]
pub(crate) struct QpHandle(NonNull<b::ib_qp>);

impl QpHandle {
    /// # Safety
    ///
    /// `ib` is the `ib_qp` of a QP being created; it stays valid until its
    /// `destroy_qp` returns.
    pub(crate) unsafe fn new(ib: NonNull<b::ib_qp>) -> Self {
        QpHandle(ib)
    }
}

// SAFETY: an address the core keeps valid while the QP's tasks run (above);
// the core's event handlers may be called from any thread.
unsafe impl Send for QpHandle {}
// SAFETY: as above; `&QpHandle` only gives the address and raises events.
unsafe impl Sync for QpHandle {}

impl QpHandle {
    pub(crate) fn as_ptr(self) -> *mut b::ib_qp {
        self.0.as_ptr()
    }

    /// Raises an asynchronous event on the QP (its owner's event handler).
    pub(crate) fn event(self, event: b::ib_event_type) {
        // SAFETY: a live ib_qp (see the type); the handler takes its own locks.
        unsafe { b::oxe_qp_event(self.0.as_ptr(), event) };
    }
}

/// Whether the core's transition table allows `cur -> new` with `mask` for
/// an RC QP.
pub(crate) fn transition_ok(cur: u32, new: u32, mask: u32) -> bool {
    // SAFETY: a pure function of its arguments.
    unsafe { b::ib_modify_qp_is_ok(cur, new, b::ib_qp_type_IB_QPT_RC, mask) }
}
