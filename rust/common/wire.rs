// SPDX-License-Identifier: GPL-2.0

//! The InfiniBand transport headers as RoCEv2 carries them after the UDP
//! header: BTH, the extended headers the opcode calls for (IBA 9.2-9.3, as
//! rdma_rxe lays them out in rxe_opcode.c), payload, pad to 4 bytes, ICRC.
//!
//! Decoding trusts nothing: every length is checked before a field is read,
//! and any input either decodes or comes back as a `DecodeError` that says
//! why (for the drop counters).

use crate::packet::{op, AtomicEth, Deth, Feth, Hdr, Nak, Reth, Syndrome, PSN_MASK, QPN_MASK};

pub const BTH_LEN: usize = 12;
pub const DETH_LEN: usize = 8;
pub const FETH_LEN: usize = 4;
pub const RETH_LEN: usize = 16;
pub const ATOMIC_ETH_LEN: usize = 28;
pub const AETH_LEN: usize = 4;
pub const ATOMIC_ACK_ETH_LEN: usize = 8;
pub const IMM_LEN: usize = 4;
pub const IETH_LEN: usize = 4;
pub const ICRC_LEN: usize = 4;
/// The longest BTH + extended headers (an atomic request).
pub const MAX_HDR_LEN: usize = BTH_LEN + ATOMIC_ETH_LEN;

/// The AETH credit count of an ACK: "invalid", as rxe sends, since no
/// end-to-end credits are kept.
const ACK_NO_CREDIT: u8 = 0x1f;

const SE: u8 = 0x80;
const PAD_SHIFT: u8 = 4;
const TVER_MASK: u8 = 0x0f;
const ACK_REQ: u32 = 0x8000_0000;

/// Why a packet was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Shorter than its headers, pad and ICRC.
    Truncated,
    /// An opcode this transport does not know.
    BadOpcode,
    /// BTH transport version not 0.
    BadVersion,
    /// Pad count larger than the payload it pads, or pad without payload.
    BadPad,
    /// Payload on an opcode that carries none, or a length not a multiple
    /// of 4 bytes.
    BadLength,
    /// A reserved AETH syndrome.
    BadSyndrome,
    /// Not a plain IPv4/IPv6 header carrying UDP (options, fragments,
    /// extension headers), or lengths that disagree with the buffer.
    BadIp,
    /// UDP length or destination port wrong.
    BadUdp,
    /// The ICRC does not match.
    BadIcrc,
}

/// Why a packet could not be built: all are bugs of the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EncodeError {
    /// The buffer is too short.
    NoRoom,
    BadOpcode,
    /// The opcode needs an extended header the `Hdr` lacks.
    Missing,
    /// A field does not fit (24-bit QPN/PSN/MSN, 5-bit RNR timer, a NAK
    /// kind with no AETH code).
    BadField,
    /// Payload on an opcode that carries none.
    Payload,
    /// Longer than IP can carry.
    TooLong,
}

/// The extended headers an opcode carries after the BTH. On the wire they
/// follow in this order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    pub deth: bool,
    pub feth: bool,
    pub reth: bool,
    pub atomic: bool,
    pub aeth: bool,
    pub atomic_ack: bool,
    pub imm: bool,
    pub ieth: bool,
    /// Carries a payload (possibly empty).
    pub payload: bool,
}

impl Layout {
    /// BTH and extended headers.
    pub const fn hdr_len(&self) -> usize {
        const fn n(has: bool, len: usize) -> usize {
            if has {
                len
            } else {
                0
            }
        }
        BTH_LEN
            + n(self.deth, DETH_LEN)
            + n(self.feth, FETH_LEN)
            + n(self.reth, RETH_LEN)
            + n(self.atomic, ATOMIC_ETH_LEN)
            + n(self.aeth, AETH_LEN)
            + n(self.atomic_ack, ATOMIC_ACK_ETH_LEN)
            + n(self.imm, IMM_LEN)
            + n(self.ieth, IETH_LEN)
    }
}

const DATA: Layout = Layout {
    deth: false,
    feth: false,
    reth: false,
    atomic: false,
    aeth: false,
    atomic_ack: false,
    imm: false,
    ieth: false,
    payload: true,
};
const NO_DATA: Layout = Layout {
    payload: false,
    ..DATA
};

/// The layout of `opcode`, `None` for one oxe does not speak (RD, XRC,
/// CNP, reserved).
pub const fn layout(opcode: u8) -> Option<Layout> {
    Some(match opcode {
        op::SEND_FIRST
        | op::SEND_MIDDLE
        | op::SEND_LAST
        | op::SEND_ONLY
        | op::WRITE_MIDDLE
        | op::WRITE_LAST
        | op::READ_RESPONSE_MIDDLE
        | op::UC_SEND_FIRST
        | op::UC_SEND_MIDDLE
        | op::UC_SEND_LAST
        | op::UC_SEND_ONLY
        | op::UC_WRITE_MIDDLE
        | op::UC_WRITE_LAST => DATA,
        op::SEND_LAST_IMM
        | op::SEND_ONLY_IMM
        | op::WRITE_LAST_IMM
        | op::UC_SEND_LAST_IMM
        | op::UC_SEND_ONLY_IMM
        | op::UC_WRITE_LAST_IMM => Layout { imm: true, ..DATA },
        op::WRITE_FIRST
        | op::WRITE_ONLY
        | op::UC_WRITE_FIRST
        | op::UC_WRITE_ONLY
        | op::ATOMIC_WRITE => Layout { reth: true, ..DATA },
        op::WRITE_ONLY_IMM | op::UC_WRITE_ONLY_IMM => Layout {
            reth: true,
            imm: true,
            ..DATA
        },
        op::READ_REQUEST => Layout {
            reth: true,
            ..NO_DATA
        },
        op::FLUSH => Layout {
            feth: true,
            reth: true,
            ..NO_DATA
        },
        op::READ_RESPONSE_FIRST | op::READ_RESPONSE_LAST | op::READ_RESPONSE_ONLY => {
            Layout { aeth: true, ..DATA }
        }
        op::ACKNOWLEDGE => Layout {
            aeth: true,
            ..NO_DATA
        },
        op::ATOMIC_ACKNOWLEDGE => Layout {
            aeth: true,
            atomic_ack: true,
            ..NO_DATA
        },
        op::COMPARE_SWAP | op::FETCH_ADD => Layout {
            atomic: true,
            ..NO_DATA
        },
        op::SEND_LAST_INV | op::SEND_ONLY_INV => Layout { ieth: true, ..DATA },
        op::UD_SEND_ONLY => Layout { deth: true, ..DATA },
        op::UD_SEND_ONLY_IMM => Layout {
            deth: true,
            imm: true,
            ..DATA
        },
        _ => return None,
    })
}

/// Pad bytes after a payload of `len` bytes (the BTH pad count).
pub const fn pad_len(len: usize) -> usize {
    (4 - len % 4) % 4
}

/// Bytes from the BTH to the end of the ICRC for `opcode` with a payload
/// of `payload_len` bytes; `None` if the opcode is unknown, carries no
/// payload but `payload_len` is not 0, or the sum overflows.
pub const fn wire_len(opcode: u8, payload_len: usize) -> Option<usize> {
    let Some(l) = layout(opcode) else {
        return None;
    };
    if !l.payload && payload_len != 0 {
        return None;
    }
    payload_len.checked_add(pad_len(payload_len) + l.hdr_len() + ICRC_LEN)
}

/// The AETH syndrome byte for `s`.
pub const fn syndrome_byte(s: Syndrome) -> Option<u8> {
    Some(match s {
        Syndrome::Ack => ACK_NO_CREDIT,
        Syndrome::Rnr(t) if t <= 0x1f => 0x20 | t,
        Syndrome::Rnr(_) => return None,
        Syndrome::Nak(Nak::Sequence) => 0x60,
        Syndrome::Nak(Nak::InvalidRequest) => 0x61,
        Syndrome::Nak(Nak::RemoteAccess) => 0x62,
        Syndrome::Nak(Nak::RemoteOperational) => 0x63,
        // An RNR NAK carries its timer: it is `Syndrome::Rnr`.
        Syndrome::Nak(Nak::Rnr) => return None,
    })
}

/// The syndrome an AETH byte stands for; `None` if reserved. ACK credit
/// counts are ignored (no end-to-end flow control).
pub const fn parse_syndrome(b: u8) -> Option<Syndrome> {
    Some(match b >> 5 {
        0 => Syndrome::Ack,
        1 => Syndrome::Rnr(b & 0x1f),
        3 => Syndrome::Nak(match b & 0x1f {
            0 => Nak::Sequence,
            1 => Nak::InvalidRequest,
            2 => Nak::RemoteAccess,
            3 => Nak::RemoteOperational,
            // Invalid RD request: an RC/UC peer never sends it, but it is
            // an invalid request all the same (no `Nak` kind of its own,
            // which the kernel matches exhaustively).
            4 => Nak::InvalidRequest,
            _ => return None,
        }),
        _ => return None,
    })
}

/// Bounds-checked big-endian writer; `ok` turns false on the first write
/// past the end.
struct W<'a> {
    buf: &'a mut [u8],
    pos: usize,
    ok: bool,
}

impl W<'_> {
    fn put(&mut self, b: &[u8]) {
        let dst = self
            .pos
            .checked_add(b.len())
            .and_then(|end| self.buf.get_mut(self.pos..end));
        match dst {
            Some(d) => {
                d.copy_from_slice(b);
                self.pos += b.len();
            }
            None => self.ok = false,
        }
    }
    fn u32(&mut self, v: u32) {
        self.put(&v.to_be_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.put(&v.to_be_bytes());
    }
}

/// Bounds-checked big-endian reader.
struct R<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl R<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let b = self
            .pos
            .checked_add(N)
            .and_then(|end| self.buf.get(self.pos..end))
            .and_then(|s| <[u8; N]>::try_from(s).ok())
            .ok_or(DecodeError::Truncated)?;
        self.pos += N;
        Ok(b)
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        self.take().map(u32::from_be_bytes)
    }
    fn u64(&mut self) -> Result<u64, DecodeError> {
        self.take().map(u64::from_be_bytes)
    }
}

fn need<T>(v: Option<T>) -> Result<T, EncodeError> {
    v.ok_or(EncodeError::Missing)
}

fn fits24(v: u32) -> Result<u32, EncodeError> {
    if v & !QPN_MASK == 0 {
        Ok(v)
    } else {
        Err(EncodeError::BadField)
    }
}

/// Writes the BTH and extended headers of `h` for a payload of
/// `payload_len` bytes at the start of `buf`; returns their length. The
/// opcode decides which headers go out: `Hdr` fields it does not call for
/// are ignored. On error `buf` may be partly written.
///
/// BTH M, FECN, BECN and the reserved bits go out as 0, as rxe sends them.
pub fn encode_hdr(h: &Hdr, payload_len: usize, buf: &mut [u8]) -> Result<usize, EncodeError> {
    let l = layout(h.opcode).ok_or(EncodeError::BadOpcode)?;
    if !l.payload && payload_len != 0 {
        return Err(EncodeError::Payload);
    }
    let qpn = fits24(h.qpn)?;
    let psn = fits24(h.psn)?;
    let len = l.hdr_len();
    if buf.len() < len {
        return Err(EncodeError::NoRoom);
    }
    let mut w = W {
        buf,
        pos: 0,
        ok: true,
    };
    // pad_len() < 4: the pad count fits its two bits.
    let flags = ((pad_len(payload_len) as u8) << PAD_SHIFT) | if h.solicited { SE } else { 0 };
    w.put(&[h.opcode, flags]);
    w.put(&h.pkey.to_be_bytes());
    w.u32(qpn);
    w.u32(psn | if h.ack_req { ACK_REQ } else { 0 });
    if l.deth {
        let d = need(h.deth)?;
        w.u32(d.qkey);
        w.u32(fits24(d.src_qpn)?);
    }
    if l.feth {
        let f = need(h.feth)?;
        if f.placement > 0xf || f.level > 3 {
            return Err(EncodeError::BadField);
        }
        w.u32(u32::from(f.level) << 4 | u32::from(f.placement));
    }
    if l.reth {
        let r = need(h.reth)?;
        w.u64(r.va);
        w.u32(r.rkey);
        w.u32(r.len);
    }
    if l.atomic {
        let a = need(h.atomic)?;
        w.u64(a.va);
        w.u32(a.rkey);
        // The wire has swap-or-add then compare; `AtomicEth` follows the
        // verbs, where FETCH_ADD's addend is in `compare_add`.
        if h.opcode == op::FETCH_ADD {
            w.u64(a.compare_add);
            w.u64(0);
        } else {
            w.u64(a.swap);
            w.u64(a.compare_add);
        }
    }
    if l.aeth {
        let s = syndrome_byte(need(h.aeth)?).ok_or(EncodeError::BadField)?;
        w.u32((u32::from(s) << 24) | fits24(h.msn)?);
    }
    if l.atomic_ack {
        w.u64(h.atomic_ack);
    }
    if l.imm {
        // Immediate data is kept as the bytes it arrived in.
        w.put(&h.ex.to_ne_bytes());
    }
    if l.ieth {
        w.u32(h.ex);
    }
    if w.ok && w.pos == len {
        Ok(len)
    } else {
        Err(EncodeError::NoRoom)
    }
}

/// Writes a whole packet from the BTH on: headers, `payload`, zero pad and
/// a zero ICRC (to be filled in by `ip::put_icrc` once the IP and UDP
/// headers are in front). Returns the bytes written.
pub fn encode(h: &Hdr, payload: &[u8], buf: &mut [u8]) -> Result<usize, EncodeError> {
    let total = wire_len(h.opcode, payload.len()).ok_or(match layout(h.opcode) {
        None => EncodeError::BadOpcode,
        Some(_) => EncodeError::Payload,
    })?;
    let buf = buf.get_mut(..total).ok_or(EncodeError::NoRoom)?;
    let hlen = encode_hdr(h, payload.len(), buf)?;
    let (data, rest) = buf
        .get_mut(hlen..)
        .ok_or(EncodeError::NoRoom)?
        .split_at_mut(payload.len().min(total.saturating_sub(hlen)));
    if data.len() != payload.len() {
        return Err(EncodeError::NoRoom);
    }
    data.copy_from_slice(payload);
    rest.fill(0);
    Ok(total)
}

/// A received packet: its headers and where its payload lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decoded {
    pub hdr: Hdr,
    /// Offset of the payload from the BTH.
    pub payload_off: usize,
    pub payload_len: usize,
}

impl Decoded {
    /// The payload within the packet it was decoded from.
    pub fn payload<'a>(&self, pkt: &'a [u8]) -> &'a [u8] {
        self.payload_off
            .checked_add(self.payload_len)
            .and_then(|end| pkt.get(self.payload_off..end))
            .unwrap_or(&[])
    }
}

/// Decodes `pkt`, the UDP payload: BTH through ICRC. The ICRC is not
/// checked here (it needs the IP and UDP headers: `ip::check_icrc`).
///
/// Ignored on receive, as rxe does: BTH M, FECN, BECN and reserved bits,
/// the AETH credit count, the DETH reserved byte, pad contents.
pub fn decode(pkt: &[u8]) -> Result<Decoded, DecodeError> {
    let mut r = R { buf: pkt, pos: 0 };
    let [opcode, flags] = r.take()?;
    let l = layout(opcode).ok_or(DecodeError::BadOpcode)?;
    if flags & TVER_MASK != 0 {
        return Err(DecodeError::BadVersion);
    }
    let hlen = l.hdr_len();
    let body = pkt
        .len()
        .checked_sub(hlen + ICRC_LEN)
        .ok_or(DecodeError::Truncated)?;
    let pad = usize::from((flags >> PAD_SHIFT) & 3);
    if !l.payload && body != 0 {
        return Err(DecodeError::BadLength);
    }
    if body % 4 != 0 {
        return Err(DecodeError::BadLength);
    }
    if pad > body {
        return Err(DecodeError::BadPad);
    }
    let mut h = Hdr::new(opcode, 0, 0);
    h.solicited = flags & SE != 0;
    h.pkey = u16::from_be_bytes(r.take()?);
    h.qpn = r.u32()? & QPN_MASK;
    let apsn = r.u32()?;
    h.ack_req = apsn & ACK_REQ != 0;
    h.psn = apsn & PSN_MASK;
    if l.deth {
        h.deth = Some(Deth {
            qkey: r.u32()?,
            src_qpn: r.u32()? & QPN_MASK,
        });
    }
    if l.feth {
        // The reserved bits are ignored, as rxe does.
        let bits = r.u32()?;
        h.feth = Some(Feth {
            placement: (bits & 0xf) as u8,
            level: ((bits >> 4) & 3) as u8,
        });
    }
    if l.reth {
        h.reth = Some(Reth {
            va: r.u64()?,
            rkey: r.u32()?,
            len: r.u32()?,
        });
    }
    if l.atomic {
        let va = r.u64()?;
        let rkey = r.u32()?;
        let swap_add = r.u64()?;
        let compare = r.u64()?;
        h.atomic = Some(if opcode == op::FETCH_ADD {
            AtomicEth {
                va,
                rkey,
                swap: 0,
                compare_add: swap_add,
            }
        } else {
            AtomicEth {
                va,
                rkey,
                swap: swap_add,
                compare_add: compare,
            }
        });
    }
    if l.aeth {
        let v = r.u32()?;
        h.aeth = Some(parse_syndrome((v >> 24) as u8).ok_or(DecodeError::BadSyndrome)?);
        h.msn = v & QPN_MASK;
    }
    if l.atomic_ack {
        h.atomic_ack = r.u64()?;
    }
    if l.imm {
        h.ex = u32::from_ne_bytes(r.take()?);
    }
    if l.ieth {
        h.ex = r.u32()?;
    }
    Ok(Decoded {
        hdr: h,
        payload_off: hlen,
        payload_len: body - pad,
    })
}

// An explicit path: the kernel includes this file with `#[path]`, which
// would otherwise look for `tests.rs` next to it.
#[cfg(test)]
#[path = "wire/tests.rs"]
pub(crate) mod tests;
