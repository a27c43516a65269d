// SPDX-License-Identifier: GPL-2.0

//! The responder's READs: a READ request checked and set up, then answered
//! a budget's worth of response packets per run, before any later request
//! is taken, at the QP's pace on the wire (see `pace`); and the empty READ
//! response that answers ATOMIC_WRITE and FLUSH.

use kernel::sync::Arc;

use super::place::{cached_remote, remote};
use super::{ack, respond};
use crate::access;
use crate::ib::skb::Train;
use crate::net;
use crate::packet::{self, op, Hdr, Nak, Syndrome};
use crate::params::cost;
use crate::pkt::{Gather, Packet, Payload};
use crate::qp::flight::ReadServe;
use crate::qp::{Attrs, Qp, RecvSide};
use crate::sgl::MrCache;
use crate::udp;

/// The answer to ATOMIC_WRITE and FLUSH: a READ response with no data
/// (rxe's too).
pub(super) fn read_ack(qp: &Qp, attrs: &Attrs, psn: u32) {
    let mut h = Hdr::new(op::READ_RESPONSE_ONLY, psn, 0);
    h.aeth = Some(Syndrome::Ack);
    respond(qp, attrs, h, Payload::empty());
}

/// Checks a READ and sets it up to be answered from `psn` on.
pub(super) fn start_read(
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
/// Returns the nanoseconds to wait when the pace allows no more now.
pub(super) fn serve_read(
    qp: &Arc<Qp>,
    rq: &mut RecvSide,
    budget: &mut u32,
    cache: &mut MrCache,
) -> Option<u64> {
    let attrs = qp.attrs();
    if !attrs.handed_over() {
        skip_to_read_again(qp, rq);
    }
    let mut train = Train::new();
    let wait = read_responses(qp, rq, &attrs, budget, cache, &mut train);
    udp::send_train(qp, &mut train);
    wait
}

/// The requester went back: a READ asked for again (from a PSN before the
/// expected one) waits in the queue. The responses the requester lost its
/// place in are no use to it any more, and it sends again every request
/// after that READ: the READ being answered (if at or past that PSN) and the
/// new requests queued before the READ asked for again are dropped, as if
/// lost on the way, so that it is answered now instead of after them
/// (rdma_rxe, asking again from a gap in an 8 MiB READ's responses, got the
/// rest of it and every later 8 MiB READ first, all thrown away).
fn skip_to_read_again(qp: &Qp, rq: &mut RecvSide) {
    let epsn = rq.epsn;
    let again = {
        let inbox = qp.inbox.lock();
        let q = &inbox.requests;
        (0..q.len())
            .filter_map(|i| q.get(i))
            .find(|p| p.hdr.opcode == op::READ_REQUEST && packet::psn_diff(p.hdr.psn, epsn) < 0)
            .map(|p| p.hdr.psn)
    };
    let Some(psn) = again else {
        return;
    };
    if let Some(r) = &rq.read {
        if packet::psn_diff(packet::psn_add(r.psn, r.next), psn) < 0 {
            // Asked again for what is still to come: carry on.
            return;
        }
        if packet::psn_diff(psn, r.psn) >= 0 {
            rq.read_cut = Some(psn);
        }
    }
    rq.read = None;
    loop {
        let skipped = {
            let mut inbox = qp.inbox.lock();
            match inbox.requests.front() {
                Some(p) if packet::psn_diff(p.hdr.psn, epsn) >= 0 => inbox.requests.pop(),
                _ => None,
            }
        };
        let Some(p) = skipped else {
            break;
        };
        crate::ib::trace::drop_pkt(qp.qpn, p.hdr.psn, c"before a READ asked for again");
    }
}

/// The requester asked for a READ's responses again, `len` bytes from
/// `psn` on: on the wire, some were lost on the way (or its request was).
/// What the loss cost depends on the requester: oxe's asks again at once
/// from the gap, rdma_rxe's drops the rest of the READ's responses and asks
/// again only when a later READ's come or its timer fires. A READ with more
/// than `DEAR_READ` packets still to go from the gap, asked for again after
/// it was answered, cost that many: the responses slow down. One asked for
/// again while still being answered lost only what was on the way (oxe's
/// requester): it ends the pace. Short READs cost little either way, and
/// pacing them cost oxe<->oxe `ib_read_bw` (64 KiB) a fifth.
pub(super) fn read_again(qp: &Qp, rq: &mut RecvSide, attrs: &Attrs, psn: u32, len: u32) {
    if rq.read_cut.take() == Some(psn) {
        rq.pace.unpace();
        return;
    }
    let dear = packet::packets(u64::from(len), attrs.packet_mtu()) > DEAR_READ;
    if dear && !attrs.handed_over() && rq.pace.loss(crate::wq::now_ns(), psn, rq.epsn) {
        crate::ib::trace::paced(qp.qpn, psn, rq.pace.rate());
    }
}

/// Response packets still to go from a gap that make a READ's loss dear.
const DEAR_READ: u32 = 256;

fn read_responses(
    qp: &Arc<Qp>,
    rq: &mut RecvSide,
    attrs: &Attrs,
    budget: &mut u32,
    cache: &mut MrCache,
    train: &mut Train,
) -> Option<u64> {
    let wire = !attrs.handed_over();
    let RecvSide { read, pace, .. } = rq;
    let r = read.as_mut()?;
    while *budget > 0 && r.next < r.count {
        let off = u64::from(r.next) * u64::from(r.mtu);
        let n = (r.len - off.min(r.len)).min(u64::from(r.mtu)) as usize;
        if wire && !pace.take(crate::wq::now_ns(), n as u32) {
            return Some(pace.wait_ns());
        }
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
                return None;
            }
            Err(Gather::Access) => {
                // The MR went (or was invalidated) under the READ: the NAK
                // goes after the responses before it.
                *read = None;
                qp.set_error(rq);
                udp::send_train(qp, train);
                ack(qp, attrs, psn, Syndrome::Nak(Nak::RemoteAccess));
                return None;
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
        *read = None;
    }
    None
}
