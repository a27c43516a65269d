// SPDX-License-Identifier: GPL-2.0

//! The driver data of a uverbs command: what librxe sends after the core's
//! command (`inbuf`, `inlen`) and the room it leaves for oxe's response
//! (`outbuf`, `outlen`). Kernel callers have none: the core passes NULL,
//! which the entry points turn into `None`.

use core::marker::PhantomData;
use core::mem::size_of;
use core::ptr::{self, NonNull};

use kernel::ffi::c_void;
use kernel::prelude::*;

use crate::bindings as b;

/// The driver udata of one uverbs command on an oxe device, for the
/// duration of the verb.
pub(crate) struct Udata<'a> {
    raw: NonNull<b::ib_udata>,
    _command: PhantomData<&'a b::ib_udata>,
}

impl<'a> Udata<'a> {
    /// `None` for kernel callers (NULL).
    ///
    /// # Safety
    ///
    /// `raw` is NULL or the driver udata of a live uverbs command (or of the
    /// core's cleanup of a ucontext's objects) on an oxe device, valid for
    /// `'a`.
    pub(crate) unsafe fn from_raw(raw: *mut b::ib_udata) -> Option<Self> {
        NonNull::new(raw).map(|raw| Udata {
            raw,
            _command: PhantomData,
        })
    }

    /// The raw udata, for calls into the core.
    pub(crate) fn as_ptr(&self) -> *mut b::ib_udata {
        self.raw.as_ptr()
    }

    fn get(&self) -> &b::ib_udata {
        // SAFETY: valid for `'a` (the contract of `from_raw`); the core does not change it during the verb.
        unsafe { self.raw.as_ref() }
    }

    /// Bytes of driver data user space sent.
    pub(crate) fn inlen(&self) -> usize {
        self.get().inlen
    }

    /// Bytes of room user space left for the response.
    pub(crate) fn outlen(&self) -> usize {
        self.get().outlen
    }

    /// The driver data user space sent, as a `T` (`ib_copy_from_udata`):
    /// EINVAL if it sent less.
    pub(crate) fn read_in<T: super::Plain + pin_init::Zeroable>(&self) -> Result<T> {
        if self.inlen() < size_of::<T>() {
            return Err(EINVAL);
        }
        let mut v: T = pin_init::zeroed();
        // SAFETY: `v` is `size_of::<T>()` writable bytes, any of which make a valid `T` (`Plain`); the udata is the command's.
        kernel::error::to_result(unsafe {
            b::oxe_udata_copy_in(self.as_ptr(), ptr::from_mut(&mut v).cast(), size_of::<T>())
        })?;
        Ok(v)
    }

    /// EINVAL unless user space left room for a whole `T` in response.
    pub(crate) fn require_out<T>(&self) -> Result {
        if self.outlen() < size_of::<T>() {
            return Err(EINVAL);
        }
        Ok(())
    }

    /// For verbs that take no driver data: Ok if user space sent none or only
    /// zeros (`ib_is_udata_in_empty`), else EOPNOTSUPP or EFAULT.
    pub(crate) fn in_empty(&self) -> Result {
        // SAFETY: the command's udata (the contract of `from_raw`).
        kernel::error::to_result(unsafe { b::oxe_udata_in_empty(self.as_ptr()) })
    }

    /// Copies `resp` to user space: clipped to `outlen`, zero-filled beyond
    /// `size_of::<T>()` (`ib_respond_udata`).
    pub(crate) fn respond<T>(&self, resp: &T) -> Result {
        // SAFETY: `resp` is `size_of::<T>()` readable bytes; the udata is the command's (the contract of `from_raw`).
        kernel::error::to_result(unsafe {
            b::_ib_respond_udata(
                self.as_ptr(),
                ptr::from_ref(resp).cast::<c_void>(),
                size_of::<T>(),
            )
        })
    }

    /// For verbs that send nothing back: zero-fills whatever room user space
    /// left (`ib_respond_empty_udata`).
    pub(crate) fn respond_empty(&self) -> Result {
        // SAFETY: the command's udata (the contract of `from_raw`).
        kernel::error::to_result(unsafe { b::oxe_respond_empty_udata(self.as_ptr()) })
    }
}

/// [`Udata::in_empty`], where kernel callers (`None`) send nothing.
pub(crate) fn in_empty(udata: Option<&Udata<'_>>) -> Result {
    udata.map_or(Ok(()), Udata::in_empty)
}

/// [`Udata::respond_empty`], where kernel callers (`None`) expect nothing.
pub(crate) fn respond_empty(udata: Option<&Udata<'_>>) -> Result {
    udata.map_or(Ok(()), Udata::respond_empty)
}
