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

use crate::access;
use crate::bindings as b;
use crate::device::OxeDevice;
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

/// One memory region. The RDMA core sees `ib`; the key table and the data
/// path see the rest. Freed an RCU grace period after deregistration, since
/// lock-free key lookups may still be reading it.
#[pin_data]
#[repr(C)]
pub(crate) struct OxeMr {
    ib: b::ib_mr,
    grant: Grant,
    region: Region,
    pinned: Option<Pinned>,
    /// The key table's reference plus one per data-path user.
    refs: Atomic<i32>,
    #[pin]
    released: Completion,
    rcu: Opaque<b::callback_head>,
}

// SAFETY: shared fields are immutable after publication or atomic.
unsafe impl Send for OxeMr {}
// SAFETY: as above.
unsafe impl Sync for OxeMr {}

// The memory is freed through call_rcu only after the key was removed.
// SAFETY: `try_get` fails once the count hit zero.
unsafe impl Keyed for OxeMr {
    fn key(&self) -> u32 {
        self.grant.key
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

/// A reference on a live MR, from a key lookup.
pub(crate) struct MrRef(*mut OxeMr);

impl MrRef {
    fn mr(&self) -> &OxeMr {
        // SAFETY: the reference keeps the MR from being released.
        unsafe { &*self.0 }
    }

    /// The access check of the data path: the fragments behind
    /// `[iova, iova + len)`, or why the access is refused.
    pub(crate) fn check(&self, req: &mtt::Request) -> Result<mtt::Cursor<'_>, mtt::AccessError> {
        let mr = self.mr();
        let runs = mr.pinned.as_ref().map_or(&[][..], |p| &p.runs[..]);
        mtt::check(&mr.grant, &mr.region, runs, req)
    }
}

/// Runs `f` on the kernel mapping of frame `pfn`.
fn with_page<R>(pfn: u64, f: impl FnOnce(*mut u8) -> R) -> R {
    // kmap_local_page maps the page until the matching kunmap_local.
    // SAFETY: `pfn` is a page pinned by a live MR (the caller holds an MrRef).
    unsafe {
        let va = b::kmap_local_page(b::oxe_pfn_to_page(pfn as c_ulong));
        let r = f(va.cast());
        b::kunmap_local(va);
        r
    }
}

impl MrRef {
    fn runs(&self) -> &[Run] {
        self.mr().pinned.as_ref().map_or(&[][..], |p| &p.runs[..])
    }

    /// Copies `data` into the MR at `iova`. The caller checked the access.
    pub(crate) fn write(&self, iova: u64, data: &[u8]) -> bool {
        let Some(cur) = self
            .mr()
            .region
            .cursor(self.runs(), iova, data.len() as u64)
        else {
            return false;
        };
        let mut off = 0usize;
        for f in cur {
            let len = f.len as usize;
            let Some(src) = data.get(off..off + len) else {
                return false;
            };
            // SAFETY: the fragment lies inside the mapped page.
            with_page(f.pfn, |p| unsafe {
                ptr::copy_nonoverlapping(src.as_ptr(), p.add(f.offset as usize), len)
            });
            off += len;
        }
        off == data.len()
    }

    /// Copies from the MR at `iova` into `out`. The caller checked the access.
    pub(crate) fn read(&self, iova: u64, out: &mut [u8]) -> bool {
        let Some(cur) = self.mr().region.cursor(self.runs(), iova, out.len() as u64) else {
            return false;
        };
        let mut off = 0usize;
        for f in cur {
            let len = f.len as usize;
            let Some(dst) = out.get_mut(off..off + len) else {
                return false;
            };
            // SAFETY: the fragment lies inside the mapped page.
            with_page(f.pfn, |p| unsafe {
                ptr::copy_nonoverlapping(p.add(f.offset as usize), dst.as_mut_ptr(), len)
            });
            off += len;
        }
        off == out.len()
    }

    /// Applies `op` to the aligned u64 at `iova` atomically and returns the
    /// value it had. The caller checked the access and the alignment.
    pub(crate) fn atomic(&self, iova: u64, op: impl FnOnce(&Atomic<u64>) -> u64) -> Option<u64> {
        let mut cur = self.mr().region.cursor(self.runs(), iova, 8)?;
        let f = cur.next()?;
        if f.len != 8 || f.offset % 8 != 0 {
            return None;
        }
        Some(with_page(f.pfn, |p| {
            // Other CPUs and the user may access it concurrently: atomics.
            // SAFETY: an aligned u64 inside the mapped page.
            let x = unsafe { Atomic::from_ptr(p.add(f.offset as usize).cast()) };
            op(x)
        }))
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
    dev.state()?.keys.get(key).map(MrRef)
}

fn to_mr(ib: *mut b::ib_mr) -> *mut OxeMr {
    // `ib` is the first field of the `repr(C)` OxeMr.
    ib.cast()
}

fn err_ptr<T>(e: Error) -> *mut T {
    // SAFETY: ERR_PTR encoding of a negative errno.
    unsafe { b::ERR_PTR(e.to_errno() as isize).cast() }
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
    match unsafe { reg_user(pd, start, length, iova, access as u32, udata) } {
        Ok(mr) => mr,
        Err(e) => err_ptr(e),
    }
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
        access::check_user_reg(start, length, iova, access, PAGE_SHIFT).map_err(|e| match e {
            access::RegError::Invalid => EINVAL,
            access::RegError::NotSupported => Error::from_errno(-(b::EOPNOTSUPP as c_int)),
        })?;
    // SAFETY: the PD belongs to an oxe device.
    let dev = unsafe { OxeDevice::from_ib((*pd).device) };
    let state = dev.state().ok_or(ENODEV)?;

    let pinned = Pinned::pin(
        range.first_page_va,
        range.npages,
        access & access::ANY_WRITE != 0,
    )?;
    let region = Region {
        iova,
        length,
        offset: range.offset,
        page_shift: PAGE_SHIFT,
    };
    let mr = KBox::pin_init(
        try_pin_init!(OxeMr {
            ib: pin_init::zeroed(),
            grant: Grant { key: 0, pd: pd::id(pd), access },
            region,
            pinned: Some(pinned),
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
            (*mr).grant.key = key;
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
/// Called by the RDMA core for an MR returned by one of our constructors.
pub(crate) unsafe extern "C" fn dereg_mr(ib: *mut b::ib_mr, _udata: *mut b::ib_udata) -> c_int {
    let mr = to_mr(ib);
    // SAFETY: `ib` is one of ours, live until now.
    unsafe {
        let dev = OxeDevice::from_ib((*ib).device);
        if let Some(state) = dev.state() {
            state.keys.remove((*mr).grant.key);
        }
        // Drop the table's reference, then wait out data-path users.
        drop(MrRef(mr));
        (*mr).released.wait_for_completion();
        // Unpin and unaccount now: the process sees its pins gone when
        // dereg returns.
        drop((*mr).pinned.take());
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
    let (pages, entries, bytes) = mr.pinned.as_ref().map_or((0, 0, 0), |p| {
        (
            p.runs.iter().map(|r| r.count).sum::<u64>(),
            p.runs.len() as u64,
            p.table_bytes(),
        )
    });
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
