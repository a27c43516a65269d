// SPDX-License-Identifier: GPL-2.0

//! What a CQ touches of the core's `ib_cq` (its `cqe` count, its handlers),
//! and completions: as the transport reports them (`Cqe`) and in the core's
//! formats.

use kernel::ffi::c_int;

use super::qp::QpHandle;
use super::{ib_ptr, CoreObject};
use crate::bindings as b;

/// A completion as the transport reports it.
#[derive(Clone, Copy)]
pub(crate) struct Cqe {
    pub(crate) wr_id: u64,
    pub(crate) status: u32,
    pub(crate) opcode: u32,
    pub(crate) byte_len: u32,
    /// Immediate data (network order, as carried) or invalidated rkey.
    pub(crate) ex: u32,
    pub(crate) wc_flags: u32,
    pub(crate) qp: QpHandle,
    pub(crate) qp_num: u32,
    pub(crate) src_qp: u32,
    /// Datagrams: the network the packet came over (RDMA_NETWORK_IPV4 or
    /// _IPV6), for kernel consumers; 0 otherwise.
    pub(crate) network: u8,
    /// Kernel datagrams: the VLAN they came in on (`IB_WC_WITH_VLAN`).
    pub(crate) vlan: u16,
}

/// Tells the core the ring's usable entries (`ib_cq.cqe`), at creation and
/// after a resize. The core reads it only in the verbs of this CQ.
pub(crate) fn publish_cqe<T: CoreObject<Ib = b::ib_cq>>(cq: &T, n: u32) {
    // SAFETY: a reference to a core object exists only for one the core allocated and set up (they are built in place in its memory); `cqe` is an aligned int the core reads only in the CQ's verbs, after they return.
    unsafe { (*ib_ptr(cq)).cqe = n as c_int };
}

/// Runs the consumer's completion handler. Called with none of the CQ's
/// locks held.
pub(crate) fn comp_handler<T: CoreObject<Ib = b::ib_cq>>(cq: &T) {
    // SAFETY: a live CQ, as for `publish_cqe`; the handler takes its own locks.
    unsafe { b::oxe_cq_comp_handler(ib_ptr(cq)) };
}

/// Reports an asynchronous event to the consumer. Called with none of the
/// CQ's locks held.
pub(crate) fn event<T: CoreObject<Ib = b::ib_cq>>(cq: &T, ty: b::ib_event_type) {
    // SAFETY: a live CQ, as for `publish_cqe`.
    unsafe { b::oxe_cq_event(ib_ptr(cq), ty) };
}

/// libibverbs' IBV_WC_WITH_INV. librxe hands the CQE to the application as
/// it is, so its flags must be libibverbs' values, which agree with the
/// kernel's IB_WC_* but for invalidation: the kernel's bit 2 is
/// IBV_WC_IP_CSUM_OK there (rdma_rxe writes it, and its users see a checksum
/// flag where an invalidation was).
const IBV_WC_WITH_INV: u32 = 1 << 3;

fn user_wc_flags(k: u32) -> u32 {
    let inv = b::ib_wc_flags_IB_WC_WITH_INVALIDATE;
    if k & inv != 0 {
        k & !inv | IBV_WC_WITH_INV
    } else {
        k
    }
}

/// `cqe` as user CQs carry it: `struct ib_uverbs_wc`.
pub(crate) fn uverbs_wc(cqe: &Cqe) -> b::ib_uverbs_wc {
    let mut wc: b::ib_uverbs_wc = pin_init::zeroed();
    wc.wr_id = cqe.wr_id;
    wc.status = cqe.status;
    wc.opcode = cqe.opcode;
    wc.byte_len = cqe.byte_len;
    // SAFETY: writing a plain integer member of the union.
    unsafe { *wc.ex.imm_data.as_mut() = cqe.ex };
    wc.qp_num = cqe.qp_num;
    wc.src_qp = cqe.src_qp;
    wc.wc_flags = user_wc_flags(cqe.wc_flags);
    wc.port_num = 1;
    wc
}

/// `cqe` as kernel CQs carry it: `struct ib_wc`.
pub(crate) fn kernel_wc(cqe: &Cqe) -> b::ib_wc {
    let mut wc: b::ib_wc = pin_init::zeroed();
    // SAFETY: writing plain integer members of the unions.
    unsafe {
        *wc.__bindgen_anon_1.wr_id.as_mut() = cqe.wr_id;
        *wc.ex.imm_data.as_mut() = cqe.ex;
    }
    wc.status = cqe.status;
    wc.opcode = cqe.opcode;
    wc.byte_len = cqe.byte_len;
    wc.qp = cqe.qp.as_ptr();
    wc.src_qp = cqe.src_qp;
    wc.wc_flags = cqe.wc_flags as c_int;
    if cqe.network != 0 {
        // The core builds the answer's AH from the GRH by this type
        // (ib_init_ah_attr_from_wc).
        wc.network_hdr_type = cqe.network;
        wc.wc_flags |= b::ib_wc_flags_IB_WC_WITH_NETWORK_HDR_TYPE as c_int;
    }
    if cqe.vlan != super::skb::NO_VLAN {
        // Else the core looks the answer's GID up without a VLAN and finds
        // none for a VLAN's address (ib_init_ah_attr_from_wc): rdma_cm over
        // a VLAN never connected.
        wc.vlan_id = cqe.vlan;
        wc.wc_flags |= b::ib_wc_flags_IB_WC_WITH_VLAN as c_int;
    }
    wc.port_num = 1;
    wc
}
