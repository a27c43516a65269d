// SPDX-License-Identifier: GPL-2.0

//! The one place where the RDMA core calls oxe: the `ib_device_ops` table and
//! every `extern "C"` entry point in it.
//!
//! The pattern, for every verb:
//!
//! 1. The entry point (`ffi/<object>.rs`) is an `unsafe extern "C" fn` whose
//!    contract is the core's: live objects of this driver, writable outputs.
//! 2. It converts each raw pointer once, in a block with a `// SAFETY:`
//!    comment: an `ib_*` object to the oxe object around it
//!    ([`from_ib`]), a udata to a [`Udata`], an output to a `&mut`.
//! 3. It calls safe methods of the domain object (`device`, `pd`, `mr`, `cq`, `qp`),
//!    which never see a raw pointer of the core, and turns their `Result` into
//!    the core's convention ([`to_c`], [`to_c_ptr`]).
//!
//! Objects the core allocates (`size_ib_*`) embed the core's struct at offset
//! 0 as an `Opaque` (the core writes it while oxe holds references), which
//! [`core_object!`] asserts at compile time; the driver's part is initialised
//! in place ([`init_in_place`]) in the core's zeroed memory and dropped in
//! place ([`drop_in_place`]) by the matching destroy verb.
//!
//! Adding a verb (the MW's are next), as `ffi/qp.rs` does:
//!
//! - In the domain file, the object is `#[repr(C)]` with the core's struct
//!   first, as `Opaque`, and the driver's part after it, declared with
//!   `ib::core_object!(OxeQp, ib: b::ib_qp, qp: Arc<Qp>)` (no `Option`: the
//!   create verb initialises it in place, the destroy verb drops it in place).
//! - In `ffi/<object>.rs`, each `unsafe extern "C" fn` has one `// SAFETY:`
//!   block that yields the oxe object, `&*attr`, `Udata::from_raw(udata)`,
//!   then calls a safe method and returns `to_c(..)`.
//! - What the object needs of the core at run time (its events, its handle
//!   for work completions, references to the device's tables) goes through
//!   `ib/` (`QpHandle`, `CoreRef`), which sits below the objects.
//! - Domain methods take `Option<&Udata<'_>>` (`None` for kernel callers) and
//!   use `udata::in_empty`, `Udata::require_out`, `Udata::respond`,
//!   `Udata::ucontext` and `queue::withdraw_from`.
//! - The verb is registered in [`device_ops`].

use core::mem::size_of;

use kernel::ffi::c_int;
use kernel::prelude::*;

use crate::ah::OxeAh;
use crate::bindings as b;
use crate::cq::OxeCq;
use crate::device::OxeUcontext;
use crate::mw::OxeMw;
use crate::params;
use crate::pd::OxePd;
use crate::qp::OxeQp;
use crate::srq::OxeSrq;

pub(crate) mod ah;
pub(crate) mod cq;
pub(crate) mod device;
pub(crate) mod link;
pub(crate) mod mr;
pub(crate) mod mw;
pub(crate) mod net;
pub(crate) mod pd;
pub(crate) mod qp;
pub(crate) mod srq;

pub(crate) use crate::ib::{drop_in_place, from_ib, ib_ptr, init_in_place, CoreRef};

/// The core's convention for verbs that return an int: 0 or a negative errno.
pub(crate) fn to_c(r: Result) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// ERR_PTR of `e`.
pub(crate) fn err_ptr<T>(e: Error) -> *mut T {
    // SAFETY: ERR_PTR only encodes a negative errno into a pointer.
    unsafe { b::ERR_PTR(e.to_errno() as isize).cast() }
}

/// The core's convention for verbs that return an object: it, or ERR_PTR.
pub(crate) fn to_c_ptr<T>(r: Result<*mut T>) -> *mut T {
    r.unwrap_or_else(err_ptr)
}

/// `rdma res show ... -dd`: the driver's details of an object, a nest of
/// named u64 attributes in the message being built.
///
/// # Safety
///
/// `msg` is the netlink message the core is building for the object.
pub(crate) unsafe fn put_driver_u64s<'a>(
    msg: *mut b::sk_buff,
    attrs: impl IntoIterator<Item = (&'a core::ffi::CStr, u64)>,
) -> c_int {
    // SAFETY: per the function's contract.
    let nest = unsafe { b::oxe_nl_driver_nest_start(msg) };
    if nest.is_null() {
        return EMSGSIZE.to_errno();
    }
    for (name, v) in attrs {
        // SAFETY: `msg` is the message being built; the name is NUL-terminated.
        let ret = unsafe { b::rdma_nl_put_driver_u64(msg, name.as_char_ptr(), v) };
        if ret != 0 {
            // SAFETY: `nest` was opened on `msg` above.
            unsafe { b::oxe_nl_nest_cancel(msg, nest) };
            return ret;
        }
    }
    // SAFETY: as above.
    unsafe { b::oxe_nl_nest_end(msg, nest) };
    0
}

/// The verbs of an oxe device, for `ib_set_device_ops`.
pub(crate) fn device_ops() -> b::ib_device_ops {
    let mut ops: b::ib_device_ops = pin_init::zeroed();
    ops.owner = crate::THIS_MODULE.as_ptr();
    ops.driver_id = b::rdma_driver_id_RDMA_DRIVER_RXE;
    ops.uverbs_abi_ver = params::UVERBS_ABI_VERSION;
    // SAFETY: returns the address of a static attribute group.
    ops.device_group = unsafe { b::oxe_device_group() };
    // Device and port.
    ops.query_device = Some(device::query_device);
    ops.query_port = Some(device::query_port);
    ops.get_port_immutable = Some(device::get_port_immutable);
    ops.get_link_layer = Some(device::get_link_layer);
    ops.query_pkey = Some(device::query_pkey);
    ops.alloc_hw_port_stats = Some(device::alloc_hw_port_stats);
    ops.get_hw_stats = Some(device::get_hw_stats);
    ops.process_mad = Some(device::process_mad);
    ops.dealloc_driver = Some(device::dealloc_driver);
    // Ucontext and mmap.
    ops.alloc_ucontext = Some(device::alloc_ucontext);
    ops.dealloc_ucontext = Some(device::dealloc_ucontext);
    ops.size_ib_ucontext = size_of::<OxeUcontext>();
    ops.mmap = Some(device::mmap);
    ops.disassociate_ucontext = Some(device::disassociate_ucontext);
    // PD.
    ops.alloc_pd = Some(pd::alloc_pd);
    ops.dealloc_pd = Some(pd::dealloc_pd);
    ops.size_ib_pd = size_of::<OxePd>();
    // AH (UD address handles).
    ops.create_ah = Some(ah::create_ah);
    ops.create_user_ah = Some(ah::create_ah);
    ops.query_ah = Some(ah::query_ah);
    ops.destroy_ah = Some(ah::destroy_ah);
    ops.size_ib_ah = size_of::<OxeAh>();
    // MR.
    ops.reg_user_mr = Some(mr::reg_user_mr);
    ops.dereg_mr = Some(mr::dereg_mr);
    ops.rereg_user_mr = Some(mr::rereg_user_mr);
    ops.advise_mr = Some(mr::advise_mr);
    ops.reg_user_mr_dmabuf = Some(mr::reg_user_mr_dmabuf);
    ops.get_dma_mr = Some(mr::get_dma_mr);
    ops.alloc_mr = Some(mr::alloc_mr);
    ops.map_mr_sg = Some(mr::map_mr_sg);
    ops.fill_res_mr_entry = Some(mr::fill_res_mr_entry);

    ops.alloc_mw = Some(mw::alloc_mw);
    ops.dealloc_mw = Some(mw::dealloc_mw);
    ops.size_ib_mw = size_of::<OxeMw>();
    // CQ.
    ops.create_cq = Some(cq::create_cq);
    ops.destroy_cq = Some(cq::destroy_cq);
    ops.req_notify_cq = Some(cq::req_notify_cq);
    ops.poll_cq = Some(cq::poll_cq);
    ops.resize_user_cq = Some(cq::resize_user_cq);
    ops.fill_res_cq_entry = Some(cq::fill_res_cq_entry);
    ops.size_ib_cq = size_of::<OxeCq>();
    // QP.
    ops.create_qp = Some(qp::create_qp);
    ops.modify_qp = Some(qp::modify_qp);
    ops.query_qp = Some(qp::query_qp);
    ops.destroy_qp = Some(qp::destroy_qp);
    ops.post_send = Some(qp::post_send);
    ops.post_recv = Some(qp::post_recv);
    ops.fill_res_qp_entry = Some(qp::fill_res_qp_entry);
    ops.attach_mcast = Some(qp::attach_mcast);
    ops.detach_mcast = Some(qp::detach_mcast);
    ops.size_ib_qp = size_of::<OxeQp>();
    // SRQ.
    ops.create_srq = Some(srq::create_srq);
    ops.modify_srq = Some(srq::modify_srq);
    ops.query_srq = Some(srq::query_srq);
    ops.destroy_srq = Some(srq::destroy_srq);
    ops.post_srq_recv = Some(srq::post_srq_recv);
    ops.fill_res_srq_entry = Some(srq::fill_res_srq_entry);
    ops.size_ib_srq = size_of::<OxeSrq>();
    ops
}
