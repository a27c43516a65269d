// SPDX-License-Identifier: GPL-2.0

//! What a QP has in flight, as the transport keeps it: the WQEs taken from
//! the SQ and not completed, a message being received, a READ being
//! answered. Each holds the MRs it reads or writes, referenced.

use kernel::alloc::KVVec;
use kernel::prelude::*;

use crate::bindings as b;
use crate::ib::skb::Route;
use crate::mr::Keys;
use crate::packet::{self, Feth, Kind};
use crate::pkt::{Gather, Payload};
use crate::sgl::{MrCache, Sgl};
use crate::wqe::{wr, SendWqe};

/// The work completion opcode of a send WQE opcode.
pub(crate) fn wc_opcode(opcode: u32) -> u32 {
    match opcode {
        wr::RDMA_WRITE | wr::RDMA_WRITE_WITH_IMM => b::ib_wc_opcode_IB_WC_RDMA_WRITE,
        wr::RDMA_READ => b::ib_wc_opcode_IB_WC_RDMA_READ,
        wr::ATOMIC_CMP_AND_SWP => b::ib_wc_opcode_IB_WC_COMP_SWAP,
        wr::ATOMIC_FETCH_AND_ADD => b::ib_wc_opcode_IB_WC_FETCH_ADD,
        wr::LOCAL_INV => b::ib_wc_opcode_IB_WC_LOCAL_INV,
        wr::REG_MR => b::ib_wc_opcode_IB_WC_REG_MR,
        wr::BIND_MW => b::ib_wc_opcode_IB_WC_BIND_MW,
        wr::ATOMIC_WRITE => b::ib_wc_opcode_IB_WC_ATOMIC_WRITE,
        wr::FLUSH => b::ib_wc_opcode_IB_WC_FLUSH,
        _ => b::ib_wc_opcode_IB_WC_SEND,
    }
}

/// What a WQE in flight does.
pub(crate) enum Op {
    /// SEND or WRITE, with the bytes' source.
    Message(Kind, Source),
    /// READ, with the local SGEs its responses land in.
    Read(Sgl),
    /// An atomic, with the local SGE its original value lands in.
    Atomic(Sgl),
    /// ATOMIC_WRITE, with its 8 bytes, answered by an empty READ response.
    AtomicWrite([u8; 8]),
    /// FLUSH, answered the same way.
    Flush(Feth),
    /// Failed before a packet went out: completes with this status when it
    /// reaches the head, in order.
    Failed(u32),
}

/// A WQE in flight.
pub(crate) struct Pending {
    pub(crate) w: SendWqe,
    pub(crate) op: Op,
    pub(crate) first_psn: u32,
    /// PSNs it takes: its request packets, or a READ's response packets.
    pub(crate) npkts: u32,
    /// Of those, sent (requested, for a READ).
    pub(crate) sent: u32,
    /// READ response packets received.
    pub(crate) done: u32,
    pub(crate) mtu: u32,
    pub(crate) total: u64,
    /// UD: where the datagram goes.
    pub(crate) ud: Option<UdDest>,
}

/// Where a UD WQE's datagram goes, resolved from its AH when the WQE is
/// taken (an AH destroyed afterwards changes nothing).
#[derive(Clone, Copy)]
pub(crate) struct UdDest {
    pub(crate) route: Route,
    pub(crate) qpn: u32,
    pub(crate) qkey: u32,
    /// The port's MTU: the largest datagram.
    pub(crate) mtu: u32,
}

impl Pending {
    pub(crate) fn last_psn(&self) -> u32 {
        packet::psn_add(self.first_psn, self.npkts.saturating_sub(1))
    }

    /// Acknowledged by an ACK alone (READs and atomics need their response).
    pub(crate) fn acked_by_ack(&self) -> bool {
        matches!(self.op, Op::Message(..))
    }
}

/// Where the bytes of an outgoing message come from.
pub(crate) enum Source {
    Sgl(Sgl),
    Inline(KVec<u8>),
}

impl Source {
    /// Message bytes `[off, off + len)` as a packet's payload (see
    /// `Sgl::gather` for `by_ref`).
    pub(crate) fn gather(
        &self,
        keys: &Keys,
        cache: &mut MrCache,
        off: u64,
        len: usize,
        by_ref: bool,
    ) -> Result<Payload, Gather> {
        match self {
            Source::Sgl(s) => s.gather(keys, cache, off, len, by_ref),
            Source::Inline(v) => {
                let off = off as usize;
                let src = off
                    .checked_add(len)
                    .and_then(|end| v.get(off..end))
                    .ok_or(Gather::Access)?;
                let mut out = KVVec::with_capacity(len, GFP_KERNEL).map_err(|_| Gather::NoMem)?;
                out.extend_from_slice(src, GFP_KERNEL)
                    .map_err(|_| Gather::NoMem)?;
                Ok(Payload::Bytes(out))
            }
        }
    }

    pub(crate) fn total(&self) -> u64 {
        match self {
            Source::Sgl(s) => s.total,
            Source::Inline(v) => v.len() as u64,
        }
    }
}

/// A multi-packet message in progress.
pub(crate) enum Progress {
    Send {
        wr_id: u64,
        sgl: Sgl,
        received: u64,
    },
    /// The target is named by its rkey, checked again for every packet (a
    /// reference held across packets would make `dereg_mr` wait for a peer
    /// that may never send the rest).
    Write {
        rkey: u32,
        va: u64,
        total: u64,
        received: u64,
    },
}

/// A READ being answered.
pub(crate) struct ReadServe {
    /// Checked again for every packet, as for `Progress::Write`.
    pub(crate) rkey: u32,
    pub(crate) va: u64,
    pub(crate) len: u64,
    /// The PSN of the first response.
    pub(crate) psn: u32,
    pub(crate) count: u32,
    pub(crate) next: u32,
    pub(crate) mtu: u32,
}
