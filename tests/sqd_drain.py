#!/usr/bin/env python3
# SQD finishes the messages the QP started and starts no other.
#
# An RC QP of DEV (pyverbs; one READ outstanding at a time) posts two READs
# to a scripted responder (a UDP socket at port 4791 in the network
# namespace PEER_NS, hand-made packets, roce.py). The first goes out; the
# second waits for its answer (max_rd_atomic 1). The QP is moved to SQD,
# then the responder answers the first READ: it completes, and the second,
# never started, must not go out while the QP is in SQD (IBA 10.3.1.9; rxe's
# req_next_wqe). It did: oxe had taken it from the ring already and sent it
# once the first was answered. Back in RTS it goes out, and completes.
#
# Then a WRITE, unsignaled, between two READs: its packet leaves its ACK
# request to the READ behind it, which waits for the first one's answer. The
# QP is moved to SQD and the first READ answered: the READ behind the WRITE
# never starts in SQD, so the WRITE's last packet goes again, asking for its
# ACK. It did not: the drain waited for the retransmit timer, here forever
# (timeout 0); with a timer, none of its resends asked either (on the KASAN
# kernel) and the WRITE failed with RETRY_EXC_ERR.
#
# Usage (in the QP's namespace): sqd_drain.py DEV GID_INDEX LOCAL_IP PEER_IP PEER_NS
import sys
import time

import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, SendWR

import roce

dev, gid_index, local_ip, peer_ip, peer_ns = sys.argv[1], int(sys.argv[2]), *sys.argv[3:6]
PEER_QPN, LEN, READ, WRITE = 0x4247, 16, 0x0C, 0x0A

rx, tx = roce.peer_sockets(peer_ns, peer_ip)


def requests(seconds, until, peer=PEER_QPN):
    """(opcode, PSN) of the QP's packets until `until` holds or time is up."""
    heard = roce.heard(rx, peer, seconds, lambda g: until([h[:2] for h in g]))
    return [h[:2] for h in heard]


def asks(seconds, opcode, psn, peer):
    """Whether each packet (`opcode`, `psn`) heard within `seconds` asked
    for an ACK, until one did."""
    heard = roce.heard(rx, peer, seconds,
                       lambda g: any(h[:2] == (opcode, psn) and h[2][8] & 0x80 for h in g))
    return [bool(h[2][8] & 0x80) for h in heard if h[:2] == (opcode, psn)]


def completions(n, seconds):
    wcs, deadline = [], time.monotonic() + seconds
    while len(wcs) < n and time.monotonic() < deadline:
        k, got = cq.poll(1)
        wcs += got if k else []
        if not k:
            time.sleep(0.01)
    return [(w.wr_id, w.status) for w in wcs]


def answer(psn, fill, q=None):
    q = q or qp
    tx.sendto(roce.packet(peer_ip, local_ip, roce.bth(roce.READ_RESPONSE_ONLY, q.qp_num, psn)
                          + roce.aeth(roce.ACK) + fill * LEN), (local_ip, 0))


def ack(psn, q):
    tx.sendto(roce.packet(peer_ip, local_ip, roce.bth(roce.ACKNOWLEDGE, q.qp_num, psn)
                          + roce.aeth(roce.ACK)), (local_ip, 0))


def to(state, q=None):
    (q or qp).modify(QPAttr(qp_state=state), e.IBV_QP_STATE)


ctx = Context(name=dev)
pd = PD(ctx)
cq = CQ(ctx, 8)
mr = MR(pd, 2 * LEN, e.IBV_ACCESS_LOCAL_WRITE)
qp = roce.rc_qp(pd, cq, gid_index, peer_ip, PEER_QPN, timeout=20, send_wr=4)
for i in range(2):
    wr = SendWR(wr_id=i, opcode=e.IBV_WR_RDMA_READ, num_sge=1,
                sg=[SGE(mr.buf + i * LEN, LEN, mr.lkey)], send_flags=e.IBV_SEND_SIGNALED)
    wr.set_wr_rdma(0x1234, 0x10000 + i * LEN)
    qp.post_send(wr)

check = roce.Checks()


first = requests(5, lambda g: (READ, 0) in g)
early = requests(0.5, lambda g: False)
check((READ, 0) in first and (READ, 1) not in first + early,
      f"the first READ went out, the second waits for its answer: {first + early}")
to(e.IBV_QPS_SQD)
answer(0, b"a")
check(completions(1, 5) == [(0, 0)], "in SQD the first READ completes")
during = requests(1.5, lambda g: (READ, 1) in g)
check((READ, 1) not in during, f"in SQD the second, never started, stays: {during}")
to(e.IBV_QPS_RTS)
after = requests(5, lambda g: (READ, 1) in g)
check((READ, 1) in after, f"back in RTS it goes out: {after}")
answer(1, b"b")
check(completions(1, 5) == [(1, 0)], "and completes")
check(mr.read(2 * LEN, 0) == b"a" * LEN + b"b" * LEN, "each READ placed its bytes")

# A WRITE leaving its ACK request to a READ that SQD never starts.
# Not every WR signaled (pyverbs' default): an unsignaled WRITE's packet
# may leave its ACK request to the WQE behind it. The three in one post (a
# chain, every SendWR kept: the chain holds pointers to them), so that the
# READ is there when the WRITE goes out. No retransmit timer (timeout 0):
# only SQD's stop can ask for the WRITE's ACK.
PEER_QPN2 = 0x4248
qp2 = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, sq_sig_all=0,
                        cap=QPCap(max_send_wr=4, max_recv_wr=1)))
qp2.to_rts(roce.rc_attr(gid_index, peer_ip, PEER_QPN2, sq_psn=100, timeout=0))
wrs = []
for i, op in reversed(list(enumerate([e.IBV_WR_RDMA_READ, e.IBV_WR_RDMA_WRITE,
                                      e.IBV_WR_RDMA_READ]))):
    wr = SendWR(wr_id=10 + i, opcode=op, num_sge=1, sg=[SGE(mr.buf + i % 2 * LEN, LEN, mr.lkey)],
                send_flags=0 if op == e.IBV_WR_RDMA_WRITE else e.IBV_SEND_SIGNALED,
                next_wr=wrs[-1] if wrs else None)
    wr.set_wr_rdma(0x1234, 0x20000 + i * LEN)
    wrs.append(wr)
qp2.post_send(wrs[-1])
first = roce.heard(rx, PEER_QPN2, 5, lambda g: any(h[:2] == (WRITE, 101) for h in g))
first = [bool(h[2][8] & 0x80) for h in first if h[:2] == (WRITE, 101)]
check(first == [False], f"the WRITE went out, leaving its ACK request to the READ: {first}")
early = requests(0.5, lambda g: False, PEER_QPN2)
check((READ, 102) not in early, f"which waits for the first READ's answer: {early}")
to(e.IBV_QPS_SQD, qp2)
answer(100, b"c", qp2)
check(completions(1, 5) == [(10, 0)], "in SQD the first READ completes")
resends = asks(3, WRITE, 101, PEER_QPN2)
check(resends == [True], f"SQD sends the WRITE's last packet again, asking for its ACK: {resends}")
ack(101, qp2)
wcs = completions(1, 1)
check(wcs == [], f"the WRITE, acknowledged, completes nothing (unsignaled): {wcs}")
to(e.IBV_QPS_RTS, qp2)
after = requests(5, lambda g: (READ, 102) in g, PEER_QPN2)
check((READ, 102) in after, f"back in RTS the last READ goes out: {after}")
answer(102, b"d", qp2)
check(completions(1, 5) == [(12, 0)], "and completes")
ctx.close()
sys.exit(1 if check.fails else 0)
