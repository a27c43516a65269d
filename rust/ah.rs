// SPDX-License-Identifier: GPL-2.0

//! Address handles: where a UD work request's datagram goes. An AH is an
//! address vector (source and destination GIDs, traffic class, hop limit,
//! flow label) under a PD, numbered per device: librxe puts the number
//! (`ah_num`, from `rxe_create_ah_resp`) in each UD send WQE, and the
//! requester looks it up when it takes the WQE, so an AH destroyed or
//! replaced meanwhile is never used. Its entry points are in `ffi/ah.rs`.

use kernel::prelude::*;
use kernel::sync::atomic::{ordering, Atomic};
use kernel::sync::Arc;
use kernel::types::Opaque;
use kernel::xarray::{AllocKind, XArray};

use crate::access::PdId;
use crate::bindings as b;
use crate::ib;
use crate::ib::qp::Av;
use crate::irqlock::without_bh;
use crate::params;

/// The core allocates it (`size_ib_ah`); `ah` is written in place by
/// `create_ah` and dropped in place by `destroy_ah`.
#[repr(C)]
pub(crate) struct OxeAh {
    ib: Opaque<b::ib_ah>,
    pub(crate) ah: Arc<Ah>,
}
ib::core_object!(OxeAh, ib: b::ib_ah, ah: Arc<Ah>);

/// What a UD send needs of an AH.
pub(crate) struct Ah {
    /// The AH's number on its device, 1..=MAX_AH (0 is "no AH" in a WQE).
    pub(crate) num: u32,
    pub(crate) pd: PdId,
    pub(crate) av: Av,
    /// The attributes it was created with, for `query_ah` (the MAD layer
    /// matches responses to requests by the AH's GID).
    pub(crate) attr: [u8; AH_ATTR_SIZE],
}

pub(crate) const AH_ATTR_SIZE: usize = core::mem::size_of::<b::rdma_ah_attr>();

/// AH number -> AH. Created and destroyed in atomic context too (kernel
/// clients without RDMA_CREATE_AH_SLEEPABLE), looked up by the send task:
/// an xarray with BH disabled around every access, and no sleeping
/// allocation under it.
#[pin_data]
pub(crate) struct AhTable {
    #[pin]
    xa: XArray<Arc<Ah>>,
    /// Where the search for a free number starts: numbers are handed out
    /// cyclically, so a stale number in a WQE rarely names a new AH.
    next: Atomic<u32>,
}

impl AhTable {
    pub(crate) fn new() -> impl PinInit<Self, Error> {
        try_pin_init!(AhTable {
            xa <- XArray::new(AllocKind::Alloc),
            next: Atomic::new(1),
        }? Error)
    }

    /// Publishes an AH made by `make` under a free number; ENOMEM when all
    /// `MAX_AH` are taken.
    pub(crate) fn insert(&self, make: impl FnOnce(u32) -> Ah) -> Result<Arc<Ah>> {
        let max = params::MAX_AH;
        let start = self.next.load(ordering::Relaxed).clamp(1, max);
        without_bh(|| {
            let mut xa = self.xa.lock();
            let num = (0..max)
                .map(|i| (start - 1 + i) % max + 1)
                .find(|&n| xa.get(n as usize).is_none())
                .ok_or(ENOMEM)?;
            let ah = Arc::new(make(num), GFP_ATOMIC)?;
            xa.store(num as usize, ah.clone(), GFP_ATOMIC)?;
            self.next.store(num % max + 1, ordering::Relaxed);
            Ok(ah)
        })
    }

    pub(crate) fn get(&self, num: u32) -> Option<Arc<Ah>> {
        without_bh(|| self.xa.lock().get(num as usize).map(Arc::from))
    }

    pub(crate) fn remove(&self, num: u32) {
        let ah = without_bh(|| self.xa.lock().remove(num as usize));
        drop(ah);
    }
}
