// SPDX-License-Identifier: GPL-2.0

//! The packet path between QPs. A packet carries the headers the transport
//! reads (`packet::Hdr`) and its payload, owned: once sent it belongs to the
//! destination, whose tasks take it in their own time. Nothing of the
//! destination runs on the sender's thread.
//!
//! Loopback is the path between QPs of one device (as rdma_rxe's loopback):
//! the packet is queued on the destination QP and its task scheduled. The
//! RoCEv2 wire (UDP 4791) is the second implementation of `Path`.

use kernel::prelude::*;

use crate::device::OxeDevice;
use crate::packet::Hdr;

pub(crate) struct Packet {
    pub(crate) hdr: Hdr,
    pub(crate) payload: KVec<u8>,
}

impl Packet {
    pub(crate) fn new(hdr: Hdr) -> Self {
        Packet {
            hdr,
            payload: KVec::new(),
        }
    }
}

/// Where a device's packets go.
#[derive(Clone, Copy)]
pub(crate) enum Path {
    Loopback,
}

impl Path {
    /// Sends `pkt` to QP `pkt.hdr.qpn`. A packet nobody takes (no such QP,
    /// a full queue) is lost, as on a network: the requester's retransmit
    /// timer recovers.
    pub(crate) fn send(self, dev: &OxeDevice, pkt: Packet) {
        match self {
            Path::Loopback => loopback(dev, pkt),
        }
    }
}

fn loopback(dev: &OxeDevice, pkt: Packet) {
    if let Some(qp) = dev.state().and_then(|s| s.qps.get(pkt.hdr.qpn)) {
        qp.deliver(pkt);
    }
}
