// SPDX-License-Identifier: GPL-2.0

//! CQ entry points, and what touches the core's `ib_cq`: its `cqe` count,
//! its device, its completion handler and event, the `ib_wc` formats.

use core::mem::MaybeUninit;

use kernel::ffi::{c_int, c_uint};

use super::{drop_in_place, from_ib, init_in_place, to_c};
use crate::bindings as b;
use crate::cq::{CqState, OxeCq};
use crate::device::OxeDevice;
use crate::ib::Udata;

impl OxeCq {
    /// # Safety
    ///
    /// `ib` must be a live oxe CQ.
    pub(crate) unsafe fn from_ib<'a>(ib: *mut b::ib_cq) -> &'a OxeCq {
        // SAFETY: per the function's contract; `create_cq` initialised it.
        unsafe { from_ib(ib) }
    }
}

/// # Safety
///
/// Called by the RDMA core with a zeroed CQ of `size_ib_cq` bytes.
pub(super) unsafe extern "C" fn create_cq(
    ib: *mut b::ib_cq,
    attr: *const b::ib_cq_init_attr,
    attrs: *mut b::uverbs_attr_bundle,
) -> c_int {
    // `attrs` is NULL for kernel CQs, else the command's bundle, whose
    // driver udata lives as long as the command.
    // SAFETY: the core passes valid attributes and such an `attrs`.
    let (attr, udata) = unsafe { (&*attr, Udata::from_raw(b::oxe_attrs_udata(attrs))) };
    let init = match CqState::new(attr.cqe, attr.flags, udata.as_ref()) {
        Ok(init) => init,
        Err(e) => return e.to_errno(),
    };
    // The core calls `destroy_cq` only if this verb succeeds.
    // SAFETY: fresh memory the core allocated for an OxeCq, seen by no one.
    if let Err(e) = unsafe { init_in_place::<OxeCq, _>(ib, init) } {
        return e.to_errno();
    }
    // SAFETY: initialised just above; its device (set by the core) outlives it.
    let (cq, dev) = unsafe { (OxeCq::from_ib(ib), OxeDevice::from_ib((*ib).device)) };
    crate::ib::cq::publish_cqe(cq, cq.capacity());
    if let Some(u) = &udata {
        // Offered last: a create that fails after the offer withdraws it.
        if let Err(e) = cq.respond_user(u, dev.mmap_offsets()) {
            cq.withdraw(Some(u));
            // SAFETY: the core calls no destroy when create fails.
            unsafe { drop_in_place::<OxeCq>(ib) };
            return e.to_errno();
        }
    }
    0
}

/// # Safety
///
/// Called by the RDMA core, once, when no QP uses the CQ any more.
pub(super) unsafe extern "C" fn destroy_cq(ib: *mut b::ib_cq, udata: *mut b::ib_udata) -> c_int {
    // `udata` is NULL for kernel CQs, else the destroy command's (or the
    // core's cleanup's).
    // SAFETY: a live CQ `create_cq` set up, and such a `udata`.
    let (cq, udata) = unsafe { (OxeCq::from_ib(ib), Udata::from_raw(udata)) };
    cq.withdraw(udata.as_ref());
    // Frees the ring (vfree sleeps): outside the CQ's spinlock.
    // SAFETY: last use; the core frees the memory after this returns.
    unsafe { drop_in_place::<OxeCq>(ib) };
    0
}

/// # Safety
///
/// Called by the RDMA core (`rdma res show cq -dd`) for a live CQ, with the
/// message it builds for it.
pub(super) unsafe extern "C" fn fill_res_cq_entry(
    msg: *mut b::sk_buff,
    ib: *mut b::ib_cq,
) -> c_int {
    // SAFETY: a live CQ.
    let cq = unsafe { OxeCq::from_ib(ib) };
    // SAFETY: `msg` is the message the core builds for this CQ.
    unsafe { super::put_driver_u64s(msg, cq.res_details()) }
}

/// # Safety
///
/// Called by the RDMA core for a live CQ.
pub(super) unsafe extern "C" fn req_notify_cq(
    ib: *mut b::ib_cq,
    flags: b::ib_cq_notify_flags,
) -> c_int {
    // SAFETY: a live CQ.
    let cq = unsafe { OxeCq::from_ib(ib) };
    c_int::from(cq.req_notify(flags))
}

/// # Safety
///
/// Called by the RDMA core for a live user CQ and the command's udata.
pub(super) unsafe extern "C" fn resize_user_cq(
    ib: *mut b::ib_cq,
    cqe: c_uint,
    udata: *mut b::ib_udata,
) -> c_int {
    // SAFETY: a live CQ of a live device, and the command's udata.
    let (cq, dev, udata) = unsafe {
        (
            OxeCq::from_ib(ib),
            OxeDevice::from_ib((*ib).device),
            Udata::from_raw(udata),
        )
    };
    to_c(cq.resize(cqe, udata.as_ref(), dev.mmap_offsets()))
}

/// # Safety
///
/// Called by the RDMA core for a live kernel CQ with room for `n` entries.
pub(super) unsafe extern "C" fn poll_cq(ib: *mut b::ib_cq, n: c_int, wc: *mut b::ib_wc) -> c_int {
    // SAFETY: a live CQ.
    let cq = unsafe { from_ib::<OxeCq>(ib) };
    let n = match usize::try_from(n) {
        Ok(n) if n > 0 && !wc.is_null() => n,
        _ => return 0,
    };
    // The entries may be uninitialised, hence `MaybeUninit`.
    // SAFETY: the caller's array of `n` entries, ours to write for the call.
    let out = unsafe { core::slice::from_raw_parts_mut(wc.cast::<MaybeUninit<b::ib_wc>>(), n) };
    cq.poll(out) as c_int
}
