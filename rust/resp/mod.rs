// SPDX-License-Identifier: GPL-2.0

//! The responder, run by the QP's receive task: takes request packets in PSN
//! order, checks every remote access with the rkey against the target MR's
//! PD, range and rights, places SEND and WRITE payloads, answers READs (a
//! budget's worth of response packets per run) and atomics, and ACKs or
//! NAKs. Duplicates (the requester went back) are acknowledged again, READs
//! answered again and atomics replayed, never executed twice. On an access or
//! request error the QP goes to ERR and the target memory stays untouched.

use kernel::sync::atomic::ordering;
use kernel::sync::{Arc, ArcBorrow};
use kernel::time::hrtimer::{
    HrTimerCallback, HrTimerCallbackContext, HrTimerPointer, HrTimerRestart,
};
use kernel::time::Delta;
use kernel::workqueue::WorkItem;

use crate::access;
use crate::bindings as b;
use crate::comp;
use crate::net;
use crate::packet::{self, op, Hdr, Nak, Syndrome};
use crate::params::{cost, BUDGET};
use crate::pkt::{Packet, Payload};
use crate::qp::flight::Progress;
use crate::qp::{Attrs, Qp, RecvSide, RECV, STATE_ERR, STATE_RTR, STATE_RTS, STATE_SQD, STATE_SQE};
use crate::sgl::MrCache;
use crate::stats::Counter;

mod place;
mod read;

use place::{fail_recv, flush, remote, send_data, write_data};
use read::{read_ack, read_again, serve_read, start_read};

enum Reply {
    Ack,
    AtomicAck(u64),
    /// ATOMIC_WRITE or FLUSH done: an empty READ response answers it.
    ReadAck,
    /// A READ was accepted: its responses go out from `RecvSide::read`.
    Read(u32),
    Nak(Nak),
}

impl WorkItem<RECV> for Qp {
    type Pointer = Arc<Qp>;

    fn run(qp: Arc<Qp>) {
        run(&qp);
    }
}

impl HrTimerCallback for Qp {
    type Pointer<'a> = Arc<Qp>;

    /// The READ pace allows more responses: the receive task goes on.
    fn run(qp: ArcBorrow<'_, Qp>, _ctx: HrTimerCallbackContext<'_, Qp>) -> HrTimerRestart {
        Arc::from(qp).schedule_recv();
        HrTimerRestart::NoRestart
    }
}

/// The receive task: answers a READ in progress and takes queued request
/// packets, within one budget; requeues itself while work is left.
pub(crate) fn run(qp: &Arc<Qp>) {
    crate::wq::turn_starts(Arc::as_ptr(qp).cast());
    // A QP's packets are handled in the order they arrived, as a NIC
    // handles them: an ACK that came before a request completes its send
    // WQE before the request's receive completes. The peer sends the ACK of
    // a message before its answer to it can exist, and applications rely on
    // that order (perftest's latency tests with events wait for the send's
    // completion, then the receive's, on one channel). The completer is run
    // here first, under the SQ lock, which the send task also holds while it
    // handles a response it took: every response delivered before these
    // requests is handled once this returns.
    {
        let mut sq = qp.sq.lock();
        if qp.is_dead() {
            return;
        }
        let mut budget = BUDGET;
        comp::drain(qp, &mut sq, &mut budget, &mut MrCache::new());
    }
    let mut rq = qp.rq.lock();
    if qp.is_dead() {
        return;
    }
    if qp.attrs().state == STATE_ERR {
        // Receives posted since the QP failed (a kernel client's drain);
        // the requests below are dropped.
        qp.flush_rq(&mut rq);
    }
    let mut budget = BUDGET;
    let mut cache = MrCache::new();
    let mut wait = None;
    while budget > 0 {
        if rq.read.is_some() {
            wait = serve_read(qp, &mut rq, &mut budget, &mut cache);
            if wait.is_some() {
                break;
            }
            continue;
        }
        let Some(mut pkt) = qp.next_request() else {
            break;
        };
        budget = budget.saturating_sub(cost(pkt.payload.len()));
        if qp.uc() {
            receive_uc(qp, &mut rq, &mut pkt, &mut cache);
        } else if qp.ud() {
            crate::ud::receive(qp, &mut rq, &pkt, &mut cache);
        } else {
            receive(qp, &mut rq, &pkt, &mut cache);
        }
    }
    if let Some(ns) = wait {
        // The READ goes on when the pace allows; what arrives meanwhile
        // queues behind it. Armed under the RQ lock, which `teardown` takes
        // after marking the QP dead to cancel it. The last wake-up (fired,
        // or to be replaced) is cancelled first.
        drop(rq.pace_wake.take());
        let ns = i64::try_from(ns).unwrap_or(i64::MAX);
        rq.pace_wake = Some(qp.clone().start(Delta::from_nanos(ns)));
        drop(rq);
        qp.idle::<{ crate::qp::RECV }>();
        return;
    }
    let more = rq.read.is_some() || !qp.inbox.lock().requests.is_empty();
    drop(rq);
    if more {
        qp.requeue_recv();
    } else {
        qp.idle::<{ crate::qp::RECV }>();
    }
}

/// Sends a response to the requester.
fn respond(qp: &Qp, attrs: &Attrs, mut hdr: Hdr, payload: Payload) {
    hdr.qpn = attrs.dest_qpn;
    net::xmit(qp, attrs, Packet::with(hdr, payload));
}

fn ack(qp: &Qp, attrs: &Attrs, psn: u32, syndrome: Syndrome) {
    let mut h = Hdr::new(op::ACKNOWLEDGE, psn, 0);
    h.aeth = Some(syndrome);
    respond(qp, attrs, h, Payload::empty());
}

/// Takes one request packet.
fn receive(qp: &Arc<Qp>, rq: &mut RecvSide, pkt: &Packet, cache: &mut MrCache) {
    // Checked under the RQ lock: `Qp::set_error` flushes under it, and no
    // packet may start a message on an ERR QP after the flush.
    let attrs = qp.attrs();
    if !matches!(attrs.state, STATE_RTR | STATE_RTS | STATE_SQD | STATE_SQE) {
        return;
    }
    // A UC or UD opcode on an RC QP is not for it (IBA 9.6.1.3): dropped,
    // the QP undisturbed.
    if pkt.hdr.opcode >= op::UC_SEND_FIRST {
        return;
    }
    if attrs.state == STATE_RTR && !rq.established {
        rq.established = true;
        qp.event(b::ib_event_type_IB_EVENT_COMM_EST);
    }
    let h = &pkt.hdr;
    let d = packet::psn_diff(h.psn, rq.epsn);
    if d < 0 {
        qp.count(Counter::DuplicateRequest);
        duplicate(qp, rq, &attrs, pkt);
        return;
    }
    if d > 0 {
        // A gap: ask once for the expected PSN.
        qp.count_drop(Counter::OutOfSeqRequest, h.psn, c"out of sequence");
        if !rq.nak_sent {
            rq.nak_sent = true;
            ack(qp, &attrs, rq.epsn, Syndrome::Nak(Nak::Sequence));
        }
        return;
    }
    rq.nak_sent = false;
    match request(qp, rq, &attrs, pkt, cache) {
        Reply::Ack => {
            rq.epsn = packet::psn_add(rq.epsn, 1);
            if h.ack_req {
                ack(qp, &attrs, h.psn, Syndrome::Ack);
            }
        }
        Reply::AtomicAck(orig) => {
            rq.epsn = packet::psn_add(rq.epsn, 1);
            rq.atomics.record(h.psn, orig);
            atomic_ack(qp, &attrs, h.psn, orig);
        }
        Reply::Read(count) => rq.epsn = packet::psn_add(rq.epsn, count),
        Reply::ReadAck => {
            rq.epsn = packet::psn_add(rq.epsn, 1);
            read_ack(qp, &attrs, h.psn);
        }
        Reply::Nak(Nak::Rnr) => {
            qp.count(Counter::SendRnrErr);
            rq.nak_sent = true;
            ack(qp, &attrs, h.psn, Syndrome::Rnr(attrs.min_rnr_timer));
        }
        Reply::Nak(nak) => ack(qp, &attrs, h.psn, Syndrome::Nak(nak)),
    }
    rq.atomics.expire(rq.epsn);
    // The receive completes only after its ACK went out, as on a NIC: the
    // application may answer as soon as it sees the completion, and its
    // answer must not reach the peer before this ACK (the peer's send would
    // complete after the answer's receive). A full CQ is the receiver's
    // failure, after the data was placed and acknowledged.
    if let Some((cqe, solicited)) = rq.completion.take() {
        if qp.rcq().post(&cqe, solicited).is_err() {
            qp.set_error(rq);
        }
    }
}

/// Takes one UC request packet: as `receive`, but nothing is acknowledged
/// or NAKed. A gap, or a message the responder cannot take (no receive
/// posted, no access, too long), drops the packets up to the next message's
/// first, as IBA 9.7.5.1.7 and rdma_rxe do; a SEND cut short leaves its
/// receive WQE for the next message.
fn receive_uc(qp: &Arc<Qp>, rq: &mut RecvSide, pkt: &mut Packet, cache: &mut MrCache) {
    let attrs = qp.attrs();
    if !matches!(attrs.state, STATE_RTR | STATE_RTS | STATE_SQD | STATE_SQE) {
        return;
    }
    // An RC opcode on a UC QP: not for us.
    let Some(opcode) = packet::rc_of_uc(pkt.hdr.opcode) else {
        return;
    };
    pkt.hdr.opcode = opcode;
    if attrs.state == STATE_RTR && !rq.established {
        rq.established = true;
        qp.event(b::ib_event_type_IB_EVENT_COMM_EST);
    }
    // UC follows the sender's PSNs: a packet after a gap is expected next.
    // A packet a little behind the expected PSN came late or twice (an IP
    // network reorders and duplicates; UC never sends again): taking it
    // would deliver an older message after a newer one, or one message
    // twice. IBA and rxe resynchronize on any FIRST or ONLY; a fabric that
    // keeps order never tells the two apart. Far behind is a resync (a
    // stray packet far ahead costs at most `UC_LATE` packets).
    let psn = pkt.hdr.psn;
    let d = packet::psn_diff(psn, rq.epsn);
    if (-UC_LATE..0).contains(&d) {
        qp.count_drop(Counter::DuplicateRequest, psn, c"UC: late or duplicate");
        return;
    }
    let gap = d != 0;
    if gap && !rq.drop_msg {
        qp.count(Counter::OutOfSeqRequest);
    }
    rq.epsn = packet::psn_add(psn, 1);
    if gap || rq.drop_msg {
        cut_short(qp, rq);
        if !packet::starts_message(opcode) {
            rq.drop_msg = true;
            return;
        }
        rq.drop_msg = false;
    }
    if !matches!(request(qp, rq, &attrs, pkt, cache), Reply::Ack) {
        cut_short(qp, rq);
        rq.drop_msg = true;
    }
    if let Some((cqe, solicited)) = rq.completion.take() {
        if qp.rcq().post(&cqe, solicited).is_err() {
            qp.set_error(rq);
        }
    }
}

/// A UC message dropped part way: a SEND's receive stays for the next
/// message, posted in the QP's RQ (never consumed) or kept by the QP if an
/// SRQ gave it (rdma_rxe loses that one).
fn cut_short(qp: &Qp, rq: &mut RecvSide) {
    if let Some(Progress::Send { wr_id, sgl, .. }) = rq.progress.take() {
        if qp.srq.is_some() {
            rq.kept = Some((wr_id, sgl));
        }
    }
}

/// How far behind the expected PSN a UC packet counts as late or repeated
/// rather than the start of something new: deeper than any reordering of
/// a path, small next to the PSN space.
const UC_LATE: i32 = 8 * crate::params::MAX_UNACKED_PSNS as i32;

fn atomic_ack(qp: &Qp, attrs: &Attrs, psn: u32, orig: u64) {
    let mut h = Hdr::new(op::ATOMIC_ACKNOWLEDGE, psn, 0);
    h.aeth = Some(Syndrome::Ack);
    h.atomic_ack = orig;
    respond(qp, attrs, h, Payload::empty());
}

/// A request seen before: the requester went back past it.
fn duplicate(qp: &Arc<Qp>, rq: &mut RecvSide, attrs: &Attrs, pkt: &Packet) {
    let h = &pkt.hdr;
    match h.opcode {
        // READs have no side effect: answer again (the rkey is checked again).
        op::READ_REQUEST => {
            // A bad rkey now gets no answer: the first time it was NAKed;
            // nor does a length no READ is taken with (the first time,
            // NAKed too), which would have one packet stream 2^31 bytes.
            if let Some(reth) = h.reth.filter(|r| r.len <= packet::MAX_DMA_LEN) {
                read_again(qp, rq, attrs, h.psn, reth.len);
                let _ = start_read(qp, rq, attrs, h.psn, reth);
            }
        }
        // An ATOMIC_WRITE is not made twice (a later WRITE may have
        // changed the bytes since): answered again only.
        op::ATOMIC_WRITE => read_ack(qp, attrs, h.psn),
        // Done once is enough: what it made visible stays visible.
        op::FLUSH => read_ack(qp, attrs, h.psn),
        // Atomics are never executed twice: the saved result is replayed.
        // One no longer remembered is far behind, or was answered before
        // the last `ATOMIC_LOG_LEN` were sent: no requester waits for it.
        op::COMPARE_SWAP | op::FETCH_ADD => {
            if let Some(orig) = rq.atomics.find(h.psn) {
                atomic_ack(qp, attrs, h.psn, orig);
            }
        }
        // SEND and WRITE data arrived already: acknowledge what is done.
        _ => {
            if h.ack_req {
                ack(
                    qp,
                    attrs,
                    packet::psn_add(rq.epsn, packet::PSN_MASK),
                    Syndrome::Ack,
                );
            }
        }
    }
}

/// A class C/D error (IBA 9.9.3): NAK, and the responder's QP goes to ERR.
/// On UC only a local error (a malformed receive WQE) is fatal; the rest
/// drop the message (`receive_uc`).
fn fatal(qp: &Arc<Qp>, rq: &mut RecvSide, nak: Nak) -> Reply {
    if qp.reliable() || nak == Nak::RemoteOperational {
        qp.set_error(rq);
    }
    Reply::Nak(nak)
}

fn has_imm(opcode: u8) -> bool {
    matches!(
        opcode,
        op::SEND_LAST_IMM | op::SEND_ONLY_IMM | op::WRITE_LAST_IMM | op::WRITE_ONLY_IMM
    )
}

fn is_last(opcode: u8) -> bool {
    matches!(
        opcode,
        op::SEND_LAST
            | op::SEND_LAST_IMM
            | op::SEND_ONLY
            | op::SEND_ONLY_IMM
            | op::SEND_LAST_INV
            | op::SEND_ONLY_INV
            | op::WRITE_LAST
            | op::WRITE_LAST_IMM
            | op::WRITE_ONLY
            | op::WRITE_ONLY_IMM
    )
}

/// Executes the expected request packet.
fn request(
    qp: &Arc<Qp>,
    rq: &mut RecvSide,
    attrs: &Attrs,
    pkt: &Packet,
    cache: &mut MrCache,
) -> Reply {
    let h = &pkt.hdr;
    let o = h.opcode;
    // Lengths before anything is taken or placed (C9-92, C9-94): the
    // sender cuts a message at the path MTU (the hand-over's own size
    // between QPs of this device), and no DMA is longer than 2 GiB.
    if !packet::request_len_ok(o, pkt.payload.len(), attrs.packet_mtu())
        || h.reth.is_some_and(|r| r.len > packet::MAX_DMA_LEN)
    {
        return fatal(qp, rq, Nak::InvalidRequest);
    }
    // No responder resources (`max_dest_rd_atomic` 0): the requester was
    // told it may not ask, as rxe's `check_resource` has it.
    if attrs.max_dest_rd_atomic == 0
        && matches!(
            o,
            op::READ_REQUEST | op::ATOMIC_WRITE | op::COMPARE_SWAP | op::FETCH_ADD
        )
    {
        return fatal(qp, rq, Nak::InvalidRequest);
    }
    match o {
        op::SEND_FIRST | op::SEND_ONLY | op::SEND_ONLY_IMM | op::SEND_ONLY_INV => {
            if rq.progress.is_some() {
                return fatal(qp, rq, Nak::InvalidRequest);
            }
            match qp.take_recv(rq, true) {
                None => return Reply::Nak(Nak::Rnr),
                Some(Err((wr_id, status))) => {
                    fail_recv(qp, rq, wr_id, status);
                    return fatal(qp, rq, Nak::RemoteOperational);
                }
                Some(Ok((wr_id, sgl))) => {
                    rq.progress = Some(Progress::Send {
                        wr_id,
                        sgl,
                        received: 0,
                    });
                }
            }
            send_data(qp, rq, pkt, cache)
        }
        op::SEND_MIDDLE | op::SEND_LAST | op::SEND_LAST_IMM | op::SEND_LAST_INV => {
            if !matches!(rq.progress, Some(Progress::Send { .. })) {
                return fatal(qp, rq, Nak::InvalidRequest);
            }
            send_data(qp, rq, pkt, cache)
        }
        op::WRITE_FIRST | op::WRITE_ONLY | op::WRITE_ONLY_IMM => {
            let Some(reth) = h.reth else {
                return fatal(qp, rq, Nak::InvalidRequest);
            };
            if rq.progress.is_some() {
                return fatal(qp, rq, Nak::InvalidRequest);
            }
            // A WRITE with immediate consumes a receive: fail early (RNR)
            // before any byte lands.
            if o == op::WRITE_ONLY_IMM && qp.recv_empty(rq) {
                return Reply::Nak(Nak::Rnr);
            }
            let len = u64::from(reth.len);
            match remote(
                qp,
                attrs.access,
                reth.rkey,
                reth.va,
                len,
                access::REMOTE_WRITE,
            ) {
                Err(nak) => return fatal(qp, rq, nak),
                Ok(_) => {
                    rq.progress = Some(Progress::Write {
                        rkey: reth.rkey,
                        va: reth.va,
                        total: len,
                        received: 0,
                    })
                }
            }
            write_data(qp, rq, pkt, cache)
        }
        // `write_data` checks that a WRITE is in progress, and takes the
        // receive of a WRITE_LAST_IMM (RNR if there is none) before placing.
        op::WRITE_MIDDLE | op::WRITE_LAST | op::WRITE_LAST_IMM => write_data(qp, rq, pkt, cache),
        op::READ_REQUEST => {
            let Some(reth) = h.reth else {
                return fatal(qp, rq, Nak::InvalidRequest);
            };
            if rq.progress.is_some() {
                return fatal(qp, rq, Nak::InvalidRequest);
            }
            match start_read(qp, rq, attrs, h.psn, reth) {
                Ok(count) => Reply::Read(count),
                Err(nak) => fatal(qp, rq, nak),
            }
        }
        op::ATOMIC_WRITE => {
            let Some(reth) = h.reth else {
                return fatal(qp, rq, Nak::InvalidRequest);
            };
            if rq.progress.is_some() {
                return fatal(qp, rq, Nak::InvalidRequest);
            }
            // oA19-28: exactly 8 bytes, to an 8-byte aligned address.
            let mut v = [0u8; 8];
            if reth.len != 8
                || reth.va % 8 != 0
                || pkt.payload.len() != 8
                || !pkt.payload.src().copy_to(&mut v)
            {
                return fatal(qp, rq, Nak::InvalidRequest);
            }
            let (mr, at) = match remote(
                qp,
                attrs.access,
                reth.rkey,
                reth.va,
                8,
                access::REMOTE_WRITE,
            ) {
                Err(nak) => return fatal(qp, rq, nak),
                Ok(Some(m)) => m,
                Ok(None) => return fatal(qp, rq, Nak::InvalidRequest),
            };
            if at % 8 != 0 {
                return fatal(qp, rq, Nak::InvalidRequest);
            }
            let value = u64::from_ne_bytes(v);
            let done = mr.atomic(at, |x| {
                x.store(value, ordering::Release);
                0
            });
            match done {
                Some(_) => Reply::ReadAck,
                None => fatal(qp, rq, Nak::InvalidRequest),
            }
        }
        op::FLUSH => {
            let (Some(reth), Some(feth)) = (h.reth, h.feth) else {
                return fatal(qp, rq, Nak::InvalidRequest);
            };
            if rq.progress.is_some() {
                return fatal(qp, rq, Nak::InvalidRequest);
            }
            match flush(qp, attrs.access, reth, feth) {
                Ok(()) => Reply::ReadAck,
                Err(nak) => fatal(qp, rq, nak),
            }
        }
        op::COMPARE_SWAP | op::FETCH_ADD => {
            let Some(a) = h.atomic else {
                return fatal(qp, rq, Nak::InvalidRequest);
            };
            if a.va % 8 != 0 {
                return fatal(qp, rq, Nak::InvalidRequest);
            }
            let (mr, at) = match remote(qp, attrs.access, a.rkey, a.va, 8, access::REMOTE_ATOMIC) {
                Err(nak) => return fatal(qp, rq, nak),
                Ok(Some(m)) => m,
                Ok(None) => return fatal(qp, rq, Nak::InvalidRequest),
            };
            // A window may start anywhere in its MR.
            if at % 8 != 0 {
                return fatal(qp, rq, Nak::InvalidRequest);
            }
            let orig = mr.atomic(at, |x| {
                if o == op::COMPARE_SWAP {
                    match x.cmpxchg(a.compare_add, a.swap, ordering::Full) {
                        Ok(v) | Err(v) => v,
                    }
                } else {
                    x.fetch_add(a.compare_add, ordering::Full)
                }
            });
            match orig {
                Some(orig) => Reply::AtomicAck(orig),
                None => fatal(qp, rq, Nak::InvalidRequest),
            }
        }
        _ => fatal(qp, rq, Nak::InvalidRequest),
    }
}
