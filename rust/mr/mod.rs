// SPDX-License-Identifier: GPL-2.0

//! Memory registration: user MRs pinned by oxe itself (`pages`), translated
//! by oxe's MTT (`common/mtt.rs`) and named by a key from the device's key
//! table; the DMA MR of kernel PDs; fast registration (`fast`). The entry
//! points, and the MR's handover to and from the core, are in `ffi/mr.rs`.

use kernel::alloc::KVVec;
use kernel::prelude::*;
use kernel::sync::atomic::{ordering, Atomic};
use kernel::types::Opaque;

use crate::access::{self, PdId, PdRights};
use crate::bindings as b;
use crate::eopnotsupp;
use crate::ib::{self, udata, Udata};
use crate::irqlock::IrqSpinLock;
use crate::keys::{KeyRef, Refs};
use crate::mtt::{self, Grant, Region, Run};

mod dmabuf;
mod fast;
mod odp;
mod pages;

use dmabuf::DmaBuf;
use fast::Fast;
pub(crate) use odp::{enabled as odp_enabled, Implicit};
pub(crate) use pages::{PageRef, Src, PAGE_SIZE};
use pages::{Pinned, PinnedCell, PAGE_SHIFT};

/// What an MR maps.
pub(crate) enum Kind {
    /// User memory pinned by `reg_user_mr`. The translation is fixed for the
    /// MR's life; `rereg_user_mr` may change the PD and the rights.
    User {
        /// An [`access::PdRights`], packed: one load gives a check the PD
        /// and the rights of one and the same registration.
        rights: Atomic<u64>,
        region: Region,
        pinned: PinnedCell,
    },
    /// User memory registered with `IB_ACCESS_ON_DEMAND`: nothing pinned;
    /// the data path finds the pages when it touches them (`odp`).
    Odp {
        /// As `User`'s.
        rights: Atomic<u64>,
        region: Region,
        /// The address of the region's page 0 in the process.
        va0: u64,
        /// Registered with a right to write: pages may be faulted in for
        /// writing.
        writable: bool,
        /// Its translation, in chunks made on first touch as implicit ODP
        /// makes them: registering costs the same whatever the size.
        odp: Pin<KBox<Implicit>>,
    },
    /// Implicit ODP (`ibv_reg_mr(pd, NULL, SIZE_MAX, ON_DEMAND ...)`): the
    /// whole address space of the process, iova = address, its
    /// translation made in chunks as the data path touches them.
    Implicit {
        /// As `User`'s.
        rights: Atomic<u64>,
        /// As `Odp`'s.
        writable: bool,
        imp: Pin<KBox<Implicit>>,
    },
    /// `reg_user_mr_dmabuf`: memory another driver exports, mapped by its
    /// exporter for oxe's CPU (`dmabuf`).
    DmaBuf {
        /// As `User`'s.
        rights: Atomic<u64>,
        region: Region,
        /// The kernel address of the region's page 0.
        base: u64,
        buf: pages::TakeCell<DmaBuf>,
    },
    /// `get_dma_mr`: all of the kernel's linear map; an iova is a kernel
    /// virtual address (oxe uses virtual DMA, as rdma_rxe does). Its key is
    /// the MR's.
    Dma { pd: PdId, access: u32 },
    /// `alloc_mr`: mapped by `map_mr_sg`, made valid by a REG_MR work request
    /// and invalidated by LOCAL_INV or SEND_WITH_INV. Its state changes under
    /// the data path's feet, hence the lock.
    Fast(Pin<KBox<IrqSpinLock<Fast>>>),
}

/// One memory region. The RDMA core sees `ib`; the key table and the data
/// path see the rest. Allocated by oxe, freed an RCU grace period after
/// deregistration, since lock-free key lookups may still be reading it.
#[pin_data]
#[repr(C)]
pub(crate) struct OxeMr {
    ib: Opaque<b::ib_mr>,
    kind: Kind,
    /// The key it answers to: fixed, except for fast registration.
    key: Atomic<u32>,
    #[pin]
    refs: Refs,
    /// Memory windows bound to it; `FROZEN` while a re-registration or the
    /// deregistration runs, which refuse to start while any is bound.
    windows: Atomic<i32>,
    rcu: Opaque<b::callback_head>,
}
ib::core_object!(OxeMr, ib: b::ib_mr);

impl OxeMr {
    /// A new MR of `kind`, with the key table's reference and no key yet.
    pub(crate) fn new(kind: Kind) -> impl PinInit<Self, Error> {
        try_pin_init!(OxeMr {
            ib: Opaque::zeroed(),
            kind,
            key: Atomic::new(0),
            refs <- Refs::new(),
            windows: Atomic::new(0),
            rcu: Opaque::uninit(),
        }? Error)
    }

    /// The key it answers to now.
    pub(crate) fn key(&self) -> u32 {
        self.key.load(ordering::Relaxed)
    }

    /// Gives a new MR its key, before it is published under it.
    pub(crate) fn assign_key(&self, key: u32) {
        self.key.store(key, ordering::Relaxed);
        if let Kind::Fast(f) = &self.kind {
            f.lock().grant.key = key;
        }
    }

    /// Takes a data-path reference unless the MR is being released.
    pub(crate) fn try_ref(&self) -> bool {
        self.refs.try_get()
    }

    /// Drops a reference; the last one lets deregistration go on.
    pub(crate) fn unref(&self) {
        self.refs.put()
    }

    /// Stops windows from binding, unless one is bound (EBUSY): before
    /// deregistration (for good) and re-registration (then `thaw_windows`).
    pub(crate) fn freeze_windows(&self) -> Result {
        self.windows
            .cmpxchg(0, FROZEN, ordering::Acquire)
            .map(|_| ())
            .map_err(|_| EBUSY)
    }

    pub(crate) fn thaw_windows(&self) {
        self.windows.store(0, ordering::Release);
    }

    /// Deregistration's check: no window bound, and none ever again (a
    /// re-registration that replaced the MR froze it already).
    pub(crate) fn retire_windows(&self) -> Result {
        match self.windows.cmpxchg(0, FROZEN, ordering::Acquire) {
            Ok(_) | Err(FROZEN) => Ok(()),
            Err(_) => Err(EBUSY),
        }
    }

    /// Deregistration, once the key is gone: drops the table's reference
    /// (the caller's, as `unref` drops a data-path one) and waits until the
    /// last reference is gone.
    pub(crate) fn release(&self) {
        self.refs.put_and_wait();
    }

    /// The RCU head the MR is freed through.
    pub(crate) fn rcu_head(&self) -> *mut b::callback_head {
        self.rcu.get()
    }

    /// Where the RCU head is in the MR.
    pub(crate) const RCU_OFFSET: usize = core::mem::offset_of!(OxeMr, rcu);

    /// For the registration tracepoint: what backs the MR, its access
    /// rights (`IB_ACCESS_*`) and the pages it pins.
    pub(crate) fn describe(&self) -> (&'static CStr, u32, u64) {
        let access = |r: &Atomic<u64>| PdRights::unpack(r.load(ordering::Relaxed)).access;
        let pinned = self.res_stats().0;
        match &self.kind {
            Kind::User { rights, .. } => (c"pinned", access(rights), pinned),
            Kind::Odp { rights, .. } => (c"on-demand", access(rights), 0),
            Kind::Implicit { rights, .. } => (c"implicit on-demand", access(rights), 0),
            Kind::DmaBuf { rights, .. } => (c"dma-buf", access(rights), 0),
            Kind::Dma { access, .. } => (c"dma", *access, 0),
            Kind::Fast(_) => (c"fast", 0, 0),
        }
    }

    /// `rdma res show mr`: pages pinned, MTT entries and MTT bytes.
    pub(crate) fn res_stats(&self) -> (u64, u64, u64) {
        match &self.kind {
            Kind::User { pinned, .. } => pinned.get().map_or((0, 0, 0), |p| {
                (
                    p.runs.iter().map(|r| r.count).sum::<u64>(),
                    p.runs.len() as u64,
                    p.table_bytes(),
                )
            }),
            Kind::Dma { .. } | Kind::Odp { .. } | Kind::Implicit { .. } | Kind::DmaBuf { .. } => {
                (0, 0, 0)
            }
            Kind::Fast(m) => {
                let m = m.lock();
                let bytes = (m.runs.capacity() + m.staged.capacity()) * size_of::<Run>();
                (0, m.runs.len() as u64, bytes as u64)
            }
        }
    }
}

const FROZEN: i32 = i32::MIN;

/// Why a local operation on an MR (REG_MR, LOCAL_INV, SEND_WITH_INV) fails.
#[derive(Debug)]
pub(crate) struct LocalOpError;

/// A reference on a live MR, from a lookup of `key`.
pub(crate) struct MrRef {
    mr: KeyRef<OxeMr>,
    key: u32,
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
        &self.mr
    }

    /// Another reference on the same MR, under the same key.
    pub(crate) fn try_clone(&self) -> Option<MrRef> {
        Some(MrRef {
            mr: self.mr.try_clone()?,
            key: self.key,
        })
    }

    /// What a window bind checks of the MR: user MRs only (kernel clients
    /// have no windows).
    pub(crate) fn window_view(&self) -> Option<crate::mw_rules::MrView> {
        let (Kind::User { rights, region, .. }
        | Kind::Odp { rights, region, .. }
        | Kind::DmaBuf { rights, region, .. }) = &self.mr().kind
        else {
            return None;
        };
        let r = PdRights::unpack(rights.load(ordering::Relaxed));
        Some(crate::mw_rules::MrView {
            pd: r.pd,
            access: r.access,
            iova: region.iova,
            length: region.length,
        })
    }

    /// The process address of `[iova, iova + len)` of an ODP MR of `pd`.
    fn odp_range(&self, pd: PdId, iova: u64, len: u64) -> Option<(&Implicit, u64)> {
        let Kind::Odp {
            rights,
            region,
            va0,
            odp,
            ..
        } = &self.mr().kind
        else {
            return None;
        };
        if PdRights::unpack(rights.load(ordering::Relaxed)).pd != pd {
            return None;
        }
        let va = va0.checked_add(region.locate(iova, len)?)?;
        Some((odp, va))
    }

    /// Whether advise_mr may work on `[iova, iova + len)` of this MR for
    /// `pd`: an ODP MR, explicit or implicit, covering the range.
    fn advisable(&self, pd: PdId, iova: u64, len: u64) -> bool {
        match &self.mr().kind {
            Kind::Implicit { rights, .. } => {
                PdRights::unpack(rights.load(ordering::Relaxed)).pd == pd
                    && iova
                        .checked_add(len)
                        .is_some_and(|end| end <= odp::user_top())
            }
            _ => self.odp_range(pd, iova, len).is_some(),
        }
    }

    /// advise_mr's work on one SGE.
    fn prefetch(&self, pd: PdId, iova: u64, len: u64, write: bool, fault: bool) -> Result {
        if !self.advisable(pd, iova, len) {
            return Err(EINVAL);
        }
        if len == 0 {
            return Ok(());
        }
        let r = match (&self.mr().kind, self.odp_range(pd, iova, len)) {
            (Kind::Implicit { imp, .. }, _) => imp
                .walk(iova, len, write, fault, |_, _, _| true)
                .map(|_| ()),
            (_, Some((odp, va))) => odp.walk(va, len, write, fault, |_, _, _| true).map(|_| ()),
            _ => return Err(EINVAL),
        };
        match r {
            Ok(()) | Err(odp::Fault::Missing) => Ok(()),
            Err(odp::Fault::Error(e)) => Err(e),
        }
    }

    /// Counts a window bound to the MR; false once its deregistration or a
    /// re-registration began.
    pub(crate) fn bind_window(&self) -> bool {
        let w = &self.mr().windows;
        let mut cur = w.load(ordering::Relaxed);
        while cur >= 0 {
            // Acquire: pairs with `thaw_windows`' release, so that the PD
            // and rights read next are those of the re-registration that
            // let the count go.
            match w.cmpxchg(cur, cur + 1, ordering::Acquire) {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
        false
    }

    /// A window let go of the MR (unbound, invalidated, freed).
    pub(crate) fn unbind_window(self) {
        self.mr().windows.fetch_sub(1, ordering::Relaxed);
    }

    /// The range check of an access through a window, which gave the
    /// rights: the MR must still map `[iova, iova + len)`.
    pub(crate) fn check_range(&self, iova: u64, len: u64) -> bool {
        let Some(v) = self.window_view() else {
            return false;
        };
        let req = mtt::Request {
            key: self.mr().key(),
            pd: v.pd,
            iova,
            len,
            rights: 0,
        };
        self.check(&req).is_ok()
    }

    /// What a user MR grants now: its key, and the PD and rights of one and
    /// the same registration (one load of `rights`).
    fn grant(&self, rights: &Atomic<u64>) -> Grant {
        let r = PdRights::unpack(rights.load(ordering::Relaxed));
        Grant {
            key: self.mr().key(),
            pd: r.pd,
            access: r.access,
        }
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
                let runs = pinned.get().map_or(&[][..], |p| &p.runs[..]);
                mtt::check(&self.grant(rights), region, runs, req).map(|_| ())
            }
            Kind::Odp { rights, region, .. } | Kind::DmaBuf { rights, region, .. } => {
                mtt::check_grant(&self.grant(rights), req)?;
                // Whether the pages are there is the copy's business.
                match region.locate(req.iova, req.len) {
                    Some(_) => Ok(()),
                    None => Err(mtt::AccessError::OutOfRange),
                }
            }
            Kind::Implicit { rights, .. } => {
                mtt::check_grant(&self.grant(rights), req)?;
                match req.iova.checked_add(req.len) {
                    Some(end) if end <= odp::user_top() => Ok(()),
                    _ => Err(mtt::AccessError::OutOfRange),
                }
            }
            // No table: its range is any that does not wrap.
            Kind::Dma { .. } => self.check_grant(req),
            Kind::Fast(f) => {
                let f = f.lock();
                if !f.valid {
                    return Err(mtt::AccessError::BadKey);
                }
                mtt::check(&f.grant, &f.region, &f.runs, req).map(|_| ())
            }
        }
    }

    /// [`Self::check`] without the MR's range: key, PD, rights and a range
    /// that does not wrap (a FLUSH of the whole MR names no range).
    pub(crate) fn check_grant(&self, req: &mtt::Request) -> Result<(), mtt::AccessError> {
        let grant = match &self.mr().kind {
            Kind::User { rights, .. }
            | Kind::Odp { rights, .. }
            | Kind::DmaBuf { rights, .. }
            | Kind::Implicit { rights, .. } => self.grant(rights),
            Kind::Dma { pd, access } => Grant {
                key: self.mr().key(),
                pd: *pd,
                access: *access,
            },
            Kind::Fast(f) => {
                let f = f.lock();
                if !f.valid {
                    return Err(mtt::AccessError::BadKey);
                }
                f.grant
            }
        };
        check_grant(&grant, req)
    }

    /// Copies `len` bytes of `src`, from `pos` on, into the MR at `iova`.
    /// The caller checked the access. A copy of `help_bytes` or more (a
    /// loopback packet's payload, up to 256 KiB) is shared in pieces with a
    /// helper on another CPU, if one is free: one QP's copy then uses both
    /// CPUs while the poster's would only poll.
    pub(crate) fn write(&self, iova: u64, src: Src<'_>, pos: usize, len: usize) -> bool {
        let min = crate::wq::help_bytes();
        if min > 0 && len >= min {
            return self.write_shared(iova, src, pos, len);
        }
        let mut at = pos;
        let mut seek = pages::Seek::default();
        self.frags(iova, len as u64, true, |f| {
            let ok = f.write_from(src, at, &mut seek);
            at += f.len();
            ok
        })
    }

    /// Appends `len` bytes of the MR at `iova` to `v`, which must have the
    /// room. The caller checked the access. On failure `v` may hold part.
    pub(crate) fn append_to(&self, iova: u64, len: u64, v: &mut KVVec<u8>) -> bool {
        self.frags(iova, len, false, |f| f.append_to(v))
    }

    /// Applies `op` to the aligned u64 at `iova` atomically and returns the
    /// value it had. The caller checked the access and the alignment.
    pub(crate) fn atomic(&self, iova: u64, op: impl FnOnce(&Atomic<u64>) -> u64) -> Option<u64> {
        let mut op = Some(op);
        let mut orig = None;
        let ok = self.frags(iova, 8, true, |f| {
            let Some(op) = op.take() else {
                return false;
            };
            orig = f.atomic(op);
            orig.is_some()
        });
        if ok {
            orig
        } else {
            None
        }
    }
}

/// A device's key table: lkey/rkey -> MR.
pub(crate) type Keys = crate::keys::KeyTable<OxeMr>;

/// Finds the live MR named by `key`, without locks.
pub(crate) fn lookup(keys: &Keys, key: u32) -> Option<MrRef> {
    keys.get(key).map(|mr| MrRef { mr, key })
}

/// LOCAL_INV and SEND_WITH_INV: invalidates the fast MR `key` names, if it
/// is one of `pd`'s.
pub(crate) fn invalidate(keys: &Keys, key: u32, pd: PdId) -> bool {
    lookup(keys, key).is_some_and(|m| m.invalidate(pd).is_ok())
}

/// The MR at the index of `key`, whatever its tag (REG_MR changes the tag).
pub(crate) fn lookup_index(keys: &Keys, key: u32) -> Option<MrRef> {
    keys.get_index(key).map(|mr| {
        let key = mr.key();
        MrRef { mr, key }
    })
}

/// `advise_mr` on `(lkey, iova, length)` SGEs of `pd`'s ODP MRs: faults
/// the pages in (writable for PREFETCH_WRITE); PREFETCH_NO_FAULT faults
/// nothing in, and oxe has no mapping of its own to fill from the present
/// pages (each access looks them up), so it only checks. Done before
/// returning either way: without
/// `sync` (IB_UVERBS_ADVISE_MR_FLAG_FLUSH) the caller asked for no answer,
/// so a range that cannot be faulted in is not an error then, as with a
/// prefetch left to run after the verb returned; a bad key always is.
pub(crate) fn advise(
    keys: &Keys,
    pd: PdId,
    advice: u32,
    sync: bool,
    sges: impl Iterator<Item = (u32, u64, u64)> + Clone,
) -> Result {
    let (write, fault) = match advice {
        b::ib_uverbs_advise_mr_advice_IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH => (false, true),
        b::ib_uverbs_advise_mr_advice_IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE => (true, true),
        b::ib_uverbs_advise_mr_advice_IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT => {
            (false, false)
        }
        _ => return Err(eopnotsupp()),
    };
    // Every key first: one that names no ODP MR of the PD, or a range it
    // does not cover, fails the call before anything is done.
    for (lkey, iova, len) in sges.clone() {
        if !lookup(keys, lkey).is_some_and(|m| m.advisable(pd, iova, len)) {
            return Err(EINVAL);
        }
    }
    for (lkey, iova, len) in sges {
        let Some(m) = lookup(keys, lkey) else {
            continue;
        };
        let r = m.prefetch(pd, iova, len, write, fault);
        if sync {
            r?;
        }
    }
    Ok(())
}

fn reg_errno(e: access::RegError) -> Error {
    match e {
        access::RegError::Invalid => EINVAL,
        access::RegError::NotSupported => eopnotsupp(),
    }
}

/// A user registration's checks and geometry: the pages of `[start, start +
/// length)`, the region seen from `iova`, the PD and rights.
fn user_geometry(
    pd: PdId,
    start: u64,
    length: u64,
    iova: u64,
    access: u32,
    udata: Option<&Udata<'_>>,
) -> Result<(access::UserRange, Region, Atomic<u64>)> {
    udata::in_empty(udata)?;
    let range =
        access::check_user_reg(start, length, iova, access, PAGE_SHIFT).map_err(reg_errno)?;
    let region = Region {
        iova,
        length,
        offset: range.offset,
        page_shift: PAGE_SHIFT,
    };
    Ok((range, region, Atomic::new(PdRights { pd, access }.pack())))
}

impl Kind {
    /// `reg_user_mr`: pins `[start, start + length)` for `pd` with `access`,
    /// to be addressed from `iova`.
    pub(crate) fn user(
        pd: PdId,
        start: u64,
        length: u64,
        iova: u64,
        access: u32,
        udata: Option<&Udata<'_>>,
    ) -> Result<Kind> {
        let (range, region, rights) = user_geometry(pd, start, length, iova, access, udata)?;
        let pinned = Pinned::pin(
            range.first_page_va,
            range.npages,
            access & access::ANY_WRITE != 0,
        )?;
        Ok(Kind::User {
            rights,
            region,
            pinned: PinnedCell::new(pinned),
        })
    }

    /// `reg_user_mr` with `IB_ACCESS_ON_DEMAND`: as `user`, but nothing is
    /// pinned; `root` makes the core's root umem, under which the chunks of
    /// `[start, start + length)` are made as the data path touches them.
    pub(crate) fn odp<I: PinInit<Implicit, Error>>(
        pd: PdId,
        start: u64,
        length: u64,
        iova: u64,
        access: u32,
        udata: Option<&Udata<'_>>,
        root: impl FnOnce() -> Result<I>,
    ) -> Result<Kind> {
        let (range, region, rights) = user_geometry(pd, start, length, iova, access, udata)?;
        let odp = KBox::pin_init(root()?, GFP_KERNEL)?;
        Ok(Kind::Odp {
            rights,
            region,
            va0: range.first_page_va,
            writable: access & access::ANY_WRITE != 0,
            odp,
        })
    }

    /// `reg_user_mr` of the whole address space with `IB_ACCESS_ON_DEMAND`
    /// (start 0, length `u64::MAX`, iova 0): implicit ODP; `root` makes
    /// the core's implicit umem.
    pub(crate) fn implicit<I: PinInit<Implicit, Error>>(
        pd: PdId,
        iova: u64,
        access: u32,
        udata: Option<&Udata<'_>>,
        root: impl FnOnce() -> Result<I>,
    ) -> Result<Kind> {
        udata::in_empty(udata)?;
        access::check_access(access).map_err(reg_errno)?;
        if iova != 0 || access & access::ZERO_BASED != 0 {
            return Err(EINVAL);
        }
        let imp = KBox::pin_init(root()?, GFP_KERNEL)?;
        let rights = PdRights { pd, access };
        Ok(Kind::Implicit {
            rights: Atomic::new(rights.pack()),
            writable: access & access::ANY_WRITE != 0,
            imp,
        })
    }

    /// `reg_user_mr_dmabuf`: `[offset, offset + length)` of the dma-buf
    /// `fd` names, seen from `iova`, for `pd` with `access`.
    pub(crate) fn dmabuf(
        pd: PdId,
        offset: u64,
        length: u64,
        iova: u64,
        fd: i32,
        access: u32,
    ) -> Result<Kind> {
        access::check_access(access).map_err(reg_errno)?;
        // The core lets no ODP or MW_BIND through; zero-based is a user
        // registration's option only.
        if length == 0 || iova.checked_add(length).is_none() || access & access::ZERO_BASED != 0 {
            return Err(EINVAL);
        }
        let buf = DmaBuf::map(fd, offset, length)?;
        let in_page = offset & (PAGE_SIZE - 1);
        let base = buf.vaddr().checked_add(offset - in_page).ok_or(EINVAL)?;
        Ok(Kind::DmaBuf {
            rights: Atomic::new(PdRights { pd, access }.pack()),
            region: Region {
                iova,
                length,
                offset: in_page,
                page_shift: PAGE_SHIFT,
            },
            base,
            buf: pages::TakeCell::new(buf),
        })
    }

    /// `get_dma_mr`: the DMA MR of kernel PDs, which the core asks for in
    /// `ib_alloc_pd`, for the PD's `local_dma_lkey`.
    pub(crate) fn dma(pd: PdId, access: u32) -> Result<Kind> {
        if access::check_access(access).is_err() {
            return Err(EINVAL);
        }
        Ok(Kind::Dma { pd, access })
    }
}

impl OxeMr {
    /// Re-registration with a new translation (`IB_MR_REREG_TRANS`): the
    /// access the new MR gets, the old one's unless `flags` gives new ones.
    pub(crate) fn rereg_trans_access(&self, flags: u32, new_access: u32) -> Result<u32> {
        let (Kind::User { rights, .. } | Kind::Odp { rights, .. } | Kind::Implicit { rights, .. }) =
            &self.kind
        else {
            return Err(EINVAL);
        };

        Ok(if flags & b::ib_mr_rereg_flags_IB_MR_REREG_ACCESS != 0 {
            new_access
        } else {
            PdRights::unpack(rights.load(ordering::Relaxed)).access
        })
    }

    /// Re-registration in place: a new PD (`new_pd`, given with
    /// `IB_MR_REREG_PD`) and new rights (with `IB_MR_REREG_ACCESS`); keys
    /// and translation stay. Write rights on pages pinned read-only are
    /// refused (EACCES, as the core's `ib_umem_check_rereg`): they may be
    /// shared copy-on-write, and writing them needs pinning anew.
    pub(crate) fn rereg(
        &self,
        flags: u32,
        new_access: u32,
        new_pd: Option<PdId>,
        udata: Option<&Udata<'_>>,
    ) -> Result {
        udata::in_empty(udata)?;
        // Nothing to change (the core drops IB_MR_REREG_PD naming the MR's
        // own PD): done, even with windows bound.
        let changes = b::ib_mr_rereg_flags_IB_MR_REREG_PD | b::ib_mr_rereg_flags_IB_MR_REREG_ACCESS;
        if flags & changes == 0 {
            return Ok(());
        }
        let (rights, writable) = match &self.kind {
            Kind::User { rights, pinned, .. } => (rights, pinned.get().is_some_and(|p| p.dirty)),
            Kind::Odp {
                rights, writable, ..
            }
            | Kind::Implicit {
                rights, writable, ..
            } => (rights, *writable),
            _ => return Err(EINVAL),
        };
        // A window bound now was checked against the PD and rights this
        // would change: refuse while one is, and hold binds off meanwhile.
        self.freeze_windows()?;
        let res = self.rereg_locked(rights, writable, flags, new_access, new_pd);
        self.thaw_windows();
        res
    }

    fn rereg_locked(
        &self,
        rights: &Atomic<u64>,
        writable: bool,
        flags: u32,
        new_access: u32,
        new_pd: Option<PdId>,
    ) -> Result {
        let set_access = flags & b::ib_mr_rereg_flags_IB_MR_REREG_ACCESS != 0;
        if set_access {
            access::check_access(new_access).map_err(reg_errno)?;
            // ON_DEMAND is the registration's kind, not a right to change.
            let was_odp =
                PdRights::unpack(rights.load(ordering::Relaxed)).access & access::ON_DEMAND;
            if new_access & access::ON_DEMAND != was_odp {
                return Err(EINVAL);
            }
            if new_access & access::ANY_WRITE != 0 && !writable {
                return Err(EACCES);
            }
        }
        // Checked above: from here on nothing fails. One store changes both:
        // accesses already checked finish under the old pair, new ones see
        // the new pair, and none sees half of each. The core serialises
        // rereg of an MR (it holds the uobject exclusively), so nothing
        // writes in between.
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
}
