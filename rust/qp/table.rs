// SPDX-License-Identifier: GPL-2.0

//! The device's QPs by number.

use kernel::prelude::*;
use kernel::sync::{Arc, Mutex, SpinLock};
use kernel::xarray::{AllocKind, XArray};

use super::{mcast, Qp};
use crate::irqlock::without_bh;
use crate::params;

/// QPN -> QP, for delivering packets, from process context and from the
/// wire's receive in softirq (hence BH disabled around every access). QPNs
/// start at 16, as rxe's.
#[pin_data]
pub(crate) struct QpTable {
    #[pin]
    pub(super) xa: XArray<Arc<Qp>>,
    #[pin]
    next: Mutex<u32>,
    /// Multicast groups (`mcast`).
    #[pin]
    pub(super) groups: SpinLock<KVec<mcast::Group>>,
}

impl QpTable {
    pub(crate) fn new() -> impl PinInit<Self, Error> {
        try_pin_init!(QpTable {
            xa <- XArray::new(AllocKind::Alloc),
            next <- kernel::new_mutex!(params::MIN_QP_INDEX),
            groups <- kernel::new_spinlock!(KVec::new()),
        }? Error)
    }

    /// Creates a QP under QPN `fixed` (the GSI QP's; EBUSY if taken), or
    /// under a free QPN, and publishes it.
    pub(crate) fn insert(
        &self,
        fixed: Option<u32>,
        make: impl FnOnce(u32) -> Result<Arc<Qp>>,
    ) -> Result<Arc<Qp>> {
        let mut next = self.next.lock();
        if let Some(qpn) = fixed {
            if without_bh(|| self.xa.lock().get(qpn as usize).is_some()) {
                return Err(EBUSY);
            }
            let qp = make(qpn)?;
            without_bh(|| self.xa.lock().store(qpn as usize, qp.clone(), GFP_ATOMIC))?;
            return Ok(qp);
        }
        let max = params::MIN_QP_INDEX + params::MAX_QP - 1;
        for _ in 0..params::MAX_QP {
            let qpn = *next;
            *next = if qpn >= max {
                params::MIN_QP_INDEX
            } else {
                qpn + 1
            };
            if without_bh(|| self.xa.lock().get(qpn as usize).is_some()) {
                continue;
            }
            let qp = make(qpn)?;
            // Atomic allocation: the store runs with BH disabled.
            without_bh(|| self.xa.lock().store(qpn as usize, qp.clone(), GFP_ATOMIC))?;
            return Ok(qp);
        }
        Err(ENOSPC)
    }

    /// The QP numbered `qpn`; also from softirq (the wire's receive).
    pub(crate) fn get(&self, qpn: u32) -> Option<Arc<Qp>> {
        without_bh(|| self.xa.lock().get(qpn as usize).map(Arc::from))
    }

    pub(crate) fn remove(&self, qpn: u32) {
        let qp = without_bh(|| self.xa.lock().remove(qpn as usize));
        drop(qp);
    }
}
