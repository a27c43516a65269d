// SPDX-License-Identifier: GPL-2.0

//! MR entry points, and the MR's life as the core and the key table see it:
//! published under a fresh key, handed to the core as its `ib_mr`, retired
//! by `dereg_mr` and freed an RCU grace period later.

use core::ptr::{self, NonNull};

use kernel::ffi::{c_int, c_uint};
use kernel::prelude::*;

use super::pd;
use super::{err_ptr, from_ib, ib_ptr, to_c, to_c_ptr};
use crate::bindings as b;
use crate::device::OxeDevice;
use crate::ib::{self, Udata};
use crate::keys::Keyed;
use crate::mr::{Kind, OxeMr};

// `try_ref` fails once the count hit zero, `dereg_mr` waits for it to hit
// zero before the pages go, and the memory is freed through call_rcu only
// after the key was removed.
// SAFETY: as the trait requires.
unsafe impl Keyed for OxeMr {
    fn key(&self) -> u32 {
        OxeMr::key(self)
    }

    fn try_get(&self) -> bool {
        self.try_ref()
    }

    fn put(&self) {
        self.unref()
    }
}

/// Allocates an MR of `kind` and publishes it under a fresh key of `pd`'s
/// device; returns the core-visible part.
///
/// # Safety
///
/// `pd` is a live PD of an oxe device.
unsafe fn publish(pd: *mut b::ib_pd, kind: Kind, iova: u64, length: u64) -> Result<*mut b::ib_mr> {
    // SAFETY: the PD belongs to a live oxe device.
    let dev = unsafe { OxeDevice::from_ib((*pd).device) };
    let state = dev.state().ok_or(ENODEV)?;
    let mr = KBox::pin_init(OxeMr::new(kind), GFP_KERNEL)?;
    // From here on the MR is only used through this pointer, and never moves
    // out of its allocation; `free_rcu` frees it.
    // SAFETY: the MR stays where it is until `free_rcu`.
    let mr = NonNull::from(KBox::leak(unsafe { Pin::into_inner_unchecked(mr) }));
    // SAFETY: the allocation is live until `free_rcu`.
    let m = unsafe { mr.as_ref() };
    let published = state.keys.insert(|key| {
        m.assign_key(key);
        // The data path never touches `ib`.
        // SAFETY: neither the core nor the data path has the MR yet.
        unsafe {
            let ib = &mut *ib_ptr(m);
            ib.lkey = key;
            ib.rkey = key;
            ib.iova = iova;
            ib.length = length;
            ib.page_size = crate::mr::PAGE_SIZE as u32;
        }
        mr
    });
    if let Err(e) = published {
        // SAFETY: never published; we own the only pointer.
        drop(unsafe { KBox::from_raw(mr.as_ptr()) });
        return Err(e);
    }
    let (kind, access, pinned) = m.describe();
    ib::trace::mr_reg(m.key(), m.key(), iova, length, access, pinned, kind);
    Ok(ib_ptr(m))
}

/// A user registration: pinned, or on demand (`IB_ACCESS_ON_DEMAND`).
///
/// # Safety
///
/// `pd` is a live PD of an oxe device; called by the process that registers.
unsafe fn user_kind(
    pd: *mut b::ib_pd,
    pd_id: crate::access::PdId,
    start: u64,
    length: u64,
    iova: u64,
    access: u32,
    udata: Option<&Udata<'_>>,
) -> Result<Kind> {
    if access & crate::access::ON_DEMAND == 0 {
        return Kind::user(pd_id, start, length, iova, access, udata);
    }
    // The chunks' root, for an explicit MR and an implicit one alike.
    let root = || {
        // SAFETY: the PD's device is live and registered; this is the registering process (the function's contract).
        unsafe { crate::mr::Implicit::new((*pd).device, access) }
    };
    if start == 0 && length == u64::MAX {
        return Kind::implicit(pd_id, iova, access, udata, root);
    }
    Kind::odp(pd_id, start, length, iova, access, udata, root)
}

/// # Safety
///
/// Called by the RDMA core for REG_MR with a live PD of an oxe device and
/// the command's udata.
pub(super) unsafe extern "C" fn reg_user_mr(
    pd: *mut b::ib_pd,
    start: u64,
    length: u64,
    iova: u64,
    access: c_int,
    _dmah: *mut b::ib_dmah,
    udata: *mut b::ib_udata,
) -> *mut b::ib_mr {
    // SAFETY: a live PD of an oxe device and the command's udata.
    let (pd_id, udata) = unsafe { (pd::id(pd), Udata::from_raw(udata)) };
    // SAFETY: a live PD of an oxe device, in the registering process.
    let kind = unsafe {
        user_kind(
            pd,
            pd_id,
            start,
            length,
            iova,
            access as u32,
            udata.as_ref(),
        )
    };
    // SAFETY: a live PD of an oxe device.
    to_c_ptr(kind.and_then(|k| unsafe { publish(pd, k, iova, length) }))
}

/// Re-registration. A new PD and new rights are changed in place (keys and
/// translation stay); a new translation is a new MR, pinned and keyed
/// afresh, and the core then destroys the old one, whose keys die with it.
///
/// # Safety
///
/// Called by the RDMA core for REREG_MR with a live user MR, the command's
/// udata and a live PD of this device (the new one with `IB_MR_REREG_PD`,
/// and whenever `IB_MR_REREG_TRANS` is set).
pub(super) unsafe extern "C" fn rereg_user_mr(
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
    // SAFETY: a live MR of ours and the command's udata.
    let (mr, udata) = unsafe { (from_ib::<OxeMr>(ib), Udata::from_raw(udata)) };
    if flags & b::ib_mr_rereg_flags_IB_MR_REREG_TRANS != 0 {
        // The core destroys this MR next, which must not fail: no window
        // may be bound, and none binds from here on (unless this fails).
        if let Err(e) = mr.freeze_windows() {
            return err_ptr(e);
        }
        let kind = mr
            .rereg_trans_access(flags, access as u32)
            .and_then(|access| {
                // SAFETY: the live PD of this device (the function's contract).
                let pd_id = unsafe { pd::id(pd) };
                // SAFETY: as above, in the registering process.
                unsafe { user_kind(pd, pd_id, start, length, iova, access, udata.as_ref()) }
            });
        // SAFETY: as above.
        let new = kind.and_then(|k| unsafe { publish(pd, k, iova, length) });
        if new.is_err() {
            // The old MR stays; windows may bind to it again.
            mr.thaw_windows();
        }
        return to_c_ptr(new);
    }
    let set_pd = flags & b::ib_mr_rereg_flags_IB_MR_REREG_PD != 0;
    // SAFETY: the new PD, live, of this device (the function's contract).
    let new_pd = set_pd.then(|| unsafe { pd::id(pd) });
    match mr.rereg(flags, access as u32, new_pd, udata.as_ref()) {
        // The same MR, changed: the core keeps it.
        Ok(()) => ptr::null_mut(),
        Err(e) => err_ptr(e),
    }
}

/// REG_DMABUF_MR: a dma-buf of another driver as an MR.
///
/// # Safety
///
/// Called by the RDMA core with a live PD of an oxe device, in the process
/// that registers (`fd` is one of its).
pub(super) unsafe extern "C" fn reg_user_mr_dmabuf(
    pd: *mut b::ib_pd,
    offset: u64,
    length: u64,
    iova: u64,
    fd: c_int,
    access: c_int,
    _dmah: *mut b::ib_dmah,
    _attrs: *mut b::uverbs_attr_bundle,
) -> *mut b::ib_mr {
    // SAFETY: a live PD of an oxe device (the function's contract).
    let pd_id = unsafe { pd::id(pd) };
    let kind = Kind::dmabuf(pd_id, offset, length, iova, fd, access as u32);
    // SAFETY: as above.
    to_c_ptr(kind.and_then(|k| unsafe { publish(pd, k, iova, length) }))
}

/// `ibv_advise_mr`: PREFETCH, PREFETCH_WRITE and PREFETCH_NO_FAULT of ODP
/// MRs of `pd`.
///
/// # Safety
///
/// Called by the RDMA core (the ADVISE_MR method) with a live PD of an oxe
/// device and `num_sge` SGEs at `sg_list`.
pub(super) unsafe extern "C" fn advise_mr(
    pd: *mut b::ib_pd,
    advice: b::ib_uverbs_advise_mr_advice,
    flags: u32,
    sg_list: *mut b::ib_sge,
    num_sge: u32,
    _attrs: *mut b::uverbs_attr_bundle,
) -> c_int {
    // SAFETY: a live PD of an oxe device (the function's contract).
    let (dev, pd_id) = unsafe { (OxeDevice::from_ib((*pd).device), pd::id(pd)) };
    let Some(state) = dev.state() else {
        return to_c(Err(ENODEV));
    };
    let sges = if num_sge == 0 || sg_list.is_null() {
        &[][..]
    } else {
        // SAFETY: `num_sge` SGEs, the core's copy of the user's (the function's contract).
        unsafe { core::slice::from_raw_parts(sg_list, num_sge as usize) }
    };
    let sync = flags & b::ib_uverbs_advise_mr_flag_IB_UVERBS_ADVISE_MR_FLAG_FLUSH != 0;
    let r = crate::mr::advise(
        &state.keys,
        pd_id,
        advice,
        sync,
        sges.iter().map(|s| (s.lkey, s.addr, u64::from(s.length))),
    );
    to_c(r)
}

/// The DMA MR of kernel PDs: the core asks for one in `ib_alloc_pd`, for
/// the PD's `local_dma_lkey`.
///
/// # Safety
///
/// Called by the RDMA core with a live PD of an oxe device.
pub(super) unsafe extern "C" fn get_dma_mr(pd: *mut b::ib_pd, access: c_int) -> *mut b::ib_mr {
    // SAFETY: a live PD of an oxe device (the function's contract).
    let kind = Kind::dma(unsafe { pd::id(pd) }, access as u32);
    // SAFETY: as above.
    to_c_ptr(kind.and_then(|k| unsafe { publish(pd, k, 0, u64::MAX) }))
}

/// # Safety
///
/// Called by the RDMA core with a live PD of an oxe device.
pub(super) unsafe extern "C" fn alloc_mr(
    pd: *mut b::ib_pd,
    mr_type: b::ib_mr_type,
    max_num_sg: u32,
) -> *mut b::ib_mr {
    // SAFETY: a live PD of an oxe device (the function's contract).
    let kind = Kind::fast(unsafe { pd::id(pd) }, mr_type, max_num_sg);
    // SAFETY: as above.
    to_c_ptr(kind.and_then(|k| unsafe { publish(pd, k, 0, 0) }))
}

/// Records the pages behind a scatterlist (kernel virtual addresses, since
/// oxe uses virtual DMA) as the MR's staged mapping.
///
/// # Safety
///
/// Called by the RDMA core (`ib_map_mr_sg`) for an MR of ours.
pub(super) unsafe extern "C" fn map_mr_sg(
    ib: *mut b::ib_mr,
    sg: *mut b::scatterlist,
    sg_nents: c_int,
    sg_offset: *mut c_uint,
) -> c_int {
    // SAFETY: a live MR of ours, whose `page_size` ib_map_mr_sg set.
    let (mr, page_size) = unsafe { (from_ib::<OxeMr>(ib), u64::from((*ib).page_size)) };
    if let Err(e) = mr.stage_begin(page_size) {
        return e.to_errno();
    }
    // SAFETY: the caller's scatterlist; `set_page` gets this MR back.
    let n = unsafe { b::ib_sg_to_pages(ib, sg, sg_nents, sg_offset, Some(set_page)) };
    // SAFETY: ib_sg_to_pages set iova and length.
    let (iova, length) = unsafe { ((*ib).iova, (*ib).length) };
    mr.stage_end(iova, length, page_size);
    n
}

/// # Safety
///
/// Called by `ib_sg_to_pages` from [`map_mr_sg`].
unsafe extern "C" fn set_page(ib: *mut b::ib_mr, addr: u64) -> c_int {
    // SAFETY: `ib` is the fast MR being mapped.
    let (mr, page_size) = unsafe { (from_ib::<OxeMr>(ib), u64::from((*ib).page_size)) };
    to_c(mr.stage_page(page_size, addr))
}

/// # Safety
///
/// Called by the RDMA core, once, for an MR returned by one of our
/// constructors.
pub(super) unsafe extern "C" fn dereg_mr(ib: *mut b::ib_mr, _udata: *mut b::ib_udata) -> c_int {
    // SAFETY: a live MR of ours, on a live oxe device.
    let (mr, dev) = unsafe { (from_ib::<OxeMr>(ib), OxeDevice::from_ib((*ib).device)) };
    // Windows hold the MR: it goes after them (the core retries a process's
    // MRs after its windows when it cleans up).
    if let Err(e) = mr.retire_windows() {
        return e.to_errno();
    }
    if let Some(state) = dev.state() {
        state.keys.remove(mr.key());
    }
    // Lookups can no longer find the MR, so the table's reference is ours:
    // drop it, then wait out data-path users.
    mr.release();
    ib::trace::mr_dereg(mr.key(), mr.res_stats().0);
    // The core runs no other verb on the MR from here on (`rdma res`
    // readers were waited out by `rdma_restrack_del` before this call).
    // SAFETY: no reference is left, and lookups take none any more.
    unsafe { mr.release_pages() };
    // Nothing here uses the MR afterwards.
    // SAFETY: unreachable but for RCU readers of the key table, which `free_rcu` waits out.
    unsafe { b::call_rcu(mr.rcu_head(), Some(free_rcu)) };
    0
}

/// # Safety
///
/// Called by RCU, once, for the `rcu` field of an MR passed to call_rcu.
unsafe extern "C" fn free_rcu(head: *mut b::callback_head) {
    // SAFETY: `head` is the `rcu` field of an OxeMr leaked by `publish`.
    unsafe {
        let mr = head.cast::<u8>().sub(OxeMr::RCU_OFFSET).cast::<OxeMr>();
        drop(KBox::from_raw(mr));
    }
}

/// `rdma res show mr`: oxe's view of the registration.
///
/// # Safety
///
/// Called by the RDMA core with a netlink message and a live MR.
pub(super) unsafe extern "C" fn fill_res_mr_entry(
    msg: *mut b::sk_buff,
    ib: *mut b::ib_mr,
) -> c_int {
    // SAFETY: a live MR of ours.
    let mr = unsafe { from_ib::<OxeMr>(ib) };
    let (pages, entries, bytes) = mr.res_stats();
    let attrs = [
        (c"pages_pinned", pages),
        (c"mtt_entries", entries),
        (c"mtt_bytes", bytes),
        (c"page_size", crate::mr::PAGE_SIZE),
    ];
    // SAFETY: `msg` is the message the core builds for this MR.
    unsafe { super::put_driver_u64s(msg, attrs) }
}

// An MR is found by key from any thread (the transport's tasks, any QP's
// verbs). The core's `ib_mr` inside is written by the core and by this
// layer's verbs only, which the core serialises with dereg; oxe's own state
// is atomics, the RCU-freed pin set and immutable fields.
// SAFETY: as above.
unsafe impl Send for crate::mr::OxeMr {}
// SAFETY: as above.
unsafe impl Sync for crate::mr::OxeMr {}
