// SPDX-License-Identifier: GPL-2.0

//! Tests of the transport-header codec.

use super::*;
use proptest::prelude::*;

/// Every opcode `layout` knows.
const OPCODES: [u8; 39] = [
    op::SEND_FIRST,
    op::SEND_MIDDLE,
    op::SEND_LAST,
    op::SEND_LAST_IMM,
    op::SEND_ONLY,
    op::SEND_ONLY_IMM,
    op::WRITE_FIRST,
    op::WRITE_MIDDLE,
    op::WRITE_LAST,
    op::WRITE_LAST_IMM,
    op::WRITE_ONLY,
    op::WRITE_ONLY_IMM,
    op::READ_REQUEST,
    op::READ_RESPONSE_FIRST,
    op::READ_RESPONSE_MIDDLE,
    op::READ_RESPONSE_LAST,
    op::READ_RESPONSE_ONLY,
    op::ACKNOWLEDGE,
    op::ATOMIC_ACKNOWLEDGE,
    op::COMPARE_SWAP,
    op::FETCH_ADD,
    op::SEND_LAST_INV,
    op::SEND_ONLY_INV,
    op::UC_SEND_FIRST,
    op::UC_SEND_MIDDLE,
    op::UC_SEND_LAST,
    op::UC_SEND_LAST_IMM,
    op::UC_SEND_ONLY,
    op::UC_SEND_ONLY_IMM,
    op::UC_WRITE_FIRST,
    op::UC_WRITE_MIDDLE,
    op::UC_WRITE_LAST,
    op::UC_WRITE_LAST_IMM,
    op::UC_WRITE_ONLY,
    op::UC_WRITE_ONLY_IMM,
    op::UD_SEND_ONLY,
    op::UD_SEND_ONLY_IMM,
    op::ATOMIC_WRITE,
    op::FLUSH,
];

const RETH: Reth = Reth {
    va: 0x0102_0304_0506_0708,
    rkey: 0x1122_3344,
    len: 0x0000_2000,
};

fn pkt(h: &Hdr, payload: &[u8]) -> Vec<u8> {
    let mut b = vec![0xaa; 128 + payload.len()];
    let n = encode(h, payload, &mut b).unwrap();
    b.truncate(n);
    assert_eq!(decode(&b).unwrap().hdr, *h);
    assert_eq!(decode(&b).unwrap().payload(&b), payload);
    b
}

#[test]
fn lengths_match_rxe_opcode_table() {
    // rxe_opcode.c `.length` (BTH + extended headers) per opcode.
    for (o, len) in [
        (op::SEND_FIRST, 12),
        (op::SEND_LAST_IMM, 16),
        (op::WRITE_FIRST, 28),
        (op::WRITE_LAST, 12),
        (op::WRITE_ONLY_IMM, 32),
        (op::READ_REQUEST, 28),
        (op::READ_RESPONSE_FIRST, 16),
        (op::READ_RESPONSE_MIDDLE, 12),
        (op::ACKNOWLEDGE, 16),
        (op::ATOMIC_ACKNOWLEDGE, 24),
        (op::COMPARE_SWAP, 40),
        (op::FETCH_ADD, 40),
        (op::SEND_ONLY_INV, 16),
        (op::UC_WRITE_ONLY_IMM, 32),
        (op::UC_SEND_MIDDLE, 12),
        (op::UD_SEND_ONLY, 20),
        (op::UD_SEND_ONLY_IMM, 24),
        (op::ATOMIC_WRITE, 28),
        (op::FLUSH, 32),
    ] {
        assert_eq!(layout(o).unwrap().hdr_len(), len, "opcode {o:#x}");
    }
    for o in 0..=255u8 {
        let l = layout(o);
        assert_eq!(l.is_some(), OPCODES.contains(&o), "opcode {o:#x}");
        assert!(l.is_none_or(|l| l.hdr_len() <= MAX_HDR_LEN));
    }
}

#[test]
fn bth() {
    let mut h = Hdr::new(op::SEND_ONLY, 0xabcdef, 0x123456);
    h.solicited = true;
    h.ack_req = true;
    h.pkey = 0x8001;
    let b = pkt(&h, &[1, 2, 3, 4, 5]);
    assert_eq!(
        b[..12],
        [
            0x04,
            0x80 | 3 << 4,
            0x80,
            0x01,
            0,
            0x12,
            0x34,
            0x56,
            0x80,
            0xab,
            0xcd,
            0xef
        ]
    );
    // Payload, 3 bytes of pad, 4 of ICRC left for the IP layer.
    assert_eq!(b[12..], [1, 2, 3, 4, 5, 0, 0, 0, 0, 0, 0, 0]);
    let d = decode(&b).unwrap();
    assert_eq!((d.payload_off, d.payload_len), (12, 5));

    let h = Hdr::new(op::SEND_MIDDLE, 0, 1);
    let b = pkt(&h, &[9; 8]);
    assert_eq!(b[..12], [0x01, 0, 0xff, 0xff, 0, 0, 0, 1, 0, 0, 0, 0]);
    assert_eq!(b.len(), 24);
    assert_eq!(pkt(&Hdr::new(op::SEND_LAST, 0, 1), &[]).len(), 16);
}

#[test]
fn reth_and_imm() {
    let mut h = Hdr::new(op::WRITE_ONLY_IMM, 7, 8);
    h.reth = Some(RETH);
    h.ex = u32::from_ne_bytes([0xde, 0xad, 0xbe, 0xef]);
    let b = pkt(&h, &[0x55; 3]);
    assert_eq!(b[12..20], 0x0102_0304_0506_0708u64.to_be_bytes());
    assert_eq!(b[20..28], [0x11, 0x22, 0x33, 0x44, 0, 0, 0x20, 0]);
    // Immediate data goes out in the bytes it was posted in.
    assert_eq!(b[28..32], [0xde, 0xad, 0xbe, 0xef]);
    assert_eq!(b[32..35], [0x55; 3]);
    assert_eq!(b[1] >> 4 & 3, 1);
    assert_eq!(b.len(), 32 + 4 + 4);

    for o in [op::WRITE_FIRST, op::WRITE_ONLY, op::UC_WRITE_FIRST] {
        let mut h = Hdr::new(o, 1, 2);
        h.reth = Some(RETH);
        let b = pkt(&h, &[1; 256]);
        assert_eq!(b[20..24], [0x11, 0x22, 0x33, 0x44]);
        assert_eq!(b[28], 1);
    }
    let mut h = Hdr::new(op::READ_REQUEST, 1, 2);
    h.reth = Some(RETH);
    assert_eq!(pkt(&h, &[]).len(), 28 + 4);

    let mut h = Hdr::new(op::SEND_LAST_IMM, 1, 2);
    h.ex = 0x0403_0201;
    assert_eq!(pkt(&h, &[])[12..16], 0x0403_0201u32.to_ne_bytes());
}

#[test]
fn ieth() {
    let mut h = Hdr::new(op::SEND_ONLY_INV, 1, 2);
    h.ex = 0x1234_5678;
    // The rkey is a number: big-endian like every other key.
    assert_eq!(pkt(&h, &[])[12..16], [0x12, 0x34, 0x56, 0x78]);
}

#[test]
fn aeth() {
    for (s, byte) in [
        (Syndrome::Ack, 0x1f),
        (Syndrome::Rnr(0), 0x20),
        (Syndrome::Rnr(14), 0x2e),
        (Syndrome::Rnr(31), 0x3f),
        (Syndrome::Nak(Nak::Sequence), 0x60),
        (Syndrome::Nak(Nak::InvalidRequest), 0x61),
        (Syndrome::Nak(Nak::RemoteAccess), 0x62),
        (Syndrome::Nak(Nak::RemoteOperational), 0x63),
    ] {
        let mut h = Hdr::new(op::ACKNOWLEDGE, 0x10203, 0x40506);
        h.aeth = Some(s);
        h.msn = 0xfedcba;
        let b = pkt(&h, &[]);
        assert_eq!(b[12..16], [byte, 0xfe, 0xdc, 0xba]);
        assert_eq!(b.len(), 20);
    }
    let mut h = Hdr::new(op::READ_RESPONSE_FIRST, 3, 4);
    h.aeth = Some(Syndrome::Ack);
    h.msn = 9;
    let b = pkt(&h, &[7; 16]);
    assert_eq!(b[12..16], [0x1f, 0, 0, 9]);
    assert_eq!(b[16..32], [7; 16]);
    // Middle responses carry no AETH: what the `Hdr` says is not sent.
    let mut h = Hdr::new(op::READ_RESPONSE_MIDDLE, 3, 4);
    h.aeth = Some(Syndrome::Ack);
    h.msn = 9;
    let mut b = [0; 64];
    let n = encode(&h, &[7; 16], &mut b).unwrap();
    assert_eq!(n, 32);
    assert_eq!(decode(&b[..n]).unwrap().hdr, Hdr::new(h.opcode, 3, 4));
}

#[test]
fn syndromes_on_receive() {
    // Credit counts are ignored; RD's NAK is an invalid request.
    assert_eq!(parse_syndrome(0x00), Some(Syndrome::Ack));
    assert_eq!(parse_syndrome(0x0b), Some(Syndrome::Ack));
    assert_eq!(
        parse_syndrome(0x64),
        Some(Syndrome::Nak(Nak::InvalidRequest))
    );
    for b in (0x40..0x60).chain(0x65..0x80).chain(0x80..=0xff) {
        assert_eq!(parse_syndrome(b), None, "{b:#x}");
    }
    let mut h = Hdr::new(op::ACKNOWLEDGE, 1, 2);
    h.aeth = Some(Syndrome::Ack);
    let mut b = pkt(&h, &[]);
    b[12] = 0x45;
    assert_eq!(decode(&b), Err(DecodeError::BadSyndrome));
}

#[test]
fn atomics() {
    let a = AtomicEth {
        va: 0x1000,
        rkey: 0xaabbccdd,
        swap: 0x5555,
        compare_add: 0x7777,
    };
    let mut h = Hdr::new(op::COMPARE_SWAP, 1, 2);
    h.atomic = Some(a);
    let b = pkt(&h, &[]);
    assert_eq!(b[12..20], 0x1000u64.to_be_bytes());
    assert_eq!(b[20..24], [0xaa, 0xbb, 0xcc, 0xdd]);
    assert_eq!(b[24..32], 0x5555u64.to_be_bytes());
    assert_eq!(b[32..40], 0x7777u64.to_be_bytes());
    assert_eq!(b.len(), 44);

    // FETCH_ADD's addend is the wire's swap-or-add field.
    let mut h = Hdr::new(op::FETCH_ADD, 1, 2);
    h.atomic = Some(AtomicEth { swap: 0, ..a });
    let b = pkt(&h, &[]);
    assert_eq!(b[24..32], 0x7777u64.to_be_bytes());
    assert_eq!(b[32..40], [0; 8]);

    let mut h = Hdr::new(op::ATOMIC_ACKNOWLEDGE, 1, 2);
    h.aeth = Some(Syndrome::Ack);
    h.msn = 3;
    h.atomic_ack = 0x0102_0304_0506_0708;
    let b = pkt(&h, &[]);
    assert_eq!(b[12..16], [0x1f, 0, 0, 3]);
    assert_eq!(b[16..24], 0x0102_0304_0506_0708u64.to_be_bytes());
    assert_eq!(b.len(), 28);
}

#[test]
fn ud_deth() {
    let mut h = Hdr::new(op::UD_SEND_ONLY_IMM, 5, 1);
    h.deth = Some(Deth {
        qkey: 0x8001_0000,
        src_qpn: 0xabcdef,
    });
    h.ex = 42;
    let b = pkt(&h, b"hello");
    assert_eq!(b[0], 0x65);
    assert_eq!(b[12..20], [0x80, 1, 0, 0, 0, 0xab, 0xcd, 0xef]);
    assert_eq!(b[20..24], 42u32.to_ne_bytes());
    assert_eq!(&b[24..29], b"hello");
    let mut h = Hdr::new(op::UD_SEND_ONLY, 5, 1);
    h.deth = Some(Deth::default());
    assert_eq!(pkt(&h, &[]).len(), 24);
}

/// An RDMA READ request rdma_rxe sent, captured on the wire: the UDP
/// payload of PcapPlusPlus's Tests/Packet++Test/PacketExamples/
/// InfiniBandPacket.dat (github.com/seladb/PcapPlusPlus, from its
/// soft-RoCE support, PR #1603).
pub(crate) const RXE_READ: [u8; 32] = [
    0x0c, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x80, 0x54, 0xcb, 0x63, 0x00, 0x00, 0x7f, 0xee,
    0x26, 0x0f, 0xb0, 0x00, 0x00, 0x00, 0x02, 0xb8, 0x00, 0x01, 0x00, 0x00, 0x08, 0xc6, 0x15, 0x4a,
];

/// The headers RXE_READ carries.
pub(crate) fn rxe_read_hdr() -> Hdr {
    let mut h = Hdr::new(op::READ_REQUEST, 0x54cb63, 0x11);
    h.ack_req = true;
    h.reth = Some(Reth {
        va: 0x7fee_260f_b000,
        rkey: 0x2b8,
        len: 0x10000,
    });
    h
}

#[test]
fn rxe_read_request() {
    let d = decode(&RXE_READ).unwrap();
    let h = rxe_read_hdr();
    assert_eq!(d.hdr, h);
    assert_eq!((d.payload_off, d.payload_len), (28, 0));
    let mut b = [0; 32];
    assert_eq!(encode(&h, &[], &mut b), Ok(32));
    assert_eq!(b[..28], RXE_READ[..28]);
}

#[test]
fn decode_rejects() {
    let mut h = Hdr::new(op::SEND_ONLY, 1, 2);
    let good = pkt(&h, &[1, 2, 3, 4]);
    let with = |i: usize, v: u8| {
        let mut b = good.clone();
        b[i] = v;
        decode(&b)
    };
    assert_eq!(decode(&[]), Err(DecodeError::Truncated));
    assert_eq!(decode(&good[..1]), Err(DecodeError::Truncated));
    assert_eq!(decode(&good[..15]), Err(DecodeError::Truncated));
    for o in [0x15, 0x18, 0x1e, 0x2c, 0x40, 0x60, 0x81, 0xff] {
        assert_eq!(with(0, o), Err(DecodeError::BadOpcode), "{o:#x}");
    }
    assert_eq!(with(1, 0x01), Err(DecodeError::BadVersion));
    // The M bit, FECN/BECN and reserved bits do not matter.
    assert!(with(1, 0x40).is_ok());
    assert!(with(4, 0xff).is_ok());
    assert!(with(8, 0x7f).is_ok());
    // 4 bytes of payload+pad: a pad count of up to 3 is consistent.
    assert_eq!(decode(&good[..good.len() - 2]), Err(DecodeError::BadLength));
    assert_eq!(with(1, 0x30).unwrap().payload_len, 1);
    let empty = pkt(&h, &[]);
    let mut b = empty.clone();
    b[1] = 0x10;
    assert_eq!(decode(&b), Err(DecodeError::BadPad));
    // No payload where the opcode has none.
    h.opcode = op::ACKNOWLEDGE;
    h.aeth = Some(Syndrome::Ack);
    let mut b = pkt(&h, &[]);
    b.extend_from_slice(&[0; 4]);
    assert_eq!(decode(&b), Err(DecodeError::BadLength));
    let mut b = pkt(&h, &[]);
    b[1] = 0x20;
    assert_eq!(decode(&b), Err(DecodeError::BadPad));
}

#[test]
fn encode_rejects() {
    let mut b = [0u8; 64];
    let h = Hdr::new(0x15, 0, 0);
    assert_eq!(encode(&h, &[], &mut b), Err(EncodeError::BadOpcode));
    assert_eq!(encode_hdr(&h, 0, &mut b), Err(EncodeError::BadOpcode));
    let h = Hdr::new(op::WRITE_FIRST, 0, 0);
    assert_eq!(encode(&h, &[], &mut b), Err(EncodeError::Missing));
    let h = Hdr::new(op::ACKNOWLEDGE, 0, 0);
    assert_eq!(encode(&h, &[], &mut b), Err(EncodeError::Missing));
    assert_eq!(encode(&h, &[1], &mut b), Err(EncodeError::Payload));
    let mut h = Hdr::new(op::ACKNOWLEDGE, 0, 0);
    h.aeth = Some(Syndrome::Rnr(32));
    assert_eq!(encode(&h, &[], &mut b), Err(EncodeError::BadField));
    h.aeth = Some(Syndrome::Nak(Nak::Rnr));
    assert_eq!(encode(&h, &[], &mut b), Err(EncodeError::BadField));
    h.aeth = Some(Syndrome::Ack);
    h.msn = 1 << 24;
    assert_eq!(encode(&h, &[], &mut b), Err(EncodeError::BadField));
    assert_eq!(
        encode(&Hdr::new(op::SEND_ONLY, 1 << 24, 0), &[], &mut b),
        Err(EncodeError::BadField)
    );
    assert_eq!(
        encode(&Hdr::new(op::SEND_ONLY, 0, 1 << 24), &[], &mut b),
        Err(EncodeError::BadField)
    );
    let h = Hdr::new(op::SEND_ONLY, 0, 0);
    assert_eq!(encode(&h, &[0; 48], &mut b), Ok(64));
    assert_eq!(encode(&h, &[0; 49], &mut b), Err(EncodeError::NoRoom));
    assert_eq!(encode_hdr(&h, 0, &mut b[..11]), Err(EncodeError::NoRoom));
    assert_eq!(encode_hdr(&h, 3, &mut b[..12]), Ok(12));
    assert_eq!(wire_len(op::SEND_ONLY, usize::MAX), None);
    assert_eq!(wire_len(op::READ_REQUEST, 1), None);
    assert_eq!(wire_len(op::SEND_ONLY, 1), Some(20));
}

/// Any `Hdr` the opcode's layout can carry, with only those fields set
/// (what decoding gives back).
fn hdr() -> impl Strategy<Value = Hdr> {
    (
        (
            prop::sample::select(OPCODES.to_vec()),
            0..=PSN_MASK,
            0..=QPN_MASK,
            any::<bool>(),
            any::<bool>(),
            any::<u16>(),
        ),
        (
            any::<(u64, u32, u32)>(),
            any::<(u64, u32, u64, u64)>(),
            (0u8..8, 0u8..32),
            0..=QPN_MASK,
            any::<u64>(),
            any::<u32>(),
            (any::<u32>(), 0..=QPN_MASK),
        ),
    )
        .prop_map(|((o, psn, qpn, ack_req, se, pkey), ext)| {
            let (reth, atomic, (class, timer), msn, atomic_ack, ex, deth) = ext;
            let l = layout(o).unwrap();
            let mut h = Hdr::new(o, psn, qpn);
            h.ack_req = ack_req;
            h.solicited = se;
            h.pkey = pkey;
            if l.deth {
                h.deth = Some(Deth {
                    qkey: deth.0,
                    src_qpn: deth.1,
                });
            }
            if l.reth {
                h.reth = Some(Reth {
                    va: reth.0,
                    rkey: reth.1,
                    len: reth.2,
                });
            }
            if l.feth {
                h.feth = Some(Feth {
                    placement: timer & 0xf,
                    level: class & 3,
                });
            }
            if l.atomic {
                h.atomic = Some(AtomicEth {
                    va: atomic.0,
                    rkey: atomic.1,
                    swap: if o == op::FETCH_ADD { 0 } else { atomic.2 },
                    compare_add: atomic.3,
                });
            }
            if l.aeth {
                h.aeth = Some(match class {
                    0..=3 => Syndrome::Ack,
                    4 => Syndrome::Rnr(timer),
                    _ => Syndrome::Nak(
                        [
                            Nak::Sequence,
                            Nak::InvalidRequest,
                            Nak::RemoteAccess,
                            Nak::RemoteOperational,
                        ][usize::from(timer % 4)],
                    ),
                });
                h.msn = msn;
            }
            if l.atomic_ack {
                h.atomic_ack = atomic_ack;
            }
            if l.imm || l.ieth {
                h.ex = ex;
            }
            h
        })
}

fn hdr_and_payload() -> impl Strategy<Value = (Hdr, Vec<u8>)> {
    (hdr(), proptest::collection::vec(any::<u8>(), 0..100)).prop_map(|(h, mut p)| {
        if !layout(h.opcode).unwrap().payload {
            p.clear();
        }
        (h, p)
    })
}

/// Mostly well-formed packets with random contents: a known opcode, a
/// valid TVer, a length that is a multiple of 4.
fn plausible() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::sample::select(OPCODES.to_vec()),
        any::<u8>(),
        any::<bool>(),
        proptest::collection::vec(any::<u8>(), 0..120),
    )
        .prop_map(|(o, flags, tver0, rest)| {
            let mut b = vec![o, if tver0 { flags & 0xf0 } else { flags }];
            b.extend(rest);
            b.truncate(b.len() / 4 * 4);
            b
        })
}

/// The decode/re-encode property the fuzz target checks.
fn reencodes(b: &[u8]) -> Result<(), TestCaseError> {
    let Ok(d) = decode(b) else {
        return Ok(());
    };
    let payload = d.payload(b);
    prop_assert_eq!(payload.len(), d.payload_len);
    let mut out = vec![0; b.len()];
    let n = encode(&d.hdr, payload, &mut out);
    prop_assert_eq!(n, Ok(b.len()));
    let again = decode(&out).unwrap();
    prop_assert_eq!(again, d);
    prop_assert_eq!(again.payload(&out), payload);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn roundtrip((h, payload) in hdr_and_payload()) {
        let mut b = vec![0; 256];
        let n = encode(&h, &payload, &mut b).unwrap();
        prop_assert_eq!(Some(n), wire_len(h.opcode, payload.len()));
        prop_assert_eq!(n % 4, 0);
        let d = decode(&b[..n]).unwrap();
        prop_assert_eq!(d.hdr, h);
        prop_assert_eq!(d.payload(&b[..n]), &payload[..]);
        prop_assert_eq!(d.payload_off, layout(h.opcode).unwrap().hdr_len());
        // Headers alone write the same bytes.
        let mut hb = [0; MAX_HDR_LEN];
        let hl = encode_hdr(&h, payload.len(), &mut hb).unwrap();
        prop_assert_eq!(&hb[..hl], &b[..hl]);
    }

    #[test]
    fn truncations_are_rejected((h, payload) in hdr_and_payload()) {
        let mut b = vec![0; 256];
        let n = encode(&h, &payload, &mut b).unwrap();
        let floor = layout(h.opcode).unwrap().hdr_len() + ICRC_LEN;
        for k in 0..n {
            let r = decode(&b[..k]);
            if k < floor {
                prop_assert_eq!(r, Err(DecodeError::Truncated));
            } else if let Ok(d) = r {
                // Shorter but consistent: its payload still lies within.
                prop_assert!(d.payload_off + d.payload_len + ICRC_LEN <= k);
            }
        }
    }

    #[test]
    fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(d) = decode(&b) {
            prop_assert!(d.payload_off + d.payload_len + ICRC_LEN <= b.len());
        }
        reencodes(&b)?;
    }

    #[test]
    fn decoded_packets_reencode(b in plausible()) {
        reencodes(&b)?;
    }

    #[test]
    fn encode_never_panics(
        h in hdr(),
        o in any::<u8>(),
        len in 0usize..80,
        room in 0usize..140,
    ) {
        let h = Hdr { opcode: o, ..h };
        let mut b = vec![0; room];
        let _ = encode(&h, &vec![1; len], &mut b);
        let _ = encode_hdr(&h, len, &mut b);
    }
}

#[test]
fn flush_feth_bits() {
    // rxe_hdr.h: placement type in bits 3-0, selectivity level in 5-4,
    // after the BTH and before the RETH.
    let mut h = Hdr::new(op::FLUSH, 5, 0x12);
    h.feth = Some(Feth {
        placement: crate::packet::flush::GLOBAL,
        level: crate::packet::flush::MR,
    });
    h.reth = Some(RETH);
    let b = pkt(&h, &[]);
    assert_eq!(&b[BTH_LEN..BTH_LEN + 4], &[0, 0, 0, 0x11]);
    assert_eq!(&b[BTH_LEN + 4..BTH_LEN + 12], &RETH.va.to_be_bytes());
    let mut bad = h;
    bad.feth = Some(Feth {
        placement: 0x10,
        level: 0,
    });
    assert_eq!(encode(&bad, &[], &mut [0; 64]), Err(EncodeError::BadField));
    // Reserved bits are ignored on receive.
    let mut r = b.clone();
    r[BTH_LEN] = 0xff;
    r[BTH_LEN + 3] |= 0xc0;
    assert_eq!(decode(&r).unwrap().hdr.feth, h.feth);
}
