// SPDX-License-Identifier: GPL-2.0

//! The RoCEv2 wire's buffers: owned `sk_buff`s, as the wire builds them to
//! send and receives them, seen as byte slices. The networking calls are C
//! helpers (include/oxe_net.c): the kernel crate has no skb abstraction.

use core::ptr::NonNull;

use kernel::prelude::*;

use crate::bindings as b;

/// A netdev the caller keeps referenced (the device's own, see `NetHold`).
#[derive(Clone, Copy)]
pub(crate) struct NetDev(NonNull<b::net_device>);

// SAFETY: a referenced netdev may be used from any thread.
unsafe impl Send for NetDev {}
// SAFETY: as above; the helpers take the locks they need.
unsafe impl Sync for NetDev {}

impl NetDev {
    /// # Safety
    ///
    /// `ndev` stays referenced for as long as the value is used.
    pub(crate) unsafe fn from_raw(ndev: *mut b::net_device) -> Option<Self> {
        NonNull::new(ndev).map(NetDev)
    }

    pub(crate) fn as_ptr(self) -> *mut b::net_device {
        self.0.as_ptr()
    }

    /// Lets the netdev take the Ethernet multicast address of group `mgid`
    /// (`add`), or stop taking it.
    pub(crate) fn mcast(self, mgid: &[u8; 16], add: bool) -> Result {
        // SAFETY: referenced, per `from_raw`'s contract; `mgid` is 16 bytes.
        kernel::error::to_result(unsafe {
            b::oxe_netdev_mcast(self.0.as_ptr(), mgid.as_ptr(), add)
        })
    }

    /// Its MTU now.
    pub(crate) fn mtu(self) -> u32 {
        // SAFETY: referenced, per `from_raw`'s contract.
        unsafe { b::oxe_netdev_mtu(self.0.as_ptr()) }
    }
}

/// Where a packet goes on the wire: the addresses of the QP's path (IPv4 as
/// IPv4-mapped IPv6), its UDP source port, traffic class and hop limit.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Route {
    pub(crate) ipv6: bool,
    pub(crate) saddr: [u8; 16],
    pub(crate) daddr: [u8; 16],
    pub(crate) sport: u16,
    pub(crate) tclass: u8,
    pub(crate) ttl: u8,
    /// The interface of the source GID (a VLAN device for a VLAN's GID; 0:
    /// the device's own).
    pub(crate) oif: i32,
    /// The destination is this device.
    pub(crate) local: bool,
    /// Where the source GID is in the device's GID table.
    pub(crate) sgid_index: u32,
}

/// No VLAN (the core's 0xffff).
pub(crate) const NO_VLAN: u16 = 0xffff;

/// The RDMA device a packet from the wire arrived for (its GID table).
#[derive(Clone, Copy)]
pub(crate) struct Arrival(NonNull<b::ib_device>);

impl Arrival {
    /// # Safety
    ///
    /// `ib` stays referenced for as long as the value is used.
    pub(crate) unsafe fn from_raw(ib: NonNull<b::ib_device>) -> Self {
        Arrival(ib)
    }
}

/// An owned sk_buff: freed on drop.
pub(crate) struct Skb {
    skb: NonNull<b::sk_buff>,
    /// The transport bytes of an skb being built (`alloc`), empty otherwise.
    tx: *mut u8,
    tx_len: usize,
}

// SAFETY: an skb owned by one holder may move between threads and be freed on any of them.
unsafe impl Send for Skb {}
// SAFETY: shared access only reads its bytes.
unsafe impl Sync for Skb {}

impl Skb {
    /// Takes ownership of a received skb, linearized by the caller.
    ///
    /// # Safety
    ///
    /// `skb` is a linear skb the caller owns and gives away.
    pub(crate) unsafe fn from_raw(skb: *mut b::sk_buff) -> Option<Self> {
        NonNull::new(skb).map(|skb| Skb {
            skb,
            tx: core::ptr::null_mut(),
            tx_len: 0,
        })
    }

    /// A packet for `ndev` with `len` bytes of transport headers and
    /// payload (filled through `tx_mut` before `push_ip`), and headroom
    /// for the rest.
    pub(crate) fn alloc(ndev: NetDev, len: usize) -> Option<Self> {
        let len32 = u32::try_from(len).ok()?;
        let mut tx = core::ptr::null_mut();
        // SAFETY: `ndev` is referenced (NetDev's contract); `tx` is a local.
        let skb = NonNull::new(unsafe { b::oxe_skb_alloc(ndev.as_ptr(), len32, &mut tx) })?;
        Some(Skb {
            skb,
            tx,
            tx_len: if tx.is_null() { 0 } else { len },
        })
    }

    /// The transport bytes the skb was allocated with, to fill in.
    pub(crate) fn tx_mut(&mut self) -> &mut [u8] {
        if self.tx.is_null() {
            return &mut [];
        }
        // SAFETY: `tx_len` bytes at `tx` were put into this skb by `alloc`; pushing headers in front never moves them; `&mut self` holds the skb exclusively.
        unsafe { core::slice::from_raw_parts_mut(self.tx, self.tx_len) }
    }

    /// Routes the packet and puts the UDP and IP headers in front; a train's
    /// member (`member`: its IPv4 ID) is not routed, its first carries the route.
    pub(crate) fn push_ip(&mut self, ndev: NetDev, r: &Route, member: Option<u16>) -> Result {
        // SAFETY: an skb of ours, built by `alloc` with the headroom; `ndev` referenced; the addresses are 16-byte arrays.
        kernel::error::to_result(unsafe {
            b::oxe_skb_push_ip(
                self.skb.as_ptr(),
                ndev.as_ptr(),
                r.oif,
                r.ipv6,
                r.saddr.as_ptr(),
                r.daddr.as_ptr(),
                r.sport,
                r.tclass,
                r.ttl,
                member.map_or(-1, i32::from),
            )
        })
    }

    fn into_raw(self) -> *mut b::sk_buff {
        let skb = self.skb.as_ptr();
        core::mem::forget(self);
        skb
    }

    /// The VLAN a received packet came in on, or [`NO_VLAN`].
    pub(crate) fn vlan_id(&self) -> u16 {
        // SAFETY: an skb of ours; reads its device's VLAN id, if it is a VLAN device.
        unsafe { b::oxe_skb_vlan_id(self.skb.as_ptr()) }
    }

    /// Whether `gid`, the packet's destination, is a multicast address or
    /// a GID of the device it arrived for on the netdev it came in on
    /// (rxe's `rxe_chk_dgid`).
    pub(crate) fn to_gid_of(&self, dev: Arrival, gid: &[u8; 16]) -> bool {
        // SAFETY: `dev` referenced (`Arrival`'s contract); a received skb of ours; `gid` is 16 bytes.
        unsafe { b::oxe_skb_to_gid_of(dev.0.as_ptr(), self.skb.as_ptr(), gid.as_ptr()) }
    }

    /// The bytes from the IP header to the end.
    pub(crate) fn network(&self) -> &[u8] {
        let mut len = 0u32;
        // SAFETY: a linear skb of ours with its network header set (pushed by `push_ip`, or by the IP stack on receive).
        let p = unsafe { b::oxe_skb_network(self.skb.as_ptr(), &mut len) };
        if p.is_null() {
            return &[];
        }
        // SAFETY: `len` bytes from the network header are the skb's linear data, alive as long as `self`.
        unsafe { core::slice::from_raw_parts(p, len as usize) }
    }

    /// As [`Skb::network`], to write the ICRC.
    pub(crate) fn network_mut(&mut self) -> &mut [u8] {
        let mut len = 0u32;
        // SAFETY: as for `network`.
        let p = unsafe { b::oxe_skb_network(self.skb.as_ptr(), &mut len) };
        if p.is_null() {
            return &mut [];
        }
        // SAFETY: as for `network`, and `&mut self` makes it exclusive (the skb is ours alone until sent).
        unsafe { core::slice::from_raw_parts_mut(p.cast_mut(), len as usize) }
    }

    /// Hands the packet to the IP stack.
    pub(crate) fn send(self) -> Result {
        let skb = self.into_raw();
        // SAFETY: a routed skb of ours (`push_ip`); consumed by the call.
        kernel::error::to_result(unsafe { b::oxe_skb_send(skb) })
    }
}

const _: () = assert!(b::OXE_TRAIN_MAX == crate::params::TRAIN_MAX);

/// Packets of one route handed to the IP stack by one call (see
/// `oxe_skb_train_add`): the first routed, the rest behind it, each with its
/// headers and ICRC as it will go on the wire.
pub(crate) struct Train {
    first: Option<Skb>,
    last: *mut b::sk_buff,
    route: Option<Route>,
    npkts: u32,
    bytes: u32,
    first_len: u32,
    /// The first's IPv4 ID; the packets behind it take the next ones.
    id: u16,
}

// SAFETY: the skbs are the train's alone (`last` points into `first`'s list), and move between threads as an owned skb does.
unsafe impl Send for Train {}

impl Train {
    pub(crate) const fn new() -> Self {
        Train {
            first: None,
            last: core::ptr::null_mut(),
            route: None,
            npkts: 0,
            bytes: 0,
            first_len: 0,
            id: 0,
        }
    }

    /// Whether a packet of `len` transport bytes along `r` can join.
    pub(crate) fn takes(&self, r: &Route, len: u32) -> bool {
        self.route.as_ref().is_none_or(|t| t == r)
            && crate::params::train_takes(
                u32::from(*crate::module_parameters::train.value()),
                self.npkts,
                self.bytes,
                self.first_len,
                len,
            )
    }

    /// The IPv4 ID (for IPv6, any) of the packet that joins next, if it is
    /// not the first.
    pub(crate) fn member_id(&self) -> Option<u16> {
        self.first
            .as_ref()
            .map(|_| self.id.wrapping_add(self.npkts as u16))
    }

    /// Adds a packet of `len` transport bytes along `r`, pushed with
    /// `member_id()` and checked with `takes()`.
    pub(crate) fn add(&mut self, r: &Route, len: u32, skb: Skb) {
        match &self.first {
            None => {
                // The IPv4 header's ID field.
                let net = skb.network();
                self.id = match (r.ipv6, net.get(4..6)) {
                    (false, Some(&[a, b])) => u16::from_be_bytes([a, b]),
                    _ => 0,
                };
                self.first = Some(skb);
                self.route = Some(*r);
                self.npkts = 1;
                self.first_len = len;
                self.bytes = crate::params::train_bytes(len);
            }
            Some(first) => {
                // SAFETY: `first` and `skb` are ours, `last` is null or the end of `first`'s list (set here); the train takes `skb`.
                unsafe { b::oxe_skb_train_add(first.skb.as_ptr(), &mut self.last, skb.into_raw()) };
                self.npkts += 1;
                self.bytes = self.bytes.saturating_add(crate::params::train_bytes(len));
            }
        }
    }

    /// Hands the train to the IP stack (nothing if empty); it is empty after.
    pub(crate) fn send(&mut self) -> Result {
        let npkts = self.npkts as u16;
        self.last = core::ptr::null_mut();
        self.route = None;
        self.npkts = 0;
        self.bytes = 0;
        self.first_len = 0;
        match self.first.take() {
            None => Ok(()),
            Some(first) => {
                let first = first.into_raw();
                // SAFETY: a routed first with `npkts - 1` packets behind it; consumed by the call.
                kernel::error::to_result(unsafe { b::oxe_skb_train_send(first, npkts) })
            }
        }
    }
}

impl Drop for Skb {
    fn drop(&mut self) {
        // SAFETY: owned; nothing refers to it after this.
        unsafe { b::oxe_skb_consume(self.skb.as_ptr()) };
    }
}

/// A device's hold on its netdev and on the UDP 4791 tunnel sockets of the
/// netdev's namespace (opened with the first device there, closed with the
/// last). The sockets are given back when the netdev unregisters, while its
/// namespace is still alive, or when the device goes, whichever is first.
pub(crate) struct NetHold {
    ndev: NetDev,
    sockets: core::sync::atomic::AtomicBool,
}

impl NetHold {
    /// # Safety
    ///
    /// `ndev` is a live netdev, referenced by the caller for the call.
    pub(crate) unsafe fn new(ndev: *mut b::net_device) -> Result<Self> {
        // SAFETY: per the function's contract.
        let ndev = unsafe { NetDev::from_raw(ndev) }.ok_or(EINVAL)?;
        // SAFETY: a live netdev; the reference is dropped by `Drop`.
        unsafe { b::oxe_dev_hold(ndev.as_ptr()) };
        let this = NetHold {
            ndev,
            sockets: core::sync::atomic::AtomicBool::new(false),
        };
        // SAFETY: a netdev held by `this`, in process context.
        kernel::error::to_result(unsafe { b::oxe_net_get(ndev.as_ptr()) })?;
        this.sockets
            .store(true, core::sync::atomic::Ordering::Release);
        Ok(this)
    }

    pub(crate) fn ndev(&self) -> NetDev {
        self.ndev
    }

    /// Gives the namespace's sockets back (once).
    pub(crate) fn release_sockets(&self) {
        if self
            .sockets
            .swap(false, core::sync::atomic::Ordering::AcqRel)
        {
            // SAFETY: taken in `new`, given back once; the netdev is held.
            unsafe { b::oxe_net_put(self.ndev.as_ptr()) };
        }
    }
}

impl Drop for NetHold {
    fn drop(&mut self) {
        self.release_sockets();
        // SAFETY: the reference taken in `new`.
        unsafe { b::oxe_dev_put(self.ndev.as_ptr()) };
    }
}

/// The kernel's CRC-32 register update (`crc32_le()`), one of the ICRC's
/// two (the other is in `common/icrc.rs`).
pub(crate) fn kernel_crc32_le(crc: u32, data: &[u8]) -> u32 {
    // SAFETY: `data` is readable for its length.
    unsafe { b::oxe_crc32_le(crc, data.as_ptr(), data.len()) }
}
