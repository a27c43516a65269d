// SPDX-License-Identifier: GPL-2.0

//! dma-buf MRs (`reg_user_mr_dmabuf`): memory another driver exports, such
//! as udmabuf's memfd pages. oxe moves bytes with the CPU, so it takes the
//! exporter's kernel mapping (`dma_buf_vmap`) rather than an attachment,
//! which needs a DMA device and hands out DMA addresses oxe cannot copy
//! through. The buffer stays mapped, and referenced, until deregistration;
//! an exporter that may move its buffer (a pin op, dynamic) is refused, as
//! following it needs move_notify. The C side is `include/oxe_dmabuf.c`.

use core::ptr::NonNull;

use kernel::error::from_err_ptr;
use kernel::prelude::*;

use crate::bindings as b;

/// A dma-buf, referenced and mapped into the kernel: unmapped and put on
/// drop.
pub(crate) struct DmaBuf {
    buf: NonNull<b::dma_buf>,
    vaddr: u64,
}

// SAFETY: the buffer is only read through its mapping, which lives as long as this; the C helpers take no thread-bound state.
unsafe impl Send for DmaBuf {}
// SAFETY: as above.
unsafe impl Sync for DmaBuf {}

impl DmaBuf {
    /// The dma-buf behind `fd` of the calling process, mapped, if
    /// `[offset, offset + length)` lies inside it.
    pub(crate) fn map(fd: i32, offset: u64, length: u64) -> Result<DmaBuf> {
        let mut vaddr = 0u64;
        // SAFETY: the helper looks `fd` up in the calling process's table and checks the range; `vaddr` is ours to write.
        let p = from_err_ptr(unsafe { b::oxe_dmabuf_map(fd, offset, length, &mut vaddr) })?;
        let buf = NonNull::new(p).ok_or(EINVAL)?;
        Ok(DmaBuf { buf, vaddr })
    }

    /// The kernel address of the buffer's first byte.
    pub(crate) fn vaddr(&self) -> u64 {
        self.vaddr
    }
}

impl Drop for DmaBuf {
    fn drop(&mut self) {
        // SAFETY: mapped and referenced by `map`, and no longer read (the MR is released).
        unsafe { b::oxe_dmabuf_unmap(self.buf.as_ptr(), self.vaddr) };
    }
}

/// The frame behind a kernel address of a dma-buf's mapping.
pub(super) fn vmalloc_to_pfn(va: u64) -> Option<u64> {
    // SAFETY: only looks the address up in the kernel's page tables.
    let pfn = unsafe { b::oxe_vmalloc_to_pfn(va) };
    u64::try_from(pfn).ok()
}
