// SPDX-License-Identifier: GPL-2.0

//! QP entry points, and what touches the core's `ib_qp`: its number, its
//! event handler, the kernel clients' WR chains.

use core::ptr::{self, NonNull};

use kernel::ffi::c_int;
use kernel::prelude::*;
use kernel::sync::Arc;

use super::{drop_in_place, from_ib, init_in_place, to_c, CoreRef};
use crate::bindings as b;
use crate::cq::OxeCq;
use crate::device::OxeDevice;
use crate::ib::qp::QpHandle;
use crate::ib::Udata;
use crate::qp::verbs::{CreateArgs, KernelSendWr};
use crate::qp::{OxeQp, Qp};
use crate::wqe::{self, Sge};

impl OxeQp {
    /// # Safety
    ///
    /// `ib` must be a live oxe QP.
    unsafe fn qp<'a>(ib: *mut b::ib_qp) -> &'a Arc<Qp> {
        // SAFETY: per the function's contract; `create_qp` initialised it.
        unsafe { &from_ib::<OxeQp>(ib).qp }
    }
}

/// # Safety
///
/// Called by the RDMA core with a zeroed QP of `size_ib_qp` bytes.
pub(super) unsafe extern "C" fn create_qp(
    ib: *mut b::ib_qp,
    init: *mut b::ib_qp_init_attr,
    udata: *mut b::ib_udata,
) -> c_int {
    // SAFETY: the core passes valid init attributes, a QP whose device and PD it filled in, and NULL or the command's udata.
    let (a, dev, pd, udata) = unsafe {
        (
            &mut *init,
            OxeDevice::from_ib((*ib).device),
            (*ib).pd,
            Udata::from_raw(udata),
        )
    };
    match a.qp_type {
        b::ib_qp_type_IB_QPT_RC | b::ib_qp_type_IB_QPT_UC | b::ib_qp_type_IB_QPT_UD => {}
        // The core's MAD layer makes the GSI QP; no user can.
        b::ib_qp_type_IB_QPT_GSI if udata.is_none() => {}
        _ => return crate::eopnotsupp().to_errno(),
    }
    if a.create_flags != 0 {
        return crate::eopnotsupp().to_errno();
    }
    if a.send_cq.is_null() || a.recv_cq.is_null() {
        return EINVAL.to_errno();
    }
    let Some(state) = dev.state() else {
        return ENODEV.to_errno();
    };
    // SAFETY: the core checked that the CQs and the PD belong to this device; it keeps the device (and so its key and QP tables), the CQs and the `ib_qp` alive until `destroy_qp` returns, which waits for everything that uses them.
    let args = unsafe {
        CreateArgs {
            keys: CoreRef::new(&state.keys),
            mws: CoreRef::new(&state.mws),
            peers: CoreRef::new(&state.qps),
            ahs: CoreRef::new(&state.ahs),
            ndev: state.net.ndev(),
            stats: CoreRef::new(&state.stats),
            pd: super::pd::id(pd),
            scq: CoreRef::new(OxeCq::from_ib(a.send_cq)),
            rcq: CoreRef::new(OxeCq::from_ib(a.recv_cq)),
            cap: &mut a.cap,
            sq_sig_all: a.sq_sig_type == b::ib_sig_type_IB_SIGNAL_ALL_WR,
            qp_type: a.qp_type,
            // SAFETY: the core checked that the SRQ belongs to this device
            // and keeps it until the QP is destroyed.
            srq: (!a.srq.is_null()).then(|| super::srq::srq(a.srq)),
            handle: QpHandle::new(NonNull::new_unchecked(ib)),
        }
    };
    let qp = match Qp::create(args, udata.as_ref()) {
        Ok(qp) => qp,
        Err(e) => return e.to_errno(),
    };
    let qpn = qp.qpn;
    // SAFETY: fresh memory the core allocated for an OxeQp, seen by no one else yet; the core calls `destroy_qp` only if this verb succeeds.
    match unsafe { init_in_place::<OxeQp, core::convert::Infallible>(ib, qp.clone()) } {
        Ok(()) => {}
        Err(e) => match e {},
    }
    // SAFETY: the core reads `qp_num` after this verb returns.
    unsafe { (*ib).qp_num = qpn };
    if let Some(u) = &udata {
        // Offered last: a create that fails after the offers withdraws them.
        if let Err(e) = qp.respond_user(u, dev.mmap_offsets()) {
            qp.teardown(Some(u));
            // SAFETY: the core calls no destroy when create fails.
            unsafe { drop_in_place::<OxeQp>(ib) };
            return e.to_errno();
        }
    }
    0
}

/// # Safety
///
/// Called by the RDMA core for a live QP, once.
pub(super) unsafe extern "C" fn destroy_qp(ib: *mut b::ib_qp, udata: *mut b::ib_udata) -> c_int {
    // SAFETY: a live QP; `udata` NULL or the command's (or the core's cleanup's).
    let (qp, udata) = unsafe { (OxeQp::qp(ib), Udata::from_raw(udata)) };
    qp.teardown(udata.as_ref());
    // SAFETY: last use; the core frees the memory after this returns.
    unsafe { drop_in_place::<OxeQp>(ib) };
    0
}

/// # Safety
///
/// Called by the RDMA core for a live QP with valid attributes.
pub(super) unsafe extern "C" fn modify_qp(
    ib: *mut b::ib_qp,
    attr: *mut b::ib_qp_attr,
    mask: c_int,
    udata: *mut b::ib_udata,
) -> c_int {
    // SAFETY: a live QP, the core's attributes, NULL or the command's udata.
    let (qp, a, udata) = unsafe { (OxeQp::qp(ib), &*attr, Udata::from_raw(udata)) };
    to_c(qp.modify(a, mask as u32, udata.as_ref()))
}

/// # Safety
///
/// Called by the RDMA core for a live QP with writable outputs.
pub(super) unsafe extern "C" fn query_qp(
    ib: *mut b::ib_qp,
    attr: *mut b::ib_qp_attr,
    _mask: c_int,
    init: *mut b::ib_qp_init_attr,
) -> c_int {
    // SAFETY: a live QP and the caller's writable outputs.
    let (qp, a, i) = unsafe { (OxeQp::qp(ib), &mut *attr, &mut *init) };
    qp.query(a, i);
    0
}

/// # Safety
///
/// Called by the RDMA core (`rdma res show qp -dd`) for a live QP, in
/// process context, with the message it builds for it.
pub(super) unsafe extern "C" fn fill_res_qp_entry(
    msg: *mut b::sk_buff,
    ib: *mut b::ib_qp,
) -> c_int {
    // SAFETY: a live QP of ours.
    let qp = unsafe { OxeQp::qp(ib) };
    // The QP's own counters, under the device counters' names.
    let events = crate::stats::QP_EVENTS.iter().filter_map(|&c| {
        // SAFETY: a pointer into the C side's static table, or NULL.
        let name = unsafe { b::oxe_stat_name(c as u32) };
        if name.is_null() {
            return None;
        }
        // SAFETY: a static NUL-terminated name.
        let name = unsafe { core::ffi::CStr::from_char_ptr(name) };
        Some((name, qp.events.value(c)))
    });
    let attrs = Iterator::chain(qp.res_details().into_iter(), events);
    // SAFETY: `msg` is the message the core builds for this QP.
    unsafe { super::put_driver_u64s(msg, attrs) }
}

/// The QP and group of attach_mcast and detach_mcast.
///
/// # Safety
///
/// `ib` is a live QP of an oxe device, `gid` a readable GID.
unsafe fn mcast_args<'a>(ib: *mut b::ib_qp, gid: *const b::ib_gid) -> (&'a Arc<Qp>, [u8; 16]) {
    // SAFETY: per the function's contract; `raw` is the union's plain 16 bytes.
    unsafe { (OxeQp::qp(ib), *(*gid).raw.as_ref()) }
}

/// # Safety
///
/// Called by the RDMA core for a live QP with a GID.
pub(super) unsafe extern "C" fn attach_mcast(
    ib: *mut b::ib_qp,
    gid: *mut b::ib_gid,
    _lid: u16,
) -> c_int {
    // SAFETY: the core's live QP and GID.
    let (qp, mgid) = unsafe { mcast_args(ib, gid) };
    to_c(qp.attach_mcast(&mgid))
}

/// # Safety
///
/// Called by the RDMA core for a live QP with a GID.
pub(super) unsafe extern "C" fn detach_mcast(
    ib: *mut b::ib_qp,
    gid: *mut b::ib_gid,
    _lid: u16,
) -> c_int {
    // SAFETY: the core's live QP and GID.
    let (qp, mgid) = unsafe { mcast_args(ib, gid) };
    to_c(qp.detach_mcast(&mgid))
}

/// SGE `i` of a kernel WR's list of `n`.
///
/// # Safety
///
/// `list` points to `n` SGEs, valid for as long as the result is used.
pub(super) unsafe fn sge(list: *const b::ib_sge, n: u32, i: u32) -> Option<Sge> {
    if i >= n {
        return None;
    }
    // SAFETY: `i < n`, per the function's contract.
    let s = unsafe { &*list.add(i as usize) };
    Some(Sge {
        addr: s.addr,
        length: s.length,
        lkey: s.lkey,
    })
}

/// A kernel client's send WR as a WQE; EINVAL for a REG_MR without an MR,
/// or a UD SEND without an AH.
///
/// # Safety
///
/// `w` is a WR of a kernel client's chain, embedded in the `ib_*_wr` its
/// opcode (and `ud`, the QP being a datagram one) says.
unsafe fn send_wqe(w: &b::ib_send_wr, ud: bool) -> Result<wqe::SendWqe> {
    let opcode = w.opcode;
    // SAFETY: plain integer members of unions.
    let (wr_id, ex) = unsafe { (*w.__bindgen_anon_1.wr_id.as_ref(), *w.ex.imm_data.as_ref()) };
    let mut x = wqe::SendWqe {
        wr_id,
        opcode,
        send_flags: w.send_flags as u32,
        ex,
        num_sge: w.num_sge as u32,
        ..Default::default()
    };
    match opcode {
        wqe::wr::SEND | wqe::wr::SEND_WITH_IMM if ud => {
            // SAFETY: `w` is embedded in an ib_ud_wr on a UD or GSI QP.
            let r = unsafe { &*ptr::from_ref(w).cast::<b::ib_ud_wr>() };
            if r.ah.is_null() {
                return Err(EINVAL);
            }
            // The AH is named by its number, as librxe's WQEs name it: the
            // requester looks it up when it takes the WQE.
            // SAFETY: the caller's AH, of this device, live while posting.
            x.ah_num = unsafe { super::ah::num(r.ah) };
            x.remote_qpn = r.remote_qpn;
            x.remote_qkey = r.remote_qkey;
        }
        wqe::wr::RDMA_WRITE
        | wqe::wr::RDMA_WRITE_WITH_IMM
        | wqe::wr::RDMA_READ
        | wqe::wr::ATOMIC_WRITE => {
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
        // The kernel has no WR that carries FLUSH's range, type and level
        // (rxe takes the opcode and sends zeros): refused, where a user
        // QP's FLUSH comes with all three in its WQE.
        wqe::wr::FLUSH => return Err(EINVAL),
        wqe::wr::REG_MR => {
            // SAFETY: `w` is embedded in an ib_reg_wr for this opcode.
            let r = unsafe { &*ptr::from_ref(w).cast::<b::ib_reg_wr>() };
            if r.mr.is_null() {
                return Err(EINVAL);
            }
            // The MR is named by its key, not by pointer: the requester looks
            // it up, so a WR that outlives its MR finds nothing.
            // SAFETY: the caller's MR, live while the WR is being posted.
            let (key, iova) = unsafe { ((*r.mr).lkey, (*r.mr).iova) };
            x.mr_key = key;
            // As the client set it after map_mr_sg (rxe reads it too).
            x.remote_addr = iova;
            x.rkey = r.key;
            x.access = r.access as u32;
        }
        _ => {}
    }
    Ok(x)
}

/// The doorbell of user QPs (`wr` is NULL: WQEs are in the shared ring), and
/// kernel posting, from any context.
///
/// # Safety
///
/// Called by the RDMA core for a live QP; `wr` is NULL or a kernel WR chain.
pub(super) unsafe extern "C" fn post_send(
    ib: *mut b::ib_qp,
    wr: *const b::ib_send_wr,
    bad: *mut *const b::ib_send_wr,
) -> c_int {
    // SAFETY: a live QP.
    let qp = unsafe { OxeQp::qp(ib) };
    let set_bad = |w: *const b::ib_send_wr| {
        if !bad.is_null() {
            // SAFETY: the caller's out pointer.
            unsafe { *bad = w };
        }
    };
    if !qp.can_post_send() {
        set_bad(wr);
        return EINVAL.to_errno();
    }
    if wr.is_null() {
        // A user's doorbell: the system call's process context runs the send
        // task's first turn, as rxe does for user QPs, sparing a worker's
        // wake-up per post; a budget's worth at most, the rest is left to the
        // workqueue (and all of it when a turn holds the SQ). Only this QP's
        // requester and completer run here: what goes to the peer is queued
        // for its own task.
        crate::req::run_or_queue(qp);
        return 0;
    }
    let ud = qp.ud();
    let res = qp.with_kernel_sq(|ksq| {
        let mut cur = wr;
        while !cur.is_null() {
            // SAFETY: a WR of the caller's chain, live during the call.
            let w = unsafe { &*cur };
            let (list, n) = (w.sg_list, w.num_sge as u32);
            // SAFETY: `list` has `n` SGEs, live during the call.
            let sges = move |i| unsafe { sge(list, n, i) };
            // A kernel client's inline SGE names `length` readable bytes at a
            // kernel virtual address (oxe uses virtual DMA).
            // SAFETY: as just said; the bytes are only read, during the call.
            let bytes = |s: &Sge| unsafe {
                core::slice::from_raw_parts(s.addr as usize as *const u8, s.length as usize)
            };
            // SAFETY: `w` is embedded in the ib_*_wr its opcode says.
            let posted = unsafe { send_wqe(w, ud) }.and_then(|wqe| {
                ksq.post(&KernelSendWr {
                    wqe,
                    sges: &sges,
                    bytes: &bytes,
                })
            });
            if let Err(e) = posted {
                return Err((cur, e));
            }
            cur = w.next;
        }
        Ok(())
    });
    match res {
        Ok(Ok(())) => 0,
        Ok(Err((at, e))) => {
            set_bad(at);
            e.to_errno()
        }
        Err(e) => {
            set_bad(wr);
            e.to_errno()
        }
    }
}

/// Kernel receive posting (user QPs write their RQ ring directly).
///
/// # Safety
///
/// Called by the RDMA core for a live QP with a kernel WR chain.
pub(super) unsafe extern "C" fn post_recv(
    ib: *mut b::ib_qp,
    wr: *const b::ib_recv_wr,
    bad: *mut *const b::ib_recv_wr,
) -> c_int {
    // SAFETY: a live QP.
    let qp = unsafe { OxeQp::qp(ib) };
    let res = qp.with_kernel_rq(|krq| {
        let mut cur = wr;
        while !cur.is_null() {
            // SAFETY: a WR of the caller's chain, live during the call.
            let w = unsafe { &*cur };
            let (list, n) = (w.sg_list, w.num_sge as u32);
            // SAFETY: `list` has `n` SGEs, live during the call.
            let sges = move |i| unsafe { sge(list, n, i) };
            // SAFETY: plain integer member of a union.
            let wr_id = unsafe { *w.__bindgen_anon_1.wr_id.as_ref() };
            if let Err(e) = krq.post(wr_id, n, &sges) {
                return Err((cur, e));
            }
            cur = w.next;
        }
        Ok(())
    });
    let res = res.map_err(|e| (wr, e)).and_then(|r| r);
    // A receive posted in ERR is flushed at once (ib_drain_rq waits for
    // the flush of the one it posts): the receive task does it.
    qp.recv_posted();
    match res {
        Ok(()) => 0,
        Err((at, e)) => {
            if !bad.is_null() {
                // SAFETY: the caller's out pointer.
                unsafe { *bad = at };
            }
            e.to_errno()
        }
    }
}
