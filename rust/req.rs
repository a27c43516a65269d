// SPDX-License-Identifier: GPL-2.0

//! The requester. The send task runs it after the completer: it takes
//! posted WQEs out of the SQ ring (a private copy each, validated once, its
//! local SGEs checked and referenced), gives them PSNs and sends their
//! packets within the window of unacknowledged PSNs. A WQE stays in flight,
//! its ring slot the user's, until the completer retires it on an ACK or
//! its READ or atomic response.

use kernel::alloc::KVVec;
use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::workqueue::WorkItem;

use crate::access;
use crate::bindings as b;
use crate::comp;
use crate::mr;
use crate::net;
use crate::packet::{self, op, AtomicEth, Deth, Feth, Hdr, Kind, Reth};
use crate::params::{self, cost, ACK_EVERY, BUDGET, MAX_UNACKED_PSNS};
use crate::pkt::{Gather, Packet, Payload};
use crate::qp::flight::{Op, Pending, Source};
use crate::qp::{Attrs, Qp, SendSide, RNR, SEND, STATE_ERR, STATE_RTS, STATE_SQD};
use crate::sgl::{MrCache, Sgl};
use crate::udp;
use crate::wqe::{self, flags, wr, SendWqe};

impl WorkItem<SEND> for Qp {
    type Pointer = Arc<Qp>;

    fn run(qp: Arc<Qp>) {
        run(&qp);
    }
}

/// The send task: the completer, then the requester, within one budget.
/// In ERR it flushes. Requeues itself while work is left.
pub(crate) fn run(qp: &Arc<Qp>) {
    turn(qp, qp.sq.lock());
}

/// A user's doorbell: the send task's turn in the system call if the SQ is
/// free, else the task is queued, to run once the turn holding it (a worker's
/// send task, the receive task's completer) is done, and take the new WQEs.
/// Waiting for the SQ instead cost the poster its CPU: with every packet
/// through the wire path a worker holds it for a budget's worth of packets,
/// and the poster spun on it (a third of a vCPU in `mutex_spin_on_owner`
/// under ib_write_bw).
///
/// A post behind WQEs still in flight (a stream: the application keeps a
/// queue of them) goes to an idle CPU beside the poster if there is one
/// (`peer_away`): the poster's CPU is then the stream's limit (a system
/// call a message), and a turn there adds to each (atomics 1.32x, 4 KiB
/// READs 1.40x without it). A post into an empty flight (a latency test's
/// ping-pong) sends at once, from here. With `qp_spread` the QP's home CPU
/// decides, as before.
pub(crate) fn run_or_queue(qp: &Arc<Qp>) {
    let Some(sq) = qp.sq.try_lock() else {
        qp.schedule();
        return;
    };
    if mid_flow(&sq) {
        drop(sq);
        qp.schedule();
        return;
    }
    if !sq.inflight.is_empty() && qp.home.is_none() {
        if let Some(cpu) = crate::wq::away_cpu_for(0, false) {
            drop(sq);
            qp.schedule_on(cpu);
            return;
        }
    }
    turn(qp, sq);
}

/// WQEs taken with packets left to send: the send task runs again for them
/// (a response opens the window, a spent budget requeues it, a timer ends
/// an RNR wait or a retransmission), and takes the new WQEs after them. A
/// turn here would send them at the poster's priority, holding the SQ, and
/// wake the peer's receive task, which preempts the poster at the system
/// call's exit: a poster sharing its CPU with the flow then queued one
/// message per slice the scheduler gave it.
fn mid_flow(sq: &SendSide) -> bool {
    sq.next < sq.inflight.len()
}

fn turn(qp: &Arc<Qp>, mut sq: kernel::sync::MutexGuard<'_, SendSide>) {
    if qp.is_dead() {
        return;
    }
    crate::wq::turn_starts(Arc::as_ptr(qp).cast());
    let mut budget = BUDGET;
    let mut cache = MrCache::new();
    comp::drain(qp, &mut sq, &mut budget, &mut cache);
    let attrs = qp.attrs();
    let mut more = false;
    if attrs.state == STATE_ERR {
        more = qp.flush_sq(&mut sq);
        // Responses to what was flushed mean nothing now.
        while qp.next_response().is_some() {}
    } else if attrs.state == STATE_RTS || attrs.state == STATE_SQD {
        more = send(qp, &mut sq, &attrs, &mut budget, &mut cache);
        udp::send_train(qp, &mut sq.train);
        // A WQE that failed before a packet went out completes once it is
        // the head.
        comp::settle(qp, &mut sq);
        comp::arm_retry(qp, &mut sq, &attrs);
    }
    more |= !qp.inbox.lock().responses.is_empty() || sq.peer_full;
    if attrs.state == STATE_SQD
        && sq.draining
        && sq.inflight.front().is_none_or(|p| !comp::started(&sq, p))
    {
        sq.draining = false;
        // Under the SQ lock, which teardown takes last: once this turn let
        // go of it, destroy may return and the core free the ib_qp (a turn
        // on the normal-priority queue is not one that flush waits for).
        qp.event(b::ib_event_type_IB_EVENT_SQ_DRAINED);
    }
    // A flow that waits for its window (WQEs still in flight) goes on: the
    // response that opens the window queues the next turn, which keeps the
    // streak's priority (`yield_ms`); a streak that ended there at each
    // full window kept a flood on the high-priority queue for good.
    let done = sq.inflight.is_empty();
    drop(sq);
    if more {
        qp.requeue();
    } else if done {
        qp.idle::<SEND>();
    }
}

/// Room in the window for PSN `psn`.
fn in_window(sq: &SendSide, psn: u32) -> bool {
    packet::psn_diff(psn, sq.una) < MAX_UNACKED_PSNS as i32
}

/// Sends what the window and the budget allow. True if it stopped on the
/// budget with work left.
fn send(
    qp: &Arc<Qp>,
    sq: &mut SendSide,
    attrs: &Attrs,
    budget: &mut u32,
    cache: &mut MrCache,
) -> bool {
    sq.peer_full = false;
    while *budget > 0 {
        if sq.rnr_wait {
            return false;
        }
        // Packets left in a WQE already in flight: in SQD, only of one
        // that started (a WQE taken early, behind the window or the
        // READ/atomic limit, waits for RTS).
        if let Some(p) = sq.inflight.get(sq.next) {
            if attrs.state == STATE_SQD && !comp::started(sq, p) {
                // The WQE before it left its ACK request to it (in RTS):
                // its last packet goes again, asking (`defers_ack` is
                // false in SQD), or the drain waited for the retransmit
                // timer (forever with timeout 0).
                let deferred = sq.unasked > 0
                    && sq
                        .next
                        .checked_sub(1)
                        .and_then(|i| sq.inflight.get(i))
                        .is_some_and(|w| matches!(w.op, Op::Message(..)) && w.sent == w.npkts);
                if deferred {
                    ask_again(sq, sq.next);
                    continue;
                }
                return false;
            }
            match send_packets(qp, sq, attrs, budget, cache) {
                Step::Progress => continue,
                Step::Blocked => return false,
                Step::PeerFull => {
                    sq.peer_full = true;
                    return false;
                }
            }
        }
        // A new WQE: SQD takes none (it drains what is in flight).
        // UC has no window: nothing is acknowledged, a WQE completes once sent.
        if attrs.state != STATE_RTS || (qp.reliable() && !in_window(sq, sq.psn)) {
            return false;
        }
        // The responder may have moved the QP to ERR since this turn took
        // `attrs`: nothing new goes out, the next turn flushes.
        if qp.state() == STATE_ERR {
            return true;
        }
        match take(qp, sq, attrs) {
            Take::Taken => *budget -= 1,
            Take::Done => {
                *budget -= 1;
            }
            Take::Stop => return false,
        }
    }
    sq.next < sq.inflight.len() || !sq.queue.is_empty()
}

/// Something found no memory: the send task runs again after
/// `NOMEM_RETRY_NS`, on the RNR timer, whatever else happens meanwhile.
fn try_again_soon(qp: &Arc<Qp>) {
    qp.arm::<RNR>(params::NOMEM_RETRY_NS);
}

enum Step {
    Progress,
    Blocked,
    /// UC over loopback: the peer's queue is full (see `Qp::takes_requests`).
    PeerFull,
}

/// Sends the next packets of the WQE at `sq.next`.
fn send_packets(
    qp: &Arc<Qp>,
    sq: &mut SendSide,
    attrs: &Attrs,
    budget: &mut u32,
    cache: &mut MrCache,
) -> Step {
    let next = sq.next;
    let una = sq.una;
    let defer = defers_ack(qp, sq, attrs, next);
    let Some(p) = sq.inflight.get_mut(next) else {
        return Step::Blocked;
    };
    if p.sent >= p.npkts {
        sq.next += 1;
        return Step::Progress;
    }
    let (dest, route) = match &p.ud {
        Some(d) => (d.qpn, Some(d.route)),
        None => (attrs.dest_qpn, attrs.route),
    };
    // The source address went away (or was replaced) since the QP got its
    // path or the AH was made: nothing more goes out from it, first packets
    // or a go-back's, as rxe fails the WQE when `rdma_get_gid_attr` finds no
    // GID there for a packet.
    if !matches!(p.op, Op::Failed(_)) && route.as_ref().is_some_and(|r| !qp.ib.source_ok(r)) {
        let first = p.sent == 0;
        p.op = Op::Failed(b::ib_wc_status_IB_WC_LOC_QP_OP_ERR);
        if first && sq.unasked > 0 {
            ask_again(sq, next);
        }
        return Step::Progress;
    }
    // UC and UD have no window; on this device they wait for the peer
    // instead of losing what the peer has no room for, through the wire's
    // encoding (`wire_loopback`) too.
    let handed_over = crate::qp::handed_over(route.as_ref());
    let peer = if !qp.reliable() && route.as_ref().is_none_or(|r| r.local) {
        qp.peers.get().get(dest)
    } else {
        None
    };
    // A UC or UD WQE completes once sent, before a peer on this device
    // places its bytes: they are copied now, as the wire copies them into
    // the skb, so that the buffer is the poster's again at the completion.
    // RC's completes on the ACK, sent once the bytes are placed.
    let by_ref = qp.reliable() || !handed_over;
    // READ requests and atomics the peer has not answered take its responder
    // resources: no more than max_rd_atomic, as on a NIC (rxe waits too). 0
    // means the QP was never told: one at a time rather than none.
    let rd_limit = u32::from(attrs.max_rd_atomic).max(1);
    match &p.op {
        Op::Failed(_) => {
            // Never sent: the completer completes it once it is the head.
            p.sent = p.npkts;
            sq.next += 1;
            Step::Progress
        }
        Op::Message(kind, src) => {
            // UD: the datagram's DETH (one packet, a SEND: `prepare`).
            let deth = p.ud.map(|d| Deth {
                qkey: d.qkey,
                src_qpn: qp.qpn,
            });
            while p.sent < p.npkts && *budget > 0 {
                let i = p.sent;
                let psn = packet::psn_add(p.first_psn, i);
                if qp.reliable() && packet::psn_diff(psn, una) >= MAX_UNACKED_PSNS as i32 {
                    return Step::Blocked;
                }
                if peer.as_ref().is_some_and(|d| !d.takes_requests()) {
                    return Step::PeerFull;
                }
                let off = u64::from(i) * u64::from(p.mtu);
                let n = (p.total - off.min(p.total)).min(u64::from(p.mtu)) as usize;
                let payload = match src.gather(qp.keys.get(), cache, off, n, by_ref) {
                    Ok(payload) => payload,
                    // No memory for the payload: the send task tries again
                    // shortly. Nothing of it went out, so no retransmit
                    // timer would come for it (UC and UD have none), and the
                    // QP stalled until the next post.
                    Err(Gather::NoMem) => {
                        try_again_soon(qp);
                        return Step::Blocked;
                    }
                    Err(Gather::Access) => {
                        // The source MR changed under the WQE (invalidated).
                        p.op = Op::Failed(b::ib_wc_status_IB_WC_LOC_PROT_ERR);
                        if i == 0 && sq.unasked > 0 {
                            ask_again(sq, next);
                        }
                        return Step::Progress;
                    }
                };
                let mut opcode = packet::opcode(*kind, i, p.npkts);
                if qp.uc() {
                    // `prepare` let only SENDs and WRITEs through.
                    opcode = packet::uc_opcode(opcode).unwrap_or(opcode);
                } else if deth.is_some() {
                    opcode = if *kind == Kind::SendImm {
                        op::UD_SEND_ONLY_IMM
                    } else {
                        op::UD_SEND_ONLY
                    };
                }
                let mut hdr = Hdr::new(opcode, psn, dest);
                hdr.deth = deth;
                let last = i + 1 == p.npkts;
                if qp.reliable() {
                    hdr.ack_req = packet::ack_req(last, defer, sq.unasked, ACK_EVERY);
                    sq.unasked = if hdr.ack_req { 0 } else { sq.unasked + 1 };
                }
                hdr.solicited = last && p.w.send_flags & flags::SOLICITED != 0;
                hdr.ex = p.w.ex;
                if i == 0 && matches!(kind, Kind::Write | Kind::WriteImm) {
                    hdr.reth = Some(Reth {
                        va: p.w.remote_addr,
                        rkey: p.w.rkey,
                        len: p.total as u32,
                    });
                }
                p.sent += 1;
                *budget = budget.saturating_sub(cost(n));
                // A datagram goes alone: its route is its own (an AH).
                let train = if p.ud.is_none() {
                    Some(&mut sq.train)
                } else {
                    None
                };
                net::xmit_to(qp, route.as_ref(), Packet::with(hdr, payload), train);
            }
            if p.sent >= p.npkts {
                sq.next += 1;
                if !qp.reliable() {
                    // Sent is done: UC's and UD's completion, as rxe's.
                    let last = p.last_psn();
                    comp::ack_through(qp, sq, last);
                }
            }
            Step::Progress
        }
        Op::Read(_) => {
            // One request per chunk of response PSNs, from `sent` on (after
            // a go-back, from where the responses stopped, to the end of
            // that chunk).
            while p.sent < p.npkts && *budget > 0 {
                if sq.rd_requests >= rd_limit {
                    return Step::Blocked;
                }
                let i = p.sent;
                let psn = packet::psn_add(p.first_psn, i);
                let n = packet::read_request_len(i, p.npkts);
                let last_psn = packet::psn_add(psn, n - 1);
                if packet::psn_diff(last_psn, una) >= MAX_UNACKED_PSNS as i32 {
                    return Step::Blocked;
                }
                let off = u64::from(i) * u64::from(p.mtu);
                let len = (p.total - off.min(p.total)).min(u64::from(n) * u64::from(p.mtu));
                let mut hdr = Hdr::new(op::READ_REQUEST, psn, dest);
                hdr.ack_req = true;
                hdr.reth = Some(Reth {
                    va: p.w.remote_addr.wrapping_add(off),
                    rkey: p.w.rkey,
                    len: len as u32,
                });
                p.sent += n;
                sq.rd_requests += 1;
                sq.unasked = 0;
                *budget -= 1;
                net::xmit_to(
                    qp,
                    attrs.route.as_ref(),
                    Packet::new(hdr),
                    Some(&mut sq.train),
                );
            }
            if p.sent >= p.npkts {
                sq.next += 1;
            }
            Step::Progress
        }
        Op::AtomicWrite(_) | Op::Flush(_) | Op::Atomic(_) => {
            // One request packet, answered like a READ: each holds a
            // responder resource (rxe's responder keeps one for FLUSH too).
            if sq.rd_requests >= rd_limit {
                return Step::Blocked;
            }
            let Some(pkt) = one_packet_request(p, dest) else {
                // No memory for ATOMIC_WRITE's 8 bytes: as for a payload.
                try_again_soon(qp);
                return Step::Blocked;
            };
            p.sent = 1;
            sq.rd_requests += 1;
            sq.unasked = 0;
            *budget -= 1;
            sq.next += 1;
            net::xmit_to(qp, attrs.route.as_ref(), pkt, Some(&mut sq.train));
            Step::Progress
        }
    }
}

/// Whether the last packet of the WQE at `next` may leave its ACK request to
/// the WQE after it: the WQE is an unsignaled SEND or WRITE (nothing the
/// application sees completes with it), and the next WQE is taken, valid,
/// and about to send packets of its own (a READ or an atomic asks for its
/// answer; the last message asks unless it may defer in turn). The next
/// WQE is taken now if it is posted, as the turn would right after.
/// Fenced WQEs and local operations wait for what is in flight and so are
/// never taken here: one behind an ACK nobody asked for would wait until
/// the retransmit timer. In SQD nothing new starts: a WQE taken early (a
/// READ past `max_rd_atomic`) would never ask, and each resend of the last
/// packet went unanswered until RETRY_EXC_ERR (the drain never ended).
fn defers_ack(qp: &Arc<Qp>, sq: &mut SendSide, attrs: &Attrs, next: usize) -> bool {
    let Some(p) = sq.inflight.get(next) else {
        return false;
    };
    if !qp.reliable()
        || attrs.state != STATE_RTS
        || !matches!(p.op, Op::Message(..))
        || qp.sq_sig_all
        || p.w.send_flags & flags::SIGNALED != 0
    {
        return false;
    }
    if sq.inflight.len() == next + 1
        && (!in_window(sq, sq.psn) || !matches!(take(qp, sq, attrs), Take::Taken))
    {
        return false;
    }
    sq.inflight
        .get(next + 1)
        .is_some_and(|s| !matches!(s.op, Op::Failed(_)))
}

/// The WQE at `next` failed before its first packet (or SQD will not start
/// it), and the WQE before it had left its ACK request to it: that last
/// packet goes again, asking (the responder acknowledges a duplicate), so
/// that the WQE reaches the head without waiting for the retransmit timer
/// (or forever, with none).
fn ask_again(sq: &mut SendSide, next: usize) {
    let Some(prev) = next.checked_sub(1) else {
        return;
    };
    // What went out stays sent (`comp::started`), as after a go-back.
    sq.sent_high = comp::sent_limit(sq);
    if let Some(p) = sq.inflight.get_mut(prev) {
        p.sent = p.npkts.saturating_sub(1);
        sq.next = prev;
    }
}

/// The packet of an ATOMIC_WRITE, a FLUSH or an atomic (`None`: no memory
/// for the ATOMIC_WRITE's bytes now).
fn one_packet_request(p: &Pending, dest: u32) -> Option<Packet> {
    let reth = |len| {
        Some(Reth {
            va: p.w.remote_addr,
            rkey: p.w.rkey,
            len,
        })
    };
    let (mut hdr, payload) = match &p.op {
        Op::AtomicWrite(v) => {
            let mut bytes = KVVec::new();
            bytes.extend_from_slice(v, GFP_KERNEL).ok()?;
            let mut hdr = Hdr::new(op::ATOMIC_WRITE, p.first_psn, dest);
            hdr.reth = reth(8);
            (hdr, Payload::Bytes(bytes))
        }
        Op::Flush(feth) => {
            let mut hdr = Hdr::new(op::FLUSH, p.first_psn, dest);
            hdr.reth = reth(p.w.length);
            hdr.feth = Some(*feth);
            (hdr, Payload::empty())
        }
        _ => {
            let opcode = if p.w.opcode == wr::ATOMIC_CMP_AND_SWP {
                op::COMPARE_SWAP
            } else {
                op::FETCH_ADD
            };
            let mut hdr = Hdr::new(opcode, p.first_psn, dest);
            hdr.atomic = Some(AtomicEth {
                va: p.w.remote_addr,
                rkey: p.w.rkey,
                swap: p.w.swap,
                compare_add: p.w.compare_add,
            });
            (hdr, Payload::empty())
        }
    };
    hdr.ack_req = true;
    Some(Packet::with(hdr, payload))
}

enum Take {
    /// A WQE went in flight.
    Taken,
    /// A WQE completed at once (local operations).
    Done,
    /// Nothing to take now.
    Stop,
}

/// Takes the next posted WQE out of the ring.
fn take(qp: &Arc<Qp>, sq: &mut SendSide, attrs: &Attrs) -> Take {
    let n = sq.inflight.len();
    // Nothing is taken after a WQE that failed: the QP is about to go to ERR.
    if n > 0 && matches!(sq.inflight.get(n - 1).map(|p| &p.op), Some(Op::Failed(_))) {
        return Take::Stop;
    }
    if !sq.queue.peek_nth_into(n as u32, &mut sq.wqe) {
        return Take::Stop;
    }
    let Some(w) = SendWqe::parse(&sq.wqe) else {
        return Take::Stop;
    };
    let local = matches!(w.opcode, wr::LOCAL_INV | wr::REG_MR | wr::BIND_MW);
    // Local operations and fenced WQEs wait for what is in flight: the
    // former run here and complete at once, in order.
    if (local || w.send_flags & flags::FENCE != 0) && n > 0 {
        return Take::Stop;
    }
    if local {
        let status = local_op(qp, &w);
        comp::complete_now(qp, sq, &w, status);
        // A failure moved the QP to ERR: what was posted after the WQE is
        // flushed by the next turn, not taken by this one in the state it
        // started in.
        return if status == b::ib_wc_status_IB_WC_SUCCESS {
            Take::Done
        } else {
            Take::Stop
        };
    }
    let mut mtu = attrs.packet_mtu();
    let prepared = prepare(qp, sq, &w);
    if matches!(prepared, Err(crate::sgl::NO_MEMORY)) {
        // Not taken: tried again shortly (rxe fails the WQE and the QP
        // with LOC_QP_OP_ERR).
        try_again_soon(qp);
        return Take::Stop;
    }
    let (op, ud) = match prepared {
        Ok(op) if qp.ud() => match crate::ud::dest(qp, attrs, &w) {
            Ok(d) => (op, Some(d)),
            Err(status) => (Op::Failed(status), None),
        },
        Ok(op) => (op, None),
        Err(status) => (Op::Failed(status), None),
    };
    if let (Some(d), Op::Message(_, src)) = (&ud, &op) {
        if src.total() > u64::from(d.mtu) {
            // C10-93.1.1: a datagram larger than the port's MTU is not
            // sent, and that is no error (rxe completes it successfully
            // too). It completes in order: after what is in flight.
            if n > 0 {
                return Take::Stop;
            }
            sq.psn = packet::psn_add(sq.psn, 1);
            comp::complete_now(qp, sq, &w, b::ib_wc_status_IB_WC_SUCCESS);
            return Take::Done;
        }
        mtu = d.mtu;
    }
    let (npkts, total) = match &op {
        Op::Message(_, src) => (packet::packets(src.total(), mtu), src.total()),
        Op::Read(sgl) => (packet::packets(sgl.total, mtu), sgl.total),
        Op::Atomic(_) | Op::AtomicWrite(_) => (1, 8),
        Op::Flush(_) => (1, 0),
        Op::Failed(_) => (0, 0),
    };
    let p = Pending {
        w,
        op,
        first_psn: sq.psn,
        npkts,
        sent: 0,
        done: 0,
        mtu,
        total,
        ud,
    };
    if sq.inflight.push(p).is_err() {
        // Cannot happen: `inflight` has room for the window's WQEs, and each
        // takes at least one PSN of it, except a failed one, which ends
        // taking until it completes.
        return Take::Stop;
    }
    sq.psn = packet::psn_add(sq.psn, npkts);
    Take::Taken
}

/// Validates a WQE and references what it reads or writes locally. On
/// failure, the status it completes with.
fn prepare(qp: &Qp, sq: &SendSide, w: &SendWqe) -> Result<Op, u32> {
    // UC carries SENDs and WRITEs only (no READ, atomic or invalidate).
    let uc_ok = matches!(
        w.opcode,
        wr::SEND | wr::SEND_WITH_IMM | wr::RDMA_WRITE | wr::RDMA_WRITE_WITH_IMM
    );
    if qp.uc() && !uc_ok {
        return Err(b::ib_wc_status_IB_WC_LOC_QP_OP_ERR);
    }
    // UD carries SENDs only, with or without immediate.
    if qp.ud() && !matches!(w.opcode, wr::SEND | wr::SEND_WITH_IMM) {
        return Err(b::ib_wc_status_IB_WC_LOC_QP_OP_ERR);
    }
    let kind = match w.opcode {
        wr::SEND => Kind::Send,
        wr::SEND_WITH_IMM => Kind::SendImm,
        wr::SEND_WITH_INV => Kind::SendInv,
        wr::RDMA_WRITE => Kind::Write,
        wr::RDMA_WRITE_WITH_IMM => Kind::WriteImm,
        wr::RDMA_READ => {
            let sgl = local_sgl(qp, sq, w.num_sge, access::LOCAL_WRITE)?;
            if sgl.total > u64::from(params::PORT_MAX_MSG_SZ) {
                return Err(b::ib_wc_status_IB_WC_LOC_LEN_ERR);
            }
            return Ok(Op::Read(sgl));
        }
        wr::ATOMIC_WRITE => {
            // RC only (UC and UD were refused above); the bytes are in the
            // WQE, copied out with it.
            let off = wqe::SEND_WQE_SGE_OFFSET;
            let v = match sq.wqe.get(off..off + 8) {
                Some(b) if w.length == 8 => b,
                _ => return Err(b::ib_wc_status_IB_WC_LOC_LEN_ERR),
            };
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(v);
            return Ok(Op::AtomicWrite(bytes));
        }
        wr::FLUSH => {
            // RC only. No type, an unknown one or an unknown level is the
            // poster's mistake: caught here rather than NAKed by the peer.
            // Persistence is the peer's to grant or refuse.
            let feth = Feth {
                placement: w.flush_type,
                level: w.flush_level,
            };
            if !feth.valid() {
                return Err(b::ib_wc_status_IB_WC_LOC_QP_OP_ERR);
            }
            return Ok(Op::Flush(feth));
        }
        wr::ATOMIC_CMP_AND_SWP | wr::ATOMIC_FETCH_AND_ADD => {
            if w.num_sge != 1 {
                return Err(b::ib_wc_status_IB_WC_LOC_LEN_ERR);
            }
            let sgl = local_sgl(qp, sq, 1, access::LOCAL_WRITE)?;
            if sgl.first_len().is_none_or(|len| len < 8) {
                return Err(b::ib_wc_status_IB_WC_LOC_LEN_ERR);
            }
            return Ok(Op::Atomic(sgl));
        }
        _ => return Err(b::ib_wc_status_IB_WC_LOC_QP_OP_ERR),
    };
    let src = if w.send_flags & flags::INLINE != 0 {
        let n = w.length as usize;
        if n > qp.max_inline as usize {
            return Err(b::ib_wc_status_IB_WC_LOC_LEN_ERR);
        }
        let data = sq
            .wqe
            .get(wqe::SEND_WQE_SGE_OFFSET..wqe::SEND_WQE_SGE_OFFSET + n)
            .ok_or(b::ib_wc_status_IB_WC_LOC_LEN_ERR)?;
        let mut v = KVec::new();
        v.extend_from_slice(data, GFP_KERNEL)
            .map_err(|_| crate::sgl::NO_MEMORY)?;
        Source::Inline(v)
    } else {
        Source::Sgl(local_sgl(qp, sq, w.num_sge, 0)?)
    };
    if src.total() > u64::from(params::PORT_MAX_MSG_SZ) {
        return Err(b::ib_wc_status_IB_WC_LOC_LEN_ERR);
    }
    Ok(Op::Message(kind, src))
}

/// The WQE's local SGEs, checked for `rights`.
fn local_sgl(qp: &Qp, sq: &SendSide, num: u32, rights: u32) -> Result<Sgl, u32> {
    if num > qp.max_send_sge {
        return Err(b::ib_wc_status_IB_WC_LOC_LEN_ERR);
    }
    Sgl::build(
        qp.keys.get(),
        qp.pd,
        &sq.wqe,
        wqe::SEND_WQE_SGE_OFFSET,
        num,
        rights,
    )
}

/// LOCAL_INV, REG_MR and BIND_MW: no packet, only the MR or window changes
/// state. Failures complete with LOC_QP_OP_ERR (MW_BIND_ERR for a bind), as
/// in rdma_rxe.
fn local_op(qp: &Qp, w: &SendWqe) -> u32 {
    let res = match w.opcode {
        // A UD QP binds no window; RC and UC do, as rdma_rxe's (librxe
        // offers IBV_QP_EX_WITH_BIND_MW on both).
        wr::BIND_MW if qp.ud() => false,
        wr::BIND_MW => crate::mw::bind(qp.mws.get(), qp.keys.get(), qp.pd, qp.uid, w),
        wr::LOCAL_INV => crate::mw::invalidate(qp.keys.get(), qp.mws.get(), w.ex, qp.pd),
        // Kernel QPs only: a user could write any key into its ring.
        _ if qp.user => false,
        _ => mr::lookup_index(qp.keys.get(), w.mr_key).is_some_and(|m| {
            m.fast_register(qp.pd, w.rkey, w.access, w.remote_addr)
                .is_ok()
        }),
    };
    if res {
        b::ib_wc_status_IB_WC_SUCCESS
    } else if w.opcode == wr::BIND_MW {
        b::ib_wc_status_IB_WC_MW_BIND_ERR
    } else {
        b::ib_wc_status_IB_WC_LOC_QP_OP_ERR
    }
}
