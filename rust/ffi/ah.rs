// SPDX-License-Identifier: GPL-2.0

//! AH entry points. The core may create and destroy AHs in atomic context
//! (kernel clients without RDMA_CREATE_AH_SLEEPABLE): nothing here sleeps.

use kernel::ffi::c_int;
use kernel::prelude::*;

use super::{drop_in_place, from_ib, init_in_place};
use crate::ah::{Ah, OxeAh, AH_ATTR_SIZE};
use crate::bindings as b;
use crate::device::{check_port, OxeDevice};
use crate::ib::udata::Udata;
use crate::ib::{self, qp::ah_av};

/// The AH of a kernel client's UD work request.
///
/// # Safety
///
/// `ah` is a live AH of an oxe device.
pub(crate) unsafe fn num(ah: *mut b::ib_ah) -> u32 {
    // SAFETY: per the function's contract; set by `create_ah`.
    unsafe { from_ib::<OxeAh>(ah) }.ah.num
}

/// `create_ah` and `create_user_ah`: rdma_rxe's checks (a GRH with a RoCE
/// source GID, the port), then the AH under a new number, which a user
/// context gets back in `rxe_create_ah_resp`.
///
/// # Safety
///
/// Called by the RDMA core with a zeroed AH of `size_ib_ah` bytes whose
/// device and PD it filled in, valid init attributes, and NULL or the
/// command's udata.
pub(super) unsafe extern "C" fn create_ah(
    ib: *mut b::ib_ah,
    init: *mut b::rdma_ah_init_attr,
    udata: *mut b::ib_udata,
) -> c_int {
    // SAFETY: the function's contract; `ah_attr` is the core's, live during the call.
    let (dev, pd, attr, udata) = unsafe {
        (
            OxeDevice::from_ib((*ib).device),
            (*ib).pd,
            &*(*init).ah_attr,
            Udata::from_raw(udata),
        )
    };
    let Some(state) = dev.state() else {
        return ENODEV.to_errno();
    };
    if let Err(e) = check_port(attr.port_num) {
        return e.to_errno();
    }
    // RoCE: every AH has a GRH, and its source GID is one of the port's
    // RoCEv2 GIDs (the core resolved it, or refused an unknown index).
    let Some(av) = ah_av(attr) else {
        return EINVAL.to_errno();
    };
    // librxe v34+ reads the number from the response; an older one (no
    // room for it) puts the address vector in each WQE, which oxe does not
    // take: refuse it here rather than fail every send.
    if let Some(u) = &udata {
        if let Err(e) = u.require_out::<b::rxe_create_ah_resp>() {
            return e.to_errno();
        }
    }
    let mut bytes = [0u8; AH_ATTR_SIZE];
    bytes.copy_from_slice(ib::as_bytes(attr));
    // SAFETY: the core filled in the AH's PD, an oxe PD.
    let pd = unsafe { super::pd::id(pd) };
    let ah = match state.ahs.insert(|num| Ah {
        num,
        pd,
        av,
        attr: bytes,
    }) {
        Ok(ah) => ah,
        Err(e) => return e.to_errno(),
    };
    if let Some(u) = &udata {
        let mut resp: b::rxe_create_ah_resp = pin_init::zeroed();
        resp.ah_num = ah.num;
        if let Err(e) = u.respond(&resp) {
            state.ahs.remove(ah.num);
            return e.to_errno();
        }
    }
    // The core calls `destroy_ah` only if this verb succeeds.
    // SAFETY: fresh memory the core allocated for an OxeAh, seen by no one else yet.
    match unsafe { init_in_place::<OxeAh, core::convert::Infallible>(ib, ah) } {
        Ok(()) => 0,
        Err(e) => match e {},
    }
}

/// # Safety
///
/// Called by the RDMA core for a live AH with a writable output.
pub(super) unsafe extern "C" fn query_ah(ib: *mut b::ib_ah, attr: *mut b::rdma_ah_attr) -> c_int {
    // SAFETY: a live AH and the caller's output.
    let (ah, out) = unsafe { (&from_ib::<OxeAh>(ib).ah, &mut *attr) };
    ib::as_bytes_mut(out).copy_from_slice(&ah.attr);
    // The source GID's attribute was the core's for the create call only.
    out.grh.sgid_attr = core::ptr::null();
    0
}

/// # Safety
///
/// Called by the RDMA core for a live AH, once.
pub(super) unsafe extern "C" fn destroy_ah(ib: *mut b::ib_ah, _flags: u32) -> c_int {
    // SAFETY: a live AH, set up by `create_ah`.
    let (dev, num) = unsafe {
        (
            OxeDevice::from_ib((*ib).device),
            from_ib::<OxeAh>(ib).ah.num,
        )
    };
    if let Some(state) = dev.state() {
        state.ahs.remove(num);
    }
    // SAFETY: last use; the core frees the memory after this returns.
    unsafe { drop_in_place::<OxeAh>(ib) };
    0
}
