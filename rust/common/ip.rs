// SPDX-License-Identifier: GPL-2.0

//! The IPv4/IPv6 and UDP headers around a RoCEv2 packet: building them as
//! rdma_rxe does (rxe_net.c), taking a received one apart, its ICRC on a
//! linear buffer, and the UDP source port a QP's flow uses.

use crate::icrc::{self, Ip};
use crate::wire::{DecodeError, EncodeError, ICRC_LEN};

/// The RoCEv2 UDP destination port.
pub const ROCE_PORT: u16 = 4791;
pub const IPV4_LEN: usize = 20;
pub const IPV6_LEN: usize = 40;
pub const UDP_LEN: usize = 8;

const PROTO_UDP: u8 = 17;
/// Don't fragment: RoCE packets fit the path MTU by construction.
const IPV4_DF: u16 = 0x4000;
const IPV4_MF_OFFSET: u16 = 0x3fff;
const FLOW_LABEL_MASK: u32 = 0x000f_ffff;
/// RoCEv2 source ports come from 0xc000..=0xffff
/// (IB_ROCE_UDP_ENCAP_VALID_PORT_MIN).
const SPORT_MIN: u16 = 0xc000;

/// The variable part of an IPv4 header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ipv4 {
    pub src: [u8; 4],
    pub dst: [u8; 4],
    /// DSCP and ECN (the GRH traffic class).
    pub tos: u8,
    /// The GRH hop limit.
    pub ttl: u8,
    pub id: u16,
}

/// The variable part of an IPv6 header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ipv6 {
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub traffic_class: u8,
    /// 20 bits.
    pub flow_label: u32,
    pub hop_limit: u8,
}

fn put<const N: usize>(buf: &mut [u8], b: [u8; N]) -> Result<usize, EncodeError> {
    buf.get_mut(..N)
        .ok_or(EncodeError::NoRoom)?
        .copy_from_slice(&b);
    Ok(N)
}

fn len16(n: usize) -> Result<[u8; 2], EncodeError> {
    u16::try_from(n)
        .map(u16::to_be_bytes)
        .map_err(|_| EncodeError::TooLong)
}

/// The IPv4 header checksum (the checksum field itself is skipped).
pub fn ipv4_checksum(h: &[u8; 20]) -> u16 {
    let sum = h
        .chunks_exact(2)
        .enumerate()
        .filter(|&(i, _)| i != 5)
        .fold(0u32, |s, (_, w)| {
            s + u32::from(<[u8; 2]>::try_from(w).map_or(0, u16::from_be_bytes))
        });
    // Ten 16-bit words: at most two folds.
    let sum = (sum & 0xffff) + (sum >> 16);
    let sum = (sum & 0xffff) + (sum >> 16);
    !(sum as u16)
}

/// Writes a 20-byte IPv4 header (no options, DF, UDP, with its checksum)
/// before a UDP datagram of `udp_len` bytes (UDP header included).
pub fn encode_ipv4(p: &Ipv4, udp_len: usize, buf: &mut [u8]) -> Result<usize, EncodeError> {
    let [t0, t1] = len16(udp_len.checked_add(IPV4_LEN).ok_or(EncodeError::TooLong)?)?;
    let [i0, i1] = p.id.to_be_bytes();
    let [f0, f1] = IPV4_DF.to_be_bytes();
    let [s0, s1, s2, s3] = p.src;
    let [d0, d1, d2, d3] = p.dst;
    let mut h = [
        0x45, p.tos, t0, t1, i0, i1, f0, f1, p.ttl, PROTO_UDP, 0, 0, s0, s1, s2, s3, d0, d1, d2, d3,
    ];
    let [c0, c1] = ipv4_checksum(&h).to_be_bytes();
    h[10] = c0;
    h[11] = c1;
    put(buf, h)
}

/// Writes a 40-byte IPv6 header (UDP next, no extension headers) before a
/// UDP datagram of `udp_len` bytes (UDP header included).
pub fn encode_ipv6(p: &Ipv6, udp_len: usize, buf: &mut [u8]) -> Result<usize, EncodeError> {
    if p.flow_label & !FLOW_LABEL_MASK != 0 {
        return Err(EncodeError::BadField);
    }
    let [l0, l1] = len16(udp_len)?;
    let vtf = (6u32 << 28) | (u32::from(p.traffic_class) << 20) | p.flow_label;
    let mut h = [0u8; IPV6_LEN];
    let bytes = vtf
        .to_be_bytes()
        .into_iter()
        .chain([l0, l1, PROTO_UDP, p.hop_limit])
        .chain(p.src)
        .chain(p.dst);
    h.iter_mut().zip(bytes).for_each(|(d, b)| *d = b);
    put(buf, h)
}

/// Writes a UDP header to port 4791 before `ib_len` bytes of BTH through
/// ICRC. The checksum is 0: the ICRC covers the packet, as in rxe.
pub fn encode_udp(sport: u16, ib_len: usize, buf: &mut [u8]) -> Result<usize, EncodeError> {
    let [l0, l1] = len16(ib_len.checked_add(UDP_LEN).ok_or(EncodeError::TooLong)?)?;
    let [s0, s1] = sport.to_be_bytes();
    let [p0, p1] = ROCE_PORT.to_be_bytes();
    put(buf, [s0, s1, p0, p1, l0, l1, 0, 0])
}

/// The first 12 bytes of an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`),
/// as RoCEv2 GIDs carry IPv4 addresses.
pub const V4_MAPPED_PREFIX: [u8; 12] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff];

/// The 40 bytes a UD receive buffer starts with (`union rdma_network_hdr`):
/// a GRH's place, holding the packet's IPv6 header, or its IPv4 header in
/// the last 20 bytes. The core tells them apart by the IPv4 checksum
/// (ib_get_rdma_header_version) and reads the addresses from it to answer.
pub type NetworkHdr = [u8; IPV6_LEN];

/// The network header of a received packet, from its IP header (`l3`
/// starts with it, already checked by `parse`).
pub fn network_hdr(l3: &[u8]) -> Option<NetworkHdr> {
    let mut h = [0u8; IPV6_LEN];
    match l3.first()? >> 4 {
        4 => h[IPV6_LEN - IPV4_LEN..].copy_from_slice(l3.get(..IPV4_LEN)?),
        6 => h.copy_from_slice(l3.get(..IPV6_LEN)?),
        _ => return None,
    }
    Some(h)
}

/// The network header a packet from `src` to `dst` (IPv4-mapped for IPv4)
/// would have had on the wire, for one that never went there (loopback):
/// the same bytes, IPv4 checksum included, so the core reads it alike.
pub fn network_hdr_for(
    ipv6: bool,
    src: &[u8; 16],
    dst: &[u8; 16],
    tclass: u8,
    ttl: u8,
    udp_len: usize,
) -> Result<NetworkHdr, EncodeError> {
    let mut h = [0u8; IPV6_LEN];
    if ipv6 {
        let p = Ipv6 {
            src: *src,
            dst: *dst,
            traffic_class: tclass,
            flow_label: 0,
            hop_limit: ttl,
        };
        encode_ipv6(&p, udp_len, &mut h)?;
    } else {
        let v4 = |a: &[u8; 16]| [a[12], a[13], a[14], a[15]];
        let p = Ipv4 {
            src: v4(src),
            dst: v4(dst),
            tos: tclass,
            ttl,
            id: 0,
        };
        encode_ipv4(&p, udp_len, &mut h[IPV6_LEN - IPV4_LEN..])?;
    }
    Ok(h)
}

/// The symmetric flow label of a connection when the GRH has none
/// (rdma_calc_flow_label() in include/rdma/ib_verbs.h): both ends get the
/// same value.
pub const fn flow_label(lqpn: u32, rqpn: u32) -> u32 {
    // u32 * u32 fits u64.
    let mut v = lqpn as u64 * rqpn as u64;
    v ^= v >> 20;
    v ^= v >> 40;
    (v & FLOW_LABEL_MASK as u64) as u32
}

/// The UDP source port of a QP's packets, from the GRH flow label or,
/// when it is 0, the two QPNs (rdma_get_udp_sport(), which rxe uses on
/// modify_qp): ECMP spreads flows by it.
pub const fn udp_sport(fl: u32, lqpn: u32, rqpn: u32) -> u16 {
    let fl = if fl == 0 { flow_label(lqpn, rqpn) } else { fl };
    let low = fl & 0x3fff;
    let high = fl & 0xf_c000;
    // Both halves are under 0x4000.
    ((low ^ (high >> 14)) as u16) | SPORT_MIN
}

/// A received RoCEv2 packet, split but not yet checked.
#[derive(Clone, Copy, Debug)]
pub struct Frame<'a> {
    pub ip: Ip<'a>,
    pub udp: &'a [u8; 8],
    /// BTH through ICRC: what `wire::decode` takes.
    pub ib: &'a [u8],
    /// Length of the packet per its IP header (trailing link padding is
    /// not part of it).
    pub len: usize,
}

impl Frame<'_> {
    /// The ICRC computed over the packet.
    pub fn icrc(&self) -> u32 {
        self.icrc_with(icrc::crc32_le)
    }

    /// As [`Frame::icrc`], with `update` as the CRC-32 (the kernel's
    /// accelerated `crc32_le()`).
    pub fn icrc_with(&self, update: impl FnMut(u32, &[u8]) -> u32) -> u32 {
        let end = self.ib.len().saturating_sub(ICRC_LEN);
        icrc::icrc_with(update, self.ip, self.udp, self.ib.get(..end).unwrap_or(&[]))
    }

    /// rdma_rxe's ICRC of a FLUSH ([`icrc::rxe_flush_icrc_with`]).
    pub fn rxe_flush_icrc_with(&self, update: impl FnMut(u32, &[u8]) -> u32) -> u32 {
        let end = self.ib.len().saturating_sub(ICRC_LEN);
        icrc::rxe_flush_icrc_with(update, self.ip, self.udp, self.ib.get(..end).unwrap_or(&[]))
    }

    /// The ICRC the packet carries.
    pub fn wire_icrc(&self) -> u32 {
        let end = self.ib.len().saturating_sub(ICRC_LEN);
        self.ib
            .get(end..)
            .and_then(|s| <[u8; 4]>::try_from(s).ok())
            .map_or(0, u32::from_le_bytes)
    }
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    let s = b.get(at..at.checked_add(2)?)?;
    Some(u16::from_be_bytes([*s.first()?, *s.get(1)?]))
}

/// Splits a buffer starting at the IP header into IP, UDP and the IB
/// transport part. Only what RoCEv2 sends passes: IPv4 without options or
/// fragmentation, IPv6 without extension headers, UDP to port 4791 whose
/// length matches IP's, room for an ICRC. Bytes past the IP length are
/// ignored.
pub fn parse(l3: &[u8]) -> Result<Frame<'_>, DecodeError> {
    let first = *l3.first().ok_or(DecodeError::Truncated)?;
    let (ip, hl, len) = match first >> 4 {
        4 => {
            let h: &[u8; IPV4_LEN] = l3
                .get(..IPV4_LEN)
                .and_then(|s| s.try_into().ok())
                .ok_or(DecodeError::Truncated)?;
            let total = usize::from(be16(l3, 2).ok_or(DecodeError::Truncated)?);
            let frag = be16(l3, 6).ok_or(DecodeError::Truncated)?;
            if first != 0x45 || frag & IPV4_MF_OFFSET != 0 || h[9] != PROTO_UDP {
                return Err(DecodeError::BadIp);
            }
            (Ip::V4(h), IPV4_LEN, total)
        }
        6 => {
            let h: &[u8; IPV6_LEN] = l3
                .get(..IPV6_LEN)
                .and_then(|s| s.try_into().ok())
                .ok_or(DecodeError::Truncated)?;
            if h[6] != PROTO_UDP {
                return Err(DecodeError::BadIp);
            }
            let payload = usize::from(be16(l3, 4).ok_or(DecodeError::Truncated)?);
            (Ip::V6(h), IPV6_LEN, IPV6_LEN + payload)
        }
        _ => return Err(DecodeError::BadIp),
    };
    let udp_end = hl + UDP_LEN;
    if len < udp_end + ICRC_LEN {
        return Err(DecodeError::BadIp);
    }
    let pkt = l3.get(..len).ok_or(DecodeError::Truncated)?;
    let udp: &[u8; UDP_LEN] = pkt
        .get(hl..udp_end)
        .and_then(|s| s.try_into().ok())
        .ok_or(DecodeError::Truncated)?;
    let ulen = usize::from(be16(udp, 4).ok_or(DecodeError::Truncated)?);
    if be16(udp, 2) != Some(ROCE_PORT) || ulen != len - hl {
        return Err(DecodeError::BadUdp);
    }
    let ib = pkt.get(udp_end..).ok_or(DecodeError::Truncated)?;
    Ok(Frame { ip, udp, ib, len })
}

/// Splits a received packet (from its IP header) and checks its ICRC;
/// returns the part `wire::decode` takes.
pub fn check_icrc(l3: &[u8]) -> Result<&[u8], DecodeError> {
    let f = parse(l3)?;
    if f.icrc() != f.wire_icrc() {
        return Err(DecodeError::BadIcrc);
    }
    Ok(f.ib)
}

/// Fills in the ICRC of a packet built in `l3` (IP header to ICRC, the
/// IPv4 identification already chosen: the ICRC covers it). Returns it.
pub fn put_icrc(l3: &mut [u8]) -> Result<u32, DecodeError> {
    put_icrc_with(l3, icrc::crc32_le)
}

/// As [`put_icrc`], with `update` as the CRC-32.
pub fn put_icrc_with(
    l3: &mut [u8],
    update: impl FnMut(u32, &[u8]) -> u32,
) -> Result<u32, DecodeError> {
    let (crc, len) = {
        let f = parse(l3)?;
        (f.icrc_with(update), f.len)
    };
    let at = len.checked_sub(ICRC_LEN).ok_or(DecodeError::Truncated)?;
    l3.get_mut(at..len)
        .ok_or(DecodeError::Truncated)?
        .copy_from_slice(&crc.to_le_bytes());
    Ok(crc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::icrc::tests::icrc_reference;
    use crate::packet::{op, Hdr};
    use crate::wire::{self, tests::RXE_READ};
    use proptest::prelude::*;

    /// RXE_READ's IPv4 and UDP headers, as captured (PcapPlusPlus's
    /// InfiniBandPacket.dat, an RDMA READ request sent by rdma_rxe).
    const RXE_L3: [u8; 28] = [
        0x45, 0x00, 0x00, 0x3c, 0xbe, 0x10, 0x40, 0x00, 0x40, 0x11, 0x8a, 0x4b, 0xc0, 0xa8, 0x38,
        0x81, 0xc0, 0xa8, 0x38, 0x83, 0xdf, 0x94, 0x12, 0xb7, 0x00, 0x28, 0x00, 0x00,
    ];

    fn rxe_frame() -> Vec<u8> {
        [&RXE_L3[..], &RXE_READ[..]].concat()
    }

    /// The core's ib_get_rdma_header_version(): 4, 6 or 0 (garbage).
    fn header_version(h: &NetworkHdr) -> u8 {
        let v4: &[u8; 20] = h[20..].try_into().unwrap();
        if h[0] >> 4 != 6 {
            return if v4[0] >> 4 == 4 { 4 } else { 0 };
        }
        if v4[0] & 0xf != 5 {
            return 6;
        }
        let sum = u16::from_be_bytes([v4[10], v4[11]]);
        if ipv4_checksum(v4) == sum {
            4
        } else {
            6
        }
    }

    #[test]
    fn network_hdr_as_the_core_reads_it() {
        // From the wire: rxe's captured IPv4 header, in the last 20 bytes.
        let h = network_hdr(&RXE_L3).unwrap();
        assert_eq!(h[..20], [0; 20]);
        assert_eq!(h[20..], RXE_L3[..20]);
        assert_eq!(header_version(&h), 4);
        assert_eq!(network_hdr(&[0x10; 40]), None);
        assert_eq!(network_hdr(&RXE_L3[..10]), None);
        // Loopback: the same bytes as the wire would carry (id 0 aside).
        let mut src = [0u8; 16];
        src[10..].copy_from_slice(&[0xff, 0xff, 0xc0, 0xa8, 0x38, 0x81]);
        let mut dst = src;
        dst[12..].copy_from_slice(&[0xc0, 0xa8, 0x38, 0x83]);
        let l = network_hdr_for(false, &src, &dst, 0, 0x40, 0x28).unwrap();
        assert_eq!(header_version(&l), 4);
        assert_eq!(l[20 + 12..], RXE_L3[12..20]);
        assert_eq!(l[20 + 2..20 + 4], RXE_L3[2..4]);
        // IPv6: version 6 first, addresses at 8 and 24.
        let (a, b) = ([0xfe; 16], [0x20; 16]);
        let l6 = network_hdr_for(true, &a, &b, 3, 64, 100).unwrap();
        assert_eq!(header_version(&l6), 6);
        assert_eq!(l6[8..24], a);
        assert_eq!(l6[24..40], b);
        assert_eq!(network_hdr(&l6), Some(l6));
    }

    proptest! {
        #[test]
        fn network_hdr_never_panics(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = network_hdr(&b);
        }
    }

    /// A CNP a ConnectX-4 Lx sent, from its IP header on: scapy's
    /// test/contrib/roce.uts ("RoCE CNP captured on ConnectX-4 Lx"),
    /// github.com/secdev/scapy. BECN set, 16 reserved bytes, ICRC
    /// 82 fd 00 2a.
    const CX4_CNP: [u8; 60] = [
        0x45, 0xc2, 0x00, 0x3c, 0x71, 0x8c, 0x40, 0x00, 0x40, 0x11, 0x91, 0x61, 0x0a, 0x00, 0x11,
        0x01, 0x0a, 0x00, 0x12, 0x01, 0x00, 0x00, 0x12, 0xb7, 0x00, 0x28, 0x00, 0x00, 0x81, 0x00,
        0xff, 0xff, 0x40, 0x00, 0x01, 0x18, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x82, 0xfd, 0x00, 0x2a,
    ];

    #[test]
    fn icrc_of_captured_packets() {
        let rxe = rxe_frame();
        assert_eq!(check_icrc(&rxe), Ok(&RXE_READ[..]));
        let f = parse(&rxe).unwrap();
        assert_eq!(
            (f.icrc(), f.wire_icrc(), f.len),
            (0x4a15_c608, 0x4a15_c608, 60)
        );
        assert!(matches!(f.ip, Ip::V4(_)));
        assert_eq!(f.udp[..], RXE_L3[20..]);

        // Hardware's ICRC too, on a packet this transport does not speak.
        let ib = check_icrc(&CX4_CNP).unwrap();
        assert_eq!(parse(&CX4_CNP).unwrap().icrc(), 0x2a00_fd82);
        assert_eq!(wire::decode(ib), Err(DecodeError::BadOpcode));
    }

    /// rdma_rxe over IPv6, link-local GIDs, captured on a veth in a guest
    /// (AF_PACKET, stop 19): a SEND of 64 bytes of 0x7b from QP 0x11 to QP
    /// 0x11 and its ACK, from the IPv6 header on.
    const RXE_V6_SEND: &str = "6000000000581140fe80000000000000a4201afffed39298fe80000000000000\
        f07b70fffef83cfcc12112b7005800000400ffff00000011801b99587b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b\
        7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b\
        7b7b7b7bedf770d7";
    const RXE_V6_ACK: &str = "60000000001c1140fe80000000000000f07b70fffef83cfcfe8000000000\
        0000a4201afffed39298c12112b7001c00001100ffff00000011001b99581f00000168886450";

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn icrc_of_rxe_ipv6_packets() {
        let send = unhex(RXE_V6_SEND);
        let ib = check_icrc(&send).unwrap();
        let f = parse(&send).unwrap();
        assert!(matches!(f.ip, Ip::V6(_)));
        assert_eq!((f.icrc(), f.len), (0xd770_f7ed, send.len()));
        let d = wire::decode(ib).unwrap();
        let mut h = Hdr::new(op::SEND_ONLY, 0x1b_9958, 0x11);
        h.ack_req = true;
        assert_eq!(d.hdr, h);
        assert_eq!(
            &ib[d.payload_off..d.payload_off + d.payload_len],
            &[0x7b; 64][..]
        );

        // rxe's source port from the two QPNs (no flow label in the AH).
        assert_eq!(f.udp[..2], udp_sport(0, 0x11, 0x11).to_be_bytes());

        let ack = unhex(RXE_V6_ACK);
        let ib = check_icrc(&ack).unwrap();
        let d = wire::decode(ib).unwrap();
        assert_eq!(
            (d.hdr.opcode, d.hdr.psn, d.hdr.msn),
            (op::ACKNOWLEDGE, 0x1b_9958, 1)
        );

        // Every byte but the variant ones (traffic class, flow label, hop
        // limit, UDP checksum, the BTH's FECN/BECN byte) counts.
        for i in 0..send.len() {
            if matches!(i, 0..=3 | 7 | 46 | 47 | 52) {
                continue;
            }
            let mut c = send.clone();
            c[i] ^= 0x10;
            assert!(check_icrc(&c).is_err(), "byte {i}");
        }
    }

    #[test]
    fn icrc_ignores_variant_fields_only() {
        let mut b = rxe_frame();
        b[8] -= 1; // a router's TTL
        b[1] = 0x02; // ECN marked on the way
        b[26] = 0x12; // a UDP checksum after all
        b[32] = 0x40; // BECN
        assert!(check_icrc(&b).is_ok());
        for i in 0..b.len() {
            if matches!(i, 1 | 8 | 10 | 11 | 26 | 27 | 32) {
                continue;
            }
            let mut c = b.clone();
            c[i] ^= 0x04;
            let r = check_icrc(&c);
            assert!(r.is_err(), "byte {i}");
        }
    }

    #[test]
    fn builds_what_rxe_sent() {
        let ip = Ipv4 {
            src: [192, 168, 56, 129],
            dst: [192, 168, 56, 131],
            tos: 0,
            ttl: 64,
            id: 0xbe10,
        };
        let h = wire::tests::rxe_read_hdr();
        let mut b = [0u8; 80];
        let ib_len = wire::encode(&h, &[], &mut b[28..]).unwrap();
        assert_eq!(encode_udp(0xdf94, ib_len, &mut b[20..]), Ok(8));
        assert_eq!(encode_ipv4(&ip, ib_len + UDP_LEN, &mut b), Ok(20));
        assert_eq!(put_icrc(&mut b), Ok(0x4a15_c608));
        assert_eq!(b[..60], rxe_frame()[..]);

        // And the ConnectX-4's IPv4 header, checksum included.
        let cx4 = Ipv4 {
            src: [10, 0, 17, 1],
            dst: [10, 0, 18, 1],
            tos: 0xc2,
            ttl: 64,
            id: 0x718c,
        };
        assert_eq!(encode_ipv4(&cx4, 40, &mut b), Ok(20));
        assert_eq!(b[..20], CX4_CNP[..20]);
    }

    #[test]
    fn ipv6() {
        let p = Ipv6 {
            src: [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8],
            dst: [0x20, 0x01, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            traffic_class: 0xab,
            flow_label: 0xc_def0,
            hop_limit: 17,
        };
        let mut h = Hdr::new(op::SEND_ONLY, 1, 2);
        h.solicited = true;
        let mut b = [0u8; 128];
        let ib_len = wire::encode(&h, b"twelve bytes", &mut b[48..]).unwrap();
        encode_udp(udp_sport(0, 0x11, 0x12), ib_len, &mut b[40..]).unwrap();
        encode_ipv6(&p, ib_len + UDP_LEN, &mut b).unwrap();
        assert_eq!(b[..8], [0x6a, 0xbc, 0xde, 0xf0, 0, 8 + 28, 17, 17]);
        assert_eq!(b[40..48], [0xc1, 0x32, 0x12, 0xb7, 0, 36, 0, 0]);
        let n = 48 + ib_len;
        let crc = put_icrc(&mut b[..n]).unwrap();
        assert_eq!(crc, icrc_reference(&b[..40], &b[40..48], &b[48..n - 4]));
        assert_eq!(b[n - 4..n], crc.to_le_bytes());
        let ib = check_icrc(&b[..n]).unwrap();
        assert_eq!(wire::decode(ib).unwrap().hdr, h);
        // Traffic class, flow label and hop limit may change on the way.
        b[0] = 0x61;
        b[1..4].fill(0);
        b[7] = 1;
        assert!(check_icrc(&b[..n]).is_ok());
        b[8] ^= 1;
        assert_eq!(check_icrc(&b[..n]), Err(DecodeError::BadIcrc));
    }

    #[test]
    fn parse_rejects() {
        let good = rxe_frame();
        let with = |i: usize, v: u8| {
            let mut b = good.clone();
            b[i] = v;
            parse(&b).map(|f| f.len)
        };
        assert_eq!(with(0, 0x46), Err(DecodeError::BadIp)); // options
        assert_eq!(with(0, 0x55), Err(DecodeError::BadIp));
        assert_eq!(with(6, 0x60), Err(DecodeError::BadIp)); // DF|MF
        assert_eq!(with(7, 0x01), Err(DecodeError::BadIp)); // offset
        assert_eq!(with(9, 6), Err(DecodeError::BadIp)); // TCP
        assert_eq!(with(3, 0x40), Err(DecodeError::Truncated));
        assert_eq!(with(3, 0x1f), Err(DecodeError::BadIp));
        assert_eq!(with(23, 0xb8), Err(DecodeError::BadUdp)); // port 4792
        assert_eq!(with(25, 0x2c), Err(DecodeError::BadUdp));
        assert_eq!(parse(&[]).map(|f| f.len), Err(DecodeError::Truncated));
        assert_eq!(
            parse(&good[..19]).map(|f| f.len),
            Err(DecodeError::Truncated)
        );
        assert_eq!(
            parse(&good[..59]).map(|f| f.len),
            Err(DecodeError::Truncated)
        );
        // Link-layer padding past the IP length is not the packet's.
        let mut padded = good.clone();
        padded.extend_from_slice(&[0xee; 6]);
        assert_eq!(check_icrc(&padded), Ok(&RXE_READ[..]));
        let mut b = padded;
        assert_eq!(put_icrc(&mut b), Ok(0x4a15_c608));
        assert_eq!(b[60..], [0xee; 6]);
        // IPv6 carrying anything but UDP (e.g. a hop-by-hop header).
        let mut v6 = [0u8; 60];
        v6[0] = 0x60;
        v6[5] = 20;
        assert_eq!(parse(&v6).map(|f| f.len), Err(DecodeError::BadIp));
        v6[6] = 17;
        assert_eq!(parse(&v6).map(|f| f.len), Err(DecodeError::BadUdp));
        assert_eq!(check_icrc(&good[..40]), Err(DecodeError::Truncated));
    }

    #[test]
    fn encode_rejects() {
        let mut b = [0u8; 64];
        let v4 = Ipv4::default();
        assert_eq!(encode_ipv4(&v4, 65515, &mut b), Ok(20));
        assert_eq!(encode_ipv4(&v4, 65516, &mut b), Err(EncodeError::TooLong));
        assert_eq!(
            encode_ipv4(&v4, usize::MAX, &mut b),
            Err(EncodeError::TooLong)
        );
        assert_eq!(encode_ipv4(&v4, 8, &mut b[..19]), Err(EncodeError::NoRoom));
        let v6 = Ipv6 {
            flow_label: 0x10_0000,
            ..Ipv6::default()
        };
        assert_eq!(encode_ipv6(&v6, 8, &mut b), Err(EncodeError::BadField));
        assert_eq!(
            encode_ipv6(&Ipv6::default(), 65536, &mut b),
            Err(EncodeError::TooLong)
        );
        assert_eq!(
            encode_ipv6(&Ipv6::default(), 8, &mut b[..39]),
            Err(EncodeError::NoRoom)
        );
        assert_eq!(encode_udp(1, 65527, &mut b), Ok(8));
        assert_eq!(encode_udp(1, 65528, &mut b), Err(EncodeError::TooLong));
        assert_eq!(encode_udp(1, usize::MAX, &mut b), Err(EncodeError::TooLong));
        assert_eq!(encode_udp(1, 0, &mut b[..7]), Err(EncodeError::NoRoom));
        let mut short = [0x45u8; 10];
        assert_eq!(put_icrc(&mut short), Err(DecodeError::Truncated));
    }

    #[test]
    fn source_ports() {
        // Values worked out from include/rdma/ib_verbs.h by hand.
        assert_eq!(udp_sport(0, 0x11, 0x12), 0xc132);
        assert_eq!(udp_sport(0, 0x12_3456, 0xab_cdef), 0xc3c8);
        assert_eq!(flow_label(0x12_3456, 0xab_cdef), 0xa_c3e3);
        assert_eq!(udp_sport(0, 0xff_ffff, 0xff_ffff), 0xff21);
        // A GRH flow label wins over the QPNs.
        assert_eq!(udp_sport(0x1_2345, 1, 2), 0xe341);
        assert_eq!(udp_sport(0, 0, 5), 0xc000);
        // Both ends of a connection hash to the same port.
        for (a, b) in [(1, 2), (0x11, 0xff_fffe), (0x80_0000, 3), (u32::MAX, 7)] {
            assert_eq!(udp_sport(0, a, b), udp_sport(0, b, a));
            assert!(udp_sport(0, a, b) >= 0xc000);
        }
    }

    fn v4_frame() -> impl Strategy<Value = Vec<u8>> {
        (
            any::<([u8; 4], [u8; 4], u8, u8, u16)>(),
            any::<u16>(),
            proptest::collection::vec(any::<u8>(), 12..100),
        )
            .prop_map(|((src, dst, tos, ttl, id), sport, ib)| {
                let p = Ipv4 {
                    src,
                    dst,
                    tos,
                    ttl,
                    id,
                };
                let mut b = vec![0; 28 + ib.len() + 4];
                b[28..28 + ib.len()].copy_from_slice(&ib);
                encode_udp(sport, ib.len() + 4, &mut b[20..]).unwrap();
                encode_ipv4(&p, ib.len() + 12, &mut b).unwrap();
                put_icrc(&mut b).unwrap();
                b
            })
    }

    fn v6_frame() -> impl Strategy<Value = Vec<u8>> {
        (
            any::<([u8; 16], [u8; 16], u8, u8)>(),
            0..=FLOW_LABEL_MASK,
            proptest::collection::vec(any::<u8>(), 12..100),
        )
            .prop_map(|((src, dst, traffic_class, hop_limit), flow_label, ib)| {
                let p = Ipv6 {
                    src,
                    dst,
                    traffic_class,
                    flow_label,
                    hop_limit,
                };
                let mut b = vec![0; 48 + ib.len() + 4];
                b[48..48 + ib.len()].copy_from_slice(&ib);
                encode_udp(udp_sport(flow_label, 1, 2), ib.len() + 4, &mut b[40..]).unwrap();
                encode_ipv6(&p, ib.len() + 12, &mut b).unwrap();
                put_icrc(&mut b).unwrap();
                b
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn v4_frames_check(b in v4_frame()) {
            let f = parse(&b).unwrap();
            prop_assert_eq!(f.len, b.len());
            prop_assert_eq!(
                f.icrc(),
                icrc_reference(&b[..20], &b[20..28], &b[28..b.len() - 4])
            );
            prop_assert!(check_icrc(&b).is_ok());
            let h: [u8; 20] = b[..20].try_into().unwrap();
            // A header with its checksum in sums to all ones.
            let sum = h.chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum::<u32>();
            prop_assert_eq!((sum & 0xffff) + (sum >> 16), 0xffff);
        }

        #[test]
        fn v6_frames_check(b in v6_frame()) {
            prop_assert_eq!(parse(&b).unwrap().len, b.len());
            prop_assert!(check_icrc(&b).is_ok());
        }

        #[test]
        fn parse_never_panics(
            b in prop_oneof![
                v4_frame(),
                v6_frame(),
                proptest::collection::vec(any::<u8>(), 0..120),
            ],
            at in any::<prop::sample::Index>(),
            v in any::<u8>(),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut b = b;
            if !b.is_empty() {
                let i = at.index(b.len());
                b[i] = v;
                b.truncate(cut.index(b.len() + 1));
            }
            if let Ok(f) = parse(&b) {
                prop_assert!(f.len <= b.len());
                let _ = (f.icrc(), f.wire_icrc());
            }
            let _ = check_icrc(&b);
            let _ = put_icrc(&mut b);
        }
    }
}
