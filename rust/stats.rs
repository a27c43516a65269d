// SPDX-License-Identifier: GPL-2.0

//! A device's counters, shown by `rdma statistic show link DEV/1` (the
//! core's hw_counters): rdma_rxe's names where they mean the same, in the
//! order of `oxe_stat_descs` (include/oxe_net.c).

use core::ffi::CStr;

use kernel::sync::atomic::{ordering, Atomic};

use crate::ib;
use crate::pma::PortCounts;

/// The counters, in the order of their names.
#[derive(Clone, Copy)]
#[repr(usize)]
pub(crate) enum Counter {
    SentPkts,
    RcvdPkts,
    DuplicateRequest,
    OutOfSeqRequest,
    RcvdRnrErr,
    SendRnrErr,
    RcvdSeqErr,
    RetryExceededErr,
    RetryRnrExceededErr,
    CompleterRetryErr,
    SendErr,
    SentBytes,
    RcvdBytes,
    IcrcErr,
    RcvDrops,
    /// Datagrams dropped for a wrong Q_Key (the port's qkey_viol_cntr too).
    QkeyViolations,
    /// The netdev went down, or lost its carrier (rxe's `rxe_notify`).
    LinkDowned,
}

pub(crate) const NUM: usize = Counter::LinkDowned as usize + 1;

/// The counters a QP also keeps for itself (`rdma -dd res show qp`): the
/// events that tell which flow retransmits, waits or drops. Packets and
/// bytes stay the device's only, off the per-packet path.
pub(crate) const QP_EVENTS: [Counter; 10] = [
    Counter::DuplicateRequest,
    Counter::OutOfSeqRequest,
    Counter::RcvdRnrErr,
    Counter::SendRnrErr,
    Counter::RcvdSeqErr,
    Counter::RetryExceededErr,
    Counter::RetryRnrExceededErr,
    Counter::CompleterRetryErr,
    Counter::RcvDrops,
    Counter::QkeyViolations,
];

pub(crate) struct Counters([Atomic<u64>; NUM]);

impl Counters {
    pub(crate) const fn new() -> Self {
        Counters([const { Atomic::new(0) }; NUM])
    }

    pub(crate) fn add(&self, c: Counter, n: u64) {
        if let Some(a) = self.0.get(c as usize) {
            a.fetch_add(n, ordering::Relaxed);
        }
    }

    pub(crate) fn inc(&self, c: Counter) {
        self.add(c, 1);
    }

    /// Counts a packet dropped under `c`, and fires the drop tracepoint
    /// (`qpn` 0 when the packet reached no QP).
    pub(crate) fn dropped(&self, c: Counter, qpn: u32, psn: u32, why: &CStr) {
        self.inc(c);
        ib::trace::drop_pkt(qpn, psn, why);
    }

    /// What the port's performance agent reports (`process_mad`).
    pub(crate) fn port_counts(&self) -> PortCounts {
        let v = |c: Counter| self.value(c);
        PortCounts {
            xmit_bytes: v(Counter::SentBytes),
            rcv_bytes: v(Counter::RcvdBytes),
            xmit_pkts: v(Counter::SentPkts),
            rcv_pkts: v(Counter::RcvdPkts),
            rcv_errors: v(Counter::IcrcErr),
            xmit_discards: v(Counter::SendErr),
            link_downed: v(Counter::LinkDowned),
        }
    }

    /// Counter `c`'s value.
    pub(crate) fn value(&self, c: Counter) -> u64 {
        self.get(c as usize).unwrap_or(0)
    }

    /// Counter `i`, in the order of the names.
    pub(crate) fn get(&self, i: usize) -> Option<u64> {
        self.0.get(i).map(|a| a.load(ordering::Relaxed))
    }
}
