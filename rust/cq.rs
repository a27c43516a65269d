// SPDX-License-Identifier: GPL-2.0

//! Completion queues: a ring of CQEs (`struct ib_uverbs_wc` for user CQs,
//! `struct ib_wc` for kernel ones), completion events and overflow.

use core::mem::size_of;
use core::ptr;

use kernel::ffi::c_int;
use kernel::prelude::*;
use kernel::sync::Arc;

use crate::bindings as b;
use crate::device::{OxeDevice, OxeUcontext};
use crate::irqlock::{new_irq_spinlock, IrqSpinLock};
use crate::params;
use crate::queue::{self, Queue, SharedBuf};

/// A completion as the transport reports it.
#[derive(Clone, Copy)]
pub(crate) struct Cqe {
    pub(crate) wr_id: u64,
    pub(crate) status: u32,
    pub(crate) opcode: u32,
    pub(crate) byte_len: u32,
    /// Immediate data (network order, as carried) or invalidated rkey.
    pub(crate) ex: u32,
    pub(crate) wc_flags: u32,
    pub(crate) qp: *mut b::ib_qp,
    pub(crate) qp_num: u32,
    pub(crate) src_qp: u32,
}

#[repr(C)]
pub(crate) struct OxeCq {
    ib: b::ib_cq,
    state: Option<Pin<KBox<CqState>>>,
}

#[pin_data]
struct CqState {
    #[pin]
    inner: IrqSpinLock<CqInner>,
    user: bool,
}

struct CqInner {
    queue: Queue,
    /// IB_CQ_SOLICITED / IB_CQ_NEXT_COMP armed by req_notify_cq.
    notify: u32,
    /// Overflowed: the CQ is in error and accepts no more CQEs.
    error: bool,
}

impl OxeCq {
    /// # Safety
    ///
    /// `ib` must be a live oxe CQ.
    pub(crate) unsafe fn from_ib<'a>(ib: *mut b::ib_cq) -> &'a OxeCq {
        // SAFETY: `ib` is the first field of a `repr(C)` OxeCq.
        unsafe { &*ib.cast::<OxeCq>() }
    }

    pub(crate) fn ib(&self) -> *mut b::ib_cq {
        ptr::from_ref(&self.ib).cast_mut()
    }

    /// Posts one completion. EBUSY when the CQ is full: the CQ then goes to
    /// error and its owner gets IB_EVENT_CQ_ERR.
    pub(crate) fn post(&self, cqe: &Cqe, solicited: bool) -> Result {
        let Some(state) = self.state.as_ref() else {
            return Err(EINVAL);
        };
        let mut inner = state.inner.lock();
        if inner.error {
            return Err(EBUSY);
        }
        let res = if state.user {
            let mut wc: b::ib_uverbs_wc = pin_init::zeroed();
            wc.wr_id = cqe.wr_id;
            wc.status = cqe.status;
            wc.opcode = cqe.opcode;
            wc.byte_len = cqe.byte_len;
            // SAFETY: writing a plain union member.
            unsafe { *wc.ex.imm_data.as_mut() = cqe.ex };
            wc.qp_num = cqe.qp_num;
            wc.src_qp = cqe.src_qp;
            wc.wc_flags = cqe.wc_flags;
            wc.port_num = 1;
            inner.queue.produce(as_bytes(&wc))
        } else {
            let mut wc: b::ib_wc = pin_init::zeroed();
            // SAFETY: writing plain union members.
            unsafe {
                *wc.__bindgen_anon_1.wr_id.as_mut() = cqe.wr_id;
                *wc.ex.imm_data.as_mut() = cqe.ex;
            }
            wc.status = cqe.status;
            wc.opcode = cqe.opcode;
            wc.byte_len = cqe.byte_len;
            wc.qp = cqe.qp;
            wc.src_qp = cqe.src_qp;
            wc.wc_flags = cqe.wc_flags as c_int;
            wc.port_num = 1;
            inner.queue.produce(as_bytes(&wc))
        };
        if res.is_err() {
            inner.error = true;
            drop(inner);
            // SAFETY: our live CQ.
            unsafe { b::oxe_cq_event(self.ib(), b::ib_event_type_IB_EVENT_CQ_ERR) };
            return Err(EBUSY);
        }
        let fire = inner.notify & b::ib_cq_notify_flags_IB_CQ_NEXT_COMP != 0
            || (solicited && inner.notify & b::ib_cq_notify_flags_IB_CQ_SOLICITED != 0);
        if fire {
            inner.notify = 0;
        }
        drop(inner);
        if fire {
            // SAFETY: our live CQ; the handler takes its own locks.
            unsafe { b::oxe_cq_comp_handler(self.ib()) };
        }
        Ok(())
    }
}

fn as_bytes<T>(v: &T) -> &[u8] {
    // SAFETY: any `T` is readable as its bytes; used for plain C structs.
    unsafe { core::slice::from_raw_parts(ptr::from_ref(v).cast(), size_of::<T>()) }
}

/// # Safety
///
/// Called by the RDMA core with a zeroed CQ of `size_ib_cq` bytes.
pub(crate) unsafe extern "C" fn create_cq(
    ib: *mut b::ib_cq,
    attr: *const b::ib_cq_init_attr,
    attrs: *mut b::uverbs_attr_bundle,
) -> c_int {
    // SAFETY: per the function's contract.
    match unsafe { create(ib, attr, attrs) } {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// As for [`create_cq`].
unsafe fn create(
    ib: *mut b::ib_cq,
    attr: *const b::ib_cq_init_attr,
    attrs: *mut b::uverbs_attr_bundle,
) -> Result {
    let cq = ib.cast::<OxeCq>();
    // SAFETY: fresh zeroed memory of OxeCq's size: write without dropping.
    unsafe { ptr::addr_of_mut!((*cq).state).write(None) };
    // SAFETY: the core passes valid attributes; `attrs` is NULL for kernel CQs.
    let (cqe, flags, udata) = unsafe {
        let udata = b::oxe_attrs_udata(attrs);
        ((*attr).cqe, (*attr).flags, udata)
    };
    if flags != 0 {
        return Err(crate::eopnotsupp());
    }
    if !(1..=params::MAX_CQE).contains(&cqe) {
        return Err(EINVAL);
    }
    let user = !udata.is_null();
    // SAFETY: `udata` is the command's udata when non-NULL.
    if user && unsafe { (*udata).outlen } < size_of::<b::rxe_create_cq_resp>() {
        return Err(EINVAL);
    }
    // rxe's `union rxe_cqe`: room for either view.
    let queue = Queue::new(cqe, size_of::<b::ib_wc>().max(size_of::<b::ib_uverbs_wc>()))?;
    let buf = queue.buf().clone();
    // SAFETY: the core passes a live CQ.
    unsafe { (*ib).cqe = queue.capacity() as c_int };
    let state = KBox::pin_init(
        try_pin_init!(CqState {
            inner <- new_irq_spinlock!(CqInner { queue, notify: 0, error: false }),
            user,
        }? Error),
        GFP_KERNEL,
    )?;
    // SAFETY: nobody else sees the CQ yet.
    unsafe { (*cq).state = Some(state) };
    if user {
        // Offered last: a create that fails after the offer withdraws it.
        // SAFETY: a user CQ of the command's ucontext.
        if let Err(e) = unsafe { respond_user(ib, udata, &buf) } {
            // SAFETY: the core calls no destroy when create fails.
            unsafe { destroy_cq(ib, udata) };
            return Err(e);
        }
    }
    Ok(())
}

/// Offers a user CQ's ring for mmap and sends its mminfo back.
///
/// # Safety
///
/// `ib` is a CQ being created with the user command's `udata`.
unsafe fn respond_user(ib: *mut b::ib_cq, udata: *mut b::ib_udata, buf: &Arc<SharedBuf>) -> Result {
    // SAFETY: user CQs come with a live ucontext and device.
    let (uc, dev) = unsafe {
        (
            OxeUcontext::from_udata(udata).ok_or(EINVAL)?,
            OxeDevice::from_ib((*ib).device),
        )
    };
    let resp = b::rxe_create_cq_resp {
        mi: uc.mmaps()?.offer(dev.mmap_offsets(), buf)?,
    };
    queue::respond(udata, &resp)
}

/// # Safety
///
/// Called by the RDMA core once no QP uses the CQ (or by a failed create).
pub(crate) unsafe extern "C" fn destroy_cq(ib: *mut b::ib_cq, udata: *mut b::ib_udata) -> c_int {
    // SAFETY: our CQ; the core frees the memory after this returns.
    let Some(state) = (unsafe { (*ib.cast::<OxeCq>()).state.take() }) else {
        return 0;
    };
    // An offer user space never took goes now, not when the file is closed.
    let buf = state.inner.lock().queue.buf().clone();
    // SAFETY: `udata` is the destroy command's (NULL for kernel CQs).
    unsafe { queue::withdraw(udata, &[&buf]) };
    drop(buf);
    // Frees the ring (vfree sleeps): outside the CQ's spinlock.
    drop(state);
    0
}

/// # Safety
///
/// Called by the RDMA core for a live CQ.
pub(crate) unsafe extern "C" fn req_notify_cq(
    ib: *mut b::ib_cq,
    flags: b::ib_cq_notify_flags,
) -> c_int {
    // SAFETY: our live CQ.
    let cq = unsafe { OxeCq::from_ib(ib) };
    let Some(state) = cq.state.as_ref() else {
        return EINVAL.to_errno();
    };
    let mut inner = state.inner.lock();
    let want = flags & b::ib_cq_notify_flags_IB_CQ_SOLICITED_MASK;
    if inner.notify != b::ib_cq_notify_flags_IB_CQ_NEXT_COMP {
        inner.notify = want;
    }
    if flags & b::ib_cq_notify_flags_IB_CQ_REPORT_MISSED_EVENTS != 0
        && inner.queue.produced_pending() > 0
    {
        return 1;
    }
    0
}

/// `ibv_resize_cq`: a new ring holding what is pending, mapped anew by librxe.
///
/// # Safety
///
/// Called by the RDMA core for a live user CQ; librxe holds its CQ lock, so
/// user space does not poll meanwhile.
pub(crate) unsafe extern "C" fn resize_user_cq(
    ib: *mut b::ib_cq,
    cqe: kernel::ffi::c_uint,
    udata: *mut b::ib_udata,
) -> c_int {
    // SAFETY: per the function's contract.
    match unsafe { resize(ib, cqe, udata) } {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// As for [`resize_user_cq`].
unsafe fn resize(ib: *mut b::ib_cq, cqe: u32, udata: *mut b::ib_udata) -> Result {
    // SAFETY: our live CQ.
    let cq = unsafe { OxeCq::from_ib(ib) };
    let state = cq.state.as_ref().ok_or(EINVAL)?;
    if !state.user || udata.is_null() || !(1..=params::MAX_CQE).contains(&cqe) {
        return Err(EINVAL);
    }
    // SAFETY: the command's udata.
    if unsafe { (*udata).outlen } < size_of::<b::rxe_resize_cq_resp>() {
        return Err(EINVAL);
    }
    let mut next = Queue::new(cqe, size_of::<b::ib_wc>().max(size_of::<b::ib_uverbs_wc>()))?;
    // SAFETY: user CQs come with a live ucontext and device.
    let (uc, dev) = unsafe {
        (
            OxeUcontext::from_udata(udata).ok_or(EINVAL)?,
            OxeDevice::from_ib((*ib).device),
        )
    };
    let mmaps = uc.mmaps()?;
    let mut slot = KVec::new();
    slot.resize(next.elem_size(), 0u8, GFP_KERNEL)?;
    // Offered before the CQ's spinlock is taken: offering sleeps.
    let resp = b::rxe_resize_cq_resp {
        mi: mmaps.offer(dev.mmap_offsets(), next.buf())?,
    };
    let mut inner = state.inner.lock();
    let moved = refill(&mut inner.queue, &mut next, &mut slot);
    if moved.is_ok() {
        core::mem::swap(&mut inner.queue, &mut next);
        // SAFETY: our CQ, under its lock.
        unsafe { (*ib).cqe = inner.queue.capacity() as c_int };
    }
    drop(inner);
    // `next` is now the ring the CQ does not use: the old one, or the new one
    // if the resize failed. Its offer goes if user space never mapped it, and
    // the ring is freed (vfree sleeps: only after the spinlock is released).
    mmaps.withdraw(next.buf());
    drop(next);
    moved?;
    queue::respond(udata, &resp)
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

/// Kernel consumers' poll.
///
/// # Safety
///
/// Called by the RDMA core for a live kernel CQ with room for `n` entries.
pub(crate) unsafe extern "C" fn poll_cq(ib: *mut b::ib_cq, n: c_int, wc: *mut b::ib_wc) -> c_int {
    // SAFETY: our live CQ.
    let cq = unsafe { OxeCq::from_ib(ib) };
    let Some(state) = cq.state.as_ref() else {
        return EINVAL.to_errno();
    };
    let mut inner = state.inner.lock();
    let mut got = 0;
    while got < n {
        // SAFETY: `wc` has room for `n` entries.
        let out = unsafe {
            core::slice::from_raw_parts_mut(
                wc.add(got as usize).cast::<u8>(),
                size_of::<b::ib_wc>(),
            )
        };
        if !inner.queue.pop_into(out) {
            break;
        }
        got += 1;
    }
    got
}
