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

use crate::ib::skb::{Route, Train};
use crate::ip;
use crate::packet;
use crate::pkt::Packet;
use crate::qp::{handed_over, Attrs, Qp};
use crate::stats::Counter;
use crate::udp;

/// Sends `pkt` from `qp` to QP `pkt.hdr.qpn` along the QP's path. A packet
/// nobody takes (no such QP, a full queue, no route) is lost, as on a
/// network: the requester's retransmit timer recovers.
pub(crate) fn xmit(qp: &Qp, attrs: &Attrs, pkt: Packet) {
    xmit_to(qp, attrs.route.as_ref(), pkt, None);
}

/// Sends `pkt` along `route` (a UD datagram's, from its AH), or hands it
/// over to a QP of this device. On the wire it may wait in `train` (see
/// `udp::send`), which the caller sends before its turn ends; every packet
/// of one PSN sequence then goes through the train, to keep their order.
pub(crate) fn xmit_to(qp: &Qp, route: Option<&Route>, mut pkt: Packet, train: Option<&mut Train>) {
    let stats = qp.stats.get();
    stats.inc(Counter::SentPkts);
    stats.add(Counter::SentBytes, pkt.wire_len() as u64);
    match route {
        Some(r) if !handed_over(route) => {
            let psn = pkt.hdr.psn;
            if let Err(e) = udp::send(qp, r, pkt, train) {
                udp::count(stats, &e, qp.qpn, psn);
            }
        }
        _ => {
            if let Some(dest) = qp.peers.get().get(pkt.hdr.qpn) {
                if let (Some(r), true) = (route, packet::is_ud(pkt.hdr.opcode)) {
                    // The IP header it would have had on the wire.
                    let udp_len = ip::UDP_LEN + pkt.wire_len();
                    pkt.grh =
                        ip::network_hdr_for(r.ipv6, &r.saddr, &r.daddr, r.tclass, r.ttl, udp_len)
                            .ok();
                }
                dest.deliver(pkt);
            }
        }
    }
}
