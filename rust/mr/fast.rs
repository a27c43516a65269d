// SPDX-License-Identifier: GPL-2.0

//! Fast registration: an MR from `alloc_mr`, mapped by `map_mr_sg`, made
//! valid by a REG_MR work request and invalidated by LOCAL_INV or
//! SEND_WITH_INV.

use kernel::alloc::KVVec;
use kernel::prelude::*;
use kernel::sync::atomic::ordering;

use super::pages::{self, PAGE_SHIFT, PAGE_SIZE};
use super::{Kind, LocalOpError, MrRef, OxeMr};
use crate::access::{self, PdId};
use crate::bindings as b;
use crate::eopnotsupp;
use crate::irqlock::new_irq_spinlock;
use crate::mtt::{Grant, Region, Run};

/// A fast-registration MR's state. Both tables are allocated up front with
/// room for `max_pages` calls of `set_page`, so neither mapping nor
/// registering allocates.
pub(crate) struct Fast {
    pub(super) valid: bool,
    pub(super) grant: Grant,
    pub(super) region: Region,
    pub(super) runs: KVVec<Run>,
    /// What `map_mr_sg` built, made live by the next REG_MR.
    pub(super) staged: KVVec<Run>,
    staged_region: Region,
    /// Pages (PAGE_SIZE) and `set_page` calls of the staged mapping.
    staged_pages: u64,
    staged_calls: u32,
    max_pages: u32,
}

impl Kind {
    /// `alloc_mr`: a fast-registration MR of `pd` for up to `max` pages.
    pub(crate) fn fast(pd: PdId, mr_type: b::ib_mr_type, max: u32) -> Result<Kind> {
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
                pd,
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
        Ok(Kind::Fast(fast))
    }
}

impl OxeMr {
    /// `map_mr_sg`, before the pages: forgets the last staged mapping.
    /// EINVAL unless a fast MR and a `page_size` the MTT can tell apart.
    pub(crate) fn stage_begin(&self, page_size: u64) -> Result {
        let Kind::Fast(m) = &self.kind else {
            return Err(EINVAL);
        };
        // Pages smaller than the CPU's cannot be told apart in the MTT.
        if page_size < PAGE_SIZE || !page_size.is_power_of_two() {
            return Err(EINVAL);
        }
        let mut m = m.lock();
        m.staged.clear();
        m.staged_pages = 0;
        m.staged_calls = 0;
        Ok(())
    }

    /// `map_mr_sg`'s `set_page`: one block of `page_size` bytes at `addr`
    /// (a kernel virtual address, since oxe uses virtual DMA).
    pub(crate) fn stage_page(&self, page_size: u64, addr: u64) -> Result {
        let Kind::Fast(m) = &self.kind else {
            return Err(EINVAL);
        };
        let mut guard = m.lock();
        let m = &mut *guard;
        if m.staged_calls >= m.max_pages {
            return Err(ENOMEM);
        }
        let pfn = pages::virt_to_pfn(addr).ok_or(EINVAL)?;
        // The linear map is physically contiguous: one run per page_size block.
        let run = Run {
            first: m.staged_pages,
            pfn,
            count: page_size >> PAGE_SHIFT,
        };
        match m.staged.last_mut() {
            Some(last)
                if last.pfn + last.count == run.pfn && last.first + last.count == run.first =>
            {
                last.count += run.count;
            }
            _ => {
                if m.staged.push_within_capacity(run).is_err() {
                    return Err(ENOMEM);
                }
            }
        }
        m.staged_pages += run.count;
        m.staged_calls += 1;
        Ok(())
    }

    /// `map_mr_sg`, after the pages: the region they map, as the core set it.
    pub(crate) fn stage_end(&self, iova: u64, length: u64, page_size: u64) {
        if let Kind::Fast(m) = &self.kind {
            m.lock().staged_region = Region {
                iova,
                length,
                offset: iova & (page_size - 1),
                page_shift: PAGE_SHIFT,
            };
        }
    }
}

impl MrRef {
    /// LOCAL_INV and SEND_WITH_INV: `key` must name a valid fast-registration
    /// MR of `pd`. Other MRs cannot be invalidated, as in rdma_rxe.
    pub(super) fn invalidate(&self, pd: PdId) -> Result<(), LocalOpError> {
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
    /// (same index, any tag) with `access`, its first byte at `iova` (the
    /// MR's when the WR was posted: a client may move it after mapping, as
    /// NFS/RDMA and RDS do). The MR must be free (not valid) and belong to
    /// `pd`.
    pub(crate) fn fast_register(
        &self,
        pd: PdId,
        key: u32,
        access: u32,
        iova: u64,
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
        m.region = Region {
            iova,
            ..m.staged_region
        };
        m.grant = Grant { key, pd, access };
        m.valid = true;
        self.mr().key.store(key, ordering::Relaxed);
        Ok(())
    }
}
