// SPDX-License-Identifier: GPL-2.0

//! Datagrams (UD QPs and the GSI QP): where the requester sends a UD WQE,
//! and the responder's side, run by the receive task.
//!
//! A datagram is one packet, a SEND with a DETH (the sender's QPN and the
//! Q_Key). The responder takes it from anyone whose Q_Key matches, places
//! the packet's IP header in the first 40 bytes of the receive buffer (the
//! GRH's place) and the payload after it, and completes the receive with
//! the sender's QPN. What it cannot take (no receive posted, too long for
//! the buffers, a wrong Q_Key) is dropped and counted; the QP carries on.
//! Only a malformed receive WQE (class A) puts it in ERR, as on RC.

use kernel::prelude::*;
use kernel::sync::Arc;

use crate::bindings as b;
use crate::ip::NetworkHdr;
use crate::mr::Src;
use crate::packet::{self, op};
use crate::params;
use crate::pkt::Packet;
use crate::qp::flight::UdDest;
use crate::qp::{Attrs, Qp, RecvSide, STATE_RTR, STATE_RTS, STATE_SQD, STATE_SQE};
use crate::sgl::MrCache;
use crate::stats::Counter;
use crate::wqe::SendWqe;

/// Where UD WQE `w` of `qp` goes: its AH (which must be of the QP's PD,
/// its source GID still the device's), the QP and Q_Key it names. On
/// failure, the WQE's completion status (as rxe: LOC_QP_OP_ERR for an AH
/// that is not there or whose source GID is gone).
pub(crate) fn dest(qp: &Qp, attrs: &Attrs, w: &SendWqe) -> Result<UdDest, u32> {
    let ah = qp
        .ahs
        .get()
        .get(w.ah_num)
        .filter(|ah| ah.pd == qp.pd)
        .ok_or(b::ib_wc_status_IB_WC_LOC_QP_OP_ERR)?;
    let qpn = w.remote_qpn & packet::QPN_MASK;
    let route = ah.av.route(qp.qpn, qpn);
    if !qp.ib.source_ok(&route) {
        return Err(b::ib_wc_status_IB_WC_LOC_QP_OP_ERR);
    }
    Ok(UdDest {
        route,
        qpn,
        qkey: packet::send_qkey(qp.qpn, w.remote_qkey, attrs.qkey),
        mtu: params::active_mtu(qp.ndev.mtu()).bytes(),
    })
}

/// Takes one datagram.
pub(crate) fn receive(qp: &Arc<Qp>, rq: &mut RecvSide, pkt: &Packet, cache: &mut MrCache) {
    let attrs = qp.attrs();
    if !matches!(attrs.state, STATE_RTR | STATE_RTS | STATE_SQD | STATE_SQE) {
        return;
    }
    let h = &pkt.hdr;
    // Only UD SENDs are for a datagram QP (IBA 9.6.1.3), with their DETH
    // and, from the wire or the hand-over, their network header.
    let (Some(deth), Some(grh), op::UD_SEND_ONLY | op::UD_SEND_ONLY_IMM) =
        (h.deth, pkt.grh.as_ref(), h.opcode)
    else {
        qp.count_drop(Counter::RcvDrops, h.psn, c"not a UD SEND");
        return;
    };
    if deth.qkey != packet::recv_qkey(qp.qpn, attrs.qkey) {
        qp.count_drop(Counter::QkeyViolations, h.psn, c"wrong Q_Key");
        return;
    }
    let Some(taken) = qp.take_recv(rq, true) else {
        // No receive posted: UD drops it (class D), as rxe does.
        qp.count_drop(Counter::RcvDrops, h.psn, c"no receive posted");
        return;
    };
    let (wr_id, sgl) = match taken {
        Ok(t) => t,
        // A malformed receive WQE.
        Err((wr_id, status)) => return fail_recv(qp, rq, wr_id, status),
    };
    let len = pkt.payload.len() as u64;
    let grh_len = grh.len() as u64;
    let fits = grh_len + len <= sgl.total;
    // Each buffer is looked up as bytes reach it (rxe's copy_data): one no
    // MR of the PD lets the receive write fails the receive and the QP
    // (class A), as a malformed WQE does.
    if fits
        && !(sgl.scatter(qp.keys.get(), cache, 0, Src::Bytes(grh))
            && sgl.scatter(qp.keys.get(), cache, grh_len, pkt.payload.src()))
    {
        return fail_recv(qp, rq, wr_id, b::ib_wc_status_IB_WC_LOC_PROT_ERR);
    }
    if !fits {
        // Too long for the buffers: dropped, the receive kept for the next
        // datagram (class D, as rxe); one taken from an SRQ is gone, and
        // completes in error (class E).
        qp.count_drop(Counter::RcvDrops, h.psn, c"too long for the receive");
        if qp.srq.is_some() {
            let cqe = qp.cqe(
                wr_id,
                b::ib_wc_status_IB_WC_LOC_LEN_ERR,
                b::ib_wc_opcode_IB_WC_RECV,
                0,
            );
            if qp.rcq().post(&cqe, false).is_err() {
                qp.set_error(rq);
            }
        }
        return;
    }
    let mut cqe = qp.cqe(
        wr_id,
        b::ib_wc_status_IB_WC_SUCCESS,
        b::ib_wc_opcode_IB_WC_RECV,
        (grh_len + len) as u32,
    );
    cqe.src_qp = deth.src_qpn;
    cqe.wc_flags |= b::ib_wc_flags_IB_WC_GRH;
    cqe.network = network_type(grh);
    cqe.vlan = pkt.vlan;
    if h.opcode == op::UD_SEND_ONLY_IMM {
        cqe.ex = h.ex;
        cqe.wc_flags |= b::ib_wc_flags_IB_WC_WITH_IMM;
    }
    qp.consume_recv(rq);
    if qp.rcq().post(&cqe, h.solicited).is_err() {
        qp.set_error(rq);
    }
}

/// The network the header came over, as a kernel work completion reports
/// it (RDMA_NETWORK_IPV4 or _IPV6): an IPv6 header starts the 40 bytes.
fn network_type(grh: &NetworkHdr) -> u8 {
    if grh[0] >> 4 == 6 {
        b::rdma_network_type_RDMA_NETWORK_IPV6 as u8
    } else {
        b::rdma_network_type_RDMA_NETWORK_IPV4 as u8
    }
}

/// The receive `wr_id` fails with `status`, and the QP with it (class A):
/// in ERR by the time its completion can be polled.
fn fail_recv(qp: &Arc<Qp>, rq: &mut RecvSide, wr_id: u64, status: u32) {
    let cqe = qp.cqe(wr_id, status, b::ib_wc_opcode_IB_WC_RECV, 0);
    qp.consume_recv(rq);
    qp.set_error_then(rq, || {
        let _ = qp.rcq().post(&cqe, false);
    });
}
