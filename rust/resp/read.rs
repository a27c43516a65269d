// SPDX-License-Identifier: GPL-2.0

//! The responder's READs: a READ request checked and set up, then answered
//! a budget's worth of response packets per run, before any later request
//! is taken; and the empty READ response that answers ATOMIC_WRITE and
//! FLUSH.

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
pub(super) fn serve_read(qp: &Arc<Qp>, rq: &mut RecvSide, budget: &mut u32, cache: &mut MrCache) {
    let mut train = Train::new();
    read_responses(qp, rq, budget, cache, &mut train);
    udp::send_train(qp, &mut train);
}

pub(super) fn read_responses(
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
