// SPDX-License-Identifier: GPL-2.0

//! RC queue pairs. A QP has three work items on oxe's workqueue, as rdma_rxe
//! has tasks: the send task runs the completer (responses in) and then the
//! requester (WQEs out), the receive task runs the responder (requests in,
//! responses out), and two timers (retransmit, RNR) that kick the send task.
//! Packets reach a QP through its inbox, from the packet path (`net`).
//!
//! `verbs` holds the verbs (create, modify, query, destroy, posting),
//! `sched` where and at which priority the tasks and timers run, `layout`
//! the compile-time checks of rxe's WQE layout.

pub(crate) mod flight;
mod layout;
pub(crate) mod mcast;
mod sched;
mod table;
pub(crate) mod verbs;

use core::mem::size_of;

use kernel::prelude::*;
use kernel::sync::atomic::{ordering, Atomic};
use kernel::sync::{Arc, Mutex};
use kernel::time::hrtimer::{ArcHrTimerHandle, HrTimer, RelativeSoftMode};
use kernel::time::Monotonic;
use kernel::workqueue::{DelayedWork, Work};

use crate::access::PdId;
use crate::ah::AhTable;
use crate::bindings as b;
use crate::cq::{Cqe, OxeCq};
use crate::fifo::Fifo;
use crate::ib::qp::QpHandle;
use crate::ib::skb::{NetDev, Route, Train};
use crate::ib::{self, CoreRef};
use crate::irqlock::IrqSpinLock;
use crate::mr::Keys;
use crate::mw::Windows;
use crate::pace::Pace;
use crate::params;
use crate::pkt::Packet;
use crate::queue::Queue;
use crate::replay::{AtomicLog, Saved};
use crate::sgl::Sgl;
use crate::srq::Srq;
use crate::stats::{Counter, Counters};
use crate::wqe;
pub(crate) use table::QpTable;

/// The QP the core allocates (`size_ib_qp`): its `ib_qp`, then the QP, which
/// peers' packet paths and the QP's own tasks also hold.
#[repr(C)]
pub(crate) struct OxeQp {
    ib: kernel::types::Opaque<b::ib_qp>,
    pub(crate) qp: Arc<Qp>,
}

crate::ib::core_object!(OxeQp, ib: b::ib_qp, qp: Arc<Qp>);

pub(crate) const STATE_RESET: u32 = b::ib_qp_state_IB_QPS_RESET;
pub(crate) const STATE_RTR: u32 = b::ib_qp_state_IB_QPS_RTR;
pub(crate) const STATE_RTS: u32 = b::ib_qp_state_IB_QPS_RTS;
pub(crate) const STATE_SQD: u32 = b::ib_qp_state_IB_QPS_SQD;
pub(crate) const STATE_SQE: u32 = b::ib_qp_state_IB_QPS_SQE;
pub(crate) const STATE_ERR: u32 = b::ib_qp_state_IB_QPS_ERR;

/// Negotiated attributes, copied out as a snapshot by the transport.
#[derive(Clone, Copy)]
pub(crate) struct Attrs {
    pub(crate) state: u32,
    pub(crate) path_mtu: u32,
    pub(crate) mtu_enum: u32,
    pub(crate) dest_qpn: u32,
    pub(crate) access: u32,
    pub(crate) max_rd_atomic: u8,
    pub(crate) max_dest_rd_atomic: u8,
    pub(crate) min_rnr_timer: u8,
    pub(crate) timeout: u8,
    pub(crate) retry_cnt: u8,
    pub(crate) rnr_retry: u8,
    pub(crate) sq_psn: u32,
    pub(crate) rq_psn: u32,
    pub(crate) pkey_index: u16,
    pub(crate) port: u8,
    pub(crate) qkey: u32,
    /// The address vector, kept as bytes (bindgen's type is not `Copy`).
    pub(crate) ah: [u8; AH_SIZE],
    /// Where packets go on the wire; `None` without an address vector (QPs
    /// of one device, connected by QPN alone).
    pub(crate) route: Option<Route>,
}

pub(crate) const AH_SIZE: usize = size_of::<b::rdma_ah_attr>();

/// Payload bytes of a packet handed over between QPs of one device. No wire
/// limits it, and most of a packet's cost is per packet (a hand-over, a
/// task's turn, an MR lookup): 64 KiB packets moved loopback data 6-9x
/// faster than 1 KiB ones, and 256 KiB ones 1 MiB messages 1.3-1.6x faster
/// than 64 KiB ones (with the copy shared with a helper: `help_bytes`).
/// PSNs count these packets; both ends are this device, so they agree on
/// it.
pub(crate) const HANDOVER_MTU: u32 = 256 * 1024;

/// Packets along `route` go to a QP of this device without the wire.
pub(crate) fn handed_over(route: Option<&Route>) -> bool {
    match route {
        Some(r) => r.local && *crate::module_parameters::wire_loopback.value() == 0,
        None => true,
    }
}

impl Attrs {
    /// Packets go to a QP of this device without the wire.
    pub(crate) fn handed_over(&self) -> bool {
        handed_over(self.route.as_ref())
    }

    /// Payload bytes per packet: the path MTU on the wire.
    pub(crate) fn packet_mtu(&self) -> u32 {
        if self.handed_over() {
            HANDOVER_MTU
        } else {
            self.path_mtu
        }
    }
}

/// The send side: the SQ ring, the requester's and the completer's state.
pub(crate) struct SendSide {
    pub(crate) queue: Queue,
    /// The PSN the next WQE taken from the ring starts at.
    pub(crate) psn: u32,
    /// The oldest PSN not acknowledged.
    pub(crate) una: u32,
    /// One past the highest PSN sent before the last go-back (at least
    /// `una`): a go-back lowers what is sent now, not what the responder
    /// may have received and acknowledged.
    pub(crate) sent_high: u32,
    /// Scratch: a private copy of the WQE being taken.
    pub(crate) wqe: KVec<u8>,
    /// WQEs taken from the ring and not completed, in ring order: entry `i`
    /// is the ring's slot `consumer + i`, which stays the user's until the
    /// WQE completes.
    pub(crate) inflight: Fifo<flight::Pending>,
    /// The first entry of `inflight` with packets left to send.
    pub(crate) next: usize,
    /// RNR NAKs and timeouts met since the last progress.
    pub(crate) rnr_tries: u8,
    pub(crate) retries: u8,
    /// An RNR NAK came: nothing is sent until the RNR timer fires.
    pub(crate) rnr_wait: bool,
    /// `una` when the retransmit timer was armed; `None` when not armed.
    pub(crate) timer_una: Option<u32>,
    /// The READ or atomic answer PSN asked for again after a gap (once per
    /// gap).
    pub(crate) answer_gap: Option<u32>,
    /// READ requests and atomics sent and not answered yet, at most
    /// `max_rd_atomic`: the peer keeps a responder resource for each, and
    /// one more would take the place of one we may have to repeat.
    pub(crate) rd_requests: u32,
    /// UC over loopback: the peer's queue was full, the send task runs
    /// again once the peer had a turn.
    pub(crate) peer_full: bool,
    /// Request packets sent since the last one that asked for an ACK.
    pub(crate) unasked: u32,
    /// The requester's packets on the wire, sent together at the end of
    /// its turn (empty between turns).
    pub(crate) train: Train,
    /// In SQD, WQEs taken before are still in flight: IB_EVENT_SQ_DRAINED
    /// comes once they are done, and only then may the QP leave SQD but
    /// for ERR (IBA 10.3.1, as rxe).
    pub(crate) draining: bool,
}

impl SendSide {
    /// A READ request or an atomic was answered: its responder resource is
    /// free again.
    pub(crate) fn rd_answered(&mut self) {
        self.rd_requests = self.rd_requests.saturating_sub(1);
    }

    pub(crate) fn clear_inflight(&mut self) {
        self.inflight.clear();
        self.rd_requests = 0;
    }
}

/// The receive side: the RQ ring and the responder's state.
pub(crate) struct RecvSide {
    pub(crate) queue: Queue,
    /// Next PSN expected.
    pub(crate) epsn: u32,
    pub(crate) wqe: KVec<u8>,
    /// A multi-packet SEND or WRITE in progress.
    pub(crate) progress: Option<flight::Progress>,
    /// UC on an SRQ: the receive (wr_id and buffers) of a SEND cut short by
    /// a loss, kept for this QP's next SEND, as a QP's own RQ keeps it posted
    /// (IBA 9.7.5.1.7); the SRQ gave it away already.
    pub(crate) kept: Option<(u64, Sgl)>,
    /// A READ being answered, a budget's worth of packets per run.
    pub(crate) read: Option<flight::ReadServe>,
    /// READ responses on the wire go at this pace once one was lost.
    pub(crate) pace: Pace,
    /// The PSN a READ was asked for again from while it was being answered.
    pub(crate) read_cut: Option<u32>,
    /// The pace's wake-up of the receive task, while a READ waits for it
    /// (it holds a reference to the QP: `teardown` cancels it).
    pub(crate) pace_wake: Option<ArcHrTimerHandle<Qp>>,
    /// A NAK (sequence or RNR) went out for `epsn`: later packets are not
    /// NAKed again until the requester goes back to it.
    pub(crate) nak_sent: bool,
    /// UC: packets are dropped until the next message begins (a gap, or a
    /// message that could not be taken whole).
    pub(crate) drop_msg: bool,
    /// The atomics executed within the last window, replayed when the
    /// requester sends one again.
    pub(crate) atomics: AtomicLog<KVec<Saved>>,
    /// A receive completion held until the response to its packet is sent.
    pub(crate) completion: Option<(Cqe, bool)>,
    /// The first packet arrived (IB_EVENT_COMM_EST raised in RTR).
    pub(crate) established: bool,
    /// IB_EVENT_QP_LAST_WQE_REACHED was raised (a QP with an SRQ, in ERR).
    pub(crate) last_wqe: bool,
}

/// Packets waiting for the QP's tasks. Pushed from any context, so it is an
/// IRQ-safe spinlock and never allocates.
pub(crate) struct Inbox {
    /// For the responder.
    pub(crate) requests: Fifo<Packet>,
    /// For the completer.
    pub(crate) responses: Fifo<Packet>,
}

/// Room for twice the window: a full window plus its retransmission.
const INBOX: usize = 2 * params::MAX_UNACKED_PSNS as usize;

/// The next `Qp::uid`.
static NEXT_UID: Atomic<u64> = Atomic::new(1);

/// A QP identity never handed out twice (QPNs come back).
pub(crate) fn next_uid() -> u64 {
    NEXT_UID.fetch_add(1, ordering::Relaxed)
}

#[pin_data]
pub(crate) struct Qp {
    pub(crate) qpn: u32,
    /// This QP, for the type 2 memory windows bound to it.
    pub(crate) uid: u64,
    pub(crate) ib: QpHandle,
    /// The device's key table, for the SGE and rkey checks.
    pub(crate) keys: CoreRef<Keys>,
    /// The device's memory windows.
    pub(crate) mws: CoreRef<Windows>,
    /// The device's QPs, for the packet path and destroy.
    pub(crate) peers: CoreRef<QpTable>,
    /// The device's address handles, for UD sends.
    pub(crate) ahs: CoreRef<AhTable>,
    /// The SRQ its receives come from (then its own RQ stays empty).
    pub(crate) srq: Option<Arc<Srq>>,
    /// The device's netdev, which the wire sends on.
    pub(crate) ndev: NetDev,
    /// The device's counters.
    pub(crate) stats: CoreRef<Counters>,
    /// This QP's share of the device's events (`stats::QP_EVENTS`).
    pub(crate) events: Counters,
    pub(crate) pd: PdId,
    pub(crate) scq: CoreRef<OxeCq>,
    pub(crate) rcq: CoreRef<OxeCq>,
    pub(crate) sq_sig_all: bool,
    /// The core's QP type: RC, UC, UD or GSI (see [`Qp::reliable`]).
    pub(crate) qp_type: u32,
    /// A user QP: its WQEs come from user memory, and may not use the
    /// kernel-only opcodes (REG_MR).
    pub(crate) user: bool,
    pub(crate) max_send_sge: u32,
    pub(crate) max_inline: u32,
    pub(crate) max_recv_sge: u32,
    /// The CPU its tasks run on (`qp_spread`), or the one queueing them.
    pub(crate) home: Option<i32>,
    /// Since when (ns) its receive and send tasks have requeued themselves
    /// without a break (0: not busy; with `params::SHARING` set: past
    /// `yield_ms`, at normal priority for a quarter of it), for `yield_ms`.
    pub(crate) busy: [Atomic<u64>; 2],
    #[pin]
    pub(crate) attr: IrqSpinLock<Attrs>,
    #[pin]
    pub(crate) sq: Mutex<SendSide>,
    #[pin]
    pub(crate) rq: Mutex<RecvSide>,
    /// Kernel QPs: the producer ends of the SQ and RQ, which kernel clients
    /// post to from any context (the rings' consumer, under `sq` and `rq`,
    /// may sleep). None for user QPs, which write their rings themselves.
    #[pin]
    ksq: IrqSpinLock<Option<Queue>>,
    #[pin]
    krq: IrqSpinLock<Option<Queue>>,
    #[pin]
    pub(crate) inbox: IrqSpinLock<Inbox>,
    #[pin]
    send_work: Work<Qp, SEND>,
    #[pin]
    recv_work: Work<Qp, RECV>,
    #[pin]
    retry_timer: DelayedWork<Qp, RETRY>,
    #[pin]
    rnr_timer: DelayedWork<Qp, RNR>,
    #[pin]
    pace_timer: HrTimer<Qp>,
    /// Set by destroy before it flushes the work: no more work is queued,
    /// and nothing posts to the CQs (checked under the SQ and RQ locks).
    pub(crate) dead: Atomic<i32>,
}

/// Work item ids: the send task, the receive task, the two timers. Their
/// `WorkItem` impls are in the transport (`req`, `resp`, `comp`).
pub(crate) const SEND: u64 = 0;
pub(crate) const RECV: u64 = 1;
pub(crate) const RETRY: u64 = 2;
pub(crate) const RNR: u64 = 3;

kernel::impl_has_work! {
    impl HasWork<Self, SEND> for Qp { self.send_work }
    impl HasWork<Self, RECV> for Qp { self.recv_work }
}
kernel::impl_has_delayed_work! {
    impl HasDelayedWork<Self, RETRY> for Qp { self.retry_timer }
    impl HasDelayedWork<Self, RNR> for Qp { self.rnr_timer }
}
// The READ pace's wake-up: finer than a jiffy, so that paced responses go
// in small bursts (see `pace`); its callback only queues the receive task.
kernel::impl_has_hr_timer! {
    impl HasHrTimer<Self> for Qp { mode: RelativeSoftMode<Monotonic>, field: self.pace_timer }
}

impl Qp {
    /// RC: PSNs in a window, acknowledged, sent again until they are.
    /// UC and UD never are: a WQE completes once its last packet is sent,
    /// and the responder drops what it cannot take instead of NAKing it.
    pub(crate) fn reliable(&self) -> bool {
        self.qp_type == b::ib_qp_type_IB_QPT_RC
    }

    /// Unreliable connected: SENDs and WRITEs only, UC opcodes.
    pub(crate) fn uc(&self) -> bool {
        self.qp_type == b::ib_qp_type_IB_QPT_UC
    }

    /// Datagrams (UD, and the GSI QP, which is UD numbered 1): one-packet
    /// SENDs, each to the QP and address handle its WQE names.
    pub(crate) fn ud(&self) -> bool {
        matches!(
            self.qp_type,
            b::ib_qp_type_IB_QPT_UD | b::ib_qp_type_IB_QPT_GSI
        )
    }

    pub(crate) fn attrs(&self) -> Attrs {
        *self.attr.lock()
    }

    /// The state now, without copying the rest of `Attrs`.
    pub(crate) fn state(&self) -> u32 {
        self.attr.lock().state
    }

    /// The send CQ. Only for the verbs, which the core never runs alongside
    /// destroy, and for the QP's own tasks holding the SQ or RQ lock with the
    /// QP seen alive under it: destroy marks it dead, then waits for its
    /// tasks, and the core frees the CQs only after destroy.
    pub(crate) fn scq(&self) -> &OxeCq {
        self.scq.get()
    }

    /// The receive CQ, as for [`Qp::scq`].
    pub(crate) fn rcq(&self) -> &OxeCq {
        self.rcq.get()
    }

    pub(crate) fn is_dead(&self) -> bool {
        self.dead.load(ordering::Acquire) != 0
    }

    /// Counts event `c` (one of `stats::QP_EVENTS`) for the device and for
    /// this QP.
    pub(crate) fn count(&self, c: Counter) {
        self.stats.get().inc(c);
        self.events.inc(c);
    }

    /// Counts a packet of this QP dropped under `c`, as `Counters::dropped`.
    pub(crate) fn count_drop(&self, c: Counter, psn: u32, why: &core::ffi::CStr) {
        self.stats.get().dropped(c, self.qpn, psn, why);
        self.events.inc(c);
    }

    /// Takes a packet from the packet path: requests for the responder,
    /// responses for the completer. Dropped when the QP is dead or its queue
    /// is full (the requester retransmits).
    pub(crate) fn deliver(self: &Arc<Self>, pkt: Packet) {
        if self.is_dead() {
            return;
        }
        let stats = self.stats.get();
        stats.inc(Counter::RcvdPkts);
        stats.add(Counter::RcvdBytes, pkt.wire_len() as u64);
        let response = pkt.hdr.is_response();
        let psn = pkt.hdr.psn;
        let bytes = pkt.payload.len();
        let pushed = {
            let mut inbox = self.inbox.lock();
            let q = if response {
                &mut inbox.responses
            } else {
                &mut inbox.requests
            };
            q.push(pkt)
        };
        // A packet that found the queue full is dropped here, outside the
        // IRQ-off lock (it may hold the last reference on a page).
        match (pushed, response) {
            (Ok(()), true) => self.schedule(),
            (Ok(()), false) => self.queue_task_for::<RECV>(bytes),
            (Err(_dropped), _) => self.count_drop(Counter::RcvDrops, psn, c"QP's queue full"),
        }
    }

    /// Room for another request packet: a UC sender on this device waits
    /// for it, so that loopback loses nothing (RC's window bounds the queue
    /// by itself).
    pub(crate) fn takes_requests(&self) -> bool {
        self.inbox.lock().requests.len() < INBOX
    }

    pub(crate) fn next_request(&self) -> Option<Packet> {
        self.inbox.lock().requests.pop()
    }

    pub(crate) fn next_response(&self) -> Option<Packet> {
        self.inbox.lock().responses.pop()
    }

    /// Raises an asynchronous event on the QP (its owner's event handler).
    pub(crate) fn event(&self, event: b::ib_event_type) {
        self.ib.event(event);
    }

    /// Moves the QP to ERR after a failure of its own (the requester, the
    /// completer or the responder; modify_qp has its own path): the posted
    /// receives are flushed and the message in progress is dropped with its
    /// MR references, which `dereg_mr` would otherwise wait for as long as
    /// the QP lives, and the owner gets IB_EVENT_QP_FATAL. The state changes
    /// under the RQ lock, which the responder checks it under, so no packet
    /// starts a new message afterwards. The send task flushes the SQ: it does
    /// so whenever it runs in ERR.
    pub(crate) fn set_error(self: &Arc<Self>, rq: &mut RecvSide) {
        self.set_error_then(rq, || {});
    }

    /// As [`Qp::set_error`], running `first` once the QP is in ERR and
    /// before its receives are flushed: an error completion posted there is
    /// seen with the QP already in ERR, and ahead of the flushes.
    pub(crate) fn set_error_then(self: &Arc<Self>, rq: &mut RecvSide, first: impl FnOnce()) {
        let was = core::mem::replace(&mut self.attr.lock().state, STATE_ERR);
        if was != STATE_ERR {
            ib::trace::qp_state(self.qpn, was, STATE_ERR);
        }
        first();
        self.flush_rq(rq);
        self.schedule();
        if was != STATE_ERR {
            self.event(b::ib_event_type_IB_EVENT_QP_FATAL);
        }
    }

    pub(crate) fn cqe(&self, wr_id: u64, status: u32, opcode: u32, byte_len: u32) -> Cqe {
        Cqe {
            wr_id,
            status,
            opcode,
            byte_len,
            ex: 0,
            wc_flags: 0,
            qp: self.ib,
            qp_num: self.qpn,
            src_qp: 0,
            network: 0,
            vlan: crate::ib::skb::NO_VLAN,
        }
    }

    /// Takes the next receive WQE for a SEND or a WRITE with immediate: its
    /// SGEs parsed, each to be checked for local write when bytes reach it
    /// (a malformed WQE gives its wr_id and the completion's status), unless
    /// `sges` is false (a WRITE with immediate: no byte goes there). `None`:
    /// the RQ is empty (RNR). The RQ's WQE stays posted until
    /// [`Qp::consume_recv`]; an SRQ's is consumed now (another QP must not
    /// take it), its lkeys checked against the SRQ's PD.
    pub(crate) fn take_recv(
        &self,
        rq: &mut RecvSide,
        sges: bool,
    ) -> Option<Result<(u64, Sgl), (u64, u32)>> {
        if let Some(srq) = &self.srq {
            if let Some(k) = rq.kept.take() {
                return Some(Ok(k));
            }
            return srq.take(sges);
        }
        if !rq.queue.peek_into(&mut rq.wqe) {
            return None;
        }
        let w = wqe::RecvWqe::parse(&rq.wqe)?;
        if !sges {
            return Some(Ok((w.wr_id, Sgl::none(self.pd))));
        }
        if w.num_sge > self.max_recv_sge {
            return Some(Err((w.wr_id, b::ib_wc_status_IB_WC_LOC_LEN_ERR)));
        }
        Some(
            Sgl::receive(self.pd, &rq.wqe, wqe::RECV_WQE_SGE_OFFSET, w.num_sge)
                .map(|sgl| (w.wr_id, sgl))
                .map_err(|status| (w.wr_id, crate::sgl::recv_status(status))),
        )
    }

    /// Consumes the receive WQE [`Qp::take_recv`] returned (an SRQ's is
    /// consumed already).
    pub(crate) fn consume_recv(&self, rq: &mut RecvSide) {
        if self.srq.is_none() {
            rq.queue.advance_consumer();
        }
    }

    /// No receive is posted (RNR for a WRITE with immediate).
    pub(crate) fn recv_empty(&self, rq: &RecvSide) -> bool {
        match &self.srq {
            Some(srq) => rq.kept.is_none() && srq.is_empty(),
            None => rq.queue.is_empty(),
        }
    }

    /// Completes every posted receive with WR_FLUSH_ERR. One pass over at
    /// most the ring's capacity: user space may keep posting meanwhile, and
    /// what it posts after the flush began is not the flush's business.
    pub(crate) fn flush_rq(&self, rq: &mut RecvSide) {
        // A completion held back comes first: its WQE was consumed first.
        if let Some((cqe, solicited)) = rq.completion.take() {
            let _ = self.rcq().post(&cqe, solicited);
        }
        if self.srq.is_some() {
            // A SEND in progress took its WQE from the SRQ: it is flushed
            // here, the SRQ's others stay for the other QPs. Then "last WQE
            // reached": nothing of the SRQ is this QP's any more.
            let in_progress = match &rq.progress {
                Some(flight::Progress::Send { wr_id, .. }) => Some(*wr_id),
                _ => None,
            };
            let kept = rq.kept.take().map(|(id, _)| id);
            for wr_id in Iterator::chain(in_progress.into_iter(), kept) {
                let cqe = self.cqe(
                    wr_id,
                    b::ib_wc_status_IB_WC_WR_FLUSH_ERR,
                    b::ib_wc_opcode_IB_WC_RECV,
                    0,
                );
                let _ = self.rcq().post(&cqe, false);
            }
            if !rq.last_wqe {
                rq.last_wqe = true;
                self.event(b::ib_event_type_IB_EVENT_QP_LAST_WQE_REACHED);
            }
        }
        rq.progress = None;
        rq.read = None;
        let mut notify = true;
        for _ in 0..rq.queue.capacity() {
            if !rq.queue.peek_into(&mut rq.wqe) {
                break;
            }
            let w = wqe::RecvWqe::parse(&rq.wqe).unwrap_or_default();
            let cqe = self.cqe(
                w.wr_id,
                b::ib_wc_status_IB_WC_WR_FLUSH_ERR,
                b::ib_wc_opcode_IB_WC_RECV,
                0,
            );
            // As `flush_sq`: a full CQ drops the rest of this pass.
            if notify && self.rcq().post(&cqe, false).is_err() {
                notify = false;
            }
            rq.queue.advance_consumer();
        }
    }

    /// Completes the WQEs in flight and those posted with WR_FLUSH_ERR: one
    /// pass over at most the ring's capacity, since user space may keep
    /// posting meanwhile. True if that pass ended with WQEs left, which the
    /// send task flushes on its next run (as rxe requeues its task).
    pub(crate) fn flush_sq(&self, sq: &mut SendSide) -> bool {
        sq.next = 0;
        sq.rnr_wait = false;
        let mut notify = true;
        for _ in 0..sq.queue.capacity() {
            // Our copy of a WQE in flight; the ring's for the others.
            let w = match sq.inflight.pop() {
                Some(p) => p.w,
                None => {
                    if !sq.queue.peek_into(&mut sq.wqe) {
                        return false;
                    }
                    wqe::SendWqe::parse(&sq.wqe).unwrap_or_default()
                }
            };
            let cqe = self.cqe(
                w.wr_id,
                b::ib_wc_status_IB_WC_WR_FLUSH_ERR,
                flight::wc_opcode(w.opcode),
                0,
            );
            // A full CQ drops the rest of this pass, as rxe's
            // `flush_send_queue` does: left in the ring, they would stand
            // before a WQE posted once the CQ was polled (`ib_drain_qp`'s),
            // whose completion is the one that is waited for.
            if notify && self.scq().post(&cqe, false).is_err() {
                notify = false;
            }
            sq.queue.advance_consumer();
        }
        !sq.queue.is_empty()
    }

    /// Back to RESET: drops what was posted and in flight, like rxe. One
    /// step, however fast user space keeps posting.
    pub(crate) fn reset(&self, sq: &mut SendSide, rq: &mut RecvSide) {
        sq.clear_inflight();
        sq.next = 0;
        sq.rnr_wait = false;
        sq.draining = false;
        sq.rnr_tries = 0;
        sq.retries = 0;
        // A retransmit timer still pending is moved when the QP next arms
        // it: otherwise it would not be armed again until the old one fired,
        // up to 2.4 hours later (timeout 31), and a lost packet would wait
        // that long.
        sq.timer_una = None;
        sq.peer_full = false;
        sq.unasked = 0;
        sq.answer_gap = None;
        sq.queue.discard_posted();
        rq.queue.discard_posted();
        rq.progress = None;
        rq.kept = None;
        rq.read = None;
        rq.pace = Pace::new();
        rq.read_cut = None;
        rq.nak_sent = false;
        rq.drop_msg = false;
        rq.atomics.clear();
        rq.established = false;
        rq.last_wqe = false;
        // Packets are dropped outside the IRQ-off lock: dropping one may
        // put the last reference on a page.
        while self.next_request().is_some() {}
        while self.next_response().is_some() {}
    }
}
