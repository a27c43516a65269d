// SPDX-License-Identifier: GPL-2.0

//! Bindings for the RDMA core and oxe's C helpers, generated at build time by
//! Kbuild from include/oxe_helpers.h with the kernel's own bindgen flags. Types
//! outside the RDMA headers come from `kernel::bindings`.

#![allow(
    dead_code,
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    improper_ctypes,
    unreachable_pub,
    unsafe_op_in_unsafe_fn,
    missing_docs,
    clippy::all,
    clippy::as_underscore,
    clippy::cast_lossless,
    clippy::ptr_as_ptr,
    clippy::ref_as_ptr,
    clippy::missing_safety_doc,
    clippy::undocumented_unsafe_blocks,
    unnecessary_transmutes
)]

#[allow(unused_imports)]
pub(crate) use kernel::bindings::*;
use kernel::ffi;
#[allow(unused_imports)]
use pin_init::{MaybeZeroable, Zeroable};

// As in rust/bindings/lib.rs:
// SAFETY: `__BindgenBitfieldUnit<Storage>` is a newtype around a zeroable `Storage`.
unsafe impl<Storage> Zeroable for __BindgenBitfieldUnit<Storage> where Storage: Zeroable {}

// SAFETY: a zero-sized marker.
unsafe impl<T> Zeroable for __BindgenUnionField<T> {}
// SAFETY: an aligned newtype around `T`.
unsafe impl<T: Zeroable> Zeroable for __BindgenOpaqueArray8<T> {}

include!("bindings_generated.rs");
