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
//! 3. It calls safe methods of the domain object (`device`, `pd`, `mr`, `cq`),
//!    which never see a raw pointer of the core, and turns their `Result` into
//!    the core's convention ([`to_c`], [`to_c_ptr`]).
//!
//! Objects the core allocates (`size_ib_*`) embed the core's struct at offset
//! 0 as an `Opaque` (the core writes it while oxe holds references), which
//! [`core_object!`] asserts at compile time; the driver's part is initialised
//! in place ([`init_in_place`]) in the core's zeroed memory and dropped in
//! place ([`drop_in_place`]) by the matching destroy verb.
//!
//! Porting a verb here (the QP's are next), as `ffi/cq.rs` does for the CQ:
//!
//! - In the domain file, the object becomes
//!   `#[repr(C)] struct OxeQp { ib: Opaque<b::ib_qp>, qp: Arc<Qp> }` followed
//!   by `ffi::core_object!(OxeQp, ib: b::ib_qp, qp: Arc<Qp>);` (no `Option`:
//!   `create_qp` initialises `qp` in place with
//!   `init_in_place::<OxeQp, _>(ib, value)`, `destroy_qp` ends with
//!   `drop_in_place::<OxeQp>(ib)`).
//! - In `ffi/qp.rs`, each `unsafe extern "C" fn` has one `// SAFETY:` block
//!   that yields `from_ib::<OxeQp>(ib)`, `&*attr`, `Udata::from_raw(udata)`,
//!   then calls a safe method and returns `to_c(..)`.
//! - Core fields the domain needs (`ib_qp.qp_num`, its device, its events)
//!   become safe methods in `impl OxeQp` blocks of `ffi/qp.rs`, as
//!   `OxeCq::device` and `OxeCq::publish_cqe` are for the CQ.
//! - Domain methods take `Option<&Udata<'_>>` (`None` for kernel callers) and
//!   use `udata::in_empty`, `Udata::require_out`, `Udata::respond`,
//!   `Udata::ucontext` and `queue::withdraw_from`.
//! - The verb is registered in [`device_ops`].

use core::mem::size_of;
use core::ptr::{self, NonNull};

use kernel::ffi::c_int;
use kernel::prelude::*;

use crate::bindings as b;
use crate::cq::OxeCq;
use crate::device::OxeUcontext;
use crate::params;
use crate::pd::OxePd;
use crate::qp::OxeQp;

pub(crate) mod cq;
pub(crate) mod device;
pub(crate) mod mr;
pub(crate) mod pd;
pub(crate) mod qp;
pub(crate) mod udata;

pub(crate) use udata::Udata;

/// An oxe object that embeds the core's `Ib` struct at offset 0, so that a
/// pointer to one is a pointer to the other. Implemented by [`core_object!`],
/// which checks the layout at compile time.
///
/// # Safety
///
/// `Self` has a field of type `Opaque<Self::Ib>` at offset 0.
pub(crate) unsafe trait CoreObject: Sized {
    /// The core's struct (`ib_cq`, `ib_pd`, ...).
    type Ib;
}

/// A [`CoreObject`] the core allocates (`size_ib_*` of the ops table, or
/// `ib_alloc_device`), zeroed: the driver's part, of type `Data`, is
/// initialised in place after the allocation and dropped in place before the
/// core frees the memory.
///
/// # Safety
///
/// `Self` has a field of type `Self::Data` at offset `DATA_OFFSET`.
pub(crate) unsafe trait CoreAllocated: CoreObject {
    /// The part of the object the driver owns.
    type Data;
    /// Where it is in the object.
    const DATA_OFFSET: usize;
}

/// Declares that `$ty` embeds the core's `$ibty` as `Opaque` in the field
/// `$ib`, and (second form) that the core allocates it, the driver's part
/// being the field `$data`. Fails to compile unless `$ib` is at offset 0 and
/// the fields have the types given (rdma_rxe's `INIT_RDMA_OBJ_SIZE` check).
macro_rules! core_object {
    ($ty:ty, $ib:ident: $ibty:ty) => {
        const _: () = assert!(::core::mem::offset_of!($ty, $ib) == 0);
        const _: fn(&$ty) -> &::kernel::types::Opaque<$ibty> = |o| &o.$ib;
        // SAFETY: the field `$ib` is an `Opaque<$ibty>` at offset 0, as
        // checked by the two constants above.
        unsafe impl $crate::ffi::CoreObject for $ty {
            type Ib = $ibty;
        }
    };
    ($ty:ty, $ib:ident: $ibty:ty, $data:ident: $dataty:ty) => {
        $crate::ffi::core_object!($ty, $ib: $ibty);
        const _: fn(&$ty) -> &$dataty = |o| &o.$data;
        // SAFETY: `$data` is a `$dataty` (checked above) at the offset given.
        unsafe impl $crate::ffi::CoreAllocated for $ty {
            type Data = $dataty;
            const DATA_OFFSET: usize = ::core::mem::offset_of!($ty, $data);
        }
    };
}
pub(crate) use core_object;

/// The oxe object around the core's `ib`.
///
/// # Safety
///
/// `ib` points to the `ib_*` of a live `T` (one of this driver's objects,
/// with its driver part initialised), which outlives `'a`.
pub(crate) unsafe fn from_ib<'a, T: CoreObject>(ib: *mut T::Ib) -> &'a T {
    // SAFETY: `T::Ib` is at offset 0 of `T` (the trait's contract), and the
    // object is live and initialised (the function's).
    unsafe { &*ib.cast::<T>() }
}

/// The core's struct inside an oxe object: for calls into the core.
pub(crate) fn ib_ptr<T: CoreObject>(obj: &T) -> *mut T::Ib {
    // `T::Ib` is at offset 0, inside an `Opaque` (the trait's contract).
    ptr::from_ref(obj).cast_mut().cast()
}

/// Initialises the driver's part of an object the core just allocated.
///
/// # Safety
///
/// `ib` points to the `ib_*` of a `T`'s worth of memory the core allocated,
/// whose driver part is not initialised and not seen by anyone else yet. On
/// success, the driver part must be dropped with [`drop_in_place`] before
/// the core frees the memory; on failure it is left uninitialised.
pub(crate) unsafe fn init_in_place<T: CoreAllocated, E>(
    ib: *mut T::Ib,
    init: impl PinInit<T::Data, E>,
) -> Result<(), E> {
    // SAFETY: the driver part is at `DATA_OFFSET` (the trait's contract) in
    // memory the core allocated for a `T` and never moves until it frees it.
    unsafe {
        let slot = ib.cast::<u8>().add(T::DATA_OFFSET).cast::<T::Data>();
        init.__pinned_init(slot)
    }
}

/// Drops the driver's part of an object the core is about to free.
///
/// # Safety
///
/// The driver part was initialised by [`init_in_place`] and is not used
/// afterwards (the core calls the destroy verb once, when no one else uses
/// the object).
pub(crate) unsafe fn drop_in_place<T: CoreAllocated>(ib: *mut T::Ib) {
    // SAFETY: per the function's contract; the core frees the memory itself.
    unsafe { ptr::drop_in_place(ib.cast::<u8>().add(T::DATA_OFFSET).cast::<T::Data>()) }
}

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

/// A C struct of the core's or the rxe ABI, copied to and from rings byte for
/// byte.
///
/// # Safety
///
/// Every bit pattern of `size_of::<Self>()` bytes is a valid `Self` (integers,
/// raw pointers and arrays or unions of them).
pub(crate) unsafe trait Plain: Sized {}

// SAFETY: integers, a raw pointer and unions of integers.
unsafe impl Plain for b::ib_wc {}
// SAFETY: integers and a union of integers.
unsafe impl Plain for b::ib_uverbs_wc {}
// SAFETY: integers, a raw pointer (`grh.sgid_attr`) and unions of those; oxe
// keeps the address vector as bytes and hands it back as it came.
unsafe impl Plain for b::rdma_ah_attr {}

/// A reference to an object the core owns and keeps alive for as long as
/// the holder uses it (the device for its QPs, a QP's CQs until
/// `destroy_qp` returns), kept in objects that outlive one verb.
pub(crate) struct CoreRef<T>(NonNull<T>);

impl<T> Clone for CoreRef<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for CoreRef<T> {}

// SAFETY: the referenced objects (device, CQ) synchronise their own state
// and are used from any thread, as the core uses them.
unsafe impl<T> Send for CoreRef<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for CoreRef<T> {}

impl<T> CoreRef<T> {
    /// # Safety
    ///
    /// `r` stays valid for every use of [`CoreRef::get`] of the result.
    pub(crate) unsafe fn new(r: &T) -> Self {
        CoreRef(NonNull::from(r))
    }

    pub(crate) fn get(&self) -> &T {
        // SAFETY: valid for as long as it is used (the contract of `new`).
        unsafe { self.0.as_ref() }
    }
}

/// The bytes of `v`.
pub(crate) fn as_bytes<T: Plain>(v: &T) -> &[u8] {
    // SAFETY: `v` is `size_of::<T>()` readable bytes for the borrow's life.
    unsafe { core::slice::from_raw_parts(ptr::from_ref(v).cast(), size_of::<T>()) }
}

/// The bytes of `v`, to overwrite.
pub(crate) fn as_bytes_mut<T: Plain>(v: &mut T) -> &mut [u8] {
    // SAFETY: `v` is `size_of::<T>()` writable bytes for the borrow's life,
    // and any bytes written make a valid `T` (`Plain`).
    unsafe { core::slice::from_raw_parts_mut(ptr::from_mut(v).cast(), size_of::<T>()) }
}

/// The verbs of an oxe device, for `ib_set_device_ops`. The QP verbs are
/// still in `qp.rs`, with their own conversions.
pub(crate) fn device_ops() -> b::ib_device_ops {
    let mut ops: b::ib_device_ops = pin_init::zeroed();
    ops.owner = crate::THIS_MODULE.as_ptr();
    ops.driver_id = b::rdma_driver_id_RDMA_DRIVER_RXE;
    ops.uverbs_abi_ver = params::UVERBS_ABI_VERSION;
    // Device and port.
    ops.query_device = Some(device::query_device);
    ops.query_port = Some(device::query_port);
    ops.get_port_immutable = Some(device::get_port_immutable);
    ops.get_link_layer = Some(device::get_link_layer);
    ops.query_pkey = Some(device::query_pkey);
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
    // MR.
    ops.reg_user_mr = Some(mr::reg_user_mr);
    ops.dereg_mr = Some(mr::dereg_mr);
    ops.rereg_user_mr = Some(mr::rereg_user_mr);
    ops.get_dma_mr = Some(mr::get_dma_mr);
    ops.alloc_mr = Some(mr::alloc_mr);
    ops.map_mr_sg = Some(mr::map_mr_sg);
    ops.fill_res_mr_entry = Some(mr::fill_res_mr_entry);
    // CQ.
    ops.create_cq = Some(cq::create_cq);
    ops.destroy_cq = Some(cq::destroy_cq);
    ops.req_notify_cq = Some(cq::req_notify_cq);
    ops.poll_cq = Some(cq::poll_cq);
    ops.resize_user_cq = Some(cq::resize_user_cq);
    ops.size_ib_cq = size_of::<OxeCq>();
    // QP.
    ops.create_qp = Some(qp::create_qp);
    ops.modify_qp = Some(qp::modify_qp);
    ops.query_qp = Some(qp::query_qp);
    ops.destroy_qp = Some(qp::destroy_qp);
    ops.post_send = Some(qp::post_send);
    ops.post_recv = Some(qp::post_recv);
    ops.size_ib_qp = size_of::<OxeQp>();
    ops
}
