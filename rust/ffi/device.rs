// SPDX-License-Identifier: GPL-2.0

//! Device, port, ucontext and mmap entry points, and the device's creation
//! on `rdma link add` and removal with its netdev.

use core::ffi::CStr;
use core::mem::size_of;
use core::ptr;

use kernel::ffi::c_int;
use kernel::prelude::*;

use super::{drop_in_place, from_ib, init_in_place, to_c};
use crate::bindings as b;
use crate::device::{self, DeviceState, OxeDevice, OxeUcontext, PORT};
use crate::ib::skb::NetHold;
use crate::ib::udata::{self, Udata};
use crate::params;
use crate::pma;
use crate::queue::Mmaps;
use crate::stats;

impl OxeDevice {
    /// # Safety
    ///
    /// `ib` must be a live oxe device.
    pub(crate) unsafe fn from_ib<'a>(ib: *mut b::ib_device) -> &'a OxeDevice {
        // `state` is initialised before the device is registered, and
        // dropped only by `dealloc_driver`.
        // SAFETY: per the function's contract.
        unsafe { from_ib(ib) }
    }
}

/// The ucontext of a command: a conversion from the core's object to oxe's,
/// so it is here rather than with `Udata`.
impl<'a> Udata<'a> {
    /// The ucontext the command runs in, if it has one.
    pub(crate) fn ucontext(&self) -> Option<&'a OxeUcontext> {
        // SAFETY: a uverbs command's udata (`from_raw`'s contract), in its bundle.
        let uc = unsafe { b::oxe_udata_ucontext(self.as_ptr()) };
        // The command's ucontext is initialised: commands other than
        // GET_CONTEXT (`alloc_ucontext`, which does not call this) run only
        // on a ucontext whose `alloc_ucontext` succeeded.
        // SAFETY: an oxe ucontext (the device is oxe's), live for the command.
        (!uc.is_null()).then(|| unsafe { from_ib::<OxeUcontext>(uc) })
    }
}

/// The device's netdev with a reference held, dropped with the guard.
struct NetdevRef(*mut b::net_device);

impl NetdevRef {
    fn get(ib: *mut b::ib_device) -> Option<Self> {
        // SAFETY: `ib` is a live device; the result is referenced or NULL.
        let ndev = unsafe { b::ib_device_get_netdev(ib, PORT) };
        (!ndev.is_null()).then_some(NetdevRef(ndev))
    }

    fn mtu(&self) -> u32 {
        // SAFETY: the netdev is referenced by `self`.
        unsafe { b::oxe_netdev_mtu(self.0) }
    }

    /// The port's state and physical state, as rdma_rxe reports them.
    fn port_state(&self) -> (b::ib_port_state, b::ib_port_phys_state) {
        let (mut state, mut phys_state) = (0, 0);
        // SAFETY: the netdev is referenced by `self`; the outputs are locals.
        unsafe { b::oxe_netdev_port_state(self.0, &mut state, &mut phys_state) };
        (state, phys_state)
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
///
/// # Safety
///
/// `ndev` is referenced by the caller.
unsafe fn mac_of(ndev: *mut b::net_device) -> [u8; 6] {
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
///
/// # Safety
///
/// `ndev` is referenced by the caller (the core during newlink).
pub(crate) unsafe fn add(name: &CStr, ndev: *mut b::net_device) -> Result {
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

    // SAFETY: the size covers `OxeDevice`, whose `ib_device` is at offset 0.
    let ib = unsafe { b::oxe_alloc_ib_device(size_of::<OxeDevice>()) };
    if ib.is_null() {
        return Err(ENOMEM);
    }
    // SAFETY: `ndev` is referenced (this function's contract).
    let guid = u64::from_ne_bytes(params::eui64_from_mac(unsafe { mac_of(ndev) }));
    // SAFETY: `ndev` is referenced (this function's contract).
    let net = match unsafe { NetHold::new(ndev) } {
        Ok(net) => net,
        Err(e) => {
            // SAFETY: allocated above, never initialised or registered.
            unsafe { b::ib_dealloc_device(ib) };
            return Err(e);
        }
    };
    // Its ops are not set yet, so if this fails `ib_dealloc_device` calls no
    // `dealloc_driver`; once they are set, `dealloc_driver` drops the state.
    // SAFETY: a fresh device, seen by no one.
    let ret = match unsafe { init_in_place::<OxeDevice, _>(ib, DeviceState::new(guid, net)) } {
        Ok(()) => {
            // A device made on a netdev that is down starts with its port
            // down, counted, as rxe's `rxe_set_port_state`.
            // SAFETY: the state was initialised just above; `ndev` referenced.
            unsafe {
                if let Some(state) = OxeDevice::from_ib(ib).state() {
                    state.port_now(b::oxe_netdev_port_down(ndev));
                }
            }
            // SAFETY: a fresh, unregistered oxe device; `ndev` referenced.
            unsafe { init_and_register(ib, name, ndev, guid) }
        }
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
///
/// `ib` must be a freshly allocated, unregistered oxe device with its state
/// initialised; `ndev` referenced.
unsafe fn init_and_register(
    ib: *mut b::ib_device,
    name: &CStr,
    ndev: *mut b::net_device,
    guid: u64,
) -> c_int {
    // SAFETY: per the function's contract: no one else sees the device yet.
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
        // The doorbell and completion events go through these commands.
        dev.uverbs_cmd_mask |= (1u64 << b::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SEND)
            | (1u64 << b::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_REQ_NOTIFY_CQ);
        // The core copies the table.
        b::ib_set_device_ops(ib, &super::device_ops());

        let ret = b::ib_device_set_netdev(ib, ndev, PORT);
        if ret != 0 {
            return ret;
        }
        b::ib_register_device(ib, name.as_char_ptr(), ptr::null_mut())
    }
}

/// Netdev notifier, NETDEV_UNREGISTER: the device goes with its netdev. Queued,
/// because rtnl is held here and unregistration takes it (ib_get_eth_speed).
///
/// # Safety
///
/// `ndev` is valid for the call (the notifier's).
pub(crate) unsafe fn netdev_unregistering(ndev: *mut b::net_device) {
    // SAFETY: `ndev` is valid during the notifier call.
    unsafe {
        with_device_of(ndev, |ib| {
            // SAFETY: a registered oxe device, referenced for the call.
            b::ib_unregister_device_queued(ib);
            // The namespace may be going away with the netdev: its sockets
            // go now, not when the queued unregistration frees the device.
            if let Some(state) = OxeDevice::from_ib(ib).state() {
                state.net.release_sockets();
            }
        })
    };
}

/// Runs `f` on the oxe device of `ndev`, if there is one, referenced for
/// the call. rdma_rxe is never loaded with oxe, but only our own devices
/// are touched.
///
/// # Safety
///
/// `ndev` is valid for the call.
unsafe fn with_device_of(ndev: *mut b::net_device, f: impl FnOnce(*mut b::ib_device)) {
    // SAFETY: `ndev` is valid (the function's contract).
    let ib = unsafe { b::ib_device_get_by_netdev(ndev, b::rdma_driver_id_RDMA_DRIVER_RXE) };
    if ib.is_null() {
        return;
    }
    // SAFETY: `ib` is referenced by ib_device_get_by_netdev until the put.
    unsafe {
        if (*ib).ops.owner == crate::THIS_MODULE.as_ptr() {
            f(ib);
        }
        b::ib_device_put(ib);
    }
}

/// Netdev notifier, NETDEV_UP, NETDEV_DOWN or NETDEV_CHANGE: a port that
/// went down counts `link_downed`, as rxe's `rxe_notify` (the core raises
/// the port event).
///
/// # Safety
///
/// `ndev` is valid for the call (the notifier's).
pub(crate) unsafe fn netdev_changed(ndev: *mut b::net_device) {
    // SAFETY: `ndev` is valid during the notifier call.
    unsafe {
        let down = b::oxe_netdev_port_down(ndev);
        with_device_of(ndev, |ib| {
            // SAFETY: an oxe device, referenced for the call.
            if let Some(state) = OxeDevice::from_ib(ib).state() {
                state.port_now(down);
            }
        })
    };
}

/// # Safety
///
/// Called by the RDMA core, once, right before it frees the device.
pub(super) unsafe extern "C" fn dealloc_driver(ib: *mut b::ib_device) {
    // The core frees the memory right after.
    // SAFETY: the ops, hence this callback, are set once the state is initialised.
    unsafe { drop_in_place::<OxeDevice>(ib) };
}

/// # Safety
///
/// Called by the RDMA core, with live objects and writable outputs.
pub(super) unsafe extern "C" fn query_device(
    ib: *mut b::ib_device,
    attr: *mut b::ib_device_attr,
    udata: *mut b::ib_udata,
) -> c_int {
    // `udata` is NULL for a kernel caller, else the command's.
    // SAFETY: the core passes a live oxe device and a writable attribute block.
    let (dev, attr) = unsafe { (OxeDevice::from_ib(ib), &mut *attr) };
    // SAFETY: as above.
    let udata = unsafe { Udata::from_raw(udata) };
    if let Err(e) = udata::in_empty(udata.as_ref()) {
        return e.to_errno();
    }
    dev.query(attr);
    to_c(udata::respond_empty(udata.as_ref()))
}

/// # Safety
///
/// Called by the RDMA core, with live objects and writable outputs.
pub(super) unsafe extern "C" fn query_port(
    ib: *mut b::ib_device,
    port: u32,
    attr: *mut b::ib_port_attr,
) -> c_int {
    if let Err(e) = device::check_port(port) {
        return e.to_errno();
    }
    let Some(nd) = NetdevRef::get(ib) else {
        return ENODEV.to_errno();
    };
    // SAFETY: the core passes a zeroed, writable attribute block.
    let a = unsafe { &mut *attr };
    device::query_port(a, nd.mtu());
    // As rxe counts them (the device claims IB_DEVICE_BAD_QKEY_CNTR); the
    // field is 32 bits wide.
    // SAFETY: the core passes a live oxe device.
    if let Some(state) = unsafe { OxeDevice::from_ib(ib) }.state() {
        a.qkey_viol_cntr = state.stats.value(stats::Counter::QkeyViolations) as u32;
    }
    let (state, phys_state) = nd.port_state();
    a.state = state;
    a.phys_state = phys_state as u8;
    // Takes rtnl: never called with it held (registration happens outside).
    // SAFETY: `ib` is live and the outputs point into `attr`.
    unsafe { b::ib_get_eth_speed(ib, port, &mut a.active_speed, &mut a.active_width) }
}

/// # Safety
///
/// Called by the RDMA core, with live objects and writable outputs.
pub(super) unsafe extern "C" fn get_port_immutable(
    _ib: *mut b::ib_device,
    port: u32,
    immutable: *mut b::ib_port_immutable,
) -> c_int {
    if let Err(e) = device::check_port(port) {
        return e.to_errno();
    }
    // SAFETY: the core passes a writable block.
    device::port_immutable(unsafe { &mut *immutable });
    0
}

/// # Safety
///
/// Called by the RDMA core, with live objects.
pub(super) unsafe extern "C" fn get_link_layer(
    _ib: *mut b::ib_device,
    _port: u32,
) -> b::rdma_link_layer {
    b::rdma_link_layer_IB_LINK_LAYER_ETHERNET
}

/// # Safety
///
/// Called by the RDMA core, with live objects and writable outputs.
pub(super) unsafe extern "C" fn query_pkey(
    _ib: *mut b::ib_device,
    port: u32,
    index: u16,
    pkey: *mut u16,
) -> c_int {
    match device::pkey(port, index) {
        Ok(p) => {
            // SAFETY: the core passes a writable u16.
            unsafe { *pkey = p };
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// Called by the RDMA core with a zeroed ucontext of `size_ib_ucontext`
/// bytes and the GET_CONTEXT command's udata.
pub(super) unsafe extern "C" fn alloc_ucontext(
    ib: *mut b::ib_ucontext,
    udata: *mut b::ib_udata,
) -> c_int {
    // SAFETY: the command's udata.
    let udata = unsafe { Udata::from_raw(udata) };
    // librxe sends no driver data with GET_CONTEXT and expects none back.
    if let Err(e) = udata::in_empty(udata.as_ref()) {
        return e.to_errno();
    }
    // The core calls `dealloc_ucontext` only if this succeeds.
    // SAFETY: fresh memory the core allocated for an OxeUcontext.
    to_c(unsafe { init_in_place::<OxeUcontext, _>(ib, Mmaps::new()) })
}

/// # Safety
///
/// Called by the RDMA core, once, for a ucontext `alloc_ucontext` set up.
pub(super) unsafe extern "C" fn dealloc_ucontext(ib: *mut b::ib_ucontext) {
    // SAFETY: initialised by `alloc_ucontext`; last use.
    unsafe { drop_in_place::<OxeUcontext>(ib) };
}

/// Lets the core remove the device (rmmod, `rdma link delete`, netdev gone)
/// while processes still hold it: the core then destroys their objects, so
/// every MR is unpinned and every QP's work is flushed. Nothing more to do
/// here: the rings they mmapped stay valid memory until they unmap them.
///
/// # Safety
///
/// Called by the core with a live ucontext.
pub(super) unsafe extern "C" fn disassociate_ucontext(_ib: *mut b::ib_ucontext) {}

/// # Safety
///
/// Called by the core for an mmap of the uverbs file of this context.
pub(super) unsafe extern "C" fn mmap(
    ib: *mut b::ib_ucontext,
    vma: *mut b::vm_area_struct,
) -> c_int {
    // SAFETY: a live ucontext `alloc_ucontext` set up.
    let uc = unsafe { from_ib::<OxeUcontext>(ib) };
    let mmaps = match uc.mmaps() {
        Ok(m) => m,
        Err(e) => return e.to_errno(),
    };
    to_c(mmaps.mmap(vma))
}

/// # Safety
///
/// Called by the RDMA core for a live device.
pub(super) unsafe extern "C" fn alloc_hw_port_stats(
    _ib: *mut b::ib_device,
    port: u32,
) -> *mut b::rdma_hw_stats {
    if device::check_port(port).is_err() {
        return ptr::null_mut();
    }
    // SAFETY: allocates a stats block for oxe's counters, owned by the core.
    unsafe { b::oxe_alloc_stats(stats::NUM as c_int) }
}

/// # Safety
///
/// Called by the RDMA core for a live device, with the block
/// `alloc_hw_port_stats` gave it.
pub(super) unsafe extern "C" fn get_hw_stats(
    ib: *mut b::ib_device,
    hw: *mut b::rdma_hw_stats,
    port: u32,
    _index: c_int,
) -> c_int {
    if device::check_port(port).is_err() || hw.is_null() {
        return EINVAL.to_errno();
    }
    // SAFETY: a live oxe device.
    let Some(state) = (unsafe { OxeDevice::from_ib(ib) }).state() else {
        return ENODEV.to_errno();
    };
    for i in 0..stats::NUM {
        let v = state.stats.get(i).unwrap_or(0);
        // SAFETY: the core's stats block for this port; the helper checks the index.
        if unsafe { b::oxe_stats_set(hw, i as c_int, v) } != 0 {
            return EINVAL.to_errno();
        }
    }
    stats::NUM as c_int
}

// The core hands `process_mad` `struct ib_mad`s; the PMA code reads and
// writes that many bytes.
const _: () = assert!(size_of::<b::ib_mad>() == pma::MAD_LEN);

/// # Safety
///
/// Called by the RDMA core for a live device, with `in_mad` and `out_mad`
/// each a `struct ib_mad` it does not touch until this returns, and
/// `out_mad_size` (if not null) the size of `out_mad`.
pub(super) unsafe extern "C" fn process_mad(
    ib: *mut b::ib_device,
    _flags: c_int,
    port: u32,
    _in_wc: *const b::ib_wc,
    _in_grh: *const b::ib_grh,
    in_mad: *const b::ib_mad,
    out_mad: *mut b::ib_mad,
    out_mad_size: *mut usize,
    _out_mad_pkey_index: *mut u16,
) -> c_int {
    let failure = pma::RESULT_FAILURE as c_int;
    if in_mad.is_null() || out_mad.is_null() {
        return failure;
    }
    // SAFETY: the caller's size of `out_mad`, when it gives one.
    if !out_mad_size.is_null() && unsafe { *out_mad_size } < pma::MAD_LEN {
        return failure;
    }
    // SAFETY: a live oxe device.
    let Some(state) = (unsafe { OxeDevice::from_ib(ib) }).state() else {
        return failure;
    };
    // SAFETY: two distinct MADs of `MAD_LEN` bytes, the core's for the call.
    let (inp, out) = unsafe {
        (
            core::slice::from_raw_parts(in_mad.cast::<u8>(), pma::MAD_LEN),
            core::slice::from_raw_parts_mut(out_mad.cast::<u8>(), pma::MAD_LEN),
        )
    };
    pma::process(port, inp, out, &state.stats.port_counts()) as c_int
}
