// SPDX-License-Identifier: GPL-2.0

//! The QP verbs, as safe methods the FFI layer (`ffi/qp.rs`) calls:
//! creation with rxe's shared SQ and RQ rings, the state machine
//! (modify/query), the post_send doorbell, kernel posting and destruction.

use core::ffi::CStr;

use kernel::prelude::*;
use kernel::sync::atomic::{ordering, Atomic};
use kernel::sync::Arc;
use kernel::time::hrtimer::HrTimer;

use super::{
    mcast, Attrs, Inbox, Qp, QpTable, RecvSide, SendSide, AH_SIZE, INBOX, STATE_ERR, STATE_RESET,
    STATE_RTS, STATE_SQD,
};
use crate::access::PdId;
use crate::ah::AhTable;
use crate::bindings as b;
use crate::cq::OxeCq;
use crate::fifo::Fifo;
use crate::ib::skb::{NetDev, Train};
use crate::ib::{self, udata, CoreRef, Udata};
use crate::irqlock::new_irq_spinlock;
use crate::mr::Keys;
use crate::mw::Windows;
use crate::pace::Pace;
use crate::params;
use crate::queue::{self, Queue};
use crate::replay::{AtomicLog, Saved, ATOMIC_LOG_LEN};
use crate::srq::Srq;
use crate::stats::Counters;
use crate::wqe::{self, Sge};

pub(crate) use crate::ib::qp::QpHandle;

fn send_elem(max_sge: u32, max_inline: u32) -> usize {
    wqe::SEND_WQE_SGE_OFFSET + (max_sge as usize * wqe::SGE_SIZE).max(max_inline as usize)
}

fn recv_elem(max_sge: u32) -> usize {
    wqe::RECV_WQE_SGE_OFFSET + max_sge as usize * wqe::SGE_SIZE
}

/// What `create_qp` asks for, as the FFI layer read it.
pub(crate) struct CreateArgs<'a> {
    pub(crate) keys: CoreRef<Keys>,
    /// The device's memory windows, for binds and rkeys that name one.
    pub(crate) mws: CoreRef<Windows>,
    pub(crate) peers: CoreRef<QpTable>,
    /// The device's netdev, for the wire.
    pub(crate) ndev: NetDev,
    pub(crate) stats: CoreRef<Counters>,
    pub(crate) pd: PdId,
    pub(crate) scq: CoreRef<OxeCq>,
    pub(crate) rcq: CoreRef<OxeCq>,
    /// Requested, and on success what the rings hold (as rxe reports it).
    pub(crate) cap: &'a mut b::ib_qp_cap,
    pub(crate) sq_sig_all: bool,
    /// RC, UC, UD or GSI.
    pub(crate) qp_type: u32,
    /// The device's address handles, for UD sends.
    pub(crate) ahs: CoreRef<AhTable>,
    /// The SRQ its receives come from, if any (then it has no RQ of its own).
    pub(crate) srq: Option<Arc<Srq>>,
    pub(crate) handle: QpHandle,
}

/// A kernel send WR, read out of the client's `ib_send_wr` by the FFI layer.
pub(crate) struct KernelSendWr<'a> {
    pub(crate) wqe: wqe::SendWqe,
    pub(crate) sges: &'a dyn Fn(u32) -> Option<Sge>,
    /// The bytes an SGE names, for inline sends (kernel virtual addresses).
    pub(crate) bytes: &'a dyn Fn(&Sge) -> &'a [u8],
}

impl Qp {
    /// Checks the attributes, makes the rings and publishes a new QP under a
    /// free QPN. The rings are offered to user space by [`Qp::respond_user`].
    pub(crate) fn create(args: CreateArgs<'_>, udata: Option<&Udata<'_>>) -> Result<Arc<Qp>> {
        let user = udata.is_some();
        if let Some(u) = udata {
            // librxe sends no request data; the response carries both mminfos.
            if u.inlen() != 0 {
                return Err(EINVAL);
            }
            u.require_out::<b::rxe_create_qp_resp>()?;
        }
        let c = args.cap;
        // A QP may send nothing (max_send_wr 0), as rxe's; a QP on an SRQ
        // has no receive queue, so its receive caps are not looked at.
        let srq_caps = args.srq.is_some();
        if c.max_send_wr > params::MAX_QP_WR
            || (!srq_caps && c.max_recv_wr > params::MAX_QP_WR)
            || c.max_send_sge > params::MAX_SGE
            || (!srq_caps && c.max_recv_sge > params::MAX_SGE)
            || c.max_inline_data > params::MAX_INLINE_DATA
        {
            return Err(EINVAL);
        }
        let sq = Queue::new(c.max_send_wr, send_elem(c.max_send_sge, c.max_inline_data))?;
        // With an SRQ the RQ is an empty ring of one slot, never offered to
        // user space (librxe maps none) and never posted to.
        let srq = args.srq;
        let rq = if srq.is_some() {
            Queue::new(1, recv_elem(1))?
        } else {
            Queue::new(c.max_recv_wr.max(1), recv_elem(c.max_recv_sge.max(1)))?
        };
        // What the rings can hold, reported back like rxe does.
        let send_room = (sq.elem_size() - wqe::SEND_WQE_SGE_OFFSET) as u32;
        c.max_send_wr = sq.capacity();
        c.max_send_sge = (send_room / wqe::SGE_SIZE as u32).min(params::MAX_SGE);
        c.max_inline_data = send_room.min(params::MAX_INLINE_DATA);
        c.max_recv_wr = rq.capacity();
        c.max_recv_sge = (((rq.elem_size() - wqe::RECV_WQE_SGE_OFFSET) / wqe::SGE_SIZE) as u32)
            .min(params::MAX_SGE);
        if srq.is_some() {
            c.max_recv_wr = 0;
            c.max_recv_sge = 0;
        }

        let (keys, peers, ndev, stats) = (args.keys, args.peers, args.ndev, args.stats);
        let mws = args.mws;
        let (sq_elem, rq_elem) = (sq.elem_size(), rq.elem_size());
        let (ksq, krq) = if user {
            (None, None)
        } else {
            // A kernel QP with an SRQ takes no post_recv (EINVAL).
            let krq = srq.is_none().then(|| rq.kernel_producer());
            (Some(sq.kernel_producer()), krq)
        };
        let mut sq_wqe = KVec::new();
        sq_wqe.resize(sq_elem, 0, GFP_KERNEL)?;
        let mut rq_wqe = KVec::new();
        rq_wqe.resize(rq_elem, 0, GFP_KERNEL)?;
        let mut log = KVec::new();
        log.resize(ATOMIC_LOG_LEN, Saved::default(), GFP_KERNEL)?;
        let atomics = AtomicLog::new(log);
        // Each WQE in flight takes at least one PSN of the window.
        let inflight = Fifo::new((sq.capacity().min(params::MAX_UNACKED_PSNS) + 1) as usize)?;
        let inbox = Inbox {
            requests: Fifo::new(INBOX)?,
            responses: Fifo::new(INBOX)?,
        };
        let max_send_sge = c.max_send_sge;
        let max_inline = c.max_inline_data;
        let max_recv_sge = c.max_recv_sge;
        let (pd, scq, rcq, sq_sig_all, qp_type, handle, ahs) = (
            args.pd,
            args.scq,
            args.rcq,
            args.sq_sig_all,
            args.qp_type,
            args.handle,
            args.ahs,
        );
        // The GSI QP is QP1, one per port; every other QP gets a free QPN.
        let fixed = (qp_type == b::ib_qp_type_IB_QPT_GSI).then_some(crate::packet::GSI_QPN);
        peers.get().insert(fixed, |qpn| {
            let attrs = Attrs {
                state: STATE_RESET,
                path_mtu: 256,
                mtu_enum: b::ib_mtu_IB_MTU_256,
                dest_qpn: 0,
                access: 0,
                max_rd_atomic: 0,
                max_dest_rd_atomic: 0,
                min_rnr_timer: 0,
                timeout: 0,
                retry_cnt: 0,
                rnr_retry: 0,
                sq_psn: 0,
                rq_psn: 0,
                pkey_index: 0,
                port: 1,
                qkey: 0,
                ah: [0; AH_SIZE],
                route: None,
            };
            Arc::pin_init(
                try_pin_init!(Qp {
                    home: crate::wq::home_cpu(qpn),
                    busy: [Atomic::new(0), Atomic::new(0)],
                    qpn,
                    uid: super::next_uid(),
                    ib: handle,
                    keys,
                    mws,
                    peers,
                    ndev,
                    stats,
                    events: Counters::new(),
                    pd,
                    scq,
                    rcq,
                    sq_sig_all,
                    qp_type,
                    ahs,
                    srq: srq.clone(),
                    user,
                    max_send_sge,
                    max_inline,
                    max_recv_sge,
                    attr <- new_irq_spinlock!(attrs),
                    sq <- kernel::new_mutex!(SendSide {
                        queue: sq,
                        psn: 0,
                        una: 0,
                        sent_high: 0,
                        wqe: sq_wqe,
                        inflight,
                        next: 0,
                        rnr_tries: 0,
                        retries: 0,
                        rnr_wait: false,
                        timer_una: None,
                        answer_gap: None,
                        rd_requests: 0,
                        peer_full: false,
                        unasked: 0,
                        train: Train::new(),
                        draining: false,
                    }),
                    rq <- kernel::new_mutex!(RecvSide {
                        queue: rq,
                        epsn: 0,
                        wqe: rq_wqe,
                        progress: None,
                        kept: None,
                        read: None,
                        pace: Pace::new(),
                        pace_wake: None,
                        read_cut: None,
                        nak_sent: false,
                        drop_msg: false,
                        atomics,
                        established: false,
                        last_wqe: false,
                        completion: None,
                    }),
                    ksq <- new_irq_spinlock!(ksq),
                    krq <- new_irq_spinlock!(krq),
                    inbox <- new_irq_spinlock!(inbox),
                    send_work <- kernel::new_work!("oxe_qp_send"),
                    recv_work <- kernel::new_work!("oxe_qp_recv"),
                    retry_timer <- kernel::new_delayed_work!("oxe_qp_retry"),
                    rnr_timer <- kernel::new_delayed_work!("oxe_qp_rnr"),
                    pace_timer <- HrTimer::new(),
                    dead: Atomic::new(0),
                }? Error),
                GFP_KERNEL,
            )
        })
    }

    /// Offers a user QP's rings for mmap and sends their mminfos back.
    pub(crate) fn respond_user(&self, udata: &Udata<'_>, offsets: &Atomic<u64>) -> Result {
        let uc = udata.ucontext().ok_or(EINVAL)?;
        let mmaps = uc.mmaps()?;
        let mut resp: b::rxe_create_qp_resp = pin_init::zeroed();
        if self.srq.is_none() {
            resp.rq_mi = mmaps.offer(offsets, self.rq.lock().queue.buf())?;
        }
        resp.sq_mi = mmaps.offer(offsets, self.sq.lock().queue.buf())?;
        udata.respond(&resp)
    }

    /// Unpublishes the QP, waits for its work, and withdraws the offers of
    /// its rings that user space never took. The QP itself goes with its
    /// last reference (a peer's packet path may still hold one briefly).
    pub(crate) fn teardown(&self, udata: Option<&Udata<'_>>) {
        self.detach_all_mcast();
        self.dead.store(1, ordering::Release);
        // A turn that saw the QP alive under its lock (on either queue: the
        // flushes below wait only for the instance queued last) may still
        // arm a timer before it lets go: once these are taken, every timer
        // armed was armed before, and the flushes see it.
        drop(self.sq.lock());
        drop(self.rq.lock());
        self.peers.get().remove(self.qpn);
        // A READ's paced wake-up holds a reference to the QP. Armed only
        // under the RQ lock by a run that saw the QP alive: none after this.
        drop(self.rq.lock().pace_wake.take());
        // Its tasks and timers may be running or queued: wait for them, so
        // that they never touch the ib_qp or the CQs after they are gone. A
        // run that began before the QP was marked dead may requeue itself or
        // arm a timer after the flush passed it: flush again until all were
        // idle. Runs that see the QP dead queue nothing, so this ends. A
        // timer is flushed by running it now (cancelling it would leak the
        // reference it holds).
        loop {
            let busy = crate::wq::flush_delayed(&self.retry_timer)
                | crate::wq::flush_delayed(&self.rnr_timer)
                | crate::wq::flush(&self.send_work)
                | crate::wq::flush(&self.recv_work);
            if !busy {
                break;
            }
        }
        // Lock order: SQ before RQ, as the transport takes them.
        let sq = self.sq.lock().queue.buf().clone();
        let rq = self.rq.lock().queue.buf().clone();
        // The rings themselves go with the last reference to the QP.
        queue::withdraw_from(udata, &[&sq, &rq]);
    }

    /// `modify_qp`: validated and applied under the SQ and RQ locks, which
    /// every other transition (the QP's own failures, under the RQ lock)
    /// takes: a transition to ERR meanwhile is seen, not overwritten.
    pub(crate) fn modify(
        self: &Arc<Self>,
        a: &b::ib_qp_attr,
        mask: u32,
        udata: Option<&Udata<'_>>,
    ) -> Result {
        udata::in_empty(udata)?;
        let qp = self;
        // Lock order: SQ, RQ, then the attribute spinlock.
        let av = if mask & b::ib_qp_attr_mask_IB_QP_AV != 0 {
            ib::qp::av(a)
        } else {
            None
        };
        let mut sq = qp.sq.lock();
        let mut rq = qp.rq.lock();
        let cur = qp.attrs();
        let cur_state = if mask & b::ib_qp_attr_mask_IB_QP_CUR_STATE != 0 {
            a.cur_qp_state
        } else {
            cur.state
        };
        let new_state = if mask & b::ib_qp_attr_mask_IB_QP_STATE != 0 {
            a.qp_state
        } else {
            cur_state
        };
        if !ib::qp::transition_ok(self.qp_type, cur_state, new_state, mask) {
            return Err(EINVAL);
        }
        // Only ERR while the SQ drains, as rxe's `rxe_qp_chk_attr`: a new
        // path, timeout or PSN under WQEs still in flight (SQD to SQD) is
        // for a drained SQ (IBA 10.3.1).
        if mask & b::ib_qp_attr_mask_IB_QP_STATE != 0
            && cur_state == STATE_SQD
            && sq.draining
            && new_state != STATE_ERR
        {
            return Err(EINVAL);
        }
        if mask & b::ib_qp_attr_mask_IB_QP_PORT != 0 && a.port_num != 1 {
            return Err(EINVAL);
        }
        if mask & b::ib_qp_attr_mask_IB_QP_PKEY_INDEX != 0 && a.pkey_index != 0 {
            return Err(EINVAL);
        }
        if mask & b::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC != 0
            && u32::from(a.max_rd_atomic) > params::MAX_QP_RD_ATOM
        {
            return Err(EINVAL);
        }
        if mask & b::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC != 0
            && u32::from(a.max_dest_rd_atomic) > params::MAX_QP_RD_ATOM
        {
            return Err(EINVAL);
        }
        if mask & b::ib_qp_attr_mask_IB_QP_PATH_MTU != 0 && !(1..=5).contains(&a.path_mtu) {
            return Err(EINVAL);
        }
        // A 5-bit code (IBA 9.7.5.2.8): a larger one would make RNR NAKs
        // that cannot be encoded, and the peer would time out instead.
        if mask & b::ib_qp_attr_mask_IB_QP_MIN_RNR_TIMER != 0 && a.min_rnr_timer > 31 {
            return Err(EINVAL);
        }

        {
            let mut s = qp.attr.lock();
            if mask & b::ib_qp_attr_mask_IB_QP_ACCESS_FLAGS != 0 {
                s.access = a.qp_access_flags as u32;
            }
            if mask & b::ib_qp_attr_mask_IB_QP_PKEY_INDEX != 0 {
                s.pkey_index = a.pkey_index;
            }
            if mask & b::ib_qp_attr_mask_IB_QP_PORT != 0 {
                s.port = a.port_num as u8;
            }
            if mask & b::ib_qp_attr_mask_IB_QP_QKEY != 0 {
                s.qkey = a.qkey;
            }
            if mask & b::ib_qp_attr_mask_IB_QP_AV != 0 {
                s.ah.copy_from_slice(ib::as_bytes(&a.ah_attr));
            }
            if mask & b::ib_qp_attr_mask_IB_QP_PATH_MTU != 0 {
                s.mtu_enum = a.path_mtu;
                s.path_mtu = mtu_bytes(a.path_mtu);
            }
            if mask & b::ib_qp_attr_mask_IB_QP_TIMEOUT != 0 {
                s.timeout = a.timeout;
                // A retransmit timer armed with the old timeout is moved to
                // the new one when the send task next arms it, at its next
                // turn (see SQD below).
                sq.timer_una = None;
            }
            if mask & b::ib_qp_attr_mask_IB_QP_RETRY_CNT != 0 {
                s.retry_cnt = a.retry_cnt;
            }
            if mask & b::ib_qp_attr_mask_IB_QP_RNR_RETRY != 0 {
                s.rnr_retry = a.rnr_retry;
            }
            if mask & b::ib_qp_attr_mask_IB_QP_RQ_PSN != 0 {
                s.rq_psn = a.rq_psn & crate::packet::PSN_MASK;
                rq.epsn = s.rq_psn;
                rq.atomics.clear();
            }
            if mask & b::ib_qp_attr_mask_IB_QP_MIN_RNR_TIMER != 0 {
                s.min_rnr_timer = a.min_rnr_timer;
            }
            if mask & b::ib_qp_attr_mask_IB_QP_SQ_PSN != 0 {
                s.sq_psn = a.sq_psn & crate::packet::PSN_MASK;
                sq.psn = s.sq_psn;
                sq.una = s.sq_psn;
                sq.sent_high = s.sq_psn;
            }
            if mask & b::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC != 0 {
                s.max_rd_atomic = a.max_rd_atomic;
            }
            if mask & b::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC != 0 {
                s.max_dest_rd_atomic = a.max_dest_rd_atomic;
            }
            if mask & b::ib_qp_attr_mask_IB_QP_DEST_QPN != 0 {
                s.dest_qpn = a.dest_qp_num;
            }
            if mask & b::ib_qp_attr_mask_IB_QP_AV != 0 {
                s.route = av.map(|av| av.route(qp.qpn, s.dest_qpn));
            }
            if s.state != new_state {
                ib::trace::qp_state(qp.qpn, s.state, new_state);
            }
            s.state = new_state;
        }
        match new_state {
            STATE_ERR => {
                qp.flush_sq(&mut sq);
                // Also schedules the send task, which flushes what is left.
                qp.set_error(&mut rq);
            }
            STATE_RESET => qp.reset(&mut sq, &mut rq),
            // WQEs posted while the QP drained (SQD) go out now.
            STATE_RTS => qp.schedule(),
            // The send task raises SQ_DRAINED once nothing is in flight.
            STATE_SQD if cur_state != STATE_SQD => {
                sq.draining = true;
                qp.schedule();
            }
            // The only change of `timeout` with work in flight (a modify
            // in SQD, without IB_QP_STATE while it drains): a turn moves the
            // retransmit timer.
            STATE_SQD if mask & b::ib_qp_attr_mask_IB_QP_TIMEOUT != 0 => qp.schedule(),
            _ => {}
        }
        Ok(())
    }

    /// `query_qp`.
    pub(crate) fn query(&self, a: &mut b::ib_qp_attr, i: &mut b::ib_qp_init_attr) {
        let s = self.attrs();
        *a = pin_init::zeroed();
        a.qp_state = s.state;
        a.cur_qp_state = s.state;
        a.path_mtu = s.mtu_enum;
        a.path_mig_state = b::ib_mig_state_IB_MIG_MIGRATED;
        a.qkey = s.qkey;
        a.dest_qp_num = s.dest_qpn;
        a.qp_access_flags = s.access as c_int;
        ib::as_bytes_mut(&mut a.ah_attr).copy_from_slice(&s.ah);
        a.pkey_index = s.pkey_index;
        a.port_num = s.port.into();
        a.max_rd_atomic = s.max_rd_atomic;
        a.max_dest_rd_atomic = s.max_dest_rd_atomic;
        a.min_rnr_timer = s.min_rnr_timer;
        a.timeout = s.timeout;
        a.retry_cnt = s.retry_cnt;
        a.rnr_retry = s.rnr_retry;
        {
            let sq = self.sq.lock();
            let rq = self.rq.lock();
            // Where the transport is now, as rdma_rxe and hardware report
            // them (`rdma res show qp` prints them): the next PSN to send
            // and the next one expected, not those modify_qp set.
            a.sq_psn = sq.psn;
            a.rq_psn = rq.epsn;
            a.sq_draining = sq.draining.into();
            a.cap.max_send_wr = sq.queue.capacity();
            // A QP on an SRQ has no receive queue of its own.
            a.cap.max_recv_wr = if self.srq.is_some() {
                0
            } else {
                rq.queue.capacity()
            };
        }
        a.cap.max_send_sge = self.max_send_sge;
        a.cap.max_recv_sge = self.max_recv_sge;
        a.cap.max_inline_data = self.max_inline;
        i.cap.max_send_wr = a.cap.max_send_wr;
        i.cap.max_recv_wr = a.cap.max_recv_wr;
        i.cap.max_send_sge = a.cap.max_send_sge;
        i.cap.max_recv_sge = a.cap.max_recv_sge;
        i.cap.max_inline_data = a.cap.max_inline_data;
        i.qp_type = self.qp_type;
        i.sq_sig_type = if self.sq_sig_all {
            b::ib_sig_type_IB_SIGNAL_ALL_WR
        } else {
            b::ib_sig_type_IB_SIGNAL_REQ_WR
        };
    }

    /// `rdma res show qp -dd`: where the QP's transport stands, for a user
    /// who wonders why a flow stalls (an empty RQ, RNR or timeout retries,
    /// READs and atomics waiting for answers, packets not yet taken).
    pub(crate) fn res_details(&self) -> [(&'static CStr, u64); 12] {
        let (requests, responses) = {
            let inbox = self.inbox.lock();
            (inbox.requests.len(), inbox.responses.len())
        };
        let sq = self.sq.lock();
        let rq = self.rq.lock();
        // A QP on an SRQ has no receive queue of its own.
        let rq_posted = if self.srq.is_some() {
            0
        } else {
            rq.queue.posted()
        };
        [
            (c"sq_posted", sq.queue.posted().into()),
            (c"sq_in_flight", sq.inflight.len() as u64),
            (c"sq_una", sq.una.into()),
            (c"sq_rd_atomic", sq.rd_requests.into()),
            (c"sq_retries", sq.retries.into()),
            (c"sq_rnr_retries", sq.rnr_tries.into()),
            (c"sq_rnr_wait", sq.rnr_wait.into()),
            (c"rq_posted", rq_posted.into()),
            (c"rq_msg_in_progress", rq.progress.is_some().into()),
            (c"rq_nak_sent", rq.nak_sent.into()),
            (c"inbox_requests", requests as u64),
            (c"inbox_responses", responses as u64),
        ]
    }

    /// `ibv_attach_mcast`: datagram QPs only, multicast GIDs only (IPv6
    /// ff00::/8, or IPv4-mapped 224.0.0.0/4). The group's first QP lets the
    /// netdev take its Ethernet address, as rxe does.
    pub(crate) fn attach_mcast(&self, mgid: &[u8; 16]) -> Result {
        if !self.ud() || self.qpn == crate::packet::GSI_QPN || !is_multicast(mgid) {
            return Err(EINVAL);
        }
        if self.peers.get().attach(mgid, self.qpn)? == mcast::Change::Created {
            if let Err(e) = self.ndev.mcast(mgid, true) {
                let _ = self.peers.get().detach(mgid, self.qpn);
                return Err(e);
            }
        }
        Ok(())
    }

    /// `ibv_detach_mcast`; EINVAL if the QP was not attached.
    pub(crate) fn detach_mcast(&self, mgid: &[u8; 16]) -> Result {
        if self.peers.get().detach(mgid, self.qpn)? == mcast::Change::Removed {
            let _ = self.ndev.mcast(mgid, false);
        }
        Ok(())
    }

    /// Leaves every group (a QP being destroyed).
    fn detach_all_mcast(&self) {
        for mgid in self.peers.get().groups_of(self.qpn).iter() {
            let _ = self.detach_mcast(mgid);
        }
    }

    /// Whether posting to the SQ is allowed (RTS and later, and ERR, whose
    /// WQEs are flushed).
    pub(crate) fn can_post_send(&self) -> bool {
        let state = self.attrs().state;
        state >= STATE_RTS || state == STATE_ERR
    }

    /// Kernel posting to the SQ: `f` posts WRs through the [`KernelSq`],
    /// under the producer lock (any context: nothing sleeps or allocates);
    /// the requester is scheduled afterwards whatever `f` did. EINVAL for
    /// user QPs (`f` is then not called).
    pub(crate) fn with_kernel_sq<R>(
        self: &Arc<Self>,
        f: impl FnOnce(&mut KernelSq<'_>) -> R,
    ) -> Result<R> {
        let res = {
            let mut ksq = self.ksq.lock();
            match (*ksq).as_mut() {
                None => Err(EINVAL),
                Some(sq) => Ok(f(&mut KernelSq { qp: self, sq })),
            }
        };
        self.schedule();
        res
    }

    /// Kernel posting to the RQ, as [`Qp::with_kernel_sq`].
    pub(crate) fn with_kernel_rq<R>(&self, f: impl FnOnce(&mut KernelRq<'_>) -> R) -> Result<R> {
        let mut krq = self.krq.lock();
        match (*krq).as_mut() {
            None => Err(EINVAL),
            Some(rq) => Ok(f(&mut KernelRq { qp: self, rq })),
        }
    }
}

/// The producer end of a kernel QP's SQ, locked.
pub(crate) struct KernelSq<'a> {
    qp: &'a Qp,
    sq: &'a mut Queue,
}

impl KernelSq<'_> {
    /// Writes one WR into the ring in librxe's WQE layout, so the requester
    /// treats kernel and user QPs alike.
    pub(crate) fn post(&mut self, w: &KernelSendWr<'_>) -> Result {
        post_one_send(self.qp, self.sq, w)
    }
}

/// The producer end of a kernel QP's RQ, locked.
pub(crate) struct KernelRq<'a> {
    qp: &'a Qp,
    rq: &'a mut Queue,
}

impl KernelRq<'_> {
    /// Writes one receive WR (`num` SGEs, SGE `i` from `sge(i)`).
    pub(crate) fn post(
        &mut self,
        wr_id: u64,
        num: u32,
        sge: &dyn Fn(u32) -> Option<Sge>,
    ) -> Result {
        if num > self.qp.max_recv_sge {
            return Err(EINVAL);
        }
        // `sge` names each of the `num` SGEs.
        let list = (0..num).map(|i| sge(i).unwrap_or_default());
        self.rq.push_with(|slot| wqe::write_recv(slot, wr_id, list))
    }
}

fn mtu_bytes(mtu: u32) -> u32 {
    128u32 << mtu.clamp(1, 5)
}

/// Writes one kernel send WR into the SQ ring. Called in any context:
/// nothing here allocates or sleeps.
fn post_one_send(qp: &Qp, sq: &mut Queue, w: &KernelSendWr<'_>) -> Result {
    let mut x = w.wqe;
    if x.num_sge > qp.max_send_sge {
        return Err(EINVAL);
    }
    // `sges` names each of the `num_sge` SGEs.
    let list = (0..x.num_sge).map(|i| (w.sges)(i).unwrap_or_default());
    x.length = list.clone().fold(0u32, |a, s| a.wrapping_add(s.length));
    // ATOMIC_WRITE's 8 bytes travel in the WQE (`dma.atomic_wr`, where
    // librxe puts them), as inline data does.
    let atomic_write = x.opcode == wqe::wr::ATOMIC_WRITE;
    if x.send_flags & wqe::flags::INLINE == 0 && !atomic_write {
        return sq.push_with(|slot| wqe::write_send(slot, &x, list));
    }
    // Inline: the bytes travel in the WQE, copied now from the SGEs.
    if atomic_write && x.length != 8 || !atomic_write && x.length > qp.max_inline {
        return Err(EINVAL);
    }
    x.num_sge = 0;
    sq.push_with(|slot| {
        wqe::write_send(slot, &x, core::iter::empty())?;
        let mut off = wqe::SEND_WQE_SGE_OFFSET;
        for s in list {
            let src = (w.bytes)(&s);
            let dst = slot.get_mut(off..off.checked_add(src.len())?)?;
            dst.copy_from_slice(src);
            off += src.len();
        }
        Some(())
    })
}

/// A multicast GID: IPv6 ff00::/8, or an IPv4-mapped 224.0.0.0/4 address.
fn is_multicast(gid: &[u8; 16]) -> bool {
    gid[0] == 0xff || (gid[..12] == crate::ip::V4_MAPPED_PREFIX && gid[12] & 0xf0 == 0xe0)
}
