// SPDX-License-Identifier: GPL-2.0

//! Work requests as librxe writes them into the shared rings (`struct
//! rxe_send_wqe` and `struct rxe_recv_wqe` of the rxe uapi header, x86_64
//! layout; the kernel crate checks these offsets against bindgen's). Parsing
//! works on a private copy of the slot, so user space cannot change a WQE
//! while it is being executed.

/// Byte offsets in the slots. Every offset the parsers and writers below use
/// is named here, and the kernel crate asserts each one, and the width of
/// the field read there, against bindgen's layout (qp.rs).
pub mod layout {
    // struct rxe_send_wqe starts with its struct rxe_send_wr.
    pub const WR_ID: usize = 0;
    pub const OPCODE: usize = 12;
    pub const SEND_FLAGS: usize = 16;
    /// `ex`: immediate data or the rkey to invalidate.
    pub const EX: usize = 20;
    /// The `wr` union of rxe_send_wr.
    pub const WR: usize = 24;
    pub const RDMA_REMOTE_ADDR: usize = WR;
    pub const RDMA_RKEY: usize = WR + 8;
    pub const ATOMIC_REMOTE_ADDR: usize = WR;
    pub const ATOMIC_COMPARE_ADD: usize = WR + 8;
    pub const ATOMIC_SWAP: usize = WR + 16;
    pub const ATOMIC_RKEY: usize = WR + 24;
    /// The `ud` member (SENDs of UD QPs): the destination QP, its Q_Key and
    /// the address handle (`ah_num` of the AH oxe created).
    pub const UD_REMOTE_QPN: usize = WR;
    pub const UD_REMOTE_QKEY: usize = WR + 4;
    pub const UD_AH_NUM: usize = WR + 12;
    /// rxe's kernel-only `reg` member: an MR pointer there (`mr`), the MR's
    /// current key here; `key` is the key the MR gets.
    pub const REG_MR: usize = WR;
    pub const REG_KEY: usize = WR + 8;
    pub const REG_ACCESS: usize = WR + 12;
    /// oxe's own, past rxe's `reg` (kernel WQEs never reach user space):
    /// the MR's iova when the WR was posted, which a client may set after
    /// `ib_map_mr_sg` (NFS/RDMA puts its XID in the high bits, RDS zero).
    pub const REG_IOVA: usize = WR + 16;
    /// The `mw` member (BIND_MW): the window's range, the MR's lkey, the
    /// window's key now and the key it gets, and the rights it grants.
    pub const MW_ADDR: usize = WR;
    pub const MW_LENGTH: usize = WR + 8;
    pub const MW_MR_LKEY: usize = WR + 16;
    pub const MW_MW_RKEY: usize = WR + 20;
    pub const MW_RKEY: usize = WR + 24;
    pub const MW_ACCESS: usize = WR + 28;
    /// The `flush` member: the range's start (or, at level MR, any address
    /// of it), the rkey, the placement type and the selectivity level. Its
    /// `length` is never read: librxe's wr_flush puts the range's length in
    /// `dma.length` and leaves it zero, and rxe reads `dma` (as oxe does).
    pub const FLUSH_REMOTE_ADDR: usize = WR;
    pub const FLUSH_LENGTH: usize = WR + 8;
    pub const FLUSH_RKEY: usize = WR + 12;
    pub const FLUSH_TYPE: usize = WR + 16;
    pub const FLUSH_LEVEL: usize = WR + 17;
    /// `dma` (struct rxe_dma_info) of rxe_send_wqe and rxe_recv_wqe.
    pub const SEND_DMA: usize = 184;
    pub const RECV_DMA: usize = 16;
    // In struct rxe_dma_info.
    pub const DMA_LENGTH: usize = 0;
    pub const DMA_RESID: usize = 4;
    pub const DMA_NUM_SGE: usize = 12;
    /// The SGE array, which holds the inline data instead when there is any.
    pub const DMA_SGE: usize = 24;
    // struct rxe_recv_wqe.
    pub const RECV_WR_ID: usize = 0;
    // struct rxe_sge.
    pub const SGE_ADDR: usize = 0;
    pub const SGE_LENGTH: usize = 8;
    pub const SGE_LKEY: usize = 12;
}

use layout::*;

/// The fixed part of each WQE, where its SGEs (or inline data) begin.
pub const SEND_WQE_SGE_OFFSET: usize = SEND_DMA + DMA_SGE;
pub const RECV_WQE_SGE_OFFSET: usize = RECV_DMA + DMA_SGE;
pub const SGE_SIZE: usize = 16;

// Callers check the length first; out of range reads as 0, never panics.
fn u32_at(b: &[u8], off: usize) -> u32 {
    b.get(off..off + 4)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u32::from_ne_bytes)
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    b.get(off..off + 8)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u64::from_ne_bytes)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SendWqe {
    pub wr_id: u64,
    pub opcode: u32,
    pub send_flags: u32,
    /// Immediate data (as carried, network order) or rkey to invalidate.
    pub ex: u32,
    pub remote_addr: u64,
    pub rkey: u32,
    pub compare_add: u64,
    pub swap: u64,
    pub length: u32,
    pub num_sge: u32,
    /// REG_MR (kernel QPs only): the key the MR has now, and the access
    /// rights it gets with its new key (`rkey`) and its iova
    /// (`remote_addr`).
    pub mr_key: u32,
    pub access: u32,
    /// SENDs of UD QPs: the destination QP, its Q_Key and the address
    /// handle's number (read for every SEND; meaningless on other QPs).
    pub remote_qpn: u32,
    pub remote_qkey: u32,
    pub ah_num: u32,
    /// BIND_MW: the bind (zero for other opcodes) and the MR's lkey.
    pub bind: crate::mw_rules::Bind,
    pub bind_mr_key: u32,
    /// FLUSH: the placement type and the level (the range's length is
    /// `length`).
    pub flush_type: u8,
    pub flush_level: u8,
}

/// IB_WR_* opcodes (= IBV_WR_* below 0x20).
pub mod wr {
    pub const RDMA_WRITE: u32 = 0;
    pub const RDMA_WRITE_WITH_IMM: u32 = 1;
    pub const SEND: u32 = 2;
    pub const SEND_WITH_IMM: u32 = 3;
    pub const RDMA_READ: u32 = 4;
    pub const ATOMIC_CMP_AND_SWP: u32 = 5;
    pub const ATOMIC_FETCH_AND_ADD: u32 = 6;
    pub const LOCAL_INV: u32 = 7;
    pub const BIND_MW: u32 = 8;
    pub const FLUSH: u32 = 14;
    pub const SEND_WITH_INV: u32 = 9;
    /// The 8 bytes in the WQE's `dma.atomic_wr` (where inline data goes).
    pub const ATOMIC_WRITE: u32 = 15;
    /// Kernel only: not part of the user ABI.
    pub const REG_MR: u32 = 0x20;
}

/// IB_SEND_* flags.
pub mod flags {
    pub const FENCE: u32 = 1;
    pub const SIGNALED: u32 = 2;
    pub const SOLICITED: u32 = 4;
    pub const INLINE: u32 = 8;
}

impl SendWqe {
    /// Parses the fixed part of a send WQE; `None` if the slot is too short.
    pub fn parse(b: &[u8]) -> Option<SendWqe> {
        if b.len() < SEND_WQE_SGE_OFFSET {
            return None;
        }
        let opcode = u32_at(b, OPCODE);
        let atomic = matches!(opcode, wr::ATOMIC_CMP_AND_SWP | wr::ATOMIC_FETCH_AND_ADD);
        let reg = opcode == wr::REG_MR;
        let send = matches!(opcode, wr::SEND | wr::SEND_WITH_IMM);
        let ud = |off| if send { u32_at(b, off) } else { 0 };
        let bind = opcode == wr::BIND_MW;
        let flush = opcode == wr::FLUSH;
        let byte = |off| {
            if flush {
                b.get(off).copied().unwrap_or(0)
            } else {
                0
            }
        };
        let mw = |off| if bind { u32_at(b, off) } else { 0 };
        Some(SendWqe {
            wr_id: u64_at(b, WR_ID),
            opcode,
            send_flags: u32_at(b, SEND_FLAGS),
            ex: u32_at(b, EX),
            remote_addr: if reg {
                u64_at(b, REG_IOVA)
            } else if send || bind {
                0
            } else if atomic {
                u64_at(b, ATOMIC_REMOTE_ADDR)
            } else {
                u64_at(b, RDMA_REMOTE_ADDR)
            },
            rkey: if send || bind {
                0
            } else if flush {
                u32_at(b, FLUSH_RKEY)
            } else if reg {
                u32_at(b, REG_KEY)
            } else if atomic {
                u32_at(b, ATOMIC_RKEY)
            } else {
                u32_at(b, RDMA_RKEY)
            },
            compare_add: if atomic {
                u64_at(b, ATOMIC_COMPARE_ADD)
            } else {
                0
            },
            swap: if atomic { u64_at(b, ATOMIC_SWAP) } else { 0 },
            length: u32_at(b, SEND_DMA + DMA_LENGTH),
            num_sge: u32_at(b, SEND_DMA + DMA_NUM_SGE),
            // `write_send` stores it as the u64 `reg.mr` (little-endian).
            mr_key: if reg { u32_at(b, REG_MR) } else { 0 },
            access: if reg { u32_at(b, REG_ACCESS) } else { 0 },
            remote_qpn: ud(UD_REMOTE_QPN),
            remote_qkey: ud(UD_REMOTE_QKEY),
            ah_num: ud(UD_AH_NUM),
            bind: crate::mw_rules::Bind {
                mw_key: mw(MW_MW_RKEY),
                new_key: mw(MW_RKEY),
                addr: if bind { u64_at(b, MW_ADDR) } else { 0 },
                length: if bind { u64_at(b, MW_LENGTH) } else { 0 },
                access: mw(MW_ACCESS),
            },
            bind_mr_key: mw(MW_MR_LKEY),
            flush_type: byte(FLUSH_TYPE),
            flush_level: byte(FLUSH_LEVEL),
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct RecvWqe {
    pub wr_id: u64,
    pub num_sge: u32,
}

impl RecvWqe {
    pub fn parse(b: &[u8]) -> Option<RecvWqe> {
        if b.len() < RECV_WQE_SGE_OFFSET {
            return None;
        }
        Some(RecvWqe {
            wr_id: u64_at(b, RECV_WR_ID),
            num_sge: u32_at(b, RECV_DMA + DMA_NUM_SGE),
        })
    }
}

/// SGE `i` of a WQE whose SGE array starts at `base`, if the slot holds it.
pub fn sge(b: &[u8], base: usize, i: u32) -> Option<Sge> {
    let off = base.checked_add((i as usize).checked_mul(SGE_SIZE)?)?;
    if off.checked_add(SGE_SIZE)? > b.len() {
        return None;
    }
    Some(Sge {
        addr: u64_at(b, off + SGE_ADDR),
        length: u32_at(b, off + SGE_LENGTH),
        lkey: u32_at(b, off + SGE_LKEY),
    })
}

/// Stores `v` at `off`; the callers checked that the slot is long enough.
fn put(b: &mut [u8], off: usize, v: &[u8]) {
    if let Some(d) = b.get_mut(off..off + v.len()) {
        d.copy_from_slice(v);
    }
}

fn put_sge(b: &mut [u8], off: usize, s: &Sge) {
    put(b, off + SGE_ADDR, &s.addr.to_ne_bytes());
    put(b, off + SGE_LENGTH, &s.length.to_ne_bytes());
    put(b, off + SGE_LKEY, &s.lkey.to_ne_bytes());
}

/// Writes a send WQE the way librxe does (for kernel QPs and tests).
pub fn write_send(
    b: &mut [u8],
    w: &SendWqe,
    sges: impl ExactSizeIterator<Item = Sge>,
) -> Option<()> {
    let end = SEND_WQE_SGE_OFFSET.checked_add(sges.len().checked_mul(SGE_SIZE)?)?;
    b.get_mut(..end)?.fill(0);
    put(b, WR_ID, &w.wr_id.to_ne_bytes());
    put(b, OPCODE, &w.opcode.to_ne_bytes());
    put(b, SEND_FLAGS, &w.send_flags.to_ne_bytes());
    put(b, EX, &w.ex.to_ne_bytes());
    if w.opcode == wr::REG_MR {
        put(b, REG_MR, &u64::from(w.mr_key).to_ne_bytes());
        put(b, REG_KEY, &w.rkey.to_ne_bytes());
        put(b, REG_ACCESS, &w.access.to_ne_bytes());
        put(b, REG_IOVA, &w.remote_addr.to_ne_bytes());
    } else if matches!(w.opcode, wr::ATOMIC_CMP_AND_SWP | wr::ATOMIC_FETCH_AND_ADD) {
        put(b, ATOMIC_REMOTE_ADDR, &w.remote_addr.to_ne_bytes());
        put(b, ATOMIC_COMPARE_ADD, &w.compare_add.to_ne_bytes());
        put(b, ATOMIC_SWAP, &w.swap.to_ne_bytes());
        put(b, ATOMIC_RKEY, &w.rkey.to_ne_bytes());
    } else if w.opcode == wr::FLUSH {
        put(b, FLUSH_REMOTE_ADDR, &w.remote_addr.to_ne_bytes());
        put(b, FLUSH_RKEY, &w.rkey.to_ne_bytes());
        put(b, FLUSH_TYPE, &[w.flush_type]);
        put(b, FLUSH_LEVEL, &[w.flush_level]);
    } else if w.opcode == wr::BIND_MW {
        put(b, MW_ADDR, &w.bind.addr.to_ne_bytes());
        put(b, MW_LENGTH, &w.bind.length.to_ne_bytes());
        put(b, MW_MR_LKEY, &w.bind_mr_key.to_ne_bytes());
        put(b, MW_MW_RKEY, &w.bind.mw_key.to_ne_bytes());
        put(b, MW_RKEY, &w.bind.new_key.to_ne_bytes());
        put(b, MW_ACCESS, &w.bind.access.to_ne_bytes());
    } else if matches!(w.opcode, wr::SEND | wr::SEND_WITH_IMM) {
        put(b, UD_REMOTE_QPN, &w.remote_qpn.to_ne_bytes());
        put(b, UD_REMOTE_QKEY, &w.remote_qkey.to_ne_bytes());
        put(b, UD_AH_NUM, &w.ah_num.to_ne_bytes());
    } else {
        put(b, RDMA_REMOTE_ADDR, &w.remote_addr.to_ne_bytes());
        put(b, RDMA_RKEY, &w.rkey.to_ne_bytes());
    }
    put(b, SEND_DMA + DMA_LENGTH, &w.length.to_ne_bytes());
    put(b, SEND_DMA + DMA_RESID, &w.length.to_ne_bytes());
    put(
        b,
        SEND_DMA + DMA_NUM_SGE,
        &(sges.len() as u32).to_ne_bytes(),
    );
    for (i, s) in sges.enumerate() {
        put_sge(b, SEND_WQE_SGE_OFFSET + i * SGE_SIZE, &s);
    }
    Some(())
}

/// Writes a receive WQE the way librxe does.
pub fn write_recv(
    b: &mut [u8],
    wr_id: u64,
    sges: impl ExactSizeIterator<Item = Sge> + Clone,
) -> Option<()> {
    let end = RECV_WQE_SGE_OFFSET.checked_add(sges.len().checked_mul(SGE_SIZE)?)?;
    b.get_mut(..end)?.fill(0);
    put(b, RECV_WR_ID, &wr_id.to_ne_bytes());
    let len: u32 = sges.clone().map(|s| s.length).fold(0, u32::wrapping_add);
    put(b, RECV_DMA + DMA_LENGTH, &len.to_ne_bytes());
    put(b, RECV_DMA + DMA_RESID, &len.to_ne_bytes());
    put(
        b,
        RECV_DMA + DMA_NUM_SGE,
        &(sges.len() as u32).to_ne_bytes(),
    );
    for (i, s) in sges.enumerate() {
        put_sge(b, RECV_WQE_SGE_OFFSET + i * SGE_SIZE, &s);
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flush_roundtrip() {
        let mut buf = [0x33u8; 256];
        let w = SendWqe {
            wr_id: 3,
            opcode: wr::FLUSH,
            send_flags: flags::SIGNALED,
            remote_addr: 0x7f00_0000_1000,
            rkey: 0x1234,
            length: 4096,
            flush_type: 1,
            flush_level: 1,
            ..Default::default()
        };
        write_send(&mut buf, &w, core::iter::empty()).unwrap();
        assert_eq!(SendWqe::parse(&buf), Some(w));
        assert_eq!(u32_at(&buf, FLUSH_RKEY), 0x1234);
    }

    #[test]
    fn bind_mw_roundtrip() {
        let mut buf = [0x55u8; 256];
        let w = SendWqe {
            wr_id: 9,
            opcode: wr::BIND_MW,
            send_flags: flags::SIGNALED,
            bind: crate::mw_rules::Bind {
                mw_key: 0x8000_0012,
                new_key: 0x8000_0013,
                addr: 0x7f00_1234_5000,
                length: 0x3000,
                access: 2,
            },
            bind_mr_key: 0x456,
            ..Default::default()
        };
        write_send(&mut buf, &w, core::iter::empty()).unwrap();
        assert_eq!(SendWqe::parse(&buf), Some(w));
        // Only BIND_MW reads the `mw` member.
        let mut other = buf;
        put(&mut other, OPCODE, &wr::RDMA_WRITE.to_ne_bytes());
        let p = SendWqe::parse(&other).unwrap();
        assert_eq!(p.bind, crate::mw_rules::Bind::default());
        assert_eq!(p.bind_mr_key, 0);
    }

    #[test]
    fn send_roundtrip() {
        let mut buf = [0xaau8; 256];
        let w = SendWqe {
            wr_id: 7,
            opcode: wr::RDMA_WRITE,
            send_flags: flags::SIGNALED,
            ex: 0,
            remote_addr: 0x1000,
            rkey: 0x105,
            compare_add: 0,
            swap: 0,
            length: 64,
            num_sge: 1,
            ..Default::default()
        };
        let s = [Sge {
            addr: 0x2000,
            length: 64,
            lkey: 0x205,
        }];
        write_send(&mut buf, &w, s.iter().copied()).unwrap();
        assert_eq!(SendWqe::parse(&buf), Some(w));
        assert_eq!(sge(&buf, SEND_WQE_SGE_OFFSET, 0), Some(s[0]));
        assert_eq!(sge(&buf, SEND_WQE_SGE_OFFSET, 3), None);
        assert_eq!(sge(&buf, SEND_WQE_SGE_OFFSET, u32::MAX), None);
    }

    #[test]
    fn ud_send_roundtrip() {
        let mut buf = [0xaau8; 256];
        let w = SendWqe {
            wr_id: 3,
            opcode: wr::SEND_WITH_IMM,
            ex: 0x1234,
            length: 8,
            num_sge: 1,
            remote_qpn: 0x11,
            remote_qkey: 0x8000_0001,
            ah_num: 5,
            ..Default::default()
        };
        let s = [Sge::default()];
        write_send(&mut buf, &w, s.iter().copied()).unwrap();
        assert_eq!(SendWqe::parse(&buf), Some(w));
        // librxe's offsets: remote_qpn, remote_qkey, pkey_index, ah_num.
        assert_eq!(buf[layout::WR..layout::WR + 4], 0x11u32.to_ne_bytes());
        assert_eq!(buf[layout::WR + 12..layout::WR + 16], 5u32.to_ne_bytes());
        // Other opcodes carry no UD fields.
        let mut r = w;
        r.opcode = wr::RDMA_WRITE;
        write_send(&mut buf, &r, s.iter().copied()).unwrap();
        let p = SendWqe::parse(&buf).unwrap();
        assert_eq!((p.remote_qpn, p.remote_qkey, p.ah_num), (0, 0, 0));
    }

    #[test]
    fn atomic_layout() {
        let mut buf = [0u8; 256];
        let w = SendWqe {
            wr_id: 1,
            opcode: wr::ATOMIC_CMP_AND_SWP,
            remote_addr: 8,
            rkey: 9,
            compare_add: 10,
            swap: 11,
            length: 8,
            num_sge: 1,
            ..Default::default()
        };
        write_send(&mut buf, &w, [Sge::default()].into_iter()).unwrap();
        assert_eq!(u32_at(&buf, 48), 9);
        assert_eq!(u64_at(&buf, 32), 10);
        assert_eq!(SendWqe::parse(&buf), Some(w));
    }

    #[test]
    fn reg_mr_layout() {
        let mut buf = [0u8; 256];
        let w = SendWqe {
            wr_id: 3,
            opcode: wr::REG_MR,
            rkey: 0x1207,
            mr_key: 0x1206,
            access: 0xf,
            remote_addr: 0x1234_5678_0000_0200,
            ..Default::default()
        };
        write_send(&mut buf, &w, [].into_iter()).unwrap();
        assert_eq!(u32_at(&buf, 32), 0x1207);
        assert_eq!(u64_at(&buf, 40), 0x1234_5678_0000_0200);
        assert_eq!(SendWqe::parse(&buf), Some(w));
    }

    #[test]
    fn recv_roundtrip() {
        let mut buf = [0u8; 64];
        let s = [Sge {
            addr: 1,
            length: 2,
            lkey: 3,
        }];
        write_recv(&mut buf, 42, s.iter().copied()).unwrap();
        assert_eq!(
            RecvWqe::parse(&buf),
            Some(RecvWqe {
                wr_id: 42,
                num_sge: 1
            })
        );
        assert_eq!(sge(&buf, RECV_WQE_SGE_OFFSET, 0), Some(s[0]));
        assert!(RecvWqe::parse(&buf[..10]).is_none());
    }
}
