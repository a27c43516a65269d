// SPDX-License-Identifier: GPL-2.0

//! The packet path between QPs. Nothing of the destination runs on the
//! sender's thread: a packet is queued on the destination QP and its task
//! scheduled.
//!
//! Loopback is the path between QPs of one device (as rdma_rxe's loopback).
//! The RoCEv2 wire (UDP 4791) is the second implementation of `Path`, chosen
//! per destination once there is one.

use crate::pkt::Packet;
use crate::qp::Qp;

/// Where a QP's packets go.
#[derive(Clone, Copy)]
enum Path {
    Loopback,
}

/// Sends `pkt` from `qp` to QP `pkt.hdr.qpn`. A packet nobody takes (no such
/// QP, a full queue) is lost, as on a network: the requester's retransmit
/// timer recovers.
pub(crate) fn xmit(qp: &Qp, pkt: Packet) {
    match Path::Loopback {
        Path::Loopback => {
            if let Some(dest) = qp.peers.get().get(pkt.hdr.qpn) {
                dest.deliver(pkt);
            }
        }
    }
}
