// SPDX-License-Identifier: GPL-2.0

//! PD entry points.

use kernel::ffi::c_int;

use super::{from_ib, init_in_place};
use crate::access::PdId;
use crate::bindings as b;
use crate::ib::udata::{self, Udata};
use crate::pd::OxePd;

/// A PD's identity for access checks.
///
/// # Safety
///
/// `pd` is a live PD of an oxe device.
pub(crate) unsafe fn id(pd: *const b::ib_pd) -> PdId {
    // SAFETY: per the function's contract; set by `alloc_pd`.
    unsafe { from_ib::<OxePd>(pd.cast_mut()) }.id()
}

/// # Safety
///
/// Called by the RDMA core with a zeroed PD of `size_ib_pd` bytes.
pub(super) unsafe extern "C" fn alloc_pd(pd: *mut b::ib_pd, udata: *mut b::ib_udata) -> c_int {
    // SAFETY: `udata` is NULL or the command's udata.
    let udata = unsafe { Udata::from_raw(udata) };
    if let Err(e) = udata::in_empty(udata.as_ref()) {
        return e.to_errno();
    }
    // SAFETY: process context, as the core allocated the PD with GFP_KERNEL.
    let id = unsafe { b::oxe_pd_id_alloc() };
    if id < 0 {
        return id;
    }
    // SAFETY: the PD is ours, `size_ib_pd` bytes, not yet visible to anyone; a `PdId` needs no drop.
    let Ok(()) = unsafe { init_in_place::<OxePd, _>(pd, id as PdId) };
    0
}

/// # Safety
///
/// Called by the RDMA core once every object of the PD is gone.
pub(super) unsafe extern "C" fn dealloc_pd(pd: *mut b::ib_pd, _udata: *mut b::ib_udata) -> c_int {
    // No MR or QP of the PD is left to present the id: it may be reused.
    // SAFETY: a live PD, set up by `alloc_pd`.
    unsafe { b::oxe_pd_id_free(id(pd)) };
    0
}
