// SPDX-License-Identifier: GPL-2.0

//! The RoCEv2 wire (UDP 4791), the packet path between devices: a packet's
//! headers encoded as rdma_rxe puts them on the wire, behind IP and UDP
//! headers and followed by the ICRC, in an skb sent through the IP stack;
//! and a received one checked (IP and UDP headers, ICRC, transport headers,
//! QPN, source address) before it reaches a QP. Nothing in a received
//! packet is trusted before it is checked, and its payload is placed
//! straight from the skb.

use crate::crc::crc32_le;
use crate::ib::skb::{Arrival, Route, Skb, Train, NO_VLAN};
use crate::icrc::Ip;
use crate::ip::{self, IPV4_LEN, IPV6_LEN, UDP_LEN};
use kernel::alloc::KVVec;
use kernel::prelude::*;

use crate::ip::NetworkHdr;
use crate::packet::{self, Hdr};
use crate::params;
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
    BadPkey,
}

/// Sends `pkt` from `qp` along `route`. A packet that cannot go (no memory,
/// no route) is lost, as on a network: the requester's timer recovers it.
/// With `route.local` (loopback through the wire) it is received here, as
/// rxe loops back packets to its own device. With a `train` it joins the
/// train (sent first if the packet cannot join), and goes with it.
pub(crate) fn send(
    qp: &Qp,
    route: &Route,
    pkt: Packet,
    train: Option<&mut Train>,
) -> Result<(), Dropped> {
    let src = pkt.payload.src();
    let n = src.len();
    let len = wire::wire_len(pkt.hdr.opcode, n).ok_or(Dropped::Encode)?;
    let len32 = u32::try_from(len).map_err(|_| Dropped::Encode)?;
    let train = match train {
        Some(t) if !route.local => {
            if !t.takes(route, len32) {
                send_train(qp, t);
            }
            Some(t)
        }
        _ => None,
    };
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
    let member = train.as_ref().and_then(|t| t.member_id());
    skb.push_ip(qp.ndev, route, member)
        .map_err(|_| Dropped::NoRoute)?;
    ip::put_icrc_with(skb.network_mut(), crc32_le).map_err(Dropped::Decode)?;
    if route.local {
        return receive(qp.peers.get(), skb, None);
    }
    match train {
        Some(t) => {
            t.add(route, len32, skb);
            Ok(())
        }
        None => skb.send().map_err(|_| Dropped::NoRoute),
    }
}

/// Sends what `train` holds: a train the IP stack did not take is counted
/// as one packet not sent (the requester's timer recovers it all).
pub(crate) fn send_train(qp: &Qp, train: &mut Train) {
    if train.send().is_err() {
        count(qp.stats.get(), &Dropped::NoRoute, qp.qpn, 0);
    }
}

/// Takes a packet from the wire for the device whose QPs are `qps`, that
/// it `arrived` for (None: looped back by this device). A packet dropped
/// once its QP is known is counted there and is not an error.
pub(crate) fn receive(qps: &QpTable, skb: Skb, arrived: Option<Arrival>) -> Result<(), Dropped> {
    let (hdr, off, len, saddr, daddr, grh, vlan, to_us) = {
        let l3 = skb.network();
        let f = ip::parse(l3).map_err(Dropped::Decode)?;
        let wire = f.wire_icrc();
        // rdma_rxe's FLUSH carries an ICRC of its own (over its headers
        // twice): taken too, so that rxe's FLUSH reaches oxe.
        if f.icrc_with(crc32_le) != wire
            && !(f.ib.first() == Some(&packet::op::FLUSH)
                && f.rxe_flush_icrc_with(crc32_le) == wire)
        {
            return Err(Dropped::Decode(DecodeError::BadIcrc));
        }
        let d = wire::decode(f.ib).map_err(Dropped::Decode)?;
        let (mut saddr, mut daddr) = ([0u8; 16], [0u8; 16]);
        let ib_off = match f.ip {
            Ip::V4(h) => {
                for (a, at) in [(&mut saddr, 12), (&mut daddr, 16)] {
                    a[10] = 0xff;
                    a[11] = 0xff;
                    a[12..].copy_from_slice(&h[at..at + 4]);
                }
                IPV4_LEN + UDP_LEN
            }
            Ip::V6(h) => {
                saddr.copy_from_slice(&h[8..24]);
                daddr.copy_from_slice(&h[24..40]);
                IPV6_LEN + UDP_LEN
            }
        };
        // A datagram's receive buffer starts with its IP header.
        // Only a datagram's completion reports them.
        let (grh, vlan, to_us) = if packet::is_ud(d.hdr.opcode) {
            let h = ip::network_hdr(l3).ok_or(Dropped::Decode(DecodeError::Truncated))?;
            // A datagram to an address of another interface is not the
            // device's (a connected QP checks its own address below).
            let to_us = arrived.is_none_or(|a| skb.to_gid_of(a, &daddr));
            (Some(h), skb.vlan_id(), to_us)
        } else {
            (None, NO_VLAN, true)
        };
        (
            d.hdr,
            ib_off + d.payload_off,
            d.payload_len,
            saddr,
            daddr,
            grh,
            vlan,
            to_us,
        )
    };
    let payload = if len == 0 {
        Payload::empty()
    } else {
        Payload::Wire { skb, off, len }
    };
    if hdr.qpn == params::MULTICAST_QPN {
        if !packet::pkey_ok(hdr.pkey) {
            return Err(Dropped::BadPkey);
        }
        return multicast(qps, hdr, payload, &daddr, grh, vlan);
    }
    let qp = qps.get(hdr.qpn).ok_or(Dropped::UnknownQp)?;
    // Counted on the QP too, so that `rdma -dd res show qp` tells which QP
    // is aimed at.
    if let Some(why) = refused(&qp, &hdr, &saddr, &daddr, to_us) {
        qp.count_drop(Counter::RcvDrops, hdr.psn, why);
        return Ok(());
    }
    let mut pkt = Packet::with(hdr, payload);
    pkt.grh = grh;
    pkt.vlan = vlan;
    qp.deliver(pkt);
    Ok(())
}

/// Why a packet for `qp` is not taken, if it is not: a P_Key of another
/// partition; for a connected QP, addresses other than its path's (rxe's
/// `check_addr`: from the address the path names, to the one the QP sends
/// from); for a datagram QP, a destination that is not the device's
/// (`to_us`; its responder checks the Q_Key).
fn refused(
    qp: &Qp,
    hdr: &Hdr,
    saddr: &[u8; 16],
    daddr: &[u8; 16],
    to_us: bool,
) -> Option<&'static CStr> {
    if !packet::pkey_ok(hdr.pkey) {
        return Some(c"bad P_Key");
    }
    if qp.ud() {
        return (!to_us).then_some(c"not to an address of the device");
    }
    match qp.attrs().route {
        Some(r) if r.daddr == *saddr && r.saddr == *daddr => None,
        _ => Some(c"not between the QP and its peer"),
    }
}

/// A datagram sent to multicast group `mgid`: a copy for each QP attached
/// to it (the last takes the packet itself), each checking its Q_Key as for
/// any datagram. Only a UD packet with its network header is taken.
fn multicast(
    qps: &QpTable,
    hdr: Hdr,
    payload: Payload,
    mgid: &[u8; 16],
    grh: Option<NetworkHdr>,
    vlan: u16,
) -> Result<(), Dropped> {
    if grh.is_none() {
        return Err(Dropped::UnknownQp);
    }
    let members = qps.members(mgid);
    let Some((last, others)) = members.split_last() else {
        return Err(Dropped::UnknownQp);
    };
    for qp in others {
        let src = payload.src();
        let Ok(mut v) = KVVec::from_elem(0u8, src.len(), GFP_ATOMIC) else {
            continue;
        };
        if src.copy_to(&mut v) {
            let mut pkt = Packet::with(hdr, Payload::Bytes(v));
            pkt.grh = grh;
            pkt.vlan = vlan;
            qp.deliver(pkt);
        }
    }
    let mut pkt = Packet::with(hdr, payload);
    pkt.grh = grh;
    pkt.vlan = vlan;
    last.deliver(pkt);
    Ok(())
}

/// Counts a packet the wire did not send or take (sent by `qpn` with
/// `psn`; 0 and 0 for one received).
pub(crate) fn count(stats: &Counters, e: &Dropped, qpn: u32, psn: u32) {
    let (c, why) = match e {
        Dropped::Decode(DecodeError::BadIcrc) => (Counter::IcrcErr, c"bad ICRC"),
        Dropped::Decode(_) => (Counter::RcvDrops, c"bad headers"),
        Dropped::NoMemory => (Counter::SendErr, c"no memory for an skb"),
        Dropped::NoRoute => (Counter::SendErr, c"no route"),
        Dropped::Encode => (Counter::SendErr, c"cannot encode"),
        Dropped::UnknownQp => (Counter::RcvDrops, c"no such QP"),
        Dropped::BadPkey => (Counter::RcvDrops, c"bad P_Key"),
    };
    stats.dropped(c, qpn, psn, why);
}
