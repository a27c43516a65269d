// SPDX-License-Identifier: GPL-2.0

//! The completer. The send task runs it before the requester: it takes the
//! responses queued for the QP (ACKs and NAKs, READ responses, atomic
//! ACKs), places READ data and atomic results in the local SGEs, and retires
//! the WQEs in flight in order, posting their completions. An RNR NAK arms
//! the RNR timer, a sequence NAK or a retransmit timeout sends again from
//! the oldest unacknowledged PSN (go-back-N), and an error NAK or exhausted
//! retries complete the WQE in error and move the QP to ERR.

use kernel::sync::Arc;
use kernel::workqueue::WorkItem;

use crate::bindings as b;
use crate::ib;
use crate::mr::Src;
use crate::packet::{self, op, Nak, Syndrome};
use crate::params;
use crate::pkt::Packet;
use crate::qp::flight::{wc_opcode, Op, Pending};
use crate::qp::{Attrs, Qp, SendSide, RETRY, RNR, STATE_ERR};
use crate::sgl::MrCache;
use crate::stats::Counter;
use crate::wqe::{flags, SendWqe};

fn nak_status(nak: Nak) -> u32 {
    match nak {
        Nak::RemoteAccess => b::ib_wc_status_IB_WC_REM_ACCESS_ERR,
        Nak::InvalidRequest => b::ib_wc_status_IB_WC_REM_INV_REQ_ERR,
        Nak::RemoteOperational => b::ib_wc_status_IB_WC_REM_OP_ERR,
        Nak::Rnr => b::ib_wc_status_IB_WC_RNR_RETRY_EXC_ERR,
        Nak::Sequence => b::ib_wc_status_IB_WC_RETRY_EXC_ERR,
    }
}

/// Handles the queued responses, within the budget; then retires a head
/// that failed before it was sent.
pub(crate) fn drain(qp: &Arc<Qp>, sq: &mut SendSide, budget: &mut u32, cache: &mut MrCache) {
    while *budget > 0 {
        let Some(pkt) = qp.next_response() else {
            break;
        };
        *budget = budget.saturating_sub(crate::params::cost(pkt.payload.len()));
        // UC and UD ask for no answer: anything that looks like one is not
        // ours.
        if !qp.reliable() || qp.attrs().state == STATE_ERR {
            continue;
        }
        response(qp, sq, &pkt, cache);
    }
    settle(qp, sq);
}

/// Retires the head WQEs whose outcome is known without a response: those
/// that failed before a packet went out.
pub(crate) fn settle(qp: &Arc<Qp>, sq: &mut SendSide) {
    while let Some(Op::Failed(status)) = sq.inflight.front().map(|p| &p.op) {
        // After the first error completion the rest are flushed
        // (WR_FLUSH_ERR, `flush_sq`), a failed WQE too.
        if qp.attrs().state == STATE_ERR {
            return;
        }
        let status = *status;
        fail(qp, sq, status);
    }
}

fn response(qp: &Arc<Qp>, sq: &mut SendSide, pkt: &Packet, cache: &mut MrCache) {
    let h = &pkt.hdr;
    // Anything at or before `una - 1` was dealt with already. A NAK names a
    // PSN that was sent: one for a PSN not sent yet (stale, from before a
    // RESET, or forged) fails, rewinds or holds back nothing, as in rxe.
    let sent = packet::psn_diff(h.psn, sent_limit(sq)) < 0;
    match h.opcode {
        op::ACKNOWLEDGE => {
            let Some(syndrome) = h.aeth else {
                return;
            };
            match syndrome {
                Syndrome::Rnr(_) => qp.count(Counter::RcvdRnrErr),
                Syndrome::Nak(Nak::Sequence) => qp.count(Counter::RcvdSeqErr),
                _ => {}
            }
            // An ACK covers its PSN; a NAK what is before it.
            let through = match syndrome {
                Syndrome::Ack => h.psn,
                _ => packet::psn_add(h.psn, packet::PSN_MASK),
            };
            ack_through(qp, sq, through);
            // Past a READ or atomic left unanswered at the head once the
            // WQEs before it retired: its answer was lost (rxe's
            // `check_psn`, for NAKs too). The go-back sends what the NAK
            // names again as well.
            if answer_lost(qp, sq, h.psn, true) {
                return;
            }
            match syndrome {
                Syndrome::Ack => {}
                Syndrome::Rnr(code) => {
                    if h.psn == sq.una && sent {
                        rnr(qp, sq, code);
                    }
                }
                Syndrome::Nak(Nak::Sequence) => {
                    // The responder expects `psn`: send again from there,
                    // unless an RNR wait will do so.
                    if h.psn == sq.una && sent && !sq.rnr_wait {
                        ib::trace::retransmit(qp.qpn, sq.una, c"sequence NAK", sq.retries);
                        rewind(sq);
                    }
                }
                Syndrome::Nak(nak) => {
                    if h.psn == sq.una && sent && head_holds(sq, h.psn) {
                        fail(qp, sq, nak_status(nak));
                    }
                }
            }
        }
        op::READ_RESPONSE_FIRST
        | op::READ_RESPONSE_MIDDLE
        | op::READ_RESPONSE_LAST
        | op::READ_RESPONSE_ONLY => {
            ack_through(qp, sq, packet::psn_add(h.psn, packet::PSN_MASK));
            read_response(qp, sq, pkt, cache);
        }
        op::ATOMIC_ACKNOWLEDGE => {
            ack_through(qp, sq, packet::psn_add(h.psn, packet::PSN_MASK));
            if answer_lost(qp, sq, h.psn, false) {
                return;
            }
            let Some(p) = sq.inflight.front() else {
                return;
            };
            if !matches!(p.op, Op::Atomic(_)) || p.first_psn != h.psn || p.sent == 0 {
                return;
            }
            let ok = match &p.op {
                Op::Atomic(sgl) => sgl.scatter(
                    qp.keys.get(),
                    cache,
                    0,
                    Src::Bytes(&h.atomic_ack.to_ne_bytes()),
                ),
                _ => false,
            };
            sq.rd_answered();
            advance_una(sq, packet::psn_add(h.psn, 1));
            if ok {
                retire(qp, sq, b::ib_wc_status_IB_WC_SUCCESS);
            } else {
                fail(qp, sq, b::ib_wc_status_IB_WC_LOC_PROT_ERR);
            }
        }
        _ => {}
    }
}

/// A response for a PSN past the head's unanswered READ or atomic. The
/// responder answers in PSN order, so the head's answer was lost (or
/// overtaken on the link): ask again at once (once per gap), as rxe does,
/// rather than wait for the retransmit timer. The responder serves a READ
/// again and replays an atomic's saved result. True if `psn` is past it:
/// past the next answer expected, or for an ACK or NAK (`ack`), which the
/// responder may send while a READ's responses are still on their way (a
/// duplicate's), past the last PSN asked for.
fn answer_lost(qp: &Arc<Qp>, sq: &mut SendSide, psn: u32, ack: bool) -> bool {
    let Some(p) = sq.inflight.front() else {
        return false;
    };
    if p.acked_by_ack() || p.done >= p.sent {
        return false;
    }
    let expected = packet::psn_add(p.first_psn, p.done);
    let beyond = if ack {
        packet::psn_add(p.first_psn, p.sent - 1)
    } else {
        expected
    };
    let ahead = packet::psn_diff(psn, beyond) > 0 && packet::psn_diff(psn, sent_limit(sq)) < 0;
    if ahead && sq.answer_gap != Some(expected) {
        sq.answer_gap = Some(expected);
        qp.count(Counter::CompleterRetryErr);
        ib::trace::retransmit(qp.qpn, expected, c"answer missing", sq.retries);
        rewind(sq);
        qp.schedule();
    }
    ahead
}

/// Whether `p` sent a packet since it was taken (before a go-back, too):
/// PSNs go out in order, so if its first is below the highest sent. SQD
/// finishes these messages and starts no other (IBA 10.3.1.9; rxe's
/// `req_next_wqe`).
pub(crate) fn started(sq: &SendSide, p: &Pending) -> bool {
    packet::psn_diff(p.first_psn, sent_limit(sq)) < 0
}

fn head_holds(sq: &SendSide, psn: u32) -> bool {
    sq.inflight
        .front()
        .is_some_and(|p| packet::psn_in(psn, p.first_psn, p.npkts.max(1)))
}

/// Progress: the oldest unacknowledged PSN moves to `una`.
fn advance_una(sq: &mut SendSide, una: u32) {
    if packet::psn_diff(una, sq.una) > 0 {
        sq.una = una;
        sq.retries = 0;
        sq.rnr_tries = 0;
    }
    // Never behind `una`, or PSNs wrapping around would bring an old mark
    // back ahead.
    if packet::psn_diff(sq.sent_high, sq.una) < 0 {
        sq.sent_high = sq.una;
    }
}

/// Everything up to and including `psn` arrived: the SEND and WRITE WQEs it
/// covers complete.
pub(crate) fn ack_through(qp: &Arc<Qp>, sq: &mut SendSide, psn: u32) {
    // Only PSNs that were sent can be acknowledged (a stale or forged ACK
    // beyond them means nothing).
    let limit = sent_limit(sq);
    if packet::psn_diff(psn, limit) >= 0 {
        return;
    }
    // A WQE covered by the ACK was sent whole (`psn` is below the limit),
    // maybe before a go-back that now sends it again: the responder has it
    // all, it completes.
    while let Some(p) = sq.inflight.front() {
        if !p.acked_by_ack() || packet::psn_diff(psn, p.last_psn()) < 0 {
            break;
        }
        retire(qp, sq, b::ib_wc_status_IB_WC_SUCCESS);
    }
    // An ACK (or a NAK's implied ACK) says the requests arrived, not that
    // a READ's or an atomic's answer did: the oldest unanswered PSN stays
    // unacknowledged, or a lost READ response would never be asked again.
    let mut una = packet::psn_add(psn, 1);
    if let Some(p) = sq.inflight.front() {
        if !p.acked_by_ack() {
            let waiting = packet::psn_add(p.first_psn, p.done);
            if packet::psn_diff(una, waiting) > 0 {
                una = waiting;
            }
        }
    }
    advance_una(sq, una);
    // Packets of the head the responder acknowledged are not sent again
    // (after a go-back, the ACK of their first copies may come late).
    let una = sq.una;
    if let Some(p) = sq.inflight.front_mut() {
        let acked = packet::psn_diff(una, p.first_psn);
        if p.acked_by_ack() && acked > 0 {
            p.sent = p.sent.max((acked as u32).min(p.npkts));
        }
    }
    settle(qp, sq);
}

/// One past the highest PSN ever sent: since the last go-back, or before
/// it. An answer for a PSN sent before a go-back is as good as one for the
/// same PSN sent again: the link may reorder (netem, ECMP), and the peer's
/// ACK of the first copies may come after its NAK. Ignoring it would leave
/// the WQE waiting for an answer to its second copies, which a peer that
/// has what it wanted and closed its QP never sends (ibv_rc_pingpong's
/// client: the server's last SEND then failed with RETRY_EXC_ERR).
pub(crate) fn sent_limit(sq: &SendSide) -> u32 {
    let now = sent_now(sq);
    if packet::psn_diff(sq.sent_high, now) > 0 {
        sq.sent_high
    } else {
        now
    }
}

/// One past the highest PSN sent since the last go-back. The WQEs in
/// flight before `next` are sent whole, the one at `next` in part, those
/// after it not at all (a rewind restarts them), so only two entries need
/// looking at.
fn sent_now(sq: &SendSide) -> u32 {
    let i = sq.next.min(sq.inflight.len());
    match (
        sq.inflight.get(i),
        i.checked_sub(1).and_then(|j| sq.inflight.get(j)),
    ) {
        (Some(p), _) if p.sent > 0 => packet::psn_add(p.first_psn, p.sent),
        (_, Some(p)) => packet::psn_add(p.first_psn, p.npkts),
        _ => sq.una,
    }
}

fn read_response(qp: &Arc<Qp>, sq: &mut SendSide, pkt: &Packet, cache: &mut MrCache) {
    let h = &pkt.hdr;
    let Some(p) = sq.inflight.front() else {
        return;
    };
    // In order only, and for a READ (or ATOMIC_WRITE or FLUSH) at the head.
    let expected = packet::psn_add(p.first_psn, p.done);
    let empty_answer = matches!(p.op, Op::AtomicWrite(_) | Op::Flush(_));
    if !(matches!(p.op, Op::Read(_)) || empty_answer) || p.done >= p.sent || h.psn != expected {
        answer_lost(qp, sq, h.psn, false);
        return;
    }
    if empty_answer {
        // ATOMIC_WRITE's and FLUSH's answer: one empty READ response.
        sq.rd_answered();
        advance_una(sq, packet::psn_add(h.psn, 1));
        let status = if pkt.payload.len() == 0 {
            b::ib_wc_status_IB_WC_SUCCESS
        } else {
            b::ib_wc_status_IB_WC_BAD_RESP_ERR
        };
        retire(qp, sq, status);
        return;
    }
    let Some(p) = sq.inflight.front_mut() else {
        return;
    };
    let Op::Read(sgl) = &p.op else {
        return;
    };
    let off = u64::from(p.done) * u64::from(p.mtu);
    let want = (p.total - off.min(p.total)).min(u64::from(p.mtu));
    if pkt.payload.len() as u64 != want
        || !sgl.scatter(qp.keys.get(), cache, off, pkt.payload.src())
    {
        fail(qp, sq, b::ib_wc_status_IB_WC_LOC_PROT_ERR);
        return;
    }
    p.done += 1;
    let answered = packet::read_request_answered(p.done, p.npkts);
    let finished = p.done >= p.npkts;
    if answered {
        sq.rd_answered();
    }
    advance_una(sq, packet::psn_add(h.psn, 1));
    if finished {
        retire(qp, sq, b::ib_wc_status_IB_WC_SUCCESS);
    }
}

/// Completes the head WQE: its slot goes back to the user first, then the
/// CQE is posted if the WQE asked for one (errors always do).
fn retire(qp: &Arc<Qp>, sq: &mut SendSide, status: u32) {
    let Some(p) = sq.inflight.pop() else {
        return;
    };
    sq.next = sq.next.saturating_sub(1);
    complete_now(qp, sq, &p.w, status);
}

/// Completes the head WQE in error; the QP goes to ERR, and the send task
/// flushes the rest.
fn fail(qp: &Arc<Qp>, sq: &mut SendSide, status: u32) {
    let Some(p) = sq.inflight.pop() else {
        return;
    };
    sq.next = sq.next.saturating_sub(1);
    // An error status moves the QP to ERR (`complete_now`).
    complete_now(qp, sq, &p.w, status);
}

/// Frees the ring slot of the oldest WQE and posts its completion: `w` is
/// that WQE (retired from flight, or a local operation taken and done at
/// once).
pub(crate) fn complete_now(qp: &Arc<Qp>, sq: &mut SendSide, w: &SendWqe, status: u32) {
    let ok = status == b::ib_wc_status_IB_WC_SUCCESS;
    // Free the slot before the CQE is visible: a user with a one-deep SQ
    // posts again as soon as it polls the completion.
    sq.queue.advance_consumer();
    let cqe = qp.cqe(w.wr_id, status, wc_opcode(w.opcode), w.length);
    if !ok {
        // An error completion moves the QP to ERR, and it is in ERR by the
        // time the completion can be polled (a user who then queries it
        // sees ERR); the receives are flushed after it, and the send task
        // flushes the SQ. Lock order: the caller holds the SQ.
        qp.set_error_then(&mut qp.rq.lock(), || {
            let _ = qp.scq().post(&cqe, false);
        });
    } else if (qp.sq_sig_all || w.send_flags & flags::SIGNALED != 0)
        && qp.scq().post(&cqe, false).is_err()
    {
        // A full CQ is the QP's failure too.
        qp.set_error(&mut qp.rq.lock());
    }
}

/// Sends again from the oldest unacknowledged PSN: the WQE holding it
/// restarts there, those after it from their start.
fn rewind(sq: &mut SendSide) {
    sq.sent_high = sent_limit(sq);
    let una = sq.una;
    // What was asked from the head on is asked again: the head holds `una`
    // (everything before it completed), so no request is outstanding now.
    sq.rd_requests = 0;
    sq.unasked = 0;
    let mut found = None;
    for i in 0..sq.inflight.len() {
        let Some(p) = sq.inflight.get_mut(i) else {
            break;
        };
        if found.is_none() && packet::psn_in(una, p.first_psn, p.npkts) {
            let from = packet::psn_diff(una, p.first_psn) as u32;
            p.sent = p.sent.min(from);
            p.done = p.done.min(from);
            found = Some(i);
        } else if found.is_some() && !matches!(p.op, Op::Failed(_)) {
            p.sent = 0;
            p.done = 0;
        }
    }
    if let Some(i) = found {
        sq.next = sq.next.min(i);
    }
}

fn rnr(qp: &Arc<Qp>, sq: &mut SendSide, code: u8) {
    let attrs = qp.attrs();
    sq.rnr_tries = sq.rnr_tries.saturating_add(1);
    // rnr_retry 7 means forever.
    if attrs.rnr_retry != 7 && sq.rnr_tries > attrs.rnr_retry {
        qp.count(Counter::RetryRnrExceededErr);
        fail(qp, sq, b::ib_wc_status_IB_WC_RNR_RETRY_EXC_ERR);
        return;
    }
    ib::trace::retransmit(qp.qpn, sq.una, c"RNR NAK", sq.rnr_tries);
    rewind(sq);
    sq.rnr_wait = true;
    // The NAK answers what the retransmit timer waits for: the resend after
    // the wait arms it anew. Left armed, it expired in the short moments
    // between a resend and its NAK and spent `retry_cnt` on a live peer
    // (RETRY_EXC_ERR while waiting, with rnr_retry 7, for a receive).
    sq.timer_una = None;
    qp.arm::<RNR>(params::rnr_timer_ns(code));
}

impl WorkItem<RETRY> for Qp {
    type Pointer = Arc<Qp>;

    fn run(qp: Arc<Qp>) {
        retry_timer(&qp);
    }
}

impl WorkItem<RNR> for Qp {
    type Pointer = Arc<Qp>;

    fn run(qp: Arc<Qp>) {
        rnr_timer(&qp);
    }
}

/// The RNR timer: the receiver had time to post buffers; send again. It
/// also ends the wait after a payload found no memory (`NOMEM_RETRY_NS`).
pub(crate) fn rnr_timer(qp: &Arc<Qp>) {
    let mut sq = qp.sq.lock();
    if qp.is_dead() {
        return;
    }
    sq.rnr_wait = false;
    drop(sq);
    qp.schedule();
}

/// Arms the retransmit timer while packets are unacknowledged.
pub(crate) fn arm_retry(qp: &Arc<Qp>, sq: &mut SendSide, attrs: &Attrs) {
    if !qp.reliable() || sq.timer_una.is_some() || sq.rnr_wait {
        return;
    }
    let outstanding = sq.inflight.front().is_some_and(|p| p.sent > 0);
    if let (true, Some(ns)) = (outstanding, params::ack_timeout_ns(attrs.timeout)) {
        sq.timer_una = Some(sq.una);
        qp.arm::<RETRY>(ns);
    }
}

/// The retransmit timer: no progress since it was armed means the packets
/// from `una` on (or their answers) were lost; send them again, up to
/// `retry_cnt` times.
pub(crate) fn retry_timer(qp: &Arc<Qp>) {
    let mut sq = qp.sq.lock();
    if qp.is_dead() {
        return;
    }
    let armed = sq.timer_una.take();
    let attrs = qp.attrs();
    let outstanding = sq.inflight.front().is_some_and(|p| p.sent > 0);
    if attrs.state == STATE_ERR || !outstanding || sq.rnr_wait {
        return;
    }
    if armed == Some(sq.una) {
        sq.retries = sq.retries.saturating_add(1);
        if sq.retries > attrs.retry_cnt {
            qp.count(Counter::RetryExceededErr);
            fail(qp, &mut sq, b::ib_wc_status_IB_WC_RETRY_EXC_ERR);
            return;
        }
        qp.count(Counter::CompleterRetryErr);
        ib::trace::retransmit(qp.qpn, sq.una, c"timeout", sq.retries);
        rewind(&mut sq);
    }
    drop(sq);
    qp.schedule();
}
