// SPDX-License-Identifier: GPL-2.0

//! On-demand paging: a user MR with no pins. The pages are found when the
//! data path touches them (`hmm_range_fault`, in the QP's task, which may
//! sleep) and forgotten when the mm invalidates them; every copy runs under
//! the lock the invalidation takes, so a page is never used after the mm
//! took it away, and an address no longer mapped is an access error.
//!
//! The notifier and the page list are the core's `ib_umem_odp`, as rdma_rxe
//! and mlx5 use it, rather than an MTT of oxe's own: the interval
//! notifier's sequence protocol, the retry on a concurrent invalidation and
//! the lockdep annotations for reclaim are subtle, and the core's are the
//! ones every ODP driver shares (and fixes). oxe has no DMA mapping to keep
//! (virtual DMA), only the page list. The C side is `include/oxe_odp.c`.
//!
//! Every ODP MR, explicit or implicit, keeps its translation in chunks of
//! 2 MiB (a child umem under an implicit root, each with its own notifier
//! and page list) made when the data path first touches them: one umem over
//! the whole range would allocate, at registration, and walk, at dereg, a
//! page-list entry per page (a fifth of a pinned registration's cost at
//! 1 GiB), where a chunked MR costs the same at any size.

use core::ptr::NonNull;

use kernel::error::{from_err_ptr, to_result};
use kernel::prelude::*;
use kernel::sync::Mutex;

use crate::bindings as b;

/// Whether the kernel has ODP (`CONFIG_INFINIBAND_ON_DEMAND_PAGING`).
pub(crate) fn enabled() -> bool {
    // SAFETY: reads a constant.
    unsafe { b::oxe_odp_enabled() }
}

/// The core's ODP umem of one chunk: released on drop.
pub(crate) struct Odp(NonNull<b::ib_umem_odp>);

// SAFETY: the umem is used only through the C helpers, which lock it (the page list) or only read fields fixed at creation.
unsafe impl Send for Odp {}
// SAFETY: as above.
unsafe impl Sync for Odp {}

/// Why pages could not be had.
#[derive(Debug)]
pub(crate) enum Fault {
    /// Not all present, and not to be faulted in (PREFETCH_NO_FAULT).
    Missing,
    /// Not mapped, or not writable for a write, or outside the MR.
    Error(Error),
}

impl Odp {
    /// Runs `f` with the pages of `[va, va + len)` present (writable if
    /// `write`), faulting them in if `fault`; `f` gets the frame of each
    /// address it asks for. The pages stay as they are until `f` returns:
    /// an invalidation waits for it.
    pub(crate) fn with_pages<R>(
        &self,
        va: u64,
        len: u64,
        write: bool,
        fault: bool,
        f: impl FnOnce(&Present<'_>) -> R,
    ) -> Result<R, Fault> {
        // SAFETY: a live umem; the helper checks the range.
        let r = unsafe { b::oxe_odp_lock(self.0.as_ptr(), va, len, write, fault) };
        if r == -(b::EAGAIN as i32) {
            return Err(Fault::Missing);
        }
        to_result(r).map_err(Fault::Error)?;
        let present = Present {
            odp: self,
            start: va,
            len,
        };
        let out = f(&present);
        // SAFETY: locked by the successful oxe_odp_lock above.
        unsafe { b::oxe_odp_unlock(self.0.as_ptr()) };
        Ok(out)
    }
}

impl Drop for Odp {
    fn drop(&mut self) {
        // SAFETY: ours, and nothing uses it any more (the MR is released).
        unsafe { b::oxe_odp_release(self.0.as_ptr()) };
    }
}

/// The pages of a locked range.
pub(crate) struct Present<'a> {
    odp: &'a Odp,
    start: u64,
    len: u64,
}

impl Present<'_> {
    /// The frame of the page holding `va`, which must lie in the range.
    pub(crate) fn pfn(&self, va: u64) -> Option<u64> {
        let off = va.checked_sub(self.start)?;
        if off >= self.len.max(1) {
            return None;
        }
        // SAFETY: `va` is in the range locked present.
        Some(unsafe { b::oxe_odp_pfn(self.odp.0.as_ptr(), va) } as u64)
    }
}

/// Implicit ODP's chunk: 2 MiB of address space per child umem (a page
/// list of 4 KiB), made when the data path first touches it.
const CHUNK_SHIFT: u32 = 21;
const CHUNK: u64 = 1 << CHUNK_SHIFT;
/// Chunks an ODP MR keeps: the least recently used one goes when a new one
/// is needed, so the MR's memory stays bounded (512 page lists of 4 KiB and
/// their notifiers: about 2.3 MiB) however much of it the process touches.
const MAX_CHUNKS: usize = 512;

/// An ODP MR's translation, built lazily in chunks: of its range for an
/// explicit one, of the whole address space of the process (iova =
/// address) for an implicit one (`ibv_reg_mr(pd, NULL, SIZE_MAX,
/// IBV_ACCESS_ON_DEMAND ...)`).
#[pin_data]
pub(crate) struct Implicit {
    #[pin]
    chunks: Mutex<Chunks>,
}

struct Chunks {
    /// `None` once deregistration released it.
    root: Option<Root>,
    /// Sorted by base address.
    list: KVec<Chunk>,
    /// Use counter, for the least recently used chunk.
    tick: u64,
}

/// The core's implicit root umem (the process's mm, grabbed).
struct Root(NonNull<b::ib_umem_odp>);

// SAFETY: used only through the C helpers, under the chunks' lock.
unsafe impl Send for Root {}

impl Drop for Root {
    fn drop(&mut self) {
        // SAFETY: ours, and its children were released before it (`Chunks` drops them first).
        unsafe { b::oxe_odp_release_implicit(self.0.as_ptr()) };
    }
}

struct Chunk {
    base: u64,
    odp: Odp,
    used: u64,
}

/// The top of user space: an implicit MR reaches no further.
pub(crate) fn user_top() -> u64 {
    // SAFETY: reads a constant.
    unsafe { b::oxe_task_size_max() }
}

impl Implicit {
    /// A root for the calling process.
    ///
    /// # Safety
    ///
    /// `dev` is a live, registered device; called in the context of the
    /// process that registers.
    pub(crate) unsafe fn new(
        dev: *mut b::ib_device,
        access: u32,
    ) -> Result<impl PinInit<Self, Error>> {
        // SAFETY: per the function's contract.
        let p = from_err_ptr(unsafe { b::oxe_odp_implicit(dev, access as i32) })?;
        let root = Root(NonNull::new(p).ok_or(ENOMEM)?);
        Ok(try_pin_init!(Implicit {
            chunks <- kernel::new_mutex!(Chunks {
                root: Some(root),
                list: KVec::with_capacity(MAX_CHUNKS, GFP_KERNEL)?,
                tick: 0,
            }),
        }? Error))
    }

    /// Runs `f` on the pieces of `[va, va + len)` that lie in one chunk
    /// each (the present pages, the piece's address and length), the pages
    /// present (writable if `write`; faulted in if `fault`) while `f` runs.
    /// One chunk at a time, under the chunks' lock: accesses to one
    /// implicit MR take turns.
    pub(crate) fn walk(
        &self,
        va: u64,
        len: u64,
        write: bool,
        fault: bool,
        mut f: impl FnMut(&Present<'_>, u64, u64) -> bool,
    ) -> Result<bool, Fault> {
        let end = va.checked_add(len).ok_or(Fault::Error(EFAULT))?;
        if end > user_top() {
            return Err(Fault::Error(EFAULT));
        }
        for (at, _, piece) in crate::mtt::page_pieces(va, len, CHUNK_SHIFT) {
            let piece = u64::from(piece);
            let mut c = self.chunks.lock();
            let odp = c.chunk(at & !(CHUNK - 1))?;
            if !odp.with_pages(at, piece, write, fault, |present| f(present, at, piece))? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Lets go of every chunk and of the root: deregistration, in process
    /// context (removing a notifier may sleep).
    pub(crate) fn release(&self) {
        let mut c = self.chunks.lock();
        c.list.clear();
        c.root = None;
    }
}

impl Chunks {
    /// The chunk at `base`, made now if needed (the least recently used one
    /// goes first when `MAX_CHUNKS` are there).
    fn chunk(&mut self, base: u64) -> Result<&Odp, Fault> {
        self.tick += 1;
        let tick = self.tick;
        let i = match self.list.binary_search_by_key(&base, |c| c.base) {
            Ok(i) => i,
            Err(mut i) => {
                let root = self.root.as_ref().ok_or(Fault::Error(EFAULT))?;
                if self.list.len() >= MAX_CHUNKS {
                    let lru = (0..self.list.len())
                        .min_by_key(|&j| self.list.get(j).map_or(u64::MAX, |c| c.used))
                        .unwrap_or(0);
                    let _ = self.list.remove(lru);
                    if lru < i {
                        i -= 1;
                    }
                }
                let size = CHUNK.min(user_top() - base);
                // SAFETY: a live root, under the chunks' lock.
                let p = from_err_ptr(unsafe { b::oxe_odp_child(root.0.as_ptr(), base, size) })
                    .map_err(Fault::Error)?;
                let odp = Odp(NonNull::new(p).ok_or(Fault::Error(ENOMEM))?);
                // The list has room for MAX_CHUNKS from the start.
                self.list
                    .insert_within_capacity(
                        i,
                        Chunk {
                            base,
                            odp,
                            used: tick,
                        },
                    )
                    .map_err(|_| Fault::Error(ENOMEM))?;
                i
            }
        };
        let c = self.list.get_mut(i).ok_or(Fault::Error(ENOMEM))?;
        c.used = tick;
        Ok(&c.odp)
    }
}

impl Drop for Chunks {
    fn drop(&mut self) {
        // The children before the root they hang from.
        self.list.clear();
        self.root = None;
    }
}
