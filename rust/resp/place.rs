// SPDX-License-Identifier: GPL-2.0

//! Where the responder's requests land: the remote-access checks (rkey,
//! PD, range and rights, for MRs and windows), SEND payloads scattered into
//! the receive WQE, WRITE payloads placed in the target MR, FLUSH, and the
//! receive completions they make.

use kernel::sync::Arc;

use super::{fatal, has_imm, is_last, Reply};
use crate::access;
use crate::bindings as b;
use crate::cq::Cqe;
use crate::mr::{self, MrRef};
use crate::mtt::Request;
use crate::packet::{self, op, Nak};
use crate::pkt::Packet;
use crate::qp::flight::Progress;
use crate::qp::{Qp, RecvSide};
use crate::sgl::MrCache;

/// Consumes the receive WQE and holds its completion until the packet's
/// response (ACK or NAK) is sent: see `receive`.
fn complete_recv(qp: &Qp, rq: &mut RecvSide, cqe: Cqe, solicited: bool) {
    qp.consume_recv(rq);
    rq.completion = Some((cqe, solicited));
}

/// A SEND's receive completes with error `status`: nothing of the message
/// is in progress any more.
pub(super) fn fail_recv(qp: &Qp, rq: &mut RecvSide, wr_id: u64, status: u32) {
    rq.progress = None;
    let cqe = qp.cqe(wr_id, status, b::ib_wc_opcode_IB_WC_RECV, 0);
    complete_recv(qp, rq, cqe, false);
}

/// FLUSH (IBA 1.5 A19): makes what earlier requests placed in the MR
/// globally visible, over the RETH's range or (level MR) the whole MR.
/// oxe's copies are the CPU's own stores, so a full barrier before the
/// answer is all it takes; the checks are rxe's: the QP and the MR (or a
/// window, over the range) must grant the type's right, and the rkey is
/// checked even for an empty range. Persistence is refused: no MR has that
/// right (registration offers none).
pub(super) fn flush(
    qp: &Qp,
    qp_access: u32,
    reth: packet::Reth,
    feth: packet::Feth,
) -> Result<(), Nak> {
    if !feth.valid() {
        return Err(Nak::InvalidRequest);
    }
    let right = feth.rights();
    if qp_access & right != right {
        return Err(Nak::RemoteAccess);
    }
    let req = Request {
        key: reth.rkey,
        pd: qp.pd,
        iova: reth.va,
        len: u64::from(reth.len),
        rights: right,
    };
    let ok = if crate::mw_rules::is_mw(reth.rkey) {
        if feth.level == packet::flush::MR {
            crate::mw::grants(qp.mws.get(), qp.uid, &req)
        } else {
            crate::mw::resolve(qp.mws.get(), qp.uid, &req).is_some()
        }
    } else {
        let m = mr::lookup(qp.keys.get(), reth.rkey).ok_or(Nak::RemoteAccess)?;
        if feth.level == packet::flush::MR {
            m.check_grant(&req).is_ok()
        } else {
            m.check(&req).is_ok()
        }
    };
    if !ok {
        return Err(Nak::RemoteAccess);
    }
    kernel::sync::barrier::smp_mb();
    Ok(())
}

/// Checks the remote access of a WRITE, READ or atomic: the QP must allow
/// it, and the rkey must name a live MR of this QP's PD that grants it over
/// the range, or a window that does. The MR the access lands in, and where.
pub(super) fn remote(
    qp: &Qp,
    qp_access: u32,
    rkey: u32,
    va: u64,
    len: u64,
    right: u32,
) -> Result<Option<(MrRef, u64)>, Nak> {
    if qp_access & right == 0 {
        return Err(Nak::RemoteAccess);
    }
    if len == 0 {
        return Ok(None);
    }
    let req = Request {
        key: rkey,
        pd: qp.pd,
        iova: va,
        len,
        rights: right,
    };
    if crate::mw_rules::is_mw(rkey) {
        return crate::mw::resolve(qp.mws.get(), qp.uid, &req)
            .map(Some)
            .ok_or(Nak::RemoteAccess);
    }
    let m = mr::lookup(qp.keys.get(), rkey).ok_or(Nak::RemoteAccess)?;
    m.check(&req).map_err(|_| Nak::RemoteAccess)?;
    Ok(Some((m, va)))
}

/// As [`remote`], for the packets of an access checked at its start, with
/// the MR of the last packet reused (`MrCache`). A window is resolved afresh
/// for every packet: it may be rebound or invalidated between two.
pub(super) fn cached_remote<'c>(
    qp: &Qp,
    cache: &'c mut MrCache,
    rkey: u32,
    iova: u64,
    len: u64,
    right: u32,
) -> Option<(&'c MrRef, u64)> {
    if crate::mw_rules::is_mw(rkey) {
        let req = Request {
            key: rkey,
            pd: qp.pd,
            iova,
            len,
            rights: right,
        };
        let (m, at) = crate::mw::resolve(qp.mws.get(), qp.uid, &req)?;
        return Some((cache.hold(m), at));
    }
    cache
        .checked(qp.keys.get(), rkey, qp.pd, iova, len, right)
        .map(|m| (m, iova))
}

pub(super) fn send_data(
    qp: &Arc<Qp>,
    rq: &mut RecvSide,
    pkt: &Packet,
    cache: &mut MrCache,
) -> Reply {
    let len = pkt.payload.len() as u64;
    let (wr_id, fits, allowed, received) = match &mut rq.progress {
        Some(Progress::Send {
            wr_id,
            sgl,
            received,
        }) => {
            let fits = *received + len <= sgl.total;
            // Each buffer is looked up as bytes reach it (rxe's copy_data).
            let allowed = fits && sgl.scatter(qp.keys.get(), cache, *received, pkt.payload.src());
            if allowed {
                *received += len;
            }
            (*wr_id, fits, allowed, *received)
        }
        _ => return fatal(qp, rq, Nak::InvalidRequest),
    };
    if fits && !allowed {
        // A buffer no MR of the PD lets the receive write (a bad lkey, an MR
        // deregistered or re-registered since it was posted): the receive
        // completes with LOC_PROT_ERR under its wr_id (as a NIC reports a
        // bad L_Key; rxe says LOC_QP_OP_ERR) and the QP fails, whatever its
        // type; an RC sender gets REM_OP_ERR.
        fail_recv(qp, rq, wr_id, b::ib_wc_status_IB_WC_LOC_PROT_ERR);
        return fatal(qp, rq, Nak::RemoteOperational);
    }
    if !fits {
        // The message does not fit the posted buffers: its receive completes
        // here, so nothing of it is in progress any more (an SRQ's WQE
        // would be flushed again with the QP).
        rq.progress = None;
        // UC drops the message and keeps the receive (class D).
        if qp.uc() {
            if qp.srq.is_some() {
                // Its WQE came from the SRQ and is gone: it completes in
                // error, the QP carries on (class E).
                fail_recv(qp, rq, wr_id, b::ib_wc_status_IB_WC_LOC_LEN_ERR);
            }
            return Reply::Nak(Nak::InvalidRequest);
        }
        fail_recv(qp, rq, wr_id, b::ib_wc_status_IB_WC_LOC_LEN_ERR);
        return fatal(qp, rq, Nak::InvalidRequest);
    }
    if !is_last(pkt.hdr.opcode) {
        return Reply::Ack;
    }
    let mut cqe = qp.cqe(
        wr_id,
        b::ib_wc_status_IB_WC_SUCCESS,
        b::ib_wc_opcode_IB_WC_RECV,
        received as u32,
    );
    if has_imm(pkt.hdr.opcode) {
        cqe.ex = pkt.hdr.ex;
        cqe.wc_flags |= b::ib_wc_flags_IB_WC_WITH_IMM;
    } else if matches!(pkt.hdr.opcode, op::SEND_LAST_INV | op::SEND_ONLY_INV) {
        // The rkey must name a valid fast-registration MR or a bound type 2
        // window of this QP's PD
        // (class J error otherwise: the sender sees REM_INV_REQ_ERR).
        // The receive completes in error, as rxe's, rather than being
        // flushed with the QP (or lost, if it came from an SRQ).
        if !crate::mw::invalidate(qp.keys.get(), qp.mws.get(), pkt.hdr.ex, qp.pd) {
            fail_recv(qp, rq, wr_id, b::ib_wc_status_IB_WC_REM_INV_REQ_ERR);
            return fatal(qp, rq, Nak::InvalidRequest);
        }
        cqe.ex = pkt.hdr.ex;
        cqe.wc_flags |= b::ib_wc_flags_IB_WC_WITH_INVALIDATE;
    }
    rq.progress = None;
    complete_recv(qp, rq, cqe, pkt.hdr.solicited);
    Reply::Ack
}

pub(super) fn write_data(
    qp: &Arc<Qp>,
    rq: &mut RecvSide,
    pkt: &Packet,
    cache: &mut MrCache,
) -> Reply {
    let o = pkt.hdr.opcode;
    if !matches!(rq.progress, Some(Progress::Write { .. })) {
        return fatal(qp, rq, Nak::InvalidRequest);
    }
    // A WRITE with immediate takes its receive before its last bytes are
    // placed (as rxe): an SRQ's last WQE may go to another QP after the
    // request's RNR check, and this QP then waits for another (RNR) rather
    // than failing with its data placed.
    let recv = if has_imm(o) {
        match qp.take_recv(rq, false) {
            None => {
                // Sent again from this packet: a WRITE_ONLY starts anew.
                if packet::starts_message(o) {
                    rq.progress = None;
                }
                return Reply::Nak(Nak::Rnr);
            }
            Some(Err((wr_id, status))) => {
                let cqe = qp.cqe(wr_id, status, b::ib_wc_opcode_IB_WC_RECV_RDMA_WITH_IMM, 0);
                complete_recv(qp, rq, cqe, false);
                return fatal(qp, rq, Nak::RemoteOperational);
            }
            Some(Ok((wr_id, _sgl))) => Some(wr_id),
        }
    } else {
        None
    };
    let len = pkt.payload.len() as u64;
    let (placed, total) = match &mut rq.progress {
        Some(Progress::Write {
            rkey,
            va,
            total,
            received,
        }) => {
            let iova = va.wrapping_add(*received);
            // The last packet brings exactly what the RETH announced is
            // left, the others less (a WRITE_ONLY_IMM of no bytes must not
            // complete as if its RETH's length had been placed).
            let end = *received + len;
            let placed = if end > *total || is_last(o) != (end == *total) {
                Err(Nak::InvalidRequest)
            } else if len > 0
                && !cached_remote(qp, cache, *rkey, iova, len, access::REMOTE_WRITE)
                    .is_some_and(|(m, at)| m.write(at, pkt.payload.src(), 0, len as usize))
            {
                Err(Nak::RemoteAccess)
            } else {
                *received += len;
                Ok(())
            };
            (placed, *total)
        }
        _ => (Err(Nak::InvalidRequest), 0),
    };
    if let Err(nak) = placed {
        // The receive taken completes with the error, as rxe's.
        if let Some(wr_id) = recv {
            let status = match nak {
                Nak::RemoteAccess => b::ib_wc_status_IB_WC_REM_ACCESS_ERR,
                _ => b::ib_wc_status_IB_WC_REM_INV_REQ_ERR,
            };
            let cqe = qp.cqe(wr_id, status, b::ib_wc_opcode_IB_WC_RECV_RDMA_WITH_IMM, 0);
            complete_recv(qp, rq, cqe, false);
        }
        return fatal(qp, rq, nak);
    }
    if !is_last(o) {
        return Reply::Ack;
    }
    rq.progress = None;
    if let Some(wr_id) = recv {
        let mut cqe = qp.cqe(
            wr_id,
            b::ib_wc_status_IB_WC_SUCCESS,
            b::ib_wc_opcode_IB_WC_RECV_RDMA_WITH_IMM,
            total as u32,
        );
        cqe.ex = pkt.hdr.ex;
        cqe.wc_flags |= b::ib_wc_flags_IB_WC_WITH_IMM;
        complete_recv(qp, rq, cqe, pkt.hdr.solicited);
    }
    Reply::Ack
}
