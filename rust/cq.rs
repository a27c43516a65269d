// SPDX-License-Identifier: GPL-2.0

//! Completion queues: a ring of CQEs (`struct ib_uverbs_wc` for user CQs,
//! `struct ib_wc` for kernel ones), completion events and overflow. The
//! entry points, and what touches the core's `ib_cq`, are in `ffi/cq.rs`.

use core::mem::{size_of, MaybeUninit};

use kernel::prelude::*;
use kernel::sync::atomic::Atomic;
use kernel::types::Opaque;

use crate::bindings as b;
use crate::ib::{self, Udata};
use crate::irqlock::{new_irq_spinlock, IrqSpinLock};
use crate::params;
use crate::queue::{self, Queue};

pub(crate) use crate::ib::cq::Cqe;

/// The core allocates it (`size_ib_cq`); `state` is initialised in place by
/// `create_cq` and dropped in place by `destroy_cq`.
#[repr(C)]
pub(crate) struct OxeCq {
    ib: Opaque<b::ib_cq>,
    state: CqState,
}
ib::core_object!(OxeCq, ib: b::ib_cq, state: CqState);

/// What a CQ owns besides its `ib_cq`.
#[pin_data]
pub(crate) struct CqState {
    #[pin]
    inner: IrqSpinLock<CqInner>,
    user: bool,
}

struct CqInner {
    queue: Queue,
    /// IB_CQ_SOLICITED / IB_CQ_NEXT_COMP armed by req_notify_cq.
    notify: u32,
    /// CQEs dropped because the ring was full.
    dropped: u64,
    /// The last CQE offered was dropped: IB_EVENT_CQ_ERR was raised for
    /// this overflow, and is raised again only after a CQE fits.
    full: bool,
}

/// Bytes of a ring slot: rxe's `union rxe_cqe`, room for either view.
const CQE_SIZE: usize = if size_of::<b::ib_wc>() > size_of::<b::ib_uverbs_wc>() {
    size_of::<b::ib_wc>()
} else {
    size_of::<b::ib_uverbs_wc>()
};

impl CqState {
    /// A CQ of at least `cqe` entries; `udata` is `None` for kernel CQs.
    pub(crate) fn new(
        cqe: u32,
        flags: u32,
        udata: Option<&Udata<'_>>,
    ) -> Result<impl PinInit<Self, Error>> {
        if flags != 0 {
            return Err(crate::eopnotsupp());
        }
        if !(1..=params::MAX_CQE).contains(&cqe) {
            return Err(EINVAL);
        }
        let user = udata.is_some();
        if let Some(u) = udata {
            u.require_out::<b::rxe_create_cq_resp>()?;
        }
        let queue = Queue::new(cqe, CQE_SIZE)?;
        Ok(try_pin_init!(CqState {
            inner <- new_irq_spinlock!(CqInner {
                queue,
                notify: 0,
                dropped: 0,
                full: false,
            }),
            user,
        }? Error))
    }
}

impl OxeCq {
    /// The ring's usable entries, for the core's `ib_cq.cqe`.
    pub(crate) fn capacity(&self) -> u32 {
        self.state.inner.lock().queue.capacity()
    }

    /// Offers a new user CQ's ring for mmap and sends its mminfo back.
    pub(crate) fn respond_user(&self, udata: &Udata<'_>, offsets: &Atomic<u64>) -> Result {
        let buf = self.state.inner.lock().queue.buf().clone();
        let uc = udata.ucontext().ok_or(EINVAL)?;
        let resp = b::rxe_create_cq_resp {
            mi: uc.mmaps()?.offer(offsets, &buf)?,
        };
        udata.respond(&resp)
    }

    /// Before destroy: an offer user space never took goes now, not when the
    /// file is closed. `udata` is the destroy command's (`None` for kernel
    /// CQs).
    pub(crate) fn withdraw(&self, udata: Option<&Udata<'_>>) {
        let buf = self.state.inner.lock().queue.buf().clone();
        queue::withdraw_from(udata, &[&buf]);
    }

    /// `rdma -dd res show cq`: completions posted and not polled yet, and
    /// how many the CQ dropped because it was full.
    pub(crate) fn res_details(&self) -> [(&'static core::ffi::CStr, u64); 2] {
        let inner = self.state.inner.lock();
        [
            (c"cqe_pending", inner.queue.produced_pending().into()),
            (c"overflowed", inner.dropped),
        ]
    }

    /// Posts one completion. EBUSY when the CQ is full: the CQE is dropped
    /// and the CQ's owner gets IB_EVENT_CQ_ERR, as rxe's `rxe_cq_post`
    /// does. The CQ takes CQEs again once polled: a CQ that stayed in error
    /// (as a NIC's does) would never take the flush completion of a kernel
    /// client's `ib_drain_qp`, which waits for it uninterruptibly.
    pub(crate) fn post(&self, cqe: &Cqe, solicited: bool) -> Result {
        if cqe.status != b::ib_wc_status_IB_WC_SUCCESS {
            ib::trace::cqe_error(cqe.qp_num, cqe.wr_id, cqe.status, cqe.opcode);
        }
        let state = &self.state;
        let mut inner = state.inner.lock();
        let res = if state.user {
            inner.queue.produce(ib::as_bytes(&ib::cq::uverbs_wc(cqe)))
        } else {
            inner.queue.produce(ib::as_bytes(&ib::cq::kernel_wc(cqe)))
        };
        if res.is_err() {
            inner.dropped = inner.dropped.saturating_add(1);
            let first = !core::mem::replace(&mut inner.full, true);
            drop(inner);
            if first {
                ib::cq::event(self, b::ib_event_type_IB_EVENT_CQ_ERR);
            }
            return Err(EBUSY);
        }
        inner.full = false;
        let fire = inner.notify & b::ib_cq_notify_flags_IB_CQ_NEXT_COMP != 0
            || (solicited && inner.notify & b::ib_cq_notify_flags_IB_CQ_SOLICITED != 0);
        if fire {
            inner.notify = 0;
        }
        drop(inner);
        if fire {
            // The handler takes its own locks.
            ib::cq::comp_handler(self);
        }
        Ok(())
    }

    /// `ib_req_notify_cq`: arms the next event; true if `flags` asks to
    /// report missed events and completions are pending.
    pub(crate) fn req_notify(&self, flags: b::ib_cq_notify_flags) -> bool {
        let mut inner = self.state.inner.lock();
        let want = flags & b::ib_cq_notify_flags_IB_CQ_SOLICITED_MASK;
        if inner.notify != b::ib_cq_notify_flags_IB_CQ_NEXT_COMP {
            inner.notify = want;
        }
        flags & b::ib_cq_notify_flags_IB_CQ_REPORT_MISSED_EVENTS != 0
            && inner.queue.produced_pending() > 0
    }

    /// `ibv_resize_cq`: a new ring holding what is pending, mapped anew by
    /// librxe, which holds its CQ lock, so user space does not poll
    /// meanwhile.
    pub(crate) fn resize(
        &self,
        cqe: u32,
        udata: Option<&Udata<'_>>,
        offsets: &Atomic<u64>,
    ) -> Result {
        let state = &self.state;
        let Some(udata) = udata.filter(|_| state.user) else {
            return Err(EINVAL);
        };
        if !(1..=params::MAX_CQE).contains(&cqe) {
            return Err(EINVAL);
        }
        udata.require_out::<b::rxe_resize_cq_resp>()?;
        let mut next = Queue::new(cqe, CQE_SIZE)?;
        let mmaps = udata.ucontext().ok_or(EINVAL)?.mmaps()?;
        let mut slot = KVec::new();
        slot.resize(next.elem_size(), 0u8, GFP_KERNEL)?;
        // Offered before the CQ's spinlock is taken: offering sleeps.
        let resp = b::rxe_resize_cq_resp {
            mi: mmaps.offer(offsets, next.buf())?,
        };
        // Told before the swap: a CQ must not post into a ring its process
        // cannot find, as it would if this failed after (librxe reads the
        // answer only if the verb succeeds).
        if let Err(e) = udata.respond(&resp) {
            mmaps.withdraw(next.buf());
            return Err(e);
        }
        let mut inner = state.inner.lock();
        let moved = refill(&mut inner.queue, &mut next, &mut slot);
        if moved.is_ok() {
            core::mem::swap(&mut inner.queue, &mut next);
            ib::cq::publish_cqe(self, inner.queue.capacity());
        }
        drop(inner);
        // `next` is now the ring the CQ does not use: the old one, or the new
        // one if the resize failed. Its offer goes if user space never mapped
        // it, and the ring is freed (vfree sleeps: only after the spinlock is
        // released).
        mmaps.withdraw(next.buf());
        drop(next);
        moved
    }

    /// Kernel consumers' poll: pops up to `out.len()` completions into `out`;
    /// returns how many.
    pub(crate) fn poll(&self, out: &mut [MaybeUninit<b::ib_wc>]) -> usize {
        let mut inner = self.state.inner.lock();
        let mut got = 0;
        for slot in out.iter_mut() {
            let mut wc: b::ib_wc = pin_init::zeroed();
            if !inner.queue.pop_into(ib::as_bytes_mut(&mut wc)) {
                break;
            }
            slot.write(wc);
            got += 1;
        }
        got
    }
}

/// Moves the CQEs pending in `old` to `next`; EINVAL if they do not fit.
///
/// Runs under the CQ's IRQ-off spinlock, so it is bounded by the ring, not by
/// the consumer indices user space writes: `pending` comes from masked
/// indices (at most `old`'s capacity) and is counted once. Popping until the
/// old ring looked empty was bounded only by the new ring filling up, which
/// reads the new ring's consumer index: a process that maps the new ring
/// before the resize returns (it is offered before the lock is taken) and
/// keeps moving both consumer indices back could keep the loop going.
fn refill(old: &mut Queue, next: &mut Queue, slot: &mut [u8]) -> Result {
    let pending = old.produced_pending();
    if pending > next.capacity() {
        return Err(EINVAL);
    }
    for _ in 0..pending {
        if !old.pop_into(slot) {
            break;
        }
        next.produce(slot)?;
    }
    Ok(())
}
