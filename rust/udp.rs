// SPDX-License-Identifier: GPL-2.0

//! The RoCEv2 wire (UDP 4791), the packet path between devices: a packet's
//! headers encoded as rdma_rxe puts them on the wire, behind IP and UDP
//! headers and followed by the ICRC, in an skb sent through the IP stack;
//! and a received one checked (IP and UDP headers, ICRC, transport headers,
//! QPN, source address) before it reaches a QP. Nothing in a received
//! packet is trusted before it is checked, and its payload is placed
//! straight from the skb.

use crate::ib::skb::{crc32_le, Route, Skb};
use crate::icrc::Ip;
use crate::ip::{self, IPV4_LEN, IPV6_LEN, UDP_LEN};
use crate::packet;
use crate::pkt::{Packet, Payload};
use crate::qp::{Qp, QpTable};
use crate::stats::{Counter, Counters};
use crate::wire::{self, DecodeError};

/// Why a packet was not sent or not taken.
#[derive(Debug)]
pub(crate) enum Dropped {
    NoMemory,
    NoRoute,
    Encode,
    Decode(DecodeError),
    UnknownQp,
    WrongSource,
}

/// Sends `pkt` from `qp` along `route`. A packet that cannot go (no memory,
/// no route) is lost, as on a network: the requester's timer recovers it.
/// With `route.local` (loopback through the wire) it is received here, as
/// rxe loops back packets to its own device.
pub(crate) fn send(qp: &Qp, route: &Route, pkt: Packet) -> Result<(), Dropped> {
    let src = pkt.payload.src();
    let n = src.len();
    let len = wire::wire_len(pkt.hdr.opcode, n).ok_or(Dropped::Encode)?;
    let mut skb = Skb::alloc(qp.ndev, len).ok_or(Dropped::NoMemory)?;
    let buf = skb.tx_mut();
    let at = wire::encode_hdr(&pkt.hdr, n, buf).map_err(|_| Dropped::Encode)?;
    let (data, rest) = buf
        .get_mut(at..)
        .ok_or(Dropped::Encode)?
        .split_at_mut_checked(n)
        .ok_or(Dropped::Encode)?;
    if !src.copy_to(data) {
        return Err(Dropped::Encode);
    }
    // Pad and the ICRC's place.
    rest.fill(0);
    // The payload's pages are not needed any more.
    drop(pkt);
    skb.push_ip(qp.ndev, route).map_err(|_| Dropped::NoRoute)?;
    ip::put_icrc_with(skb.network_mut(), crc32_le).map_err(Dropped::Decode)?;
    if route.local {
        return receive(qp.peers.get(), skb);
    }
    skb.send().map_err(|_| Dropped::NoRoute)
}

/// Takes a packet from the wire for the device whose QPs are `qps`.
pub(crate) fn receive(qps: &QpTable, skb: Skb) -> Result<(), Dropped> {
    let (hdr, off, len, saddr, grh) = {
        let l3 = skb.network();
        let f = ip::parse(l3).map_err(Dropped::Decode)?;
        if f.icrc_with(crc32_le) != f.wire_icrc() {
            return Err(Dropped::Decode(DecodeError::BadIcrc));
        }
        let d = wire::decode(f.ib).map_err(Dropped::Decode)?;
        let mut saddr = [0u8; 16];
        let ib_off = match f.ip {
            Ip::V4(h) => {
                saddr[10] = 0xff;
                saddr[11] = 0xff;
                saddr[12..].copy_from_slice(&h[12..16]);
                IPV4_LEN + UDP_LEN
            }
            Ip::V6(h) => {
                saddr.copy_from_slice(&h[8..24]);
                IPV6_LEN + UDP_LEN
            }
        };
        // A datagram's receive buffer starts with its IP header.
        let grh = if packet::is_ud(d.hdr.opcode) {
            Some(ip::network_hdr(l3).ok_or(Dropped::Decode(DecodeError::Truncated))?)
        } else {
            None
        };
        (d.hdr, ib_off + d.payload_off, d.payload_len, saddr, grh)
    };
    let qp = qps.get(hdr.qpn).ok_or(Dropped::UnknownQp)?;
    // A connected QP takes packets from the address its path names only; a
    // datagram QP from anyone (its responder checks the Q_Key).
    if !qp.ud() {
        match qp.attrs().route {
            Some(r) if r.daddr == saddr => {}
            _ => return Err(Dropped::WrongSource),
        }
    }
    let payload = if len == 0 {
        Payload::empty()
    } else {
        Payload::Wire { skb, off, len }
    };
    let mut pkt = Packet::with(hdr, payload);
    pkt.grh = grh;
    qp.deliver(pkt);
    Ok(())
}

/// Counts a packet the wire did not send or take.
pub(crate) fn count(stats: &Counters, e: &Dropped) {
    stats.inc(match e {
        Dropped::Decode(DecodeError::BadIcrc) => Counter::IcrcErr,
        Dropped::NoMemory | Dropped::NoRoute | Dropped::Encode => Counter::SendErr,
        _ => Counter::RcvDrops,
    });
}
