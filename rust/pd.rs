// SPDX-License-Identifier: GPL-2.0

//! Protection domains. A PD is only an identity: every key check compares
//! the registration's PD with the one presented.

use kernel::ffi::c_int;

use crate::bindings as b;

#[repr(C)]
pub(crate) struct OxePd {
    ib: b::ib_pd,
}

/// A PD's identity for access checks.
pub(crate) fn id(pd: *const b::ib_pd) -> u64 {
    pd as usize as u64
}

/// # Safety
///
/// Called by the RDMA core with a zeroed PD of `size_ib_pd` bytes.
pub(crate) unsafe extern "C" fn alloc_pd(_pd: *mut b::ib_pd, udata: *mut b::ib_udata) -> c_int {
    // SAFETY: `udata` is NULL or the command's udata.
    unsafe { b::oxe_udata_in_empty(udata) }
}

/// # Safety
///
/// Called by the RDMA core once every object of the PD is gone.
pub(crate) unsafe extern "C" fn dealloc_pd(_pd: *mut b::ib_pd, _udata: *mut b::ib_udata) -> c_int {
    0
}
