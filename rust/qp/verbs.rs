// SPDX-License-Identifier: GPL-2.0

//! The QP verbs: creation with rxe's shared SQ and RQ rings, the state
//! machine (modify/query), the post_send doorbell, kernel posting and
//! destruction.

use core::mem::size_of;
use core::ptr;

use kernel::ffi::c_int;
use kernel::prelude::*;
use kernel::sync::atomic::{ordering, Atomic};
use kernel::sync::Arc;
use kernel::workqueue::{DelayedWork, Work};

use super::{
    Attrs, Inbox, Qp, RecvSide, SendSide, AH_SIZE, INBOX, STATE_ERR, STATE_RESET, STATE_RTS,
};
use crate::bindings as b;
use crate::cq::OxeCq;
use crate::device::{OxeDevice, OxeUcontext};
use crate::fifo::Fifo;
use crate::irqlock::new_irq_spinlock;
use crate::net::Path;
use crate::params;
use crate::pd;
use crate::queue::{self, Queue, SharedBuf};
use crate::wqe::{self, Sge};

#[repr(C)]
pub(crate) struct OxeQp {
    ib: b::ib_qp,
    qp: Option<Arc<Qp>>,
}

impl OxeQp {
    /// # Safety
    ///
    /// `ib` must be a live oxe QP.
    unsafe fn get<'a>(ib: *mut b::ib_qp) -> Option<&'a Arc<Qp>> {
        // SAFETY: `ib` is the first field of a `repr(C)` OxeQp.
        unsafe { (*ib.cast::<OxeQp>()).qp.as_ref() }
    }
}

fn send_elem(max_sge: u32, max_inline: u32) -> usize {
    wqe::SEND_WQE_SGE_OFFSET + (max_sge as usize * wqe::SGE_SIZE).max(max_inline as usize)
}

fn recv_elem(max_sge: u32) -> usize {
    wqe::RECV_WQE_SGE_OFFSET + max_sge as usize * wqe::SGE_SIZE
}

/// # Safety
///
/// Called by the RDMA core with a zeroed QP of `size_ib_qp` bytes.
pub(crate) unsafe extern "C" fn create_qp(
    ib: *mut b::ib_qp,
    init: *mut b::ib_qp_init_attr,
    udata: *mut b::ib_udata,
) -> c_int {
    // SAFETY: per the function's contract.
    match unsafe { create(ib, init, udata) } {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// As for [`create_qp`].
unsafe fn create(
    ib: *mut b::ib_qp,
    init: *mut b::ib_qp_init_attr,
    udata: *mut b::ib_udata,
) -> Result {
    let oq = ib.cast::<OxeQp>();
    // SAFETY: fresh zeroed memory of OxeQp's size: write without dropping.
    unsafe { ptr::addr_of_mut!((*oq).qp).write(None) };
    // SAFETY: the core passes valid init attributes.
    let a = unsafe { &mut *init };
    if a.qp_type != b::ib_qp_type_IB_QPT_RC {
        return Err(crate::eopnotsupp());
    }
    if !a.srq.is_null() || a.create_flags != 0 {
        return Err(crate::eopnotsupp());
    }
    let user = !udata.is_null();
    if user {
        // SAFETY: the command's udata.
        let (inlen, outlen) = unsafe { ((*udata).inlen, (*udata).outlen) };
        // librxe sends no request data; the response carries both mminfos.
        if inlen != 0 || outlen < size_of::<b::rxe_create_qp_resp>() {
            return Err(EINVAL);
        }
    }
    let c = &mut a.cap;
    if c.max_send_wr == 0
        || c.max_send_wr > params::MAX_QP_WR
        || c.max_recv_wr > params::MAX_QP_WR
        || c.max_send_sge > params::MAX_SGE
        || c.max_recv_sge > params::MAX_SGE
        || c.max_inline_data > params::MAX_INLINE_DATA
        || a.send_cq.is_null()
        || a.recv_cq.is_null()
    {
        return Err(EINVAL);
    }
    let sq = Queue::new(c.max_send_wr, send_elem(c.max_send_sge, c.max_inline_data))?;
    let rq = Queue::new(c.max_recv_wr.max(1), recv_elem(c.max_recv_sge.max(1)))?;
    let (sq_buf, rq_buf) = (sq.buf().clone(), rq.buf().clone());
    // What the rings can hold, reported back like rxe does.
    let send_room = (sq.elem_size() - wqe::SEND_WQE_SGE_OFFSET) as u32;
    c.max_send_wr = sq.capacity();
    c.max_send_sge = (send_room / wqe::SGE_SIZE as u32).min(params::MAX_SGE);
    c.max_inline_data = send_room.min(params::MAX_INLINE_DATA);
    c.max_recv_wr = rq.capacity();
    c.max_recv_sge =
        (((rq.elem_size() - wqe::RECV_WQE_SGE_OFFSET) / wqe::SGE_SIZE) as u32).min(params::MAX_SGE);

    // SAFETY: the core filled in device and PD.
    let (dev, pd) = unsafe { (OxeDevice::from_ib((*ib).device), (*ib).pd) };
    // SAFETY: the QP's PD, live, of this device.
    let pd = unsafe { pd::id(pd) };
    let state = dev.state().ok_or(ENODEV)?;
    let (sq_elem, rq_elem) = (sq.elem_size(), rq.elem_size());
    let (ksq, krq) = if user {
        (None, None)
    } else {
        (Some(sq.kernel_producer()), Some(rq.kernel_producer()))
    };
    let mut sq_wqe = KVec::new();
    sq_wqe.resize(sq_elem, 0, GFP_KERNEL)?;
    let mut rq_wqe = KVec::new();
    rq_wqe.resize(rq_elem, 0, GFP_KERNEL)?;
    // Each WQE in flight takes at least one PSN of the window.
    let inflight = Fifo::new((sq.capacity().min(params::MAX_UNACKED_PSNS) + 1) as usize)?;
    let inbox = Inbox {
        requests: Fifo::new(INBOX)?,
        responses: Fifo::new(INBOX)?,
    };

    let max_send_sge = c.max_send_sge;
    let max_inline = c.max_inline_data;
    let max_recv_sge = c.max_recv_sge;
    let sq_sig_all = a.sq_sig_type == b::ib_sig_type_IB_SIGNAL_ALL_WR;
    // SAFETY: the core checked the CQs belong to this device.
    let (scq, rcq) = unsafe {
        (
            ptr::from_ref(OxeCq::from_ib(a.send_cq)),
            ptr::from_ref(OxeCq::from_ib(a.recv_cq)),
        )
    };
    let qp = state.qps.insert(|qpn| {
        let attrs = Attrs {
            state: STATE_RESET,
            path_mtu: 256,
            mtu_enum: b::ib_mtu_IB_MTU_256,
            dest_qpn: 0,
            access: 0,
            max_rd_atomic: 0,
            max_dest_rd_atomic: 0,
            min_rnr_timer: 0,
            timeout: 0,
            retry_cnt: 0,
            rnr_retry: 0,
            sq_psn: 0,
            rq_psn: 0,
            pkey_index: 0,
            port: 1,
            qkey: 0,
            ah: [0; AH_SIZE],
        };
        Arc::pin_init(
            try_pin_init!(Qp {
                qpn,
                ib,
                dev: ptr::from_ref(dev),
                path: Path::Loopback,
                pd,
                scq,
                rcq,
                sq_sig_all,
                user,
                max_send_sge,
                max_inline,
                max_recv_sge,
                attr <- new_irq_spinlock!(attrs),
                sq <- kernel::new_mutex!(SendSide {
                    queue: sq,
                    psn: 0,
                    una: 0,
                    wqe: sq_wqe,
                    inflight,
                    next: 0,
                    rnr_tries: 0,
                    retries: 0,
                    rnr_wait: false,
                    timer_una: None,
                }),
                rq <- kernel::new_mutex!(RecvSide {
                    queue: rq,
                    epsn: 0,
                    wqe: rq_wqe,
                    progress: None,
                    read: None,
                    nak_sent: false,
                    last_atomic: None,
                    established: false,
                }),
                ksq <- new_irq_spinlock!(ksq),
                krq <- new_irq_spinlock!(krq),
                inbox <- new_irq_spinlock!(inbox),
                send_work <- kernel::new_work!("oxe_qp_send"),
                recv_work <- kernel::new_work!("oxe_qp_recv"),
                retry_timer <- kernel::new_delayed_work!("oxe_qp_retry"),
                rnr_timer <- kernel::new_delayed_work!("oxe_qp_rnr"),
                dead: Atomic::new(0),
            }? Error),
            GFP_KERNEL,
        )
    })?;
    let qpn = qp.qpn;
    // SAFETY: nobody else sees the QP yet.
    unsafe {
        (*ib).qp_num = qpn;
        (*oq).qp = Some(qp);
    }
    if user {
        // Offered last: a create that fails after the offers withdraws them.
        // SAFETY: a user QP of the command's ucontext.
        if let Err(e) = unsafe { respond_user(dev, udata, &rq_buf, &sq_buf) } {
            // SAFETY: the core calls no destroy when create fails.
            unsafe { teardown(ib, udata) };
            return Err(e);
        }
    }
    Ok(())
}

/// Offers a user QP's rings for mmap and sends their mminfos back.
///
/// # Safety
///
/// `udata` is the driver udata of the user command creating the QP.
unsafe fn respond_user(
    dev: &OxeDevice,
    udata: *mut b::ib_udata,
    rq: &Arc<SharedBuf>,
    sq: &Arc<SharedBuf>,
) -> Result {
    // SAFETY: user QPs come with a live ucontext.
    let uc = unsafe { OxeUcontext::from_udata(udata) }.ok_or(EINVAL)?;
    let mmaps = uc.mmaps()?;
    let mut resp: b::rxe_create_qp_resp = pin_init::zeroed();
    resp.rq_mi = mmaps.offer(dev.mmap_offsets(), rq)?;
    resp.sq_mi = mmaps.offer(dev.mmap_offsets(), sq)?;
    queue::respond(udata, &resp)
}

/// Unpublishes the QP, waits for its work, withdraws the offers of its rings
/// that user space never took and drops it.
///
/// # Safety
///
/// `ib` must be an oxe QP that the core is destroying (or failed to create);
/// `udata` the command's (NULL for kernel QPs).
unsafe fn teardown(ib: *mut b::ib_qp, udata: *mut b::ib_udata) {
    // SAFETY: per the function's contract.
    let Some(qp) = (unsafe { (*ib.cast::<OxeQp>()).qp.take() }) else {
        return;
    };
    qp.dead.store(1, ordering::Release);
    if let Some(state) = qp.dev().state() {
        state.qps.remove(qp.qpn);
    }
    // Its tasks and timers may be running or queued: wait for them, so that
    // they never touch the ib_qp or the CQs after they are gone. A run that
    // began before the QP was marked dead may requeue itself or arm a timer
    // after the flush passed it: flush again until all were idle. Runs that
    // see the QP dead queue nothing, so this ends. A timer is flushed by
    // running it now (cancelling it would leak the reference it holds).
    loop {
        // SAFETY: the work items live in `qp`, which we hold; a delayed
        // work's `work` is the first member of its `struct delayed_work`.
        let busy = unsafe {
            b::flush_delayed_work(DelayedWork::raw_as_work(&raw const qp.retry_timer).cast())
                | b::flush_delayed_work(DelayedWork::raw_as_work(&raw const qp.rnr_timer).cast())
                | b::flush_work(Work::raw_get(&raw const qp.send_work))
                | b::flush_work(Work::raw_get(&raw const qp.recv_work))
        };
        if !busy {
            break;
        }
    }
    // Packets still queued, or delivered by a peer that looked the QP up
    // before it was unpublished, go with the QP.
    let sq = qp.sq.lock().queue.buf().clone();
    let rq = qp.rq.lock().queue.buf().clone();
    // The rings themselves go with the last reference to the QP.
    // SAFETY: per the function's contract.
    unsafe { queue::withdraw(udata, &[&sq, &rq]) };
}

// `teardown` flushes a delayed work through the pointer to its `work`.
const _: () = assert!(core::mem::offset_of!(b::delayed_work, work) == 0);

/// # Safety
///
/// Called by the RDMA core for a live QP.
pub(crate) unsafe extern "C" fn destroy_qp(ib: *mut b::ib_qp, udata: *mut b::ib_udata) -> c_int {
    // SAFETY: per the function's contract.
    unsafe { teardown(ib, udata) };
    0
}

fn mtu_bytes(mtu: u32) -> u32 {
    128u32 << mtu.clamp(1, 5)
}

/// # Safety
///
/// Called by the RDMA core for a live QP with valid attributes.
pub(crate) unsafe extern "C" fn modify_qp(
    ib: *mut b::ib_qp,
    attr: *mut b::ib_qp_attr,
    mask: c_int,
    udata: *mut b::ib_udata,
) -> c_int {
    // SAFETY: per the function's contract.
    match unsafe { modify(ib, &*attr, mask as u32, udata) } {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// As for [`modify_qp`].
unsafe fn modify(
    ib: *mut b::ib_qp,
    a: &b::ib_qp_attr,
    mask: u32,
    udata: *mut b::ib_udata,
) -> Result {
    // SAFETY: the command's udata (NULL for kernel callers).
    kernel::error::to_result(unsafe { b::oxe_udata_in_empty(udata) })?;
    // SAFETY: live QP.
    let qp = unsafe { OxeQp::get(ib) }.ok_or(EINVAL)?;
    // Validated and applied under the SQ and RQ locks, which every other
    // transition (the QP's own failures, under the RQ lock) takes: a
    // transition to ERR meanwhile is seen, not overwritten.
    // Lock order: SQ, RQ, then the attribute spinlock.
    let mut sq = qp.sq.lock();
    let mut rq = qp.rq.lock();
    let cur = qp.attrs();
    let cur_state = if mask & b::ib_qp_attr_mask_IB_QP_CUR_STATE != 0 {
        a.cur_qp_state
    } else {
        cur.state
    };
    let new_state = if mask & b::ib_qp_attr_mask_IB_QP_STATE != 0 {
        a.qp_state
    } else {
        cur_state
    };
    // SAFETY: a pure check of the core's transition table.
    if !unsafe { b::ib_modify_qp_is_ok(cur_state, new_state, b::ib_qp_type_IB_QPT_RC, mask) } {
        return Err(EINVAL);
    }
    if mask & b::ib_qp_attr_mask_IB_QP_PORT != 0 && a.port_num != 1 {
        return Err(EINVAL);
    }
    if mask & b::ib_qp_attr_mask_IB_QP_PKEY_INDEX != 0 && a.pkey_index != 0 {
        return Err(EINVAL);
    }
    if mask & b::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC != 0
        && u32::from(a.max_rd_atomic) > params::MAX_QP_RD_ATOM
    {
        return Err(EINVAL);
    }
    if mask & b::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC != 0
        && u32::from(a.max_dest_rd_atomic) > params::MAX_QP_RD_ATOM
    {
        return Err(EINVAL);
    }
    if mask & b::ib_qp_attr_mask_IB_QP_PATH_MTU != 0 && !(1..=5).contains(&a.path_mtu) {
        return Err(EINVAL);
    }

    {
        let mut s = qp.attr.lock();
        if mask & b::ib_qp_attr_mask_IB_QP_ACCESS_FLAGS != 0 {
            s.access = a.qp_access_flags as u32;
        }
        if mask & b::ib_qp_attr_mask_IB_QP_PKEY_INDEX != 0 {
            s.pkey_index = a.pkey_index;
        }
        if mask & b::ib_qp_attr_mask_IB_QP_PORT != 0 {
            s.port = a.port_num as u8;
        }
        if mask & b::ib_qp_attr_mask_IB_QP_QKEY != 0 {
            s.qkey = a.qkey;
        }
        if mask & b::ib_qp_attr_mask_IB_QP_AV != 0 {
            // SAFETY: plain bytes of a C struct.
            unsafe {
                ptr::copy_nonoverlapping(
                    ptr::from_ref(&a.ah_attr).cast::<u8>(),
                    s.ah.as_mut_ptr(),
                    AH_SIZE,
                )
            };
        }
        if mask & b::ib_qp_attr_mask_IB_QP_PATH_MTU != 0 {
            s.mtu_enum = a.path_mtu;
            s.path_mtu = mtu_bytes(a.path_mtu);
        }
        if mask & b::ib_qp_attr_mask_IB_QP_TIMEOUT != 0 {
            s.timeout = a.timeout;
        }
        if mask & b::ib_qp_attr_mask_IB_QP_RETRY_CNT != 0 {
            s.retry_cnt = a.retry_cnt;
        }
        if mask & b::ib_qp_attr_mask_IB_QP_RNR_RETRY != 0 {
            s.rnr_retry = a.rnr_retry;
        }
        if mask & b::ib_qp_attr_mask_IB_QP_RQ_PSN != 0 {
            s.rq_psn = a.rq_psn & crate::packet::PSN_MASK;
            rq.epsn = s.rq_psn;
        }
        if mask & b::ib_qp_attr_mask_IB_QP_MIN_RNR_TIMER != 0 {
            s.min_rnr_timer = a.min_rnr_timer;
        }
        if mask & b::ib_qp_attr_mask_IB_QP_SQ_PSN != 0 {
            s.sq_psn = a.sq_psn & crate::packet::PSN_MASK;
            sq.psn = s.sq_psn;
            sq.una = s.sq_psn;
        }
        if mask & b::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC != 0 {
            s.max_rd_atomic = a.max_rd_atomic;
        }
        if mask & b::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC != 0 {
            s.max_dest_rd_atomic = a.max_dest_rd_atomic;
        }
        if mask & b::ib_qp_attr_mask_IB_QP_DEST_QPN != 0 {
            s.dest_qpn = a.dest_qp_num;
        }
        s.state = new_state;
    }
    match new_state {
        STATE_ERR => {
            qp.flush_sq(&mut sq);
            // Also schedules the send task, which flushes what is left.
            qp.set_error(&mut rq);
        }
        STATE_RESET => qp.reset(&mut sq, &mut rq),
        // WQEs posted while the QP drained (SQD) go out now.
        STATE_RTS => qp.schedule(),
        _ => {}
    }
    Ok(())
}

/// # Safety
///
/// Called by the RDMA core for a live QP with writable outputs.
pub(crate) unsafe extern "C" fn query_qp(
    ib: *mut b::ib_qp,
    attr: *mut b::ib_qp_attr,
    _mask: c_int,
    init: *mut b::ib_qp_init_attr,
) -> c_int {
    // SAFETY: per the function's contract.
    let Some(qp) = (unsafe { OxeQp::get(ib) }) else {
        return EINVAL.to_errno();
    };
    let s = qp.attrs();
    // SAFETY: per the function's contract.
    let (a, i) = unsafe { (&mut *attr, &mut *init) };
    *a = pin_init::zeroed();
    a.qp_state = s.state;
    a.cur_qp_state = s.state;
    a.path_mtu = s.mtu_enum;
    a.path_mig_state = b::ib_mig_state_IB_MIG_MIGRATED;
    a.qkey = s.qkey;
    a.rq_psn = s.rq_psn;
    a.sq_psn = s.sq_psn;
    a.dest_qp_num = s.dest_qpn;
    a.qp_access_flags = s.access as c_int;
    // SAFETY: bytes copied from a valid rdma_ah_attr (or zero).
    unsafe {
        ptr::copy_nonoverlapping(
            s.ah.as_ptr(),
            ptr::from_mut(&mut a.ah_attr).cast::<u8>(),
            AH_SIZE,
        )
    };
    a.pkey_index = s.pkey_index;
    a.port_num = s.port.into();
    a.max_rd_atomic = s.max_rd_atomic;
    a.max_dest_rd_atomic = s.max_dest_rd_atomic;
    a.min_rnr_timer = s.min_rnr_timer;
    a.timeout = s.timeout;
    a.retry_cnt = s.retry_cnt;
    a.rnr_retry = s.rnr_retry;
    {
        let sq = qp.sq.lock();
        let rq = qp.rq.lock();
        a.cap.max_send_wr = sq.queue.capacity();
        a.cap.max_recv_wr = rq.queue.capacity();
    }
    a.cap.max_send_sge = qp.max_send_sge;
    a.cap.max_recv_sge = qp.max_recv_sge;
    a.cap.max_inline_data = qp.max_inline;
    i.cap.max_send_wr = a.cap.max_send_wr;
    i.cap.max_recv_wr = a.cap.max_recv_wr;
    i.cap.max_send_sge = a.cap.max_send_sge;
    i.cap.max_recv_sge = a.cap.max_recv_sge;
    i.cap.max_inline_data = a.cap.max_inline_data;
    i.qp_type = b::ib_qp_type_IB_QPT_RC;
    i.sq_sig_type = if qp.sq_sig_all {
        b::ib_sig_type_IB_SIGNAL_ALL_WR
    } else {
        b::ib_sig_type_IB_SIGNAL_REQ_WR
    };
    0
}

/// The doorbell of user QPs (`wr` is NULL: WQEs are in the shared ring), and
/// kernel posting.
///
/// # Safety
///
/// Called by the RDMA core for a live QP.
pub(crate) unsafe extern "C" fn post_send(
    ib: *mut b::ib_qp,
    wr: *const b::ib_send_wr,
    bad: *mut *const b::ib_send_wr,
) -> c_int {
    // SAFETY: per the function's contract.
    let Some(qp) = (unsafe { OxeQp::get(ib) }) else {
        return EINVAL.to_errno();
    };
    let state = qp.attrs().state;
    if state < STATE_RTS && state != STATE_ERR {
        if !bad.is_null() {
            // SAFETY: the caller's out pointer.
            unsafe { *bad = wr };
        }
        return EINVAL.to_errno();
    }
    let mut cur = wr;
    if !cur.is_null() {
        let mut ksq = qp.ksq.lock();
        let Some(sq) = (*ksq).as_mut() else {
            return EINVAL.to_errno();
        };
        while !cur.is_null() {
            // SAFETY: a kernel WR chain.
            let w = unsafe { &*cur };
            if let Err(e) = post_one_send(qp, sq, w) {
                if !bad.is_null() {
                    // SAFETY: the caller's out pointer.
                    unsafe { *bad = cur };
                }
                drop(ksq);
                qp.schedule();
                return e.to_errno();
            }
            cur = w.next;
        }
    }
    qp.schedule();
    0
}

/// The SGEs of a kernel WR.
///
/// # Safety
///
/// `list` points to `n` SGEs.
unsafe fn sges(list: *const b::ib_sge, n: u32) -> impl ExactSizeIterator<Item = Sge> + Clone {
    (0..n as usize).map(move |i| {
        // SAFETY: `i < n`, per the function's contract.
        let s = unsafe { &*list.add(i) };
        Sge {
            addr: s.addr,
            length: s.length,
            lkey: s.lkey,
        }
    })
}

/// Writes one kernel send WR into the SQ ring, in librxe's WQE layout, so
/// the requester treats kernel and user QPs alike. Called in any context:
/// nothing here allocates or sleeps.
fn post_one_send(qp: &Qp, sq: &mut Queue, w: &b::ib_send_wr) -> Result {
    let n = w.num_sge as u32;
    if n > qp.max_send_sge {
        return Err(EINVAL);
    }
    // SAFETY: a kernel WR's `sg_list` has `num_sge` entries.
    let list = unsafe { sges(w.sg_list, n) };
    let length = list.clone().fold(0u32, |a, s| a.wrapping_add(s.length));
    let opcode = w.opcode;
    let mut x = wqe::SendWqe {
        // SAFETY: plain union read of the WR id.
        wr_id: unsafe { *w.__bindgen_anon_1.wr_id.as_ref() },
        opcode,
        send_flags: w.send_flags as u32,
        // SAFETY: plain union read (imm_data and invalidate_rkey alias).
        ex: unsafe { *w.ex.imm_data.as_ref() },
        length,
        num_sge: n,
        ..Default::default()
    };
    match opcode {
        wqe::wr::RDMA_WRITE | wqe::wr::RDMA_WRITE_WITH_IMM | wqe::wr::RDMA_READ => {
            // SAFETY: `w` is embedded in an ib_rdma_wr for these opcodes.
            let r = unsafe { &*ptr::from_ref(w).cast::<b::ib_rdma_wr>() };
            x.remote_addr = r.remote_addr;
            x.rkey = r.rkey;
        }
        wqe::wr::ATOMIC_CMP_AND_SWP | wqe::wr::ATOMIC_FETCH_AND_ADD => {
            // SAFETY: `w` is embedded in an ib_atomic_wr for these opcodes.
            let r = unsafe { &*ptr::from_ref(w).cast::<b::ib_atomic_wr>() };
            x.remote_addr = r.remote_addr;
            x.rkey = r.rkey;
            x.compare_add = r.compare_add;
            x.swap = r.swap;
        }
        wqe::wr::REG_MR => {
            // SAFETY: `w` is embedded in an ib_reg_wr for this opcode.
            let r = unsafe { &*ptr::from_ref(w).cast::<b::ib_reg_wr>() };
            if r.mr.is_null() {
                return Err(EINVAL);
            }
            // The MR is named by its key, not by pointer: the requester looks
            // it up, so a WR that outlives its MR finds nothing.
            // SAFETY: the caller's MR, live while the WR is being posted.
            x.mr_key = unsafe { (*r.mr).lkey };
            x.rkey = r.key;
            x.access = r.access as u32;
        }
        _ => {}
    }
    if x.send_flags & wqe::flags::INLINE == 0 {
        return sq.push_with(|slot| wqe::write_send(slot, &x, list));
    }
    // Inline: the bytes travel in the WQE, copied now from the SGEs (kernel
    // virtual addresses: oxe uses virtual DMA).
    if length > qp.max_inline {
        return Err(EINVAL);
    }
    x.num_sge = 0;
    sq.push_with(|slot| {
        wqe::write_send(slot, &x, core::iter::empty())?;
        let mut off = wqe::SEND_WQE_SGE_OFFSET;
        for s in list {
            let len = s.length as usize;
            let dst = slot.get_mut(off..off + len)?;
            // A kernel client's inline SGE names `length` readable bytes at
            // a kernel virtual address (oxe uses virtual DMA).
            // SAFETY: as just said; the bytes are only read, here.
            let src = unsafe { core::slice::from_raw_parts(s.addr as usize as *const u8, len) };
            dst.copy_from_slice(src);
            off += len;
        }
        Some(())
    })
}

/// Kernel receive posting (user QPs write their RQ ring directly).
///
/// # Safety
///
/// Called by the RDMA core for a live kernel QP.
pub(crate) unsafe extern "C" fn post_recv(
    ib: *mut b::ib_qp,
    wr: *const b::ib_recv_wr,
    bad: *mut *const b::ib_recv_wr,
) -> c_int {
    // SAFETY: per the function's contract.
    let Some(qp) = (unsafe { OxeQp::get(ib) }) else {
        return EINVAL.to_errno();
    };
    let mut krq = qp.krq.lock();
    let Some(rq) = (*krq).as_mut() else {
        return EINVAL.to_errno();
    };
    let mut cur = wr;
    while !cur.is_null() {
        // SAFETY: a kernel WR chain.
        let w = unsafe { &*cur };
        let n = w.num_sge as u32;
        let res = if n > qp.max_recv_sge {
            Err(EINVAL)
        } else {
            // SAFETY: a kernel WR's `sg_list` has `num_sge` entries.
            let list = unsafe { sges(w.sg_list, n) };
            // SAFETY: plain union read of the WR id.
            let wr_id = unsafe { *w.__bindgen_anon_1.wr_id.as_ref() };
            rq.push_with(|slot| wqe::write_recv(slot, wr_id, list))
        };
        if let Err(e) = res {
            if !bad.is_null() {
                // SAFETY: the caller's out pointer.
                unsafe { *bad = cur };
            }
            return e.to_errno();
        }
        cur = w.next;
    }
    0
}
