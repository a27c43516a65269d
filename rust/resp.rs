// SPDX-License-Identifier: GPL-2.0

//! The responder, run by the QP's receive task: takes request packets in PSN
//! order, checks every remote access with the rkey against the target MR's
//! PD, range and rights, places SEND and WRITE payloads, answers READs (a
//! budget's worth of response packets per run) and atomics, and ACKs or
//! NAKs. Duplicates (the requester went back) are acknowledged again, READs
//! answered again and atomics replayed, never executed twice. On an access or
//! request error the QP goes to ERR and the target memory stays untouched.

use kernel::prelude::*;
use kernel::sync::atomic::ordering;
use kernel::sync::Arc;
use kernel::workqueue::WorkItem;

use crate::access;
use crate::bindings as b;
use crate::comp;
use crate::cq::Cqe;
use crate::ib::skb::Train;
use crate::mr::{self, MrRef};
use crate::mtt::Request;
use crate::net;
use crate::packet::{self, op, Hdr, Nak, Syndrome};
use crate::params::{cost, BUDGET};
use crate::pkt::{Gather, Packet, Payload};
use crate::qp::flight::{Progress, ReadServe};
use crate::qp::{Attrs, Qp, RecvSide, RECV, STATE_ERR, STATE_RTR, STATE_RTS, STATE_SQD, STATE_SQE};
use crate::sgl::MrCache;
use crate::stats::Counter;
use crate::udp;

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

/// The receive task: answers a READ in progress and takes queued request
/// packets, within one budget; requeues itself while work is left.
pub(crate) fn run(qp: &Arc<Qp>) {
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
    while budget > 0 {
        if rq.read.is_some() {
            serve_read(qp, &mut rq, &mut budget, &mut cache);
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
        qp.stats.get().inc(Counter::DuplicateRequest);
        duplicate(qp, rq, &attrs, pkt);
        return;
    }
    if d > 0 {
        // A gap: ask once for the expected PSN.
        qp.stats
            .get()
            .dropped(Counter::OutOfSeqRequest, qp.qpn, h.psn, c"out of sequence");
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
            qp.stats.get().inc(Counter::SendRnrErr);
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
        qp.stats.get().dropped(
            Counter::DuplicateRequest,
            qp.qpn,
            psn,
            c"UC: late or duplicate",
        );
        return;
    }
    let gap = d != 0;
    if gap && !rq.drop_msg {
        qp.stats.get().inc(Counter::OutOfSeqRequest);
    }
    rq.epsn = packet::psn_add(psn, 1);
    if gap || rq.drop_msg {
        rq.progress = None;
        if !packet::starts_message(opcode) {
            rq.drop_msg = true;
            return;
        }
        rq.drop_msg = false;
    }
    if !matches!(request(qp, rq, &attrs, pkt, cache), Reply::Ack) {
        rq.progress = None;
        rq.drop_msg = true;
    }
    if let Some((cqe, solicited)) = rq.completion.take() {
        if qp.rcq().post(&cqe, solicited).is_err() {
            qp.set_error(rq);
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

/// The answer to ATOMIC_WRITE and FLUSH: a READ response with no data
/// (rxe's too).
fn read_ack(qp: &Qp, attrs: &Attrs, psn: u32) {
    let mut h = Hdr::new(op::READ_RESPONSE_ONLY, psn, 0);
    h.aeth = Some(Syndrome::Ack);
    respond(qp, attrs, h, Payload::empty());
}

/// A request seen before: the requester went back past it.
fn duplicate(qp: &Arc<Qp>, rq: &mut RecvSide, attrs: &Attrs, pkt: &Packet) {
    let h = &pkt.hdr;
    match h.opcode {
        // READs have no side effect: answer again (the rkey is checked again).
        op::READ_REQUEST => {
            // A bad rkey now gets no answer: the first time it was NAKed.
            if let Some(reth) = h.reth {
                let _ = start_read(qp, rq, attrs, h.psn, reth);
            }
        }
        // An ATOMIC_WRITE is not made twice (a later WRITE may have
        // changed the bytes since): answered again only.
        op::ATOMIC_WRITE => read_ack(qp, attrs, h.psn),
        // Done once is enough: what it made visible stays visible.
        op::FLUSH => read_ack(qp, attrs, h.psn),
        // Atomics are never executed twice: the saved result is replayed.
        // One no longer remembered is a window behind: the requester cannot
        // be waiting for it.
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

/// Checks a READ and sets it up to be answered from `psn` on.
fn start_read(
    qp: &Qp,
    rq: &mut RecvSide,
    attrs: &Attrs,
    psn: u32,
    reth: packet::Reth,
) -> Result<u32, Nak> {
    let len = u64::from(reth.len);
    remote(
        qp,
        attrs.access,
        reth.rkey,
        reth.va,
        len,
        access::REMOTE_READ,
    )?;
    let mtu = attrs.packet_mtu();
    let count = packet::packets(len, mtu);
    rq.read = Some(ReadServe {
        rkey: reth.rkey,
        va: reth.va,
        len,
        psn,
        count,
        next: 0,
        mtu,
    });
    Ok(count)
}

/// Sends the next READ response packets, within the budget, on the wire as
/// trains (see `udp::send`), all sent before anything else is answered.
fn serve_read(qp: &Arc<Qp>, rq: &mut RecvSide, budget: &mut u32, cache: &mut MrCache) {
    let mut train = Train::new();
    read_responses(qp, rq, budget, cache, &mut train);
    udp::send_train(qp, &mut train);
}

fn read_responses(
    qp: &Arc<Qp>,
    rq: &mut RecvSide,
    budget: &mut u32,
    cache: &mut MrCache,
    train: &mut Train,
) {
    let attrs = qp.attrs();
    let Some(r) = rq.read.as_mut() else {
        return;
    };
    while *budget > 0 && r.next < r.count {
        let off = u64::from(r.next) * u64::from(r.mtu);
        let n = (r.len - off.min(r.len)).min(u64::from(r.mtu)) as usize;
        let iova = r.va.wrapping_add(off);
        let payload = if n == 0 {
            Ok(Payload::empty())
        } else {
            match cached_remote(qp, cache, r.rkey, iova, n as u64, access::REMOTE_READ) {
                Some((m, at)) => Payload::from_mr(m, at, n),
                None => Err(Gather::Access),
            }
        };
        let psn = packet::psn_add(r.psn, r.next);
        let payload = match payload {
            Ok(p) => p,
            Err(Gather::NoMem) => {
                // Try again on the next run.
                *budget = 0;
                return;
            }
            Err(Gather::Access) => {
                // The MR went (or was invalidated) under the READ: the NAK
                // goes after the responses before it.
                rq.read = None;
                qp.set_error(rq);
                udp::send_train(qp, train);
                ack(qp, &attrs, psn, Syndrome::Nak(Nak::RemoteAccess));
                return;
            }
        };
        let mut h = Hdr::new(packet::read_response_opcode(r.next, r.count), psn, 0);
        if r.next == 0 || r.next + 1 == r.count {
            h.aeth = Some(Syndrome::Ack);
        }
        h.qpn = attrs.dest_qpn;
        r.next += 1;
        *budget = budget.saturating_sub(cost(n));
        net::xmit_to(
            qp,
            attrs.route.as_ref(),
            Packet::with(h, payload),
            Some(train),
        );
    }
    if r.next >= r.count {
        rq.read = None;
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
    match o {
        op::SEND_FIRST | op::SEND_ONLY | op::SEND_ONLY_IMM | op::SEND_ONLY_INV => {
            if rq.progress.is_some() {
                return fatal(qp, rq, Nak::InvalidRequest);
            }
            match qp.take_recv(rq) {
                None => return Reply::Nak(Nak::Rnr),
                Some(Err(status)) => {
                    let cqe = qp.cqe(0, status, b::ib_wc_opcode_IB_WC_RECV, 0);
                    complete_recv(qp, rq, cqe, false);
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
        op::WRITE_MIDDLE | op::WRITE_LAST | op::WRITE_LAST_IMM => {
            if !matches!(rq.progress, Some(Progress::Write { .. })) {
                return fatal(qp, rq, Nak::InvalidRequest);
            }
            if o == op::WRITE_LAST_IMM && qp.recv_empty(rq) {
                return Reply::Nak(Nak::Rnr);
            }
            write_data(qp, rq, pkt, cache)
        }
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

/// Consumes the receive WQE and holds its completion until the packet's
/// response (ACK or NAK) is sent: see `receive`.
fn complete_recv(qp: &Qp, rq: &mut RecvSide, cqe: Cqe, solicited: bool) {
    qp.consume_recv(rq);
    rq.completion = Some((cqe, solicited));
}

/// FLUSH (IBA 1.5 A19): makes what earlier requests placed in the MR
/// globally visible, over the RETH's range or (level MR) the whole MR.
/// oxe's copies are the CPU's own stores, so a full barrier before the
/// answer is all it takes; the checks are rxe's: the QP and the MR (or a
/// window, over the range) must grant the type's right, and the rkey is
/// checked even for an empty range. Persistence is refused: no MR has that
/// right (registration offers none).
fn flush(qp: &Qp, qp_access: u32, reth: packet::Reth, feth: packet::Feth) -> Result<(), Nak> {
    if !feth.valid() {
        return Err(Nak::InvalidRequest);
    }
    let right = feth.rights();
    if qp_access & right != right {
        return Err(Nak::RemoteAccess);
    }
    let req = Request {
        key: reth.rkey,
        pd: qp.pd,
        iova: reth.va,
        len: u64::from(reth.len),
        rights: right,
    };
    let ok = if crate::mw_rules::is_mw(reth.rkey) {
        crate::mw::resolve(qp.mws.get(), qp.uid, &req).is_some()
    } else {
        let m = mr::lookup(qp.keys.get(), reth.rkey).ok_or(Nak::RemoteAccess)?;
        if feth.level == packet::flush::MR {
            m.check_grant(&req).is_ok()
        } else {
            m.check(&req).is_ok()
        }
    };
    if !ok {
        return Err(Nak::RemoteAccess);
    }
    kernel::sync::barrier::smp_mb();
    Ok(())
}

/// Checks the remote access of a WRITE, READ or atomic: the QP must allow
/// it, and the rkey must name a live MR of this QP's PD that grants it over
/// the range, or a window that does. The MR the access lands in, and where.
fn remote(
    qp: &Qp,
    qp_access: u32,
    rkey: u32,
    va: u64,
    len: u64,
    right: u32,
) -> Result<Option<(MrRef, u64)>, Nak> {
    if qp_access & right == 0 {
        return Err(Nak::RemoteAccess);
    }
    if len == 0 {
        return Ok(None);
    }
    let req = Request {
        key: rkey,
        pd: qp.pd,
        iova: va,
        len,
        rights: right,
    };
    if crate::mw_rules::is_mw(rkey) {
        return crate::mw::resolve(qp.mws.get(), qp.uid, &req)
            .map(Some)
            .ok_or(Nak::RemoteAccess);
    }
    let m = mr::lookup(qp.keys.get(), rkey).ok_or(Nak::RemoteAccess)?;
    m.check(&req).map_err(|_| Nak::RemoteAccess)?;
    Ok(Some((m, va)))
}

/// As [`remote`], for the packets of an access checked at its start, with
/// the MR of the last packet reused (`MrCache`). A window is resolved afresh
/// for every packet: it may be rebound or invalidated between two.
fn cached_remote<'c>(
    qp: &Qp,
    cache: &'c mut MrCache,
    rkey: u32,
    iova: u64,
    len: u64,
    right: u32,
) -> Option<(&'c MrRef, u64)> {
    if crate::mw_rules::is_mw(rkey) {
        let req = Request {
            key: rkey,
            pd: qp.pd,
            iova,
            len,
            rights: right,
        };
        let (m, at) = crate::mw::resolve(qp.mws.get(), qp.uid, &req)?;
        return Some((cache.hold(m), at));
    }
    cache
        .checked(qp.keys.get(), rkey, qp.pd, iova, len, right)
        .map(|m| (m, iova))
}

fn send_data(qp: &Arc<Qp>, rq: &mut RecvSide, pkt: &Packet, cache: &mut MrCache) -> Reply {
    let len = pkt.payload.len() as u64;
    let (wr_id, fits, received) = match &mut rq.progress {
        Some(Progress::Send {
            wr_id,
            sgl,
            received,
        }) => {
            let fits = *received + len <= sgl.total
                && sgl.scatter(qp.keys.get(), cache, *received, pkt.payload.src());
            if fits {
                *received += len;
            }
            (*wr_id, fits, *received)
        }
        _ => return fatal(qp, rq, Nak::InvalidRequest),
    };
    if !fits {
        // The message does not fit the posted buffers. UC drops it and
        // keeps the receive (class D).
        if qp.uc() {
            if qp.srq.is_some() {
                // Its WQE came from the SRQ and is gone: it completes in
                // error, the QP carries on (class E).
                let cqe = qp.cqe(
                    wr_id,
                    b::ib_wc_status_IB_WC_LOC_LEN_ERR,
                    b::ib_wc_opcode_IB_WC_RECV,
                    0,
                );
                complete_recv(qp, rq, cqe, false);
            }
            return Reply::Nak(Nak::InvalidRequest);
        }
        let cqe = qp.cqe(
            wr_id,
            b::ib_wc_status_IB_WC_LOC_LEN_ERR,
            b::ib_wc_opcode_IB_WC_RECV,
            0,
        );
        complete_recv(qp, rq, cqe, false);
        return fatal(qp, rq, Nak::InvalidRequest);
    }
    if !is_last(pkt.hdr.opcode) {
        return Reply::Ack;
    }
    let mut cqe = qp.cqe(
        wr_id,
        b::ib_wc_status_IB_WC_SUCCESS,
        b::ib_wc_opcode_IB_WC_RECV,
        received as u32,
    );
    if has_imm(pkt.hdr.opcode) {
        cqe.ex = pkt.hdr.ex;
        cqe.wc_flags |= b::ib_wc_flags_IB_WC_WITH_IMM;
    } else if matches!(pkt.hdr.opcode, op::SEND_LAST_INV | op::SEND_ONLY_INV) {
        // The rkey must name a valid fast-registration MR or a bound type 2
        // window of this QP's PD
        // (class J error otherwise: the sender sees REM_INV_REQ_ERR).
        if !crate::mw::invalidate(qp.keys.get(), qp.mws.get(), pkt.hdr.ex, qp.pd) {
            rq.progress = None;
            return fatal(qp, rq, Nak::InvalidRequest);
        }
        cqe.ex = pkt.hdr.ex;
        cqe.wc_flags |= b::ib_wc_flags_IB_WC_WITH_INVALIDATE;
    }
    rq.progress = None;
    complete_recv(qp, rq, cqe, pkt.hdr.solicited);
    Reply::Ack
}

fn write_data(qp: &Arc<Qp>, rq: &mut RecvSide, pkt: &Packet, cache: &mut MrCache) -> Reply {
    let len = pkt.payload.len() as u64;
    let (placed, total) = match &mut rq.progress {
        Some(Progress::Write {
            rkey,
            va,
            total,
            received,
        }) => {
            let iova = va.wrapping_add(*received);
            let placed = if *received + len > *total {
                Err(Nak::InvalidRequest)
            } else if len > 0
                && !cached_remote(qp, cache, *rkey, iova, len, access::REMOTE_WRITE)
                    .is_some_and(|(m, at)| m.write(at, pkt.payload.src(), 0, len as usize))
            {
                Err(Nak::RemoteAccess)
            } else {
                *received += len;
                Ok(())
            };
            (placed, *total)
        }
        _ => return fatal(qp, rq, Nak::InvalidRequest),
    };
    if let Err(nak) = placed {
        return fatal(qp, rq, nak);
    }
    if !is_last(pkt.hdr.opcode) {
        return Reply::Ack;
    }
    rq.progress = None;
    if has_imm(pkt.hdr.opcode) {
        let Some(Ok((wr_id, _sgl))) = qp.take_recv(rq) else {
            return fatal(qp, rq, Nak::RemoteOperational);
        };
        let mut cqe = qp.cqe(
            wr_id,
            b::ib_wc_status_IB_WC_SUCCESS,
            b::ib_wc_opcode_IB_WC_RECV_RDMA_WITH_IMM,
            total as u32,
        );
        cqe.ex = pkt.hdr.ex;
        cqe.wc_flags |= b::ib_wc_flags_IB_WC_WITH_IMM;
        complete_recv(qp, rq, cqe, pkt.hdr.solicited);
    }
    Reply::Ack
}
