// SPDX-License-Identifier: GPL-2.0

//! Rings shared with user space, in rdma_rxe's layout (`struct rxe_queue_buf`
//! of the rxe uapi header), and their mmap through the ucontext.
//!
//! The buffer is `vmalloc_user` memory. User space may write anything into it
//! at any time, so the side the kernel owns (producer of a CQ, consumer of an
//! SQ or RQ) keeps its index privately, indices read from the buffer are
//! masked, and slots are copied out before use.

use core::mem::{offset_of, size_of};
use core::ptr::{self, NonNull};

use kernel::prelude::*;
use kernel::sync::atomic::{ordering, Atomic};
use kernel::sync::{Arc, Mutex};

use crate::bindings as b;
use crate::ib::Udata;

const PAGE_SIZE: usize = kernel::page::PAGE_SIZE;
const HEADER: usize = size_of::<b::rxe_queue_buf>();

/// A `vmalloc_user` buffer, freed when the last owner (ring or VMA) lets go.
pub(crate) struct SharedBuf {
    ptr: NonNull<u8>,
    size: usize,
}

// SAFETY: plain memory; concurrent access is through atomics or copies.
unsafe impl Send for SharedBuf {}
// SAFETY: as above.
unsafe impl Sync for SharedBuf {}

impl SharedBuf {
    fn new(size: usize) -> Result<Arc<Self>> {
        let size = size.checked_next_multiple_of(PAGE_SIZE).ok_or(EINVAL)?;
        // SAFETY: a plain allocation; zeroed by vmalloc_user.
        let ptr = NonNull::new(unsafe { b::oxe_vmalloc_user(size as kernel::ffi::c_ulong) }.cast())
            .ok_or(ENOMEM)?;
        // On failure Arc::new drops the SharedBuf it was given, which frees
        // the buffer: nothing else to undo here.
        Ok(Arc::new(SharedBuf { ptr, size }, GFP_KERNEL)?)
    }
}

impl Drop for SharedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated by vmalloc_user; no ring or mapping is left.
        unsafe { b::oxe_vfree(self.ptr.as_ptr().cast()) };
    }
}

/// One ring: slots of `1 << log2_elem` bytes after the shared header.
pub(crate) struct Queue {
    buf: Arc<SharedBuf>,
    log2_elem: u32,
    mask: u32,
    /// The index the kernel owns (producer or consumer), never read back from
    /// the shared header.
    index: u32,
}

impl Queue {
    /// A ring with room for at least `entries` elements of `elem` bytes.
    pub(crate) fn new(entries: u32, elem: usize) -> Result<Self> {
        let slots = entries
            .checked_add(1)
            .and_then(u32::checked_next_power_of_two)
            .ok_or(EINVAL)?;
        let elem = elem.max(64).next_power_of_two();
        let log2_elem = elem.trailing_zeros();
        let bytes = (slots as usize)
            .checked_mul(elem)
            .and_then(|n| n.checked_add(HEADER))
            .ok_or(EINVAL)?;
        let buf = SharedBuf::new(bytes)?;
        let q = Queue {
            buf,
            log2_elem,
            mask: slots - 1,
            index: 0,
        };
        // SAFETY: the header is at the start of the fresh buffer.
        unsafe {
            let h = q.header();
            (*h).log2_elem_size = log2_elem;
            (*h).index_mask = q.mask;
        }
        Ok(q)
    }

    /// Usable entries (one slot stays empty).
    pub(crate) fn capacity(&self) -> u32 {
        self.mask
    }

    pub(crate) fn elem_size(&self) -> usize {
        1 << self.log2_elem
    }

    pub(crate) fn buf(&self) -> &Arc<SharedBuf> {
        &self.buf
    }

    fn header(&self) -> *mut b::rxe_queue_buf {
        self.buf.ptr.as_ptr().cast()
    }

    fn shared_index(&self, off: usize) -> &Atomic<u32> {
        // User space writes it concurrently, hence atomic access.
        // SAFETY: `off` is the offset of an aligned u32 in the live header.
        unsafe { Atomic::from_ptr(self.buf.ptr.as_ptr().add(off).cast()) }
    }

    fn slot(&self, index: u32) -> *mut u8 {
        let off = HEADER + (((index & self.mask) as usize) << self.log2_elem);
        // SAFETY: `off` is inside the buffer: index is masked.
        unsafe { self.buf.ptr.as_ptr().add(off) }
    }

    // Consumer side (SQ, RQ): user space produces.

    fn producer(&self) -> u32 {
        self.shared_index(offset_of!(b::rxe_queue_buf, producer_index))
            .load(ordering::Acquire)
            & self.mask
    }

    /// The next element to consume, copied into `out` (at most its size).
    pub(crate) fn peek_into(&self, out: &mut [u8]) -> bool {
        if self.index == self.producer() {
            return false;
        }
        let n = out.len().min(self.elem_size());
        // The copy may race with a buggy or hostile user: that only garbles it.
        // SAFETY: the slot is inside the buffer.
        unsafe { ptr::copy_nonoverlapping(self.slot(self.index), out.as_mut_ptr(), n) };
        true
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.index == self.producer()
    }

    /// Elements posted and not consumed yet.
    pub(crate) fn posted(&self) -> u32 {
        self.producer().wrapping_sub(self.index) & self.mask
    }

    /// Element `n` after the next one to consume, copied into `out`, if
    /// posted. The consumer index does not move: the requester takes WQEs
    /// ahead of completing them.
    pub(crate) fn peek_nth_into(&self, n: u32, out: &mut [u8]) -> bool {
        let posted = self.producer().wrapping_sub(self.index) & self.mask;
        if n >= posted {
            return false;
        }
        let len = out.len().min(self.elem_size());
        // The copy may race with a buggy or hostile user: that only garbles it.
        // SAFETY: the slot is inside the buffer (the index is masked).
        unsafe {
            ptr::copy_nonoverlapping(self.slot(self.index.wrapping_add(n)), out.as_mut_ptr(), len)
        };
        true
    }

    /// Consumes the element `peek_into` returned.
    pub(crate) fn advance_consumer(&mut self) {
        self.index = (self.index + 1) & self.mask;
        self.shared_index(offset_of!(b::rxe_queue_buf, consumer_index))
            .store(self.index, ordering::Release);
    }

    /// Consumes everything posted up to now, in one step.
    pub(crate) fn discard_posted(&mut self) {
        self.index = self.producer();
        self.shared_index(offset_of!(b::rxe_queue_buf, consumer_index))
            .store(self.index, ordering::Release);
    }

    // Producer side (CQ): user space consumes.

    fn consumer(&self) -> u32 {
        self.shared_index(offset_of!(b::rxe_queue_buf, consumer_index))
            .load(ordering::Acquire)
            & self.mask
    }

    pub(crate) fn is_full(&self) -> bool {
        (self.index + 1) & self.mask == self.consumer()
    }

    /// Entries produced and not yet consumed by user space.
    pub(crate) fn produced_pending(&self) -> u32 {
        self.index.wrapping_sub(self.consumer()) & self.mask
    }

    /// Writes `data` into the next slot and publishes it.
    pub(crate) fn produce(&mut self, data: &[u8]) -> Result {
        if self.is_full() {
            return Err(EBUSY);
        }
        let n = data.len().min(self.elem_size());
        // SAFETY: the slot is inside the buffer.
        unsafe { ptr::copy_nonoverlapping(data.as_ptr(), self.slot(self.index), n) };
        self.index = (self.index + 1) & self.mask;
        self.shared_index(offset_of!(b::rxe_queue_buf, producer_index))
            .store(self.index, ordering::Release);
        Ok(())
    }

    /// Kernel consumer of a kernel-produced ring (kernel CQs): pops the next
    /// element into `out`.
    pub(crate) fn pop_into(&mut self, out: &mut [u8]) -> bool {
        let cons = self.consumer();
        if cons == self.index {
            return false;
        }
        let n = out.len().min(self.elem_size());
        // SAFETY: the slot is inside the buffer.
        unsafe { ptr::copy_nonoverlapping(self.slot(cons), out.as_mut_ptr(), n) };
        self.shared_index(offset_of!(b::rxe_queue_buf, consumer_index))
            .store((cons + 1) & self.mask, ordering::Release);
        true
    }

    /// A second handle on this ring for its kernel producer (kernel QPs),
    /// kept apart from the consumer so posting needs no sleeping lock.
    pub(crate) fn kernel_producer(&self) -> Queue {
        Queue {
            buf: self.buf.clone(),
            log2_elem: self.log2_elem,
            mask: self.mask,
            index: 0,
        }
    }

    /// Kernel producer of a kernel-consumed ring: `fill` writes the next slot
    /// in place, which is then published. ENOMEM when the ring is full. No
    /// allocation: kernel clients post from any context.
    pub(crate) fn push_with(&mut self, fill: impl FnOnce(&mut [u8]) -> Option<()>) -> Result {
        let prod = self.producer();
        if (prod + 1) & self.mask == self.consumer() {
            return Err(ENOMEM);
        }
        // A kernel ring is never mapped to user space, and free slots are
        // written only by this producer, under its lock.
        // SAFETY: the slot is inside the buffer and `elem_size` long.
        let slot = unsafe { core::slice::from_raw_parts_mut(self.slot(prod), self.elem_size()) };
        fill(slot).ok_or(EINVAL)?;
        self.shared_index(offset_of!(b::rxe_queue_buf, producer_index))
            .store((prod + 1) & self.mask, ordering::Release);
        Ok(())
    }
}

/// A buffer handed out by a create call and waiting for user space's mmap.
struct Pending {
    offset: u64,
    buf: Arc<SharedBuf>,
}

/// Per-process mmap bookkeeping (rxe's scheme: every buffer gets a unique
/// offset and can be mapped once). An offer holds its buffer until user space
/// maps it or the owner withdraws it: on destroy, on a failed create or resize.
#[pin_data]
pub(crate) struct Mmaps {
    #[pin]
    pending: Mutex<KVec<Pending>>,
}

impl Mmaps {
    pub(crate) fn new() -> impl PinInit<Self, Error> {
        try_pin_init!(Mmaps { pending <- kernel::new_mutex!(KVec::new()) }? Error)
    }

    /// Registers `buf` for mmap; returns the rxe `mminfo` for the response.
    pub(crate) fn offer(
        &self,
        next_offset: &Atomic<u64>,
        buf: &Arc<SharedBuf>,
    ) -> Result<b::mminfo> {
        let offset = next_offset.fetch_add(buf.size as u64, ordering::Relaxed);
        self.pending.lock().push(
            Pending {
                offset,
                buf: buf.clone(),
            },
            GFP_KERNEL,
        )?;
        Ok(b::mminfo {
            offset,
            size: buf.size as u32,
            pad: 0,
        })
    }

    /// Withdraws the offer of `buf` if user space has not mapped it: the list
    /// lets go of the buffer, which then goes with its ring. A mapped buffer is
    /// no longer listed; its VMA keeps the pages until munmap.
    pub(crate) fn withdraw(&self, buf: &SharedBuf) {
        let mut pending = self.pending.lock();
        if let Some(i) = pending.iter().position(|p| p.buf.ptr == buf.ptr) {
            // The caller still owns the ring: this is never the last reference.
            let _ = pending.remove(i);
        }
    }

    /// The ucontext's `mmap` op.
    pub(crate) fn mmap(&self, vma: *mut b::vm_area_struct) -> Result {
        // SAFETY: the core passes the VMA being set up.
        let (offset, len) = unsafe { (b::oxe_vma_offset(vma), b::oxe_vma_len(vma) as usize) };
        let buf = {
            let mut pending = self.pending.lock();
            let i = pending
                .iter()
                .position(|p| p.offset == offset && len <= p.buf.size)
                .ok_or(EINVAL)?;
            pending.remove(i).map_err(|_| EINVAL)?.buf
        };
        // The mapping holds its own references on the pages
        // (vm_insert_page), so they outlive the ring's vfree until user
        // space unmaps them. No vm_ops of ours: the core's stay, and nothing
        // of this module is called after it is unloaded (rmmod with
        // processes still holding the device).
        // SAFETY: `buf` is vmalloc_user memory at least `len` bytes long.
        kernel::error::to_result(unsafe { b::oxe_remap_vmalloc(vma, buf.ptr.as_ptr().cast()) })
    }
}

/// Withdraws the offers of `bufs` (see [`Mmaps::withdraw`]) from the
/// ucontext of a uverbs command; nothing to do for kernel objects (`None`).
pub(crate) fn withdraw_from(udata: Option<&Udata<'_>>, bufs: &[&SharedBuf]) {
    let Some(uc) = udata.and_then(Udata::ucontext) else {
        return;
    };
    if let Ok(mmaps) = uc.mmaps() {
        for buf in bufs {
            mmaps.withdraw(buf);
        }
    }
}
