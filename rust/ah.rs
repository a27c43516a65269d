// SPDX-License-Identifier: GPL-2.0

//! Address handles: where a UD work request's datagram goes. An AH is an
//! address vector (source and destination GIDs, traffic class, hop limit,
//! flow label) under a PD, numbered per device: librxe puts the number
//! (`ah_num`, from `rxe_create_ah_resp`) in each UD send WQE, and the
//! requester looks it up when it takes the WQE, so an AH destroyed or
//! replaced meanwhile is never used. Its entry points are in `ffi/ah.rs`.

use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::types::Opaque;
use kernel::xarray::{AllocKind, XArray};

use crate::access::PdId;
use crate::bindings as b;
use crate::ib;
use crate::ib::qp::Av;
use crate::irqlock::{new_irq_spinlock, IrqSpinLock};
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

/// AH number -> AH. Created and destroyed in atomic context too, even with
/// interrupts off (ib_cm creates its AHs under an irqsave spinlock), looked
/// up by the send task: every access to the xarray is under `next`, an
/// IRQ-safe lock, and allocates nothing that sleeps.
#[pin_data]
pub(crate) struct AhTable {
    #[pin]
    xa: XArray<Arc<Ah>>,
    /// Where the search for a free number starts: numbers are handed out
    /// cyclically, so a stale number in a WQE rarely names a new AH.
    #[pin]
    next: IrqSpinLock<u32>,
}

impl AhTable {
    pub(crate) fn new() -> impl PinInit<Self, Error> {
        try_pin_init!(AhTable {
            xa <- XArray::new(AllocKind::Alloc),
            next <- new_irq_spinlock!(1),
        }? Error)
    }

    /// Publishes an AH made by `make` under a free number; ENOMEM when all
    /// `MAX_AH` are taken.
    pub(crate) fn insert(&self, make: impl FnOnce(u32) -> Ah) -> Result<Arc<Ah>> {
        let max = params::MAX_AH;
        let mut next = self.next.lock();
        let start = (*next).clamp(1, max);
        let mut xa = self.xa.lock();
        let num = (0..max)
            .map(|i| (start - 1 + i) % max + 1)
            .find(|&n| xa.get(n as usize).is_none())
            .ok_or(ENOMEM)?;
        let ah = Arc::new(make(num), GFP_ATOMIC)?;
        xa.store(num as usize, ah.clone(), GFP_ATOMIC)?;
        *next = num % max + 1;
        Ok(ah)
    }

    pub(crate) fn get(&self, num: u32) -> Option<Arc<Ah>> {
        let _irqs_off = self.next.lock();
        let ah = self.xa.lock().get(num as usize).map(Arc::from);
        ah
    }

    pub(crate) fn remove(&self, num: u32) {
        let ah = {
            let _irqs_off = self.next.lock();
            let ah = self.xa.lock().remove(num as usize);
            ah
        };
        // The last reference may go here, with interrupts on again.
        drop(ah);
    }
}
