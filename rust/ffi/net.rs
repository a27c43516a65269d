// SPDX-License-Identifier: GPL-2.0

//! Where the network stack calls in: `oxe_net_rcv`, from the UDP tunnel
//! sockets' encap_rcv (include/oxe_net.c), in softirq context, as rdma_rxe
//! receives. The packet is checked and delivered to its QP's inbox there
//! (`udp::receive`: nothing in it sleeps, and the QP table is softirq-safe);
//! the QP's own task handles it.

use core::ptr::NonNull;

use kernel::prelude::*;

use super::from_ib;
use crate::bindings as b;
use crate::device::OxeDevice;
use crate::ib::skb::{Arrival, Skb};
use crate::udp;

/// A reference on an oxe device, taken by encap_rcv.
struct DevRef(NonNull<b::ib_device>);

impl Drop for DevRef {
    fn drop(&mut self) {
        // SAFETY: the reference encap_rcv took (ib_device_get_by_netdev).
        unsafe { b::ib_device_put(self.0.as_ptr()) };
    }
}

/// The per-namespace registration of the tunnel sockets, for the module's
/// life. Dropped after every device (whose removal closed its sockets).
pub(crate) struct Net(());

impl Net {
    pub(crate) fn create() -> Result<Net> {
        // SAFETY: module init, process context.
        kernel::error::to_result(unsafe { b::oxe_net_register() })?;
        Ok(Net(()))
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        // SAFETY: registered in `create`; every namespace's sockets are gone with the devices, and unregistering waits for their receive paths.
        unsafe { b::oxe_net_unregister() };
    }
}

/// # Safety
///
/// Called by encap_rcv with a linear skb it owns and a reference on the
/// device it arrived for; takes both.
#[no_mangle]
pub(crate) unsafe extern "C" fn oxe_net_rcv(ib: *mut b::ib_device, skb: *mut b::sk_buff) {
    // SAFETY: per the function's contract, both are ours now.
    let (skb, dev) = unsafe { (Skb::from_raw(skb), NonNull::new(ib).map(DevRef)) };
    let (Some(skb), Some(dev)) = (skb, dev) else {
        return;
    };
    // SAFETY: an oxe device (encap_rcv found it by its netdev among RDMA_DRIVER_RXE devices, and oxe never shares a kernel with rdma_rxe), kept registered by `dev` for this call.
    let d = unsafe { from_ib::<OxeDevice>(dev.0.as_ptr()) };
    // SAFETY: `dev` holds the device for the call.
    let arrival = unsafe { Arrival::from_raw(dev.0) };
    if let Some(state) = d.state() {
        if let Err(e) = udp::receive(&state.qps, skb, Some(arrival)) {
            udp::count(&state.stats, &e, 0, 0);
        }
    }
}
