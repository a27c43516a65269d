// SPDX-License-Identifier: GPL-2.0

//! Memory window entry points, and the window's life as the core and the
//! window table see it: published under a fresh key by `alloc_mw`, retired
//! by `dealloc_mw` and freed an RCU grace period later, as an MR is.

use core::ptr::NonNull;

use kernel::ffi::c_int;
use kernel::prelude::*;

use super::{drop_in_place, from_ib, init_in_place, pd};
use crate::bindings as b;
use crate::device::OxeDevice;
use crate::ib::Udata;
use crate::keys::Keyed;
use crate::mw::{OxeMw, WinPtr, Window};

// `try_ref` fails once the count hit zero, `dealloc_mw` waits for it to hit
// zero, and the memory is freed through call_rcu only after the key was
// removed.
// SAFETY: as the trait requires.
unsafe impl Keyed for Window {
    fn key(&self) -> u32 {
        Window::key(self)
    }

    fn try_get(&self) -> bool {
        self.try_ref()
    }

    fn put(&self) {
        self.unref()
    }
}

/// `ibv_alloc_mw`: a type 1 window (valid, unbound) or a type 2 one (free),
/// under a fresh rkey the core returns to the user.
///
/// # Safety
///
/// Called by the RDMA core with a zeroed MW of `size_ib_mw` bytes whose
/// device, PD and type it filled in, and the command's udata.
pub(super) unsafe extern "C" fn alloc_mw(ib: *mut b::ib_mw, udata: *mut b::ib_udata) -> c_int {
    // SAFETY: the function's contract.
    let (dev, pd, mw_type, udata) = unsafe {
        (
            OxeDevice::from_ib((*ib).device),
            pd::id((*ib).pd),
            (*ib).type_,
            Udata::from_raw(udata),
        )
    };
    if let Err(e) = crate::ib::udata::in_empty(udata.as_ref()) {
        return e.to_errno();
    }
    let Some(state) = dev.state() else {
        return ENODEV.to_errno();
    };
    let init = match Window::new(mw_type, pd) {
        Ok(i) => i,
        Err(e) => return e.to_errno(),
    };
    let win = match KBox::pin_init(init, GFP_KERNEL) {
        Ok(w) => w,
        Err(e) => return e.to_errno(),
    };
    // From here on the window is only used through this pointer and never
    // moves; `free_rcu` frees it.
    // SAFETY: the window stays where it is until `free_rcu`.
    let win = NonNull::from(KBox::leak(unsafe { Pin::into_inner_unchecked(win) }));
    // SAFETY: the allocation is live until `free_rcu`.
    let w = unsafe { win.as_ref() };
    let published = state.mws.insert(|key| {
        w.assign_key(key);
        win
    });
    let key = match published {
        Ok(k) => k,
        Err(e) => {
            // SAFETY: never published; we own the only pointer.
            drop(unsafe { KBox::from_raw(win.as_ptr()) });
            return e.to_errno();
        }
    };
    // `rkey` is what the core answers the user with.
    // SAFETY: the core's MW, not yet seen by anyone else.
    unsafe { (*ib).rkey = key };
    // The core calls `dealloc_mw` only if this verb succeeds.
    // SAFETY: fresh memory the core allocated for an OxeMw.
    match unsafe { init_in_place::<OxeMw, core::convert::Infallible>(ib, WinPtr(win)) } {
        Ok(()) => 0,
        Err(e) => match e {},
    }
}

/// # Safety
///
/// Called by the RDMA core, once, for an MW `alloc_mw` set up.
pub(super) unsafe extern "C" fn dealloc_mw(ib: *mut b::ib_mw) -> c_int {
    // SAFETY: a live MW of ours, on a live oxe device.
    let (dev, win) = unsafe { (OxeDevice::from_ib((*ib).device), from_ib::<OxeMw>(ib).win.0) };
    // SAFETY: the window lives until `free_rcu`, which only this call starts.
    let w = unsafe { win.as_ref() };
    if let Some(state) = dev.state() {
        state.mws.remove(w.key());
    }
    // Lookups can no longer find the window, so the table's reference is ours.
    w.retire();
    // SAFETY: unreachable but for RCU readers of the table, which `free_rcu` waits out.
    unsafe { b::call_rcu(w.rcu_head(), Some(free_rcu)) };
    // SAFETY: last use; the core frees the memory after this returns.
    unsafe { drop_in_place::<OxeMw>(ib) };
    0
}

/// # Safety
///
/// Called by RCU, once, for the `rcu` field of a window passed to call_rcu.
unsafe extern "C" fn free_rcu(head: *mut b::callback_head) {
    // SAFETY: `head` is the `rcu` field of a Window leaked by `alloc_mw`.
    unsafe {
        let w = head.cast::<u8>().sub(Window::RCU_OFFSET).cast::<Window>();
        drop(KBox::from_raw(w));
    }
}

// A window is found by key from any thread (the transport's tasks, any QP's
// verbs); its state is atomics and a lock, and its RCU head is only touched
// by `dealloc_mw` and RCU. The `OxeMw` holding the pointer is the only owner
// of the table's reference.
// SAFETY: as above.
unsafe impl Send for Window {}
// SAFETY: as above.
unsafe impl Sync for Window {}
// SAFETY: a pointer to a `Window`, which is `Send` and `Sync` (above).
unsafe impl Send for WinPtr {}
// SAFETY: as above.
unsafe impl Sync for WinPtr {}
