// SPDX-License-Identifier: GPL-2.0

//! Where MRs meet memory: user pages pinned with
//! `pin_user_pages_fast(FOLL_LONGTERM)` and accounted against
//! RLIMIT_MEMLOCK, the frames of the kernel's linear map, and the copies and
//! atomics through `kmap_local_page`. The one place of `mr/` with `unsafe`.

use core::cell::UnsafeCell;
use core::mem::size_of;
use core::ptr;

use kernel::alloc::KVVec;
use kernel::ffi::{c_int, c_ulong};
use kernel::prelude::*;
use kernel::sync::atomic::Atomic;

use super::{Kind, MrRef, OxeMr};
use crate::bindings as b;
use crate::mtt::{self, Fragment, Run, RunBuilder};

pub(super) const PAGE_SHIFT: u32 = kernel::page::PAGE_SHIFT as u32;
pub(crate) const PAGE_SIZE: u64 = 1 << PAGE_SHIFT;
/// Pages pinned per call: one page's worth of page pointers.
const PIN_BATCH: usize = kernel::page::PAGE_SIZE / size_of::<*mut b::page>();
/// Batches up to this many pages go through a buffer on the stack.
const SMALL_BATCH: usize = 16;

/// A registration's runs of contiguous frames. A small registration is
/// usually one run, kept inline: no table to allocate and free.
pub(crate) enum Runs {
    One(Run),
    Many(KVVec<Run>),
}

impl Runs {
    /// Adds the next run: the first is kept inline, the second moves both
    /// to a table. On an error `run` is not recorded.
    fn push(&mut self, run: Run) -> Result {
        match self {
            Runs::Many(runs) if runs.is_empty() => *self = Runs::One(run),
            Runs::Many(runs) => runs.push(run, GFP_KERNEL)?,
            Runs::One(first) => {
                let mut runs = KVVec::with_capacity(2, GFP_KERNEL)?;
                runs.push(*first, GFP_KERNEL)?;
                runs.push(run, GFP_KERNEL)?;
                *self = Runs::Many(runs);
            }
        }
        Ok(())
    }
}

impl core::ops::Deref for Runs {
    type Target = [Run];

    fn deref(&self) -> &[Run] {
        match self {
            Runs::One(run) => core::slice::from_ref(run),
            Runs::Many(runs) => runs,
        }
    }
}

/// Pinned user pages, as runs, with their accounting. Unpins on drop.
pub(crate) struct Pinned {
    pub(super) runs: Runs,
    /// Pages charged to `mm->pinned_vm`: the whole request, up front.
    accounted: u64,
    mm: *mut b::mm_struct,
    /// Pinned writable (FOLL_WRITE), and dirtied when unpinned.
    pub(super) dirty: bool,
}

// SAFETY: the pages and the mm reference may be released from any thread.
unsafe impl Send for Pinned {}
// SAFETY: immutable after construction.
unsafe impl Sync for Pinned {}

impl Pinned {
    /// Pins `npages` pages from `va`, batch by batch; a failure part way
    /// unpins everything pinned so far.
    pub(super) fn pin(va: u64, npages: u64, write: bool) -> Result<Self> {
        let mut mm = ptr::null_mut();
        // SAFETY: process context of the registering task.
        kernel::error::to_result(unsafe { b::oxe_account_pinned(npages as c_ulong, &mut mm) })?;
        // Closed runs go here (no allocation until the second); `Drop`
        // unpins them if we fail.
        let mut this = Pinned {
            runs: Runs::Many(KVVec::new()),
            accounted: npages,
            mm,
            dirty: write,
        };
        let mut flags = b::FOLL_LONGTERM;
        if write {
            flags |= b::FOLL_WRITE;
        }
        let batch = npages.min(PIN_BATCH as u64) as usize;
        // Small registrations, the common case, need no allocation here.
        let mut small = [ptr::null_mut::<b::page>(); SMALL_BATCH];
        let mut heap;
        let pages: &mut [*mut b::page] = if batch <= SMALL_BATCH {
            &mut small[..batch]
        } else {
            heap = KVec::from_elem(ptr::null_mut(), batch, GFP_KERNEL)?;
            &mut heap[..]
        };
        // Pinned pages are recorded at all times in `this` or the builder's
        // open run, but for those of the batch in hand not yet pushed.
        let mut builder = RunBuilder::new();
        let mut va = va;
        let mut left = npages;
        while left > 0 {
            let n = left.min(batch as u64) as usize;
            // SAFETY: `pages` has room for `n` pointers; `va` is a user address.
            let got = unsafe {
                b::pin_user_pages_fast(va as c_ulong, n as c_int, flags, pages.as_mut_ptr())
            };
            if got <= 0 {
                if let Some(run) = builder.finish() {
                    // SAFETY: the open run's pages are pinned and recorded nowhere else.
                    unsafe { unpin_run(&run, write) };
                }
                return Err(if got == 0 {
                    EFAULT
                } else {
                    Error::from_errno(got as c_int)
                });
            }
            let got = got as usize;
            // A piece of contiguous frames per call (a THP's 512 pages in
            // one), not a call per page.
            let mut i = 0;
            while i < got {
                let mut pfn: c_ulong = 0;
                // SAFETY: `pages[i..got]` were written by the pin call, and `i < got`.
                let k = unsafe {
                    b::oxe_pages_run(pages.as_mut_ptr().add(i), (got - i) as c_ulong, &mut pfn)
                };
                let k = (k as usize).clamp(1, got - i);
                if let Some(run) = builder.push_run(pfn as u64, k as u64) {
                    if let Err(e) = this.runs.push(run) {
                        // The new open run is `pages[i..i + k]`.
                        // SAFETY: `run` and `pages[i..got]` are pinned and recorded nowhere else.
                        unsafe {
                            unpin_run(&run, write);
                            b::unpin_user_pages(pages.as_mut_ptr().add(i), (got - i) as c_ulong);
                        }
                        return Err(e);
                    }
                }
                i += k;
            }
            va += got as u64 * PAGE_SIZE;
            left -= got as u64;
        }
        if let Some(run) = builder.finish() {
            if let Err(e) = this.runs.push(run) {
                // SAFETY: these pages are pinned and recorded nowhere else.
                unsafe { unpin_run(&run, write) };
                return Err(e);
            }
        }
        if let Runs::Many(runs) = &mut this.runs {
            // Growth doubles the table; give the slack back (best effort).
            if runs.capacity() > runs.len() {
                let _ = runs.shrink_to(runs.len(), GFP_KERNEL);
            }
        }
        Ok(this)
    }

    /// Bytes of translation table.
    pub(super) fn table_bytes(&self) -> u64 {
        let n = match &self.runs {
            Runs::One(_) => 1,
            Runs::Many(runs) => runs.capacity(),
        };
        (n * size_of::<Run>()) as u64
    }
}

/// # Safety
///
/// The run's pages must be pinned, once, by the caller.
unsafe fn unpin_run(run: &Run, dirty: bool) {
    // SAFETY: `count` physically contiguous pinned pages from `pfn`: one range call releases them.
    unsafe {
        b::unpin_user_page_range_dirty_lock(
            b::oxe_pfn_to_page(run.pfn as c_ulong),
            run.count as c_ulong,
            dirty,
        )
    };
}

impl Drop for Pinned {
    fn drop(&mut self) {
        for run in self.runs.iter() {
            // SAFETY: every recorded run was pinned by `pin`.
            unsafe { unpin_run(run, self.dirty) };
        }
        // SAFETY: `mm` was grabbed by oxe_account_pinned with this count.
        unsafe { b::oxe_unaccount_pinned(self.mm, self.accounted as c_ulong) };
    }
}

/// What a registration holds of memory it does not own (pins, the core's
/// ODP umem, a dma-buf mapping), read by the data path while it holds a
/// reference on the MR, and released by deregistration once the last
/// reference is gone: in process context (unpinning is accounted to the
/// process, removing a notifier may sleep), not in the MR's RCU free.
pub(crate) struct TakeCell<T>(UnsafeCell<Option<T>>);

// SAFETY: shared reads only, until `release`, which excludes them.
unsafe impl<T: Sync> Sync for TakeCell<T> {}
// SAFETY: it owns a `T`.
unsafe impl<T: Send> Send for TakeCell<T> {}

impl<T> TakeCell<T> {
    pub(crate) fn new(v: T) -> Self {
        TakeCell(UnsafeCell::new(Some(v)))
    }

    /// The value, `None` once released.
    pub(crate) fn get(&self) -> Option<&T> {
        // SAFETY: written only by `release`, whose caller guarantees that no one else reads it any more.
        unsafe { (*self.0.get()).as_ref() }
    }

    /// Drops the value now.
    ///
    /// # Safety
    ///
    /// No one else uses the cell, now or later, but to drop it: the MR has
    /// no reference left but the caller's.
    pub(crate) unsafe fn release(&self) {
        // SAFETY: per the function's contract, this is the only access.
        drop(unsafe { (*self.0.get()).take() });
    }
}

/// The pinned pages of a user MR.
pub(crate) type PinnedCell = TakeCell<Pinned>;

/// The frame behind a kernel virtual address of the linear map (the "DMA
/// address" of a device using virtual DMA), if it is one.
pub(super) fn virt_to_pfn(va: u64) -> Option<u64> {
    // SAFETY: only computes; the address is never dereferenced.
    let pfn = unsafe { b::oxe_virt_to_pfn(va) };
    u64::try_from(pfn).ok()
}

/// Runs `f` on the kernel mapping of frame `pfn`.
///
/// # Safety
///
/// `pfn` is a page pinned by a live MR (the caller holds a reference on it),
/// a page of a live ODP MR whose range the caller holds locked present
/// (`Implicit::walk`), a page of a live dma-buf MR's mapping, or one of the
/// kernel's linear map.
unsafe fn with_page<R>(pfn: u64, f: impl FnOnce(*mut u8) -> R) -> R {
    // SAFETY: a live page, mapped until the matching kunmap_local, in this scope.
    unsafe {
        let va = b::kmap_local_page(b::oxe_pfn_to_page(pfn as c_ulong));
        let r = f(va.cast());
        b::kunmap_local(va);
        r
    }
}

/// A page fragment of a live MR that the caller holds a reference on, and
/// whose access it checked. Made only by [`MrRef::frags`].
pub(super) struct Frag(Fragment);

impl Frag {
    pub(super) fn len(&self) -> usize {
        self.0.len as usize
    }

    /// Copies `src` (at most the fragment's length) into the fragment.
    pub(super) fn write(&self, src: &[u8]) {
        let n = src.len().min(self.len());
        // SAFETY: the fragment lies inside a page the MR maps, pinned or of the linear map (see `MrRef::frags`); `n` is at most its length.
        unsafe {
            with_page(self.0.pfn, |p| {
                ptr::copy_nonoverlapping(src.as_ptr(), p.add(self.0.offset as usize), n)
            })
        };
    }

    /// Copies into the fragment its length of `src`'s bytes from `pos` on.
    /// `seek` remembers where the last call ended in `src`'s pages, so that
    /// a walk forward through a packet finds each position in a step or two
    /// instead of from the first page.
    pub(super) fn write_from(&self, src: Src<'_>, pos: usize, seek: &mut Seek) -> bool {
        let n = self.len();
        match src {
            Src::Bytes(data) => match pos.checked_add(n).and_then(|end| data.get(pos..end)) {
                Some(d) => {
                    self.write(d);
                    true
                }
                None => false,
            },
            Src::Pages(refs, _) => {
                if pos < seek.start {
                    *seek = Seek::default();
                }
                // The first reference holding `pos`.
                while let Some(r) = refs.get(seek.idx) {
                    if pos - seek.start < r.len() {
                        break;
                    }
                    seek.start += r.len();
                    seek.idx += 1;
                }
                // The pieces of the source pages that make up `[pos, pos + n)`.
                let mut skip = pos - seek.start;
                let mut done = 0usize;
                for r in refs.iter().skip(seek.idx) {
                    if done == n {
                        break;
                    }
                    let k = (r.len() - skip).min(n - done);
                    // Only a piece of the same page can overlap (a WRITE
                    // of a buffer onto itself): memmove for that one, memcpy
                    // for the rest (x86's memmove is `rep movsb` on any CPU
                    // with ERMS, its memcpy only with FSRM).
                    let same = r.0.pfn == self.0.pfn;
                    // SAFETY: `r` holds a reference on its page, `skip + k` is within its piece; the destination lies inside a page the MR maps (see `MrRef::frags`), `done + k` within the fragment. Distinct kmap_local mappings, unmapped in reverse order; of distinct pages, they do not overlap.
                    unsafe {
                        with_page(r.0.pfn, |s| {
                            with_page(self.0.pfn, |d| {
                                let s = s.add(r.0.offset as usize + skip);
                                let d = d.add(self.0.offset as usize + done);
                                if same {
                                    ptr::copy(s, d, k)
                                } else {
                                    ptr::copy_nonoverlapping(s, d, k)
                                }
                            })
                        })
                    };
                    done += k;
                    skip = 0;
                }
                done == n
            }
        }
    }

    /// Takes a reference on the fragment's page, for a packet that carries
    /// the page instead of a copy of its bytes.
    fn page_ref(&self) -> PageRef {
        // SAFETY: a page the MR maps, kept so by the caller's reference on the MR (pinned) or by the ODP lock held during `frags` (on demand); the reference taken here is dropped by `PageRef`.
        unsafe { b::oxe_get_page(self.0.pfn as c_ulong) };
        PageRef(self.0)
    }

    /// Appends the fragment's bytes to `v`, whose spare capacity holds them
    /// (false otherwise, `v` unchanged): a packet's payload is filled straight
    /// from the MR, without zeroing it first.
    pub(super) fn append_to(&self, v: &mut KVVec<u8>) -> bool {
        let n = self.len();
        let Some(spare) = v.spare_capacity_mut().get_mut(..n) else {
            return false;
        };
        // SAFETY: as for `write`; `spare` has room for `n` bytes.
        unsafe {
            with_page(self.0.pfn, |p| {
                ptr::copy_nonoverlapping(
                    p.add(self.0.offset as usize),
                    spare.as_mut_ptr().cast::<u8>(),
                    n,
                )
            })
        };
        // SAFETY: the `n` bytes after the length were written just above, and are within the capacity.
        unsafe { v.inc_len(n) };
        true
    }

    /// Applies `op` to the fragment as one aligned u64; `None` if it is not
    /// one.
    pub(super) fn atomic(&self, op: impl FnOnce(&Atomic<u64>) -> u64) -> Option<u64> {
        if self.0.len != 8 || self.0.offset % 8 != 0 {
            return None;
        }
        let off = self.0.offset as usize;
        // Other CPUs and the user may access it concurrently: atomics.
        // SAFETY: as for `write`; an aligned u64 inside the mapped page.
        Some(unsafe { with_page(self.0.pfn, |p| op(Atomic::from_ptr(p.add(off).cast()))) })
    }
}

/// A piece of a page that a packet carries by reference (loopback from a
/// user MR): one copy per byte, from the sender's pages straight into the
/// receiver's, instead of two. The reference is on the page, not on the MR:
/// a packet waiting in a queue does not hold up `dereg_mr`, and whatever
/// happens to the MR meanwhile (dereg, rereg) the page stays valid memory.
pub(crate) struct PageRef(Fragment);

impl PageRef {
    pub(crate) fn len(&self) -> usize {
        self.0.len as usize
    }
}

impl Drop for PageRef {
    fn drop(&mut self) {
        // SAFETY: the reference `Frag::page_ref` took.
        unsafe { b::oxe_put_page(self.0.pfn as c_ulong) };
    }
}

// SAFETY: a counted page reference may be dropped on any thread, and the page is only read through kmap_local.
unsafe impl Send for PageRef {}
// SAFETY: as above; shared use only reads the fields.
unsafe impl Sync for PageRef {}

/// Bytes to place in an MR: a slice, or pieces of referenced pages (with
/// their total length).
#[derive(Clone, Copy)]
pub(crate) enum Src<'a> {
    Bytes(&'a [u8]),
    Pages(&'a [PageRef], usize),
}

/// Where a walk through a [`Src::Pages`] is: the reference `idx`, whose
/// bytes start at `start` in the source.
#[derive(Default)]
pub(super) struct Seek {
    idx: usize,
    start: usize,
}

impl Src<'_> {
    pub(crate) fn len(&self) -> usize {
        match self {
            Src::Bytes(d) => d.len(),
            Src::Pages(_, len) => *len,
        }
    }

    /// Copies all the bytes into `dst`, which must be as long.
    pub(crate) fn copy_to(&self, dst: &mut [u8]) -> bool {
        if dst.len() != self.len() {
            return false;
        }
        match self {
            Src::Bytes(d) => dst.copy_from_slice(d),
            Src::Pages(refs, _) => {
                let mut at = 0usize;
                for r in refs.iter() {
                    let n = r.len();
                    let Some(d) = at.checked_add(n).and_then(|end| dst.get_mut(at..end)) else {
                        return false;
                    };
                    // SAFETY: `r` holds a reference on its page and its piece lies within it; `d` is `n` bytes of `dst`.
                    unsafe {
                        with_page(r.0.pfn, |p| {
                            ptr::copy_nonoverlapping(p.add(r.0.offset as usize), d.as_mut_ptr(), n)
                        })
                    };
                    at += n;
                }
                if at != dst.len() {
                    return false;
                }
            }
        }
        true
    }
}

/// Visits the fragments of `[iova, iova + len)`; false if any is missing or
/// `f` refuses one.
fn walk(cur: Option<mtt::Cursor<'_>>, len: u64, mut f: impl FnMut(Frag) -> bool) -> bool {
    let Some(cur) = cur else {
        return false;
    };
    let mut done = 0u64;
    for frag in cur {
        if !f(Frag(frag)) {
            return false;
        }
        done += u64::from(frag.len);
    }
    done == len
}

/// Visits `[va, va + len)` page by page, `pfn_of` giving the frame behind
/// each piece; false if one has none, `f` refuses one, or the range wraps.
fn by_page(
    va: u64,
    len: u64,
    mut pfn_of: impl FnMut(u64) -> Option<u64>,
    mut f: impl FnMut(Frag) -> bool,
) -> bool {
    let mut done = 0u64;
    for (a, offset, n) in mtt::page_pieces(va, len, PAGE_SHIFT) {
        let Some(pfn) = pfn_of(a) else {
            return false;
        };
        if !f(Frag(Fragment {
            pfn,
            offset,
            len: n,
        })) {
            return false;
        }
        done += u64::from(n);
    }
    done == len
}

/// What [`MrRef::visit`] hands the fragments to.
pub(super) trait Visit {
    fn frag(&mut self, f: Frag) -> bool;

    /// The end of a run of fragments whose pages are held (an ODP MR's
    /// lock, a fast MR's): they are still held during this call.
    fn held(&mut self) -> bool {
        true
    }
}

struct Each<F>(F);

impl<F: FnMut(Frag) -> bool> Visit for Each<F> {
    fn frag(&mut self, f: Frag) -> bool {
        (self.0)(f)
    }
}

/// Fragments gathered for a copy into them: a hand-over packet's
/// (`HANDOVER_MTU`, 64 pages) at any offset, shared in one job.
const GATHER: usize = 72;
/// Fragments per piece of a shared copy: 16 KiB of whole pages.
const PIECE: usize = 4;

/// A copy into the fragments of an MR, gathered while their pages are held
/// and copied in pieces shared with a helper on another CPU
/// ([`crate::wq::share`]) before they are let go: the helper copies under
/// the hold this side keeps (an ODP MR's lock, which an invalidation waits
/// for), and takes no lock of its own.
struct Gather<'s> {
    frags: [Fragment; GATHER],
    n: usize,
    src: Src<'s>,
    /// Where the bytes of the first gathered fragment are in `src`.
    at: usize,
}

impl Visit for Gather<'_> {
    fn frag(&mut self, f: Frag) -> bool {
        if self.n == GATHER && !self.held() {
            return false;
        }
        let Some(slot) = self.frags.get_mut(self.n) else {
            return false;
        };
        *slot = f.0;
        self.n += 1;
        true
    }

    fn held(&mut self) -> bool {
        let frags = self.frags.get(..self.n).unwrap_or(&[]);
        let (src, at) = (self.src, self.at);
        let ok = crate::wq::share(frags.len().div_ceil(PIECE) as u32, |i| {
            let first = i as usize * PIECE;
            let mut pos = frags.iter().take(first).fold(at, |p, f| p + f.len as usize);
            let mut seek = Seek::default();
            frags.iter().skip(first).take(PIECE).all(|f| {
                // A fragment `visit` gave, still held (see `Visit::held`).
                let ok = Frag(*f).write_from(src, pos, &mut seek);
                pos += f.len as usize;
                ok
            })
        });
        self.at += frags.iter().map(|f| f.len as usize).sum::<usize>();
        self.n = 0;
        ok
    }
}

impl MrRef {
    /// [`MrRef::write`] of a large copy: see [`Gather`].
    pub(super) fn write_shared(&self, iova: u64, src: Src<'_>, pos: usize, len: usize) -> bool {
        let mut g = Gather {
            frags: [Fragment {
                pfn: 0,
                offset: 0,
                len: 0,
            }; GATHER],
            n: 0,
            src,
            at: pos,
        };
        self.visit(iova, len as u64, true, &mut g)
    }

    /// Visits the page fragments of `[iova, iova + len)`, which the caller
    /// checked. A fast-registration MR may have been invalidated since: then
    /// nothing is visited. The fragments are pages the MR maps, kept so by
    /// the reference `self` holds (an ODP MR's: by its lock, held until
    /// this returns; `write` says whether they must be writable).
    pub(super) fn frags(
        &self,
        iova: u64,
        len: u64,
        write: bool,
        f: impl FnMut(Frag) -> bool,
    ) -> bool {
        self.visit(iova, len, write, &mut Each(f))
    }

    /// As [`Self::frags`], with `v.held()` at the end of each run of
    /// fragments, while they are held.
    fn visit(&self, iova: u64, len: u64, write: bool, v: &mut impl Visit) -> bool {
        match &self.mr().kind {
            Kind::User { region, pinned, .. } => {
                let runs = pinned.get().map_or(&[][..], |p| &p.runs[..]);
                walk(region.cursor(runs, iova, len), len, |f| v.frag(f)) && v.held()
            }
            Kind::Odp {
                region, va0, odp, ..
            } => {
                let Some(va) = region
                    .locate(iova, len)
                    .and_then(|pos| va0.checked_add(pos))
                else {
                    return false;
                };
                // Faulted in here, in the QP's task; an invalidation waits
                // until the copy is done. An address the process no longer
                // maps (or maps read-only, for a write) fails the access.
                len == 0
                    || odp
                        .walk(va, len, write, true, |present, a, n| {
                            by_page(a, n, |x| present.pfn(x), |f| v.frag(f)) && v.held()
                        })
                        .unwrap_or(false)
            }
            Kind::Implicit { imp, .. } => imp
                .walk(iova, len, write, true, |present, va, n| {
                    by_page(va, n, |a| present.pfn(a), |f| v.frag(f)) && v.held()
                })
                .unwrap_or(false),
            Kind::Dma { .. } => by_page(iova, len, virt_to_pfn, |f| v.frag(f)) && v.held(),
            Kind::DmaBuf {
                region, base, buf, ..
            } => {
                // Mapped until the MR is released; the reference held on the
                // MR keeps it so.
                let Some(va) = region
                    .locate(iova, len)
                    .and_then(|pos| base.checked_add(pos))
                else {
                    return false;
                };
                buf.get().is_some()
                    && by_page(va, len, super::dmabuf::vmalloc_to_pfn, |f| v.frag(f))
                    && v.held()
            }
            Kind::Fast(m) => {
                // Held across the copy: REG_MR and invalidation wait for it.
                let m = m.lock();
                if !m.valid || m.grant.key != self.key {
                    return false;
                }
                walk(m.region.cursor(&m.runs, iova, len), len, |f| v.frag(f)) && v.held()
            }
        }
    }
}

impl MrRef {
    /// Appends references on the pages of `[iova, iova + len)` to `out`
    /// (which has the room), for a packet that carries them: user memory
    /// only, pinned or on demand. An ODP page is referenced while the MR's
    /// lock holds it mapped (an invalidation waits), so the page outlives
    /// the packet even if the process lets go of it meanwhile, as the bytes
    /// a NIC had read would; nothing is pinned. False for other kinds (the
    /// kernel's memory behind a DMA or fast MR may be slab, which must not
    /// be referenced this way; a dma-buf's pages are the exporter's) or a
    /// range the MR no longer maps; the caller copies the bytes then. The
    /// caller checked the access.
    pub(crate) fn page_refs(&self, iova: u64, len: u64, out: &mut KVec<PageRef>) -> bool {
        if !matches!(
            self.mr().kind,
            Kind::User { .. } | Kind::Odp { .. } | Kind::Implicit { .. }
        ) {
            return false;
        }
        self.frags(iova, len, false, |f| {
            out.push_within_capacity(f.page_ref()).is_ok()
        })
    }
}

impl OxeMr {
    /// Deregistration, once released: unpins and unaccounts now, so that
    /// the process sees its pins gone when dereg returns.
    ///
    /// # Safety
    ///
    /// No reference is left (see [`OxeMr::wait_released`]): nothing reads the
    /// pages any more.
    pub(crate) unsafe fn release_pages(&self) {
        match &self.kind {
            // SAFETY: per the function's contract.
            Kind::User { pinned, .. } => unsafe { pinned.release() },
            Kind::Odp { odp: imp, .. } | Kind::Implicit { imp, .. } => imp.release(),
            // SAFETY: per the function's contract.
            Kind::DmaBuf { buf, .. } => unsafe { buf.release() },
            _ => {}
        }
    }
}
