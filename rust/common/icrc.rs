// SPDX-License-Identifier: GPL-2.0

//! The RoCEv2 invariant CRC (IBA Annex A17.8), as rdma_rxe computes it
//! (rxe_icrc.c): CRC-32 (IEEE 802.3, reflected) started from all ones over
//! 8 bytes of 0xff standing for the LRH RoCEv2 lacks, the IP and UDP
//! headers and the BTH with every field a router may change set to ones,
//! then the rest of the packet up to the ICRC; inverted. It goes on the wire
//! least significant byte first (rxe stores the CPU-order value, and
//! hardware agrees on little-endian hosts).

use crate::wire::BTH_LEN;

const POLY: u32 = 0xedb8_8320;

/// Slice-by-8 tables: `T[0]` is the classic byte table; `T[k][b]` is
/// byte `b`'s contribution when `k` more bytes follow it in the same 8.
const fn make_tables() -> [[u32; 256]; 8] {
    let mut t = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            k += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut s = 1;
    while s < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = t[s - 1][i];
            t[s][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            i += 1;
        }
        s += 1;
    }
    t
}

static T: [[u32; 256]; 8] = make_tables();

/// One table entry: a `u8` index into 256 entries cannot miss.
#[inline(always)]
fn t(k: usize, b: u64) -> u32 {
    T.get(k).map_or(0, |row| row[usize::from(b as u8)])
}

/// Advances a CRC-32 register over `data`, with no inversion on either
/// side: the kernel's `crc32_le()`, which the kernel module may call instead
/// (see `icrc_with`; the module's `crc.rs` picks one at load). Slice-by-8, with no
/// vector registers: on short input, and where the CPU's carry-less
/// multiply is emulated (QEMU's TCG), it beats the kernel's PCLMULQDQ code
/// and its FPU save.
pub fn crc32_le(crc: u32, data: &[u8]) -> u32 {
    let mut c = crc;
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        let v = u64::from_le_bytes(b) ^ u64::from(c);
        c = t(7, v)
            ^ t(6, v >> 8)
            ^ t(5, v >> 16)
            ^ t(4, v >> 24)
            ^ t(3, v >> 32)
            ^ t(2, v >> 40)
            ^ t(1, v >> 48)
            ^ t(0, v >> 56);
    }
    crc32_le_bytewise(c, words.remainder())
}

/// A byte at a time (the remainder of `crc32_le`, and the tests' check of
/// the wider tables).
pub fn crc32_le_bytewise(crc: u32, data: &[u8]) -> u32 {
    data.iter()
        .fold(crc, |c, &b| t(0, u64::from(c as u8 ^ b)) ^ (c >> 8))
}

/// The register after all ones and the 8 bytes of masked LRH (rxe's seed).
const LRH_SEED: u32 = 0xdebb_20e3;

/// The IP header of a RoCEv2 packet, as the ICRC covers it (no IPv4
/// options, no IPv6 extension headers).
#[derive(Clone, Copy, Debug)]
pub enum Ip<'a> {
    V4(&'a [u8; 20]),
    V6(&'a [u8; 40]),
}

/// IPv4 with TOS, TTL and header checksum as ones.
fn mask_v4(h: &[u8; 20]) -> [u8; 20] {
    let mut m = *h;
    m[1] = 0xff;
    m[8] = 0xff;
    m[10] = 0xff;
    m[11] = 0xff;
    m
}

/// IPv6 with traffic class, flow label and hop limit as ones.
fn mask_v6(h: &[u8; 40]) -> [u8; 40] {
    let mut m = *h;
    m[0] |= 0x0f;
    m[1] = 0xff;
    m[2] = 0xff;
    m[3] = 0xff;
    m[7] = 0xff;
    m
}

/// The ICRC of a packet with `update` as the CRC-32 register update (the
/// kernel's `crc32_le()`, or ours). `ib` runs from the BTH to the end of
/// the pad, without the ICRC; the packet is read in place, only its 60
/// bytes of headers are copied to be masked.
pub fn icrc_with(
    mut update: impl FnMut(u32, &[u8]) -> u32,
    ip: Ip<'_>,
    udp: &[u8; 8],
    ib: &[u8],
) -> u32 {
    let mut crc = match ip {
        Ip::V4(h) => update(LRH_SEED, &mask_v4(h)),
        Ip::V6(h) => update(LRH_SEED, &mask_v6(h)),
    };
    let mut u = *udp;
    u[6] = 0xff;
    u[7] = 0xff;
    crc = update(crc, &u);
    let (bth, rest) = ib.split_at(ib.len().min(BTH_LEN));
    // FECN, BECN and the 6 reserved bits before the QPN.
    let mut b = [0u8; BTH_LEN];
    b.iter_mut().zip(bth).for_each(|(d, s)| *d = *s);
    b[4] = 0xff;
    crc = update(crc, b.get(..bth.len()).unwrap_or(&b));
    !update(crc, rest)
}

/// The ICRC that rdma_rxe (Linux 7.2 and before) puts on a FLUSH and
/// expects on one: its opcode table gives FLUSH no payload offset, so the
/// payload pass of its ICRC starts at the BTH again and covers the BTH
/// (unmasked), FETH and RETH a second time. A FLUSH with the standard ICRC
/// is dropped by rxe; oxe sends the standard one and takes either.
pub fn rxe_flush_icrc_with(
    mut update: impl FnMut(u32, &[u8]) -> u32,
    ip: Ip<'_>,
    udp: &[u8; 8],
    ib: &[u8],
) -> u32 {
    let standard = icrc_with(&mut update, ip, udp, ib);
    !update(!standard, ib)
}

/// The ICRC of a packet (`ib`: BTH to end of pad, without the ICRC).
pub fn icrc(ip: Ip<'_>, udp: &[u8; 8], ib: &[u8]) -> u32 {
    icrc_with(crc32_le, ip, udp, ib)
}

pub fn icrc_v4(ip: &[u8; 20], udp: &[u8; 8], ib: &[u8]) -> u32 {
    icrc(Ip::V4(ip), udp, ib)
}

pub fn icrc_v6(ip: &[u8; 40], udp: &[u8; 8], ib: &[u8]) -> u32 {
    icrc(Ip::V6(ip), udp, ib)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Bit at a time, straight from the definition: the reference the
    /// table is checked against.
    fn crc32_bitwise(data: &[u8]) -> u32 {
        let mut c = !0u32;
        for &b in data {
            c ^= u32::from(b);
            for _ in 0..8 {
                let lsb = c & 1;
                c >>= 1;
                if lsb != 0 {
                    c ^= 0xedb8_8320;
                }
            }
        }
        !c
    }

    /// The ICRC spelled out: the pseudo-packet as one buffer, masked by
    /// hand, through the bitwise CRC.
    pub(crate) fn icrc_reference(ip: &[u8], udp: &[u8], ib: &[u8]) -> u32 {
        let mut v = vec![0xffu8; 8];
        let mut ip = ip.to_vec();
        if ip.len() == 20 {
            for i in [1, 8, 10, 11] {
                ip[i] = 0xff;
            }
        } else {
            ip[0] |= 0x0f;
            for i in [1, 2, 3, 7] {
                ip[i] = 0xff;
            }
        }
        v.extend_from_slice(&ip);
        let mut udp = udp.to_vec();
        udp[6] = 0xff;
        udp[7] = 0xff;
        v.extend_from_slice(&udp);
        let mut ib = ib.to_vec();
        ib[4] = 0xff;
        v.extend_from_slice(&ib);
        crc32_bitwise(&v)
    }

    #[test]
    fn crc32_known_answers() {
        // The CRC-32 check value.
        assert_eq!(!crc32_le(!0, b"123456789"), 0xcbf4_3926);
        assert_eq!(crc32_bitwise(b"123456789"), 0xcbf4_3926);
        assert_eq!(crc32_le(!0, &[0xff; 8]), LRH_SEED);
        assert_eq!(crc32_le(5, &[]), 5);
    }

    #[test]
    fn short_ib_does_not_panic() {
        let ip = [0x45; 20];
        let udp = [0; 8];
        for n in 0..14 {
            let ib = vec![7u8; n];
            let _ = icrc_v4(&ip, &udp, &ib);
        }
    }

    fn v4_packet() -> impl Strategy<Value = ([u8; 20], [u8; 8], Vec<u8>)> {
        (
            any::<[u8; 20]>(),
            any::<[u8; 8]>(),
            proptest::collection::vec(any::<u8>(), BTH_LEN..200),
        )
    }

    fn v6_packet() -> impl Strategy<Value = (Vec<u8>, [u8; 8], Vec<u8>)> {
        (
            proptest::collection::vec(any::<u8>(), 40),
            any::<[u8; 8]>(),
            proptest::collection::vec(any::<u8>(), BTH_LEN..200),
        )
    }

    fn v6(ip: &[u8]) -> [u8; 40] {
        ip.try_into().unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn table_matches_bitwise(data in proptest::collection::vec(any::<u8>(), 0..300)) {
            prop_assert_eq!(!crc32_le(!0, &data), crc32_bitwise(&data));
        }

        #[test]
        fn sliced_matches_bytewise(
            data in proptest::collection::vec(any::<u8>(), 0..2100),
            skip in 0..8usize,
            seed in any::<u32>(),
        ) {
            // Every alignment of the 8-byte words, every remainder.
            let d = data.get(skip.min(data.len())..).unwrap_or(&[]);
            prop_assert_eq!(crc32_le(seed, d), crc32_le_bytewise(seed, d));
        }

        #[test]
        fn chunked_update_is_the_same(
            data in proptest::collection::vec(any::<u8>(), 0..300),
            cut in any::<prop::sample::Index>(),
        ) {
            let k = cut.index(data.len() + 1);
            let (a, b) = data.split_at(k);
            prop_assert_eq!(crc32_le(crc32_le(!0, a), b), crc32_le(!0, &data));
        }

        #[test]
        fn v4_matches_reference((ip, udp, ib) in v4_packet()) {
            prop_assert_eq!(icrc_v4(&ip, &udp, &ib), icrc_reference(&ip, &udp, &ib));
        }

        #[test]
        fn v6_matches_reference((ip, udp, ib) in v6_packet()) {
            prop_assert_eq!(icrc_v6(&v6(&ip), &udp, &ib), icrc_reference(&ip, &udp, &ib));
        }

        /// Fields routers rewrite do not count; every other byte does (a
        /// CRC catches every error burst up to 32 bits).
        #[test]
        fn v4_masks_exactly_the_variant_fields(
            (ip, udp, ib) in v4_packet(),
            at in any::<prop::sample::Index>(),
            flip in 1..=255u8,
        ) {
            let base = icrc_v4(&ip, &udp, &ib);
            let n = 20 + 8 + ib.len();
            let i = at.index(n);
            let (mut ip2, mut udp2, mut ib2) = (ip, udp, ib.clone());
            let masked = match i {
                0..=19 => { ip2[i] ^= flip; matches!(i, 1 | 8 | 10 | 11) }
                20..=27 => { udp2[i - 20] ^= flip; i >= 26 }
                _ => { ib2[i - 28] ^= flip; i == 28 + 4 }
            };
            let changed = icrc_v4(&ip2, &udp2, &ib2) != base;
            prop_assert_eq!(changed, !masked, "byte {}", i);
        }

        #[test]
        fn v6_masks_exactly_the_variant_fields(
            (ip, udp, ib) in v6_packet(),
            at in any::<prop::sample::Index>(),
            flip in 1..=255u8,
        ) {
            let base = icrc_v6(&v6(&ip), &udp, &ib);
            let n = 40 + 8 + ib.len();
            let i = at.index(n);
            let (mut ip2, mut udp2, mut ib2) = (v6(&ip), udp, ib.clone());
            let masked = match i {
                0 => {
                    ip2[0] ^= flip;
                    // Only the low nibble (top of the traffic class) is masked.
                    flip & 0xf0 == 0
                }
                1..=39 => { ip2[i] ^= flip; matches!(i, 1..=3 | 7) }
                40..=47 => { udp2[i - 40] ^= flip; i >= 46 }
                _ => { ib2[i - 48] ^= flip; i == 48 + 4 }
            };
            let changed = icrc_v6(&ip2, &udp2, &ib2) != base;
            prop_assert_eq!(changed, !masked, "byte {}", i);
        }
    }

    /// rxe's FLUSH ICRC is the standard one over the headers twice, the
    /// second copy unmasked; it never equals the standard one.
    #[test]
    fn rxe_flush_icrc_covers_the_headers_twice() {
        let ip = [
            0x45, 0, 0, 64, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 77, 0, 2, 10, 77, 0, 1,
        ];
        let udp = [0xc0, 0x10, 0x12, 0xb7, 0, 44, 0x12, 0x34];
        let mut ib = vec![0x1cu8, 0, 0xff, 0xff, 0, 0, 0, 17, 0x80, 0x12, 0x34, 0x56];
        ib.extend_from_slice(&[0, 0, 0, 1]);
        ib.extend_from_slice(&[0, 0, 0x7f, 0, 0, 0, 0x10, 0, 0, 0, 0x12, 0x34, 0, 1, 0, 0]);
        let twice = [&ib[..], &ib[..]].concat();
        let rxe = rxe_flush_icrc_with(crc32_le, Ip::V4(&ip), &udp, &ib);
        assert_eq!(rxe, icrc_v4(&ip, &udp, &twice));
        assert_ne!(rxe, icrc_v4(&ip, &udp, &ib));
    }
}
