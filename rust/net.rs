// SPDX-License-Identifier: GPL-2.0

//! The packet path between QPs. Nothing of the destination runs on the
//! sender's thread: a packet is queued on the destination QP and its task
//! scheduled.
//!
//! Loopback hands packets over between QPs of one device (rdma_rxe's
//! loopback, without building the packet, and in packets of up to
//! `HANDOVER_MTU` bytes rather than the path MTU); the RoCEv2 wire (`udp`)
//! is the path to any other device, and, with the `wire_loopback` module
//! parameter, also to this one.

use crate::pkt::Packet;
use crate::qp::{Attrs, Qp};
use crate::stats::Counter;
use crate::udp;

/// Sends `pkt` from `qp` to QP `pkt.hdr.qpn` along the QP's path. A packet
/// nobody takes (no such QP, a full queue, no route) is lost, as on a
/// network: the requester's retransmit timer recovers.
pub(crate) fn xmit(qp: &Qp, attrs: &Attrs, pkt: Packet) {
    let stats = qp.stats.get();
    stats.inc(Counter::SentPkts);
    stats.add(Counter::SentBytes, pkt.wire_len() as u64);
    match &attrs.route {
        Some(r) if !attrs.handed_over() => {
            if let Err(e) = udp::send(qp, r, pkt) {
                udp::count(stats, &e);
            }
        }
        _ => {
            if let Some(dest) = qp.peers.get().get(pkt.hdr.qpn) {
                dest.deliver(pkt);
            }
        }
    }
}
