// SPDX-License-Identifier: GPL-2.0

//! Transport packets as the requester, responder and completer see them:
//! BTH opcodes, 24-bit PSN arithmetic, how a message is cut into MTU-sized
//! packets, and AETH syndromes. `wire` puts them on the RoCEv2 wire.

/// BTH opcodes (IBA 9.2): RC = 0x00..0x1f, UC = 0x20.., UD = 0x60...
pub mod op {
    pub const SEND_FIRST: u8 = 0x00;
    pub const SEND_MIDDLE: u8 = 0x01;
    pub const SEND_LAST: u8 = 0x02;
    pub const SEND_LAST_IMM: u8 = 0x03;
    pub const SEND_ONLY: u8 = 0x04;
    pub const SEND_ONLY_IMM: u8 = 0x05;
    pub const WRITE_FIRST: u8 = 0x06;
    pub const WRITE_MIDDLE: u8 = 0x07;
    pub const WRITE_LAST: u8 = 0x08;
    pub const WRITE_LAST_IMM: u8 = 0x09;
    pub const WRITE_ONLY: u8 = 0x0a;
    pub const WRITE_ONLY_IMM: u8 = 0x0b;
    pub const READ_REQUEST: u8 = 0x0c;
    pub const READ_RESPONSE_FIRST: u8 = 0x0d;
    pub const READ_RESPONSE_MIDDLE: u8 = 0x0e;
    pub const READ_RESPONSE_LAST: u8 = 0x0f;
    pub const READ_RESPONSE_ONLY: u8 = 0x10;
    pub const ACKNOWLEDGE: u8 = 0x11;
    pub const ATOMIC_ACKNOWLEDGE: u8 = 0x12;
    pub const COMPARE_SWAP: u8 = 0x13;
    pub const FETCH_ADD: u8 = 0x14;
    pub const SEND_LAST_INV: u8 = 0x16;
    /// Makes earlier writes to a range or an MR visible (global) or
    /// persistent, answered by an empty READ_RESPONSE_ONLY.
    pub const FLUSH: u8 = 0x1c;
    /// An 8-byte write the responder makes atomically, answered by an
    /// empty READ_RESPONSE_ONLY (IBA 1.5 A19.4.2).
    pub const ATOMIC_WRITE: u8 = 0x1d;
    pub const SEND_ONLY_INV: u8 = 0x17;

    pub const UC_SEND_FIRST: u8 = 0x20;
    pub const UC_SEND_MIDDLE: u8 = 0x21;
    pub const UC_SEND_LAST: u8 = 0x22;
    pub const UC_SEND_LAST_IMM: u8 = 0x23;
    pub const UC_SEND_ONLY: u8 = 0x24;
    pub const UC_SEND_ONLY_IMM: u8 = 0x25;
    pub const UC_WRITE_FIRST: u8 = 0x26;
    pub const UC_WRITE_MIDDLE: u8 = 0x27;
    pub const UC_WRITE_LAST: u8 = 0x28;
    pub const UC_WRITE_LAST_IMM: u8 = 0x29;
    pub const UC_WRITE_ONLY: u8 = 0x2a;
    pub const UC_WRITE_ONLY_IMM: u8 = 0x2b;

    pub const UD_SEND_ONLY: u8 = 0x64;
    pub const UD_SEND_ONLY_IMM: u8 = 0x65;
}

/// PSNs are 24 bits and wrap.
pub const PSN_MASK: u32 = 0x00ff_ffff;

/// QPNs (and the AETH's MSN) are 24 bits.
pub const QPN_MASK: u32 = 0x00ff_ffff;

/// The default partition, full member: the only one RoCE ports have.
pub const DEFAULT_PKEY: u16 = 0xffff;

/// Whether a packet's P_Key matches the port's (IBA 10.9.3, rdma_rxe's
/// `pkey_match`): the same 15-bit partition, and one of the two a full
/// member. A RoCE port has only the default partition, as a full member.
pub const fn pkey_ok(pkey: u16) -> bool {
    pkey & 0x7fff == DEFAULT_PKEY & 0x7fff
}

/// The GSI QP's number and its well-known Q_Key (IBA 13.5.1, IB_QP1_QKEY).
pub const GSI_QPN: u32 = 1;
pub const GSI_QKEY: u32 = 0x8001_0000;

/// A Q_Key with this bit set is privileged (IBA 10.2.4): a UD SEND whose
/// work request carries one is sent with the QP's own Q_Key instead, and
/// only a privileged process may give a QP one (the core checks it).
pub const QKEY_PRIVILEGED: u32 = 0x8000_0000;

/// The Q_Key a UD SEND carries: the GSI QP always sends the GSI Q_Key; a
/// privileged Q_Key in the work request stands for the QP's own.
pub const fn send_qkey(src_qpn: u32, wr_qkey: u32, qp_qkey: u32) -> u32 {
    if src_qpn == GSI_QPN {
        GSI_QKEY
    } else if wr_qkey & QKEY_PRIVILEGED != 0 {
        qp_qkey
    } else {
        wr_qkey
    }
}

/// The Q_Key a UD QP takes datagrams with: the GSI QP takes the GSI Q_Key.
pub const fn recv_qkey(qpn: u32, qp_qkey: u32) -> u32 {
    if qpn == GSI_QPN {
        GSI_QKEY
    } else {
        qp_qkey
    }
}

/// A UD opcode (IBA 9.2: transport bits 011).
pub const fn is_ud(opcode: u8) -> bool {
    opcode & 0xe0 == 0x60
}

pub const fn psn_add(psn: u32, n: u32) -> u32 {
    psn.wrapping_add(n) & PSN_MASK
}

/// Signed distance `a - b` in PSN space: negative when `a` is behind `b`.
pub const fn psn_diff(a: u32, b: u32) -> i32 {
    ((a.wrapping_sub(b) << 8) as i32) >> 8
}

/// The message kinds a send queue carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Send,
    SendImm,
    SendInv,
    Write,
    WriteImm,
}

/// The opcode of packet `index` of `count` for a message of `kind`.
pub const fn opcode(kind: Kind, index: u32, count: u32) -> u8 {
    let first = index == 0;
    let last = index + 1 == count;
    match kind {
        Kind::Send | Kind::SendImm | Kind::SendInv => match (first, last) {
            (true, true) => match kind {
                Kind::SendImm => op::SEND_ONLY_IMM,
                Kind::SendInv => op::SEND_ONLY_INV,
                _ => op::SEND_ONLY,
            },
            (true, false) => op::SEND_FIRST,
            (false, false) => op::SEND_MIDDLE,
            (false, true) => match kind {
                Kind::SendImm => op::SEND_LAST_IMM,
                Kind::SendInv => op::SEND_LAST_INV,
                _ => op::SEND_LAST,
            },
        },
        Kind::Write | Kind::WriteImm => match (first, last) {
            (true, true) => {
                if matches!(kind, Kind::WriteImm) {
                    op::WRITE_ONLY_IMM
                } else {
                    op::WRITE_ONLY
                }
            }
            (true, false) => op::WRITE_FIRST,
            (false, false) => op::WRITE_MIDDLE,
            (false, true) => {
                if matches!(kind, Kind::WriteImm) {
                    op::WRITE_LAST_IMM
                } else {
                    op::WRITE_LAST
                }
            }
        },
    }
}

/// Packets a message of `len` bytes takes at path MTU `mtu` (a zero-length
/// message still takes one).
pub const fn packets(len: u64, mtu: u32) -> u32 {
    // A zero MTU is never negotiated; treat it as the smallest, not a panic.
    let mtu = if mtu == 0 { 256 } else { mtu as u64 };
    if len == 0 {
        1
    } else {
        (len / mtu + !len.is_multiple_of(mtu) as u64) as u32
    }
}

/// The longest DMA a RETH may ask for (IBA C9-94; rdma_rxe refuses more).
pub const MAX_DMA_LEN: u32 = 1 << 31;

/// Whether a request packet (RC opcode) carries as many payload bytes as
/// its place in a message allows (IBA C9-92, as rdma_rxe checks it): a
/// message is cut at `mtu`, so a FIRST or MIDDLE carries exactly `mtu`
/// bytes, a LAST 1 to `mtu`, an ONLY at most `mtu`. Other opcodes pass.
pub const fn request_len_ok(opcode: u8, len: usize, mtu: u32) -> bool {
    let mtu = mtu as usize;
    match opcode {
        op::SEND_FIRST | op::SEND_MIDDLE | op::WRITE_FIRST | op::WRITE_MIDDLE => len == mtu,
        op::SEND_LAST
        | op::SEND_LAST_IMM
        | op::SEND_LAST_INV
        | op::WRITE_LAST
        | op::WRITE_LAST_IMM => len != 0 && len <= mtu,
        op::SEND_ONLY
        | op::SEND_ONLY_IMM
        | op::SEND_ONLY_INV
        | op::WRITE_ONLY
        | op::WRITE_ONLY_IMM => len <= mtu,
        _ => true,
    }
}

/// The opcode of READ response packet `index` of `count`.
pub const fn read_response_opcode(index: u32, count: u32) -> u8 {
    match (index == 0, index + 1 == count) {
        (true, true) => op::READ_RESPONSE_ONLY,
        (true, false) => op::READ_RESPONSE_FIRST,
        (false, false) => op::READ_RESPONSE_MIDDLE,
        (false, true) => op::READ_RESPONSE_LAST,
    }
}

/// What a responder answers (AETH syndrome classes, IBA 9.7.5.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nak {
    /// Receiver not ready: no receive WQE posted.
    Rnr,
    /// PSN sequence error.
    Sequence,
    /// Invalid request (bad opcode order, length, alignment).
    InvalidRequest,
    /// Bad rkey, PD, range or rights.
    RemoteAccess,
    /// The responder failed (e.g. its recv CQ overflowed).
    RemoteOperational,
}

/// RDMA extended transport header: the remote range of a WRITE or READ.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reth {
    pub va: u64,
    pub rkey: u32,
    pub len: u32,
}

/// Atomic extended transport header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AtomicEth {
    pub va: u64,
    pub rkey: u32,
    pub swap: u64,
    pub compare_add: u64,
}

/// FLUSH extended transport header: what the flush makes of the data
/// (placement type bits, `FLUSH_GLOBAL` or `FLUSH_PERSISTENT`) and over what
/// (selectivity level: the RETH's range or the whole MR).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Feth {
    /// 4 bits.
    pub placement: u8,
    /// 2 bits.
    pub level: u8,
}

impl Feth {
    /// At least one placement type, none unknown, and a known level: what
    /// the requester asks of its poster and the responder of a request.
    pub fn valid(&self) -> bool {
        let types = flush::GLOBAL | flush::PERSISTENT;
        self.placement != 0
            && self.placement & !types == 0
            && matches!(self.level, flush::RANGE | flush::MR)
    }

    /// The access rights (`crate::access`) the placement types need of the
    /// QP and the MR.
    pub fn rights(&self) -> u32 {
        let mut right = 0;
        if self.placement & flush::GLOBAL != 0 {
            right |= crate::access::FLUSH_GLOBAL;
        }
        if self.placement & flush::PERSISTENT != 0 {
            right |= crate::access::FLUSH_PERSISTENT;
        }
        right
    }
}

/// `Feth::placement` bits and `Feth::level` values (ib_verbs.h's
/// IB_FLUSH_*, the same on the wire).
pub mod flush {
    pub const GLOBAL: u8 = 1;
    pub const PERSISTENT: u8 = 2;
    pub const RANGE: u8 = 0;
    pub const MR: u8 = 1;
}

/// Datagram extended transport header (UD).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Deth {
    pub qkey: u32,
    /// The sending QP (24 bits).
    pub src_qpn: u32,
}

/// The AETH of an ACKNOWLEDGE (or of the first and last READ responses).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Syndrome {
    Ack,
    /// Receiver not ready, with the responder's RNR timer code.
    Rnr(u8),
    Nak(Nak),
}

/// A packet's headers, as the transport fills and reads them. The wire
/// encodes them as BTH and the extended headers; loopback passes them as is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hdr {
    pub opcode: u8,
    pub psn: u32,
    /// The destination QP.
    pub qpn: u32,
    /// The requester asks for an ACK (BTH A bit).
    pub ack_req: bool,
    pub solicited: bool,
    pub reth: Option<Reth>,
    pub feth: Option<Feth>,
    pub atomic: Option<AtomicEth>,
    pub aeth: Option<Syndrome>,
    /// The original value an atomic read (AtomicAckETH).
    pub atomic_ack: u64,
    /// Immediate data (as carried) or the rkey to invalidate (IETH).
    pub ex: u32,
    /// BTH partition key.
    pub pkey: u16,
    /// UD only: the Q_Key and the sender.
    pub deth: Option<Deth>,
    /// The responder's message sequence number (24 bits), sent with `aeth`.
    pub msn: u32,
}

impl Hdr {
    pub const fn new(opcode: u8, psn: u32, qpn: u32) -> Self {
        Hdr {
            opcode,
            psn,
            qpn,
            ack_req: false,
            solicited: false,
            reth: None,
            feth: None,
            atomic: None,
            aeth: None,
            atomic_ack: 0,
            ex: 0,
            pkey: DEFAULT_PKEY,
            deth: None,
            msn: 0,
        }
    }

    /// A response (ACK, READ response, atomic ACK): for the completer.
    pub const fn is_response(&self) -> bool {
        matches!(
            self.opcode,
            op::READ_RESPONSE_FIRST
                | op::READ_RESPONSE_MIDDLE
                | op::READ_RESPONSE_LAST
                | op::READ_RESPONSE_ONLY
                | op::ACKNOWLEDGE
                | op::ATOMIC_ACKNOWLEDGE
        )
    }
}

/// UC's opcode for RC SEND or WRITE opcode `rc` (IBA 9.2: the same
/// packets, transport bits 001); `None` for the RC operations UC lacks
/// (READ, atomics, SEND with invalidate, responses).
pub const fn uc_opcode(rc: u8) -> Option<u8> {
    if rc <= op::WRITE_ONLY_IMM {
        Some(rc | op::UC_SEND_FIRST)
    } else {
        None
    }
}

/// The RC opcode a UC packet stands for, which the responder handles as
/// such; `None` for anything not a UC SEND or WRITE.
pub const fn rc_of_uc(uc: u8) -> Option<u8> {
    if uc >= op::UC_SEND_FIRST && uc <= op::UC_WRITE_ONLY_IMM {
        Some(uc & !op::UC_SEND_FIRST)
    } else {
        None
    }
}

/// Whether `opcode` (RC) begins a message: FIRST or ONLY.
pub const fn starts_message(opcode: u8) -> bool {
    matches!(
        opcode,
        op::SEND_FIRST
            | op::SEND_ONLY
            | op::SEND_ONLY_IMM
            | op::SEND_ONLY_INV
            | op::WRITE_FIRST
            | op::WRITE_ONLY
            | op::WRITE_ONLY_IMM
            | op::READ_REQUEST
            | op::COMPARE_SWAP
            | op::FETCH_ADD
            | op::ATOMIC_WRITE
            | op::FLUSH
    )
}

/// Whether a request packet asks for an ACK, `unasked` packets after the
/// last one that did: the last packet of a message, unless it may `defer`
/// to the next message (see `req::defers_ack`), and at least one in
/// `every`, so that the window keeps moving. Every ACK costs the responder a
/// packet and the requester a completer turn; a NIC coalesces them too.
pub const fn ack_req(last: bool, defer: bool, unasked: u32, every: u32) -> bool {
    (last && !defer) || (every != 0 && unasked.saturating_add(1) >= every)
}

/// Whether `psn` lies in `[first, first + count)`, in PSN space.
pub const fn psn_in(psn: u32, first: u32, count: u32) -> bool {
    let d = psn_diff(psn, first);
    d >= 0 && (d as u32) < count
}

/// Response PSNs one READ request asks for at most: a longer READ is asked
/// for in several requests, so that its responses stay within the window
/// (and the completer's queue).
pub const READ_CHUNK: u32 = crate::params::MAX_UNACKED_PSNS / 2;

/// The READ request that asks for response `index` (of `count`) on: up to
/// the end of its chunk, chunks counted from the READ's first PSN. A request
/// sent again after a loss, from where the responses stopped, so lies inside
/// the request it repeats: a responder keeps a resource per request and
/// serves a repeat only within it (rdma_rxe drops anything else). `index`
/// is below `count`.
pub const fn read_request_len(index: u32, count: u32) -> u32 {
    let to_chunk_end = READ_CHUNK - index % READ_CHUNK;
    let left = count.saturating_sub(index);
    if to_chunk_end < left {
        to_chunk_end
    } else {
        left
    }
}

/// True when response `done` (counted from 1) was the last one a READ
/// request of `read_request_len` asked for: that request is answered.
pub const fn read_request_answered(done: u32, count: u32) -> bool {
    done.is_multiple_of(READ_CHUNK) || done >= count
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Whatever messages follow and whichever of them defer their ACK,
        /// no more than `every` packets in a row go without asking, and the
        /// last packet of a message that may not defer always asks.
        #[test]
        fn acks_are_asked_at_least_every_n(msgs in proptest::collection::vec((1u32..100, proptest::bool::ANY), 1..50)) {
            const EVERY: u32 = 32;
            let mut unasked = 0u32;
            for (count, defer) in msgs {
                for i in 0..count {
                    let last = i + 1 == count;
                    let ask = ack_req(last, defer, unasked, EVERY);
                    if last && !defer {
                        proptest::prop_assert!(ask);
                    }
                    unasked = if ask { 0 } else { unasked + 1 };
                    proptest::prop_assert!(unasked < EVERY);
                }
            }
        }

        /// Requests from any resume point end where the original request
        /// from the chunk's start ends, and are answered exactly there.
        #[test]
        fn read_requests_repeat_within_the_original(count in 1u32..2000, at in 0u32..2000) {
            let index = at % count;
            let start = index - index % READ_CHUNK;
            let original = read_request_len(start, count);
            let again = read_request_len(index, count);
            proptest::prop_assert!(again >= 1);
            proptest::prop_assert_eq!(index + again, start + original);
            for done in index + 1..=index + again {
                proptest::prop_assert_eq!(read_request_answered(done, count), done == index + again);
            }
        }
    }

    proptest::proptest! {
        /// Every packet of a message cut as the requester cuts it passes
        /// the responder's length rule, and one byte more or less fails it
        /// where the rule is exact.
        #[test]
        fn messages_cut_at_the_mtu_pass_the_length_rule(
            len in 0u64..100_000,
            mtu_enum in 1u32..=5,
            kind in proptest::sample::select(vec![Kind::Send, Kind::SendImm, Kind::SendInv, Kind::Write, Kind::WriteImm]),
        ) {
            let mtu = 128u32 << mtu_enum;
            let count = packets(len, mtu);
            for i in 0..count {
                let off = u64::from(i) * u64::from(mtu);
                let n = (len - off).min(u64::from(mtu)) as usize;
                let o = opcode(kind, i, count);
                proptest::prop_assert!(request_len_ok(o, n, mtu));
                proptest::prop_assert!(!request_len_ok(o, mtu as usize + 1, mtu));
                if i + 1 < count {
                    proptest::prop_assert!(!request_len_ok(o, n - 1, mtu));
                }
            }
        }
    }

    #[test]
    fn pkeys() {
        assert!(pkey_ok(0xffff) && pkey_ok(0x7fff));
        assert!(!pkey_ok(0) && !pkey_ok(0x8000) && !pkey_ok(0x1234) && !pkey_ok(0xfffe));
    }

    #[test]
    fn request_lengths() {
        assert!(!request_len_ok(op::SEND_LAST, 0, 256));
        assert!(request_len_ok(op::SEND_ONLY, 0, 256));
        assert!(request_len_ok(op::WRITE_ONLY_IMM, 0, 256));
        assert!(!request_len_ok(op::WRITE_FIRST, 100, 256));
        assert!(!request_len_ok(op::SEND_MIDDLE, 4096, 1024));
        assert!(request_len_ok(op::READ_REQUEST, 0, 256));
        assert!(request_len_ok(op::FETCH_ADD, 0, 256));
    }

    #[test]
    fn feth_validity_and_rights() {
        use crate::access::{FLUSH_GLOBAL, FLUSH_PERSISTENT};
        let f = |placement, level| Feth { placement, level };
        for level in [flush::RANGE, flush::MR] {
            assert!(f(flush::GLOBAL, level).valid());
            assert!(f(flush::PERSISTENT, level).valid());
            assert!(f(flush::GLOBAL | flush::PERSISTENT, level).valid());
            // No type, or an unknown one.
            assert!(!f(0, level).valid());
            assert!(!f(4, level).valid());
            assert!(!f(flush::GLOBAL | 8, level).valid());
        }
        for level in 2..=255 {
            assert!(!f(flush::GLOBAL, level).valid());
        }
        assert_eq!(f(flush::GLOBAL, 0).rights(), FLUSH_GLOBAL);
        assert_eq!(f(flush::PERSISTENT, 0).rights(), FLUSH_PERSISTENT);
        assert_eq!(
            f(flush::GLOBAL | flush::PERSISTENT, 1).rights(),
            FLUSH_GLOBAL | FLUSH_PERSISTENT
        );
        assert_eq!(f(0, 0).rights(), 0);
    }

    #[test]
    fn ud_qkeys() {
        // The privileged bit in the WR means the QP's own Q_Key.
        assert_eq!(send_qkey(20, 0x1234, 0x77), 0x1234);
        assert_eq!(send_qkey(20, 0x8000_1234, 0x77), 0x77);
        // QP1 always sends and takes the GSI Q_Key.
        assert_eq!(send_qkey(GSI_QPN, 0x1234, 0x77), GSI_QKEY);
        assert_eq!(recv_qkey(GSI_QPN, 0), GSI_QKEY);
        assert_eq!(recv_qkey(20, 0x77), 0x77);
        assert!(is_ud(op::UD_SEND_ONLY) && is_ud(op::UD_SEND_ONLY_IMM));
        assert!(!is_ud(op::SEND_ONLY) && !is_ud(op::UC_SEND_ONLY));
    }

    #[test]
    fn uc_opcodes() {
        let pairs = [
            (op::SEND_FIRST, op::UC_SEND_FIRST),
            (op::SEND_MIDDLE, op::UC_SEND_MIDDLE),
            (op::SEND_LAST, op::UC_SEND_LAST),
            (op::SEND_LAST_IMM, op::UC_SEND_LAST_IMM),
            (op::SEND_ONLY, op::UC_SEND_ONLY),
            (op::SEND_ONLY_IMM, op::UC_SEND_ONLY_IMM),
            (op::WRITE_FIRST, op::UC_WRITE_FIRST),
            (op::WRITE_MIDDLE, op::UC_WRITE_MIDDLE),
            (op::WRITE_LAST, op::UC_WRITE_LAST),
            (op::WRITE_LAST_IMM, op::UC_WRITE_LAST_IMM),
            (op::WRITE_ONLY, op::UC_WRITE_ONLY),
            (op::WRITE_ONLY_IMM, op::UC_WRITE_ONLY_IMM),
        ];
        for (rc, uc) in pairs {
            assert_eq!(uc_opcode(rc), Some(uc));
            assert_eq!(rc_of_uc(uc), Some(rc));
        }
        for o in 0..=255u8 {
            let known = pairs.iter().any(|&(_, uc)| uc == o);
            assert_eq!(rc_of_uc(o).is_some(), known, "{o:#x}");
            let rc_known = pairs.iter().any(|&(rc, _)| rc == o);
            assert_eq!(uc_opcode(o).is_some(), rc_known, "{o:#x}");
        }
    }

    #[test]
    fn read_requests() {
        assert_eq!(read_request_len(0, 1), 1);
        assert_eq!(read_request_len(0, 1000), READ_CHUNK);
        assert_eq!(read_request_len(10, 1000), READ_CHUNK - 10);
        assert_eq!(read_request_len(READ_CHUNK, READ_CHUNK + 3), 3);
        assert!(read_request_answered(READ_CHUNK, 1000));
        assert!(!read_request_answered(READ_CHUNK - 1, 1000));
        assert!(read_request_answered(7, 7));
    }

    #[test]
    fn psn_wraps() {
        assert_eq!(psn_add(PSN_MASK, 1), 0);
        assert_eq!(psn_add(5, 3), 8);
        assert_eq!(psn_diff(0, PSN_MASK), 1);
        assert_eq!(psn_diff(PSN_MASK, 0), -1);
        assert_eq!(psn_diff(100, 40), 60);
        assert_eq!(psn_diff(40, 100), -60);
        assert_eq!(psn_diff(0x80_0000, 0), -0x80_0000);
    }

    #[test]
    fn segmentation() {
        assert_eq!(packets(0, 1024), 1);
        assert_eq!(packets(1, 1024), 1);
        assert_eq!(packets(1024, 1024), 1);
        assert_eq!(packets(1025, 1024), 2);
        assert_eq!(packets(1 << 31, 4096), 1 << 19);
        assert_eq!(opcode(Kind::Write, 0, 1), op::WRITE_ONLY);
        assert_eq!(opcode(Kind::WriteImm, 0, 1), op::WRITE_ONLY_IMM);
        assert_eq!(opcode(Kind::WriteImm, 0, 3), op::WRITE_FIRST);
        assert_eq!(opcode(Kind::WriteImm, 1, 3), op::WRITE_MIDDLE);
        assert_eq!(opcode(Kind::WriteImm, 2, 3), op::WRITE_LAST_IMM);
        assert_eq!(opcode(Kind::Send, 1, 2), op::SEND_LAST);
        assert_eq!(opcode(Kind::SendInv, 0, 1), op::SEND_ONLY_INV);
        assert_eq!(read_response_opcode(0, 1), op::READ_RESPONSE_ONLY);
        assert_eq!(read_response_opcode(1, 3), op::READ_RESPONSE_MIDDLE);
    }

    #[test]
    fn acks_and_ranges() {
        assert!(ack_req(true, false, 0, 32));
        assert!(!ack_req(false, false, 0, 32));
        assert!(!ack_req(true, true, 0, 32));
        assert!(!ack_req(true, true, 30, 32));
        assert!(ack_req(true, true, 31, 32));
        assert!(ack_req(false, false, 31, 32));
        assert!(ack_req(true, true, u32::MAX, 32));
        assert!(!ack_req(true, true, 5, 0));
        assert!(psn_in(PSN_MASK, PSN_MASK, 2));
        assert!(psn_in(0, PSN_MASK, 2));
        assert!(!psn_in(1, PSN_MASK, 2));
        assert!(!psn_in(PSN_MASK - 1, PSN_MASK, 2));
        let h = Hdr::new(op::ACKNOWLEDGE, 1, 2);
        assert!(h.is_response());
        assert!(!Hdr::new(op::READ_REQUEST, 1, 2).is_response());
    }
}
