// SPDX-License-Identifier: GPL-2.0

//! Module-wide registrations: the `oxe` rdma link type, the netdev notifier
//! that removes a device when its netdev goes away, and the guard that keeps
//! rdma_rxe out of the kernel while oxe is loaded.

use core::ffi::{c_void, CStr};
use core::ptr;

use kernel::ffi::{c_char, c_int, c_ulong};
use kernel::prelude::*;
use kernel::types::Opaque;

use super::device;
use crate::bindings as b;

/// rdma_rxe treats every `RDMA_DRIVER_RXE` device as its own (its UDP receive
/// path, its netdev notifier, its module exit), so it must never share a
/// kernel with oxe.
const RXE_MODULE: &CStr = c"rdma_rxe";

// include/linux/notifier.h
const NOTIFY_DONE: c_int = 0;
const NOTIFY_OK: c_int = 1;
const NOTIFY_STOP_MASK: c_int = 0x8000;

fn notifier_from_errno(err: c_int) -> c_int {
    if err != 0 {
        NOTIFY_STOP_MASK | (NOTIFY_OK - err)
    } else {
        NOTIFY_OK
    }
}

fn rxe_loaded() -> bool {
    // SAFETY: the argument is a NUL-terminated string.
    unsafe { b::oxe_module_loaded(RXE_MODULE.as_char_ptr()) }
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    None,
    ModuleNotifier,
    NetdevNotifier,
    LinkOps,
}

/// Everything oxe registers with the rest of the kernel at load time. Pinned:
/// the kernel keeps pointers to the embedded structures while registered.
pub(crate) struct Registrations {
    link_ops: Opaque<b::rdma_link_ops>,
    netdev_nb: Opaque<b::notifier_block>,
    module_nb: Opaque<b::notifier_block>,
    stage: Stage,
}

// `stage` is only changed in `register` and `drop`.
// SAFETY: once registered, the kernel touches the structures under its locks.
unsafe impl Sync for Registrations {}
// SAFETY: as above; nothing in it is tied to a thread.
unsafe impl Send for Registrations {}

impl Registrations {
    pub(crate) fn register(_module: &'static ThisModule) -> Result<Pin<KBox<Self>>> {
        if rxe_loaded() {
            pr_err!("rdma_rxe is loaded: it claims every RDMA_DRIVER_RXE device, so oxe cannot share the kernel with it; rmmod rdma_rxe first\n");
            return Err(EBUSY);
        }

        let mut link_ops: b::rdma_link_ops = pin_init::zeroed();
        link_ops.type_ = c"oxe".as_char_ptr();
        link_ops.newlink = Some(newlink);
        let mut netdev_nb: b::notifier_block = pin_init::zeroed();
        netdev_nb.notifier_call = Some(netdev_event);
        let mut module_nb: b::notifier_block = pin_init::zeroed();
        module_nb.notifier_call = Some(module_event);

        let mut this = KBox::pin(
            Registrations {
                link_ops: Opaque::new(link_ops),
                netdev_nb: Opaque::new(netdev_nb),
                module_nb: Opaque::new(module_nb),
                stage: Stage::None,
            },
            GFP_KERNEL,
        )?;

        // From here on, dropping `this` undoes whatever was registered.
        // SAFETY: `stage` is plain data, not structurally pinned; nothing moves.
        let regs = unsafe { this.as_mut().get_unchecked_mut() };

        // SAFETY: `module_nb` lives until `drop` unregisters it.
        kernel::error::to_result(unsafe { b::register_module_notifier(regs.module_nb.get()) })?;
        regs.stage = Stage::ModuleNotifier;
        // rdma_rxe may have come in between the check and the notifier.
        if rxe_loaded() {
            pr_err!("rdma_rxe was loaded concurrently; refusing to load\n");
            return Err(EBUSY);
        }

        // SAFETY: `netdev_nb` lives until `drop` unregisters it.
        kernel::error::to_result(unsafe { b::register_netdevice_notifier(regs.netdev_nb.get()) })?;
        regs.stage = Stage::NetdevNotifier;

        // SAFETY: `link_ops` lives until `drop` unregisters it.
        unsafe { b::rdma_link_register(regs.link_ops.get()) };
        regs.stage = Stage::LinkOps;
        Ok(this)
    }
}

impl Drop for Registrations {
    fn drop(&mut self) {
        if self.stage >= Stage::LinkOps {
            // After this no `rdma link add` can create a device.
            // SAFETY: registered in `register`.
            unsafe { b::rdma_link_unregister(self.link_ops.get()) };
            // Unregisters every oxe device, and fences the queued
            // unregistrations started by the netdev notifier.
            // SAFETY: no rdma_rxe device exists: the module guard keeps it out.
            unsafe { b::ib_unregister_driver(b::rdma_driver_id_RDMA_DRIVER_RXE) };
            // MRs are freed through call_rcu: let those callbacks run
            // before the module's code goes away.
            // SAFETY: no locks held; process context.
            unsafe { b::rcu_barrier() };
        }
        if self.stage >= Stage::NetdevNotifier {
            // SAFETY: registered in `register`.
            unsafe { b::unregister_netdevice_notifier(self.netdev_nb.get()) };
        }
        if self.stage >= Stage::ModuleNotifier {
            // SAFETY: registered in `register`.
            unsafe { b::unregister_module_notifier(self.module_nb.get()) };
        }
    }
}

/// `rdma link add NAME type oxe netdev DEV`. Called with the core's link ops
/// lock held for reading.
///
/// # Safety
///
/// Called by the kernel with the arguments its callback contract gives.
unsafe extern "C" fn newlink(ibdev_name: *const c_char, ndev: *mut b::net_device) -> c_int {
    // SAFETY: the core passes a NUL-terminated name and a referenced netdev.
    let res = unsafe { device::add(CStr::from_char_ptr(ibdev_name), ndev) };
    match res {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// Called by the kernel with the arguments its callback contract gives.
unsafe extern "C" fn netdev_event(
    _nb: *mut b::notifier_block,
    event: c_ulong,
    ptr: *mut c_void,
) -> c_int {
    // As netdev_notifier_info_to_dev():
    // SAFETY: netdev notifiers get a `netdev_notifier_info` valid for the call, whose netdev is valid for the call too.
    let ndev = unsafe { (*ptr.cast::<b::netdev_notifier_info>()).dev };
    if event == b::netdev_cmd_NETDEV_UNREGISTER as c_ulong {
        // SAFETY: as above.
        unsafe { device::netdev_unregistering(ndev) };
    } else if event == b::netdev_cmd_NETDEV_UP as c_ulong
        || event == b::netdev_cmd_NETDEV_DOWN as c_ulong
        || event == b::netdev_cmd_NETDEV_CHANGE as c_ulong
    {
        // SAFETY: as above.
        unsafe { device::netdev_changed(ndev) };
    }
    NOTIFY_DONE
}

/// # Safety
///
/// Called by the kernel with the arguments its callback contract gives.
unsafe extern "C" fn module_event(
    _nb: *mut b::notifier_block,
    action: c_ulong,
    data: *mut c_void,
) -> c_int {
    if action != b::module_state_MODULE_STATE_COMING as c_ulong || data.is_null() {
        return NOTIFY_DONE;
    }
    let module = data.cast::<b::module>();
    // SAFETY: the module being loaded, whose name is a NUL-terminated array.
    let name = unsafe { CStr::from_char_ptr(ptr::addr_of!((*module).name).cast()) };
    if name == RXE_MODULE {
        pr_err!("refusing to load rdma_rxe while rdma_oxe is loaded: both claim RDMA_DRIVER_RXE\n");
        return notifier_from_errno(-(b::EBUSY as c_int));
    }
    NOTIFY_DONE
}
