// SPDX-License-Identifier: GPL-2.0

//! The oxe `ib_device`: creation on `rdma link add`, the device, port and
//! ucontext verbs, and removal when the netdev goes away.

use core::ffi::CStr;
use core::mem::size_of;
use core::ptr;

use kernel::ffi::c_int;
use kernel::prelude::*;

use crate::bindings as b;
use crate::cq::{self, OxeCq};
use crate::keys::KeyTable;
use crate::mr::{self, OxeMr};
use crate::params;
use crate::pd::{self, OxePd};
use crate::qp::{self, OxeQp, QpTable};
use crate::queue::Mmaps;
use kernel::sync::atomic::Atomic;

/// One oxe device. The core allocates it (`ib_alloc_device`) and frees it
/// after `dealloc_driver`; `ib` must come first.
#[repr(C)]
pub(crate) struct OxeDevice {
    ib: b::ib_device,
    /// Rust-owned state, set right after allocation, dropped in
    /// `dealloc_driver`.
    state: Option<Pin<KBox<DeviceState>>>,
}

/// What an oxe device owns besides its `ib_device`.
#[pin_data]
pub(crate) struct DeviceState {
    /// lkey/rkey -> MR.
    #[pin]
    pub(crate) keys: KeyTable<OxeMr>,
    /// QPN -> QP.
    #[pin]
    pub(crate) qps: QpTable,
    /// The next mmap offset handed out for a ring (rxe's scheme).
    mmap_offset: Atomic<u64>,
}

impl OxeDevice {
    /// # Safety
    ///
    /// `ib` must be a live oxe device.
    pub(crate) unsafe fn from_ib<'a>(ib: *mut b::ib_device) -> &'a OxeDevice {
        // SAFETY: `ib` is the first field of a `repr(C)` OxeDevice.
        unsafe { &*ib.cast::<OxeDevice>() }
    }

    pub(crate) fn state(&self) -> Option<&DeviceState> {
        self.state.as_deref()
    }

    pub(crate) fn mmap_offsets(&self) -> &Atomic<u64> {
        match self.state() {
            Some(s) => &s.mmap_offset,
            None => &NO_OFFSETS,
        }
    }
}

static NO_OFFSETS: Atomic<u64> = Atomic::new(0);

/// Per-process context: the rings waiting to be mmapped.
#[repr(C)]
pub(crate) struct OxeUcontext {
    ib: b::ib_ucontext,
    mmaps: Option<Pin<KBox<Mmaps>>>,
}

impl OxeUcontext {
    /// The ucontext of a user command.
    ///
    /// # Safety
    ///
    /// `udata` must be the driver udata of a live uverbs command on an oxe
    /// device.
    pub(crate) unsafe fn from_udata<'a>(udata: *mut b::ib_udata) -> Option<&'a OxeUcontext> {
        // SAFETY: per the function's contract.
        let uc = unsafe { b::oxe_udata_ucontext(udata) };
        // SAFETY: `ib` is the first field of a `repr(C)` OxeUcontext.
        (!uc.is_null()).then(|| unsafe { &*uc.cast::<OxeUcontext>() })
    }

    pub(crate) fn mmaps(&self) -> Result<&Mmaps> {
        self.mmaps.as_deref().ok_or(EINVAL)
    }
}

const PORT: u32 = 1;

fn errno(e: Error) -> c_int {
    e.to_errno()
}

/// The device's netdev with a reference held, dropped with the guard.
struct NetdevRef(*mut b::net_device);

impl NetdevRef {
    fn get(ib: *mut b::ib_device) -> Option<Self> {
        // SAFETY: `ib` is a live device; the result is referenced or NULL.
        let ndev = unsafe { b::ib_device_get_netdev(ib, PORT) };
        (!ndev.is_null()).then_some(NetdevRef(ndev))
    }
}

impl Drop for NetdevRef {
    fn drop(&mut self) {
        // SAFETY: the reference was taken by `ib_device_get_netdev`.
        unsafe { b::oxe_dev_put(self.0) };
    }
}

/// The MAC the device's GUIDs derive from, read once when the device is
/// created. A netdev without one (or with an all-zero one, as `lo`) gets a
/// random one instead, so that the GUID is still unique, and the same for as
/// long as the device exists.
fn mac_of(ndev: *mut b::net_device) -> [u8; 6] {
    let mut mac = [0u8; 6];
    // SAFETY: `ndev` is referenced by the caller; `mac` has room for 6 bytes.
    if !unsafe { b::oxe_netdev_mac(ndev, mac.as_mut_ptr()) } {
        // Connection management needs a unique GUID even without a MAC.
        // SAFETY: writes `mac.len()` bytes into `mac`.
        unsafe { b::get_random_bytes(mac.as_mut_ptr().cast(), mac.len()) };
        mac[0] = (mac[0] & 0xfe) | 0x02;
    }
    mac
}

/// Creates and registers a device named `name` on `ndev`.
pub(crate) fn add(name: &CStr, ndev: *mut b::net_device) -> Result {
    // SAFETY: the core holds a reference on `ndev` during newlink.
    if unsafe { b::oxe_is_vlan_dev(ndev) } {
        pr_err!(
            "{}: oxe runs on top of a real device only\n",
            name.to_str().unwrap_or("?")
        );
        return Err(EPERM);
    }
    // SAFETY: `ndev` is live; a found device comes back referenced.
    let existing = unsafe { b::ib_device_get_by_netdev(ndev, b::rdma_driver_id_RDMA_DRIVER_RXE) };
    if !existing.is_null() {
        // SAFETY: reference taken just above.
        unsafe { b::ib_device_put(existing) };
        return Err(EEXIST);
    }

    // SAFETY: the size covers `OxeDevice`, whose first field is the ib_device.
    let ib = unsafe { b::oxe_alloc_ib_device(size_of::<OxeDevice>()) };
    if ib.is_null() {
        return Err(ENOMEM);
    }
    let dev = ib.cast::<OxeDevice>();
    // SAFETY: fresh memory of OxeDevice's size; write without reading.
    unsafe { ptr::addr_of_mut!((*dev).state).write(None) };
    let state = KBox::pin_init(
        try_pin_init!(DeviceState {
            keys <- KeyTable::new(),
            qps <- QpTable::new(),
            mmap_offset: Atomic::new(kernel::page::PAGE_SIZE as u64),
        }? Error),
        GFP_KERNEL,
    );
    let ret = match state {
        // SAFETY: nothing else knows the device yet.
        Ok(state) => unsafe {
            (*dev).state = Some(state);
            init_and_register(ib, name, ndev)
        },
        Err(e) => e.to_errno(),
    };
    if ret != 0 {
        // This also calls dealloc_driver and drops the netdev reference.
        // SAFETY: registration failed, so the device is still ours to free.
        unsafe { b::ib_dealloc_device(ib) };
        return Err(Error::from_errno(ret));
    }
    Ok(())
}

/// # Safety
/// `ib` must be a freshly allocated, unregistered oxe device; `ndev` referenced.
unsafe fn init_and_register(ib: *mut b::ib_device, name: &CStr, ndev: *mut b::net_device) -> c_int {
    let guid = u64::from_ne_bytes(params::eui64_from_mac(mac_of(ndev)));
    // SAFETY: per the function's contract.
    unsafe {
        let dev = &mut *ib;
        dev.name_assign_type = b::rdma_nl_name_assign_type_RDMA_NAME_ASSIGN_TYPE_USER;
        let desc = b"oxe";
        for (d, s) in dev.node_desc.iter_mut().zip(desc) {
            *d = *s;
        }
        dev.node_type = b::RDMA_NODE_IB_CA as u8;
        dev.phys_port_cnt = 1;
        dev.num_comp_vectors = b::oxe_num_possible_cpus() as c_int;
        dev.local_dma_lkey = 0;
        dev.node_guid = guid;

        let mut ops: b::ib_device_ops = pin_init::zeroed();
        ops.owner = crate::THIS_MODULE.as_ptr();
        ops.driver_id = b::rdma_driver_id_RDMA_DRIVER_RXE;
        ops.uverbs_abi_ver = params::UVERBS_ABI_VERSION;
        ops.query_device = Some(query_device);
        ops.query_port = Some(query_port);
        ops.get_port_immutable = Some(get_port_immutable);
        ops.get_link_layer = Some(get_link_layer);
        ops.query_pkey = Some(query_pkey);
        ops.alloc_ucontext = Some(alloc_ucontext);
        ops.dealloc_ucontext = Some(dealloc_ucontext);
        ops.dealloc_driver = Some(dealloc_driver);
        ops.size_ib_ucontext = size_of::<OxeUcontext>();
        ops.alloc_pd = Some(pd::alloc_pd);
        ops.dealloc_pd = Some(pd::dealloc_pd);
        ops.size_ib_pd = size_of::<OxePd>();
        ops.reg_user_mr = Some(mr::reg_user_mr);
        ops.dereg_mr = Some(mr::dereg_mr);
        ops.rereg_user_mr = Some(mr::rereg_user_mr);
        ops.get_dma_mr = Some(mr::get_dma_mr);
        ops.alloc_mr = Some(mr::alloc_mr);
        ops.map_mr_sg = Some(mr::map_mr_sg);
        ops.fill_res_mr_entry = Some(mr::fill_res_mr_entry);
        ops.create_cq = Some(cq::create_cq);
        ops.destroy_cq = Some(cq::destroy_cq);
        ops.req_notify_cq = Some(cq::req_notify_cq);
        ops.poll_cq = Some(cq::poll_cq);
        ops.resize_user_cq = Some(cq::resize_user_cq);
        ops.size_ib_cq = size_of::<OxeCq>();
        ops.create_qp = Some(qp::create_qp);
        ops.modify_qp = Some(qp::modify_qp);
        ops.query_qp = Some(qp::query_qp);
        ops.destroy_qp = Some(qp::destroy_qp);
        ops.post_send = Some(qp::post_send);
        ops.post_recv = Some(qp::post_recv);
        ops.size_ib_qp = size_of::<OxeQp>();
        ops.mmap = Some(mmap);
        ops.disassociate_ucontext = Some(disassociate_ucontext);
        // The doorbell and completion events go through these commands.
        dev.uverbs_cmd_mask |= (1u64 << b::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SEND)
            | (1u64 << b::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_REQ_NOTIFY_CQ);
        b::ib_set_device_ops(ib, &ops);

        let ret = b::ib_device_set_netdev(ib, ndev, PORT);
        if ret != 0 {
            return ret;
        }
        b::ib_register_device(ib, name.as_char_ptr(), ptr::null_mut())
    }
}

/// Netdev notifier, NETDEV_UNREGISTER: the device goes with its netdev. Queued,
/// because rtnl is held here and unregistration takes it (ib_get_eth_speed).
pub(crate) fn netdev_unregistering(ndev: *mut b::net_device) {
    // SAFETY: `ndev` is valid during the notifier call.
    let ib = unsafe { b::ib_device_get_by_netdev(ndev, b::rdma_driver_id_RDMA_DRIVER_RXE) };
    if ib.is_null() {
        return;
    }
    // rdma_rxe is never loaded with oxe, but only our own devices are touched.
    // SAFETY: `ib` is referenced by ib_device_get_by_netdev.
    unsafe {
        if (*ib).ops.owner == crate::THIS_MODULE.as_ptr() {
            b::ib_unregister_device_queued(ib);
        }
        b::ib_device_put(ib);
    }
}

/// # Safety
///
/// Called by the RDMA core, with live objects and writable outputs.
unsafe extern "C" fn dealloc_driver(ib: *mut b::ib_device) {
    // The core frees the memory right after; drop what Rust owns in it.
    // SAFETY: `ib` is an oxe device, with `state` written at allocation.
    drop(unsafe { (*ib.cast::<OxeDevice>()).state.take() });
}

/// # Safety
///
/// Called by the RDMA core, with live objects and writable outputs.
unsafe extern "C" fn query_device(
    ib: *mut b::ib_device,
    attr: *mut b::ib_device_attr,
    udata: *mut b::ib_udata,
) -> c_int {
    // SAFETY: `udata` is NULL (kernel caller) or the command's udata.
    let ret = unsafe { b::oxe_udata_in_empty(udata) };
    if ret != 0 {
        return ret;
    }
    // SAFETY: the core passes a writable attribute block.
    let a = unsafe { &mut *attr };
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
        | b::ib_device_cap_flags_IB_DEVICE_MEM_MGT_EXTENSIONS) as u64;
    a.kernel_cap_flags = u64::from(b::ib_kernel_cap_flags_IBK_ALLOW_USER_UNREG);
    a.max_send_sge = params::MAX_SGE as c_int;
    a.max_recv_sge = params::MAX_SGE as c_int;
    a.max_sge_rd = params::MAX_SGE_RD as c_int;
    a.max_cq = params::MAX_CQ as c_int;
    a.max_cqe = params::MAX_CQE as c_int;
    a.max_mr = params::MAX_MR as c_int;
    a.max_pd = params::MAX_PD as c_int;
    a.max_qp_rd_atom = params::MAX_QP_RD_ATOM as c_int;
    a.max_res_rd_atom = params::MAX_RES_RD_ATOM as c_int;
    a.max_qp_init_rd_atom = params::MAX_QP_INIT_RD_ATOM as c_int;
    a.atomic_cap = b::ib_atomic_cap_IB_ATOMIC_HCA;
    // No SRQ, memory window, address handle or multicast verbs (the ops table
    // has none): their limits stay 0, as do those of the other missing verbs.
    a.max_fast_reg_page_list_len = params::MAX_FAST_REG_PAGE_LIST_LEN;
    a.max_pkeys = params::MAX_PKEYS;
    a.local_ca_ack_delay = params::LOCAL_CA_ACK_DELAY;
    // One system image per device: its node GUID, chosen at creation.
    // SAFETY: `ib` is live.
    a.sys_image_guid = unsafe { (*ib).node_guid };
    // SAFETY: `udata` is NULL (kernel caller) or the command's udata.
    unsafe { b::oxe_respond_empty_udata(udata) }
}

/// # Safety
///
/// Called by the RDMA core, with live objects and writable outputs.
unsafe extern "C" fn query_port(
    ib: *mut b::ib_device,
    port: u32,
    attr: *mut b::ib_port_attr,
) -> c_int {
    if port != PORT {
        return errno(EINVAL);
    }
    let Some(nd) = NetdevRef::get(ib) else {
        return errno(ENODEV);
    };
    // SAFETY: the core passes a zeroed, writable attribute block.
    let a = unsafe { &mut *attr };
    a.max_mtu = b::ib_mtu_IB_MTU_4096;
    // SAFETY: the netdev is referenced by `nd`.
    let mtu = unsafe { b::oxe_netdev_mtu(nd.0) };
    a.active_mtu = params::active_mtu(mtu) as b::ib_mtu;
    a.gid_tbl_len = params::PORT_GID_TBL_LEN;
    a.port_cap_flags = b::ib_port_capability_mask_bits_IB_PORT_CM_SUP;
    a.max_msg_sz = params::PORT_MAX_MSG_SZ;
    a.pkey_tbl_len = params::PORT_PKEY_TBL_LEN;
    a.max_vl_num = params::PORT_MAX_VL_NUM;
    let (mut state, mut phys_state) = (0, 0);
    // SAFETY: `nd` keeps the netdev alive; the outputs are plain locals.
    unsafe { b::oxe_netdev_port_state(nd.0, &mut state, &mut phys_state) };
    a.state = state;
    a.phys_state = phys_state as u8;
    // Takes rtnl: never called with it held (registration happens outside).
    // SAFETY: `ib` is live and the outputs point into `attr`.
    unsafe { b::ib_get_eth_speed(ib, port, &mut a.active_speed, &mut a.active_width) }
}

/// # Safety
///
/// Called by the RDMA core, with live objects and writable outputs.
unsafe extern "C" fn get_port_immutable(
    ib: *mut b::ib_device,
    port: u32,
    immutable: *mut b::ib_port_immutable,
) -> c_int {
    if port != PORT {
        return errno(EINVAL);
    }
    // SAFETY: the core passes a writable block.
    let im = unsafe { &mut *immutable };
    im.core_cap_flags = b::RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP;
    im.pkey_tbl_len = c_int::from(params::PORT_PKEY_TBL_LEN);
    im.gid_tbl_len = params::PORT_GID_TBL_LEN;
    im.max_mad_size = b::IB_MGMT_MAD_SIZE;
    let _ = ib;
    0
}

/// # Safety
///
/// Called by the RDMA core, with live objects and writable outputs.
unsafe extern "C" fn get_link_layer(_ib: *mut b::ib_device, _port: u32) -> b::rdma_link_layer {
    b::rdma_link_layer_IB_LINK_LAYER_ETHERNET
}

/// # Safety
///
/// Called by the RDMA core, with live objects and writable outputs.
unsafe extern "C" fn query_pkey(
    _ib: *mut b::ib_device,
    port: u32,
    index: u16,
    pkey: *mut u16,
) -> c_int {
    if port != PORT || index != 0 {
        return errno(EINVAL);
    }
    // SAFETY: the core passes a writable u16.
    unsafe { *pkey = params::DEFAULT_PKEY_FULL };
    0
}

/// # Safety
///
/// Called by the RDMA core, with live objects and writable outputs.
unsafe extern "C" fn alloc_ucontext(ib: *mut b::ib_ucontext, udata: *mut b::ib_udata) -> c_int {
    let uc = ib.cast::<OxeUcontext>();
    // SAFETY: fresh zeroed memory of OxeUcontext's size: write, don't drop.
    unsafe { ptr::addr_of_mut!((*uc).mmaps).write(None) };
    // librxe sends no driver data with GET_CONTEXT and expects none back.
    // SAFETY: `udata` is the command's udata.
    let ret = unsafe { b::oxe_udata_in_empty(udata) };
    if ret != 0 {
        return ret;
    }
    match KBox::pin_init(Mmaps::new(), GFP_KERNEL) {
        // SAFETY: the core does not use the context before we return.
        Ok(m) => unsafe {
            (*uc).mmaps = Some(m);
            0
        },
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// Called by the RDMA core, with live objects and writable outputs.
unsafe extern "C" fn dealloc_ucontext(ib: *mut b::ib_ucontext) {
    // SAFETY: our ucontext, last use.
    drop(unsafe { (*ib.cast::<OxeUcontext>()).mmaps.take() });
}

/// Lets the core remove the device (rmmod, `rdma link delete`, netdev gone)
/// while processes still hold it: the core then destroys their objects, so
/// every MR is unpinned and every QP's work is flushed. Nothing more to do
/// here: the rings they mmapped stay valid memory until they unmap them.
///
/// # Safety
///
/// Called by the core with a live ucontext.
unsafe extern "C" fn disassociate_ucontext(_ib: *mut b::ib_ucontext) {}

/// # Safety
///
/// Called by the core for an mmap of the uverbs file of this context.
unsafe extern "C" fn mmap(ib: *mut b::ib_ucontext, vma: *mut b::vm_area_struct) -> c_int {
    // SAFETY: our live ucontext.
    let uc = unsafe { &*ib.cast::<OxeUcontext>() };
    match uc.mmaps.as_deref() {
        Some(m) => match m.mmap(vma) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        },
        None => EINVAL.to_errno(),
    }
}
