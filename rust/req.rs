// SPDX-License-Identifier: GPL-2.0

//! The requester and the completer. Run from the QP's work item after a
//! doorbell: each WQE is copied out of the shared SQ, its local SGEs are
//! checked, it is cut into MTU-sized packets with PSNs and handed to the
//! responder of the destination QP. The ACK, NAK (RNR, access, invalid
//! request) or READ/atomic response completes the WQE.
//!
//! The transport below is loopback (both QPs on one device, as rdma_rxe's
//! loopback); the RoCEv2 wire plugs in where `resp::receive` is called.

use kernel::prelude::*;
use kernel::sync::Arc;

use crate::access;
use crate::bindings as b;
use crate::mr;
use crate::packet::{self, op, Kind, Nak};
use crate::qp::{Attrs, Qp, SendSide, STATE_ERR, STATE_RTS};
use crate::resp::{self, AtomicEth, Pkt, Reply, Reth};
use crate::sgl::Sgl;
use crate::wqe::{self, flags, wr, SendWqe};

/// The work completion opcode of a send WQE opcode.
pub(crate) fn wc_opcode(opcode: u32) -> u32 {
    match opcode {
        wr::RDMA_WRITE | wr::RDMA_WRITE_WITH_IMM => b::ib_wc_opcode_IB_WC_RDMA_WRITE,
        wr::RDMA_READ => b::ib_wc_opcode_IB_WC_RDMA_READ,
        wr::ATOMIC_CMP_AND_SWP => b::ib_wc_opcode_IB_WC_COMP_SWAP,
        wr::ATOMIC_FETCH_AND_ADD => b::ib_wc_opcode_IB_WC_FETCH_ADD,
        wr::LOCAL_INV => b::ib_wc_opcode_IB_WC_LOCAL_INV,
        wr::REG_MR => b::ib_wc_opcode_IB_WC_REG_MR,
        _ => b::ib_wc_opcode_IB_WC_SEND,
    }
}

fn nak_status(nak: Nak) -> u32 {
    match nak {
        Nak::RemoteAccess => b::ib_wc_status_IB_WC_REM_ACCESS_ERR,
        Nak::InvalidRequest => b::ib_wc_status_IB_WC_REM_INV_REQ_ERR,
        Nak::RemoteOperational => b::ib_wc_status_IB_WC_REM_OP_ERR,
        Nak::Rnr => b::ib_wc_status_IB_WC_RNR_RETRY_EXC_ERR,
        Nak::Sequence => b::ib_wc_status_IB_WC_RETRY_EXC_ERR,
    }
}

enum Outcome {
    /// Completed with this status.
    Done(u32),
    /// Receiver not ready: try the WQE again later.
    Rnr,
}

/// WQEs one run of the work item executes before it requeues itself (rdma_rxe's
/// RXE_MAX_ITERATIONS). A run holds the SQ lock throughout, which modify_qp,
/// query_qp and destroy_qp also take, and occupies a worker of the shared
/// workqueue: without a budget a user who refills the SQ as fast as it drains
/// (unsignaled WRITEs in a loop) keeps both for as long as it likes. 64 small
/// WQEs are well under a millisecond natively, and few enough that a waiter
/// gets the lock within a run's time.
const SEND_BUDGET: u32 = 64;

/// The work item: executes posted WQEs until the SQ is empty or the budget is
/// spent, then requeues itself if WQEs are left.
pub(crate) fn run(qp: &Arc<Qp>) {
    let mut sq = qp.sq.lock();
    for _ in 0..SEND_BUDGET {
        if qp.is_dead() {
            return;
        }
        let attrs = qp.attrs();
        if attrs.state == STATE_ERR {
            let more = qp.flush_sq(&mut sq);
            drop(sq);
            if more {
                qp.schedule();
            }
            return;
        }
        if attrs.state != STATE_RTS {
            return;
        }
        let side = &mut *sq;
        if !side.queue.peek_into(&mut side.wqe) {
            return;
        }
        let Some(w) = SendWqe::parse(&side.wqe) else {
            return;
        };
        match execute(qp, side, &attrs, &w) {
            Outcome::Rnr => {
                side.rnr_tries = side.rnr_tries.saturating_add(1);
                // rnr_retry 7 means forever.
                if attrs.rnr_retry != 7 && side.rnr_tries > attrs.rnr_retry {
                    complete(qp, side, &w, b::ib_wc_status_IB_WC_RNR_RETRY_EXC_ERR);
                    continue;
                }
                drop(sq);
                // The RNR timer: let the receiver post buffers.
                // SAFETY: process context (work item), no locks held.
                unsafe { b::msleep(1) };
                qp.schedule();
                return;
            }
            Outcome::Done(status) => {
                side.rnr_tries = 0;
                complete(qp, side, &w, status);
                // The receiver's completion comes after the sender's.
                if let Some(dest) = side.notify.take() {
                    resp::post_deferred(&dest);
                }
            }
        }
    }
    // Budget spent: let the lock's waiters in, and go round the workqueue
    // again. A WQE posted after this check comes with its own doorbell.
    let more = !sq.queue.is_empty();
    drop(sq);
    if more {
        qp.schedule();
    }
}

fn complete(qp: &Qp, sq: &mut SendSide, w: &SendWqe, status: u32) {
    let ok = status == b::ib_wc_status_IB_WC_SUCCESS;
    // Free the slot before the CQE is visible: a user with a one-deep SQ
    // posts again as soon as it polls the completion.
    sq.queue.advance_consumer();
    let mut failed = !ok;
    if !ok || qp.sq_sig_all || w.send_flags & flags::SIGNALED != 0 {
        let cqe = qp.cqe(w.wr_id, status, wc_opcode(w.opcode), w.length);
        failed |= qp.scq().post(&cqe, false).is_err();
    }
    if failed {
        // Error completions (and a full CQ) move the QP to ERR; `run` then
        // flushes the SQ. Lock order: the caller holds the SQ.
        qp.set_error(&mut qp.rq.lock());
    }
}

/// Where the bytes of an outgoing message come from.
enum Source {
    Sgl(Sgl),
    Inline(KVec<u8>),
}

impl Source {
    fn gather(&self, off: u64, out: &mut [u8]) -> bool {
        match self {
            Source::Sgl(s) => s.gather(off, out),
            Source::Inline(v) => {
                let off = off as usize;
                match v.get(off..off + out.len()) {
                    Some(src) => {
                        out.copy_from_slice(src);
                        true
                    }
                    None => false,
                }
            }
        }
    }

    fn total(&self) -> u64 {
        match self {
            Source::Sgl(s) => s.total,
            Source::Inline(v) => v.len() as u64,
        }
    }
}

/// The WQE's local SGEs, checked for `rights`.
fn local_sgl(qp: &Qp, sq: &SendSide, num: u32, rights: u32) -> Result<Sgl, Outcome> {
    if num > qp.max_send_sge {
        return Err(Outcome::Done(b::ib_wc_status_IB_WC_LOC_LEN_ERR));
    }
    Sgl::build(
        qp.dev(),
        qp.pd,
        &sq.wqe,
        wqe::SEND_WQE_SGE_OFFSET,
        num,
        rights,
    )
    .map_err(Outcome::Done)
}

/// The destination QP. None looks like a lost packet: retries exhausted.
fn dest(qp: &Qp, attrs: &Attrs) -> Result<Arc<Qp>, Outcome> {
    qp.dev()
        .state()
        .and_then(|s| s.qps.get(attrs.dest_qpn))
        .ok_or(Outcome::Done(b::ib_wc_status_IB_WC_RETRY_EXC_ERR))
}

fn execute(qp: &Qp, sq: &mut SendSide, attrs: &Attrs, w: &SendWqe) -> Outcome {
    let kind = match w.opcode {
        wr::SEND => Kind::Send,
        wr::SEND_WITH_IMM => Kind::SendImm,
        wr::SEND_WITH_INV => Kind::SendInv,
        wr::RDMA_WRITE => Kind::Write,
        wr::RDMA_WRITE_WITH_IMM => Kind::WriteImm,
        wr::RDMA_READ => return read(qp, sq, attrs, w),
        wr::ATOMIC_CMP_AND_SWP | wr::ATOMIC_FETCH_AND_ADD => return atomic(qp, sq, attrs, w),
        wr::LOCAL_INV | wr::REG_MR => return local_op(qp, w),
        _ => return Outcome::Done(b::ib_wc_status_IB_WC_LOC_QP_OP_ERR),
    };
    let src = if w.send_flags & flags::INLINE != 0 {
        let n = w.length as usize;
        if n > qp.max_inline as usize {
            return Outcome::Done(b::ib_wc_status_IB_WC_LOC_LEN_ERR);
        }
        let Some(data) = sq
            .wqe
            .get(wqe::SEND_WQE_SGE_OFFSET..wqe::SEND_WQE_SGE_OFFSET + n)
        else {
            return Outcome::Done(b::ib_wc_status_IB_WC_LOC_LEN_ERR);
        };
        let mut v = KVec::new();
        if v.extend_from_slice(data, GFP_KERNEL).is_err() {
            return Outcome::Done(b::ib_wc_status_IB_WC_LOC_QP_OP_ERR);
        }
        Source::Inline(v)
    } else {
        match local_sgl(qp, sq, w.num_sge, 0) {
            Ok(s) => Source::Sgl(s),
            Err(o) => return o,
        }
    };
    let total = src.total();
    if total > u64::from(crate::params::PORT_MAX_MSG_SZ) {
        return Outcome::Done(b::ib_wc_status_IB_WC_LOC_LEN_ERR);
    }
    let dest = match dest(qp, attrs) {
        Ok(d) => d,
        Err(o) => return o,
    };
    let mtu = attrs.path_mtu;
    let count = packet::packets(total, mtu);
    let write = matches!(kind, Kind::Write | Kind::WriteImm);
    for i in 0..count {
        let off = u64::from(i) * u64::from(mtu);
        let n = (total - off).min(u64::from(mtu)) as usize;
        let Some(buf) = sq.payload.get_mut(..n) else {
            return Outcome::Done(b::ib_wc_status_IB_WC_LOC_QP_OP_ERR);
        };
        if !src.gather(off, buf) {
            return Outcome::Done(b::ib_wc_status_IB_WC_LOC_PROT_ERR);
        }
        let last = i + 1 == count;
        let pkt = Pkt {
            opcode: packet::opcode(kind, i, count),
            psn: packet::psn_add(sq.psn, i),
            solicited: last && w.send_flags & flags::SOLICITED != 0,
            payload: sq.payload.get(..n).unwrap_or(&[]),
            reth: (write && i == 0).then_some(Reth {
                va: w.remote_addr,
                rkey: w.rkey,
                len: total as u32,
            }),
            atomic: None,
            ex: w.ex,
        };
        match resp::receive(&dest, &pkt, &mut |_| false) {
            Reply::Ack | Reply::AtomicAck(_) => {}
            // Only the first packet of a message can meet an empty RQ.
            Reply::Nak(Nak::Rnr) if i == 0 => return Outcome::Rnr,
            Reply::Nak(nak) => return Outcome::Done(nak_status(nak)),
            Reply::Drop => return Outcome::Done(b::ib_wc_status_IB_WC_RETRY_EXC_ERR),
        }
    }
    sq.psn = packet::psn_add(sq.psn, count);
    sq.notify = Some(dest);
    Outcome::Done(b::ib_wc_status_IB_WC_SUCCESS)
}

/// LOCAL_INV and REG_MR: no packet, only the MR changes state. Failures
/// complete with LOC_QP_OP_ERR, as in rdma_rxe.
fn local_op(qp: &Qp, w: &SendWqe) -> Outcome {
    let res = match w.opcode {
        wr::LOCAL_INV => mr::invalidate(qp.dev(), w.ex, qp.pd),
        // Kernel QPs only: a user could write any key into its ring.
        _ if qp.user => false,
        _ => mr::lookup_index(qp.dev(), w.mr_key)
            .is_some_and(|m| m.fast_register(qp.pd, w.rkey, w.access).is_ok()),
    };
    Outcome::Done(if res {
        b::ib_wc_status_IB_WC_SUCCESS
    } else {
        b::ib_wc_status_IB_WC_LOC_QP_OP_ERR
    })
}

fn read(qp: &Qp, sq: &mut SendSide, attrs: &Attrs, w: &SendWqe) -> Outcome {
    let sgl = match local_sgl(qp, sq, w.num_sge, access::LOCAL_WRITE) {
        Ok(s) => s,
        Err(o) => return o,
    };
    let dest = match dest(qp, attrs) {
        Ok(d) => d,
        Err(o) => return o,
    };
    let total = sgl.total;
    let count = packet::packets(total, attrs.path_mtu);
    let pkt = Pkt {
        opcode: op::READ_REQUEST,
        psn: sq.psn,
        solicited: false,
        payload: &[],
        reth: Some(Reth {
            va: w.remote_addr,
            rkey: w.rkey,
            len: total as u32,
        }),
        atomic: None,
        ex: 0,
    };
    // The completer side of READ: responses arrive in order and land in
    // the local SGEs.
    let mut received = 0u64;
    let mut expect = sq.psn;
    let mut bad = false;
    let mut sink = |r: &Pkt<'_>| {
        if r.psn != expect || !sgl.scatter(received, r.payload) {
            bad = true;
            return false;
        }
        received += r.payload.len() as u64;
        expect = packet::psn_add(expect, 1);
        true
    };
    let reply = resp::receive(&dest, &pkt, &mut sink);
    match reply {
        Reply::Ack if !bad && received == total => {
            sq.psn = packet::psn_add(sq.psn, count);
            Outcome::Done(b::ib_wc_status_IB_WC_SUCCESS)
        }
        Reply::Ack | Reply::AtomicAck(_) => Outcome::Done(b::ib_wc_status_IB_WC_LOC_PROT_ERR),
        Reply::Nak(Nak::Rnr) => Outcome::Rnr,
        Reply::Nak(nak) => Outcome::Done(nak_status(nak)),
        Reply::Drop if bad => Outcome::Done(b::ib_wc_status_IB_WC_LOC_PROT_ERR),
        Reply::Drop => Outcome::Done(b::ib_wc_status_IB_WC_RETRY_EXC_ERR),
    }
}

fn atomic(qp: &Qp, sq: &mut SendSide, attrs: &Attrs, w: &SendWqe) -> Outcome {
    if w.num_sge != 1 {
        return Outcome::Done(b::ib_wc_status_IB_WC_LOC_LEN_ERR);
    }
    let sgl = match local_sgl(qp, sq, 1, access::LOCAL_WRITE) {
        Ok(s) => s,
        Err(o) => return o,
    };
    let Some((mr, addr, len)) = sgl.first() else {
        return Outcome::Done(b::ib_wc_status_IB_WC_LOC_LEN_ERR);
    };
    if len < 8 {
        return Outcome::Done(b::ib_wc_status_IB_WC_LOC_LEN_ERR);
    }
    let dest = match dest(qp, attrs) {
        Ok(d) => d,
        Err(o) => return o,
    };
    let pkt = Pkt {
        opcode: if w.opcode == wr::ATOMIC_CMP_AND_SWP {
            op::COMPARE_SWAP
        } else {
            op::FETCH_ADD
        },
        psn: sq.psn,
        solicited: false,
        payload: &[],
        reth: None,
        atomic: Some(AtomicEth {
            va: w.remote_addr,
            rkey: w.rkey,
            swap: w.swap,
            compare_add: w.compare_add,
        }),
        ex: 0,
    };
    match resp::receive(&dest, &pkt, &mut |_| false) {
        Reply::AtomicAck(orig) => {
            if !mr.write(addr, &orig.to_ne_bytes()) {
                return Outcome::Done(b::ib_wc_status_IB_WC_LOC_PROT_ERR);
            }
            sq.psn = packet::psn_add(sq.psn, 1);
            Outcome::Done(b::ib_wc_status_IB_WC_SUCCESS)
        }
        Reply::Ack => Outcome::Done(b::ib_wc_status_IB_WC_BAD_RESP_ERR),
        Reply::Nak(Nak::Rnr) => Outcome::Rnr,
        Reply::Nak(nak) => Outcome::Done(nak_status(nak)),
        Reply::Drop => Outcome::Done(b::ib_wc_status_IB_WC_RETRY_EXC_ERR),
    }
}
