// SPDX-License-Identifier: GPL-2.0

//! A packet between QPs: the headers the transport reads (`packet::Hdr`)
//! and its payload, owned. Once sent it belongs to the destination, whose
//! tasks take it in their own time.

use kernel::alloc::KVVec;
use kernel::prelude::*;

use crate::ib::skb::Skb;
use crate::ip::NetworkHdr;
use crate::mr::{MrRef, PageRef, Src, PAGE_SIZE};
use crate::packet::Hdr;

pub(crate) struct Packet {
    pub(crate) hdr: Hdr,
    pub(crate) payload: Payload,
    /// UD: the packet's IP header as a UD receive buffer gets it (from the
    /// wire, or made for a datagram handed over on this device).
    pub(crate) grh: Option<NetworkHdr>,
    /// From the wire: the VLAN it came in on (`NO_VLAN` if none), which a
    /// kernel datagram's completion reports (the core finds the GID to
    /// answer from by it).
    pub(crate) vlan: u16,
}

impl Packet {
    pub(crate) fn new(hdr: Hdr) -> Self {
        Self::with(hdr, Payload::empty())
    }

    pub(crate) fn with(hdr: Hdr, payload: Payload) -> Self {
        Packet {
            hdr,
            payload,
            grh: None,
            vlan: crate::ib::skb::NO_VLAN,
        }
    }

    /// Its bytes from the BTH to the ICRC, as on the wire (loopback packets
    /// are counted the same; rxe's byte counters and the PMA's data
    /// counters count packets, not payloads).
    pub(crate) fn wire_len(&self) -> usize {
        let n = self.payload.len();
        crate::wire::wire_len(self.hdr.opcode, n).unwrap_or(n)
    }
}

/// Why a payload could not be gathered.
pub(crate) enum Gather {
    /// No memory for it: the packet counts as lost, and is sent again.
    NoMem,
    /// A source MR is gone or no longer allows the access.
    Access,
}

/// A packet's payload: its bytes, or references on the sender's pages
/// (loopback from user MRs, placed with one copy; see `PageRef`).
pub(crate) enum Payload {
    Bytes(KVVec<u8>),
    Pages {
        refs: KVec<PageRef>,
        len: usize,
        /// A READ response's MR, held until the requester placed the bytes:
        /// its deregistration waits, so that nothing of the MR is read once
        /// dereg returned (a sender's MRs are its WQE's until it completes).
        _mr: Option<MrRef>,
    },
    /// Received from the wire: `len` bytes at `off` of the skb's network
    /// bytes, placed straight from it.
    Wire {
        skb: Skb,
        off: usize,
        len: usize,
    },
}

impl Payload {
    pub(crate) const fn empty() -> Self {
        Payload::Bytes(KVVec::new())
    }

    /// `[iova, iova + len)` of `m`, whose access the caller checked.
    pub(crate) fn from_mr(m: &MrRef, iova: u64, len: usize) -> Result<Self, Gather> {
        if len > 0 {
            let cap = len / PAGE_SIZE as usize + 2;
            let mut refs = KVec::with_capacity(cap, GFP_KERNEL).map_err(|_| Gather::NoMem)?;
            if m.page_refs(iova, len as u64, &mut refs) {
                let mr = Some(m.try_clone().ok_or(Gather::Access)?);
                return Ok(Payload::Pages { refs, len, _mr: mr });
            }
        }
        let mut v = KVVec::with_capacity(len, GFP_KERNEL).map_err(|_| Gather::NoMem)?;
        if m.append_to(iova, len as u64, &mut v) {
            Ok(Payload::Bytes(v))
        } else {
            Err(Gather::Access)
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            Payload::Bytes(v) => v.len(),
            Payload::Pages { len, .. } | Payload::Wire { len, .. } => *len,
        }
    }

    pub(crate) fn src(&self) -> Src<'_> {
        match self {
            Payload::Bytes(v) => Src::Bytes(v),
            Payload::Pages { refs, len, .. } => Src::Pages(refs, *len),
            Payload::Wire { skb, off, len } => Src::Bytes(
                off.checked_add(*len)
                    .and_then(|end| skb.network().get(*off..end))
                    .unwrap_or(&[]),
            ),
        }
    }
}
