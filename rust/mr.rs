// SPDX-License-Identifier: GPL-2.0

//! Memory registration: user MRs pinned by oxe itself with
//! `pin_user_pages_fast(FOLL_LONGTERM)`, accounted against RLIMIT_MEMLOCK,
//! translated by oxe's MTT (`common/mtt.rs`) and named by a key from the
//! device's key table.

use core::mem::size_of;
use core::ptr;

use kernel::alloc::kvec::PushError;
use kernel::alloc::KVVec;
use kernel::ffi::{c_int, c_ulong};
use kernel::prelude::*;
use kernel::sync::atomic::{ordering, Atomic};
use kernel::sync::Completion;
use kernel::types::Opaque;

use crate::access::{self, PdId, PdRights};
use crate::bindings as b;
use crate::device::OxeDevice;
use crate::eopnotsupp;
use crate::ffi::{err_ptr, to_c_ptr};
use crate::irqlock::{new_irq_spinlock, IrqSpinLock};
use crate::keys::Keyed;
use crate::mtt::{self, Grant, Region, Run, RunBuilder};
use crate::pd;

const PAGE_SHIFT: u32 = kernel::page::PAGE_SHIFT as u32;
const PAGE_SIZE: u64 = 1 << PAGE_SHIFT;
/// Pages pinned per call: one page's worth of page pointers.
const PIN_BATCH: usize = kernel::page::PAGE_SIZE / size_of::<*mut b::page>();

/// Pinned user pages, as runs, with their accounting. Unpins on drop.
struct Pinned {
    runs: KVVec<Run>,
    /// Pages charged to `mm->pinned_vm`: the whole request, up front.
    accounted: u64,
    mm: *mut b::mm_struct,
    dirty: bool,
}

// SAFETY: the pages and the mm reference may be released from any thread.
unsafe impl Send for Pinned {}
// SAFETY: immutable after construction.
unsafe impl Sync for Pinned {}

impl Pinned {
    /// Pins `npages` pages from `va`, batch by batch; a failure part way
    /// unpins everything pinned so far (through `Drop`).
    fn pin(va: u64, npages: u64, write: bool) -> Result<Self> {
        let mut mm = ptr::null_mut();
        // SAFETY: process context of the registering task.
        kernel::error::to_result(unsafe { b::oxe_account_pinned(npages as c_ulong, &mut mm) })?;
        let mut this = Pinned {
            runs: KVVec::new(),
            accounted: npages,
            mm,
            dirty: write,
        };
        let mut flags = b::FOLL_LONGTERM;
        if write {
            flags |= b::FOLL_WRITE;
        }
        let batch = npages.min(PIN_BATCH as u64) as usize;
        let mut pages = KVec::<*mut b::page>::with_capacity(batch, GFP_KERNEL)?;
        let mut builder = RunBuilder::new();
        let mut va = va;
        let mut left = npages;
        let result = loop {
            if left == 0 {
                break Ok(());
            }
            let n = left.min(batch as u64) as usize;
            // SAFETY: `pages` has room for `n` pointers; `va` is a user address.
            let got = unsafe {
                b::pin_user_pages_fast(va as c_ulong, n as c_int, flags, pages.as_mut_ptr())
            };
            if got <= 0 {
                break Err(if got == 0 {
                    EFAULT
                } else {
                    Error::from_errno(got as c_int)
                });
            }
            let got = got as usize;
            // Worst case every page closes a run: reserve first, so that
            // pinned pages are always recorded and released.
            if let Err(e) = this.runs.reserve(got, GFP_KERNEL) {
                // SAFETY: `pages[..got]` were pinned just now.
                unsafe { b::unpin_user_pages(pages.as_mut_ptr(), got as c_ulong) };
                break Err(e.into());
            }
            for i in 0..got {
                // SAFETY: `i < got` pointers were written by the pin call.
                let pfn = unsafe { b::oxe_page_to_pfn(*pages.as_ptr().add(i)) } as u64;
                if let Some(run) = builder.push(pfn) {
                    // Capacity was reserved above.
                    let _ = this.runs.push_within_capacity(run);
                }
            }
            va += got as u64 * PAGE_SIZE;
            left -= got as u64;
        };
        // The last run: there is usually room left by the batch reservations.
        if let Some(run) = builder.finish() {
            if let Err(PushError(run)) = this.runs.push_within_capacity(run) {
                if this.runs.reserve(1, GFP_KERNEL).is_ok() {
                    let _ = this.runs.push_within_capacity(run);
                } else {
                    // SAFETY: these pages are pinned and recorded nowhere else.
                    unsafe { unpin_run(&run, this.dirty) };
                    return Err(ENOMEM);
                }
            }
        }
        // Growth doubles the table; give the slack back (best effort).
        if this.runs.capacity() > this.runs.len() {
            let _ = this.runs.shrink_to(this.runs.len(), GFP_KERNEL);
        }
        result.map(|()| this)
    }

    /// Bytes of translation table.
    fn table_bytes(&self) -> u64 {
        (self.runs.capacity() * size_of::<Run>()) as u64
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

/// What an MR maps.
enum Kind {
    /// User memory pinned by `reg_user_mr`. The translation is fixed for the
    /// MR's life; `rereg_user_mr` may change the PD and the rights.
    User {
        /// An [`access::PdRights`], packed: one load gives a check the PD
        /// and the rights of one and the same registration.
        rights: Atomic<u64>,
        region: Region,
        pinned: Option<Pinned>,
    },
    /// `get_dma_mr`: all of the kernel's linear map; an iova is a kernel
    /// virtual address (oxe uses virtual DMA, as rdma_rxe does).
    Dma { grant: Grant },
    /// `alloc_mr`: mapped by `map_mr_sg`, made valid by a REG_MR work request
    /// and invalidated by LOCAL_INV or SEND_WITH_INV. Its state changes under
    /// the data path's feet, hence the lock.
    Fast(Pin<KBox<IrqSpinLock<Fast>>>),
}

/// A fast-registration MR's state. Both tables are allocated up front with
/// room for `max_pages` calls of `set_page`, so neither mapping nor
/// registering allocates.
struct Fast {
    valid: bool,
    grant: Grant,
    region: Region,
    runs: KVVec<Run>,
    /// What `map_mr_sg` built, made live by the next REG_MR.
    staged: KVVec<Run>,
    staged_region: Region,
    /// Pages (PAGE_SIZE) and `set_page` calls of the staged mapping.
    staged_pages: u64,
    staged_calls: u32,
    max_pages: u32,
}

/// One memory region. The RDMA core sees `ib`; the key table and the data
/// path see the rest. Freed an RCU grace period after deregistration, since
/// lock-free key lookups may still be reading it.
#[pin_data]
#[repr(C)]
pub(crate) struct OxeMr {
    ib: b::ib_mr,
    kind: Kind,
    /// The key it answers to: fixed, except for fast registration.
    key: Atomic<u32>,
    /// The key table's reference plus one per data-path user.
    refs: Atomic<i32>,
    #[pin]
    released: Completion,
    rcu: Opaque<b::callback_head>,
}

// SAFETY: shared fields are immutable after publication, atomic or locked.
unsafe impl Send for OxeMr {}
// SAFETY: as above.
unsafe impl Sync for OxeMr {}

// The memory is freed through call_rcu only after the key was removed.
// SAFETY: `try_get` fails once the count hit zero.
unsafe impl Keyed for OxeMr {
    fn key(&self) -> u32 {
        self.key.load(ordering::Relaxed)
    }

    fn try_get(&self) -> bool {
        let mut cur = self.refs.load(ordering::Relaxed);
        while cur > 0 {
            match self.refs.cmpxchg(cur, cur + 1, ordering::Acquire) {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
        false
    }
}

/// Why a local operation on an MR (REG_MR, LOCAL_INV, SEND_WITH_INV) fails.
#[derive(Debug)]
pub(crate) struct LocalOpError;

/// A reference on a live MR, from a lookup of `key`.
pub(crate) struct MrRef {
    mr: *mut OxeMr,
    key: u32,
}

/// Runs `f` on the kernel mapping of frame `pfn`.
fn with_page<R>(pfn: u64, f: impl FnOnce(*mut u8) -> R) -> R {
    // kmap_local_page maps the page until the matching kunmap_local; `pfn`
    // is a page pinned by a live MR (the caller holds an MrRef) or one of the
    // kernel's linear map.
    // SAFETY: a live page, mapped and unmapped in this scope.
    unsafe {
        let va = b::kmap_local_page(b::oxe_pfn_to_page(pfn as c_ulong));
        let r = f(va.cast());
        b::kunmap_local(va);
        r
    }
}

/// Visits the fragments of `[iova, iova + len)`; false if any is missing or
/// `f` refuses one.
fn walk(cur: Option<mtt::Cursor<'_>>, len: u64, mut f: impl FnMut(mtt::Fragment) -> bool) -> bool {
    let Some(cur) = cur else {
        return false;
    };
    let mut done = 0u64;
    for frag in cur {
        if !f(frag) {
            return false;
        }
        done += u64::from(frag.len);
    }
    done == len
}

/// The access check of an MR with no translation table (the DMA MR): any
/// range that does not wrap.
fn check_grant(grant: &Grant, req: &mtt::Request) -> Result<(), mtt::AccessError> {
    mtt::check_grant(grant, req)?;
    match req.iova.checked_add(req.len) {
        Some(_) => Ok(()),
        None => Err(mtt::AccessError::OutOfRange),
    }
}

impl MrRef {
    fn mr(&self) -> &OxeMr {
        // SAFETY: the reference keeps the MR from being released.
        unsafe { &*self.mr }
    }

    /// The access check of the data path: `Ok` if the MR grants `req`, or
    /// why the access is refused.
    pub(crate) fn check(&self, req: &mtt::Request) -> Result<(), mtt::AccessError> {
        match &self.mr().kind {
            Kind::User {
                rights,
                region,
                pinned,
            } => {
                let r = PdRights::unpack(rights.load(ordering::Relaxed));
                let grant = Grant {
                    key: self.mr().key.load(ordering::Relaxed),
                    pd: r.pd,
                    access: r.access,
                };
                let runs = pinned.as_ref().map_or(&[][..], |p| &p.runs[..]);
                mtt::check(&grant, region, runs, req).map(|_| ())
            }
            Kind::Dma { grant } => check_grant(grant, req),
            Kind::Fast(f) => {
                let f = f.lock();
                if !f.valid {
                    return Err(mtt::AccessError::BadKey);
                }
                mtt::check(&f.grant, &f.region, &f.runs, req).map(|_| ())
            }
        }
    }

    /// Visits the page fragments of `[iova, iova + len)`, which the caller
    /// checked. A fast-registration MR may have been invalidated since: then
    /// nothing is visited.
    fn frags(&self, iova: u64, len: u64, mut f: impl FnMut(mtt::Fragment) -> bool) -> bool {
        match &self.mr().kind {
            Kind::User { region, pinned, .. } => {
                let runs = pinned.as_ref().map_or(&[][..], |p| &p.runs[..]);
                walk(region.cursor(runs, iova, len), len, f)
            }
            Kind::Dma { .. } => {
                let mut done = 0u64;
                while done < len {
                    let Some(va) = iova.checked_add(done) else {
                        return false;
                    };
                    // SAFETY: only computes; the address is never dereferenced.
                    let pfn = unsafe { b::oxe_virt_to_pfn(va) };
                    if pfn < 0 {
                        return false;
                    }
                    let offset = va & (PAGE_SIZE - 1);
                    let n = (PAGE_SIZE - offset).min(len - done);
                    let frag = mtt::Fragment {
                        pfn: pfn as u64,
                        offset: offset as u32,
                        len: n as u32,
                    };
                    if !f(frag) {
                        return false;
                    }
                    done += n;
                }
                true
            }
            Kind::Fast(m) => {
                // Held across the copy: REG_MR and invalidation wait for it.
                let m = m.lock();
                if !m.valid || m.grant.key != self.key {
                    return false;
                }
                walk(m.region.cursor(&m.runs, iova, len), len, f)
            }
        }
    }

    /// Copies `data` into the MR at `iova`. The caller checked the access.
    pub(crate) fn write(&self, iova: u64, data: &[u8]) -> bool {
        let mut off = 0usize;
        self.frags(iova, data.len() as u64, |f| {
            let len = f.len as usize;
            let Some(src) = data.get(off..off + len) else {
                return false;
            };
            // SAFETY: the fragment lies inside the mapped page.
            with_page(f.pfn, |p| unsafe {
                ptr::copy_nonoverlapping(src.as_ptr(), p.add(f.offset as usize), len)
            });
            off += len;
            true
        })
    }

    /// Copies from the MR at `iova` into `out`. The caller checked the access.
    pub(crate) fn read(&self, iova: u64, out: &mut [u8]) -> bool {
        let mut off = 0usize;
        let len = out.len() as u64;
        self.frags(iova, len, |f| {
            let n = f.len as usize;
            let Some(dst) = out.get_mut(off..off + n) else {
                return false;
            };
            // SAFETY: the fragment lies inside the mapped page.
            with_page(f.pfn, |p| unsafe {
                ptr::copy_nonoverlapping(p.add(f.offset as usize), dst.as_mut_ptr(), n)
            });
            off += n;
            true
        })
    }

    /// Applies `op` to the aligned u64 at `iova` atomically and returns the
    /// value it had. The caller checked the access and the alignment.
    pub(crate) fn atomic(&self, iova: u64, op: impl FnOnce(&Atomic<u64>) -> u64) -> Option<u64> {
        let mut op = Some(op);
        let mut orig = None;
        let ok = self.frags(iova, 8, |f| {
            let Some(op) = op.take() else {
                return false;
            };
            if f.len != 8 || f.offset % 8 != 0 {
                return false;
            }
            orig = Some(with_page(f.pfn, |p| {
                // Other CPUs and the user may access it concurrently: atomics.
                // SAFETY: an aligned u64 inside the mapped page.
                let x = unsafe { Atomic::from_ptr(p.add(f.offset as usize).cast()) };
                op(x)
            }));
            true
        });
        if ok {
            orig
        } else {
            None
        }
    }

    /// LOCAL_INV and SEND_WITH_INV: `key` must name a valid fast-registration
    /// MR of `pd`. Other MRs cannot be invalidated, as in rdma_rxe.
    fn invalidate(&self, pd: PdId) -> Result<(), LocalOpError> {
        let Kind::Fast(m) = &self.mr().kind else {
            return Err(LocalOpError);
        };
        let mut m = m.lock();
        if m.grant.pd != pd || m.grant.key != self.key {
            return Err(LocalOpError);
        }
        m.valid = false;
        Ok(())
    }

    /// REG_MR: makes the mapping of the last `map_mr_sg` live under `key`
    /// (same index, any tag) with `access`. The MR must be free (not valid)
    /// and belong to `pd`.
    pub(crate) fn fast_register(
        &self,
        pd: PdId,
        key: u32,
        access: u32,
    ) -> Result<(), LocalOpError> {
        let Kind::Fast(m) = &self.mr().kind else {
            return Err(LocalOpError);
        };
        if crate::key::index(key) != crate::key::index(self.key)
            || access::check_access(access).is_err()
        {
            return Err(LocalOpError);
        }
        let mut guard = m.lock();
        let m = &mut *guard;
        if m.valid || m.grant.pd != pd {
            return Err(LocalOpError);
        }
        m.runs.clear();
        for run in m.staged.iter() {
            // Same capacity as `staged`: never fails.
            if m.runs.push_within_capacity(*run).is_err() {
                return Err(LocalOpError);
            }
        }
        m.region = m.staged_region;
        m.grant = Grant { key, pd, access };
        m.valid = true;
        self.mr().key.store(key, ordering::Relaxed);
        Ok(())
    }
}

impl Drop for MrRef {
    fn drop(&mut self) {
        let mr = self.mr();
        if mr.refs.fetch_sub(1, ordering::Release) == 1 {
            mr.released.complete_all();
        }
    }
}

/// Finds the live MR named by `key` on `dev`, without locks.
pub(crate) fn lookup(dev: &OxeDevice, key: u32) -> Option<MrRef> {
    dev.state()?.keys.get(key).map(|mr| MrRef { mr, key })
}

/// LOCAL_INV and SEND_WITH_INV: invalidates the fast MR `key` names, if it
/// is one of `pd`'s.
pub(crate) fn invalidate(dev: &OxeDevice, key: u32, pd: PdId) -> bool {
    lookup(dev, key).is_some_and(|m| m.invalidate(pd).is_ok())
}

/// The MR at the index of `key`, whatever its tag (REG_MR changes the tag).
pub(crate) fn lookup_index(dev: &OxeDevice, key: u32) -> Option<MrRef> {
    dev.state()?.keys.get_index(key).map(|mr| {
        // SAFETY: a reference was taken by the lookup.
        let key = unsafe { (*mr).key.load(ordering::Relaxed) };
        MrRef { mr, key }
    })
}

fn to_mr(ib: *mut b::ib_mr) -> *mut OxeMr {
    // `ib` is the first field of the `repr(C)` OxeMr.
    ib.cast()
}

fn reg_errno(e: access::RegError) -> Error {
    match e {
        access::RegError::Invalid => EINVAL,
        access::RegError::NotSupported => eopnotsupp(),
    }
}

/// Allocates an MR of `kind` and publishes it under a fresh key of `pd`'s
/// device; returns the core-visible part.
///
/// # Safety
///
/// `pd` is a live PD of an oxe device.
unsafe fn publish(pd: *mut b::ib_pd, kind: Kind, iova: u64, length: u64) -> Result<*mut b::ib_mr> {
    // SAFETY: the PD belongs to an oxe device.
    let dev = unsafe { OxeDevice::from_ib((*pd).device) };
    let state = dev.state().ok_or(ENODEV)?;
    let mr = KBox::pin_init(
        try_pin_init!(OxeMr {
            ib: pin_init::zeroed(),
            kind,
            key: Atomic::new(0),
            refs: Atomic::new(1),
            released <- Completion::new(),
            rcu: Opaque::uninit(),
        }? Error),
        GFP_KERNEL,
    )?;
    // From here on the MR is only used through this pointer; `free_rcu` frees it.
    // SAFETY: the MR is not moved out of its allocation.
    let mr = KBox::into_raw(unsafe { Pin::into_inner_unchecked(mr) });
    let published = state.keys.insert(|key| {
        // SAFETY: not yet visible to anyone else.
        unsafe {
            (*mr).key.store(key, ordering::Relaxed);
            match &mut (*mr).kind {
                Kind::User { .. } => {}
                Kind::Dma { grant } => grant.key = key,
                Kind::Fast(f) => f.lock().grant.key = key,
            }
            let ib = &mut (*mr).ib;
            ib.lkey = key;
            ib.rkey = key;
            ib.iova = iova;
            ib.length = length;
            ib.page_size = PAGE_SIZE as u32;
        }
        mr
    });
    if let Err(e) = published {
        // SAFETY: never published; we own the only pointer.
        drop(unsafe { KBox::from_raw(mr) });
        return Err(e);
    }
    // SAFETY: `ib` is the core-visible part of a live MR.
    Ok(unsafe { ptr::addr_of_mut!((*mr).ib) })
}

/// # Safety
///
/// Called by the RDMA core for REG_MR with a live PD of an oxe device.
pub(crate) unsafe extern "C" fn reg_user_mr(
    pd: *mut b::ib_pd,
    start: u64,
    length: u64,
    iova: u64,
    access: c_int,
    _dmah: *mut b::ib_dmah,
    udata: *mut b::ib_udata,
) -> *mut b::ib_mr {
    // SAFETY: per the function's contract.
    to_c_ptr(unsafe { reg_user(pd, start, length, iova, access as u32, udata) })
}

/// # Safety
///
/// As for [`reg_user_mr`].
unsafe fn reg_user(
    pd: *mut b::ib_pd,
    start: u64,
    length: u64,
    iova: u64,
    access: u32,
    udata: *mut b::ib_udata,
) -> Result<*mut b::ib_mr> {
    // SAFETY: `udata` is the command's udata.
    kernel::error::to_result(unsafe { b::oxe_udata_in_empty(udata) })?;
    let range =
        access::check_user_reg(start, length, iova, access, PAGE_SHIFT).map_err(reg_errno)?;
    let pinned = Pinned::pin(
        range.first_page_va,
        range.npages,
        access & access::ANY_WRITE != 0,
    )?;
    let rights = PdRights {
        // SAFETY: a live PD of this device (the function's contract).
        pd: unsafe { pd::id(pd) },
        access,
    };
    let kind = Kind::User {
        rights: Atomic::new(rights.pack()),
        region: Region {
            iova,
            length,
            offset: range.offset,
            page_shift: PAGE_SHIFT,
        },
        pinned: Some(pinned),
    };
    // SAFETY: per the function's contract.
    unsafe { publish(pd, kind, iova, length) }
}

/// Re-registration. A new PD and new rights are changed in place (keys and
/// translation stay), except that write rights on pages pinned read-only are
/// refused (EOPNOTSUPP): they may be shared copy-on-write, and writing them
/// needs pinning anew. A new translation is a new MR, pinned and keyed
/// afresh; the core then destroys the old one, whose keys die with it.
///
/// # Safety
///
/// Called by the RDMA core for REREG_MR with a live user MR and a live PD of
/// this device.
pub(crate) unsafe extern "C" fn rereg_user_mr(
    ib: *mut b::ib_mr,
    flags: c_int,
    start: u64,
    length: u64,
    iova: u64,
    access: c_int,
    pd: *mut b::ib_pd,
    udata: *mut b::ib_udata,
) -> *mut b::ib_mr {
    let flags = flags as u32;
    if flags & b::ib_mr_rereg_flags_IB_MR_REREG_TRANS != 0 {
        // SAFETY: per the function's contract.
        return to_c_ptr(unsafe {
            rereg_trans(ib, flags, start, length, iova, access as u32, pd, udata)
        });
    }
    // SAFETY: per the function's contract.
    match unsafe { rereg(ib, flags, access as u32, pd, udata) } {
        // The same MR, changed: the core keeps it.
        Ok(()) => ptr::null_mut(),
        Err(e) => err_ptr(e),
    }
}

/// A new translation: a new MR with the old rights unless new ones are given.
///
/// # Safety
///
/// As for [`rereg_user_mr`].
#[allow(clippy::too_many_arguments)]
unsafe fn rereg_trans(
    ib: *mut b::ib_mr,
    flags: u32,
    start: u64,
    length: u64,
    iova: u64,
    new_access: u32,
    pd: *mut b::ib_pd,
    udata: *mut b::ib_udata,
) -> Result<*mut b::ib_mr> {
    // SAFETY: `ib` is one of ours and live.
    let mr = unsafe { &*to_mr(ib) };
    let Kind::User { rights, .. } = &mr.kind else {
        return Err(EINVAL);
    };
    let access = if flags & b::ib_mr_rereg_flags_IB_MR_REREG_ACCESS != 0 {
        new_access
    } else {
        PdRights::unpack(rights.load(ordering::Relaxed)).access
    };
    // SAFETY: `pd` is the (new or unchanged) live PD of this device.
    unsafe { reg_user(pd, start, length, iova, access, udata) }
}

/// # Safety
///
/// As for [`rereg_user_mr`].
unsafe fn rereg(
    ib: *mut b::ib_mr,
    flags: u32,
    new_access: u32,
    pd: *mut b::ib_pd,
    udata: *mut b::ib_udata,
) -> Result {
    // SAFETY: `udata` is the command's udata.
    kernel::error::to_result(unsafe { b::oxe_udata_in_empty(udata) })?;
    // SAFETY: `ib` is one of ours and live.
    let mr = unsafe { &*to_mr(ib) };
    let Kind::User { rights, pinned, .. } = &mr.kind else {
        return Err(EINVAL);
    };
    let set_access = flags & b::ib_mr_rereg_flags_IB_MR_REREG_ACCESS != 0;
    if set_access {
        access::check_access(new_access).map_err(reg_errno)?;
        let writable = pinned.as_ref().is_some_and(|p| p.dirty);
        if new_access & access::ANY_WRITE != 0 && !writable {
            return Err(eopnotsupp());
        }
    }
    let set_pd = flags & b::ib_mr_rereg_flags_IB_MR_REREG_PD != 0;
    // SAFETY: the new PD, live, of this device (the function's contract).
    let new_pd = set_pd.then(|| unsafe { pd::id(pd) });
    // Checked above: from here on nothing fails. One store changes both:
    // accesses already checked finish under the old pair, new ones see the
    // new pair, and none sees half of each. The core serialises rereg of an
    // MR (it holds the uobject exclusively), so nothing writes in between.
    let mut r = PdRights::unpack(rights.load(ordering::Relaxed));
    if let Some(pd) = new_pd {
        r.pd = pd;
    }
    if set_access {
        r.access = new_access;
    }
    rights.store(r.pack(), ordering::Relaxed);
    Ok(())
}

/// The DMA MR of kernel PDs: the core asks for one in `ib_alloc_pd`, for
/// the PD's `local_dma_lkey`.
///
/// # Safety
///
/// Called by the RDMA core with a live PD of an oxe device.
pub(crate) unsafe extern "C" fn get_dma_mr(pd: *mut b::ib_pd, access: c_int) -> *mut b::ib_mr {
    let access = access as u32;
    if access::check_access(access).is_err() {
        return err_ptr(EINVAL);
    }
    let kind = Kind::Dma {
        grant: Grant {
            key: 0,
            // SAFETY: a live PD of an oxe device (the function's contract).
            pd: unsafe { pd::id(pd) },
            access,
        },
    };
    // SAFETY: per the function's contract.
    to_c_ptr(unsafe { publish(pd, kind, 0, u64::MAX) })
}

/// # Safety
///
/// Called by the RDMA core with a live PD of an oxe device.
pub(crate) unsafe extern "C" fn alloc_mr(
    pd: *mut b::ib_pd,
    mr_type: b::ib_mr_type,
    max_num_sg: u32,
) -> *mut b::ib_mr {
    // SAFETY: per the function's contract.
    to_c_ptr(unsafe { alloc_fast(pd, mr_type, max_num_sg) })
}

/// # Safety
///
/// As for [`alloc_mr`].
unsafe fn alloc_fast(pd: *mut b::ib_pd, mr_type: b::ib_mr_type, max: u32) -> Result<*mut b::ib_mr> {
    if mr_type != b::ib_mr_type_IB_MR_TYPE_MEM_REG {
        return Err(eopnotsupp());
    }
    if max == 0 || max > crate::params::MAX_FAST_REG_PAGE_LIST_LEN {
        return Err(EINVAL);
    }
    let empty = Region {
        iova: 0,
        length: 0,
        offset: 0,
        page_shift: PAGE_SHIFT,
    };
    let fast = Fast {
        valid: false,
        grant: Grant {
            key: 0,
            // SAFETY: a live PD of an oxe device (the function's contract).
            pd: unsafe { pd::id(pd) },
            access: 0,
        },
        region: empty,
        runs: KVVec::with_capacity(max as usize, GFP_KERNEL)?,
        staged: KVVec::with_capacity(max as usize, GFP_KERNEL)?,
        staged_region: empty,
        staged_pages: 0,
        staged_calls: 0,
        max_pages: max,
    };
    let fast = KBox::pin_init(new_irq_spinlock!(fast, "oxe_fast_mr"), GFP_KERNEL)?;
    // SAFETY: per the function's contract.
    unsafe { publish(pd, Kind::Fast(fast), 0, 0) }
}

/// Records the pages behind a scatterlist (kernel virtual addresses, since
/// oxe uses virtual DMA) as the MR's staged mapping.
///
/// # Safety
///
/// Called by the RDMA core (`ib_map_mr_sg`) for an MR of ours.
pub(crate) unsafe extern "C" fn map_mr_sg(
    ib: *mut b::ib_mr,
    sg: *mut b::scatterlist,
    sg_nents: c_int,
    sg_offset: *mut kernel::ffi::c_uint,
) -> c_int {
    // SAFETY: `ib` is one of ours and live.
    let mr = unsafe { &*to_mr(ib) };
    let Kind::Fast(m) = &mr.kind else {
        return EINVAL.to_errno();
    };
    // SAFETY: set by ib_map_mr_sg before the call.
    let page_size = u64::from(unsafe { (*ib).page_size });
    // Pages smaller than the CPU's cannot be told apart in the MTT.
    if page_size < PAGE_SIZE || !page_size.is_power_of_two() {
        return EINVAL.to_errno();
    }
    {
        let mut m = m.lock();
        m.staged.clear();
        m.staged_pages = 0;
        m.staged_calls = 0;
    }
    // SAFETY: the caller's scatterlist; `set_page` gets this MR back.
    let n = unsafe { b::ib_sg_to_pages(ib, sg, sg_nents, sg_offset, Some(set_page)) };
    // SAFETY: ib_sg_to_pages set iova and length.
    let (iova, length) = unsafe { ((*ib).iova, (*ib).length) };
    m.lock().staged_region = Region {
        iova,
        length,
        offset: iova & (page_size - 1),
        page_shift: PAGE_SHIFT,
    };
    n
}

/// # Safety
///
/// Called by `ib_sg_to_pages` from [`map_mr_sg`].
unsafe extern "C" fn set_page(ib: *mut b::ib_mr, addr: u64) -> c_int {
    // SAFETY: `ib` is the fast MR being mapped.
    let (mr, page_size) = unsafe { (&*to_mr(ib), u64::from((*ib).page_size)) };
    let Kind::Fast(m) = &mr.kind else {
        return EINVAL.to_errno();
    };
    let mut guard = m.lock();
    let m = &mut *guard;
    if m.staged_calls >= m.max_pages {
        return ENOMEM.to_errno();
    }
    // SAFETY: only computes the frame of a linear-map address.
    let pfn = unsafe { b::oxe_virt_to_pfn(addr) };
    if pfn < 0 {
        return EINVAL.to_errno();
    }
    // The linear map is physically contiguous: one run per page_size block.
    let run = Run {
        first: m.staged_pages,
        pfn: pfn as u64,
        count: page_size >> PAGE_SHIFT,
    };
    match m.staged.last_mut() {
        Some(last) if last.pfn + last.count == run.pfn && last.first + last.count == run.first => {
            last.count += run.count;
        }
        _ => {
            if m.staged.push_within_capacity(run).is_err() {
                return ENOMEM.to_errno();
            }
        }
    }
    m.staged_pages += run.count;
    m.staged_calls += 1;
    0
}

/// # Safety
///
/// Called by the RDMA core for an MR returned by one of our constructors.
pub(crate) unsafe extern "C" fn dereg_mr(ib: *mut b::ib_mr, _udata: *mut b::ib_udata) -> c_int {
    let mr = to_mr(ib);
    // SAFETY: `ib` is one of ours, live until now.
    unsafe {
        let dev = OxeDevice::from_ib((*ib).device);
        let key = (*mr).key.load(ordering::Relaxed);
        if let Some(state) = dev.state() {
            state.keys.remove(key);
        }
        // Drop the table's reference, then wait out data-path users.
        drop(MrRef { mr, key });
        (*mr).released.wait_for_completion();
        // Unpin and unaccount now: the process sees its pins gone when
        // dereg returns.
        if let Kind::User { pinned, .. } = &mut (*mr).kind {
            drop(pinned.take());
        }
        b::call_rcu((*mr).rcu.get(), Some(free_rcu));
    }
    0
}

/// # Safety
///
/// Called by RCU, once, for the `rcu` field of an MR passed to call_rcu.
unsafe extern "C" fn free_rcu(head: *mut b::callback_head) {
    // SAFETY: `head` is the `rcu` field of an OxeMr leaked by `reg_user`.
    unsafe {
        let off = core::mem::offset_of!(OxeMr, rcu);
        let mr = head.cast::<u8>().sub(off).cast::<OxeMr>();
        drop(KBox::from_raw(mr));
    }
}

/// `rdma res show mr`: oxe's view of the registration.
///
/// # Safety
///
/// Called by the RDMA core with a netlink message and a live MR.
pub(crate) unsafe extern "C" fn fill_res_mr_entry(
    msg: *mut b::sk_buff,
    ib: *mut b::ib_mr,
) -> c_int {
    // SAFETY: `ib` is one of ours and live.
    let mr = unsafe { &*to_mr(ib) };
    let (pages, entries, bytes) = match &mr.kind {
        Kind::User { pinned, .. } => pinned.as_ref().map_or((0, 0, 0), |p| {
            (
                p.runs.iter().map(|r| r.count).sum::<u64>(),
                p.runs.len() as u64,
                p.table_bytes(),
            )
        }),
        Kind::Dma { .. } => (0, 0, 0),
        Kind::Fast(m) => {
            let m = m.lock();
            let bytes = (m.runs.capacity() + m.staged.capacity()) * size_of::<Run>();
            (0, m.runs.len() as u64, bytes as u64)
        }
    };
    // SAFETY: `msg` is the message being built.
    let nest = unsafe { b::oxe_nl_driver_nest_start(msg) };
    if nest.is_null() {
        return EMSGSIZE.to_errno();
    }
    for (name, v) in [
        (c"pages_pinned", pages),
        (c"mtt_entries", entries),
        (c"mtt_bytes", bytes),
        (c"page_size", PAGE_SIZE),
    ] {
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
