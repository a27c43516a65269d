// SPDX-License-Identifier: GPL-2.0

//! The core's objects as oxe's objects see them: the layout contract of the
//! objects the core allocates (`core_object!`, in-place initialisation),
//! references to objects the core owns (`CoreRef`, `QpHandle`), a command's
//! udata (`Udata`), the work-completion formats, and the few calls into the
//! core the objects make. Below the objects: they use these, and the FFI
//! layer above (`ffi/`) uses both.

use core::mem::size_of;
use core::ptr::{self, NonNull};

use kernel::prelude::*;

use crate::bindings as b;

pub(crate) mod cq;
pub(crate) mod qp;
pub(crate) mod skb;
pub(crate) mod srq;
pub(crate) mod trace;
pub(crate) mod udata;
pub(crate) mod xarray;

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
        // SAFETY: the field `$ib` is an `Opaque<$ibty>` at offset 0, as checked by the two constants above.
        unsafe impl $crate::ib::CoreObject for $ty {
            type Ib = $ibty;
        }
    };
    ($ty:ty, $ib:ident: $ibty:ty, $data:ident: $dataty:ty) => {
        $crate::ib::core_object!($ty, $ib: $ibty);
        const _: fn(&$ty) -> &$dataty = |o| &o.$data;
        // SAFETY: `$data` is a `$dataty` (checked above) at the offset given.
        unsafe impl $crate::ib::CoreAllocated for $ty {
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
    // SAFETY: `T::Ib` is at offset 0 of `T` (the trait's contract), and the object is live and initialised (the function's).
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
    // SAFETY: the driver part is at `DATA_OFFSET` (the trait's contract) in memory the core allocated for a `T` and never moves until it frees it.
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
// SAFETY: integers, a raw pointer (`grh.sgid_attr`) and unions of those; oxe keeps the address vector as bytes and hands it back as it came.
unsafe impl Plain for b::rdma_ah_attr {}
// SAFETY: one integer.
unsafe impl Plain for b::rxe_modify_srq_cmd {}
// SAFETY: integers.
unsafe impl Plain for b::mminfo {}

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

// SAFETY: the referenced objects (device, CQ) synchronise their own state and are used from any thread, as the core uses them.
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
    // SAFETY: `v` is `size_of::<T>()` writable bytes for the borrow's life, and any bytes written make a valid `T` (`Plain`).
    unsafe { core::slice::from_raw_parts_mut(ptr::from_mut(v).cast(), size_of::<T>()) }
}
