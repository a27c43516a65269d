// SPDX-License-Identifier: GPL-2.0

//! Protection domains. A PD is only an identity: every key check compares
//! the registration's PD with the one presented.

use kernel::ffi::c_int;

use crate::access::PdId;
use crate::bindings as b;

#[repr(C)]
pub(crate) struct OxePd {
    ib: b::ib_pd,
    /// Unique among live PDs, and small: a user MR keeps it in one atomic
    /// word with its rights (`access::PdRights`).
    id: PdId,
}

/// A PD's identity for access checks.
///
/// # Safety
///
/// `pd` is a live PD of an oxe device.
pub(crate) unsafe fn id(pd: *const b::ib_pd) -> PdId {
    // `ib` is the first field of the `repr(C)` OxePd.
    // SAFETY: per the function's contract; set by `alloc_pd`.
    unsafe { (*pd.cast::<OxePd>()).id }
}

/// # Safety
///
/// Called by the RDMA core with a zeroed PD of `size_ib_pd` bytes.
pub(crate) unsafe extern "C" fn alloc_pd(pd: *mut b::ib_pd, udata: *mut b::ib_udata) -> c_int {
    // SAFETY: `udata` is NULL or the command's udata.
    let ret = unsafe { b::oxe_udata_in_empty(udata) };
    if ret != 0 {
        return ret;
    }
    // SAFETY: process context, as the core allocated the PD with GFP_KERNEL.
    let id = unsafe { b::oxe_pd_id_alloc() };
    if id < 0 {
        return id;
    }
    // SAFETY: the PD is ours, `size_ib_pd` bytes, not yet visible to anyone.
    unsafe { (*pd.cast::<OxePd>()).id = id as PdId };
    0
}

/// # Safety
///
/// Called by the RDMA core once every object of the PD is gone.
pub(crate) unsafe extern "C" fn dealloc_pd(pd: *mut b::ib_pd, _udata: *mut b::ib_udata) -> c_int {
    // No MR or QP of the PD is left to present the id: it may be reused.
    // SAFETY: a live PD, set up by `alloc_pd`.
    unsafe { b::oxe_pd_id_free(id(pd)) };
    0
}
