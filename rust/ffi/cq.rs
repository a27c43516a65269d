// SPDX-License-Identifier: GPL-2.0

//! CQ entry points, and what touches the core's `ib_cq`: its `cqe` count,
//! its device, its completion handler and event, the `ib_wc` formats.

use core::mem::MaybeUninit;

use kernel::ffi::{c_int, c_uint};

use super::udata::Udata;
use super::{drop_in_place, from_ib, ib_ptr, init_in_place, to_c};
use crate::bindings as b;
use crate::cq::{CqState, Cqe, OxeCq};
use crate::device::OxeDevice;

impl OxeCq {
    /// # Safety
    ///
    /// `ib` must be a live oxe CQ.
    pub(crate) unsafe fn from_ib<'a>(ib: *mut b::ib_cq) -> &'a OxeCq {
        // SAFETY: per the function's contract; `create_cq` initialised it.
        unsafe { from_ib(ib) }
    }

    pub(crate) fn ib(&self) -> *mut b::ib_cq {
        ib_ptr(self)
    }

    /// The device the CQ belongs to.
    pub(crate) fn device(&self) -> &OxeDevice {
        // SAFETY: the core sets `device` before `create_cq` and never changes
        // it; the device outlives its CQs.
        unsafe { OxeDevice::from_ib((*self.ib()).device) }
    }

    /// Tells the core the ring's usable entries (`ib_cq.cqe`), after a
    /// resize. The core reads it only in the verbs of this CQ.
    pub(crate) fn publish_cqe(&self, n: u32) {
        // SAFETY: a live CQ; an aligned int the core reads only in the CQ's
        // verbs, after they return.
        unsafe { (*self.ib()).cqe = n as c_int };
    }

    /// Runs the consumer's completion handler.
    pub(crate) fn comp_handler(&self) {
        // SAFETY: a live CQ; called with none of its locks held.
        unsafe { b::oxe_cq_comp_handler(self.ib()) };
    }

    /// Reports an asynchronous event to the consumer.
    pub(crate) fn event(&self, ty: b::ib_event_type) {
        // SAFETY: a live CQ; called with none of its locks held.
        unsafe { b::oxe_cq_event(self.ib(), ty) };
    }
}

/// `cqe` as user CQs carry it: `struct ib_uverbs_wc`.
pub(crate) fn uverbs_wc(cqe: &Cqe) -> b::ib_uverbs_wc {
    let mut wc: b::ib_uverbs_wc = pin_init::zeroed();
    wc.wr_id = cqe.wr_id;
    wc.status = cqe.status;
    wc.opcode = cqe.opcode;
    wc.byte_len = cqe.byte_len;
    // SAFETY: writing a plain integer member of the union.
    unsafe { *wc.ex.imm_data.as_mut() = cqe.ex };
    wc.qp_num = cqe.qp_num;
    wc.src_qp = cqe.src_qp;
    wc.wc_flags = cqe.wc_flags;
    wc.port_num = 1;
    wc
}

/// `cqe` as kernel CQs carry it: `struct ib_wc`.
pub(crate) fn kernel_wc(cqe: &Cqe) -> b::ib_wc {
    let mut wc: b::ib_wc = pin_init::zeroed();
    // SAFETY: writing plain integer members of the unions.
    unsafe {
        *wc.__bindgen_anon_1.wr_id.as_mut() = cqe.wr_id;
        *wc.ex.imm_data.as_mut() = cqe.ex;
    }
    wc.status = cqe.status;
    wc.opcode = cqe.opcode;
    wc.byte_len = cqe.byte_len;
    wc.qp = cqe.qp;
    wc.src_qp = cqe.src_qp;
    wc.wc_flags = cqe.wc_flags as c_int;
    wc.port_num = 1;
    wc
}

/// # Safety
///
/// Called by the RDMA core with a zeroed CQ of `size_ib_cq` bytes.
pub(super) unsafe extern "C" fn create_cq(
    ib: *mut b::ib_cq,
    attr: *const b::ib_cq_init_attr,
    attrs: *mut b::uverbs_attr_bundle,
) -> c_int {
    // SAFETY: the core passes valid attributes, and `attrs` NULL for kernel
    // CQs or the command's bundle, whose driver udata lives as long.
    let (attr, udata) = unsafe { (&*attr, Udata::from_raw(b::oxe_attrs_udata(attrs))) };
    let init = match CqState::new(attr.cqe, attr.flags, udata.as_ref()) {
        Ok(init) => init,
        Err(e) => return e.to_errno(),
    };
    // SAFETY: fresh memory the core allocated for an OxeCq, seen by no one
    // else yet; the core calls `destroy_cq` only if this verb succeeds.
    if let Err(e) = unsafe { init_in_place::<OxeCq, _>(ib, init) } {
        return e.to_errno();
    }
    // SAFETY: initialised just above.
    let cq = unsafe { OxeCq::from_ib(ib) };
    cq.publish_cqe(cq.capacity());
    if let Some(u) = &udata {
        // Offered last: a create that fails after the offer withdraws it.
        if let Err(e) = cq.respond_user(u) {
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
    // SAFETY: a live CQ `create_cq` set up; `udata` is NULL for kernel CQs or
    // the destroy command's (or the core's cleanup's).
    let (cq, udata) = unsafe { (OxeCq::from_ib(ib), Udata::from_raw(udata)) };
    cq.withdraw(udata.as_ref());
    // Frees the ring (vfree sleeps): outside the CQ's spinlock.
    // SAFETY: last use; the core frees the memory after this returns.
    unsafe { drop_in_place::<OxeCq>(ib) };
    0
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
    // SAFETY: a live CQ and the command's udata.
    let (cq, udata) = unsafe { (OxeCq::from_ib(ib), Udata::from_raw(udata)) };
    to_c(cq.resize(cqe, udata.as_ref()))
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
    // SAFETY: the caller's array of `n` entries, ours to write for the call
    // (maybe uninitialised, hence `MaybeUninit`).
    let out = unsafe { core::slice::from_raw_parts_mut(wc.cast::<MaybeUninit<b::ib_wc>>(), n) };
    cq.poll(out) as c_int
}
