// SPDX-License-Identifier: GPL-2.0

//! SRQ entry points.

use core::ptr::NonNull;

use kernel::ffi::c_int;
use kernel::prelude::*;
use kernel::sync::atomic::{ordering, Atomic};
use kernel::sync::Arc;

use super::{drop_in_place, from_ib, init_in_place, to_c};
use crate::bindings as b;
use crate::device::OxeDevice;
use crate::ib::srq::SrqHandle;
use crate::ib::Udata;
use crate::params;
use crate::srq::{OxeSrq, Srq};

/// SRQ numbers, as rxe hands them out (from RXE_MIN_SRQ_INDEX); librxe
/// keeps the number, nothing looks an SRQ up by it.
static NEXT_SRQ_NUM: Atomic<u32> = Atomic::new(params::MIN_SRQ_INDEX);

/// The SRQ of a QP being created.
///
/// # Safety
///
/// `srq` is a live SRQ of an oxe device.
pub(crate) unsafe fn srq(srq: *mut b::ib_srq) -> Arc<Srq> {
    // SAFETY: per the function's contract; set by `create_srq`.
    unsafe { from_ib::<OxeSrq>(srq) }.srq.clone()
}

/// # Safety
///
/// Called by the RDMA core with a zeroed SRQ of `size_ib_srq` bytes whose
/// device and PD it filled in, valid init attributes, and NULL or the
/// command's udata.
pub(super) unsafe extern "C" fn create_srq(
    ib: *mut b::ib_srq,
    init: *mut b::ib_srq_init_attr,
    udata: *mut b::ib_udata,
) -> c_int {
    // SAFETY: per the function's contract.
    let (dev, pd, init, udata) = unsafe {
        (
            OxeDevice::from_ib((*ib).device),
            (*ib).pd,
            &mut *init,
            Udata::from_raw(udata),
        )
    };
    if init.srq_type != b::ib_srq_type_IB_SRQT_BASIC {
        return crate::eopnotsupp().to_errno();
    }
    if let Some(u) = &udata {
        // librxe sends no request data.
        if u.inlen() != 0 {
            return EINVAL.to_errno();
        }
        if let Err(e) = u.require_out::<b::rxe_create_srq_resp>() {
            return e.to_errno();
        }
    }
    let num = NEXT_SRQ_NUM.fetch_add(1, ordering::Relaxed);
    // SAFETY: the core filled in the SRQ's PD, an oxe PD; `ib` is the SRQ being created, valid until its destroy returns.
    let (pd, handle) = unsafe {
        (
            super::pd::id(pd),
            SrqHandle::new(NonNull::new_unchecked(ib)),
        )
    };
    let srq = match Srq::create(num, pd, &mut init.attr, udata.is_some(), handle) {
        Ok(srq) => srq,
        Err(e) => return e.to_errno(),
    };
    if let Some(u) = &udata {
        // Offered last: nothing else can fail after it.
        if let Err(e) = srq.respond_user(u, dev.mmap_offsets()) {
            srq.withdraw(Some(u));
            return e.to_errno();
        }
    }
    // SAFETY: fresh memory the core allocated for an OxeSrq, seen by no one else yet; the core calls `destroy_srq` only if this verb succeeds.
    match unsafe { init_in_place::<OxeSrq, core::convert::Infallible>(ib, srq) } {
        Ok(()) => 0,
        Err(e) => match e {},
    }
}

/// # Safety
///
/// Called by the RDMA core for a live SRQ with valid attributes.
pub(super) unsafe extern "C" fn modify_srq(
    ib: *mut b::ib_srq,
    attr: *mut b::ib_srq_attr,
    mask: b::ib_srq_attr_mask,
    udata: *mut b::ib_udata,
) -> c_int {
    // SAFETY: a live SRQ of an oxe device, the core's attributes, and NULL or the command's udata.
    let (srq, a, dev, udata) = unsafe {
        (
            &from_ib::<OxeSrq>(ib).srq,
            &*attr,
            OxeDevice::from_ib((*ib).device),
            Udata::from_raw(udata),
        )
    };
    to_c(srq.modify(a, mask, udata.as_ref(), dev.mmap_offsets()))
}

/// # Safety
///
/// Called by the RDMA core for a live SRQ with a writable output.
pub(super) unsafe extern "C" fn query_srq(ib: *mut b::ib_srq, attr: *mut b::ib_srq_attr) -> c_int {
    // SAFETY: a live SRQ and the caller's output.
    let (srq, a) = unsafe { (&from_ib::<OxeSrq>(ib).srq, &mut *attr) };
    srq.query(a);
    0
}

/// # Safety
///
/// Called by the RDMA core (`rdma res show srq -dd`) for a live SRQ, with the
/// message it builds for it.
pub(super) unsafe extern "C" fn fill_res_srq_entry(
    msg: *mut b::sk_buff,
    ib: *mut b::ib_srq,
) -> c_int {
    // SAFETY: a live SRQ.
    let srq = unsafe { &from_ib::<OxeSrq>(ib).srq };
    // SAFETY: `msg` is the message the core builds for this SRQ.
    unsafe { super::put_driver_u64s(msg, srq.res_details()) }
}

/// # Safety
///
/// Called by the RDMA core for a live SRQ no QP uses any more, once.
pub(super) unsafe extern "C" fn destroy_srq(ib: *mut b::ib_srq, udata: *mut b::ib_udata) -> c_int {
    // SAFETY: a live SRQ; `udata` NULL or the command's.
    let (srq, udata) = unsafe { (&from_ib::<OxeSrq>(ib).srq, Udata::from_raw(udata)) };
    srq.withdraw(udata.as_ref());
    // SAFETY: last use; the core frees the memory after this returns.
    unsafe { drop_in_place::<OxeSrq>(ib) };
    0
}

/// Kernel receive posting (user SRQs write their ring directly).
///
/// # Safety
///
/// Called by the RDMA core for a live SRQ with a kernel WR chain.
pub(super) unsafe extern "C" fn post_srq_recv(
    ib: *mut b::ib_srq,
    wr: *const b::ib_recv_wr,
    bad: *mut *const b::ib_recv_wr,
) -> c_int {
    // SAFETY: a live SRQ.
    let srq = unsafe { &from_ib::<OxeSrq>(ib).srq };
    let mut cur = wr;
    while !cur.is_null() {
        // SAFETY: a WR of the caller's chain, live during the call.
        let w = unsafe { &*cur };
        let (list, n) = (w.sg_list, w.num_sge as u32);
        // SAFETY: `list` has `n` SGEs, live during the call.
        let sges = move |i| unsafe { super::qp::sge(list, n, i) };
        // SAFETY: plain integer member of a union.
        let wr_id = unsafe { *w.__bindgen_anon_1.wr_id.as_ref() };
        if let Err(e) = srq.post(wr_id, n, &sges) {
            if !bad.is_null() {
                // SAFETY: the caller's out pointer.
                unsafe { *bad = cur };
            }
            return e.to_errno();
        }
        cur = w.next;
    }
    0
}
