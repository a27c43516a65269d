// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues: one ring of receive WQEs (rxe's layout, mapped
//! into the process for user SRQs, written by `post_srq_recv` for kernel
//! ones) from which the responders of every QP attached to it take their
//! receives. A responder consumes a WQE when a message starts (two QPs
//! must never take the same one), and the SRQ raises
//! IB_EVENT_SRQ_LIMIT_REACHED once when fewer than its armed limit are
//! left. It can be resized with its WQEs posted. Its entry points are in
//! `ffi/srq.rs`.

use core::mem::size_of_val;

use kernel::prelude::*;
use kernel::sync::atomic::Atomic;
use kernel::sync::{Arc, Mutex};
use kernel::types::Opaque;
use kernel::uaccess::{UserPtr, UserSlice};

use crate::access::PdId;
use crate::bindings as b;
use crate::ib;
use crate::ib::srq::SrqHandle;
use crate::ib::Udata;
use crate::irqlock::{new_irq_spinlock, IrqSpinLock};
use crate::params;
use crate::queue::{self, Queue};
use crate::sgl::Sgl;
use crate::wqe::{self, Sge};

/// The core allocates it (`size_ib_srq`); `srq` is written in place by
/// `create_srq` and dropped in place by `destroy_srq`.
#[repr(C)]
pub(crate) struct OxeSrq {
    ib: Opaque<b::ib_srq>,
    pub(crate) srq: Arc<Srq>,
}
ib::core_object!(OxeSrq, ib: b::ib_srq, srq: Arc<Srq>);

/// The consumer side: the ring and the armed limit (0: not armed).
pub(crate) struct Ring {
    pub(crate) queue: Queue,
    limit: u32,
    /// Scratch: a private copy of the WQE being taken.
    wqe: KVec<u8>,
}

#[pin_data]
pub(crate) struct Srq {
    pub(crate) num: u32,
    pub(crate) pd: PdId,
    pub(crate) max_sge: u32,
    handle: SrqHandle,
    #[pin]
    pub(crate) ring: Mutex<Ring>,
    /// Kernel SRQs: the producer end, posted to from any context. None for
    /// user SRQs, which write their ring themselves.
    #[pin]
    kring: IrqSpinLock<Option<Queue>>,
}

fn elem(max_sge: u32) -> usize {
    wqe::RECV_WQE_SGE_OFFSET + max_sge as usize * wqe::SGE_SIZE
}

impl Srq {
    /// Checks `a` (rxe's limits and minimums; `a` gets what the ring holds)
    /// and makes the SRQ.
    pub(crate) fn create(
        num: u32,
        pd: PdId,
        a: &mut b::ib_srq_attr,
        user: bool,
        handle: SrqHandle,
    ) -> Result<Arc<Srq>> {
        if a.max_wr == 0 || a.max_wr > params::MAX_SRQ_WR || a.max_sge > params::MAX_SRQ_SGE {
            return Err(EINVAL);
        }
        let max_sge = a.max_sge.max(1);
        let queue = Queue::new(a.max_wr.max(params::MIN_SRQ_WR), elem(max_sge))?;
        // Create ignores `srq_limit` (ibv_create_srq(3)); rxe arms it, and
        // so does oxe when the ring can hold it. A larger one (left
        // uninitialised, say) is no reason to fail, as it is not on rxe.
        if a.srq_limit > queue.capacity() {
            a.srq_limit = 0;
        }
        a.max_wr = queue.capacity();
        a.max_sge = max_sge;
        let kring = (!user).then(|| queue.kernel_producer());
        let mut scratch = KVec::new();
        scratch.resize(queue.elem_size(), 0, GFP_KERNEL)?;
        let limit = a.srq_limit;
        Arc::pin_init(
            try_pin_init!(Srq {
                num,
                pd,
                max_sge,
                handle,
                ring <- kernel::new_mutex!(Ring {
                    queue,
                    limit,
                    wqe: scratch,
                }),
                kring <- new_irq_spinlock!(kring),
            }? Error),
            GFP_KERNEL,
        )
    }

    /// `ibv_modify_srq`: resizes (IB_SRQ_MAX_WR) and arms the limit.
    pub(crate) fn modify(
        &self,
        a: &b::ib_srq_attr,
        mask: u32,
        udata: Option<&Udata<'_>>,
        offsets: &Atomic<u64>,
    ) -> Result {
        let resize = mask & b::ib_srq_attr_mask_IB_SRQ_MAX_WR != 0;
        let arm = mask & b::ib_srq_attr_mask_IB_SRQ_LIMIT != 0;
        {
            // Both checked before anything changes.
            let r = self.ring.lock();
            let room = if resize { a.max_wr } else { r.queue.capacity() };
            if resize && (a.max_wr == 0 || a.max_wr > params::MAX_SRQ_WR) {
                return Err(EINVAL);
            }
            let limit = if arm { a.srq_limit } else { r.limit };
            if limit > room.max(params::MIN_SRQ_WR) {
                return Err(EINVAL);
            }
        }
        if resize {
            self.resize(a.max_wr.max(params::MIN_SRQ_WR), udata, offsets)?;
        }
        if arm {
            self.ring.lock().limit = a.srq_limit;
        }
        Ok(())
    }

    /// A new ring of at least `entries` WQEs holding those posted; EINVAL if
    /// they do not fit. A user SRQ's new ring is offered for mmap and its
    /// mminfo written where `rxe_modify_srq_cmd.mmap_info_addr` says (rxe's
    /// scheme); librxe holds its SRQ lock meanwhile, so it posts nothing.
    fn resize(&self, entries: u32, udata: Option<&Udata<'_>>, offsets: &Atomic<u64>) -> Result {
        let mut next = Queue::new(entries, elem(self.max_sge))?;
        let user = match udata {
            Some(u) => {
                let cmd: b::rxe_modify_srq_cmd = u.read_in()?;
                let mmaps = u.ucontext().ok_or(EINVAL)?.mmaps()?;
                Some((cmd.mmap_info_addr, mmaps))
            }
            None => None,
        };
        // Offered and told before the SRQ's lock is taken: writing to user
        // memory may fault and sleep, and the responders of every QP on
        // the SRQ would wait for it.
        if let Some((addr, mmaps)) = &user {
            let mi = mmaps.offer(offsets, next.buf())?;
            let written = UserSlice::new(UserPtr::from_addr(*addr as usize), size_of_val(&mi))
                .writer()
                .write_slice(ib::as_bytes(&mi));
            if let Err(e) = written {
                mmaps.withdraw(next.buf());
                return Err(e);
            }
        }
        // Not offered any more if the move fails (`next` is then freed).
        let moved = self.move_to(&mut next);
        if let Some((_, mmaps)) = &user {
            mmaps.withdraw(next.buf());
        }
        moved
    }

    /// Moves the posted WQEs to `next` and makes it the ring; `next` is
    /// then the old one. EINVAL if they do not fit (nothing changes), or if
    /// `next` took no more (a process that mapped and wrote it early).
    fn move_to(&self, next: &mut Queue) -> Result {
        let mut guard = self.ring.lock();
        let r = &mut *guard;
        let posted = r.queue.posted();
        if posted > next.capacity() {
            return Err(EINVAL);
        }
        {
            // Kernel posting (any context) stops while the WQEs move.
            let mut k = self.kring.lock();
            // `posted` counted once: bounded however user space moves its
            // index meanwhile.
            for _ in 0..posted {
                if !r.queue.peek_into(&mut r.wqe) {
                    break;
                }
                let wqe = &r.wqe;
                next.push_with(|slot| {
                    let n = slot.len().min(wqe.len());
                    slot.get_mut(..n)?.copy_from_slice(wqe.get(..n)?);
                    Some(())
                })?;
                r.queue.advance_consumer();
            }
            if let Some(k) = (*k).as_mut() {
                *k = next.kernel_producer();
            }
            // Same element size (same max_sge): the scratch copy still fits.
            core::mem::swap(&mut r.queue, next);
        }
        // `next` is the old ring now: its offer goes if never mapped, and the
        // caller frees it, outside the spinlock (vfree sleeps).
        Ok(())
    }

    /// `rdma -dd res show srq`: receives posted and not taken yet (its QPs
    /// show none of their own), and the armed limit (0: none).
    pub(crate) fn res_details(&self) -> [(&'static core::ffi::CStr, u64); 2] {
        let r = self.ring.lock();
        [
            (c"posted", r.queue.posted().into()),
            (c"limit", r.limit.into()),
        ]
    }

    pub(crate) fn query(&self, a: &mut b::ib_srq_attr) {
        let r = self.ring.lock();
        a.max_wr = r.queue.capacity();
        a.max_sge = self.max_sge;
        a.srq_limit = r.limit;
    }

    /// Takes (consumes) the next receive WQE for a message, its SGEs to be
    /// checked for local write under the SRQ's PD as bytes reach them:
    /// `None` if the SRQ is empty. A WQE naming more SGEs than the SRQ has
    /// is consumed and fails with the status the QP's receive completes
    /// with. Without `sges` (a WRITE with immediate) the SGEs are not
    /// looked at.
    pub(crate) fn take(&self, sges: bool) -> Option<Result<(u64, Sgl), (u64, u32)>> {
        let mut guard = self.ring.lock();
        let r = &mut *guard;
        if !r.queue.peek_into(&mut r.wqe) {
            return None;
        }
        r.queue.advance_consumer();
        let left = r.queue.posted();
        // Raised once per arming, as rxe, and after the lock is let go (as
        // rxe): a handler may arm the limit again (`modify` takes the lock).
        let fire = r.limit != 0 && left < r.limit;
        if fire {
            r.limit = 0;
        }
        let taken = self.take_locked(sges, r);
        drop(guard);
        if fire {
            self.handle
                .event(b::ib_event_type_IB_EVENT_SRQ_LIMIT_REACHED);
        }
        Some(taken)
    }

    /// `take`'s WQE, copied to `r.wqe`: parsed, its SGEs looked up when
    /// bytes reach them.
    fn take_locked(&self, sges: bool, r: &Ring) -> Result<(u64, Sgl), (u64, u32)> {
        let Some(w) = wqe::RecvWqe::parse(&r.wqe) else {
            return Err((0, b::ib_wc_status_IB_WC_LOC_QP_OP_ERR));
        };
        if !sges {
            return Ok((w.wr_id, Sgl::none(self.pd)));
        }
        if w.num_sge > self.max_sge {
            return Err((w.wr_id, b::ib_wc_status_IB_WC_LOC_LEN_ERR));
        }
        Sgl::receive(self.pd, &r.wqe, wqe::RECV_WQE_SGE_OFFSET, w.num_sge)
            .map(|sgl| (w.wr_id, sgl))
            .map_err(|status| (w.wr_id, crate::sgl::recv_status(status)))
    }

    /// Offers a user SRQ's ring for mmap and sends its mminfo and number
    /// back (`rxe_create_srq_resp`).
    pub(crate) fn respond_user(&self, udata: &Udata<'_>, offsets: &Atomic<u64>) -> Result {
        let uc = udata.ucontext().ok_or(EINVAL)?;
        let mut resp: b::rxe_create_srq_resp = pin_init::zeroed();
        resp.mi = uc.mmaps()?.offer(offsets, self.ring.lock().queue.buf())?;
        resp.srq_num = self.num;
        udata.respond(&resp)
    }

    /// Withdraws the ring's offer if user space never mapped it.
    pub(crate) fn withdraw(&self, udata: Option<&Udata<'_>>) {
        let buf = self.ring.lock().queue.buf().clone();
        queue::withdraw_from(udata, &[&buf]);
    }

    /// Whether a receive is posted.
    pub(crate) fn is_empty(&self) -> bool {
        self.ring.lock().queue.is_empty()
    }

    /// Kernel posting: one receive WR (`num` SGEs, SGE `i` from `sge(i)`),
    /// from any context. EINVAL for user SRQs or too many SGEs, ENOMEM when
    /// the ring is full.
    pub(crate) fn post(&self, wr_id: u64, num: u32, sge: &dyn Fn(u32) -> Option<Sge>) -> Result {
        if num > self.max_sge {
            return Err(EINVAL);
        }
        let mut k = self.kring.lock();
        let q = (*k).as_mut().ok_or(EINVAL)?;
        let list = (0..num).map(|i| sge(i).unwrap_or_default());
        q.push_with(|slot| wqe::write_recv(slot, wr_id, list))
    }
}
