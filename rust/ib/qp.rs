// SPDX-License-Identifier: GPL-2.0

//! What a QP touches of the core: its `ib_qp` (events, kernel work
//! completions) and the core's table of QP state transitions.

use core::ptr::NonNull;

use super::skb::Route;
use crate::bindings as b;

/// The core's `ib_qp` of a QP, for its events and for kernel work
/// completions (`ib_wc.qp`). The core frees it only after `destroy_qp`,
/// which waits for every task of the QP that could use it.
#[derive(Clone, Copy)]
pub(crate) struct QpHandle(NonNull<b::ib_qp>);

impl QpHandle {
    /// # Safety
    ///
    /// `ib` is the `ib_qp` of a QP being created; it stays valid until its
    /// `destroy_qp` returns.
    pub(crate) unsafe fn new(ib: NonNull<b::ib_qp>) -> Self {
        QpHandle(ib)
    }
}

// SAFETY: an address the core keeps valid while the QP's tasks run (above); the core's event handlers may be called from any thread.
unsafe impl Send for QpHandle {}
// SAFETY: as above; `&QpHandle` only gives the address and raises events.
unsafe impl Sync for QpHandle {}

impl QpHandle {
    pub(crate) fn as_ptr(self) -> *mut b::ib_qp {
        self.0.as_ptr()
    }

    /// Raises an asynchronous event on the QP (its owner's event handler).
    pub(crate) fn event(self, event: b::ib_event_type) {
        // SAFETY: a live ib_qp (see the type); the handler takes its own locks.
        unsafe { b::oxe_qp_event(self.0.as_ptr(), event) };
    }

    /// Whether `route`'s source GID is still in its place in the device's
    /// GID table (an address deleted or replaced since is not sent from).
    pub(crate) fn source_ok(self, route: &Route) -> bool {
        // SAFETY: a live ib_qp (see the type); `saddr` is 16 bytes; the GID table's lock is IRQ-safe.
        unsafe { b::oxe_qp_gid_is(self.0.as_ptr(), route.sgid_index, route.saddr.as_ptr()) }
    }
}

/// Whether the core's transition table allows `cur -> new` with `mask` for
/// a QP of type `ty`.
pub(crate) fn transition_ok(ty: u32, cur: u32, new: u32, mask: u32) -> bool {
    // SAFETY: a pure function of its arguments.
    unsafe { b::ib_modify_qp_is_ok(cur, new, ty, mask) }
}

/// What the wire needs of a QP's address vector (modify_qp with IB_QP_AV).
#[derive(Clone, Copy, Default)]
pub(crate) struct Av {
    pub(crate) sgid: [u8; 16],
    /// Where `sgid` is in the GID table.
    pub(crate) sgid_index: u32,
    /// `dgid` is a GID of this device, `sgid` or another (then its packets
    /// are handed over, as rxe loops back a packet to its own MAC).
    pub(crate) local: bool,
    pub(crate) dgid: [u8; 16],
    pub(crate) flow_label: u32,
    pub(crate) hop_limit: u8,
    pub(crate) tclass: u8,
    /// The interface of the source GID's net device, when the vector was
    /// made (a VLAN's GID sends through the VLAN device).
    pub(crate) oif: i32,
}

/// The address vector of `a`; `None` without a GRH or a resolved source GID.
pub(crate) fn av(a: &b::ib_qp_attr) -> Option<Av> {
    ah_av(&a.ah_attr)
}

/// The address vector of `ah` (modify_qp's, create_ah's); `None` without a
/// GRH or a resolved source GID.
pub(crate) fn ah_av(ah: &b::rdma_ah_attr) -> Option<Av> {
    if u32::from(ah.ah_flags) & b::ib_ah_flags_IB_AH_GRH == 0 || ah.grh.sgid_attr.is_null() {
        return None;
    }
    // SAFETY: the core resolved the source GID for this verb and holds its attribute for the call (rdma_fill_sgid_attr); `raw` is the union's plain 16 bytes. The port has RoCEv2 GIDs only (RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP).
    let (sgid, dgid) = unsafe {
        (
            *(*ah.grh.sgid_attr).gid.raw.as_ref(),
            *ah.grh.dgid.raw.as_ref(),
        )
    };
    // SAFETY: the attribute is held for the call, as above.
    let oif = unsafe { b::oxe_gid_attr_ifindex(ah.grh.sgid_attr) };
    let local = sgid == dgid || {
        // SAFETY: as above; `dgid` is 16 bytes; the lookup takes the GID table's IRQ-safe lock.
        unsafe { b::oxe_gid_attr_is_local(ah.grh.sgid_attr, dgid.as_ptr()) }
    };
    Some(Av {
        sgid,
        sgid_index: ah.grh.sgid_index.into(),
        local,
        dgid,
        oif,
        flow_label: ah.grh.flow_label,
        hop_limit: ah.grh.hop_limit,
        tclass: ah.grh.traffic_class,
    })
}

impl Av {
    /// Where the vector's packets go on the wire: its GIDs as IP addresses
    /// (IPv4-mapped ones as IPv4), the UDP source port of the flow (as rxe:
    /// rdma_get_udp_sport of the flow label and both QPNs), the GRH's
    /// traffic class and hop limit. A destination GID of this device is
    /// loopback.
    pub(crate) fn route(&self, lqpn: u32, rqpn: u32) -> Route {
        Route {
            ipv6: self.sgid.get(..12) != Some(&crate::ip::V4_MAPPED_PREFIX[..]),
            saddr: self.sgid,
            daddr: self.dgid,
            sport: crate::ip::udp_sport(self.flow_label, lqpn, rqpn),
            tclass: self.tclass,
            ttl: self.hop_limit,
            oif: self.oif,
            local: self.local,
            sgid_index: self.sgid_index,
        }
    }
}
