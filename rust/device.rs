// SPDX-License-Identifier: GPL-2.0

//! The oxe `ib_device` and its per-process contexts: what they own, and the
//! answers of the device and port queries. Creation, registration and the
//! verbs' entry points are in `ffi/device.rs`.

use kernel::ffi::c_int;
use kernel::prelude::*;
use kernel::sync::atomic::{ordering, Atomic};
use kernel::types::Opaque;

use crate::ah::AhTable;
use crate::bindings as b;
use crate::ib;
use crate::ib::skb::NetHold;
use crate::key;
use crate::keys::KeyTable;
use crate::mr::OxeMr;
use crate::mw::Windows;
use crate::params;
use crate::qp::QpTable;
use crate::queue::Mmaps;
use crate::stats::Counters;

/// One oxe device. The core allocates it (`ib_alloc_device` with its size)
/// and frees it after `dealloc_driver`; `state` is initialised in place
/// right after the allocation and dropped in place by `dealloc_driver`.
#[repr(C)]
pub(crate) struct OxeDevice {
    ib: Opaque<b::ib_device>,
    state: DeviceState,
}
ib::core_object!(OxeDevice, ib: b::ib_device, state: DeviceState);

/// What an oxe device owns besides its `ib_device`.
#[pin_data]
pub(crate) struct DeviceState {
    /// lkey/rkey -> MR.
    #[pin]
    pub(crate) keys: KeyTable<OxeMr>,
    /// rkey -> memory window (indices of their own).
    #[pin]
    pub(crate) mws: Windows,
    /// QPN -> QP.
    #[pin]
    pub(crate) qps: QpTable,
    /// AH number -> AH.
    #[pin]
    pub(crate) ahs: AhTable,
    /// The next mmap offset handed out for a ring (rxe's scheme).
    mmap_offset: Atomic<u64>,
    /// The node GUID, derived from the netdev's MAC at creation.
    node_guid: u64,
    /// The netdev and its namespace's tunnel sockets.
    pub(crate) net: NetHold,
    pub(crate) stats: Counters,
    /// The port was down at the netdev's last event: `link_downed` counts
    /// the changes to down, not every event that finds it down.
    link_down: Atomic<bool>,
}

impl DeviceState {
    pub(crate) fn new(node_guid: u64, net: NetHold) -> impl PinInit<Self, Error> {
        try_pin_init!(DeviceState {
            keys <- KeyTable::new(key::MIN_INDEX, key::mr_max_index(mr_keys())),
            mws <- Windows::new(key::MW_MIN_INDEX, key::MAX_INDEX),
            qps <- QpTable::new(),
            ahs <- AhTable::new(),
            mmap_offset: Atomic::new(kernel::page::PAGE_SIZE as u64),
            node_guid,
            net,
            stats: Counters::new(),
            link_down: Atomic::new(false),
        }? Error)
    }

    /// The netdev's port state after one of its events: counts a change to
    /// down.
    pub(crate) fn port_now(&self, down: bool) {
        if !self.link_down.xchg(down, ordering::Relaxed) && down {
            self.stats.inc(crate::stats::Counter::LinkDowned);
        }
    }
}

impl OxeDevice {
    /// The device's state. Always there: the `Option` is for the callers
    /// written when it was set after allocation.
    pub(crate) fn state(&self) -> Option<&DeviceState> {
        Some(&self.state)
    }

    pub(crate) fn mmap_offsets(&self) -> &Atomic<u64> {
        &self.state.mmap_offset
    }

    /// The answer to `ibv_query_device`.
    pub(crate) fn query(&self, a: &mut b::ib_device_attr) {
        *a = pin_init::zeroed();
        a.vendor_id = params::VENDOR_ID;
        a.max_mr_size = params::MAX_MR_SIZE;
        a.page_size_cap = params::PAGE_SIZE_CAP;
        a.max_qp = params::MAX_QP as c_int;
        a.max_qp_wr = params::MAX_QP_WR as c_int;
        a.device_cap_flags = (b::ib_device_cap_flags_IB_DEVICE_BAD_PKEY_CNTR
            | b::ib_device_cap_flags_IB_DEVICE_BAD_QKEY_CNTR
            | b::ib_device_cap_flags_IB_DEVICE_CHANGE_PHY_PORT
            | b::ib_device_cap_flags_IB_DEVICE_PORT_ACTIVE_EVENT
            | b::ib_device_cap_flags_IB_DEVICE_SYS_IMAGE_GUID
            | b::ib_device_cap_flags_IB_DEVICE_RC_RNR_NAK_GEN
            | b::ib_device_cap_flags_IB_DEVICE_MEM_MGT_EXTENSIONS
            | b::ib_device_cap_flags_IB_DEVICE_SRQ_RESIZE
            | b::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW
            | b::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW_TYPE_2B
            | b::ib_device_cap_flags_IB_DEVICE_ATOMIC_WRITE
            | b::ib_device_cap_flags_IB_DEVICE_FLUSH_GLOBAL) as u64;
        a.kernel_cap_flags = u64::from(b::ib_kernel_cap_flags_IBK_ALLOW_USER_UNREG);
        if crate::mr::odp_enabled() {
            a.kernel_cap_flags |= u64::from(b::ib_kernel_cap_flags_IBK_ON_DEMAND_PAGING);
            a.odp_caps = odp_caps();
        }
        a.max_send_sge = params::MAX_SGE as c_int;
        a.max_recv_sge = params::MAX_SGE as c_int;
        a.max_sge_rd = params::MAX_SGE_RD as c_int;
        a.max_cq = params::MAX_CQ as c_int;
        a.max_cqe = params::MAX_CQE as c_int;
        let slots = key::mr_max_index(mr_keys()) - key::MIN_INDEX + 1;
        a.max_mr = slots.min(params::MAX_MR) as c_int;
        a.max_mw = params::MAX_MW as c_int;
        a.max_pd = params::MAX_PD as c_int;
        a.max_qp_rd_atom = params::MAX_QP_RD_ATOM as c_int;
        a.max_res_rd_atom = params::MAX_RES_RD_ATOM as c_int;
        a.max_qp_init_rd_atom = params::MAX_QP_INIT_RD_ATOM as c_int;
        a.atomic_cap = b::ib_atomic_cap_IB_ATOMIC_HCA;
        a.max_ah = params::MAX_AH as c_int;
        a.max_srq = params::MAX_SRQ as c_int;
        a.max_srq_wr = params::MAX_SRQ_WR as c_int;
        a.max_srq_sge = params::MAX_SRQ_SGE as c_int;
        a.max_mcast_grp = params::MAX_MCAST_GRP as c_int;
        a.max_mcast_qp_attach = params::MAX_MCAST_QP_ATTACH as c_int;
        a.max_total_mcast_qp_attach = params::MAX_TOTAL_MCAST_QP_ATTACH as c_int;
        a.max_fast_reg_page_list_len = params::MAX_FAST_REG_PAGE_LIST_LEN;
        a.max_pkeys = params::MAX_PKEYS;
        a.local_ca_ack_delay = params::LOCAL_CA_ACK_DELAY;
        // One system image per device: its node GUID, chosen at creation.
        a.sys_image_guid = self.state.node_guid;
    }
}

/// The device's only port.
pub(crate) const PORT: u32 = 1;

/// EINVAL for any port but [`PORT`].
pub(crate) fn check_port(port: u32) -> Result {
    if port != PORT {
        return Err(EINVAL);
    }
    Ok(())
}

/// The fixed part of `ibv_query_port`'s answer (the core zeroed `a`); the
/// link state and speed come from the netdev. `mtu` is the netdev's.
pub(crate) fn query_port(a: &mut b::ib_port_attr, mtu: u32) {
    a.max_mtu = b::ib_mtu_IB_MTU_4096;
    a.active_mtu = params::active_mtu(mtu) as b::ib_mtu;
    a.gid_tbl_len = params::PORT_GID_TBL_LEN;
    a.port_cap_flags = b::ib_port_capability_mask_bits_IB_PORT_CM_SUP;
    a.max_msg_sz = params::PORT_MAX_MSG_SZ;
    a.pkey_tbl_len = params::PORT_PKEY_TBL_LEN;
    a.max_vl_num = params::PORT_MAX_VL_NUM;
}

/// What never changes about the port: RoCEv2.
pub(crate) fn port_immutable(im: &mut b::ib_port_immutable) {
    im.core_cap_flags = b::RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP;
    im.pkey_tbl_len = c_int::from(params::PORT_PKEY_TBL_LEN);
    im.gid_tbl_len = params::PORT_GID_TBL_LEN;
    im.max_mad_size = b::IB_MGMT_MAD_SIZE;
}

/// The P_Key at `index` of `port`: only the default one.
pub(crate) fn pkey(port: u32, index: u16) -> Result<u16> {
    if port != PORT || index != 0 {
        return Err(EINVAL);
    }
    Ok(params::DEFAULT_PKEY_FULL)
}

/// Per-process context: the rings waiting to be mmapped. The core allocates
/// it (`size_ib_ucontext`); `mmaps` is initialised in place by
/// `alloc_ucontext` and dropped in place by `dealloc_ucontext`.
#[repr(C)]
pub(crate) struct OxeUcontext {
    ib: Opaque<b::ib_ucontext>,
    mmaps: Mmaps,
}
ib::core_object!(OxeUcontext, ib: b::ib_ucontext, mmaps: Mmaps);

impl OxeUcontext {
    /// The context's mmap offers. Always there: the `Result` is for the
    /// callers written when they were set after allocation.
    pub(crate) fn mmaps(&self) -> Result<&Mmaps> {
        Ok(&self.mmaps)
    }
}

/// What on-demand paging covers: every operation oxe has, on each QP type
/// that has it (the data path faults pages in the same way for all).
fn odp_caps() -> b::ib_odp_caps {
    let rc = b::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SEND
        | b::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_RECV
        | b::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_WRITE
        | b::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_READ
        | b::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_ATOMIC
        | b::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SRQ_RECV
        | b::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_ATOMIC_WRITE
        | b::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_FLUSH;
    let uc = b::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SEND
        | b::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_RECV
        | b::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_WRITE
        | b::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SRQ_RECV;
    let ud = b::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SEND
        | b::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_RECV
        | b::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SRQ_RECV;
    let mut caps: b::ib_odp_caps = pin_init::zeroed();
    caps.general_caps = u64::from(
        b::ib_odp_general_cap_bits_IB_ODP_SUPPORT
            | b::ib_odp_general_cap_bits_IB_ODP_SUPPORT_IMPLICIT,
    );
    caps.per_transport_caps.rc_odp_caps = rc;
    caps.per_transport_caps.uc_odp_caps = uc;
    caps.per_transport_caps.ud_odp_caps = ud;
    caps
}

/// The `mr_keys` parameter: the size of a new device's MR key table (0: all).
fn mr_keys() -> u32 {
    *crate::module_parameters::mr_keys.value()
}
