// SPDX-License-Identifier: GPL-2.0

//! The responder: takes request packets in PSN order, checks every remote
//! access with the rkey against the target MR's PD, range and rights, places
//! SEND and WRITE payloads, answers READs and atomics, and ACKs or NAKs.
//! On an access or request error the QP goes to ERR and the target memory
//! stays untouched.

use kernel::prelude::*;
use kernel::sync::atomic::ordering;

use crate::access;
use crate::bindings as b;
use crate::cq::Cqe;
use crate::mr::{self, MrRef};
use crate::mtt::Request;
use crate::packet::{self, op, Nak};
use crate::qp::{Qp, RecvSide, STATE_RTR, STATE_RTS, STATE_SQD, STATE_SQE};
use crate::sgl::Sgl;
use crate::wqe;

/// RDMA extended transport header: the remote range of a WRITE or READ.
#[derive(Clone, Copy)]
pub(crate) struct Reth {
    pub(crate) va: u64,
    pub(crate) rkey: u32,
    pub(crate) len: u32,
}

/// Atomic extended transport header.
#[derive(Clone, Copy)]
pub(crate) struct AtomicEth {
    pub(crate) va: u64,
    pub(crate) rkey: u32,
    pub(crate) swap: u64,
    pub(crate) compare_add: u64,
}

pub(crate) struct Pkt<'a> {
    pub(crate) opcode: u8,
    pub(crate) psn: u32,
    pub(crate) solicited: bool,
    pub(crate) payload: &'a [u8],
    pub(crate) reth: Option<Reth>,
    pub(crate) atomic: Option<AtomicEth>,
    /// Immediate data or the rkey to invalidate.
    pub(crate) ex: u32,
}

pub(crate) enum Reply {
    Ack,
    AtomicAck(u64),
    Nak(Nak),
    /// Not accepted and not answered (QP not ready): the requester times out.
    Drop,
}

/// A multi-packet message in progress.
pub(crate) enum Progress {
    Send {
        wr_id: u64,
        sgl: Sgl,
        received: u64,
    },
    Write {
        mr: Option<MrRef>,
        va: u64,
        total: u64,
        received: u64,
    },
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

/// A class C/D error (IBA 9.9.3): NAK, and the responder's QP goes to ERR.
fn fatal(qp: &Qp, rq: &mut RecvSide, nak: Nak) -> Reply {
    qp.set_error(rq);
    Reply::Nak(nak)
}

/// Takes the next receive WQE for a SEND or a WRITE with immediate: its
/// SGEs checked for local write. `None`: the RQ is empty (RNR).
fn take_recv(qp: &Qp, rq: &mut RecvSide) -> Option<Result<(u64, Sgl), u32>> {
    if !rq.queue.peek_into(&mut rq.wqe) {
        return None;
    }
    let w = wqe::RecvWqe::parse(&rq.wqe)?;
    if w.num_sge > qp.max_recv_sge {
        return Some(Err(b::ib_wc_status_IB_WC_LOC_LEN_ERR));
    }
    Some(
        Sgl::build(
            qp.dev(),
            qp.pd,
            &rq.wqe,
            wqe::RECV_WQE_SGE_OFFSET,
            w.num_sge,
            access::LOCAL_WRITE,
        )
        .map(|sgl| (w.wr_id, sgl)),
    )
}

/// A successful receive: the RQ slot is consumed now, the CQE is posted by
/// `post_deferred` once the sender has completed its WQE. In loopback the
/// whole exchange runs in the sender's thread, and a peer woken by its
/// receive completion could otherwise answer, and post again, before the
/// sender's SQ slot is free.
fn defer_recv(rq: &mut RecvSide, cqe: Cqe, solicited: bool) {
    rq.queue.advance_consumer();
    rq.deferred = Some((cqe, solicited));
}

/// Posts the receive completion held back by `defer_recv`.
pub(crate) fn post_deferred(qp: &Qp) {
    let mut rq = qp.rq.lock();
    // The sender holds the QP, maybe past its destroy and its CQs' (see
    // `qp::teardown`).
    if qp.is_dead() {
        return;
    }
    if let Some((cqe, solicited)) = rq.deferred.take() {
        if qp.rcq().post(&cqe, solicited).is_err() {
            qp.set_error(&mut rq);
        }
    }
}

fn complete_recv(qp: &Qp, rq: &mut RecvSide, cqe: Cqe, solicited: bool) -> Result<(), Nak> {
    rq.queue.advance_consumer();
    qp.rcq()
        .post(&cqe, solicited)
        .map_err(|_| Nak::RemoteOperational)
}

/// Checks the remote access of a WRITE, READ or atomic: the QP must allow
/// it, and the rkey must name a live MR of this QP's PD that grants it over
/// the range.
fn remote(
    qp: &Qp,
    qp_access: u32,
    rkey: u32,
    va: u64,
    len: u64,
    right: u32,
) -> Result<Option<MrRef>, Nak> {
    if qp_access & right == 0 {
        return Err(Nak::RemoteAccess);
    }
    if len == 0 {
        return Ok(None);
    }
    let m = mr::lookup(qp.dev(), rkey).ok_or(Nak::RemoteAccess)?;
    let req = Request {
        key: rkey,
        pd: qp.pd,
        iova: va,
        len,
        rights: right,
    };
    m.check(&req).map_err(|_| Nak::RemoteAccess)?;
    Ok(Some(m))
}

/// Receives one request packet. `sink` takes READ response packets.
pub(crate) fn receive(qp: &Qp, pkt: &Pkt<'_>, sink: &mut dyn FnMut(&Pkt<'_>) -> bool) -> Reply {
    // Checked under the RQ lock: `Qp::set_error` flushes under it, and no
    // packet may start a message on an ERR QP after the flush.
    let mut guard = qp.rq.lock();
    let rq = &mut *guard;
    let attrs = qp.attrs();
    if !matches!(attrs.state, STATE_RTR | STATE_RTS | STATE_SQD | STATE_SQE) || qp.is_dead() {
        return Reply::Drop;
    }
    if packet::psn_diff(pkt.psn, rq.epsn) != 0 {
        return Reply::Nak(Nak::Sequence);
    }
    let o = pkt.opcode;
    let reply = match o {
        op::SEND_FIRST | op::SEND_ONLY | op::SEND_ONLY_IMM | op::SEND_ONLY_INV => {
            if rq.progress.is_some() {
                return fatal(qp, rq, Nak::InvalidRequest);
            }
            match take_recv(qp, rq) {
                None => return Reply::Nak(Nak::Rnr),
                Some(Err(status)) => {
                    let cqe = qp.cqe(0, status, b::ib_wc_opcode_IB_WC_RECV, 0);
                    let _ = complete_recv(qp, rq, cqe, false);
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
            send_data(qp, rq, pkt)
        }
        op::SEND_MIDDLE | op::SEND_LAST | op::SEND_LAST_IMM | op::SEND_LAST_INV => {
            if !matches!(rq.progress, Some(Progress::Send { .. })) {
                return fatal(qp, rq, Nak::InvalidRequest);
            }
            send_data(qp, rq, pkt)
        }
        op::WRITE_FIRST | op::WRITE_ONLY | op::WRITE_ONLY_IMM => {
            let Some(reth) = pkt.reth else {
                return fatal(qp, rq, Nak::InvalidRequest);
            };
            if rq.progress.is_some() {
                return fatal(qp, rq, Nak::InvalidRequest);
            }
            // A WRITE with immediate consumes a receive: fail early (RNR)
            // before any byte lands.
            if o == op::WRITE_ONLY_IMM && rq.queue.is_empty() {
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
                Ok(mr) => {
                    rq.progress = Some(Progress::Write {
                        mr,
                        va: reth.va,
                        total: len,
                        received: 0,
                    })
                }
            }
            write_data(qp, rq, pkt)
        }
        op::WRITE_MIDDLE | op::WRITE_LAST | op::WRITE_LAST_IMM => {
            if !matches!(rq.progress, Some(Progress::Write { .. })) {
                return fatal(qp, rq, Nak::InvalidRequest);
            }
            if o == op::WRITE_LAST_IMM && rq.queue.is_empty() {
                return Reply::Nak(Nak::Rnr);
            }
            write_data(qp, rq, pkt)
        }
        op::READ_REQUEST => {
            let Some(reth) = pkt.reth else {
                return fatal(qp, rq, Nak::InvalidRequest);
            };
            if rq.progress.is_some() {
                return fatal(qp, rq, Nak::InvalidRequest);
            }
            let len = u64::from(reth.len);
            let mr = match remote(
                qp,
                attrs.access,
                reth.rkey,
                reth.va,
                len,
                access::REMOTE_READ,
            ) {
                Err(nak) => return fatal(qp, rq, nak),
                Ok(mr) => mr,
            };
            let count = packet::packets(len, attrs.path_mtu);
            let mtu = u64::from(attrs.path_mtu);
            for i in 0..count {
                let off = u64::from(i) * mtu;
                let n = (len - off.min(len)).min(mtu) as usize;
                let read_ok = match (rq.payload.get_mut(..n), &mr) {
                    (Some(buf), Some(m)) => m.read(reth.va + off, buf),
                    (Some(_), None) => true,
                    (None, _) => false,
                };
                if !read_ok {
                    return fatal(qp, rq, Nak::RemoteAccess);
                }
                let resp = Pkt {
                    opcode: packet::read_response_opcode(i, count),
                    psn: packet::psn_add(pkt.psn, i),
                    solicited: false,
                    payload: rq.payload.get(..n).unwrap_or(&[]),
                    reth: None,
                    atomic: None,
                    ex: 0,
                };
                if !sink(&resp) {
                    return Reply::Drop;
                }
            }
            rq.epsn = packet::psn_add(rq.epsn, count);
            return Reply::Ack;
        }
        op::COMPARE_SWAP | op::FETCH_ADD => {
            let Some(a) = pkt.atomic else {
                return fatal(qp, rq, Nak::InvalidRequest);
            };
            if a.va % 8 != 0 {
                return fatal(qp, rq, Nak::InvalidRequest);
            }
            let mr = match remote(qp, attrs.access, a.rkey, a.va, 8, access::REMOTE_ATOMIC) {
                Err(nak) => return fatal(qp, rq, nak),
                Ok(Some(mr)) => mr,
                Ok(None) => return fatal(qp, rq, Nak::InvalidRequest),
            };
            let orig = mr.atomic(a.va, |x| {
                if o == op::COMPARE_SWAP {
                    match x.cmpxchg(a.compare_add, a.swap, ordering::Full) {
                        Ok(v) | Err(v) => v,
                    }
                } else {
                    x.fetch_add(a.compare_add, ordering::Full)
                }
            });
            let Some(orig) = orig else {
                return fatal(qp, rq, Nak::InvalidRequest);
            };
            rq.epsn = packet::psn_add(rq.epsn, 1);
            return Reply::AtomicAck(orig);
        }
        _ => return fatal(qp, rq, Nak::InvalidRequest),
    };
    if matches!(reply, Reply::Ack) {
        rq.epsn = packet::psn_add(rq.epsn, 1);
    }
    reply
}

fn send_data(qp: &Qp, rq: &mut RecvSide, pkt: &Pkt<'_>) -> Reply {
    let len = pkt.payload.len() as u64;
    let (wr_id, fits, received) = match &mut rq.progress {
        Some(Progress::Send {
            wr_id,
            sgl,
            received,
        }) => {
            let fits = *received + len <= sgl.total && sgl.scatter(*received, pkt.payload);
            if fits {
                *received += len;
            }
            (*wr_id, fits, *received)
        }
        _ => return fatal(qp, rq, Nak::InvalidRequest),
    };
    if !fits {
        // The message does not fit the posted buffers.
        let cqe = qp.cqe(
            wr_id,
            b::ib_wc_status_IB_WC_LOC_LEN_ERR,
            b::ib_wc_opcode_IB_WC_RECV,
            0,
        );
        let _ = complete_recv(qp, rq, cqe, false);
        return fatal(qp, rq, Nak::InvalidRequest);
    }
    if !is_last(pkt.opcode) {
        return Reply::Ack;
    }
    let mut cqe = qp.cqe(
        wr_id,
        b::ib_wc_status_IB_WC_SUCCESS,
        b::ib_wc_opcode_IB_WC_RECV,
        received as u32,
    );
    if has_imm(pkt.opcode) {
        cqe.ex = pkt.ex;
        cqe.wc_flags |= b::ib_wc_flags_IB_WC_WITH_IMM;
    } else if matches!(pkt.opcode, op::SEND_LAST_INV | op::SEND_ONLY_INV) {
        // The rkey must name a valid fast-registration MR of this QP's PD
        // (class J error otherwise: the sender sees REM_INV_REQ_ERR).
        if !mr::invalidate(qp.dev(), pkt.ex, qp.pd) {
            rq.progress = None;
            return fatal(qp, rq, Nak::InvalidRequest);
        }
        cqe.ex = pkt.ex;
        cqe.wc_flags |= b::ib_wc_flags_IB_WC_WITH_INVALIDATE;
    }
    rq.progress = None;
    defer_recv(rq, cqe, pkt.solicited);
    Reply::Ack
}

fn write_data(qp: &Qp, rq: &mut RecvSide, pkt: &Pkt<'_>) -> Reply {
    let len = pkt.payload.len() as u64;
    let (placed, total) = match &mut rq.progress {
        Some(Progress::Write {
            mr,
            va,
            total,
            received,
        }) => {
            let placed = if *received + len > *total {
                Err(Nak::InvalidRequest)
            } else if len > 0
                && !mr
                    .as_ref()
                    .is_some_and(|m| m.write(*va + *received, pkt.payload))
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
    if !is_last(pkt.opcode) {
        return Reply::Ack;
    }
    rq.progress = None;
    if has_imm(pkt.opcode) {
        let Some(Ok((wr_id, _sgl))) = take_recv(qp, rq) else {
            return fatal(qp, rq, Nak::RemoteOperational);
        };
        let mut cqe = qp.cqe(
            wr_id,
            b::ib_wc_status_IB_WC_SUCCESS,
            b::ib_wc_opcode_IB_WC_RECV_RDMA_WITH_IMM,
            total as u32,
        );
        cqe.ex = pkt.ex;
        cqe.wc_flags |= b::ib_wc_flags_IB_WC_WITH_IMM;
        defer_recv(rq, cqe, pkt.solicited);
    }
    Reply::Ack
}
